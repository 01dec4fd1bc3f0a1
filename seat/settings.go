package seat

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// Settings returns the settings stored in the home's SQLite file (what
// `tally config` manages). It needs neither a seed nor URLs. A sealed
// setting (this person's name, localseal.go) is opened with the phrase
// file in the home; a home without one leaves it out, as it cannot read
// it, and a value the phrase does not open is an error.
func Settings(ctx context.Context, home string) (map[string]string, error) {
	st, err := openHomeStore(ctx, home)
	if err != nil {
		return nil, err
	}
	defer st.close()
	rows, err := st.db.QueryContext(ctx, `SELECT key, value, typeof(value) = 'blob' FROM settings`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k string
		var v []byte
		var sealed bool
		if err := rows.Scan(&k, &v, &sealed); err != nil {
			return nil, err
		}
		plain, err := st.openSetting(k, v, sealed)
		if errors.Is(err, ErrNoSeed) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = plain
	}
	return out, rows.Err()
}

// SetSetting stores one setting in the home's SQLite file. A sealed
// setting in a home without a phrase file is stored in the clear, and
// sealed when the home gets its phrase.
func SetSetting(ctx context.Context, home, key, value string) error {
	if key == "" {
		return errors.New("seat: empty setting name")
	}
	st, err := openHomeStore(ctx, home)
	if err != nil {
		return err
	}
	defer st.close()
	return st.setSetting(ctx, key, value)
}

// openHomeStore opens home's store with the sealer of its phrase file,
// if it has one.
func openHomeStore(ctx context.Context, home string) (*store, error) {
	st, err := openStore(ctx, home)
	if err != nil {
		return nil, err
	}
	// Deriving the key takes the seed's 2,048 rounds: only for a sealed
	// setting.
	st.local = sync.OnceValues(func() (*localSealer, error) { return homeSealer(home) })
	return st, nil
}

// setting returns the value of the setting key, opened if it is sealed.
func (s *store) setting(ctx context.Context, key string) (string, error) {
	var v []byte
	var sealed bool
	err := s.db.QueryRowContext(ctx, `SELECT value, typeof(value) = 'blob' FROM settings WHERE key = ?`, key).Scan(&v, &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNoValue
	}
	if err != nil {
		return "", err
	}
	return s.openSetting(key, v, sealed)
}

// openSetting opens the value v of the setting key if it is stored
// sealed (a BLOB; a clear value is TEXT, whatever its bytes).
func (s *store) openSetting(key string, v []byte, sealed bool) (string, error) {
	if !sealed {
		return string(v), nil
	}
	l, err := s.sealer()
	if err != nil {
		return "", err
	}
	plain, err := l.open(sealedSetting, key, v)
	return string(plain), err
}

// setSetting stores the setting key, sealed if it is one of those and
// the home has its seed. Without one it stays clear until the home gets
// its phrase (sealLegacy).
func (s *store) setSetting(ctx context.Context, key, value string) error {
	var v any = value
	if sealedSettings[key] {
		l, err := s.sealer()
		if err != nil && !errors.Is(err, ErrNoSeed) {
			return err
		}
		if l != nil {
			v = l.seal(sealedSetting, key, []byte(value))
		}
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO settings(key, value) VALUES (?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, v)
	return err
}
