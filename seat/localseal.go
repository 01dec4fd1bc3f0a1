package seat

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
)

// The home's database never holds a room's group secrets or a pending
// KeyPackage's private keys in the clear. They are sealed with AES-256-GCM
// under a key derived from the seed (labelLocalKey), and the associated
// data binds each sealed value to its kind and its row, so a state cannot
// be moved to another room. A copy of the database alone (a backup, a
// synced folder, a stolen disk image without the phrase file) opens no
// room. It does not protect against someone who also has the phrase file
// in the same home, nor against a row put back to an older sealed state of
// the same row (the room's version counter lives in the same database).

// localMagic starts every sealed value.
const localMagic = "SKL1"

// Kinds of sealed values, part of their associated data.
const (
	sealedRoomState  = "room state"
	sealedKeyPackage = "key package"
)

// metaLocalSealed marks a home whose values are all sealed.
const metaLocalSealed = "local_sealed"

var errNotSealed = errors.New("seat: a stored secret is not sealed")

// localSealer seals values stored in the home's database.
type localSealer struct{ aead cipher.AEAD }

// sealer returns the home's sealer, derived from the seed on first use.
func (s *Seat) sealer() (*localSealer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seed == nil {
		return nil, ErrNoSeed
	}
	if s.local == nil {
		block, err := aes.NewCipher(s.seed.derive(labelLocalKey, 32))
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, err
		}
		s.local = &localSealer{aead: aead}
	}
	return s.local, nil
}

func localAD(kind, id string) []byte {
	return []byte(localMagic + "\x00" + kind + "\x00" + id)
}

// seal seals plain as the value of kind for row id.
func (l *localSealer) seal(kind, id string, plain []byte) []byte {
	out := make([]byte, len(localMagic), len(localMagic)+len(plain)+l.aead.Overhead())
	copy(out, localMagic)
	// The random nonce is drawn by Seal and written before the ciphertext.
	return l.aead.Seal(out, nil, plain, localAD(kind, id))
}

// open opens a value sealed as kind for row id.
func (l *localSealer) open(kind, id string, sealed []byte) ([]byte, error) {
	if !bytes.HasPrefix(sealed, []byte(localMagic)) {
		return nil, fmt.Errorf("%w (%s of %s)", errNotSealed, kind, id)
	}
	plain, err := l.aead.Open(nil, nil, sealed[len(localMagic):], localAD(kind, id))
	if err != nil {
		return nil, fmt.Errorf("seat: the stored %s of %s does not open with this home's seed (damaged, or from another home)", kind, id)
	}
	return plain, nil
}

// sealLegacy seals, once, what a home from before sealing stored in the
// clear, in one transaction.
func (s *Seat) sealLegacy(ctx context.Context) error {
	if v, err := s.st.meta(ctx, metaLocalSealed); err == nil && v == "1" {
		return nil
	} else if err != nil && !errors.Is(err, errNoValue) {
		return err
	}
	l, err := s.sealer()
	if err != nil {
		return err
	}
	tx, err := s.st.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	type row struct {
		id    string
		value []byte
	}
	collect := func(q string) ([]row, error) {
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.value); err != nil {
				return nil, err
			}
			if !bytes.HasPrefix(r.value, []byte(localMagic)) {
				out = append(out, r)
			}
		}
		return out, rows.Err()
	}
	for _, t := range []struct{ kind, sel, upd string }{
		{sealedRoomState, `SELECT channel, state FROM rooms WHERE state IS NOT NULL`, `UPDATE rooms SET state = ? WHERE channel = ?`},
		{sealedKeyPackage, `SELECT request_id, private FROM key_packages`, `UPDATE key_packages SET private = ? WHERE request_id = ?`},
	} {
		rows, err := collect(t.sel)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if _, err := tx.ExecContext(ctx, t.upd, l.seal(t.kind, r.id, r.value), r.id); err != nil {
				return err
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, '1')
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, metaLocalSealed); err != nil {
		return err
	}
	return tx.Commit()
}
