// Package sqlitedb opens the pure-Go SQLite databases both planes and the
// seat keep their state in, and applies versioned migrations.
package sqlitedb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Open opens the database at path. An empty path opens a private in-memory
// database that lives as long as the returned *sql.DB.
//
// File databases use WAL with synchronous=FULL, so a committed transaction
// survives a crash of the process or the machine.
//
// Every connection runs with secure_delete, so SQLite overwrites the bytes
// of a deleted row (and of every page it frees) with zeros instead of
// leaving them in free space. The WAL still holds the older page images
// until it is checkpointed and truncated: see [Checkpoint].
func Open(path string) (*sql.DB, error) {
	pragmas := []string{"busy_timeout(10000)", "foreign_keys(1)", "secure_delete(ON)"}
	var dsn string
	if path == "" {
		var name [8]byte
		rand.Read(name[:])
		// SQLite's memdb VFS with a name starting with "/" is shared by
		// every connection of this process and keeps normal file locking,
		// so concurrent transactions wait on busy_timeout instead of
		// failing as shared-cache tables would. It vanishes with the last
		// connection.
		dsn = "file:/skytale-mem-" + hex.EncodeToString(name[:]) + "?vfs=memdb&_txlock=immediate"
	} else {
		pragmas = append(pragmas, "journal_mode(WAL)", "synchronous(FULL)")
		dsn = "file:" + (&url.URL{Path: path}).EscapedPath() + "?_txlock=immediate"
	}
	for _, p := range pragmas {
		dsn += "&_pragma=" + url.QueryEscape(p)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: open: %w", err)
	}
	if path == "" {
		// Keep one connection alive so the memory database is not dropped
		// when the pool goes idle.
		db.SetConnMaxIdleTime(0)
		db.SetMaxIdleConns(4)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitedb: open: %w", err)
	}
	return db, nil
}

// DefaultCheckpointInterval is how often the servers checkpoint their
// SQLite databases ([RunCheckpoints]): the longest a deleted row's bytes
// stay in a WAL file.
const DefaultCheckpointInterval = time.Minute

// Checkpoint copies the WAL of db into the database file and truncates the
// WAL to zero bytes (PRAGMA wal_checkpoint(TRUNCATE)). With secure_delete
// (set by [Open]) a row deleted before the checkpoint then leaves no bytes
// in either file: the database's pages were zeroed, and the WAL frames that
// held the row before its deletion are gone. SQLite's own automatic
// checkpoints do not truncate, so without this the WAL keeps old frames
// until they happen to be overwritten.
//
// It reports whether the checkpoint completed: a reader still on an older
// snapshot leaves it partial (the busy timeout is short here, so a long
// read does not stall the writers), and the next call finishes it. A
// database not in WAL mode (in memory) completes at once.
func Checkpoint(ctx context.Context, db *sql.DB) (bool, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("sqlitedb: checkpoint: %w", err)
	}
	defer c.Close()
	// A truncating checkpoint holds new writers off while it waits for
	// readers; it waits briefly, not for the pool's busy timeout.
	if _, err := c.ExecContext(ctx, "PRAGMA busy_timeout = 200"); err != nil {
		return false, fmt.Errorf("sqlitedb: checkpoint: %w", err)
	}
	defer c.ExecContext(context.WithoutCancel(ctx), "PRAGMA busy_timeout = 10000")
	var busy, logFrames, done int
	if err := c.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		return false, fmt.Errorf("sqlitedb: checkpoint: %w", err)
	}
	return busy == 0, nil
}

// RunCheckpoints calls [Checkpoint] on db every interval until ctx is done,
// passing any error to fail.
func RunCheckpoints(ctx context.Context, db *sql.DB, interval time.Duration, fail func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := Checkpoint(ctx, db); err != nil && ctx.Err() == nil {
				fail(err)
			}
		}
	}
}

// Migrate brings db up to len(migrations). The schema version is kept in
// PRAGMA user_version; migration i (0-based) moves version i to i+1 and runs
// in its own transaction, so a crash never leaves a half-applied step.
// A database newer than the code is an error.
func Migrate(ctx context.Context, db *sql.DB, migrations []string) error {
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("sqlitedb: read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("sqlitedb: schema version %d is newer than this build knows (%d)", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlitedb: migration %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlitedb: migration %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlitedb: migration %d: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlitedb: migration %d: %w", i+1, err)
		}
	}
	return nil
}

// VacuumInto writes a consistent copy of the database file src to dst,
// which must not exist: SQLite's VACUUM INTO, one read transaction, so a
// process writing src goes on writing. The copy is checked to read back
// whole.
func VacuumInto(ctx context.Context, src, dst string) error {
	db, err := Open(src)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return err
	}
	cp, err := Open(dst)
	if err != nil {
		return err
	}
	defer cp.Close()
	var ok string
	if err := cp.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&ok); err != nil {
		return err
	}
	if ok != "ok" {
		return fmt.Errorf("sqlitedb: the copy fails its check: %s", ok)
	}
	return nil
}
