package relay

import (
	"bytes"
	"slices"
	"sync/atomic"
	"time"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// Metrics receives what a relay counts (Config.Metrics). Package
// relay/relaymetrics exports it to Prometheus as skytale_relay_*; it is
// the only part of the relay that links the Prometheus client. Like the
// directory's, the metrics are counts of fixed kinds, never of a channel,
// an account or an address, so a scrape says how busy the relay is, not
// who uses it. The archive's commit latency and sweeps are the SQLite
// archive's; on JetStream, nats-server's own metrics tell its side.
type Metrics interface {
	// Watch is called once, by New, with the server whose Stats the
	// metrics read when they are collected. An error fails New: a Metrics
	// serves one relay.
	Watch(s *Server) error
	// ArchiveCommit records one group commit of the SQLite archive: its
	// write and its fsync, which took d.
	ArchiveCommit(d time.Duration)
}

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
	// m receives the SQLite archive's group commits; nil for none.
	m Metrics
}

func newRelayCounters(m Metrics) *relayCounters {
	return &relayCounters{
		published:  make([]atomic.Uint64, len(publishResults)+1),
		admRefused: make([]atomic.Uint64, len(refusalShares)),
		m:          m,
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

// ObserveCommit records a group commit of the SQLite archive
// (backend.Metrics).
func (rc *relayCounters) ObserveCommit(d time.Duration) {
	if rc != nil && rc.m != nil {
		rc.m.ArchiveCommit(d)
	}
}

// Swept counts a run of the SQLite archive's TTL sweep (backend.Metrics).
func (rc *relayCounters) Swept() {
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
				if k := slices.Index(backend.Scopes, string(scope)); k >= 0 {
					rc.quotaRefused[k].Add(1)
				}
			}
		}
	}
	rc.published[i].Add(1)
}

// Stats is what a relay has counted, read at one time by [Server.Stats]
// for its metrics. The fields that end in Total only grow while the relay
// runs; the others are gauges. No field names a channel, an account or an
// address: the labels of the lists are fixed words.
type Stats struct {
	// Connections are the open WebSockets, authenticated or not;
	// Subscriptions the live subscriptions over all of them; ChannelsLive
	// the channels with at least one live subscriber.
	Connections, Subscriptions, ChannelsLive int
	// DeliveriesTotal are the frames queued for subscribers by fan-out,
	// DeliveredBytesTotal their bytes once per subscriber (the
	// subscribers of a message share one copy of its frame).
	DeliveriesTotal, DeliveredBytesTotal uint64
	// PublishedBytesTotal are the decoded payload bytes of the publishes
	// handed to the archive, accepted or not.
	PublishedBytesTotal uint64
	// Publishes are the publishes answered, by result: ok, stale_epoch,
	// epoch_out_of_range, quota_exceeded, not_a_member, internal, error.
	Publishes []Count
	// LargeFrameBytes is the large-frame budget held by handshake frames
	// over 1 MiB being read (each holds the most such a frame may need),
	// LargeFramesWaiting the sockets waiting for it, and
	// LargeFramesRefusedTotal the frames discarded when it stayed full
	// for Config.LargeFrameWait.
	LargeFrameBytes, LargeFramesWaiting int64
	LargeFramesRefusedTotal             uint64
	// RevocationsTotal are the subjects learned from the revocation feed;
	// ConnectionsRefusedTotal the connections closed for the per-account
	// cap.
	RevocationsTotal, ConnectionsRefusedTotal uint64
	// ConnectionsLogin are the sockets in their login (the login reserve
	// in use), ConnectionsAuthenticated the authenticated ones, as
	// admission counts them; AdmissionsTotal the sockets admitted to their
	// login.
	ConnectionsLogin, ConnectionsAuthenticated int
	AdmissionsTotal                            uint64
	// AdmissionRefusals are the upgrades refused (429) by the share the
	// client address or its network held: address_login, network_login,
	// address, network.
	AdmissionRefusals []Count
	// Evictions are the sockets closed with 1013 to seat others, by
	// reason: login (the one silent longest, the login reserve full) and
	// idle (the one idle longest, the authenticated share full).
	Evictions []Count
	// PingTimeoutsTotal are the sockets closed for want of a pong;
	// SlowConsumersTotal those dropped because their send queue was full.
	PingTimeoutsTotal, SlowConsumersTotal uint64
	// ArchiveSweepsTotal are the runs of the SQLite archive's TTL sweep.
	ArchiveSweepsTotal uint64
	// StoredBytes are the payload bytes the archive holds.
	StoredBytes int64
	// Budgets are the archive's budgets, by scope: account, group, org,
	// server.
	Budgets []BudgetStats
	// BackendUp is whether the archive's backend is reachable (on
	// JetStream, the NATS connection is up; on SQLite, no write has
	// failed). ReadErrorsTotal are the page reads it failed; the
	// publishes it failed are Publishes' internal.
	BackendUp       bool
	ReadErrorsTotal uint64
	// Feeds are the directory's feeds the relay can follow: revocations
	// and members.
	Feeds []FeedStats
}

// A Count is a counter of one kind, named by Label.
type Count struct {
	Label string
	N     uint64
}

// BudgetStats are one scope's archive budget.
type BudgetStats struct {
	// Scope is account, group, org or server.
	Scope string
	// Size is the budget of each user of the scope (of the whole server
	// for server); 0 for none.
	Size int64
	// Used is, for the server scope, the payload bytes stored or being
	// stored against its budget. Largest is, for the others, the bytes of
	// the scope's largest user (how close the busiest comes to its
	// budget, never who it is), and Users the users with bytes stored
	// (accounts that are their own group or org count only as accounts).
	Used, Largest int64
	Users         int
	// QuotaRefusalsTotal are the publishes refused with quota_exceeded
	// because they would have passed this budget.
	QuotaRefusalsTotal uint64
}

// FeedStats are one of the directory's feeds as the relay follows it.
type FeedStats struct {
	// Name is revocations or members.
	Name string
	// Lag is how long ago the feed was last read to its end (since the
	// relay started, if never); 0 for a feed the relay does not follow.
	Lag time.Duration
	// ErrorsTotal are the polls of the feed that failed.
	ErrorsTotal uint64
}

// Stats returns what the relay has counted. Safe for concurrent use; it
// takes the hub's and the admission's locks briefly, and asks the
// archive for its use, as a scrape does.
func (s *Server) Stats() Stats {
	rc := s.counters
	st := Stats{
		DeliveriesTotal:         s.hub.delivered.Load(),
		DeliveredBytesTotal:     s.hub.deliveredBytes.Load(),
		PublishedBytesTotal:     rc.publishedBytes.Load(),
		LargeFrameBytes:         rc.largeHeld.Load(),
		LargeFramesWaiting:      rc.largeWaiting.Load(),
		LargeFramesRefusedTotal: rc.largeRefused.Load(),
		RevocationsTotal:        rc.revocations.Load(),
		ConnectionsRefusedTotal: rc.refused.Load(),
		Evictions:               []Count{{"login", rc.evictedLogin.Load()}, {"idle", rc.evictedIdle.Load()}},
		PingTimeoutsTotal:       rc.pingTimeouts.Load(),
		SlowConsumersTotal:      rc.slow.Load(),
		ArchiveSweepsTotal:      rc.sweeps.Load(),
		StoredBytes:             s.arch.StoredBytes(),
		BackendUp:               s.arch.Up(),
		ReadErrorsTotal:         rc.readErrors.Load(),
	}
	s.hub.mu.RLock()
	st.Connections, st.ChannelsLive = len(s.hub.conns), len(s.hub.chans)
	for _, subs := range s.hub.chans {
		st.Subscriptions += len(subs)
	}
	s.hub.mu.RUnlock()
	s.adm.mu.Lock()
	st.ConnectionsLogin, st.ConnectionsAuthenticated, st.AdmissionsTotal = s.adm.login.Len(), len(s.adm.authed), s.adm.accepted
	s.adm.mu.Unlock()
	for i, share := range refusalShares {
		st.AdmissionRefusals = append(st.AdmissionRefusals, Count{share, rc.admRefused[i].Load()})
	}
	for i, r := range append(slices.Clone(publishResults), "error") {
		st.Publishes = append(st.Publishes, Count{r, rc.published[i].Load()})
	}
	u, l := s.arch.BudgetUse()
	for i, scope := range backend.Scopes {
		b := BudgetStats{Scope: scope, Size: []int64{l.Account, l.Group, l.Org, l.Server}[i], QuotaRefusalsTotal: rc.quotaRefused[i].Load()}
		if scope == backend.ScopeServer {
			b.Used = u.Total
		} else {
			b.Largest, b.Users = u.Largest[i], u.Users[i]
		}
		st.Budgets = append(st.Budgets, b)
	}
	now := time.Now()
	for _, name := range []string{"revocations", "members"} {
		f := FeedStats{Name: name}
		for _, h := range s.feeds() {
			if h.name == name {
				f.Lag, f.ErrorsTotal = h.lag(now, s.start), h.fails.Load()
			}
		}
		st.Feeds = append(st.Feeds, f)
	}
	return st
}
