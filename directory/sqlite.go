package directory

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// sqliteMigrations is the SQLite schema history, applied in order and recorded in
// PRAGMA user_version. Append only: never edit a step that has shipped.
//
// Times are Unix nanoseconds (UTC). Every secret (API keys, invite tokens,
// federation tokens, org invite tokens, device poll tokens) is stored as
// its SHA-256 hash only.
var sqliteMigrations = []string{
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
	// Rooms that work when their owner is away: auto invites (whose
	// holder becomes a member at once), each account's key-package stock
	// per device (one-time and at most one last-resort) and the claims
	// made on it, the Welcome inbox of accounts added while offline, and
	// the latest GroupInfo of each channel.
	`
ALTER TABLE invites ADD COLUMN auto INTEGER NOT NULL DEFAULT 0;
ALTER TABLE federation_invites ADD COLUMN auto INTEGER NOT NULL DEFAULT 0;
CREATE TABLE key_packages (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	device      TEXT NOT NULL,
	last_resort INTEGER NOT NULL CHECK (last_resort IN (0, 1)),
	key_package BLOB NOT NULL,
	created_at  INTEGER NOT NULL
);
CREATE INDEX key_packages_stock ON key_packages(account_id, device, last_resort, id);
CREATE UNIQUE INDEX key_packages_last_resort ON key_packages(account_id, device) WHERE last_resort = 1;
CREATE TABLE key_package_claims (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT NOT NULL UNIQUE,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	device      TEXT NOT NULL,
	channel_id  TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	claimed_by  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	last_resort INTEGER NOT NULL CHECK (last_resort IN (0, 1)),
	acked       INTEGER NOT NULL DEFAULT 0,
	delivered   INTEGER NOT NULL DEFAULT 0,
	created_at  INTEGER NOT NULL
);
CREATE INDEX key_package_claims_account ON key_package_claims(account_id, acked, seq);
CREATE INDEX key_package_claims_created ON key_package_claims(created_at);
CREATE TABLE inbox (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	device     TEXT NOT NULL,
	from_id    TEXT NOT NULL,
	welcome    BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX inbox_account ON inbox(account_id, seq);
CREATE INDEX inbox_created ON inbox(created_at);
CREATE TABLE group_infos (
	channel_id TEXT PRIMARY KEY REFERENCES channels(id) ON DELETE CASCADE,
	epoch      INTEGER NOT NULL,
	group_info BLOB NOT NULL,
	updated_by TEXT NOT NULL,
	updated_at INTEGER NOT NULL
);
`,
	// Ratchet trees put out of band for a channel's joiners (tree.go),
	// each in parts, a few per channel, charged to the account that put
	// them.
	`
CREATE TABLE channel_trees (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	channel_id  TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	tree_id     TEXT NOT NULL,
	parts       INTEGER NOT NULL,
	received    INTEGER NOT NULL,
	size        INTEGER NOT NULL,
	uploaded_by TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	created_at  INTEGER NOT NULL,
	UNIQUE (channel_id, tree_id)
);
CREATE INDEX channel_trees_account ON channel_trees(uploaded_by);
CREATE TABLE channel_tree_parts (
	tree_seq INTEGER NOT NULL REFERENCES channel_trees(seq) ON DELETE CASCADE,
	part     INTEGER NOT NULL,
	data     BLOB NOT NULL,
	PRIMARY KEY (tree_seq, part)
);
`,
	// Who joined a channel by an auto invite, under which identity, and
	// the accounts an owner removed: so that a removal by identity ends
	// the account's membership, and an invite from before a removal
	// readmits nobody (members.go).
	`
CREATE TABLE channel_identities (
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	identity   TEXT NOT NULL,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	added_at   INTEGER NOT NULL,
	PRIMARY KEY (channel_id, identity, account_id)
);
CREATE INDEX channel_identities_account ON channel_identities(channel_id, account_id);
CREATE TABLE channel_removals (
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	removed_at INTEGER NOT NULL,
	PRIMARY KEY (channel_id, account_id)
);
`,
	// Consent (contacts.go): the add-tokens a person makes for accounts
	// that share no room or org with them (hash only), an index for the
	// hourly claim limits, and each inbox entry's size, for the per-sender
	// and per-inbox byte bounds.
	`
CREATE TABLE add_tokens (
	id         TEXT PRIMARY KEY,
	hash       BLOB NOT NULL UNIQUE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	max_uses   INTEGER NOT NULL,
	uses       INTEGER NOT NULL DEFAULT 0,
	expires_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX add_tokens_account ON add_tokens(account_id, created_at);
CREATE INDEX key_package_claims_rate ON key_package_claims(account_id, device, created_at);
ALTER TABLE inbox ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
UPDATE inbox SET size = length(welcome);
CREATE INDEX inbox_sender ON inbox(account_id, from_id);
`,
	// What an account put for rooms is counted against its budget and
	// cleared when it leaves, by account (groupinfo.go).
	`
CREATE INDEX group_infos_account ON group_infos(updated_by);
`,
	// Signup (accounts.go): each account's signup group, the keyed hash
	// of the IPv4 /24 or IPv6 /64 it signed up from ('' for accounts the
	// operator made and those made before), never the address; the day
	// of its last sign-in (Unix days, 0 for never), for the operator's
	// list of idle accounts; and the operator's one-use signup tokens,
	// kept as hashes.
	`
ALTER TABLE accounts ADD COLUMN signup_group TEXT NOT NULL DEFAULT '';
ALTER TABLE accounts ADD COLUMN last_signin INTEGER NOT NULL DEFAULT 0;
CREATE TABLE signup_tokens (
	hash       BLOB PRIMARY KEY,
	expires_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
`,
	// A tree is put for an epoch, and each account's tree of an id is its
	// own (tree.go): the table is rebuilt without UNIQUE (channel_id,
	// tree_id), which let whoever put an id first block everyone else's.
	// The parts are copied aside first, since dropping channel_trees would
	// delete them through ON DELETE CASCADE; trees from before have epoch 0.
	`
CREATE TABLE channel_trees_next (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	channel_id  TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	tree_id     TEXT NOT NULL,
	parts       INTEGER NOT NULL,
	received    INTEGER NOT NULL,
	size        INTEGER NOT NULL,
	uploaded_by TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	created_at  INTEGER NOT NULL,
	epoch       INTEGER NOT NULL DEFAULT 0,
	UNIQUE (channel_id, tree_id, uploaded_by)
);
INSERT INTO channel_trees_next (seq, channel_id, tree_id, parts, received, size, uploaded_by, created_at)
	SELECT seq, channel_id, tree_id, parts, received, size, uploaded_by, created_at FROM channel_trees;
CREATE TABLE channel_tree_parts_kept AS SELECT tree_seq, part, data FROM channel_tree_parts;
DROP TABLE channel_tree_parts;
DROP TABLE channel_trees;
ALTER TABLE channel_trees_next RENAME TO channel_trees;
CREATE INDEX channel_trees_account ON channel_trees(uploaded_by);
CREATE TABLE channel_tree_parts (
	tree_seq INTEGER NOT NULL REFERENCES channel_trees(seq) ON DELETE CASCADE,
	part     INTEGER NOT NULL,
	data     BLOB NOT NULL,
	PRIMARY KEY (tree_seq, part)
);
INSERT INTO channel_tree_parts (tree_seq, part, data) SELECT tree_seq, part, data FROM channel_tree_parts_kept;
DROP TABLE channel_tree_parts_kept;
`,
	// Storage budgets (budget.go): the bytes each account, signup group,
	// org and the whole directory are charged for what they store, one
	// row per scope and key, back-filled from what is stored: stock key
	// packages to their account, Welcomes in inboxes to their sender,
	// join requests' key packages to the joiner and their Welcomes to the
	// channel's owner, GroupInfos and trees to who put them. Rows of
	// accounts that are gone count nowhere.
	`
CREATE TABLE budget_usage (
	scope TEXT NOT NULL,
	key   TEXT NOT NULL,
	bytes INTEGER NOT NULL,
	PRIMARY KEY (scope, key)
);
CREATE INDEX budget_usage_bytes ON budget_usage(scope, bytes);
CREATE TEMPORARY TABLE budget_charges AS
	SELECT c.account AS account, a.org AS org, a.signup_group AS grp, SUM(c.bytes) AS bytes FROM (
		SELECT account_id AS account, LENGTH(key_package) AS bytes FROM key_packages
		UNION ALL SELECT from_id, size FROM inbox
		UNION ALL SELECT account_id, LENGTH(key_package) FROM join_requests
		UNION ALL SELECT ch.owner_id, LENGTH(r.welcome) FROM join_requests r JOIN channels ch ON ch.id = r.channel_id WHERE r.welcome IS NOT NULL
		UNION ALL SELECT updated_by, LENGTH(group_info) FROM group_infos
		UNION ALL SELECT uploaded_by, size FROM channel_trees
	) c JOIN accounts a ON a.id = c.account GROUP BY c.account, a.org, a.signup_group;
INSERT INTO budget_usage (scope, key, bytes) SELECT 'account', account, bytes FROM budget_charges WHERE bytes > 0;
INSERT INTO budget_usage (scope, key, bytes) SELECT 'group', grp, SUM(bytes) FROM budget_charges WHERE grp <> '' GROUP BY grp HAVING SUM(bytes) > 0;
INSERT INTO budget_usage (scope, key, bytes) SELECT 'org', org, SUM(bytes) FROM budget_charges GROUP BY org HAVING SUM(bytes) > 0;
INSERT INTO budget_usage (scope, key, bytes) SELECT 'server', '', SUM(bytes) FROM budget_charges HAVING SUM(bytes) > 0;
DROP TABLE budget_charges;
`,
	// Invite-join records lapse (lapse.go): each record keeps the invite
	// it used, so that a lapse gives the use back (once per invite and
	// account, invite_lapses), and each membership
	// says whether an auto invite join alone made it, so that a lapse ends
	// only those. Memberships made in the same instant as an invite-join
	// record of the account were made by that join.
	`
ALTER TABLE channel_identities ADD COLUMN invite_hash BLOB;
ALTER TABLE channel_identities ADD COLUMN invite_fed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE channel_members ADD COLUMN via_invite INTEGER NOT NULL DEFAULT 0;
UPDATE channel_members SET via_invite = 1 WHERE EXISTS (
	SELECT 1 FROM channel_identities i
	WHERE i.channel_id = channel_members.channel_id AND i.account_id = channel_members.account_id
	  AND i.added_at = channel_members.added_at);
CREATE INDEX channel_identities_added ON channel_identities(channel_id, added_at);
CREATE TABLE invite_lapses (
	invite_hash BLOB NOT NULL,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	lapsed_at   INTEGER NOT NULL,
	PRIMARY KEY (invite_hash, account_id)
);
`,
	// Linked devices (devices.go): a device an identity holder certified
	// gets an API key of its own (api_keys.device), a row here, and, once
	// revoked, a revocation signed by the identity, kept for every member
	// to fetch; its feed entry "<account>#<device>" cuts its tokens at the
	// relay. A grant may carry the new device's signing key.
	`
ALTER TABLE api_keys ADD COLUMN device TEXT NOT NULL DEFAULT '';
ALTER TABLE device_grants ADD COLUMN signing_key BLOB;
ALTER TABLE device_grants ADD COLUMN certificate BLOB;
ALTER TABLE device_grants ADD COLUMN person TEXT NOT NULL DEFAULT '';
CREATE TABLE devices (
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	id          TEXT NOT NULL,
	label       TEXT NOT NULL,
	identity    TEXT NOT NULL,
	signing_key BLOB NOT NULL,
	linked_at   INTEGER NOT NULL,
	last_seen   INTEGER NOT NULL DEFAULT 0,
	revoked_at  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (account_id, id)
);
CREATE TABLE device_revocations (
	person      TEXT NOT NULL,
	signing_key BLOB NOT NULL,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	revocation  BLOB NOT NULL,
	created_at  INTEGER NOT NULL,
	PRIMARY KEY (person, signing_key)
);
`,
	// A membership event supersedes the earlier ones of its account and
	// channel, which go as it is written (writeEvent): found by this index.
	`CREATE INDEX channel_events_membership ON channel_events (channel, account_id);`,
}

// sqliteBackend is the default backend: one SQLite file (or a private
// in-memory database), for a directory that runs as one process.
//
// SQLite allows one writer at a time. Write transactions begin IMMEDIATE
// (see sqlitedb.Open), so each takes the write lock before its first read
// and a check-then-consume sequence can never be interleaved with another
// writer's. On top of that every write transaction runs under wmu, so
// writers queue in Go instead of polling in SQLite's busy handler. Since
// writers never overlap, row locks are not needed, and the feeds' ids
// (AUTOINCREMENT) are assigned in commit order.
type sqliteBackend struct {
	wmu sync.Mutex
}

// Open opens and migrates the SQLite file at path ("" for a private
// in-memory database).
func (*sqliteBackend) Open(ctx context.Context, path string) (*sql.DB, error) {
	db, err := sqlitedb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("directory: open database: %w", err)
	}
	if err := sqlitedb.Migrate(ctx, db, sqliteMigrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("directory: migrate database: %w", err)
	}
	return db, nil
}

func (*sqliteBackend) Rebind(q string) string { return q }

func (*sqliteBackend) LockRow() string { return "" }

func (*sqliteBackend) InsertionOrder() string { return "rowid" }

func (b *sqliteBackend) Write(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// NextID leaves the id to AUTOINCREMENT.
func (*sqliteBackend) NextID(context.Context, *sql.Tx, string) (int64, error) { return 0, nil }

// LockKey has nothing to do: the transaction already excludes every other
// writer.
func (*sqliteBackend) LockKey(context.Context, *sql.Tx, string) error { return nil }
