package seat

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The home's database holds nothing the servers must not see in the
// clear. Every such value is sealed with AES-256-GCM under a key derived
// from the seed (labelLocalKey), and the associated data binds it to its
// kind and its row, so a value cannot be moved to another row, room or
// message. A copy of the database alone (a backup, a synced folder, a
// stolen disk image without the phrase file) opens none of them: every
// read of a sealed value fails with [ErrNoSeed] there, and with "does not
// open" under another phrase or after a change.
//
// What is sealed, table by table, and what is not, and why:
//
//   - rooms.state (a room's group secrets) and key_packages.private (a
//     pending join's or a join offer's KeyPackage private keys), bound to
//     the channel and the request id. rooms.name_sent (the name this seat
//     last told the room), bound to the channel.
//   - room_history.body: the sender and the text of every message and
//     notice, bound to the channel, seq, kind and time of its row; the
//     sender and text columns of a sealed row are empty. The names people
//     gave in a room are such notices, so they are sealed with them.
//   - log.body: the personal log's text, bound to the entry id and time;
//     its text column is empty.
//   - meta api_key and seat_credential (the account key and the
//     channel-scoped transport credential), bound to their key. The
//     device key was sealed from the start (devicerooms.go).
//   - settings name (this person's name), bound to its key; one set
//     before the home has a phrase is sealed when it gets one.
//
// Left in the clear because the servers see them anyway and lookups need
// them: channel names (the relay routes by them), relay seqs, times, and
// counts and sizes of rows (the relay archives every entry with its time
// and size); room roles and suites (in the group, which the directory
// sees in GroupInfo); a history row's kind (message, name, removal, gap,
// rejoin: how the seat finds the names); account, org and seat ids, and
// which identity is which account in a room (room_accounts, the
// directory's own records); KeyPackage request ids; the relay cursors;
// the other settings (server URLs, cover traffic).
//
// None of this protects against someone who also has the phrase file in
// the same home, nor against a row put back to an older sealed value of
// the same row (the room's version counter lives in the same database),
// nor against a row deleted whole.

// localMagic starts every sealed value.
const localMagic = "SKL1"

// Kinds of sealed values, part of their associated data.
const (
	sealedRoomState  = "room state"
	sealedKeyPackage = "key package"
	sealedMessage    = "room message"
	sealedLogEntry   = "log entry"
	sealedMeta       = "credential"
	sealedNameSent   = "name sent"
	sealedSetting    = "setting"
)

// sealedMetaKeys are the meta values the store seals (store.meta and
// store.setMeta open and seal them). A key added here needs localVersion
// raised, so that homes already marked seal their clear value of it.
var sealedMetaKeys = map[string]bool{"api_key": true, "seat_credential": true}

// sealedSettings are the settings sealed like them (the same rule).
var sealedSettings = map[string]bool{SettingName: true}

// metaLocalSealed holds the sealing round a home has been through: "1"
// sealed room states and KeyPackage keys; 2 also history, the log,
// credentials and names. A round seals everything of the rounds before
// it that is still clear.
const (
	metaLocalSealed = "local_sealed"
	localVersion    = 2
)

var errNotSealed = errors.New("seat: a stored secret is not sealed")

// localSealer seals values stored in the home's database.
type localSealer struct{ aead cipher.AEAD }

func newLocalSealer(seed *Seed) (*localSealer, error) {
	k := seed.derive(labelLocalKey, 32)
	defer clear(k)
	return newLocalSealerKey(k)
}

// newLocalSealerKey is the sealer of a 32-byte key.
func newLocalSealerKey(key []byte) (*localSealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	return &localSealer{aead: aead}, nil
}

// sealer returns the home's sealer, derived from the seed on first use.
// A home without a phrase has none: everything sealed stays shut.
func (s *Seat) sealer() (*localSealer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local != nil {
		return s.local, nil
	}
	if s.seed == nil && s.linked != nil {
		l, err := linkedSealer(s.linked.secret)
		if err != nil {
			return nil, err
		}
		s.local = l
		return l, nil
	}
	if s.seed == nil {
		return nil, ErrNoSeed
	}
	if s.local == nil {
		l, err := newLocalSealer(s.seed)
		if err != nil {
			return nil, err
		}
		s.local = l
	}
	return s.local, nil
}

// homeSealer is the sealer of the phrase file in home, for the functions
// that open a home's store without a seat (settings.go). ErrNoSeed if
// the home has no phrase file.
func homeSealer(home string) (*localSealer, error) {
	b, err := os.ReadFile(filepath.Join(home, "phrase"))
	if errors.Is(err, os.ErrNotExist) {
		if secret, err := readLinkSecret(home); err == nil {
			return linkedSealer(secret)
		}
		return nil, ErrNoSeed
	}
	if err != nil {
		return nil, err
	}
	p, err := ParsePhrase(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("seat: the phrase file in the home folder is damaged: %w", err)
	}
	return newLocalSealer(p.Seed())
}

func localAD(kind, id string) []byte {
	return []byte(localMagic + "\x00" + kind + "\x00" + id)
}

// seal seals plain as the value of kind for row id.
func (l *localSealer) seal(kind, id string, plain []byte) []byte {
	return l.sealAD(localAD(kind, id), plain)
}

func (l *localSealer) sealAD(ad, plain []byte) []byte {
	out := make([]byte, len(localMagic), len(localMagic)+len(plain)+l.aead.Overhead())
	copy(out, localMagic)
	// The random nonce is drawn by Seal and written before the ciphertext.
	return l.aead.Seal(out, nil, plain, ad)
}

// open opens a value sealed as kind for row id.
func (l *localSealer) open(kind, id string, sealed []byte) ([]byte, error) {
	plain, ok, err := l.openAD(nil, localAD(kind, id), sealed)
	if !ok {
		return nil, openError(err, kind, id)
	}
	return plain, nil
}

// openAD appends to dst what sealed opens to with the associated data
// ad. When it does not open, err is errNotSealed for a value without the
// magic, nil for one that fails its check.
func (l *localSealer) openAD(dst, ad, sealed []byte) (plain []byte, ok bool, err error) {
	if !bytes.HasPrefix(sealed, []byte(localMagic)) {
		return nil, false, errNotSealed
	}
	plain, err = l.aead.Open(dst, nil, sealed[len(localMagic):], ad)
	return plain, err == nil, nil
}

// openError is the error for a value of kind for row id that did not
// open, with err from openAD.
func openError(err error, kind, id string) error {
	if err != nil {
		return fmt.Errorf("%w (%s of %s)", err, kind, id)
	}
	return fmt.Errorf("seat: the stored %s of %s does not open with this home's seed (damaged, moved, or from another home)", kind, id)
}

// messageAD appends to dst the associated data of a history row: as
// localAD of kind sealedMessage, with everything of the row that stays in
// the clear as its id.
func messageAD(dst []byte, ch string, seq uint64, kind string, ts int64) []byte {
	dst = append(dst, localMagic+"\x00"+sealedMessage+"\x00"...)
	dst = append(append(dst, ch...), 0)
	dst = append(strconv.AppendUint(dst, seq, 10), 0)
	dst = append(append(dst, kind...), 0)
	return strconv.AppendInt(dst, ts, 10)
}

// sealMessage seals m's sender and text for its history row.
func (l *localSealer) sealMessage(m RoomMessage) []byte {
	plain := binary.AppendUvarint(nil, uint64(len(m.Sender)))
	plain = append(append(plain, m.Sender...), m.Text...)
	return l.sealAD(messageAD(nil, m.Room, m.Seq, m.Kind, m.Time.UnixMilli()), plain)
}

// openBuf is scratch space for opening many history rows in turn.
type openBuf struct{ ad, plain []byte }

// openMessage fills in m's sender and text from the sealed body of its
// history row (m's room, seq and kind, and ts, as stored).
func (l *localSealer) openMessage(m *RoomMessage, ts int64, body []byte, buf *openBuf) error {
	what := func() string { return fmt.Sprintf("%s seq %d", m.Room, m.Seq) }
	buf.ad = messageAD(buf.ad[:0], m.Room, m.Seq, m.Kind, ts)
	plain, ok, err := l.openAD(buf.plain[:0], buf.ad, body)
	if !ok {
		return openError(err, sealedMessage, what())
	}
	buf.plain = plain
	n, k := binary.Uvarint(plain)
	if k <= 0 || n > uint64(len(plain)-k) {
		return fmt.Errorf("seat: the stored %s of %s is malformed", sealedMessage, what())
	}
	m.Sender, m.Text = string(plain[k:k+int(n)]), string(plain[k+int(n):])
	return nil
}

// logID names a log entry in its associated data.
func logID(id []byte, createdAt int64) string {
	return hex.EncodeToString(id) + "\x00" + strconv.FormatInt(createdAt, 10)
}

// sealLegacy brings a home up to localVersion: it seals, once, in one
// transaction, whatever an older home stored in the clear, and then marks
// the home. Values already sealed are left as they are, so the step can
// run again (a mark lost, a crash before the mark) without harm. The clear
// bytes must not linger in the files: the cells they were in are zeroed
// (secure_delete), the database is rewritten (VACUUM) and the
// write-ahead log emptied after the commit.
func (s *Seat) sealLegacy(ctx context.Context) error {
	if v, err := s.st.meta(ctx, metaLocalSealed); err == nil && v == strconv.Itoa(localVersion) {
		return nil
	} else if err != nil && !errors.Is(err, errNoValue) {
		return err
	}
	l, err := s.sealer()
	if err != nil {
		return err
	}
	conn, err := s.st.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA secure_delete = ON`); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA secure_delete = OFF`)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, step := range []func(context.Context, *sql.Tx, *localSealer) error{sealLegacySecrets, sealLegacyHistory, sealLegacyLog} {
		if err := step(ctx, tx, l); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	// Free pages and the slack of pages keep what older homes wrote and
	// moved or deleted without secure_delete: VACUUM writes the database
	// anew, and the checkpoint copies it over the old pages and empties
	// the write-ahead log. The mark comes last, so a home whose rewrite
	// failed (another process holding it) is rewritten on its next open.
	if _, err := conn.ExecContext(ctx, `VACUUM`); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, metaLocalSealed, strconv.Itoa(localVersion))
	return err
}

// sealLegacySecrets seals the single values kept in the clear: room
// states, KeyPackage private keys, credentials, the names sent to rooms
// and this person's name.
func sealLegacySecrets(ctx context.Context, tx *sql.Tx, l *localSealer) error {
	type row struct {
		id    string
		value []byte
	}
	// byType: the column is TEXT, so a clear value is TEXT and a sealed
	// one a BLOB whatever its bytes; else a clear value lacks the magic.
	for _, t := range []struct {
		kind, sel, upd string
		byType         bool
		only           map[string]bool
	}{
		{kind: sealedRoomState, sel: `SELECT channel, state FROM rooms WHERE state IS NOT NULL`, upd: `UPDATE rooms SET state = ? WHERE channel = ?`},
		{kind: sealedKeyPackage, sel: `SELECT request_id, private FROM key_packages`, upd: `UPDATE key_packages SET private = ? WHERE request_id = ?`},
		{kind: sealedNameSent, sel: `SELECT channel, name_sent FROM rooms WHERE typeof(name_sent) = 'text' AND name_sent <> ''`, upd: `UPDATE rooms SET name_sent = ? WHERE channel = ?`, byType: true},
		{kind: sealedMeta, sel: `SELECT key, value FROM meta WHERE typeof(value) = 'text'`, upd: `UPDATE meta SET value = ? WHERE key = ?`, byType: true, only: sealedMetaKeys},
		{kind: sealedSetting, sel: `SELECT key, value FROM settings WHERE typeof(value) = 'text'`, upd: `UPDATE settings SET value = ? WHERE key = ?`, byType: true, only: sealedSettings},
	} {
		rows, err := collectRows(ctx, tx, t.sel, func(rows *sql.Rows, r *row) error { return rows.Scan(&r.id, &r.value) })
		if err != nil {
			return err
		}
		for _, r := range rows {
			if (t.only != nil && !t.only[r.id]) || (!t.byType && bytes.HasPrefix(r.value, []byte(localMagic))) {
				continue
			}
			if _, err := tx.ExecContext(ctx, t.upd, l.seal(t.kind, r.id, r.value), r.id); err != nil {
				return err
			}
		}
	}
	return nil
}

// sealLegacyHistory seals the history rows kept in the clear (no body).
func sealLegacyHistory(ctx context.Context, tx *sql.Tx, l *localSealer) error {
	type row struct {
		m  RoomMessage
		ts int64
	}
	clear, err := collectRows(ctx, tx, `SELECT channel, seq, sender, text, ts, kind FROM room_history WHERE body IS NULL`,
		func(rows *sql.Rows, r *row) error {
			return rows.Scan(&r.m.Room, &r.m.Seq, &r.m.Sender, &r.m.Text, &r.ts, &r.m.Kind)
		})
	if err != nil {
		return err
	}
	for _, r := range clear {
		r.m.Time = time.UnixMilli(r.ts)
		if _, err := tx.ExecContext(ctx, `UPDATE room_history SET body = ?, sender = '', text = '' WHERE channel = ? AND seq = ?`,
			l.sealMessage(r.m), r.m.Room, r.m.Seq); err != nil {
			return err
		}
	}
	return nil
}

// sealLegacyLog seals the log entries kept in the clear (no body).
func sealLegacyLog(ctx context.Context, tx *sql.Tx, l *localSealer) error {
	type row struct {
		pos, at int64
		id      []byte
		text    string
	}
	clear, err := collectRows(ctx, tx, `SELECT pos, id, created_at, text FROM log WHERE body IS NULL`,
		func(rows *sql.Rows, r *row) error { return rows.Scan(&r.pos, &r.id, &r.at, &r.text) })
	if err != nil {
		return err
	}
	for _, r := range clear {
		if _, err := tx.ExecContext(ctx, `UPDATE log SET body = ?, text = '' WHERE pos = ?`,
			l.seal(sealedLogEntry, logID(r.id, r.at), []byte(r.text)), r.pos); err != nil {
			return err
		}
	}
	return nil
}

// collectRows reads every row of query in tx with scan, closing the rows
// before it returns, so that the caller may write in tx while it walks
// them.
func collectRows[T any](ctx context.Context, tx *sql.Tx, query string, scan func(*sql.Rows, *T) error) ([]T, error) {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
