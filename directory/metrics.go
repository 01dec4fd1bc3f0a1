package directory

import (
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
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.refused, m.revocations, m.sweeps, m.swept, m.backendErrs, upGauge} {
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
