package directory

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// pgDB opens a plain connection to a fresh schema, and returns it with the
// schema's URL.
func pgDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	u := postgresURL(t)
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, u
}

// TestPostgresConcurrentStart: directory processes starting together on
// one empty database apply each migration once, and all start.
func TestPostgresConcurrentStart(t *testing.T) {
	db, u := pgDB(t)
	const n = 6
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = New(Config{JWTSecret: testJWTSecret, Database: u}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("directory %d: %v", i, err)
		}
		defer servers[i].Close(context.Background())
	}
	var rows, max int
	if err := db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&rows, &max); err != nil {
		t.Fatal(err)
	}
	if rows != len(pgMigrations) || max != len(pgMigrations) {
		t.Fatalf("schema_migrations has %d rows up to %d, want %d", rows, max, len(pgMigrations))
	}
}

// TestPostgresMigrationIsAtomic: a migration that fails leaves nothing of
// itself behind, and the ones before it stay applied.
func TestPostgresMigrationIsAtomic(t *testing.T) {
	db, _ := pgDB(t)
	ctx := context.Background()
	steps := []string{`CREATE TABLE first_step (x INT)`, `CREATE TABLE second_step (x INT); SELECT 1 / 0`}
	if err := migratePostgres(ctx, db, steps); err == nil || !strings.Contains(err.Error(), "migration 2") {
		t.Fatalf("a failing migration: %v", err)
	}
	var version int
	db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&version)
	if version != 1 {
		t.Fatalf("schema version %d, want 1", version)
	}
	if _, err := db.Exec(`SELECT * FROM second_step`); err == nil {
		t.Fatal("the failed migration's table exists")
	}
	if _, err := db.Exec(`SELECT * FROM first_step`); err != nil {
		t.Fatalf("the applied migration's table: %v", err)
	}
}

// TestPostgresRefusesNewerSchema: a database migrated by a newer build is
// refused, not written to.
func TestPostgresRefusesNewerSchema(t *testing.T) {
	db, u := pgDB(t)
	s, err := New(Config{JWTSecret: testJWTSecret, Database: u})
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	if _, err := db.Exec(`INSERT INTO schema_migrations (version) VALUES ($1)`, len(pgMigrations)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{JWTSecret: testJWTSecret, Database: u}); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("New on a newer schema: %v", err)
	}
}

// TestPostgresURLErrorsHideThePassword: neither a URL that does not parse
// nor a server that cannot be reached puts the password in the error.
func TestPostgresURLErrorsHideThePassword(t *testing.T) {
	for _, u := range []string{
		"postgres://skytale:hunter2@[::1/db",
		"postgres://skytale:hunter2@127.0.0.1:1/db?connect_timeout=2",
		"postgresql://skytale:hunter2@/db?host=/nonexistent",
	} {
		_, err := New(Config{JWTSecret: testJWTSecret, Database: u})
		if err == nil {
			t.Fatalf("%s: no error", u)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
}

func TestDatabaseAndDBPathConflict(t *testing.T) {
	_, err := New(Config{JWTSecret: testJWTSecret, DBPath: t.TempDir() + "/a.db", Database: "postgres://x@localhost/db"})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("both set: %v", err)
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

func TestRebind(t *testing.T) {
	var b pgBackend
	for in, want := range map[string]string{
		`SELECT 1`: `SELECT 1`,
		`SELECT ? WHERE a = ? AND b = 'x?' AND c = ?`: `SELECT $1 WHERE a = $2 AND b = 'x?' AND c = $3`,
		`INSERT INTO t VALUES (?, '', 'it''s?', ?)`:   `INSERT INTO t VALUES ($1, '', 'it''s?', $2)`,
	} {
		if got := b.rebind(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPostgresTwoDirectoriesShareOneDatabase: two directory processes on
// one database act as one directory. An account made on one works on
// the other, and joins spread over both never use an invite more than
// its max_uses.
func TestPostgresTwoDirectoriesShareOneDatabase(t *testing.T) {
	u := postgresURL(t)
	a := newEnv(t, func(c *Config) { c.Database = u })
	s2, err := New(Config{JWTSecret: testJWTSecret, InternalSecret: []byte(testInternalSecret), OpenSignup: true, Now: a.clock.Now, Limits: Limits{Off: true}, Database: u})
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
