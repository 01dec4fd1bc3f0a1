package relay

import (
	"bytes"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the relay (Config.Metrics). Like the directory's, their
// labels are fixed words: never a channel name, an account or an address,
// so a scrape says how busy the relay is, not who uses it. The archive's
// commit latency and sweeps are the SQLite archive's; on JetStream,
// nats-server's own metrics tell its side.

// publishResults are the answers a publish can get, the label values of
// skytale_relay_publishes_total; any other code counts as "error".
var publishResults = []string{"ok", "stale_epoch", "epoch_out_of_range", "quota_exceeded", "not_a_member", "internal"}

// relayCounters are counted on the hot paths with atomics and read at
// scrape time.
type relayCounters struct {
	revocations atomic.Uint64   // subjects added to the revoked set by the feed
	refused     atomic.Uint64   // connections refused for the per-account cap
	published   []atomic.Uint64 // by publishResults index, then "error"
	// quotaRefused counts the quota_exceeded refusals by the budget's
	// scope (budgetScopes index).
	quotaRefused [4]atomic.Uint64
	sweeps       atomic.Uint64 // runs of the SQLite archive's TTL sweep
	slow         atomic.Uint64 // connections dropped as slow consumers
	// Connection admission (admission.go): sockets refused before the
	// upgrade, by the share they were over (refusalShares), and sockets
	// closed to seat others or for want of a pong.
	admRefused   []atomic.Uint64
	evictedLogin atomic.Uint64
	evictedIdle  atomic.Uint64
	pingTimeouts atomic.Uint64
	// readErrors counts the page reads the archive failed (unavailable
	// or broken).
	readErrors atomic.Uint64
	// publishedBytes counts the decoded payload bytes of publishes handed
	// to the archive.
	publishedBytes atomic.Uint64
	// largeHeld is the large-frame budget held (Config.LargeFrameBudget),
	// largeRefused the large frames discarded for want of it.
	// largeWaiting the sockets waiting for it.
	largeHeld    atomic.Int64
	largeWaiting atomic.Int64
	largeRefused atomic.Uint64
	// commits is the time of the SQLite archive's group commits (the
	// write and its fsync).
	commits prometheus.Histogram
}

func newRelayCounters() *relayCounters {
	return &relayCounters{
		published:  make([]atomic.Uint64, len(publishResults)+1),
		admRefused: make([]atomic.Uint64, len(refusalShares)),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "skytale_relay_archive_commit_seconds", Help: "Time of the SQLite archive's group commits, the fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
		}),
	}
}

// refusalShares are the shares a socket can be refused for, the label
// values of skytale_relay_admission_refusals_total.
var refusalShares = []string{"address_login", "network_login", "address", "network"}

// admissionRefused counts a socket refused for share.
func (rc *relayCounters) admissionRefused(share string) {
	if i := slices.Index(refusalShares, share); i >= 0 {
		rc.admRefused[i].Add(1)
	}
}

// observeCommit records a group commit of the SQLite archive.
func (rc *relayCounters) observeCommit(d time.Duration) {
	if rc != nil {
		rc.commits.Observe(d.Seconds())
	}
}

// sweep counts a run of the SQLite archive's TTL sweep.
func (rc *relayCounters) sweep() {
	if rc != nil {
		rc.sweeps.Add(1)
	}
}

// publishAnswered counts the answer f to a publish.
func (rc *relayCounters) publishAnswered(f []byte) {
	i := len(publishResults) // "error"
	if bytes.HasPrefix(f, []byte(`{"type":"ok"`)) {
		i = 0
	} else if _, rest, ok := bytes.Cut(f, []byte(`"code":"`)); ok {
		code, rest, _ := bytes.Cut(rest, []byte(`"`))
		for j, r := range publishResults {
			if string(code) == r {
				i = j
			}
		}
		if string(code) == "quota_exceeded" {
			if _, rest, ok := bytes.Cut(rest, []byte(`"scope":"`)); ok {
				scope, _, _ := bytes.Cut(rest, []byte(`"`))
				if k := slices.Index(budgetScopes, string(scope)); k >= 0 {
					rc.quotaRefused[k].Add(1)
				}
			}
		}
	}
	rc.published[i].Add(1)
}

// registerMetrics registers the relay's collectors on reg. They read the
// server srv holds once New has made it; before that they read zeros.
func registerMetrics(reg prometheus.Registerer, srv *atomic.Pointer[Server], rc *relayCounters) error {
	var zero Server
	get := func() *Server {
		if s := srv.Load(); s != nil {
			return s
		}
		return &zero
	}
	gauge := func(name, help string, f func(*hub) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			h := get().hub
			if h == nil {
				return 0
			}
			h.mu.RLock()
			defer h.mu.RUnlock()
			return f(h)
		})
	}
	admGauge := func(name, help string, f func(*admission) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			a := get().adm
			if a == nil {
				return 0
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			return f(a)
		})
	}
	counter := func(name, help string, v func(*Server) *atomic.Uint64, labels prometheus.Labels) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 {
			s := get()
			if s.hub == nil {
				return 0
			}
			return float64(v(s).Load())
		})
	}
	cs := []prometheus.Collector{
		gauge("skytale_relay_connections", "Open WebSocket connections, authenticated or not.", func(h *hub) float64 { return float64(len(h.conns)) }),
		gauge("skytale_relay_subscriptions", "Live subscriptions, over all connections and channels.", func(h *hub) float64 {
			n := 0
			for _, subs := range h.chans {
				n += len(subs)
			}
			return float64(n)
		}),
		gauge("skytale_relay_channels_live", "Channels with at least one live subscriber.", func(h *hub) float64 { return float64(len(h.chans)) }),
		counter("skytale_relay_deliveries_total", "Frames queued for subscribers by fan-out.", func(s *Server) *atomic.Uint64 { return &s.hub.delivered }, nil),
		counter("skytale_relay_delivered_bytes_total", "Bytes of the frames queued for subscribers by fan-out, once per subscriber (the subscribers of a message share one copy of its frame).", func(s *Server) *atomic.Uint64 { return &s.hub.deliveredBytes }, nil),
		counter("skytale_relay_published_bytes_total", "Decoded payload bytes of the publishes handed to the archive, accepted or not.", func(s *Server) *atomic.Uint64 { return &s.counters.publishedBytes }, nil),
		counter("skytale_relay_large_frames_refused_total", "Handshake frames over 1 MiB discarded because the large-frame budget stayed full for LargeFrameWait (the publisher got busy).", func(s *Server) *atomic.Uint64 { return &s.counters.largeRefused }, nil),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_large_frame_bytes", Help: "Bytes of the large-frame budget held by handshake frames over 1 MiB being read and decoded (each holds the most such a frame may need)."}, func() float64 {
			s := get()
			if s.counters == nil {
				return 0
			}
			return float64(s.counters.largeHeld.Load())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_large_frames_waiting", Help: "Sockets waiting for the large-frame budget to read a handshake frame over 1 MiB."}, func() float64 {
			s := get()
			if s.counters == nil {
				return 0
			}
			return float64(s.counters.largeWaiting.Load())
		}),
		counter("skytale_relay_revocations_total", "Revoked subjects learned from the revocation feed.", func(s *Server) *atomic.Uint64 { return &s.counters.revocations }, nil),
		counter("skytale_relay_connections_refused_total", "Connections closed for the per-account connection cap.", func(s *Server) *atomic.Uint64 { return &s.counters.refused }, nil),
		admGauge("skytale_relay_connections_login", "WebSockets in their login (upgraded, not yet authenticated): the login reserve in use.", func(a *admission) float64 { return float64(a.login.Len()) }),
		admGauge("skytale_relay_connections_authenticated", "Authenticated WebSockets, as admission counts them.", func(a *admission) float64 { return float64(len(a.authed)) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "skytale_relay_admissions_total", Help: "WebSockets admitted to their login."}, func() float64 {
			a := get().adm
			if a == nil {
				return 0
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			return float64(a.accepted)
		}),
		counter("skytale_relay_evictions_total", "WebSockets closed with 1013 to seat others: in their login, the one silent longest when the login reserve was full; authenticated, the one idle longest when the authenticated share was full.", func(s *Server) *atomic.Uint64 { return &s.counters.evictedLogin }, prometheus.Labels{"reason": "login"}),
		counter("skytale_relay_evictions_total", "WebSockets closed with 1013 to seat others: in their login, the one silent longest when the login reserve was full; authenticated, the one idle longest when the authenticated share was full.", func(s *Server) *atomic.Uint64 { return &s.counters.evictedIdle }, prometheus.Labels{"reason": "idle"}),
		counter("skytale_relay_ping_timeouts_total", "Authenticated WebSockets closed because no pong came within PingTimeout.", func(s *Server) *atomic.Uint64 { return &s.counters.pingTimeouts }, nil),
		counter("skytale_relay_slow_consumers_total", "Connections dropped because their send queue was full (their deliveries lost with them).", func(s *Server) *atomic.Uint64 { return &s.counters.slow }, nil),
		counter("skytale_relay_archive_sweeps_total", "Runs of the SQLite archive's TTL sweep.", func(s *Server) *atomic.Uint64 { return &s.counters.sweeps }, nil),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_stored_bytes", Help: "Payload bytes the archive holds, over all accounts."}, func() float64 {
			s := get()
			if s.arch == nil {
				return 0
			}
			return float64(s.arch.storedBytes())
		}),
		rc.commits,
	}
	budget := func(f func(budgetUse, limits) float64) func() float64 {
		return func() float64 {
			s := get()
			if s.arch == nil {
				return 0
			}
			return f(s.arch.budgetUse())
		}
	}
	for i, scope := range budgetScopes {
		cs = append(cs,
			counter("skytale_relay_quota_refusals_total", "Publishes refused with quota_exceeded, by the budget they would have passed.",
				func(s *Server) *atomic.Uint64 { return &s.counters.quotaRefused[i] }, prometheus.Labels{"scope": scope}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_budget_bytes", Help: "The size of each archive budget: per account, per signup group, per org, and the server's.",
				ConstLabels: prometheus.Labels{"scope": scope}}, budget(func(_ budgetUse, l limits) float64 {
				return float64([]int64{l.account, l.group, l.org, l.server}[i])
			})))
		if scope == scopeServer {
			cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_budget_used_bytes", Help: "Payload bytes stored or being stored against the server's budget.",
				ConstLabels: prometheus.Labels{"scope": scope}}, budget(func(u budgetUse, _ limits) float64 { return float64(u.total) })))
			continue
		}
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_budget_largest_bytes", Help: "Payload bytes of the largest user of a budget scope (account, group, org): how close the busiest comes to its budget, never who it is.",
				ConstLabels: prometheus.Labels{"scope": scope}}, budget(func(u budgetUse, _ limits) float64 { return float64(u.largest[i]) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_budget_users", Help: "Accounts, signup groups or orgs with payload bytes stored (accounts that are their own group or org are counted only as accounts).",
				ConstLabels: prometheus.Labels{"scope": scope}}, budget(func(u budgetUse, _ limits) float64 { return float64(u.users[i]) })))
	}
	for i, r := range refusalShares {
		cs = append(cs, counter("skytale_relay_admission_refusals_total", "WebSocket upgrades refused (429) because the client address or its network (IPv4 /24, IPv6 /64) held its share: of sockets in their login, or of all sockets.",
			func(s *Server) *atomic.Uint64 { return &s.counters.admRefused[i] }, prometheus.Labels{"share": r}))
	}
	for i, r := range append(slices.Clone(publishResults), "error") {
		cs = append(cs, counter("skytale_relay_publishes_total", "Publishes answered, by result.",
			func(s *Server) *atomic.Uint64 { return &s.counters.published[i] }, prometheus.Labels{"result": r}))
	}
	cs = append(cs, backendCollectors(get)...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// backendCollectors are the metrics of the relay's backends: whether the
// archive's is reachable, the page reads and publishes it failed, and how
// far behind the directory's feeds the relay is.
func backendCollectors(get func() *Server) []prometheus.Collector {
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_backend_up", Help: "1 while the archive's backend is reachable (on JetStream, the NATS connection is up; on SQLite, no write has failed), else 0."}, func() float64 {
			s := get()
			if s.arch == nil || !s.arch.up() {
				return 0
			}
			return 1
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "skytale_relay_backend_errors_total", Help: "Archive operations that failed in the backend, by operation (the publishes are those answered internal).", ConstLabels: prometheus.Labels{"op": "read"}}, func() float64 {
			s := get()
			if s.counters == nil {
				return 0
			}
			return float64(s.counters.readErrors.Load())
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "skytale_relay_backend_errors_total", Help: "Archive operations that failed in the backend, by operation (the publishes are those answered internal).", ConstLabels: prometheus.Labels{"op": "publish"}}, func() float64 {
			s := get()
			if s.counters == nil {
				return 0
			}
			return float64(s.counters.published[slices.Index(publishResults, "internal")].Load())
		}),
	}
	for _, feed := range []string{"revocations", "members"} {
		health := func(s *Server) *feedHealth {
			for _, h := range s.feeds() {
				if h.name == feed {
					return h
				}
			}
			return nil
		}
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skytale_relay_feed_lag_seconds", Help: "Seconds since the directory's feed was last read to its end (since the relay started, if never); 0 for a feed the relay does not follow.", ConstLabels: prometheus.Labels{"feed": feed}}, func() float64 {
				s := get()
				if s.rev == nil {
					return 0
				}
				if h := health(s); h != nil {
					return h.lag(time.Now(), s.start).Seconds()
				}
				return 0
			}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "skytale_relay_feed_errors_total", Help: "Polls of the directory's feed that failed (the directory unreachable or refusing, or the relay's own store failing).", ConstLabels: prometheus.Labels{"feed": feed}}, func() float64 {
				s := get()
				if s.rev == nil {
					return 0
				}
				if h := health(s); h != nil {
					return float64(h.fails.Load())
				}
				return 0
			}))
	}
	return cs
}
