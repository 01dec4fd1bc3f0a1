package directory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

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
	errRemoved          = errors.New("directory: the account was removed from the channel")
	errInviteExists     = errors.New("directory: an invite with that token hash exists")
	errOwnerCannotLeave = errors.New("directory: the owner cannot be removed from its channel")
	errOrgTaken         = errors.New("directory: org exists and joining it needs an org invite")
	errOrgInviteInvalid = errors.New("directory: org invite is invalid, expired, used up or for another org")

	errKeyPackageRequired = errors.New("directory: key_package is required unless the invite is an auto invite")
	errNotAMember         = errors.New("directory: caller is neither the owner nor a member of the channel")
	errStockFull          = errors.New("directory: the key-package stock is full")
	errNoKeyPackages      = errors.New("directory: the account has no key packages")
	errSelfClaim          = errors.New("directory: an account cannot claim its own key packages")
	errAlreadyDelivered   = errors.New("directory: a Welcome was already delivered for this claim")
	errInboxFull          = errors.New("directory: the account's inbox is full")
	errNotAllowed         = errors.New("directory: the caller may not add that person")
	errAddTokenInvalid    = errors.New("directory: add-token is invalid, expired, used up or another person's")
	errTooManyAddTokens   = errors.New("directory: too many live add-tokens")
	errOffersRationed     = errors.New("directory: the person's one-time offers for this hour are used up")
	errSenderQuota        = errors.New("directory: the sender's share of the inbox is used up")
	errIdentityNotYours   = errors.New("directory: the device name is not the uploader's identity")
	errStaleEpoch         = errors.New("directory: a GroupInfo of a later epoch is stored")
	errSignupTokenInvalid = errors.New("directory: signup token is invalid, expired or used")
	errSignupNeedsInvite  = errors.New("directory: signup needs an org invite or a signup token")
	errOwnsChannels       = errors.New("directory: the account owns channels")
)

// sqlBool is a boolean as both backends store it (INTEGER 0 or 1).
func sqlBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

// errUnchanged, returned by a write function, rolls its transaction back
// and makes write return nil: the change turned out to be a no-op.
var errUnchanged = errors.New("directory: nothing to change")

// store is the directory's persistent state. Its operations are written
// once, in SQL that every backend speaks (with ? placeholders), and every
// multi-step change (check, consume, insert) is one write transaction.
// What differs between the databases — opening and migrating, how write
// transactions exclude each other, and how the feeds number their rows —
// is the backend's.
type store struct {
	db *sql.DB
	b  Backend

	// Every authenticated request runs one of these; preparing them once
	// saves parsing the SQL per request.
	keyStmt     *sql.Stmt
	accountStmt *sql.Stmt

	// budgets are the storage budgets every charge is checked against
	// (budget.go; tests lower them).
	budgets budgets
	// consent are the claim and inbox limits (consent.go).
	consent consent
}

// Backend is a SQL database, other than the built-in SQLite, that keeps
// the directory's state (Config.Backend): its schema and the few places
// its SQL differs. Package directory/pgstore is PostgreSQL's, which
// several directory processes may share. The store's operations are
// written once, in SQL every backend speaks with ? placeholders; a new
// backend passes the directory's contract tests (contract_test.go) before
// it is used.
//
// The methods are the directory's to call, not an application's.
type Backend interface {
	// Open connects to the database url names and brings its schema up
	// to the directory's, under ctx. The Server closes the *sql.DB when
	// it closes. An error must not quote url: it may hold a password.
	Open(ctx context.Context, url string) (*sql.DB, error)
	// Rebind rewrites a query written with ? placeholders for the
	// database's driver.
	Rebind(q string) string
	// Write runs fn in one write transaction, committed only if fn
	// returns nil, with the isolation the store's operations rely on:
	// reads in fn see every transaction committed before fn's reads, and
	// a row read with LockRow stays as read until fn commits. It may run
	// fn again after a transient conflict, so fn must not keep state
	// from an earlier run.
	Write(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error
	// LockRow is appended to a SELECT of a row the transaction goes on to
	// change (or whose dependents it counts), to hold it until commit.
	LockRow() string
	// InsertionOrder is an expression that orders a table's rows as they
	// were inserted.
	InsertionOrder() string
	// NextID returns the id of the next row of a feed table
	// (channel_events or revocations), assigned so that ids become
	// visible to readers in increasing order with no gaps; 0 means the
	// database assigns it on insert with the same guarantee.
	NextID(ctx context.Context, tx *sql.Tx, feed string) (int64, error)
	// LockKey holds a lock on key until the transaction ends, for checks
	// that span rows (the open device grants of one address).
	LockKey(ctx context.Context, tx *sql.Tx, key string) error
}

// openStore opens the database named by dsn on backend b, or, when b is
// nil, the SQLite file dsn ("" for a private in-memory database).
func openStore(ctx context.Context, dsn string, b Backend) (*store, error) {
	if b == nil {
		b = &sqliteBackend{}
	}
	db, err := b.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	st := &store{db: db, b: b, budgets: budgets{account: DefaultAccountBudget, group: DefaultGroupBudget, org: DefaultMemoryBudget / 2, server: DefaultMemoryBudget},
		consent: defaultConsent}
	if st.keyStmt, err = db.PrepareContext(ctx, b.Rebind(
		`SELECT k.account_id, a.org, k.channel,
		 EXISTS (SELECT 1 FROM revocations r WHERE r.sub = k.account_id OR (k.device <> '' AND r.sub = k.account_id || '#' || k.device)),
		 a.signup_group, a.last_signin, k.device
		 FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = ?`)); err != nil {
		db.Close()
		return nil, fmt.Errorf("directory: prepare: %w", err)
	}
	if st.accountStmt, err = db.PrepareContext(ctx, b.Rebind(
		`SELECT org, EXISTS (SELECT 1 FROM revocations r WHERE r.sub = a.id) FROM accounts a WHERE id = ?`)); err != nil {
		st.keyStmt.Close()
		db.Close()
		return nil, fmt.Errorf("directory: prepare: %w", err)
	}
	return st, nil
}

// isPostgresURL reports whether dsn names a PostgreSQL database.
func isPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

func (s *store) close() error {
	s.keyStmt.Close()
	s.accountStmt.Close()
	return s.db.Close()
}

// storable reports whether s can be a value of a TEXT column on every
// backend: PostgreSQL refuses invalid UTF-8 and NUL. A lookup by a value
// that is not storable finds nothing, on SQLite as on PostgreSQL.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// txn is a write transaction of the store; its queries are written with
// ? placeholders.
type txn struct {
	tx      *sql.Tx
	b       Backend
	budgets *budgets // what charge checks against
}

func (t txn) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.b.Rebind(q), args...)
}

// execN runs q and returns the number of rows it affected.
func (t txn) execN(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t txn) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.b.Rebind(q), args...)
}

func (t txn) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.b.Rebind(q), args...)
}

// queryer runs single-row reads, inside a transaction or not.
type queryer interface {
	queryRow(ctx context.Context, q string, args ...any) *sql.Row
}

func (s *store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return s.db.QueryRowContext(ctx, s.b.Rebind(q), args...)
}

func (s *store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, s.b.Rebind(q), args...)
}

// write runs fn in one write transaction of the backend, committed only if
// fn returns nil (or errUnchanged, which rolls back and returns nil).
func (s *store) write(ctx context.Context, fn func(tx txn) error) error {
	err := s.b.Write(ctx, s.db, func(tx *sql.Tx) error { return fn(txn{tx, s.b, &s.budgets}) })
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// principal is an authenticated caller.
type principal struct {
	account string // account id, the JWT sub
	org     string
	channel string // non-empty for channel-scoped credentials
	// Set by an API key's lookup only: the account's signup group (the
	// JWT grp claim) and the day of its last sign-in (Unix days).
	group      string
	lastSignin int64
	// device is the linked device the credential belongs to (devices.go),
	// "" for the account's own keys.
	device string
}

// lookupKey resolves an API key hash to its account, and reports whether
// the account is revoked.
func (s *store) lookupKey(ctx context.Context, hash []byte) (p principal, revoked bool, err error) {
	err = s.keyStmt.QueryRowContext(ctx, hash).Scan(&p.account, &p.org, &p.channel, &revoked, &p.group, &p.lastSignin, &p.device)
	if errors.Is(err, sql.ErrNoRows) {
		return p, false, errNotFound
	}
	return p, revoked, err
}

// lookupAccount returns the org of an account, and whether it is revoked.
func (s *store) lookupAccount(ctx context.Context, id string) (org string, revoked bool, err error) {
	if !storable(id) {
		return "", false, errNotFound
	}
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
//
// An invite exists only for an org that exists, so a valid invite settles
// both; without one, the org row is inserted unless it is there, and a
// signup that loses the race to create an org finds it taken.
func (s *store) createAccount(ctx context.Context, id, email, org string, orgInvite []byte, anyOrg bool, keyHash []byte, now time.Time) error {
	return s.createAccountAs(ctx, newAccount{id: id, email: email, org: org, orgInvite: orgInvite, anyOrg: anyOrg, keyHash: keyHash}, now)
}

// newAccount is an account to create: besides createAccount's arguments,
// the signup group it joins and the operator's signup token (a hash) it
// spends, if any.
type newAccount struct {
	id, email, org string
	orgInvite      []byte
	anyOrg         bool
	keyHash        []byte
	group          string
	signupToken    []byte
}

// createAccountAs is createAccount for a; a signup token is spent in the
// same transaction (errSignupTokenInvalid when it is unknown, expired or
// spent).
func (s *store) createAccountAs(ctx context.Context, a newAccount, now time.Time) error {
	id, email, org, orgInvite, anyOrg, keyHash := a.id, a.email, a.org, a.orgInvite, a.anyOrg, a.keyHash
	return s.write(ctx, func(tx txn) error {
		if a.signupToken != nil {
			n, err := tx.execN(ctx, `DELETE FROM signup_tokens WHERE hash = ? AND expires_at > ?`, a.signupToken, now.UnixNano())
			if err != nil {
				return err
			}
			if n != 1 {
				return errSignupTokenInvalid
			}
		}
		if orgInvite != nil {
			n, err := tx.execN(ctx,
				`UPDATE org_invites SET uses = uses + 1
				 WHERE hash = ? AND org = ? AND uses < max_uses AND expires_at > ?`,
				orgInvite, org, now.UnixNano())
			if err != nil {
				return err
			}
			if n != 1 {
				return errOrgInviteInvalid
			}
		} else {
			n, err := tx.execN(ctx,
				`INSERT INTO orgs (name, owner_id, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
				org, id, now.UnixNano())
			if err != nil {
				return err
			}
			if n == 0 && !anyOrg {
				return errOrgTaken
			}
		}
		if _, err := tx.exec(ctx,
			`INSERT INTO accounts (id, email, org, created_at, signup_group, last_signin) VALUES (?, ?, ?, ?, ?, ?)`,
			id, email, org, now.UnixNano(), a.group, unixDay(now)); err != nil {
			return err
		}
		_, err := tx.exec(ctx,
			`INSERT INTO api_keys (hash, account_id, channel, created_at) VALUES (?, ?, '', ?)`,
			keyHash, id, now.UnixNano())
		return err
	})
}

// upsertChannel registers name for account, or returns the existing id when
// the account already owns it. The org check is the caller's job. Of two
// transactions registering one name at once, the second waits for the
// first, and then finds its row.
func upsertChannel(ctx context.Context, tx txn, newID, name, account string, now time.Time) (string, error) {
	var id, owner string
	err := tx.queryRow(ctx, `SELECT id, owner_id FROM channels WHERE name = ?`, name).Scan(&id, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		var n int64
		n, err = tx.execN(ctx,
			`INSERT INTO channels (id, name, owner_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			newID, name, account, now.UnixNano())
		if err != nil {
			return "", err
		}
		if n == 1 {
			if _, err := addMember(ctx, tx, newID, name, account, now); err != nil {
				return "", err
			}
			return newID, nil
		}
		err = tx.queryRow(ctx, `SELECT id, owner_id FROM channels WHERE name = ?`, name).Scan(&id, &owner)
	}
	if err != nil {
		return "", err
	}
	if owner != account {
		return "", errChannelTaken
	}
	return id, nil
}

func (s *store) registerChannel(ctx context.Context, newID, name, account string, now time.Time) (id string, err error) {
	err = s.write(ctx, func(tx txn) error {
		id, err = upsertChannel(ctx, tx, newID, name, account, now)
		return err
	})
	return id, err
}

// ownedChannel returns the id of the channel name if account owns it.
func ownedChannel(ctx context.Context, q queryer, name, account string) (string, error) {
	var id, owner string
	err := q.queryRow(ctx, `SELECT id, owner_id FROM channels WHERE name = ?`, name).Scan(&id, &owner)
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

// registerSeat registers identity as a seat of account on channel (creating
// the channel for the account if it does not exist yet) and stores the hash
// of its channel-scoped credential. The seat row goes in first, so of two
// registrations of one identity the second waits for the first and then
// finds it.
func (s *store) registerSeat(ctx context.Context, seatID, newChannelID, identity, account, channel string, keyHash []byte, now time.Time) error {
	return s.write(ctx, func(tx txn) error {
		n, err := tx.execN(ctx,
			`INSERT INTO seats (id, identity, account_id, channel, key_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)
			 ON CONFLICT (identity) DO NOTHING`,
			seatID, identity, account, channel, keyHash, now.UnixNano())
		if err != nil {
			return err
		}
		if n == 0 {
			return errSeatExists
		}
		if _, err := upsertChannel(ctx, tx, newChannelID, channel, account, now); err != nil {
			return err
		}
		_, err = tx.exec(ctx,
			`INSERT INTO api_keys (hash, account_id, channel, created_at) VALUES (?, ?, ?, ?)`,
			keyHash, account, channel, now.UnixNano())
		return err
	})
}

// revoke records sub as revoked; revoking twice is a no-op.
func (s *store) revoke(ctx context.Context, sub string, now time.Time) error {
	return s.write(ctx, func(tx txn) error { return revokeTx(ctx, tx, sub, now) })
}

// revokeTx is revoke within tx.
func revokeTx(ctx context.Context, tx txn, sub string, now time.Time) error {
	{
		id, err := tx.b.NextID(ctx, tx.tx, "revocations")
		if err != nil {
			return err
		}
		if id == 0 {
			_, err := tx.exec(ctx,
				`INSERT INTO revocations (sub, created_at) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM revocations WHERE sub = ?)`,
				sub, now.UnixNano(), sub)
			return err
		}
		n, err := tx.execN(ctx,
			`INSERT INTO revocations (id, sub, created_at) VALUES (?, ?, ?) ON CONFLICT (sub) DO NOTHING`,
			id, sub, now.UnixNano())
		if err == nil && n == 0 {
			err = errUnchanged // give the id back
		}
		return err
	}
}

// revokedSince returns up to limit subs revoked after the cursor, and the
// cursor to pass next time.
func (s *store) revokedSince(ctx context.Context, after int64, limit int) ([]string, int64, error) {
	rows, err := s.query(ctx,
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
// grants that expired more than retention ago, the API keys of grants
// that expired before their credential was delivered, and the membership
// events that a later event of the same account in the same channel
// supersedes (writeEvent deletes them as it writes the later one; these
// are left from a directory that kept them).
func (s *store) sweep(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	cutoff := now.Add(-retention).UnixNano()
	var total int64
	err := s.write(ctx, func(tx txn) error {
		n, err := freeJoinRequests(ctx, tx, `(status = 'completed' AND updated_at < ?) OR (status = 'pending' AND created_at < ?)`, cutoff, cutoff)
		if err != nil {
			return err
		}
		total = n
		stmts := []struct {
			q    string
			args []any
		}{
			{`DELETE FROM invites WHERE expires_at < ?`, []any{cutoff}},
			{`DELETE FROM federation_invites WHERE expires_at < ?`, []any{cutoff}},
			{`DELETE FROM org_invites WHERE expires_at < ?`, []any{cutoff}},
			{`DELETE FROM channel_events WHERE kind IN ('member_added', 'member_removed')
			  AND id NOT IN (SELECT max(id) FROM channel_events WHERE kind IN ('member_added', 'member_removed') GROUP BY channel, account_id)`, nil},
		}
		for _, st := range stmts {
			n, err := tx.execN(ctx, st.q, st.args...)
			if err != nil {
				return err
			}
			total += n
		}
		// A credential approved but not collected in time is withdrawn:
		// the grant row is claimed first (so a poll delivering it at the
		// same moment either wins and keeps its key, or finds it gone),
		// then the key minted for it is deleted.
		rows, err := tx.query(ctx,
			`UPDATE device_grants SET status = 'expired', sealed = NULL, sealed_seat = NULL
			 WHERE status != 'expired' AND sealed IS NOT NULL AND expires_at <= ? RETURNING key_hash`, now.UnixNano())
		if err != nil {
			return err
		}
		var keys [][]byte
		for rows.Next() {
			var k []byte
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		total += int64(len(keys))
		for _, k := range keys {
			n, err := tx.execN(ctx, `DELETE FROM api_keys WHERE hash = ?`, k)
			if err != nil {
				return err
			}
			total += n
		}
		n, err = tx.execN(ctx, `DELETE FROM device_grants WHERE expires_at < ?`, cutoff)
		total += n
		return err
	})
	return total, err
}
