package sqlitearchive

import (
	"context"
	"database/sql"
	"errors"
	"slices"
)

// deleteRows adds what the rows a delete will remove hold per account
// (sum's rows of sub and bytes) to freed, then runs the delete, both with
// args. Only the committer deletes, so both see the same rows.
func deleteRows(ctx context.Context, sum, del *sql.Stmt, freed map[string]int64, args ...any) error {
	if err := addFreed(ctx, sum, freed, args...); err != nil {
		return err
	}
	_, err := del.ExecContext(ctx, args...)
	return err
}

// trimHandshakes deletes a channel's handshake entries past the cap, and
// adds what they held per account to freed.
func (a *Archive) trimHandshakes(ctx context.Context, name string, freed map[string]int64) error {
	var below int64
	err := a.hsFloor.QueryRowContext(ctx, name, int64(a.cap)).Scan(&below)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := a.dropHS.ExecContext(ctx, name, below); err != nil {
		return err
	}
	return deleteRows(ctx, a.evictHSSum, a.evictHS, freed, name, below)
}

// sweepTTL deletes entries older than the TTL. ts grows with the row id, so
// the expired rows are exactly those before the first unexpired one.
func (a *Archive) sweepTTL(ctx context.Context) {
	a.swept()
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	var below int64
	err := a.sweepTo.QueryRowContext(ctx, cutoff).Scan(&below)
	freed := make(map[string]int64)
	var cut map[string]uint64
	if err == nil {
		cut, err = a.sweptTo(ctx, below)
	}
	if err == nil {
		// The floors rise first: a sweep that fails after it leaves reads
		// told of a loss that has not happened yet, never the reverse.
		_, err = a.dropSweep.ExecContext(ctx, below)
	}
	if err == nil {
		err = deleteRows(ctx, a.sweepSum, a.sweep, freed, below)
	}
	if err != nil {
		a.log.Error("relay: archive TTL sweep failed", "err", err)
		return
	}
	a.credit(freed)
	// The sweep gave back the bytes of what it deleted, so the blocks
	// that held those rows must not give them back again.
	for name, to := range cut {
		st := a.loaded[name]
		if st == nil {
			continue
		}
		k := 0
		for k < len(st.blocks) && st.blocks[k].last <= to {
			k++
		}
		st.blocks = slices.Delete(st.blocks, 0, k)
		if len(st.blocks) > 0 && st.blocks[0].first <= to {
			st.blocks[0].exact = false
		}
		st.evicted = max(st.evicted, to)
	}
}

// sweptTo returns, per channel, the highest seq the sweep of the rows with
// ids below below deletes.
func (a *Archive) sweptTo(ctx context.Context, below int64) (map[string]uint64, error) {
	rows, err := a.sweepMax.QueryContext(ctx, below)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cut := make(map[string]uint64)
	for rows.Next() {
		var name string
		var seq int64
		if err := rows.Scan(&name, &seq); err != nil {
			return nil, err
		}
		cut[name] = uint64(seq)
	}
	return cut, rows.Err()
}
