package seat

import (
	"context"
	"errors"
)

// Settings returns the settings stored in the home's SQLite file (what
// `tally config` manages). It needs neither a seed nor URLs.
func Settings(ctx context.Context, home string) (map[string]string, error) {
	st, err := openStore(ctx, home)
	if err != nil {
		return nil, err
	}
	defer st.close()
	rows, err := st.db.QueryContext(ctx, `SELECT key, value FROM settings`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// SetSetting stores one setting in the home's SQLite file.
func SetSetting(ctx context.Context, home, key, value string) error {
	if key == "" {
		return errors.New("seat: empty setting name")
	}
	st, err := openStore(ctx, home)
	if err != nil {
		return err
	}
	defer st.close()
	_, err = st.db.ExecContext(ctx, `INSERT INTO settings(key, value) VALUES (?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}
