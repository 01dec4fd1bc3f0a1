package directory

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/skytale-oss/skytale/internal/base58"
	"github.com/skytale-oss/skytale/internal/devcert"
)

// Linked devices.
//
// A person's identity key lives on the devices that hold the phrase. A
// linked device holds none of it: it asks for a device grant with two
// public keys of its own (device_key, X25519, what is sealed to it; and
// signing_key, Ed25519, what signs its room leaves), and a device that
// holds the identity approves it with a certificate (internal/devcert)
// signed by the identity key over both keys. The directory checks the
// certificate against the identities the approving account registered
// (POST /v1/seats) and the keys of the grant, mints an API key bound to
// the device (api_keys.device; its tokens carry a "dev" claim) and keeps a
// row of the device for the account's list.
//
// A revocation is a statement signed by the identity key too
// (devcert.Revocation), so a linked device, whose API key acts for the
// same account, can neither link nor revoke: it has no identity key. The
// directory keeps each revocation for the members of the person's rooms,
// who fetch it and refuse the revoked key's leaves for good, and cuts the
// device's API key and tokens at once: its feed entry "<account>#<id>"
// closes its relay sockets.

// Bounds of linked devices.
const (
	// MaxLinkedDevices is how many devices one account may have linked
	// (revoked ones count: their rows are kept for the list).
	MaxLinkedDevices = 50
	// MaxRevocations is how many device revocations one person may have.
	MaxRevocations = 200
)

var (
	errTooManyDevices     = errors.New("directory: too many linked devices")
	errBadCertificate     = errors.New("directory: the device certificate is not valid for this grant")
	errBadRevocation      = errors.New("directory: the revocation is not signed by an identity of this account")
	errLinkNeedsSignature = errors.New("directory: a certificate needs a grant with a signing key")
	errLinkedApprover     = errors.New("directory: a linked device approves only a device that proved it holds the phrase")
)

// deviceID names a linked device: the last 8 characters of its member
// identity (what the seat shows as the device's id).
func deviceID(identity string) string {
	if len(identity) <= 8 {
		return identity
	}
	return identity[len(identity)-8:]
}

// parseSigningKey decodes an optional base64 Ed25519 public key.
func parseSigningKey(s string) ([]byte, bool) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, false
	}
	return b, true
}

// certifyGrant checks that compact is a certificate, by one of account's
// registered identities, of the grant's signing and device keys, and
// returns that identity and the device's member identity.
func (s *store) certifyGrant(ctx context.Context, tx txn, account string, signingKey, deviceKey, compact []byte) (person, identity string, err error) {
	if signingKey == nil {
		return "", "", errLinkNeedsSignature
	}
	rows, err := tx.query(ctx, `SELECT identity FROM seats WHERE account_id = ? ORDER BY created_at LIMIT 20`, account)
	if err != nil {
		return "", "", err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return "", "", err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", "", err
	}
	for _, did := range ids {
		pub, err := parseDIDKey(did)
		if err != nil {
			continue
		}
		c, err := devcert.Parse(pub, signingKey, compact)
		if err != nil || !bytes.Equal(c.HPKEKey, deviceKey) {
			continue
		}
		var revoked bool
		if err := tx.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM device_revocations WHERE person = ? AND signing_key = ?)`,
			did, signingKey).Scan(&revoked); err != nil {
			return "", "", err
		}
		if revoked {
			return "", "", errBadCertificate // a revoked key stays revoked
		}
		return did, devcert.MemberIdentity(did, c), nil
	}
	return "", "", errBadCertificate
}

// linkDevice records a linked device of account in tx and binds the API
// key keyHash to it.
func linkDevice(ctx context.Context, tx txn, account, label, identity string, signingKey, keyHash []byte, now time.Time) error {
	var n int
	if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM devices WHERE account_id = ?`, account).Scan(&n); err != nil {
		return err
	}
	if n >= MaxLinkedDevices {
		return errTooManyDevices
	}
	id := deviceID(identity)
	if _, err := tx.exec(ctx,
		`INSERT INTO devices (account_id, id, label, identity, signing_key, linked_at, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		account, id, label, identity, signingKey, now.UnixNano(), now.UnixNano()); err != nil {
		return err
	}
	_, err := tx.exec(ctx, `UPDATE api_keys SET device = ? WHERE hash = ?`, id, keyHash)
	return err
}

// deviceRevoked reports whether account's linked device id is revoked.
func (s *store) deviceRevoked(ctx context.Context, account, id string) (bool, error) {
	var revoked bool
	err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM revocations WHERE sub = ?)`, account+"#"+id).Scan(&revoked)
	return revoked, err
}

// touchDevice records that a linked device was seen, at most once a
// minute.
func (s *store) touchDevice(ctx context.Context, p principal, now time.Time) error {
	if p.device == "" {
		return nil
	}
	cut := now.Add(-time.Minute).UnixNano()
	var last int64
	err := s.queryRow(ctx, `SELECT last_seen FROM devices WHERE account_id = ? AND id = ?`, p.account, p.device).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) || err == nil && last > cut {
		return nil
	}
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx txn) error {
		_, err := tx.exec(ctx, `UPDATE devices SET last_seen = ? WHERE account_id = ? AND id = ? AND last_seen < ?`,
			now.UnixNano(), p.account, p.device, cut)
		return err
	})
}

type deviceView struct {
	ID       string `json:"id"`
	Label    string `json:"label"`
	Identity string `json:"identity"`
	// SigningKey is the device's Ed25519 key (base64), which its
	// certificate in identity vouches for.
	SigningKey []byte `json:"signing_key"`
	LinkedAt   string `json:"linked_at"`
	LastSeen   string `json:"last_seen"`
	RevokedAt  string `json:"revoked_at,omitempty"`
	// This is set for the device whose credential asked.
	This bool `json:"this,omitempty"`
}

// GET /v1/devices → 200 {devices: [{id, label, identity, signing_key, linked_at, last_seen, revoked_at?, this?}]}
//
// Who: any account-wide credential of the account; on whom: that
// account's own linked devices, nobody else's. At most MaxLinkedDevices
// rows, so one page. A stranger gets 401, a channel-scoped key 403.
func (s *Server) handleListDevices(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	rows, err := s.store.query(r.Context(),
		`SELECT id, label, identity, signing_key, linked_at, last_seen, revoked_at FROM devices WHERE account_id = ? ORDER BY linked_at, id`, p.account)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rows.Close()
	out := []deviceView{}
	for rows.Next() {
		var (
			d                       deviceView
			linked, seen, revokedAt int64
		)
		if err := rows.Scan(&d.ID, &d.Label, &d.Identity, &d.SigningKey, &linked, &seen, &revokedAt); err != nil {
			s.fail(w, r, err)
			return
		}
		d.LinkedAt, d.LastSeen = rfc3339(time.Unix(0, linked)), rfc3339(time.Unix(0, seen))
		if revokedAt > 0 {
			d.RevokedAt = rfc3339(time.Unix(0, revokedAt))
		}
		d.This = d.ID == p.device
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"devices": out})
}

type revokeDeviceRequest struct {
	Revocation string `json:"revocation"`
}

// POST /v1/devices/revocations {revocation} → 200 {revoked: true, device?}
//
// Who: an account-wide credential of the account whose registered
// identity signed the revocation (devcert.Revocation); a linked device,
// which has no identity key, cannot make one, and another account's
// revocation of this person is 403 revocation_not_yours. What it changes:
// the revocation is kept (one per device key, MaxRevocations per person,
// each 140 bytes); a linked device of the account with that key is marked
// revoked, its API key and tokens stop working at once on both planes
// (its relay sockets close), and its join offers in the stock are
// deleted. Revoking again changes nothing.
func (s *Server) handleRevokeDevice(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	var req revokeDeviceRequest
	if !decode(w, r, smallBody, &req) {
		return
	}
	b, ok := decodeB64(w, "revocation", req.Revocation, devcert.RevocationSize)
	if !ok {
		return
	}
	rev, err := devcert.ParseRevocation(b)
	if err != nil {
		badRequest(w, "revocation is not a device revocation signed by the identity it names")
		return
	}
	now := s.cfg.Now()
	var device string
	err = s.store.write(r.Context(), func(tx txn) error {
		device = ""
		did := didKeyOf(rev.Person)
		var mine bool
		if err := tx.queryRow(r.Context(), `SELECT EXISTS (SELECT 1 FROM seats WHERE identity = ? AND account_id = ?)`,
			did, p.account).Scan(&mine); err != nil {
			return err
		}
		if !mine {
			return errBadRevocation
		}
		var have int
		if err := tx.queryRow(r.Context(), `SELECT COUNT(*) FROM device_revocations WHERE person = ?`, did).Scan(&have); err != nil {
			return err
		}
		n, err := tx.execN(r.Context(),
			`INSERT INTO device_revocations (person, signing_key, account_id, revocation, created_at) VALUES (?, ?, ?, ?, ?)
			 ON CONFLICT (person, signing_key) DO NOTHING`, did, []byte(rev.SigningKey), p.account, b, now.UnixNano())
		if err != nil {
			return err
		}
		if n == 1 && have >= MaxRevocations {
			return errTooManyRevocations
		}
		var identity string
		err = tx.queryRow(r.Context(), `SELECT id, identity FROM devices WHERE account_id = ? AND signing_key = ? AND revoked_at = 0`,
			p.account, []byte(rev.SigningKey)).Scan(&device, &identity)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if person, _, _ := devcert.SplitIdentity(identity); person != did {
			// Certified by another identity of the account: only that
			// identity revokes it.
			device = ""
			return nil
		}
		if _, err := tx.exec(r.Context(), `UPDATE devices SET revoked_at = ? WHERE account_id = ? AND id = ?`,
			now.UnixNano(), p.account, device); err != nil {
			return err
		}
		if _, err := tx.exec(r.Context(), `DELETE FROM key_packages WHERE account_id = ? AND device = ?`, p.account, identity); err != nil {
			return err
		}
		return revokeTx(r.Context(), tx, p.account+"#"+device, now)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if device != "" {
		s.metrics.revocation()
	}
	resp := map[string]any{"revoked": true}
	if device != "" {
		resp["device"] = device
	}
	writeJSON(w, http.StatusOK, resp)
}

var errTooManyRevocations = errors.New("directory: too many device revocations")

// GET /v1/devices/revocations?identity=<did:key> → 200 {revocations: [base64, …]}
//
// Who: any authenticated account; on whom: the person the did:key names.
// What it reveals: the revocations that person signed, which every member
// of their rooms needs to refuse revoked devices (how many devices they
// revoked, and when); nothing about accounts. At most MaxRevocations
// entries of 140 bytes, one page.
func (s *Server) handleListRevocations(w http.ResponseWriter, r *http.Request, p principal) {
	did := r.URL.Query().Get("identity")
	if _, err := parseDIDKey(did); err != nil {
		badRequest(w, "identity must be a did:key")
		return
	}
	rows, err := s.store.query(r.Context(),
		`SELECT revocation FROM device_revocations WHERE person = ? ORDER BY created_at LIMIT ?`, did, MaxRevocations)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			s.fail(w, r, err)
			return
		}
		out = append(out, base64.StdEncoding.EncodeToString(b))
	}
	if err := rows.Err(); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"revocations": out})
}

// didKeyOf is the did:key of an Ed25519 public key.
func didKeyOf(pub ed25519.PublicKey) string {
	return didKeyPrefix + base58.Encode(append([]byte{0xed, 0x01}, pub...))
}
