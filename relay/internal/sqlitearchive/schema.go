package sqlitearchive

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Migrations are the relay's database's (append only): the archive's
// tables and the relay's own (revoked, members, state), which a relay on
// another archive keeps in the same schema.
var Migrations = []string{
	`CREATE TABLE messages (
		id         INTEGER PRIMARY KEY,
		channel    TEXT    NOT NULL,
		seq        INTEGER NOT NULL,
		entry_type INTEGER NOT NULL,
		ts         INTEGER NOT NULL,
		payload    BLOB    NOT NULL
	);
	CREATE UNIQUE INDEX messages_channel_seq ON messages (channel, seq);
	CREATE TABLE channels (
		name     TEXT PRIMARY KEY,
		reserved INTEGER NOT NULL, -- every seq up to here may have been handed out
		epoch    INTEGER           -- the commit epoch expected next; NULL until the first commit
	) WITHOUT ROWID;
	CREATE TABLE revoked (sub TEXT PRIMARY KEY) WITHOUT ROWID;
	CREATE TABLE state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;`,
	// Who published each entry (for the per-account quota), and the
	// channel members the relay learned from the directory's feed (the
	// feed cursor is the state key 'members_after').
	`ALTER TABLE messages ADD COLUMN sub TEXT NOT NULL DEFAULT '';
	CREATE TABLE members (
		channel TEXT NOT NULL,
		sub     TEXT NOT NULL,
		PRIMARY KEY (channel, sub)
	) WITHOUT ROWID;`,
	// The payload bytes each account has stored, as of the last clean
	// shutdown (the state key 'usage_clean' says whether it is current).
	`CREATE TABLE usage (sub TEXT PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID;`,
	// The drop floors of each channel: the highest seq of an application
	// entry (app) and of a handshake entry (hs) the archive deleted, by
	// the cap or the TTL. A read from below a floor is truncated.
	`CREATE TABLE floors (
		channel TEXT PRIMARY KEY,
		app     INTEGER NOT NULL DEFAULT 0,
		hs      INTEGER NOT NULL DEFAULT 0
	) WITHOUT ROWID;`,
	// Where each payload is: in the log (segment seg, at offset at) for a
	// file-backed archive, or in the row (seg NULL) for one in memory and
	// for rows stored before the log. size is the payload's length either
	// way; the quotas and caps count it.
	`ALTER TABLE messages ADD COLUMN seg INTEGER;
	ALTER TABLE messages ADD COLUMN at INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE messages ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
	UPDATE messages SET size = length(payload);
	CREATE INDEX messages_seg ON messages (seg, at) WHERE seg IS NOT NULL;`,
	// No sender per entry: the bytes of a channel's entries are charged
	// to the channel's payer (relay/budget.go), kept once per channel, and the
	// per-entry account goes. The payer of a channel that has entries is
	// the account of its oldest; the figures saved at the last shutdown
	// were per sender, so they are recounted.
	`ALTER TABLE channels ADD COLUMN payer TEXT NOT NULL DEFAULT '';
	UPDATE channels SET payer = coalesce((SELECT m.sub FROM messages m WHERE m.channel = channels.name ORDER BY m.seq LIMIT 1), '');
	ALTER TABLE messages DROP COLUMN sub;
	DELETE FROM usage;
	UPDATE state SET value = 0 WHERE key = 'usage_clean';`,
}

// PageSize is the page size of a new archive file. A transaction
// writes every page it changes whole, and most of the indexer's are small
// (rows of about 100 bytes, the payloads being in the log): SQLite's
// default. (16 KiB served the payloads in the rows; a file made then keeps
// its pages.)
const PageSize = 4096

// setPageSize gives a new, empty database file the archive's page size. The
// page size of a WAL database is fixed, so the file leaves WAL mode for the
// VACUUM that applies it.
func setPageSize(ctx context.Context, c *sql.Conn) error {
	var tables int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil || tables > 0 {
		return err
	}
	for _, q := range []string{"PRAGMA journal_mode=DELETE", fmt.Sprintf("PRAGMA page_size=%d", PageSize), "VACUUM"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			c.ExecContext(ctx, "PRAGMA journal_mode=WAL")
			return err
		}
	}
	var mode string
	if err := c.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil || mode != "wal" {
		return fmt.Errorf("journal mode %q: %v", mode, err)
	}
	return nil
}

// prepare prepares the archive's statements: on the writer's connection
// w those the committer runs, on the pool db those reads run.
func (a *Archive) prepare(ctx context.Context, db *sql.DB, w *sql.Conn) error {
	for _, s := range []struct {
		dst   **sql.Stmt
		query string
		conn  bool
	}{
		// OR ROLLBACK: a row that broke (channel, seq) would be a bug
		// the committer stops on anyway, and with the default ABORT every
		// multi-row INSERT keeps a statement journal, a copy of each page
		// before it changes (16 KiB each), so that it alone could be
		// undone: 4.7 % of the CPU samples of BenchmarkDurable16.
		{&a.insert, `INSERT OR ROLLBACK INTO messages (channel, seq, entry_type, ts, payload, seg, at, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, true},
		{&a.insertN, `INSERT OR ROLLBACK INTO messages (channel, seq, entry_type, ts, payload, seg, at, size) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?),", insertRows), ","), true},
		// The cap counts application entries and handshake entries
		// (commits, proposals, Welcomes) separately, so chat and cover
		// traffic never push out the commits an offline member needs to
		// follow the group; the TTL applies to both.
		// Each delete has a query that sums what it frees per payer (the
		// channels' payers), for the quotas, run just before it. (DELETE ... RETURNING costs
		// three times a plain delete, a sum over the same, cached rows
		// far less.)
		// Application rows up to the evicted mark are gone already, so
		// neither needs to walk past the handshake rows kept below it.
		{&a.evictSum, `SELECT c.payer, sum(m.size) FROM messages m JOIN channels c ON c.name = m.channel
			WHERE m.channel = ? AND m.seq > ? AND m.seq <= ? AND m.entry_type = 0 GROUP BY c.payer`, true},
		{&a.evict, `DELETE FROM messages WHERE channel = ? AND seq > ? AND seq <= ? AND entry_type = 0`, true},
		{&a.loadApp, `SELECT m.seq, c.payer, m.size FROM messages m JOIN channels c ON c.name = m.channel
			WHERE m.channel = ? AND m.entry_type = 0 ORDER BY m.seq DESC LIMIT ?`, true},
		{&a.sweepMax, `SELECT channel, max(seq) FROM messages WHERE id < ? GROUP BY channel`, true},
		// The drop floors rise just before each delete, in its
		// transaction: to the newest application entry at or below ?2,
		// the newest handshake entry below ?2, or, for the TTL sweep,
		// the newest entry of each kind among the rows it deletes.
		{&a.dropApp, `INSERT INTO floors (channel, app) SELECT ?1, s FROM
			(SELECT max(seq) AS s FROM messages WHERE channel = ?1 AND entry_type = 0 AND seq <= ?2) WHERE s IS NOT NULL
			ON CONFLICT (channel) DO UPDATE SET app = max(app, excluded.app)`, true},
		{&a.dropHS, `INSERT INTO floors (channel, hs) SELECT ?1, s FROM
			(SELECT max(seq) AS s FROM messages WHERE channel = ?1 AND entry_type != 0 AND seq < ?2) WHERE s IS NOT NULL
			ON CONFLICT (channel) DO UPDATE SET hs = max(hs, excluded.hs)`, true},
		{&a.dropSweep, `INSERT INTO floors (channel, app, hs)
			SELECT channel, coalesce(max(CASE WHEN entry_type = 0 THEN seq END), 0), coalesce(max(CASE WHEN entry_type != 0 THEN seq END), 0)
			FROM messages WHERE id < ?1 GROUP BY channel
			ON CONFLICT (channel) DO UPDATE SET app = max(app, excluded.app), hs = max(hs, excluded.hs)`, true},
		{&a.dropsQ, `SELECT app, hs FROM floors WHERE channel = ?`, false},
		// The first entry a page could hold (?2 is the TTL cutoff, ?3 the
		// cap floor), and the first row after a seq whether or not a page
		// would show it.
		{&a.oldestApp, `SELECT seq FROM messages WHERE channel = ?1 AND ts >= ?2 AND entry_type = 0 AND seq >= ?3
			ORDER BY seq LIMIT 1`, false},
		{&a.oldestAll, `SELECT seq FROM messages WHERE channel = ?1 AND ts >= ?2 AND (entry_type != 0 OR seq >= ?3)
			ORDER BY seq LIMIT 1`, false},
		{&a.firstApp, `SELECT seq, ts FROM messages WHERE channel = ? AND seq > ? AND entry_type = 0 ORDER BY seq LIMIT 1`, false},
		{&a.firstAll, `SELECT seq, ts FROM messages WHERE channel = ? AND seq > ? ORDER BY seq LIMIT 1`, false},
		{&a.floorQ, `SELECT seq FROM messages WHERE channel = ?1 AND entry_type = 0 ORDER BY seq DESC LIMIT 1 OFFSET ?2 - 1`, false},
		{&a.hsFloor, `SELECT seq FROM messages WHERE channel = ?1 AND entry_type != 0
			ORDER BY seq DESC LIMIT 1 OFFSET ?2 - 1`, true},
		{&a.evictHSSum, `SELECT c.payer, sum(m.size) FROM messages m JOIN channels c ON c.name = m.channel
			WHERE m.channel = ? AND m.entry_type != 0 AND m.seq < ? GROUP BY c.payer`, true},
		{&a.evictHS, `DELETE FROM messages WHERE channel = ? AND entry_type != 0 AND seq < ?`, true},
		{&a.sweepTo, `SELECT coalesce(
			(SELECT id FROM messages WHERE ts >= ?1 ORDER BY id LIMIT 1),
			(SELECT coalesce(max(id), 0) + 1 FROM messages))`, true},
		{&a.sweepSum, `SELECT c.payer, sum(m.size) FROM messages m JOIN channels c ON c.name = m.channel
			WHERE m.id < ? GROUP BY c.payer`, true},
		{&a.sweep, `DELETE FROM messages WHERE id < ?`, true},
		// A channel's payer is set once; "" leaves it as it is.
		{&a.upsert, `INSERT INTO channels (name, reserved, epoch, payer) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET reserved = excluded.reserved, epoch = excluded.epoch,
			payer = CASE WHEN channels.payer = '' THEN excluded.payer ELSE channels.payer END`, true},
		{&a.load, `SELECT reserved, epoch, payer FROM channels WHERE name = ?`, false},
		// Rows past the cap may linger until the committer evicts them in
		// its next chunk, so reads apply the cap themselves: ?5 is the
		// channel's cap floor.
		{&a.readApp, `SELECT seq, entry_type, ts, payload, seg, at, size FROM messages
			WHERE channel = ?1 AND seq > ?2 AND ts >= ?3 AND entry_type = 0 AND seq >= ?5
			ORDER BY seq LIMIT ?4`, false},
		{&a.readAll, `SELECT seq, entry_type, ts, payload, seg, at, size FROM messages
			WHERE channel = ?1 AND seq > ?2 AND ts >= ?3 AND (entry_type != 0 OR seq >= ?5)
			ORDER BY seq LIMIT ?4`, false},
		{&a.setApplied, `INSERT INTO state (key, value) VALUES ('log_seg', ?1), ('log_off', ?2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, true},
		{&a.segUsed, `SELECT 1 FROM messages WHERE seg = ? LIMIT 1`, true},
		// A move applies only to a row still where the compactor read it.
		// A row moved from a segment (seg, at) or from its own payload
		// column (seg NULL, at 0) points at its record; the column empties.
		{&a.moveRow, `UPDATE messages SET seg = ?1, at = ?2, payload = x'' WHERE channel = ?3 AND seq = ?4 AND seg IS ?5 AND at = ?6`, true},
	} {
		var err error
		if s.conn {
			*s.dst, err = w.PrepareContext(ctx, s.query)
		} else {
			*s.dst, err = db.PrepareContext(ctx, s.query)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
