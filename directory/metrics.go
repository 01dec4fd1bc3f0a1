package directory

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the directory's Prometheus metrics (Config.Metrics). Their
// labels are route patterns, status codes and limit names only: never a
// channel name, an account id or an address, so what an operator scrapes
// says how busy the directory is, not who uses it. A nil *metrics records
// nothing.
type metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	refused     *prometheus.CounterVec
	revocations prometheus.Counter
	sweeps      prometheus.Counter
	swept       prometheus.Counter
	quota       *prometheus.CounterVec
	backendErrs prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, up func() bool) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
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
	upGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "skytale_directory_backend_up", Help: "1 while the database answers (the check GET /ready makes, shared for a second), else 0.",
	}, func() float64 {
		if up() {
			return 1
		}
		return 0
	})
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.refused, m.revocations, m.sweeps, m.swept, m.quota, m.backendErrs, upGauge} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) request(route string, code int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "none"
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

func (m *metrics) refusal(kind limitKind, by string) {
	if m != nil {
		m.refused.WithLabelValues(limitNames[kind], by).Inc()
	}
}

func (m *metrics) backendError() {
	if m != nil {
		m.backendErrs.Inc()
	}
}

func (m *metrics) revocation() {
	if m != nil {
		m.revocations.Inc()
	}
}

func (m *metrics) sweep(rows int64) {
	if m != nil {
		m.sweeps.Inc()
		m.swept.Add(float64(rows))
	}
}

func (m *metrics) quotaRefusal(scope string) {
	if m != nil {
		m.quota.WithLabelValues(scope).Inc()
	}
}

// watchBudgets registers, on reg, the gauges of the storage budgets
// (budget.go), read from the ledger at each scrape: the bytes the whole
// directory keeps and each budget's size, and per scope how many
// accounts, groups and orgs hold bytes, how many are at 90% of their
// budget or more, and the largest one's bytes. Never who they are: no
// label is an account, a group or an org.
func (m *metrics) watchBudgets(reg prometheus.Registerer, st *store) error {
	if m == nil {
		return nil
	}
	return reg.Register(&budgetCollector{st: st,
		used:    prometheus.NewDesc("skytale_directory_budget_used_bytes", "Bytes the directory keeps for clients (key packages, Welcomes, join requests, GroupInfos, trees), counted against the server budget.", nil, nil),
		limit:   prometheus.NewDesc("skytale_directory_budget_limit_bytes", "Size of each storage budget, by scope (account, group, org: each one's; server: the total).", []string{"scope"}, nil),
		holders: prometheus.NewDesc("skytale_directory_budget_holders", "Accounts, signup groups and orgs that hold bytes, by scope.", []string{"scope"}, nil),
		near:    prometheus.NewDesc("skytale_directory_budget_near", "Accounts, signup groups and orgs at 90% of their budget or more, by scope.", []string{"scope"}, nil),
		largest: prometheus.NewDesc("skytale_directory_budget_largest_bytes", "Bytes of the largest holder, by scope.", []string{"scope"}, nil),
	})
}

// budgetCollector reads the ledger when scraped.
type budgetCollector struct {
	st                                  *store
	used, limit, holders, near, largest *prometheus.Desc
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
	u, err := c.st.budgetUse(ctx)
	for i, scope := range budgetScopes {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(c.st.budgets.limit(scope)), scope)
		if err != nil {
			continue
		}
		if scope == scopeServer {
			ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(u.largest[i]))
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.holders, prometheus.GaugeValue, float64(u.holders[i]), scope)
		ch <- prometheus.MustNewConstMetric(c.near, prometheus.GaugeValue, float64(u.near[i]), scope)
		ch <- prometheus.MustNewConstMetric(c.largest, prometheus.GaugeValue, float64(u.largest[i]), scope)
	}
}
