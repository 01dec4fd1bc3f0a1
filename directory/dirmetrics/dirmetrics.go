// Package dirmetrics exports a directory's metrics to Prometheus: the
// skytale_directory_* counters, histogram and gauges that
// directory.Config.Metrics receives. It is the only part of the directory
// that links the Prometheus client, so a program that embeds a directory
// without it links none.
//
//	reg := prometheus.NewRegistry()
//	d, err := directory.New(ctx, directory.Config{…, Metrics: dirmetrics.New(reg)})
//
// No label is a channel name, an account id or an address: the labels
// are route patterns, status codes, rate-limit names and storage-budget
// scopes (see directory.Metrics).
package dirmetrics

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/directory"
)

// Metrics records one directory's metrics on a Prometheus registerer. It
// implements directory.Metrics.
type Metrics struct {
	reg prometheus.Registerer

	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	refused     *prometheus.CounterVec
	revocations prometheus.Counter
	sweeps      prometheus.Counter
	swept       prometheus.Counter
	quota       *prometheus.CounterVec
	backendErrs prometheus.Counter

	mu      sync.Mutex
	watched bool
}

// New returns the metrics of one directory, to be registered on reg (which
// must not be nil) when the directory starts: set it as
// directory.Config.Metrics. A second directory's metrics on the same
// registerer fail its start, rather than mix with the first's.
func New(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skytale_directory_requests_total", Help: "Requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "skytale_directory_request_duration_seconds", Help: "Time to answer a request, by route pattern.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"route"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skytale_directory_rate_limited_total", Help: "Requests refused by a rate limit, by limit and by what it counts (address or account).",
		}, []string{"limit", "by"}),
		revocations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skytale_directory_revocations_total", Help: "Revocations recorded.",
		}),
		sweeps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skytale_directory_sweeps_total", Help: "Runs of the background sweep.",
		}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skytale_directory_swept_rows_total", Help: "Expired rows the sweep deleted.",
		}),
		quota: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skytale_directory_quota_refusals_total", Help: "Puts refused with quota_exceeded, by the storage budget they would have passed (account, group, org, server).",
		}, []string{"scope"}),
		backendErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skytale_directory_backend_errors_total", Help: "Requests answered 500 internal: the database failed (or another fault the log names).",
		}),
	}
}

// Watch registers the metrics on the registerer, with the gauges that
// read s when collected: skytale_directory_backend_up and the storage
// budgets'. directory.New calls it; a second call is an error, and so is
// a registerer that holds another directory's metrics (nothing of m stays
// registered then).
func (m *Metrics) Watch(s *directory.Server) error {
	if m == nil || m.reg == nil {
		return errors.New("dirmetrics: no registerer (use dirmetrics.New)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watched {
		return errors.New("dirmetrics: these metrics already serve a directory")
	}
	up := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "skytale_directory_backend_up", Help: "1 while the database answers (the check GET /ready makes, shared for a second), else 0.",
	}, func() float64 {
		if s.BackendUp() {
			return 1
		}
		return 0
	})
	cs := []prometheus.Collector{m.requests, m.duration, m.refused, m.revocations, m.sweeps, m.swept, m.quota, m.backendErrs, up, newBudgetCollector(s)}
	for i, c := range cs {
		if err := m.reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				m.reg.Unregister(done)
			}
			return err
		}
	}
	m.watched = true
	return nil
}

// Request implements directory.Metrics.
func (m *Metrics) Request(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

// RateLimited implements directory.Metrics.
func (m *Metrics) RateLimited(limit, by string) { m.refused.WithLabelValues(limit, by).Inc() }

// QuotaRefused implements directory.Metrics.
func (m *Metrics) QuotaRefused(scope string) { m.quota.WithLabelValues(scope).Inc() }

// BackendError implements directory.Metrics.
func (m *Metrics) BackendError() { m.backendErrs.Inc() }

// Revoked implements directory.Metrics.
func (m *Metrics) Revoked() { m.revocations.Inc() }

// Swept implements directory.Metrics.
func (m *Metrics) Swept(rows int64) {
	m.sweeps.Inc()
	m.swept.Add(float64(rows))
}

// budgetCollector reads the storage ledger when collected: the bytes the
// whole directory keeps and each budget's size, and per scope how many
// accounts, groups and orgs hold bytes, how many are at 90% of their
// budget or more, and the largest one's bytes. Never who they are: no
// label is an account, a group or an org.
type budgetCollector struct {
	s                                   *directory.Server
	used, limit, holders, near, largest *prometheus.Desc
}

func newBudgetCollector(s *directory.Server) *budgetCollector {
	return &budgetCollector{s: s,
		used:    prometheus.NewDesc("skytale_directory_budget_used_bytes", "Bytes the directory keeps for clients (key packages, Welcomes, join requests, GroupInfos, trees), counted against the server budget.", nil, nil),
		limit:   prometheus.NewDesc("skytale_directory_budget_limit_bytes", "Size of each storage budget, by scope (account, group, org: each one's; server: the total).", []string{"scope"}, nil),
		holders: prometheus.NewDesc("skytale_directory_budget_holders", "Accounts, signup groups and orgs that hold bytes, by scope.", []string{"scope"}, nil),
		near:    prometheus.NewDesc("skytale_directory_budget_near", "Accounts, signup groups and orgs at 90% of their budget or more, by scope.", []string{"scope"}, nil),
		largest: prometheus.NewDesc("skytale_directory_budget_largest_bytes", "Bytes of the largest holder, by scope.", []string{"scope"}, nil),
	}
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.used, c.limit, c.holders, c.near, c.largest} {
		ch <- d
	}
}

// Collect leaves the use out while the database does not answer (within a
// second): skytale_directory_backend_up says so, and the rest of the
// scrape must not fail with it.
func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	use, err := c.s.BudgetUse(ctx)
	for _, u := range use {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(u.Limit), u.Scope)
		if err != nil {
			continue
		}
		if u.Scope == "server" {
			ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(u.Largest))
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.holders, prometheus.GaugeValue, float64(u.Holders), u.Scope)
		ch <- prometheus.MustNewConstMetric(c.near, prometheus.GaugeValue, float64(u.Near), u.Scope)
		ch <- prometheus.MustNewConstMetric(c.largest, prometheus.GaugeValue, float64(u.Largest), u.Scope)
	}
}

var _ directory.Metrics = (*Metrics)(nil)
