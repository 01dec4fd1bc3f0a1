package directory

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"os"
	"sync"
	"testing"

	"github.com/skytale-oss/skytale/directory/pgstore"
	"github.com/skytale-oss/skytale/internal/pgtest"
)

// -backend=postgres runs every test that does not ask for a backend of
// its own (newEnv with neither DBPath nor Database set) on PostgreSQL
// instead of in-memory SQLite.
var backendFlag = flag.String("backend", "sqlite", "backend of tests that do not choose one: sqlite or postgres")

// postgresEnv names a PostgreSQL server to test against instead of a
// throw-away cluster the tests start themselves.
const postgresEnv = "SKYTALE_TEST_POSTGRES"

var pgShared struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// postgresURL returns the URL of a fresh, empty schema on the package's
// PostgreSQL server, starting the server on first use. Without PostgreSQL
// the test is skipped, unless CI is set: CI never skips these.
func postgresURL(t testing.TB) string {
	t.Helper()
	pgShared.once.Do(func() {
		if u := os.Getenv(postgresEnv); u != "" {
			pgShared.srv, pgShared.err = pgtest.Connect(u)
		} else {
			pgShared.srv, pgShared.err = pgtest.Start(pgtest.Options{})
		}
	})
	if pgShared.err != nil {
		if errors.Is(pgShared.err, pgtest.ErrUnavailable) && os.Getenv("CI") == "" {
			t.Skipf("PostgreSQL tests skipped: %v (install the server, or set %s to a postgres:// URL)", pgShared.err, postgresEnv)
		}
		t.Fatalf("PostgreSQL: %v", pgShared.err)
	}
	u, err := pgShared.srv.NewSchema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// stopPostgres stops the package's PostgreSQL server, if a test started
// one.
func stopPostgres() error {
	if pgShared.srv == nil {
		return nil
	}
	return pgShared.srv.Close()
}

// testBackend is one database a test runs on.
type testBackend struct {
	name string
	// database returns the Config.Database value of a fresh database
	// of this backend ("" for in-memory SQLite).
	database func(t testing.TB) string
	// durable backends keep their data across a close and reopen.
	durable bool
}

var testBackends = []testBackend{
	{"sqlite-memory", func(testing.TB) string { return "" }, false},
	{"sqlite-file", func(t testing.TB) string { return t.TempDir() + "/dir.db" }, true},
	{"postgres", postgresURL, true},
}

// forBackends runs f in one subtest per backend, each on a fresh
// database.
func forBackends(t *testing.T, f func(t *testing.T, b testBackend)) {
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// envOn starts a directory on a fresh database of b.
func envOn(t testing.TB, b testBackend, mod func(*Config)) *env {
	db := b.database(t)
	return newEnv(t, func(c *Config) {
		c.Database = db
		if mod != nil {
			mod(c)
		}
	})
}

// defaultDatabase is the Config.Database of a test that chose none.
func defaultDatabase(t testing.TB) string {
	if *backendFlag == "postgres" {
		return postgresURL(t)
	}
	return ""
}

func (e *env) isPostgres() bool { _, ok := e.s.store.b.(pgstore.Backend); return ok }

// onPostgres sets c's Backend to PostgreSQL when its Database is a
// PostgreSQL URL, as tally serve does.
func onPostgres(c *Config) {
	if isPostgresURL(c.Database) && c.Backend == nil {
		c.Backend = pgstore.Backend{}
	}
}

// queryRow runs a read written with ? placeholders on e's database.
func (e *env) queryRow(q string, args ...any) *sql.Row {
	return e.s.store.queryRow(context.Background(), q, args...)
}

// exec runs a statement written with ? placeholders on e's database.
func (e *env) exec(q string, args ...any) (sql.Result, error) {
	return e.s.store.db.ExecContext(context.Background(), e.s.store.b.Rebind(q), args...)
}
