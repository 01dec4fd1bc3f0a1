package dirmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/directory/dirmetrics"
	"github.com/skytale-oss/skytale/directory/pgstore"
	"github.com/skytale-oss/skytale/internal/metricstest"
	"github.com/skytale-oss/skytale/internal/pgtest"
	"github.com/skytale-oss/skytale/internal/waitfor"
)

// TestNoLabelNamesAnyone: after requests of two orgs, a channel, joins,
// refusals and a revocation, no label value holds a channel, an org, an
// account id or an address.
func TestNoLabelNamesAnyone(t *testing.T) {
	reg := prometheus.NewRegistry()
	id := run(t, reg)
	metricstest.Labels(t, reg, func(metric, label, v string) {
		for _, who := range []string{"host", "crowd", "lobby", id, "127.0.0.1"} {
			if strings.Contains(v, who) {
				t.Errorf("%s has the label %s=%q", metric, label, v)
			}
		}
	})
}

// TestOneDirectoryPerRegistry: a second directory whose metrics go to a
// registry that holds a first one's is refused rather than mixed in, and
// so is a second directory given the first's Metrics; the first one's
// metrics go on counting.
func TestOneDirectoryPerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := dirmetrics.New(reg)
	c, _ := start(t, directory.Config{Metrics: m})
	for _, other := range []*dirmetrics.Metrics{dirmetrics.New(reg), m} {
		s, err := directory.New(context.Background(), directory.Config{JWTSecret: jwtSecret, Metrics: other})
		if err == nil {
			s.Close(context.Background())
			t.Fatal("two directories registered the same metrics")
		}
	}
	c.must(200, "GET", "/health", "", nil)
	if n := metricstest.Value(t, reg, "skytale_directory_requests_total", "route", "GET /health", "code", "200"); n != 1 {
		t.Fatalf("the first directory's health checks: %v", n)
	}
}

// waitReady polls GET /ready until it answers want, failing after a
// minute.
func waitReady(c client, want int, what string) {
	c.t.Helper()
	waitfor.Nil(c.t, time.Minute, func() error {
		got, body := c.do("GET", "/ready", "", nil)
		if got != want {
			return fmt.Errorf("%s: /ready %d %v, want %d", what, got, body, want)
		}
		if want != http.StatusOK && (str(body, "error") != "unavailable" || str(body, "message") == "") {
			c.t.Fatalf("%s: /ready %d %v", what, got, body)
		}
		return nil
	})
}

// TestBackendFollowsPostgres: a directory on a PostgreSQL server of its
// own is ready while the server answers, not ready (503 unavailable, its
// backend gauge 0) while the server is stopped with SIGSTOP, ready again
// once it continues, and not ready after the server is gone, when the
// requests that need it fail and count as backend errors. /health stays
// 200 throughout: it is liveness.
func TestBackendFollowsPostgres(t *testing.T) {
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
	c, _ := start(t, directory.Config{Database: u, Backend: pgstore.Backend{}, Metrics: dirmetrics.New(reg), Signup: directory.SignupOpen})
	waitReady(c, http.StatusOK, "PostgreSQL running")
	if v := metricstest.Value(t, reg, "skytale_directory_backend_up"); v != 1 {
		t.Fatalf("backend up %v with PostgreSQL running", v)
	}

	if err := pg.Pause(); err != nil {
		t.Fatal(err)
	}
	waitReady(c, http.StatusServiceUnavailable, "PostgreSQL stopped")
	if v := metricstest.Value(t, reg, "skytale_directory_backend_up"); v != 0 {
		t.Fatalf("backend up %v with PostgreSQL stopped", v)
	}
	if h, _ := c.do("GET", "/health", "", nil); h != http.StatusOK {
		t.Fatalf("/health %d with PostgreSQL stopped: liveness must not follow the database", h)
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	waitReady(c, http.StatusOK, "PostgreSQL continued")

	key := str(c.must(201, "POST", "/v1/accounts", "", map[string]string{"email": "a@acme.example", "org": "acme"}), "api_key")
	pg.Close()
	waitReady(c, http.StatusServiceUnavailable, "PostgreSQL gone")
	before := metricstest.Value(t, reg, "skytale_directory_backend_errors_total")
	if got, body := c.do("POST", "/v1/tokens", key, nil); got != http.StatusInternalServerError {
		t.Fatalf("a token with PostgreSQL gone: %d %v", got, body)
	}
	if after := metricstest.Value(t, reg, "skytale_directory_backend_errors_total"); after <= before {
		t.Fatalf("backend errors %v then %v: the failed request was not counted", before, after)
	}
}
