package relay

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/relay/internal/backend"
	"github.com/skytale-oss/skytale/relay/internal/sqlitearchive"
)

// The archive behind a relay is a backend.Archiver: where publishes are
// stored and numbered, fenced and delivered, and where the catch-up reads
// come from. Config.Archive chooses it (jsarchive's, on NATS JetStream,
// which several relays share); without one it is the SQLite archive
// (relay/internal/sqlitearchive) in the relay's own database. Both keep
// the guarantees docs/RELAY.md states; the contract tests run against
// each.

// openArchiver opens the archive a Config chooses, in one way for every
// backend: the relay's own state (revocations, members) is in db either
// way.
func openArchiver(ctx context.Context, db *sql.DB, h backend.Hub, counters *relayCounters, cfg *Config) (backend.Archiver, error) {
	if err := archiveDefaults(cfg); err != nil {
		return nil, err
	}
	b := cfg.Archive
	if b == nil {
		b = sqlitearchive.New(sqlitearchive.Config{DB: db, Path: cfg.DBPath, NoSync: cfg.NoSync, Segment: cfg.logSegment})
	} else if err := sqlitedb.Migrate(ctx, db, sqlitearchive.Migrations); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	return b.Open(ctx, backend.Env{
		Hub: h, Logger: cfg.Logger, Now: cfg.Now, Granularity: cfg.TimeGranularity,
		Cap: cfg.ArchiveCap, TTL: cfg.ArchiveTTL, MaxFirstEpoch: cfg.MaxFirstEpoch,
		MaxPayload: MaxPayload, MaxHandshakePayload: MaxHandshakePayload,
		Budgets:         func(stored int64) backend.Limits { return budgetLimits(cfg, stored) },
		ReadyCheckEvery: readyCheckEvery, SweepInterval: sweepInterval(cfg.ArchiveTTL),
		Metrics: counters,
	})
}

// sweepInterval is how often the archives sweep expired entries (and the
// compactor looks at the log's size): every 30 s, or every TTL if shorter.
func sweepInterval(ttl time.Duration) time.Duration { return min(ttl, 30*time.Second) }
