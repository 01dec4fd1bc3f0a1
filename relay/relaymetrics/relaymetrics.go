// Package relaymetrics exports a relay's metrics to Prometheus: the
// skytale_relay_* counters, gauges and histogram of what
// relay.Config.Metrics receives. It is the only part of the relay that
// links the Prometheus client, so a program that embeds a relay without
// it links none.
//
//	reg := prometheus.NewRegistry()
//	r, err := relay.New(ctx, relay.Config{…, Metrics: relaymetrics.New(reg)})
//
// No label is a channel name, an account id or an address: the labels are
// publish results, admission shares, eviction reasons, budget scopes,
// backend operations and feed names (see relay.Stats).
package relaymetrics

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/relay"
)

// Metrics records one relay's metrics on a Prometheus registerer. It
// implements relay.Metrics.
type Metrics struct {
	reg     prometheus.Registerer
	commits prometheus.Histogram

	mu      sync.Mutex
	watched bool
}

// New returns the metrics of one relay, to be registered on reg (which
// must not be nil) when the relay starts: set it as relay.Config.Metrics.
// A second relay's metrics on the same registerer fail its start, rather
// than mix with the first's.
func New(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		reg: reg,
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "skytale_relay_archive_commit_seconds", Help: "Time of the SQLite archive's group commits, the fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
		}),
	}
}

// Watch registers the metrics on the registerer: the commit histogram,
// and a collector that reads s.Stats once per scrape. relay.New calls it;
// a second call is an error, and so is a registerer that holds another
// relay's metrics (nothing of m stays registered then).
func (m *Metrics) Watch(s *relay.Server) error {
	if m == nil || m.reg == nil {
		return errors.New("relaymetrics: no registerer (use relaymetrics.New)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watched {
		return errors.New("relaymetrics: these metrics already serve a relay")
	}
	if err := m.reg.Register(m.commits); err != nil {
		return err
	}
	if err := m.reg.Register(statsCollector{s}); err != nil {
		m.reg.Unregister(m.commits)
		return err
	}
	m.watched = true
	return nil
}

// ArchiveCommit implements relay.Metrics.
func (m *Metrics) ArchiveCommit(d time.Duration) { m.commits.Observe(d.Seconds()) }

// A metric is one skytale_relay_* family read from relay.Stats: its
// description and the samples it takes from one snapshot.
type metric struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	// values returns the family's samples: each value with the family's
	// label value, if it has a label.
	values func(st *relay.Stats) []sample
}

type sample struct {
	v     float64
	label string
}

// one is a family of one sample without labels.
func one(f func(st *relay.Stats) float64) func(st *relay.Stats) []sample {
	return func(st *relay.Stats) []sample { return []sample{{v: f(st)}} }
}

// counts is a family with one sample per relay.Count, its label the
// Count's.
func counts(f func(st *relay.Stats) []relay.Count) func(st *relay.Stats) []sample {
	return func(st *relay.Stats) []sample {
		var out []sample
		for _, c := range f(st) {
			out = append(out, sample{float64(c.N), c.Label})
		}
		return out
	}
}

// budgets is a family with one sample per budget scope that keep says
// the family has.
func budgets(keep func(scope string) bool, f func(b relay.BudgetStats) float64) func(st *relay.Stats) []sample {
	return func(st *relay.Stats) []sample {
		var out []sample
		for _, b := range st.Budgets {
			if keep(b.Scope) {
				out = append(out, sample{f(b), b.Scope})
			}
		}
		return out
	}
}

// feeds is a family with one sample per directory feed.
func feeds(f func(fs relay.FeedStats) float64) func(st *relay.Stats) []sample {
	return func(st *relay.Stats) []sample {
		var out []sample
		for _, fs := range st.Feeds {
			out = append(out, sample{f(fs), fs.Name})
		}
		return out
	}
}

func anyScope(string) bool         { return true }
func serverScope(s string) bool    { return s == "server" }
func notServerScope(s string) bool { return s != "server" }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// family makes a metric: label is the name of its one label, "" for none.
func family(name, help string, kind prometheus.ValueType, label string, values func(st *relay.Stats) []sample) metric {
	var labels []string
	if label != "" {
		labels = []string{label}
	}
	return metric{prometheus.NewDesc(name, help, labels, nil), kind, values}
}

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

// metrics are the families read from relay.Stats. Their names and help
// are the relay's metrics' contract (testdata/exposition.txt).
var metrics = []metric{
	family("skytale_relay_connections", "Open WebSocket connections, authenticated or not.", gauge, "",
		one(func(st *relay.Stats) float64 { return float64(st.Connections) })),
	family("skytale_relay_subscriptions", "Live subscriptions, over all connections and channels.", gauge, "",
		one(func(st *relay.Stats) float64 { return float64(st.Subscriptions) })),
	family("skytale_relay_channels_live", "Channels with at least one live subscriber.", gauge, "",
		one(func(st *relay.Stats) float64 { return float64(st.ChannelsLive) })),
	family("skytale_relay_deliveries_total", "Frames queued for subscribers by fan-out.", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.DeliveriesTotal) })),
	family("skytale_relay_delivered_bytes_total", "Bytes of the frames queued for subscribers by fan-out, once per subscriber (the subscribers of a message share one copy of its frame).", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.DeliveredBytesTotal) })),
	family("skytale_relay_published_bytes_total", "Decoded payload bytes of the publishes handed to the archive, accepted or not.", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.PublishedBytesTotal) })),
	family("skytale_relay_publishes_total", "Publishes answered, by result.", counter, "result",
		counts(func(st *relay.Stats) []relay.Count { return st.Publishes })),
	family("skytale_relay_large_frames_refused_total", "Handshake frames over 1 MiB discarded because the large-frame budget stayed full for LargeFrameWait (the publisher got busy).", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.LargeFramesRefusedTotal) })),
	family("skytale_relay_large_frame_bytes", "Bytes of the large-frame budget held by handshake frames over 1 MiB being read and decoded (each holds the most such a frame may need).", gauge, "",
		one(func(st *relay.Stats) float64 { return float64(st.LargeFrameBytes) })),
	family("skytale_relay_large_frames_waiting", "Sockets waiting for the large-frame budget to read a handshake frame over 1 MiB.", gauge, "",
		one(func(st *relay.Stats) float64 { return float64(st.LargeFramesWaiting) })),
	family("skytale_relay_revocations_total", "Revoked subjects learned from the revocation feed.", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.RevocationsTotal) })),
	family("skytale_relay_connections_refused_total", "Connections closed for the per-account connection cap.", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.ConnectionsRefusedTotal) })),
	family("skytale_relay_connections_login", "WebSockets in their login (upgraded, not yet authenticated): the login reserve in use.", gauge, "",
		one(func(st *relay.Stats) float64 { return float64(st.ConnectionsLogin) })),
	family("skytale_relay_connections_authenticated", "Authenticated WebSockets, as admission counts them.", gauge, "",
		one(func(st *relay.Stats) float64 { return float64(st.ConnectionsAuthenticated) })),
	family("skytale_relay_admissions_total", "WebSockets admitted to their login.", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.AdmissionsTotal) })),
	family("skytale_relay_admission_refusals_total", "WebSocket upgrades refused (429) because the client address or its network (IPv4 /24, IPv6 /64) held its share: of sockets in their login, or of all sockets.", counter, "share",
		counts(func(st *relay.Stats) []relay.Count { return st.AdmissionRefusals })),
	family("skytale_relay_evictions_total", "WebSockets closed with 1013 to seat others: in their login, the one silent longest when the login reserve was full; authenticated, the one idle longest when the authenticated share was full.", counter, "reason",
		counts(func(st *relay.Stats) []relay.Count { return st.Evictions })),
	family("skytale_relay_ping_timeouts_total", "Authenticated WebSockets closed because no pong came within PingTimeout.", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.PingTimeoutsTotal) })),
	family("skytale_relay_slow_consumers_total", "Connections dropped because their send queue was full (their deliveries lost with them).", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.SlowConsumersTotal) })),
	family("skytale_relay_archive_sweeps_total", "Runs of the SQLite archive's TTL sweep.", counter, "",
		one(func(st *relay.Stats) float64 { return float64(st.ArchiveSweepsTotal) })),
	family("skytale_relay_stored_bytes", "Payload bytes the archive holds, over all accounts.", gauge, "",
		one(func(st *relay.Stats) float64 { return float64(st.StoredBytes) })),
	family("skytale_relay_quota_refusals_total", "Publishes refused with quota_exceeded, by the budget they would have passed.", counter, "scope",
		budgets(anyScope, func(b relay.BudgetStats) float64 { return float64(b.QuotaRefusalsTotal) })),
	family("skytale_relay_budget_bytes", "The size of each archive budget: per account, per signup group, per org, and the server's.", gauge, "scope",
		budgets(anyScope, func(b relay.BudgetStats) float64 { return float64(b.Size) })),
	family("skytale_relay_budget_used_bytes", "Payload bytes stored or being stored against the server's budget.", gauge, "scope",
		budgets(serverScope, func(b relay.BudgetStats) float64 { return float64(b.Used) })),
	family("skytale_relay_budget_largest_bytes", "Payload bytes of the largest user of a budget scope (account, group, org): how close the busiest comes to its budget, never who it is.", gauge, "scope",
		budgets(notServerScope, func(b relay.BudgetStats) float64 { return float64(b.Largest) })),
	family("skytale_relay_budget_users", "Accounts, signup groups or orgs with payload bytes stored (accounts that are their own group or org are counted only as accounts).", gauge, "scope",
		budgets(notServerScope, func(b relay.BudgetStats) float64 { return float64(b.Users) })),
	family("skytale_relay_backend_up", "1 while the archive's backend is reachable (on JetStream, the NATS connection is up; on SQLite, no write has failed), else 0.", gauge, "",
		one(func(st *relay.Stats) float64 { return boolValue(st.BackendUp) })),
	family("skytale_relay_backend_errors_total", "Archive operations that failed in the backend, by operation (the publishes are those answered internal).", counter, "op",
		func(st *relay.Stats) []sample {
			out := []sample{{float64(st.ReadErrorsTotal), "read"}}
			for _, c := range st.Publishes {
				if c.Label == "internal" {
					out = append(out, sample{float64(c.N), "publish"})
				}
			}
			return out
		}),
	family("skytale_relay_feed_lag_seconds", "Seconds since the directory's feed was last read to its end (since the relay started, if never); 0 for a feed the relay does not follow.", gauge, "feed",
		feeds(func(fs relay.FeedStats) float64 { return fs.Lag.Seconds() })),
	family("skytale_relay_feed_errors_total", "Polls of the directory's feed that failed (the directory unreachable or refusing, or the relay's own store failing).", counter, "feed",
		feeds(func(fs relay.FeedStats) float64 { return float64(fs.ErrorsTotal) })),
}

// statsCollector collects the families of metrics from one snapshot of a
// relay's Stats per scrape.
type statsCollector struct{ s *relay.Server }

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range metrics {
		ch <- m.desc
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, m := range metrics {
		for _, v := range m.values(&st) {
			var labels []string
			if v.label != "" {
				labels = []string{v.label}
			}
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v.v, labels...)
		}
	}
}
