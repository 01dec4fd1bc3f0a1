package directory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/directory/pgstore"
)

func TestDatabaseAndDBPathConflict(t *testing.T) {
	_, err := New(context.Background(), Config{JWTSecret: testJWTSecret, DBPath: t.TempDir() + "/a.db", Database: "postgres://x@localhost/db"})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("both set: %v", err)
	}
}

// TestBackendNamesItsDatabase: a PostgreSQL URL without a Backend is
// refused with the package to import, not opened as a SQLite file by that
// name; a Backend without a Database URL is refused too.
func TestBackendNamesItsDatabase(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, u := range []string{"postgres://x@localhost/db", "postgresql://x@localhost/db"} {
		_, err := New(context.Background(), Config{JWTSecret: testJWTSecret, Database: u})
		if err == nil || !strings.Contains(err.Error(), "pgstore") {
			t.Fatalf("%s without a Backend: %v", u, err)
		}
	}
	if _, err := New(context.Background(), Config{JWTSecret: testJWTSecret, Backend: pgstore.Backend{}}); err == nil || !strings.Contains(err.Error(), "Database") {
		t.Fatalf("a Backend without a Database: %v", err)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Fatalf("a refused start left %v behind", files)
	}
}

// TestDatabaseSelectsSQLiteForAPath: a Database that is not a PostgreSQL
// URL is a SQLite file, as DBPath is.
func TestDatabaseSelectsSQLiteForAPath(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Database = t.TempDir() + "/dir.db" })
	if e.isPostgres() {
		t.Fatal("a path opened PostgreSQL")
	}
	e.account("acme")
}

// TestPostgresTwoDirectoriesShareOneDatabase: two directory processes on
// one database act as one directory. An account made on one works on
// the other, and joins spread over both never use an invite more than
// its max_uses.
func TestPostgresTwoDirectoriesShareOneDatabase(t *testing.T) {
	u := postgresURL(t)
	a := newEnv(t, func(c *Config) { c.Database = u })
	s2, err := New(context.Background(), Config{JWTSecret: testJWTSecret, InternalSecret: []byte(testInternalSecret), OpenSignup: true, Now: a.clock.Now, Limits: Limits{Off: true}, Database: u, Backend: pgstore.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	b := &env{t: t, s: s2, ts: httptest.NewServer(s2), clock: a.clock}
	defer b.close()

	_, owner := a.account("acme")
	const ch = "acme/pay/agent"
	a.channel(owner, ch)
	inv := b.invite(owner, ch, 4)
	keys := make([]string, 16)
	for i := range keys {
		if i%2 == 0 {
			_, keys[i] = a.account("globex")
		} else {
			// The operator provisions on the other directory.
			keys[i] = b.do("POST", "/v1/accounts", testInternalSecret, map[string]string{"email": "g@globex.example", "org": "globex"}).str("api_key")
		}
	}
	count := raceStatuses(len(keys), func(i int) int {
		e := a
		if i%2 == 1 {
			e = b
		}
		return e.join(keys[i], ch, inv, fmt.Sprint("did:web:", i), []byte("kp")).status
	})
	wantWinners(t, count, 4, 12)
	r := b.do("GET", "/v1/channels/pending?channel="+ch, owner, nil)
	if reqs, _ := r.body["requests"].([]any); len(reqs) != 4 {
		t.Fatalf("pending on the other directory: %s", r)
	}
}

// TestNewEndsWithItsContext: a start whose database accepts connections
// and never answers ends when the caller's context does, with the
// context's error, instead of waiting on the database forever.
func TestNewEndsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // accepted, never answered
		}
	}()
	defer func() {
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		s, err := New(ctx, Config{JWTSecret: testJWTSecret, Backend: pgstore.Backend{},
			Database: "postgres://skytale@" + ln.Addr().String() + "/db?sslmode=disable"})
		if s != nil {
			s.Close(context.Background())
		}
		done <- err
	}()
	// The start is under way once the database has a connection.
	c := <-held
	held <- c
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("New after its context ended: %v", err)
	}
}
