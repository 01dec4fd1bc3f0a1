package seat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// store is the seat's one SQLite file in its home folder.
type store struct {
	db *sql.DB
	// local returns the home's sealer (localseal.go), or ErrNoSeed. The
	// store seals and opens the values the servers must not see with it;
	// nil in a store opened without a seat.
	local func() (*localSealer, error)
}

var storeMigrations = []string{
	`CREATE TABLE meta (
		key   TEXT PRIMARY KEY,
		value TEXT NOT NULL
	);
	-- The personal log. id is random per entry so merging is idempotent;
	-- pos orders entries as this home first saw them.
	CREATE TABLE log (
		pos        INTEGER PRIMARY KEY AUTOINCREMENT,
		id         BLOB NOT NULL UNIQUE,
		created_at INTEGER NOT NULL,
		text       TEXT NOT NULL,
		pushed     INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX log_unpushed ON log(pushed, pos);
	-- One row per room: its MLS group state and the relay cursor that state
	-- reflects. They are written in one transaction.
	CREATE TABLE rooms (
		channel    TEXT PRIMARY KEY,
		state      BLOB,
		last_seq   INTEGER NOT NULL DEFAULT 0,
		role       TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	-- Key packages this seat published and whose private parts it keeps
	-- until the Welcome arrives.
	CREATE TABLE key_packages (
		request_id TEXT PRIMARY KEY,
		channel    TEXT NOT NULL,
		private    BLOB NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE TABLE room_history (
		channel TEXT NOT NULL,
		seq     INTEGER NOT NULL,
		sender  TEXT NOT NULL,
		text    TEXT NOT NULL,
		ts      INTEGER NOT NULL,
		PRIMARY KEY (channel, seq)
	);`,
	// Settings the user manages with `tally config`.
	`CREATE TABLE settings (
		key   TEXT PRIMARY KEY,
		value TEXT NOT NULL
	);`,
	// A room's version grows with every stored state, so a save can check
	// that nobody stored another state since the load without comparing
	// the (up to megabytes of) state itself.
	`ALTER TABLE rooms ADD COLUMN version INTEGER NOT NULL DEFAULT 0;`,
	// The directory account behind each member identity of a room this
	// seat admitted, so removing the identity can also end the account's
	// channel membership at the directory (and so at the relay).
	`CREATE TABLE room_accounts (
		channel    TEXT NOT NULL,
		identity   TEXT NOT NULL,
		account_id TEXT NOT NULL,
		PRIMARY KEY (channel, identity)
	);`,
	// Notices the seat writes into a room's history (RoomMessage.Kind).
	`ALTER TABLE room_history ADD COLUMN kind TEXT NOT NULL DEFAULT '';`,
	// A room's cipher suite, which never changes, readable without
	// opening its state. Rooms from before had suite 1.
	`ALTER TABLE rooms ADD COLUMN suite INTEGER NOT NULL DEFAULT 1;`,
	// The name this seat last told the room (names.go), and the names
	// people gave, found by kind.
	`ALTER TABLE rooms ADD COLUMN name_sent TEXT NOT NULL DEFAULT '';
	CREATE INDEX room_history_kind ON room_history(channel, kind, seq);`,
	// The claims on this person's join offers the directory reported
	// (contacts.go): who claimed which device's offer, for which channel.
	// The newest maxClaimsKept are kept.
	`CREATE TABLE offer_claims (
		id          TEXT PRIMARY KEY,
		device      TEXT NOT NULL,
		channel     TEXT NOT NULL,
		claimed_by  TEXT NOT NULL,
		last_resort INTEGER NOT NULL,
		at          INTEGER NOT NULL
	);
	CREATE INDEX offer_claims_at ON offer_claims(at);`,
	// The sealed sender and text of a history row, and the sealed text of
	// a log entry (localseal.go); their clear columns stay empty.
	`ALTER TABLE room_history ADD COLUMN body BLOB;
	ALTER TABLE log ADD COLUMN body BLOB;`,
}

func openStore(ctx context.Context, home string) (*store, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("seat: home folder: %w", err)
	}
	path := filepath.Join(home, "seat.db")
	db, err := sqlitedb.Open(path)
	if err != nil {
		return nil, err
	}
	// The database holds credentials: keep it private to the user.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Chmod(p, 0o600)
	}
	if err := sqlitedb.Migrate(ctx, db, storeMigrations); err != nil {
		db.Close()
		return nil, err
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

var errNoValue = errors.New("seat: no value")

// sealer is the home's sealer, or ErrNoSeed.
func (s *store) sealer() (*localSealer, error) {
	if s.local == nil {
		return nil, ErrNoSeed
	}
	return s.local()
}

// meta returns the value of key; the credentials (sealedMetaKeys) are
// opened, and fail without the home's seed.
func (s *store) meta(ctx context.Context, key string) (string, error) {
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNoValue
	}
	if err != nil || !sealedMetaKeys[key] {
		return string(v), err
	}
	l, err := s.sealer()
	if err != nil {
		return "", err
	}
	plain, err := l.open(sealedMeta, key, v)
	return string(plain), err
}

// setMeta sets pairs of keys and values in one transaction, sealing the
// credentials.
func (s *store) setMeta(ctx context.Context, kv ...string) error {
	vals := make([]any, len(kv))
	for i := 0; i+1 < len(kv); i += 2 {
		vals[i+1] = kv[i+1]
		if sealedMetaKeys[kv[i]] {
			l, err := s.sealer()
			if err != nil {
				return err
			}
			vals[i+1] = l.seal(sealedMeta, kv[i], []byte(kv[i+1]))
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i := 0; i+1 < len(kv); i += 2 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?)
			ON CONFLICT(key) DO UPDATE SET value = excluded.value`, kv[i], vals[i+1]); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// sealEntry seals e's text for its log row.
func (l *localSealer) sealEntry(e Entry) []byte {
	return l.seal(sealedLogEntry, logID(e.ID[:], e.CreatedAt.UnixMicro()), []byte(e.Text))
}

func (s *store) appendLog(ctx context.Context, e Entry) error {
	l, err := s.sealer()
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO log(id, created_at, text, body) VALUES (?, ?, '', ?)`,
		e.ID[:], e.CreatedAt.UnixMicro(), l.sealEntry(e))
	return err
}

func (s *store) listLog(ctx context.Context) ([]Entry, error) {
	return s.queryLog(ctx, `SELECT pos, id, created_at, body FROM log ORDER BY created_at, pos`)
}

// unpushed returns the entries this home has not pushed yet, in the order
// it saw them, with the position of the last one.
func (s *store) unpushed(ctx context.Context) ([]Entry, int64, error) {
	var last int64
	es, err := s.queryLogPos(ctx, &last, `SELECT pos, id, created_at, body FROM log WHERE pushed = 0 ORDER BY pos`)
	return es, last, err
}

func (s *store) markPushed(ctx context.Context, upTo int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE log SET pushed = 1 WHERE pushed = 0 AND pos <= ?`, upTo)
	return err
}

func (s *store) queryLog(ctx context.Context, q string, args ...any) ([]Entry, error) {
	var last int64
	return s.queryLogPos(ctx, &last, q, args...)
}

// queryLogPos runs q, which selects pos, id, created_at and body of log
// rows, and opens each entry.
func (s *store) queryLogPos(ctx context.Context, last *int64, q string, args ...any) ([]Entry, error) {
	l, err := s.sealer()
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var id, body []byte
		var us int64
		if err := rows.Scan(last, &id, &us, &body); err != nil {
			return nil, err
		}
		text, err := l.open(sealedLogEntry, logID(id, us), body)
		if err != nil {
			return nil, err
		}
		copy(e.ID[:], id)
		e.CreatedAt = time.UnixMicro(us).UTC()
		e.Text = string(text)
		out = append(out, e)
	}
	return out, rows.Err()
}

// merge adds pulled entries that this home does not have yet, marked as
// pushed (they came from the relay), and advances the pull cursor, in one
// transaction. It returns how many were new.
func (s *store) merge(ctx context.Context, entries []Entry, cursorKey string, seq uint64) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	l, err := s.sealer()
	if err != nil {
		return 0, err
	}
	added := 0
	for _, e := range entries {
		res, err := tx.ExecContext(ctx, `INSERT INTO log(id, created_at, text, body, pushed) VALUES (?, ?, '', ?, 1)
			ON CONFLICT(id) DO NOTHING`, e.ID[:], e.CreatedAt.UnixMicro(), l.sealEntry(e))
		if err != nil {
			return 0, err
		}
		n, _ := res.RowsAffected()
		added += int(n)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, cursorKey, strconv.FormatUint(seq, 10)); err != nil {
		return 0, err
	}
	return added, tx.Commit()
}
