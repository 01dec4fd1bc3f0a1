package directory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// migrations is the schema history, applied in order and recorded in
// PRAGMA user_version. Append only: never edit a step that has shipped.
//
// Times are Unix nanoseconds (UTC). Every secret (API keys, invite tokens,
// federation tokens, org invite tokens, device poll tokens) is stored as
// its SHA-256 hash only.
var migrations = []string{
	`
CREATE TABLE accounts (
	id         TEXT PRIMARY KEY,
	email      TEXT NOT NULL,
	org        TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE api_keys (
	hash       BLOB PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	channel    TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
CREATE INDEX api_keys_account ON api_keys(account_id);
CREATE TABLE channels (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	owner_id   TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	created_at INTEGER NOT NULL
);
CREATE TABLE invites (
	hash       BLOB PRIMARY KEY,
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	max_uses   INTEGER NOT NULL,
	uses       INTEGER NOT NULL DEFAULT 0,
	expires_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE federation_invites (
	hash       BLOB PRIMARY KEY,
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	org        TEXT NOT NULL,
	max_uses   INTEGER NOT NULL,
	uses       INTEGER NOT NULL DEFAULT 0,
	expires_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE join_requests (
	id          TEXT PRIMARY KEY,
	channel_id  TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	identity    TEXT NOT NULL,
	key_package BLOB NOT NULL,
	welcome     BLOB,
	status      TEXT NOT NULL CHECK (status IN ('pending', 'completed')),
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);
CREATE INDEX join_requests_queue ON join_requests(channel_id, status, created_at);
CREATE INDEX join_requests_account ON join_requests(account_id);
CREATE TABLE device_grants (
	id          TEXT PRIMARY KEY,
	device_key  BLOB NOT NULL,
	label       TEXT NOT NULL,
	user_code   TEXT NOT NULL UNIQUE,
	poll_hash   BLOB NOT NULL,
	status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'expired')),
	sealed      BLOB,
	key_hash    BLOB,
	approved_by TEXT,
	expires_at  INTEGER NOT NULL,
	created_at  INTEGER NOT NULL
);
CREATE TABLE seats (
	id         TEXT PRIMARY KEY,
	identity   TEXT NOT NULL UNIQUE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	channel    TEXT NOT NULL,
	key_hash   BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE revocations (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	sub        TEXT NOT NULL UNIQUE,
	created_at INTEGER NOT NULL
);
`,
	// The approving device may hand the new device more than the API key
	// (its seat's transport credential): a box sealed to device_key that the
	// directory cannot open, kept until delivered with the credential.
	`ALTER TABLE device_grants ADD COLUMN sealed_seat BLOB;`,
	// Channel members and the channel feed the relay applies. Members are
	// back-filled from what the directory already knew: each channel's
	// owner, and the accounts whose join requests were completed (those
	// not yet acked or swept), each with a member_added event.
	`
CREATE TABLE channel_members (
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	added_at   INTEGER NOT NULL,
	PRIMARY KEY (channel_id, account_id)
);
CREATE INDEX channel_members_account ON channel_members(account_id);
CREATE TABLE channel_events (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	kind       TEXT NOT NULL CHECK (kind IN ('member_added', 'member_removed', 'fence_reset')),
	channel    TEXT NOT NULL,
	account_id TEXT NOT NULL DEFAULT '',
	epoch      INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL
);
INSERT INTO channel_members (channel_id, account_id, added_at)
	SELECT id, owner_id, created_at FROM channels;
INSERT OR IGNORE INTO channel_members (channel_id, account_id, added_at)
	SELECT channel_id, account_id, MIN(updated_at) FROM join_requests
	WHERE status = 'completed' GROUP BY channel_id, account_id;
INSERT INTO channel_events (kind, channel, account_id, epoch, created_at)
	SELECT 'member_added', c.name, m.account_id, 0, m.added_at
	FROM channel_members m JOIN channels c ON c.id = m.channel_id
	ORDER BY m.added_at, c.name, m.account_id;
`,
	// Orgs are owned by their first account; another account joins an
	// existing org only with an org invite. Each existing org is owned by
	// its earliest account.
	`
CREATE TABLE orgs (
	name       TEXT PRIMARY KEY,
	owner_id   TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
INSERT INTO orgs (name, owner_id, created_at)
	SELECT a.org, a.id, a.created_at FROM accounts a
	WHERE a.rowid = (SELECT b.rowid FROM accounts b WHERE b.org = a.org ORDER BY b.created_at, b.rowid LIMIT 1);
CREATE TABLE org_invites (
	hash       BLOB PRIMARY KEY,
	org        TEXT NOT NULL REFERENCES orgs(name) ON DELETE CASCADE,
	created_by TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	max_uses   INTEGER NOT NULL,
	uses       INTEGER NOT NULL DEFAULT 0,
	expires_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
`,
	// The remote address (IPv4, or IPv6 /64) that created each device
	// grant, for the cap on open grants per address.
	`
ALTER TABLE device_grants ADD COLUMN remote TEXT NOT NULL DEFAULT '';
CREATE INDEX device_grants_remote ON device_grants(remote, status, expires_at);
`,
}

// Domain errors returned by the store. The HTTP layer maps each one to a
// status and a stable error code (see errorTable in errors.go).
var (
	errNotFound         = errors.New("directory: not found")
	errChannelNotFound  = errors.New("directory: channel not found")
	errNotOwner         = errors.New("directory: caller does not own the channel")
	errChannelTaken     = errors.New("directory: channel is owned by another account")
	errInviteInvalid    = errors.New("directory: invite token is invalid, expired or used up")
	errFederationDenied = errors.New("directory: federation token is invalid, expired, used up or for another org")
	errTooManyPending   = errors.New("directory: channel has too many pending join requests")
	errSeatExists       = errors.New("directory: seat identity is already registered")
	errGrantNotPending  = errors.New("directory: device grant is already approved")
	errTooManyGrants    = errors.New("directory: too many open device grants from this address")
	errAccountNotFound  = errors.New("directory: account not found")
	errNotMember        = errors.New("directory: caller is not a member of the channel")
	errOwnerCannotLeave = errors.New("directory: the owner cannot be removed from its channel")
	errOrgTaken         = errors.New("directory: org exists and joining it needs an org invite")
	errOrgInviteInvalid = errors.New("directory: org invite is invalid, expired, used up or for another org")
)

// store is the directory's persistent state over SQLite.
//
// SQLite allows one writer at a time. Write transactions begin IMMEDIATE
// (see sqlitedb.Open), so each takes the write lock before its first read
// and a check-then-consume sequence can never be interleaved with another
// writer's. On top of that every write transaction runs under wmu, so
// writers queue in Go instead of polling in SQLite's busy handler. Each
// multi-step change (check, consume, insert) is one such transaction.
type store struct {
	db  *sql.DB
	wmu sync.Mutex

	// Every authenticated request runs one of these; preparing them once
	// saves parsing the SQL per request.
	keyStmt     *sql.Stmt
	accountStmt *sql.Stmt
}

func openStore(ctx context.Context, path string) (*store, error) {
	db, err := sqlitedb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("directory: open database: %w", err)
	}
	if err := sqlitedb.Migrate(ctx, db, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("directory: migrate database: %w", err)
	}
	st := &store{db: db}
	if st.keyStmt, err = db.PrepareContext(ctx,
		`SELECT k.account_id, a.org, k.channel, EXISTS (SELECT 1 FROM revocations r WHERE r.sub = k.account_id)
		 FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = ?`); err != nil {
		db.Close()
		return nil, fmt.Errorf("directory: prepare: %w", err)
	}
	if st.accountStmt, err = db.PrepareContext(ctx,
		`SELECT org, EXISTS (SELECT 1 FROM revocations r WHERE r.sub = a.id) FROM accounts a WHERE id = ?`); err != nil {
		db.Close()
		return nil, fmt.Errorf("directory: prepare: %w", err)
	}
	return st, nil
}

func (s *store) close() error {
	s.keyStmt.Close()
	s.accountStmt.Close()
	return s.db.Close()
}

// write runs fn in one write transaction, committed only if fn returns nil.
func (s *store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// principal is an authenticated caller.
type principal struct {
	account string // account id, the JWT sub
	org     string
	channel string // non-empty for channel-scoped credentials
}

// lookupKey resolves an API key hash to its account, and reports whether
// the account is revoked.
func (s *store) lookupKey(ctx context.Context, hash []byte) (p principal, revoked bool, err error) {
	err = s.keyStmt.QueryRowContext(ctx, hash).Scan(&p.account, &p.org, &p.channel, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return p, false, errNotFound
	}
	return p, revoked, err
}

// lookupAccount returns the org of an account, and whether it is revoked.
func (s *store) lookupAccount(ctx context.Context, id string) (org string, revoked bool, err error) {
	err = s.accountStmt.QueryRowContext(ctx, id).Scan(&org, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, errNotFound
	}
	return org, revoked, err
}

// createAccount creates an account of org with its first API key. An org
// that does not exist yet is created, owned by the new account. Joining an
// existing org consumes one use of orgInvite (the hash of an org invite
// token of that org) in the same transaction; with no invite it is
// errOrgTaken, unless anyOrg (the operator provisioning accounts).
func (s *store) createAccount(ctx context.Context, id, email, org string, orgInvite []byte, anyOrg bool, keyHash []byte, now time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM orgs WHERE name = ?`, org).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if orgInvite != nil {
				return errOrgInviteInvalid // no invite of an org that does not exist
			}
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO orgs (name, owner_id, created_at) VALUES (?, ?, ?)`,
				org, id, now.UnixNano()); err != nil {
				return err
			}
		case err != nil:
			return err
		case orgInvite != nil:
			res, err := tx.ExecContext(ctx,
				`UPDATE org_invites SET uses = uses + 1
				 WHERE hash = ? AND org = ? AND uses < max_uses AND expires_at > ?`,
				orgInvite, org, now.UnixNano())
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n != 1 {
				return errOrgInviteInvalid
			}
		case !anyOrg:
			return errOrgTaken
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO accounts (id, email, org, created_at) VALUES (?, ?, ?, ?)`,
			id, email, org, now.UnixNano()); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO api_keys (hash, account_id, channel, created_at) VALUES (?, ?, '', ?)`,
			keyHash, id, now.UnixNano())
		return err
	})
}

// upsertChannel registers name for account, or returns the existing id when
// the account already owns it. The org check is the caller's job.
func upsertChannel(ctx context.Context, tx *sql.Tx, newID, name, account string, now time.Time) (string, error) {
	var id, owner string
	err := tx.QueryRowContext(ctx, `SELECT id, owner_id FROM channels WHERE name = ?`, name).Scan(&id, &owner)
	switch {
	case err == nil:
		if owner != account {
			return "", errChannelTaken
		}
		return id, nil
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO channels (id, name, owner_id, created_at) VALUES (?, ?, ?, ?)`,
			newID, name, account, now.UnixNano()); err != nil {
			return "", err
		}
		if _, err := addMember(ctx, tx, newID, name, account, now); err != nil {
			return "", err
		}
		return newID, nil
	default:
		return "", err
	}
}

func (s *store) registerChannel(ctx context.Context, newID, name, account string, now time.Time) (id string, err error) {
	err = s.write(ctx, func(tx *sql.Tx) error {
		id, err = upsertChannel(ctx, tx, newID, name, account, now)
		return err
	})
	return id, err
}

// ownedChannel returns the id of the channel name if account owns it.
func ownedChannel(ctx context.Context, q queryer, name, account string) (string, error) {
	var id, owner string
	err := q.QueryRowContext(ctx, `SELECT id, owner_id FROM channels WHERE name = ?`, name).Scan(&id, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errChannelNotFound
	}
	if err != nil {
		return "", err
	}
	if owner != account {
		return "", errNotOwner
	}
	return id, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *store) createInvite(ctx context.Context, channel, account string, hash []byte, maxUses int, expires, now time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		chID, err := ownedChannel(ctx, tx, channel, account)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO invites (hash, channel_id, max_uses, uses, expires_at, created_at) VALUES (?, ?, ?, 0, ?, ?)`,
			hash, chID, maxUses, expires.UnixNano(), now.UnixNano())
		return err
	})
}

// createOrgInvite stores an org invite minted by account, which must
// belong to org.
func (s *store) createOrgInvite(ctx context.Context, org, account string, hash []byte, maxUses int, expires, now time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO org_invites (hash, org, created_by, max_uses, uses, expires_at, created_at) VALUES (?, ?, ?, ?, 0, ?, ?)`,
			hash, org, account, maxUses, expires.UnixNano(), now.UnixNano())
		return err
	})
}

func (s *store) createFederationInvite(ctx context.Context, channel, account, org string, hash []byte, maxUses int, expires, now time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		chID, err := ownedChannel(ctx, tx, channel, account)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO federation_invites (hash, channel_id, org, max_uses, uses, expires_at, created_at) VALUES (?, ?, ?, ?, 0, ?, ?)`,
			hash, chID, org, maxUses, expires.UnixNano(), now.UnixNano())
		return err
	})
}

// joinRequest is one row of the join queue.
type joinRequest struct {
	id         string
	identity   string
	account    string // the requesting account, which the owner adds as a member
	keyPackage []byte
	createdAt  time.Time
}

type joinParams struct {
	id         string
	channel    string
	caller     principal
	inviteHash []byte // nil when fedHash is set
	fedHash    []byte // federation token hash, or nil
	identity   string
	keyPackage []byte
	maxPending int
	now        time.Time
}

// join consumes one use of the invite (or federation invite) and queues the
// join request, atomically: if any step fails nothing is consumed.
func (s *store) join(ctx context.Context, p joinParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var chID string
		err := tx.QueryRowContext(ctx, `SELECT id FROM channels WHERE name = ?`, p.channel).Scan(&chID)
		if errors.Is(err, sql.ErrNoRows) {
			return errChannelNotFound
		}
		if err != nil {
			return err
		}
		now := p.now.UnixNano()
		var res sql.Result
		if p.fedHash != nil {
			res, err = tx.ExecContext(ctx,
				`UPDATE federation_invites SET uses = uses + 1
				 WHERE hash = ? AND channel_id = ? AND org = ? AND uses < max_uses AND expires_at > ?`,
				p.fedHash, chID, p.caller.org, now)
		} else {
			res, err = tx.ExecContext(ctx,
				`UPDATE invites SET uses = uses + 1
				 WHERE hash = ? AND channel_id = ? AND uses < max_uses AND expires_at > ?`,
				p.inviteHash, chID, now)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			if p.fedHash != nil {
				return errFederationDenied
			}
			return errInviteInvalid
		}
		var pending int
		if err := tx.QueryRowContext(ctx,
			`SELECT COUNT(*) FROM join_requests WHERE channel_id = ? AND status = 'pending'`,
			chID).Scan(&pending); err != nil {
			return err
		}
		if pending >= p.maxPending {
			return errTooManyPending
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, status, created_at, updated_at)
			 VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`,
			p.id, chID, p.caller.account, p.identity, p.keyPackage, now, now)
		return err
	})
}

func (s *store) pending(ctx context.Context, channel, account string) ([]joinRequest, error) {
	chID, err := ownedChannel(ctx, s.db, channel, account)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, identity, account_id, key_package, created_at FROM join_requests
		 WHERE channel_id = ? AND status = 'pending' ORDER BY created_at, rowid`, chID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	reqs := []joinRequest{}
	for rows.Next() {
		var r joinRequest
		var created int64
		if err := rows.Scan(&r.id, &r.identity, &r.account, &r.keyPackage, &created); err != nil {
			return nil, err
		}
		r.createdAt = time.Unix(0, created).UTC()
		reqs = append(reqs, r)
	}
	return reqs, rows.Err()
}

// completeRequest stores the Welcome for a pending request of a channel the
// caller owns. scope, when non-empty, restricts the request's channel.
func (s *store) completeRequest(ctx context.Context, id, account, scope string, welcome []byte, now time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var chID, chName, joiner string
		err := tx.QueryRowContext(ctx,
			`UPDATE join_requests SET status = 'completed', welcome = ?, updated_at = ?
			 WHERE id = ? AND status = 'pending' AND channel_id IN (
			   SELECT id FROM channels WHERE owner_id = ? AND (? = '' OR name = ?))
			 RETURNING channel_id, account_id`,
			welcome, now.UnixNano(), id, account, scope, scope).Scan(&chID, &joiner)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT name FROM channels WHERE id = ?`, chID).Scan(&chName); err != nil {
			return err
		}
		// The joiner belongs to the channel from the moment its Welcome
		// is published: it can then take part in the group.
		_, err = addMember(ctx, tx, chID, chName, joiner, now)
		return err
	})
}

// requestStatus returns the status and Welcome of the caller's own request.
func (s *store) requestStatus(ctx context.Context, id, account, scope string) (status string, welcome []byte, err error) {
	err = s.db.QueryRowContext(ctx,
		`SELECT r.status, r.welcome FROM join_requests r JOIN channels c ON c.id = r.channel_id
		 WHERE r.id = ? AND r.account_id = ? AND (? = '' OR c.name = ?)`,
		id, account, scope, scope).Scan(&status, &welcome)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, errNotFound
	}
	return status, welcome, err
}

// ackRequest deletes the caller's own completed request and reports whether
// there was one.
func (s *store) ackRequest(ctx context.Context, id, account, scope string) (bool, error) {
	var acked bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM join_requests WHERE id = ? AND account_id = ? AND status = 'completed'
			 AND (? = '' OR channel_id IN (SELECT id FROM channels WHERE name = ?))`,
			id, account, scope, scope)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		acked = n == 1
		return err
	})
	return acked, err
}

// registerSeat registers identity as a seat of account on channel (creating
// the channel for the account if it does not exist yet) and stores the hash
// of its channel-scoped credential.
func (s *store) registerSeat(ctx context.Context, seatID, newChannelID, identity, account, channel string, keyHash []byte, now time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM seats WHERE identity = ?`, identity).Scan(&one)
		if err == nil {
			return errSeatExists
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := upsertChannel(ctx, tx, newChannelID, channel, account, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO api_keys (hash, account_id, channel, created_at) VALUES (?, ?, ?, ?)`,
			keyHash, account, channel, now.UnixNano()); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO seats (id, identity, account_id, channel, key_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			seatID, identity, account, channel, keyHash, now.UnixNano())
		return err
	})
}

// revoke records sub as revoked; revoking twice is a no-op.
func (s *store) revoke(ctx context.Context, sub string, now time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO revocations (sub, created_at) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM revocations WHERE sub = ?)`,
			sub, now.UnixNano(), sub)
		return err
	})
}

// revokedSince returns up to limit subs revoked after the cursor, and the
// cursor to pass next time.
func (s *store) revokedSince(ctx context.Context, after int64, limit int) ([]string, int64, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, sub FROM revocations WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, after, err
	}
	defer rows.Close()
	subs := []string{}
	next := after
	for rows.Next() {
		var sub string
		if err := rows.Scan(&next, &sub); err != nil {
			return nil, after, err
		}
		subs = append(subs, sub)
	}
	if err := rows.Err(); err != nil {
		return nil, after, err
	}
	return subs, next, nil
}

// sweep deletes join requests completed more than retention ago, pending
// requests created more than retention ago (expired), invites and device
// grants that expired more than retention ago, and the API keys of grants
// that expired before their credential was delivered.
func (s *store) sweep(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	cutoff := now.Add(-retention).UnixNano()
	var total int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmts := []struct {
			q    string
			args []any
		}{
			{`DELETE FROM join_requests WHERE (status = 'completed' AND updated_at < ?) OR (status = 'pending' AND created_at < ?)`, []any{cutoff, cutoff}},
			{`DELETE FROM invites WHERE expires_at < ?`, []any{cutoff}},
			{`DELETE FROM federation_invites WHERE expires_at < ?`, []any{cutoff}},
			{`DELETE FROM org_invites WHERE expires_at < ?`, []any{cutoff}},
			{`DELETE FROM api_keys WHERE hash IN (SELECT key_hash FROM device_grants WHERE status = 'approved' AND sealed IS NOT NULL AND expires_at <= ?)`, []any{now.UnixNano()}},
			{`UPDATE device_grants SET status = 'expired', sealed = NULL, sealed_seat = NULL WHERE status != 'expired' AND sealed IS NOT NULL AND expires_at <= ?`, []any{now.UnixNano()}},
			{`DELETE FROM device_grants WHERE expires_at < ?`, []any{cutoff}},
		}
		for _, st := range stmts {
			res, err := tx.ExecContext(ctx, st.q, st.args...)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			total += n
		}
		return nil
	})
	return total, err
}
