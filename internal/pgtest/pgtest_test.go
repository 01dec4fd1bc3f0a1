//go:build unix

package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestStartServesSchemasAndStops starts a cluster, uses two schemas of it
// (each sees only its own tables), and checks that Close ends the server
// process and removes its directory.
func TestStartServesSchemasAndStops(t *testing.T) {
	s, err := Start(Options{})
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var dbs []*sql.DB
	for range 2 {
		u, err := s.NewSchema(ctx)
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("pgx", u)
		if err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	if _, err := dbs[0].Exec(`CREATE TABLE t (x INT); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := dbs[0].QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("count %d, %v", n, err)
	}
	if _, err := dbs[1].Exec(`SELECT * FROM t`); err == nil {
		t.Fatal("a fresh schema sees another schema's table")
	}
	for _, db := range dbs {
		db.Close()
	}
	pid := s.cmd.Process.Pid
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("postgres (pid %d) still runs after Close", pid)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("directory left behind: %v", err)
	}
}
