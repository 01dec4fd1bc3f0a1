package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/skytale-oss/skytale/internal/pgtest"
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
	flags := []string{"--directory-db", dbURL, "--relay-nats", natsURL}
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
