package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations is the PostgreSQL schema history, applied in order and
// recorded in schema_migrations. Append only: never edit a step that has
// shipped.
//
// It is the SQLite schema of the same release in PostgreSQL's types
// (BYTEA, BIGINT), with three differences: join_requests has a seq column
// to keep the queue in insertion order (SQLite has its rowid), the feeds'
// ids are assigned from feed_heads (see Backend.NextID) instead of by
// AUTOINCREMENT, and there is nothing to back-fill.
var migrations = []string{
	`
CREATE TABLE accounts (
	id         TEXT PRIMARY KEY,
	email      TEXT NOT NULL,
	org        TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE api_keys (
	hash       BYTEA PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	channel    TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL
);
CREATE INDEX api_keys_account ON api_keys(account_id);
CREATE TABLE orgs (
	name       TEXT PRIMARY KEY,
	owner_id   TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE org_invites (
	hash       BYTEA PRIMARY KEY,
	org        TEXT NOT NULL REFERENCES orgs(name) ON DELETE CASCADE,
	created_by TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	max_uses   INTEGER NOT NULL,
	uses       INTEGER NOT NULL DEFAULT 0,
	expires_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE channels (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	owner_id   TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	created_at BIGINT NOT NULL
);
CREATE TABLE invites (
	hash       BYTEA PRIMARY KEY,
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	max_uses   INTEGER NOT NULL,
	uses       INTEGER NOT NULL DEFAULT 0,
	expires_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE federation_invites (
	hash       BYTEA PRIMARY KEY,
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	org        TEXT NOT NULL,
	max_uses   INTEGER NOT NULL,
	uses       INTEGER NOT NULL DEFAULT 0,
	expires_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE join_requests (
	seq         BIGINT GENERATED ALWAYS AS IDENTITY,
	id          TEXT PRIMARY KEY,
	channel_id  TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	identity    TEXT NOT NULL,
	key_package BYTEA NOT NULL,
	welcome     BYTEA,
	status      TEXT NOT NULL CHECK (status IN ('pending', 'completed')),
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
CREATE INDEX join_requests_queue ON join_requests(channel_id, status, created_at, seq);
CREATE INDEX join_requests_account ON join_requests(account_id);
CREATE TABLE device_grants (
	id          TEXT PRIMARY KEY,
	device_key  BYTEA NOT NULL,
	label       TEXT NOT NULL,
	user_code   TEXT NOT NULL UNIQUE,
	poll_hash   BYTEA NOT NULL,
	status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'expired')),
	sealed      BYTEA,
	key_hash    BYTEA,
	approved_by TEXT,
	expires_at  BIGINT NOT NULL,
	created_at  BIGINT NOT NULL,
	sealed_seat BYTEA,
	remote      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX device_grants_remote ON device_grants(remote, status, expires_at);
CREATE TABLE seats (
	id         TEXT PRIMARY KEY,
	identity   TEXT NOT NULL UNIQUE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	channel    TEXT NOT NULL,
	key_hash   BYTEA NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE channel_members (
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	added_at   BIGINT NOT NULL,
	PRIMARY KEY (channel_id, account_id)
);
CREATE INDEX channel_members_account ON channel_members(account_id);
CREATE TABLE feed_heads (
	name TEXT PRIMARY KEY,
	last BIGINT NOT NULL
);
INSERT INTO feed_heads (name, last) VALUES ('channel_events', 0), ('revocations', 0);
CREATE TABLE channel_events (
	id         BIGINT PRIMARY KEY,
	kind       TEXT NOT NULL CHECK (kind IN ('member_added', 'member_removed', 'fence_reset')),
	channel    TEXT NOT NULL,
	account_id TEXT NOT NULL DEFAULT '',
	epoch      BIGINT NOT NULL DEFAULT 0,
	created_at BIGINT NOT NULL
);
CREATE TABLE revocations (
	id         BIGINT PRIMARY KEY,
	sub        TEXT NOT NULL UNIQUE,
	created_at BIGINT NOT NULL
);
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
	id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	device      TEXT NOT NULL,
	last_resort INTEGER NOT NULL CHECK (last_resort IN (0, 1)),
	key_package BYTEA NOT NULL,
	created_at  BIGINT NOT NULL
);
CREATE INDEX key_packages_stock ON key_packages(account_id, device, last_resort, id);
CREATE UNIQUE INDEX key_packages_last_resort ON key_packages(account_id, device) WHERE last_resort = 1;
CREATE TABLE key_package_claims (
	seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id          TEXT NOT NULL UNIQUE,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	device      TEXT NOT NULL,
	channel_id  TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	claimed_by  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	last_resort INTEGER NOT NULL CHECK (last_resort IN (0, 1)),
	acked       INTEGER NOT NULL DEFAULT 0,
	delivered   INTEGER NOT NULL DEFAULT 0,
	created_at  BIGINT NOT NULL
);
CREATE INDEX key_package_claims_account ON key_package_claims(account_id, acked, seq);
CREATE INDEX key_package_claims_created ON key_package_claims(created_at);
CREATE TABLE inbox (
	seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         TEXT NOT NULL UNIQUE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	device     TEXT NOT NULL,
	from_id    TEXT NOT NULL,
	welcome    BYTEA NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX inbox_account ON inbox(account_id, seq);
CREATE INDEX inbox_created ON inbox(created_at);
CREATE TABLE group_infos (
	channel_id TEXT PRIMARY KEY REFERENCES channels(id) ON DELETE CASCADE,
	epoch      BIGINT NOT NULL,
	group_info BYTEA NOT NULL,
	updated_by TEXT NOT NULL,
	updated_at BIGINT NOT NULL
);
`,
	// Ratchet trees put out of band for a channel's joiners (tree.go).
	`
CREATE TABLE channel_trees (
	seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	channel_id  TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	tree_id     TEXT NOT NULL,
	parts       INTEGER NOT NULL,
	received    INTEGER NOT NULL,
	size        BIGINT NOT NULL,
	uploaded_by TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	created_at  BIGINT NOT NULL,
	UNIQUE (channel_id, tree_id)
);
CREATE INDEX channel_trees_account ON channel_trees(uploaded_by);
CREATE TABLE channel_tree_parts (
	tree_seq BIGINT NOT NULL REFERENCES channel_trees(seq) ON DELETE CASCADE,
	part     INTEGER NOT NULL,
	data     BYTEA NOT NULL,
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
	added_at   BIGINT NOT NULL,
	PRIMARY KEY (channel_id, identity, account_id)
);
CREATE INDEX channel_identities_account ON channel_identities(channel_id, account_id);
CREATE TABLE channel_removals (
	channel_id TEXT NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	removed_at BIGINT NOT NULL,
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
	hash       BYTEA NOT NULL UNIQUE,
	account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	max_uses   INTEGER NOT NULL,
	uses       INTEGER NOT NULL DEFAULT 0,
	expires_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX add_tokens_account ON add_tokens(account_id, created_at);
CREATE INDEX key_package_claims_rate ON key_package_claims(account_id, device, created_at);
ALTER TABLE inbox ADD COLUMN size BIGINT NOT NULL DEFAULT 0;
UPDATE inbox SET size = octet_length(welcome);
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
ALTER TABLE accounts ADD COLUMN last_signin BIGINT NOT NULL DEFAULT 0;
CREATE TABLE signup_tokens (
	hash       BYTEA PRIMARY KEY,
	expires_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
`,
	// A tree is put for an epoch, and each account's tree of an id is its
	// own (tree.go), so whoever puts an id first blocks nobody else's.
	`
ALTER TABLE channel_trees ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE channel_trees DROP CONSTRAINT channel_trees_channel_id_tree_id_key;
ALTER TABLE channel_trees ADD CONSTRAINT channel_trees_channel_tree_uploader UNIQUE (channel_id, tree_id, uploaded_by);
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
	bytes BIGINT NOT NULL,
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
ALTER TABLE channel_identities ADD COLUMN invite_hash BYTEA;
ALTER TABLE channel_identities ADD COLUMN invite_fed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE channel_members ADD COLUMN via_invite INTEGER NOT NULL DEFAULT 0;
UPDATE channel_members SET via_invite = 1 WHERE EXISTS (
	SELECT 1 FROM channel_identities i
	WHERE i.channel_id = channel_members.channel_id AND i.account_id = channel_members.account_id
	  AND i.added_at = channel_members.added_at);
CREATE INDEX channel_identities_added ON channel_identities(channel_id, added_at);
CREATE TABLE invite_lapses (
	invite_hash BYTEA NOT NULL,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	lapsed_at   BIGINT NOT NULL,
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
ALTER TABLE device_grants ADD COLUMN signing_key BYTEA;
ALTER TABLE device_grants ADD COLUMN certificate BYTEA;
ALTER TABLE device_grants ADD COLUMN person TEXT NOT NULL DEFAULT '';
CREATE TABLE devices (
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	id          TEXT NOT NULL,
	label       TEXT NOT NULL,
	identity    TEXT NOT NULL,
	signing_key BYTEA NOT NULL,
	linked_at   BIGINT NOT NULL,
	last_seen   BIGINT NOT NULL DEFAULT 0,
	revoked_at  BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (account_id, id)
);
CREATE TABLE device_revocations (
	person      TEXT NOT NULL,
	signing_key BYTEA NOT NULL,
	account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	revocation  BYTEA NOT NULL,
	created_at  BIGINT NOT NULL,
	PRIMARY KEY (person, signing_key)
);
`,
	// A membership event supersedes the earlier ones of its account and
	// channel, which go as it is written (writeEvent): found by this index.
	`CREATE INDEX channel_events_membership ON channel_events (channel, account_id);`,
}

// pgMigrationLock is the advisory lock (one 64-bit key, "skytale" in
// ASCII) that directory processes take while they migrate one database.
const pgMigrationLock = 0x736b7974616c65

// migrate brings db up to len(migrations), one migration per
// transaction, each recorded in schema_migrations in the transaction that
// applies it. Every transaction first takes pgMigrationLock, so directory
// processes starting together against one database apply each migration
// once: the others wait, then find it recorded. A database newer than the
// code is an error.
func migrate(ctx context.Context, db *sql.DB, migrations []string) error {
	for {
		done, err := migrateStep(ctx, db, migrations)
		if err != nil || done {
			return err
		}
	}
}

// migrateStep applies the first migration db lacks, or reports that it
// lacks none.
func migrateStep(ctx context.Context, db *sql.DB, migrations []string) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgMigrationLock)); err != nil {
		return false, fmt.Errorf("take the migration lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
	)`); err != nil {
		return false, err
	}
	var version int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return false, fmt.Errorf("schema version %d is newer than this build knows (%d)", version, len(migrations))
	}
	if version == len(migrations) {
		return true, tx.Commit()
	}
	// Without arguments the statement goes by the simple protocol, which
	// runs a migration's several statements in one call.
	if _, err := tx.ExecContext(ctx, migrations[version]); err != nil {
		return false, fmt.Errorf("migration %d: %w", version+1, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, version+1); err != nil {
		return false, fmt.Errorf("migration %d: %w", version+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %d: %w", version+1, err)
	}
	return false, nil
}

// MigrateForTest applies the migrations to db in order up to the first
// one stop reports true for, which it leaves out: for tests that build a
// database of an older release. It is an error if stop reports true for
// none.
func MigrateForTest(ctx context.Context, db *sql.DB, stop func(step string) bool) error {
	for i, m := range migrations {
		if stop(m) {
			return migrate(ctx, db, migrations[:i])
		}
	}
	return errors.New("pgstore: no migration to stop at")
}
