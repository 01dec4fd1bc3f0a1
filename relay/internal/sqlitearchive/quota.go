package sqlitearchive

import (
	"context"
	"database/sql"
	"errors"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// loadUsage restores the bytes each payer (account, org and group; see
// relay/budget.go) has stored. Keeping the
// figures current in the usage table would add a write to every commit,
// the hot path, so the committer keeps them in memory and saves them at a
// clean shutdown (finish). A clean start loads that table, one row per
// account; only after a crash are the figures recomputed, with one pass
// over the archive (BenchmarkOpenRecomputeUsage: about 2 s per million
// rows of 1 KiB on a busy 2-core machine). The clean mark is cleared
// before anything is written, so a crash after this start recomputes too.
func (a *Archive) loadUsage(ctx context.Context) error {
	var clean int64
	err := a.w.QueryRowContext(ctx, `SELECT value FROM state WHERE key = 'usage_clean'`).Scan(&clean)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	// Summed here rather than with GROUP BY, which would sort every row.
	q := `SELECT c.payer, m.size FROM messages m JOIN channels c ON c.name = m.channel`
	if clean == 1 {
		q = `SELECT sub, bytes FROM usage`
	}
	rows, err := a.w.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var sub sql.RawBytes
		var n int64
		if err := rows.Scan(&sub, &n); err != nil {
			return err
		}
		a.usage.Add(backend.ParsePayer(string(sub)), n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if clean == 1 {
		_, err = a.w.ExecContext(ctx, `UPDATE state SET value = 0 WHERE key = 'usage_clean'`)
	}
	return err
}

// charge reserves n bytes of a payer's budgets for a publish; it returns
// the scope of the budget they would pass, or "" once they are reserved.
// Called by the sequencer.
func (a *Archive) charge(payerStr string, n int64) string {
	p := backend.ParsePayer(payerStr)
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	if scope := a.budget.Refuse(p, n, a.usage); scope != "" {
		return scope
	}
	a.usage.Add(p, n)
	return ""
}

// credit returns bytes freed by deletes to their payers' budgets.
func (a *Archive) credit(freed map[string]int64) {
	if len(freed) == 0 {
		return
	}
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	for p, n := range freed {
		a.usage.Add(backend.ParsePayer(p), -n)
	}
}

// Used returns the bytes an account has stored.
func (a *Archive) Used(sub string) int64 {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	return a.usage.Account[sub]
}

func (a *Archive) StoredBytes() int64 {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	return a.usage.Total
}

func (a *Archive) BudgetUse() (backend.BudgetUse, backend.Limits) {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	return a.usage.Use(), a.budget
}

func addFreed(ctx context.Context, stmt *sql.Stmt, freed map[string]int64, args ...any) error {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var sub string
		var n int64
		if err := rows.Scan(&sub, &n); err != nil {
			return err
		}
		freed[sub] += n
	}
	return rows.Err()
}

// saveUsage stores the accounts' usage and marks it current (see
// loadUsage), inside finish's transaction.
func (a *Archive) saveUsage(ctx context.Context) error {
	if _, err := a.w.ExecContext(ctx, `DELETE FROM usage`); err != nil {
		return err
	}
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	for sub, n := range a.usage.Payers {
		if _, err := a.w.ExecContext(ctx, `INSERT INTO usage (sub, bytes) VALUES (?, ?)`, sub, n); err != nil {
			return err
		}
	}
	_, err := a.w.ExecContext(ctx, `INSERT INTO state (key, value) VALUES ('usage_clean', 1)
		ON CONFLICT (key) DO UPDATE SET value = 1`)
	return err
}
