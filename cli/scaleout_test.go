package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/skytale-oss/skytale/internal/pgtest"
	"github.com/skytale-oss/skytale/internal/waitfor"
)

// TestServeOnPostgresAndNATS runs `tally serve` with the directory on a
// real PostgreSQL and the relay's archive on a real nats-server
// (JetStream), drives a room through the command tree, restarts serve and
// finds everything still there. Without PostgreSQL binaries it is skipped,
// unless CI is set.
func TestServeOnPostgresAndNATS(t *testing.T) {
	pg, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		if errors.Is(err, pgtest.ErrUnavailable) && os.Getenv("CI") == "" {
			t.Skipf("PostgreSQL not available: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	dbURL, err := pg.NewSchema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: 8 << 20, SyncAlways: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	_, port, _ := net.SplitHostPort(ns.Addr().String())
	p, _ := strconv.Atoi(port)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", p)

	data := t.TempDir()
	// A node on PostgreSQL and NATS takes the cluster's secrets.
	secrets := t.TempDir()
	jwtFile, internalFile := filepath.Join(secrets, "jwt"), filepath.Join(secrets, "internal")
	os.WriteFile(jwtFile, []byte(hexSecret()), 0o600)
	os.WriteFile(internalFile, []byte(hexSecret()), 0o600)
	flags := []string{"--directory-db", dbURL, "--relay-nats", natsURL, "--jwt-secret-file", jwtFile, "--internal-secret-file", internalFile}
	srv := startServe(t, data, flags...)
	home := []string{"--home", t.TempDir(), "--api-url", srv.apiURL, "--relay-url", srv.relURL}
	mustTally(t, append(home, "init")...)
	mustTally(t, append(home, "signin", "--org", "acme")...)
	mustTally(t, append(home, "room", "create", "ops")...)
	mustTally(t, append(home, "msg", "ops", "kept in PostgreSQL and JetStream")...)
	if _, err := os.Stat(filepath.Join(data, "directory.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a SQLite directory next to PostgreSQL: %v", err)
	}

	srv.cmd.Process.Kill()
	<-srv.waitErr
	again := startServe(t, data, flags...)
	home = []string{home[0], home[1], "--api-url", again.apiURL, "--relay-url", again.relURL}
	mustTally(t, append(home, "msg", "ops", "after the restart")...)
	out := mustTally(t, append(home, "history", "ops")...)
	for _, want := range []string{"kept in PostgreSQL and JetStream", "after the restart"} {
		if !strings.Contains(out, want) {
			t.Fatalf("history after the restart lacks %q: %q", want, out)
		}
	}
}

// TestServeMetrics: --metrics-addr serves the planes' Prometheus metrics
// (and /health and /ready) on a listener of its own, and the public
// listeners do not; the
// directory's budgets are the flags' (--directory-org-budget).
func TestServeMetrics(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := startServe(t, t.TempDir(), "--metrics-addr", addr, "--directory-org-budget", "3MiB")
	home := []string{"--home", t.TempDir(), "--api-url", srv.apiURL, "--relay-url", srv.relURL}
	mustTally(t, append(home, "init")...)
	mustTally(t, append(home, "signin", "--org", "acme")...)
	var body string
	waitfor.Nil(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return fmt.Errorf("no metrics at %s: %v", addr, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return nil
	})
	for _, want := range []string{`skytale_directory_requests_total{code="201",route="POST /v1/accounts"} 1`, "skytale_relay_connections", "go_goroutines",
		`skytale_directory_budget_limit_bytes{scope="org"} 3.145728e+06`, "skytale_directory_budget_used_bytes "} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, "acme") {
		t.Error("a metric names the org")
	}
	// Health and readiness are on the metrics listener too.
	for _, path := range []string{"/health", "/ready"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s on the metrics listener: %s", path, resp.Status)
		}
	}
	for _, u := range []string{srv.apiURL, srv.relURL} {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("%s serves /metrics on the public listener", u)
		}
	}
}
