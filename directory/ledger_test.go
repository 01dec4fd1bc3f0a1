package directory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// recountSQL charges every counted byte stored to its account, the way
// budget.go does, from the rows themselves.
const recountSQL = `
SELECT c.account, a.org, a.signup_group, SUM(c.bytes) FROM (
	SELECT account_id AS account, LENGTH(key_package) AS bytes FROM key_packages
	UNION ALL SELECT from_id, size FROM inbox
	UNION ALL SELECT account_id, LENGTH(key_package) FROM join_requests
	UNION ALL SELECT ch.owner_id, LENGTH(r.welcome) FROM join_requests r JOIN channels ch ON ch.id = r.channel_id WHERE r.welcome IS NOT NULL
	UNION ALL SELECT updated_by, LENGTH(group_info) FROM group_infos
	UNION ALL SELECT t.uploaded_by, LENGTH(p.data) FROM channel_tree_parts p JOIN channel_trees t ON t.seq = p.tree_seq
) c JOIN accounts a ON a.id = c.account GROUP BY c.account, a.org, a.signup_group`

// ledger reads budget_usage as "scope/key" → bytes.
func ledger(t testing.TB, s *Server) map[string]int64 {
	t.Helper()
	rows, err := s.store.query(context.Background(), `SELECT scope, key, bytes FROM budget_usage`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var scope, key string
		var n int64
		if err := rows.Scan(&scope, &key, &n); err != nil {
			t.Fatal(err)
		}
		m[scope+"/"+key] = n
	}
	return m
}

// recount is what the ledger must hold: every stored byte counted again.
func recount(t testing.TB, s *Server) map[string]int64 {
	t.Helper()
	rows, err := s.store.query(context.Background(), recountSQL)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int64{}
	add := func(k string, n int64) {
		if n != 0 {
			m[k] += n
		}
	}
	for rows.Next() {
		var account, org, group string
		var n int64
		if err := rows.Scan(&account, &org, &group, &n); err != nil {
			t.Fatal(err)
		}
		add(scopeAccount+"/"+account, n)
		if group != "" {
			add(scopeGroup+"/"+group, n)
		}
		add(scopeOrg+"/"+org, n)
		add(scopeServer+"/", n)
	}
	return m
}

// checkLedger fails the test unless the ledger holds exactly what is
// stored, and no budget holds more than its size.
func checkLedger(t testing.TB, s *Server) {
	t.Helper()
	got, want := ledger(t, s), recount(t, s)
	if !maps.Equal(got, want) {
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(mergeKeys(got, want))) {
			if got[k] != want[k] {
				fmt.Fprintf(&b, "  %s: ledger %d, stored %d\n", k, got[k], want[k])
			}
		}
		t.Errorf("the storage ledger is not what is stored:\n%s", b.String())
	}
	for k, n := range got {
		scope, _, _ := strings.Cut(k, "/")
		if n > s.store.budgets.limit(scope) {
			t.Errorf("%s holds %d bytes, past its budget of %d", k, n, s.store.budgets.limit(scope))
		}
	}
}

func mergeKeys(a, b map[string]int64) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// rebuildLedger sets the ledger to what is stored, for tests that fill
// tables directly, past the store.
func (e *env) rebuildLedger() {
	e.t.Helper()
	if _, err := e.exec(`DELETE FROM budget_usage`); err != nil {
		e.t.Fatal(err)
	}
	for k, n := range recount(e.t, e.s) {
		scope, key, _ := strings.Cut(k, "/")
		if _, err := e.exec(`INSERT INTO budget_usage (scope, key, bytes) VALUES (?, ?, ?)`, scope, key, n); err != nil {
			e.t.Fatal(err)
		}
	}
}
