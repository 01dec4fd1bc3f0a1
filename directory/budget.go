package directory

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skytale-oss/skytale/internal/datadir"
)

// Storage budgets.
//
// Every byte a client can make the directory keep counts against four
// budgets at once: its account's (Config.AccountBudget), its account's
// signup group's (GroupBudget: the accounts made from one IPv4 /24 or
// IPv6 /64, signup.go), its account's org's (OrgBudget) and the
// directory's (ServerBudget). The bytes are those of the blobs: the
// key packages of its stock, the Welcomes it delivers to inboxes, the key
// packages of its join requests and the Welcomes it answers them with,
// the GroupInfos and the tree parts it puts. Each is charged to the
// account whose request stored it (a Welcome to its sender, a join
// request's key package to the joiner, the Welcome of a join request to
// the channel's owner, who publishes it). A put that would pass any of
// the four is refused, 413 quota_exceeded with the "scope" of the
// narrowest one passed, and changes nothing; minting accounts buys no
// bytes past the group's and the org's, and no crowd of orgs passes the
// server's.
//
// The budgets are kept as one ledger, the table budget_usage (a row per
// scope and key: an account id, a group id, an org name, and "" for the
// server), changed in the same transaction as the rows it counts: a
// charge is one conditional upsert per scope, which a concurrent charge
// of the same row waits on and then re-checks (PostgreSQL's row lock; on
// SQLite writers never overlap), so two puts racing past a budget never
// both pass. Whatever deletes a counted row (a claim, an accepted or
// declined Welcome, an acknowledged join request, a replaced GroupInfo,
// an evicted tree, a removal, a fence reset, the sweep, the operator's
// removal of an account) gives its bytes back to the budgets of the
// account it was charged to, in the same transaction, so the ledger
// stays exact. An account's org and group never change, so its budgets
// are found again from its row; the operator's removal of an account
// deletes everything charged to it first (removeAccount).
//
// Accounts the operator made (no signup group) count against no group.

// Budget scopes, the "scope" of a quota_exceeded answer.
const (
	scopeAccount = "account"
	scopeGroup   = "group"
	scopeOrg     = "org"
	scopeServer  = "server"
)

// budgetScopes are the scopes from the narrowest to the widest: the order
// of the checks, so the first budget found passed is the one named.
var budgetScopes = []string{scopeAccount, scopeGroup, scopeOrg, scopeServer}

// Defaults of the budgets (Config.AccountBudget, GroupBudget, OrgBudget,
// ServerBudget).
const (
	// DefaultAccountBudget is the default budget of one account: the
	// 256 MiB that held an account's GroupInfos and trees, now over
	// everything it stores (a full key-package stock is 64 MiB of it).
	DefaultAccountBudget = 256 << 20
	// DefaultGroupBudget is the default budget of one signup group, 1 GiB
	// (four accounts' worth), at most a quarter of the server's.
	DefaultGroupBudget = 1 << 30
	// DefaultServerBudgetCap caps the default server budget of a SQLite
	// file: past 256 GiB of key packages and Welcomes an operator chooses.
	DefaultServerBudgetCap = 256 << 30
	// DefaultMemoryBudget is the default server budget of a directory in
	// memory, where the disk says nothing of what fits.
	DefaultMemoryBudget = 1 << 30
	// DefaultPostgresBudget is the default server budget of a directory
	// on a Backend (PostgreSQL), whose disk the directory cannot see:
	// 16 GiB, which an operator sets to what the database's disk holds.
	DefaultPostgresBudget = 16 << 30
	// budgetNear is the share of a budget (in tenths) from which the
	// metrics count it as near its end.
	budgetNear = 9
)

// budgets are the four budgets' sizes in bytes.
type budgets struct {
	account, group, org, server int64
}

func (b *budgets) limit(scope string) int64 {
	switch scope {
	case scopeAccount:
		return b.account
	case scopeGroup:
		return b.group
	case scopeOrg:
		return b.org
	}
	return b.server
}

// resolveBudgets fills the zero budget fields of cfg with their defaults,
// for a directory whose ledger counts stored bytes already and whose
// SQLite file is dbPath ("" in memory), or which is on a Backend
// (PostgreSQL) when backend is set. The
// server's default is a quarter of the data folder's free space plus what
// is stored, at most DefaultServerBudgetCap: the relay beside it defaults
// to half, and the directory's blobs are the smaller share.
func resolveBudgets(cfg *Config, dbPath string, backend bool, stored int64) budgets {
	if cfg.ServerBudget == 0 {
		switch {
		case backend:
			cfg.ServerBudget = DefaultPostgresBudget
		case dbPath == "":
			cfg.ServerBudget = DefaultMemoryBudget
		default:
			cfg.ServerBudget = DefaultMemoryBudget
			if free, ok := datadir.FreeSpace(filepath.Dir(dbPath)); ok {
				cfg.ServerBudget = min((free+stored)/4, DefaultServerBudgetCap)
			}
		}
		cfg.ServerBudget = max(cfg.ServerBudget, 1)
	}
	if cfg.OrgBudget == 0 {
		cfg.OrgBudget = max(cfg.ServerBudget/2, 1)
	}
	if cfg.GroupBudget == 0 {
		cfg.GroupBudget = max(min(DefaultGroupBudget, cfg.ServerBudget/4), 1)
	}
	if cfg.AccountBudget == 0 {
		cfg.AccountBudget = max(min(DefaultAccountBudget, cfg.GroupBudget), 1)
	}
	return budgets{account: cfg.AccountBudget, group: cfg.GroupBudget, org: cfg.OrgBudget, server: cfg.ServerBudget}
}

// quotaError is a put refused because it would pass the budget of scope.
type quotaError struct{ scope string }

func (e *quotaError) Error() string {
	return "directory: the " + e.scope + " storage budget is used up"
}

// errQuota matches every *quotaError with errors.Is.
var errQuota = errors.New("directory: a storage budget is used up")

func (e *quotaError) Is(target error) bool { return target == errQuota }

// usage is what a transaction stores (positive) and frees (negative), in
// bytes, per account charged.
type usage map[string]int64

func (u usage) add(account string, n int64) {
	if n != 0 {
		u[account] += n
	}
}

// charge counts n bytes (negative: gives them back) against account's
// budgets, in tx. Past a budget it is a *quotaError, and the caller's
// transaction must not commit.
func (t txn) charge(ctx context.Context, account string, n int64) error {
	return t.settle(ctx, usage{account: n})
}

// settle applies u to the ledger: the frees first, so that what a put
// replaces makes room for it, then the charges, each in account order.
func (t txn) settle(ctx context.Context, u usage) error {
	accounts := make([]string, 0, len(u))
	for a, n := range u {
		if n != 0 {
			accounts = append(accounts, a)
		}
	}
	slices.Sort(accounts)
	for _, positive := range []bool{false, true} {
		for _, a := range accounts {
			if n := u[a]; (n > 0) == positive {
				if err := t.chargeAccount(ctx, a, n); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// budgetKeys are the ledger keys of an account's four budgets, in the
// order of budgetScopes; a group key is "" for an account with no group.
func budgetKeys(ctx context.Context, q queryer, account string) ([4]string, bool, error) {
	var org, group string
	err := q.queryRow(ctx, `SELECT org, signup_group FROM accounts WHERE id = ?`, account).Scan(&org, &group)
	if errors.Is(err, sql.ErrNoRows) {
		return [4]string{}, false, nil
	}
	if err != nil {
		return [4]string{}, false, err
	}
	return [4]string{account, group, org, ""}, true, nil
}

func (t txn) chargeAccount(ctx context.Context, account string, n int64) error {
	keys, ok, err := budgetKeys(ctx, t, account)
	if err != nil || !ok {
		// An account that is gone was charged nothing it still holds:
		// removeAccount gives back all of it first.
		return err
	}
	var rows []string // "(?, ?)" or "(?, ?, ?)" per scope charged
	var args []any
	var scopes []string
	for i, scope := range budgetScopes {
		if scope == scopeGroup && keys[i] == "" {
			continue
		}
		if n > 0 && n > t.budgets.limit(scope) {
			return &quotaError{scope}
		}
		scopes = append(scopes, scope)
		if n > 0 {
			rows, args = append(rows, "(?, ?, CAST(? AS BIGINT))"), append(args, scope, keys[i], n)
		} else {
			rows, args = append(rows, "(?, ?)"), append(args, scope, keys[i])
		}
	}
	list := strings.Join(rows, ", ")
	if n < 0 {
		return t.free(ctx, list, args, -n)
	}
	// One upsert for the four rows, taken in the order of budgetScopes
	// (so concurrent charges lock them in one order). Each row's
	// condition is checked against the row as committed: a concurrent
	// charge of the same row waits for this one's transaction to end,
	// then re-checks. A row whose budget the charge would pass is left
	// as it is and missing from what the statement returns.
	b := t.budgets
	args = append(args, b.account, b.group, b.org, b.server)
	got, err := t.query(ctx,
		`INSERT INTO budget_usage (scope, key, bytes) VALUES `+list+`
		 ON CONFLICT (scope, key) DO UPDATE SET bytes = budget_usage.bytes + excluded.bytes
		 WHERE budget_usage.bytes + excluded.bytes <= CASE excluded.scope
		   WHEN 'account' THEN CAST(? AS BIGINT) WHEN 'group' THEN CAST(? AS BIGINT) WHEN 'org' THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END
		 RETURNING scope`, args...)
	if err != nil {
		return err
	}
	charged := map[string]bool{}
	for got.Next() {
		var scope string
		if err := got.Scan(&scope); err != nil {
			got.Close()
			return err
		}
		charged[scope] = true
	}
	got.Close()
	if err := got.Err(); err != nil {
		return err
	}
	for _, scope := range scopes {
		if !charged[scope] {
			return &quotaError{scope}
		}
	}
	return nil
}

// free gives n bytes back to the budgets of the rows list names (a list
// of "(?, ?)" with args, scope and key each); a row that reaches zero is
// deleted, so the ledger holds only who holds bytes.
func (t txn) free(ctx context.Context, list string, args []any, n int64) error {
	if _, err := t.exec(ctx,
		`UPDATE budget_usage SET bytes = bytes - CAST(? AS BIGINT) WHERE (scope, key) IN (`+list+`)`, append([]any{n}, args...)...); err != nil {
		return err
	}
	_, err := t.exec(ctx, `DELETE FROM budget_usage WHERE bytes <= 0 AND (scope, key) IN (`+list+`)`, args...)
	return err
}

// freeRows runs q, a DELETE … RETURNING (account, bytes) of counted rows,
// and gives their bytes back, in tx. It returns how many rows q deleted.
func freeRows(ctx context.Context, tx txn, q string, args ...any) (int64, error) {
	rows, err := tx.query(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	u := usage{}
	var n int64
	for rows.Next() {
		var account string
		var size int64
		if err := rows.Scan(&account, &size); err != nil {
			rows.Close()
			return 0, err
		}
		u.add(account, -size)
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, tx.settle(ctx, u)
}

// freeJoinRequests deletes the join requests q selects (a SELECT of ids)
// and gives their bytes back: the key package to the joiner, the Welcome
// to the channel's owner. It returns how many it deleted.
func freeJoinRequests(ctx context.Context, tx txn, where string, args ...any) (int64, error) {
	rows, err := tx.query(ctx,
		`DELETE FROM join_requests WHERE `+where+`
		 RETURNING account_id, LENGTH(key_package), COALESCE(LENGTH(welcome), 0),
		   (SELECT owner_id FROM channels c WHERE c.id = join_requests.channel_id)`, args...)
	if err != nil {
		return 0, err
	}
	u := usage{}
	var n int64
	for rows.Next() {
		var joiner string
		var owner sql.NullString
		var kp, welcome int64
		if err := rows.Scan(&joiner, &kp, &welcome, &owner); err != nil {
			rows.Close()
			return 0, err
		}
		u.add(joiner, -kp)
		if owner.Valid {
			u.add(owner.String, -welcome)
		}
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, tx.settle(ctx, u)
}

// freeAccount deletes everything charged to account, giving its bytes
// back, before the account's row goes (removeAccount): what the row's
// deletion would cascade to (its stock, its inbox, its join requests, its
// trees) and what refers to it without a foreign key (the Welcomes it
// sent, the GroupInfos it put). Whatever the ledger still holds for it
// after that is given back too, so no budget keeps bytes of an account
// that is gone.
func freeAccount(ctx context.Context, tx txn, account string) error {
	if _, err := tx.exec(ctx,
		`DELETE FROM channel_tree_parts WHERE tree_seq IN (SELECT seq FROM channel_trees WHERE uploaded_by = ?)`, account); err != nil {
		return err
	}
	for _, d := range []struct {
		q    string
		args []any
	}{
		{`DELETE FROM key_packages WHERE account_id = ? RETURNING account_id, LENGTH(key_package)`, []any{account}},
		{`DELETE FROM inbox WHERE account_id = ? OR from_id = ? RETURNING from_id, size`, []any{account, account}},
		{`DELETE FROM group_infos WHERE updated_by = ? RETURNING updated_by, LENGTH(group_info)`, []any{account}},
		{`DELETE FROM channel_trees WHERE uploaded_by = ? RETURNING uploaded_by, size`, []any{account}},
	} {
		if _, err := freeRows(ctx, tx, d.q, d.args...); err != nil {
			return err
		}
	}
	if _, err := freeJoinRequests(ctx, tx, `account_id = ?`, account); err != nil {
		return err
	}
	var left int64
	err := tx.queryRow(ctx, `SELECT bytes FROM budget_usage WHERE scope = ? AND key = ?`, scopeAccount, account).Scan(&left)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return tx.charge(ctx, account, -left)
}

// storedBytes is what the ledger counts for the whole directory.
func (s *store) storedBytes(ctx context.Context) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT COALESCE(SUM(bytes), 0) FROM budget_usage WHERE scope = ?`, scopeServer).Scan(&n)
	return n, err
}

// budgetUse is what the metrics show of the budgets: per scope how many
// hold bytes and how many are near their budget, the largest holder, and
// the server's total; never who they are.
type budgetUse struct {
	holders, near [4]int64
	largest       [4]int64
}

func (s *store) budgetUse(ctx context.Context) (budgetUse, error) {
	var u budgetUse
	for i, scope := range budgetScopes {
		limit := s.budgets.limit(scope)
		if err := s.queryRow(ctx,
			`SELECT COUNT(*), COALESCE(SUM(CASE WHEN bytes >= ? THEN 1 ELSE 0 END), 0), COALESCE(MAX(bytes), 0)
			 FROM budget_usage WHERE scope = ?`,
			limit/10*budgetNear, scope).Scan(&u.holders[i], &u.near[i], &u.largest[i]); err != nil {
			return u, err
		}
	}
	return u, nil
}

// quotaMessages are the messages of the quota_exceeded answers, by scope.
var quotaMessages = map[string]string{
	scopeAccount: "the bytes this account has the directory keep (key packages, Welcomes, join requests, GroupInfos, trees) use up its budget; they come back as they are claimed, read, replaced or expire",
	scopeGroup:   "the bytes the accounts signed up from this network have the directory keep use up their shared budget; they come back as they are claimed, read, replaced or expire",
	scopeOrg:     "the bytes the org's accounts have the directory keep use up the org's budget; they come back as they are claimed, read, replaced or expire",
	scopeServer:  "the directory's storage is full; try again once stored key packages and Welcomes are claimed, read or expire",
}

// writeQuotaExceeded answers a put past the budget of scope.
func writeQuotaExceeded(w http.ResponseWriter, scope string) {
	writeJSON(w, http.StatusRequestEntityTooLarge, struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		Scope   string `json:"scope"`
	}{"quota_exceeded", quotaMessages[scope], scope})
}
