// Package pgstore keeps a directory's state in PostgreSQL, which any
// number of directory processes may share: set directory.Config.Backend
// to Backend{} and directory.Config.Database to the database's URL.
//
//	d, err := directory.New(ctx, directory.Config{
//		Database: "postgres://skytale:secret@db.internal:5432/skytale?sslmode=verify-full",
//		Backend:  pgstore.Backend{},
//		…
//	})
//
// It holds the directory's schema in PostgreSQL's types, applies it on
// start (one directory at a time, under an advisory lock), and says where
// PostgreSQL's SQL differs from SQLite's; the directory's operations are
// written once for both. Package directory does not import it, so a
// program that keeps its directory in SQLite links no PostgreSQL driver.
// docs/POSTGRES.md describes running it.
package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgKeyLocks is the first half of the advisory locks lockKey takes (two
// 32-bit keys, a key space apart from pgMigrationLock's).
const pgKeyLocks = 0x736b79

// pgMaxConns bounds each directory process's connections to PostgreSQL.
const pgMaxConns = 16

// pgMaxAttempts bounds the runs of one write transaction that keeps
// hitting serialization failures or deadlocks.
const pgMaxAttempts = 10

// Backend keeps a directory in PostgreSQL, which several directory
// processes may share: a directory.Backend. It has no state of its own;
// each directory that opens it has its own connections. It goes through pgx's database/sql adapter rather
// than pgx's own API, so that the store's operations are one body of code
// on both backends; pgx still does the wire work underneath (binary
// formats, and each connection caches its prepared statements).
//
// Write transactions run at READ COMMITTED, where each statement sees
// every transaction committed before it began, and a statement that
// finds a row locked by another transaction waits for it and then
// re-checks its condition against the row as committed. The store's
// operations are written so that this is enough: every check that
// guards a change is either in the change's own statement (UPDATE …
// WHERE uses < max_uses, INSERT … ON CONFLICT DO NOTHING, DELETE … WHERE
// status = …) or reads a row locked with lockRow first (the channel of a
// join, the device grant of an approval or a poll), and the cap on open
// grants per address holds an advisory lock on the address. A transaction
// that fails to serialize anyway (a deadlock) is run again, up to
// pgMaxAttempts times.
//
// Its methods are the directory's to call, not an application's.
type Backend struct{}

// poolSettings returns which pool_ settings url sets (as a URL query or
// as key=value words).
func poolSettings(dsn string) map[string]bool {
	set := map[string]bool{}
	if u, err := neturl.Parse(dsn); err == nil && u.Scheme != "" {
		for k := range u.Query() {
			set[k] = true
		}
		return set
	}
	for _, w := range strings.Fields(dsn) {
		if k, _, ok := strings.Cut(w, "="); ok {
			set[k] = true
		}
	}
	return set
}

// Open connects to the database at url (any form pgx parses, with pgxpool's
// pool_ settings) and brings its schema up to date, under ctx. Its errors
// never quote url.
func (Backend) Open(ctx context.Context, url string) (*sql.DB, error) {
	// pgxpool's parser takes the pool settings (pool_max_conns,
	// pool_min_conns, pool_max_conn_lifetime, pool_max_conn_idle_time,
	// pool_health_check_period…) out of the URL; pgx's alone would send
	// them to the server as unknown parameters, which it refuses.
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// Not wrapped: the parser's error quotes the URL, password and all.
		return nil, errors.New("directory: the PostgreSQL URL does not parse (check its pool_ settings too)")
	}
	db := stdlib.OpenDB(*pcfg.ConnConfig)
	set := poolSettings(url)
	maxConns := pgMaxConns
	if set["pool_max_conns"] {
		maxConns = int(pcfg.MaxConns)
	}
	db.SetMaxOpenConns(maxConns)
	// Idle connections are kept up to the maximum. database/sql has no
	// minimum to open ahead, so pool_min_conns (and
	// pool_health_check_period) are checked but have no effect: a broken
	// connection is dropped on its next use.
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if set["pool_max_conn_idle_time"] {
		db.SetConnMaxIdleTime(pcfg.MaxConnIdleTime)
	}
	if set["pool_max_conn_lifetime"] {
		db.SetConnMaxLifetime(pcfg.MaxConnLifetime)
	}

	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("directory: connect to PostgreSQL: %w", err)
	}
	if err := migrate(ctx, db, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("directory: migrate database: %w", err)
	}
	return db, nil
}

// Rebind numbers the ? placeholders of q ($1, $2, …), leaving quoted
// strings alone.
func (Backend) Rebind(q string) string {
	if strings.IndexByte(q, '?') < 0 {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n, quoted := 0, false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// LockRow takes the row lock that an UPDATE of non-key columns takes: it
// excludes other writers of the row but not the foreign key checks of
// rows that refer to it.
func (Backend) LockRow() string { return " FOR NO KEY UPDATE" }

// InsertionOrder is the seq column the tables whose order matters have.
func (Backend) InsertionOrder() string { return "seq" }

// Write runs fn at READ COMMITTED, and again after a serialization
// failure or a deadlock, up to pgMaxAttempts times.
func (Backend) Write(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgRun(ctx, db, fn)
		if err == nil || !pgRetryable(err) || attempt == pgMaxAttempts {
			return err
		}
		// Back off a random while, longer after each conflict, so the
		// transactions that collided do not collide again.
		wait := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func pgRun(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// pgRetryable reports whether err is a conflict that running the
// transaction again can resolve.
func pgRetryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return true
	}
	return false
}

// NextID takes the feed's next id from its row of feed_heads. The UPDATE
// holds that row's lock until the transaction ends, so the transactions
// that write to one feed commit one at a time, in the order of their ids:
// a reader never sees an id before all lower ones are visible, and an id
// taken by a transaction that rolls back is taken again by the next.
// (A sequence would not do: it hands out ids in the order transactions
// ask, and they may commit in another order.)
func (Backend) NextID(ctx context.Context, tx *sql.Tx, feed string) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `UPDATE feed_heads SET last = last + 1 WHERE name = $1 RETURNING last`, feed).Scan(&id)
	return id, err
}

// LockKey takes a transaction-scoped advisory lock on key.
func (Backend) LockKey(ctx context.Context, tx *sql.Tx, key string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(pgKeyLocks), key)
	return err
}
