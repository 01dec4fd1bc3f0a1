package directory

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/internal/metricstest"
)

// TestMetrics: requests, rate-limit refusals and revocations are counted
// by route pattern, status and limit, and no label holds a channel, an
// account or an address.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(c *Config) {
		c.Metrics = reg
		c.Limits = tightLimits(false) // two token requests per minute per address
	})
	id, key := e.provision("acme")
	for range 3 {
		e.do("POST", "/v1/tokens", key, nil)
	}
	e.do("POST", "/v1/channels", key, map[string]string{"name": "acme/rooms/secret-plans"})
	if r := e.do("POST", "/v1/revocations", key, map[string]string{"did": "did:skytale:" + id}); r.status != 200 {
		t.Fatalf("revoke: %v", r)
	}
	if n := metricstest.Value(t, reg, "skytale_directory_requests_total", "route", "POST /v1/tokens", "code", "201"); n != 2 {
		t.Errorf("tokens minted: %v", n)
	}
	if n := metricstest.Value(t, reg, "skytale_directory_requests_total", "route", "POST /v1/tokens", "code", "429"); n != 1 {
		t.Errorf("tokens refused: %v", n)
	}
	if n := metricstest.Value(t, reg, "skytale_directory_rate_limited_total", "limit", "token", "by", "address"); n != 1 {
		t.Errorf("token refusals: %v", n)
	}
	if n := metricstest.Value(t, reg, "skytale_directory_revocations_total"); n != 1 {
		t.Errorf("revocations: %v", n)
	}
	metricstest.Labels(t, reg, func(metric, label, v string) {
		if strings.Contains(v, "acme") || strings.Contains(v, id) || strings.Contains(v, "127.0.0.1") {
			t.Errorf("%s has the label %s=%q", metric, label, v)
		}
	})
	// A second directory on the same registry is refused, not mixed in.
	if _, err := New(Config{JWTSecret: testJWTSecret, Metrics: reg}); err == nil {
		t.Error("two directories registered the same metrics")
	}
}
