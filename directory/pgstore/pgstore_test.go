package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/skytale-oss/skytale/internal/pgtest"
)

// postgresEnv names a PostgreSQL server to test against instead of a
// throw-away cluster the tests start themselves.
const postgresEnv = "SKYTALE_TEST_POSTGRES"

var shared struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// TestMain stops the PostgreSQL server the tests started, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "stop PostgreSQL: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// schemaURL returns the URL of a fresh, empty schema, starting the
// package's server on first use. Without PostgreSQL the test is skipped,
// unless CI is set: CI never skips these.
func schemaURL(t *testing.T) string {
	t.Helper()
	shared.once.Do(func() {
		if u := os.Getenv(postgresEnv); u != "" {
			shared.srv, shared.err = pgtest.Connect(u)
		} else {
			shared.srv, shared.err = pgtest.Start(pgtest.Options{})
		}
	})
	if shared.err != nil {
		if errors.Is(shared.err, pgtest.ErrUnavailable) && os.Getenv("CI") == "" {
			t.Skipf("PostgreSQL tests skipped: %v (install the server, or set %s to a postgres:// URL)", shared.err, postgresEnv)
		}
		t.Fatalf("PostgreSQL: %v", shared.err)
	}
	u, err := shared.srv.NewSchema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// plainDB opens a plain connection to a fresh schema, and returns it with
// the schema's URL.
func plainDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	u := schemaURL(t)
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, u
}

// TestConcurrentStart: directory processes starting together on one
// empty database apply each migration once, and all start.
func TestConcurrentStart(t *testing.T) {
	db, u := plainDB(t)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var opened *sql.DB
			opened, errs[i] = Backend{}.Open(context.Background(), u)
			if opened != nil {
				opened.Close()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("directory %d: %v", i, err)
		}
	}
	var rows, max int
	if err := db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&rows, &max); err != nil {
		t.Fatal(err)
	}
	if rows != len(migrations) || max != len(migrations) {
		t.Fatalf("schema_migrations has %d rows up to %d, want %d", rows, max, len(migrations))
	}
}

// TestMigrationIsAtomic: a migration that fails leaves nothing of itself
// behind, and the ones before it stay applied.
func TestMigrationIsAtomic(t *testing.T) {
	db, _ := plainDB(t)
	ctx := context.Background()
	steps := []string{`CREATE TABLE first_step (x INT)`, `CREATE TABLE second_step (x INT); SELECT 1 / 0`}
	if err := migrate(ctx, db, steps); err == nil || !strings.Contains(err.Error(), "migration 2") {
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

// TestRefusesNewerSchema: a database migrated by a newer build is refused,
// not written to.
func TestRefusesNewerSchema(t *testing.T) {
	db, u := plainDB(t)
	opened, err := Backend{}.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	opened.Close()
	if _, err := db.Exec(`INSERT INTO schema_migrations (version) VALUES ($1)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := (Backend{}).Open(context.Background(), u); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("Open on a newer schema: %v", err)
	}
}

// TestMigrateForTestStops: the test seam applies the migrations before
// the one it stops at, and refuses a stop that matches none.
func TestMigrateForTestStops(t *testing.T) {
	db, _ := plainDB(t)
	ctx := context.Background()
	if err := MigrateForTest(ctx, db, func(m string) bool { return strings.Contains(m, "CREATE TABLE budget_usage") }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SELECT * FROM budget_usage`); err == nil {
		t.Fatal("the migration stopped at was applied")
	}
	if _, err := db.Exec(`SELECT * FROM signup_tokens`); err != nil {
		t.Fatalf("a migration before the stop: %v", err)
	}
	if err := MigrateForTest(ctx, db, func(string) bool { return false }); err == nil {
		t.Fatal("a stop that matches nothing was accepted")
	}
}

// TestURLErrorsHideThePassword: neither a URL that does not parse, nor a
// server that cannot be reached, nor a malformed pool setting puts the
// password in the error.
func TestURLErrorsHideThePassword(t *testing.T) {
	urls := []string{
		"postgres://skytale:hunter2@[::1/db",
		"postgres://skytale:hunter2@127.0.0.1:1/db?connect_timeout=2",
		"postgresql://skytale:hunter2@/db?host=/nonexistent",
	}
	if _, err := pgtest.BinDir(); err == nil || os.Getenv("CI") != "" {
		urls = append(urls, schemaURL(t)+"&pool_max_conns=lots&password=hunter2")
	}
	for _, u := range urls {
		db, err := Backend{}.Open(context.Background(), u)
		if err == nil {
			db.Close()
			t.Fatalf("%s: no error", u)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
}

// TestPoolSettingsFromURL: the pool settings pgx reads from a database
// URL (pool_max_conns and the others pgxpool.ParseConfig knows) are
// honoured rather than sent to the server as unknown parameters.
func TestPoolSettingsFromURL(t *testing.T) {
	u := schemaURL(t)
	db, err := Backend{}.Open(context.Background(), u+"&pool_max_conns=3&pool_min_conns=1&pool_max_conn_lifetime=1h&pool_max_conn_idle_time=1m&pool_health_check_period=30s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.Stats().MaxOpenConnections; got != 3 {
		t.Fatalf("max open connections %d, want the URL's 3", got)
	}
}

func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT 1`: `SELECT 1`,
		`SELECT ? WHERE a = ? AND b = 'x?' AND c = ?`: `SELECT $1 WHERE a = $2 AND b = 'x?' AND c = $3`,
		`INSERT INTO t VALUES (?, '', 'it''s?', ?)`:   `INSERT INTO t VALUES ($1, '', 'it''s?', $2)`,
	} {
		if got := (Backend{}).Rebind(in); got != want {
			t.Errorf("Rebind(%q) = %q, want %q", in, got, want)
		}
	}
}
