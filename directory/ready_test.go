package directory

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/internal/metricstest"
	"github.com/skytale-oss/skytale/internal/pgtest"
)

// waitReady polls GET /ready until it answers want, failing after a
// minute.
func (e *env) waitReady(want int, what string) reply {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := e.do("GET", "/ready", "", nil)
		if r.status == want {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: /ready %s, want %d", what, r, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyFollowsPostgres: a directory on a PostgreSQL server of its own
// is ready while the server answers, not ready (503 unavailable, its
// backend gauge 0) while the server is stopped with SIGSTOP, ready again
// once it continues, and not ready after the server is gone, when the
// requests that need it fail and count as backend errors. /health stays
// 200 throughout: it is liveness.
func TestReadyFollowsPostgres(t *testing.T) {
	pg, err := pgtest.Start(pgtest.Options{})
	if errors.Is(err, pgtest.ErrUnavailable) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	u, err := pg.NewSchema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(c *Config) { c.Database = u; c.Metrics = reg })
	e.waitReady(http.StatusOK, "PostgreSQL running")
	if v := metricstest.Value(t, reg, "skytale_directory_backend_up"); v != 1 {
		t.Fatalf("backend up %v with PostgreSQL running", v)
	}

	if err := pg.Pause(); err != nil {
		t.Fatal(err)
	}
	r := e.waitReady(http.StatusServiceUnavailable, "PostgreSQL stopped")
	want(t, r, http.StatusServiceUnavailable, "unavailable")
	if v := metricstest.Value(t, reg, "skytale_directory_backend_up"); v != 0 {
		t.Fatalf("backend up %v with PostgreSQL stopped", v)
	}
	if h := e.do("GET", "/health", "", nil); h.status != http.StatusOK {
		t.Fatalf("/health %s with PostgreSQL stopped: liveness must not follow the database", h)
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	e.waitReady(http.StatusOK, "PostgreSQL continued")

	_, key := e.account("acme")
	pg.Close()
	e.databaseGone = true
	e.waitReady(http.StatusServiceUnavailable, "PostgreSQL gone")
	before := metricstest.Value(t, reg, "skytale_directory_backend_errors_total")
	if r := e.do("POST", "/v1/tokens", key, nil); r.status != http.StatusInternalServerError {
		t.Fatalf("a token with PostgreSQL gone: %s", r)
	}
	if after := metricstest.Value(t, reg, "skytale_directory_backend_errors_total"); after <= before {
		t.Fatalf("backend errors %v then %v: the failed request was not counted", before, after)
	}
}
