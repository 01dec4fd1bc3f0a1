//go:build unix

package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
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

// The main goroutine keeps the process's first thread, which Go never
// ends, so that every test here runs on threads that can end.
func init() { runtime.LockOSThread() }

// TestServerOutlivesLockedThreads: a server started from a goroutine
// locked to its OS thread keeps running after that goroutine ends without
// unlocking it, which ends the thread (as a relay's committer ends its
// thread, which may be the one that started postgres). The kernel kills a
// child started with Pdeathsig when the thread that started it ends, not
// the process (prctl(2), PR_SET_PDEATHSIG).
func TestServerOutlivesLockedThreads(t *testing.T) {
	var s *Server
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		s, err = Start(Options{})
	}()
	<-done
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	time.Sleep(300 * time.Millisecond) // time passes: a kill would come a little later
	if err := s.admin.PingContext(context.Background()); err != nil {
		t.Fatalf("the server is gone with the thread that started it: %v", err)
	}
}
