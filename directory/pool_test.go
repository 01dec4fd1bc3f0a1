package directory

import (
	"strings"
	"testing"
)

// TestPostgresPoolSettingsFromURL: the pool settings pgx reads from a
// database URL (pool_max_conns and the others pgxpool.ParseConfig knows)
// are honoured rather than sent to the server as unknown parameters, and
// a malformed one is refused without quoting the URL.
func TestPostgresPoolSettingsFromURL(t *testing.T) {
	u := postgresURL(t)
	e := newEnv(t, func(c *Config) {
		c.Database = u + "&pool_max_conns=3&pool_min_conns=1&pool_max_conn_lifetime=1h&pool_max_conn_idle_time=1m&pool_health_check_period=30s"
	})
	e.account("acme")
	if got := e.s.store.db.Stats().MaxOpenConnections; got != 3 {
		t.Fatalf("max open connections %d, want the URL's 3", got)
	}
	_, err := New(Config{JWTSecret: testJWTSecret, Database: u + "&pool_max_conns=lots&password=hunter2"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a malformed pool_max_conns: %v", err)
	}
}
