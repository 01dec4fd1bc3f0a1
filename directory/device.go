package directory

import (
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/hpke"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skytale-oss/skytale/internal/devcert"
	"github.com/skytale-oss/skytale/internal/httpx"
)

// GrantInfo is the HPKE info string binding a sealed device credential to
// its purpose. The suite is DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
// AES-128-GCM; sealed_credential is base64(enc || ciphertext).
const GrantInfo = "skytale device grant v1"

// userCodeAlphabet has no vowels (no words) and no look-alikes.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

const (
	userCodeLen = 8
	maxLabel    = 128
	// MaxSealedSeat bounds the optional sealed_seat box of an approval
	// (decoded bytes): the seat pads the box to a bucket of at most 16 KiB
	// before it seals it, and HPKE adds its encapsulated key and tag.
	MaxSealedSeat = 16<<10 + 64
)

// SealCredential seals an API key to a device's X25519 public key the way
// the directory does for an approved device grant.
func SealCredential(deviceKey *ecdh.PublicKey, credential string) ([]byte, error) {
	pk, err := hpke.NewDHKEMPublicKey(deviceKey)
	if err != nil {
		return nil, err
	}
	return hpke.Seal(pk, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte(GrantInfo), []byte(credential))
}

// OpenCredential opens a sealed_credential (already base64-decoded) with the
// device's X25519 private key.
func OpenCredential(deviceKey *ecdh.PrivateKey, sealed []byte) (string, error) {
	k, err := hpke.NewDHKEMPrivateKey(deviceKey)
	if err != nil {
		return "", err
	}
	pt, err := hpke.Open(k, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte(GrantInfo), sealed)
	if err != nil {
		return "", errors.New("directory: sealed credential does not open with this key")
	}
	return string(pt), nil
}

// parseDeviceKey accepts a base64 X25519 public key that is not a low-order
// point (a DH with it must not give the all-zero secret).
func parseDeviceKey(s string, rand io.Reader) (*ecdh.PublicKey, bool) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, false
	}
	pub, err := ecdh.X25519().NewPublicKey(b)
	if err != nil {
		return nil, false
	}
	probe, err := ecdh.X25519().GenerateKey(rand)
	if err != nil {
		return nil, false
	}
	if _, err := probe.ECDH(pub); err != nil {
		return nil, false
	}
	return pub, true
}

func (s *Server) newUserCode() (string, error) {
	var out [userCodeLen]byte
	var b [1]byte
	for i := 0; i < len(out); {
		if _, err := io.ReadFull(s.cfg.Rand, b[:]); err != nil {
			return "", fmt.Errorf("directory: read random: %w", err)
		}
		if b[0] >= 240 { // reject to keep the choice uniform over 20 letters
			continue
		}
		out[i] = userCodeAlphabet[b[0]%20]
		i++
	}
	return string(out[:4]) + "-" + string(out[4:]), nil
}

// normalizeUserCode accepts any case, with or without the hyphen.
func normalizeUserCode(c string) (string, bool) {
	c = strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(c))
	if len(c) != userCodeLen {
		return "", false
	}
	for i := 0; i < len(c); i++ {
		if strings.IndexByte(userCodeAlphabet, c[i]) < 0 {
			return "", false
		}
	}
	return c[:4] + "-" + c[4:], true
}

type createGrantRequest struct {
	DeviceKey string `json:"device_key"`
	Label     string `json:"label"`
	// SigningKey is optional: a linked device's Ed25519 public key
	// (base64), which the approver certifies with device_key
	// (devices.go).
	SigningKey string `json:"signing_key,omitempty"`
	// Identity and Proof are optional: a device restored from the phrase
	// proves it with the identity's signature over RecoverLabel and
	// device_key, which lets a linked device approve it (devices.go).
	Identity string `json:"identity,omitempty"`
	Proof    string `json:"proof,omitempty"`
}

// RecoverLabel starts what a restored device's identity key signs to
// prove, in its grant, that it holds the phrase.
const RecoverLabel = "skytale recover v1\x00"

type createGrantResponse struct {
	GrantID   string `json:"grant_id"`
	UserCode  string `json:"user_code"`
	PollToken string `json:"poll_token"`
	ExpiresAt string `json:"expires_at"`
}

// POST /v1/device/grants {device_key, label, signing_key?} (no auth) → 201 {grant_id, user_code, poll_token, expires_at}
//
// Takes no credential, so it is limited per remote address: a rate limit
// and a cap on the grants the address has open (Limits).
func (s *Server) handleCreateGrant(w http.ResponseWriter, r *http.Request) {
	if !s.allowAddr(w, r, limitGrant) {
		return
	}
	var req createGrantRequest
	if !decode(w, r, smallBody, &req) {
		return
	}
	pub, ok := parseDeviceKey(req.DeviceKey, s.cfg.Rand)
	if !ok {
		badRequest(w, "device_key must be a base64 X25519 public key")
		return
	}
	var signingKey []byte
	if req.SigningKey != "" {
		if signingKey, ok = parseSigningKey(req.SigningKey); !ok {
			badRequest(w, "signing_key must be a base64 Ed25519 public key")
			return
		}
	}
	var proof []byte
	if req.Proof != "" || req.Identity != "" {
		idPub, err := parseDIDKey(req.Identity)
		if err == nil {
			proof, err = base64.StdEncoding.Strict().DecodeString(req.Proof)
		}
		if err != nil || !ed25519.Verify(idPub, append([]byte(RecoverLabel), pub.Bytes()...), proof) {
			badRequest(w, "proof must be the identity's signature over the recover label and device_key")
			return
		}
	}
	if !storable(req.Label) || utf8.RuneCountInString(req.Label) > maxLabel {
		badRequest(w, "label must be at most 128 characters, none of them NUL")
		return
	}
	id, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	poll, pollHash, err := s.newSecret(prefixPollToken)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.cfg.Now()
	exp := now.Add(GrantLifetime)
	code, err := s.store.createGrant(r.Context(), grantParams{
		id:        id,
		deviceKey: pub.Bytes(),
		signing:   signingKey,
		person:    req.Identity,
		proof:     proof,
		label:     req.Label,
		pollHash:  pollHash,
		remote:    s.limits.clientAddr(r),
		maxOpen:   s.limits.openGrants,
		newCode:   s.newUserCode,
		expires:   exp,
		now:       now,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, createGrantResponse{GrantID: id, UserCode: code, PollToken: poll, ExpiresAt: rfc3339(exp)})
}

// decodeUserCode reads a request body naming a grant by its user code, for
// an unscoped credential, and returns the normalized code. On false the
// answer has been written.
func decodeUserCode(w http.ResponseWriter, r *http.Request, p principal, limit int64, req any, userCode *string) (string, bool) {
	if p.channel != "" {
		forbidScoped(w)
		return "", false
	}
	if !decode(w, r, limit, req) {
		return "", false
	}
	code, ok := normalizeUserCode(*userCode)
	if !ok {
		badRequest(w, "user_code is malformed")
	}
	return code, ok
}

type lookupGrantRequest struct {
	UserCode string `json:"user_code"`
}

// POST /v1/device/grants/lookup {user_code} → 200 {grant_id, device_key, signing_key?, label, expires_at}
//
// Lets an authenticated device see which device it is about to approve, and
// learn its public key so it can seal more for it than the directory can
// (see sealed_seat in approve). Only pending, unexpired grants are found.
func (s *Server) handleLookupGrant(w http.ResponseWriter, r *http.Request, p principal) {
	var req lookupGrantRequest
	code, ok := decodeUserCode(w, r, p, smallBody, &req, &req.UserCode)
	if !ok {
		return
	}
	g, err := s.store.lookupGrant(r.Context(), code, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := map[string]string{
		"grant_id":   g.id,
		"device_key": base64.StdEncoding.EncodeToString(g.deviceKey),
		"label":      g.label,
		"expires_at": rfc3339(g.expires),
	}
	if g.signing != nil {
		resp["signing_key"] = base64.StdEncoding.EncodeToString(g.signing)
	}
	writeJSON(w, http.StatusOK, resp)
}

type approveGrantRequest struct {
	UserCode string `json:"user_code"`
	// SealedSeat is optional: base64 of a box the approving device sealed to
	// the grant's device_key (from lookup). The directory stores it as is
	// and delivers it once, with the credential.
	SealedSeat string `json:"sealed_seat,omitempty"`
	// Certificate is optional: the compact device certificate
	// (internal/devcert) an identity of the caller's account signed over
	// the grant's signing_key and device_key. With it the new API key is
	// the linked device's own, listed and revocable (devices.go).
	Certificate string `json:"certificate,omitempty"`
}

// POST /v1/device/grants/approve {user_code, sealed_seat?, certificate?} → 200 {grant_id, status: "approved", device?}
//
// Mints a new API key of the caller's account, seals it to the device key
// and keeps only the sealed form and the key's hash.
func (s *Server) handleApproveGrant(w http.ResponseWriter, r *http.Request, p principal) {
	var req approveGrantRequest
	code, ok := decodeUserCode(w, r, p, approveBody, &req, &req.UserCode)
	if !ok {
		return
	}
	var seatBox []byte
	if req.SealedSeat != "" {
		if seatBox, ok = decodeB64(w, "sealed_seat", req.SealedSeat, MaxSealedSeat); !ok {
			return
		}
		// An HPKE box is at least enc (32 bytes) and a tag (16 bytes).
		if len(seatBox) < 48 {
			badRequest(w, "sealed_seat is too short to be a sealed box")
			return
		}
	}
	var cert []byte
	if req.Certificate != "" {
		if p.device != "" {
			writeError(w, http.StatusForbidden, "forbidden", "a linked device cannot link another: approve on a device that holds the identity")
			return
		}
		if cert, ok = decodeB64(w, "certificate", req.Certificate, devcert.CompactSize); !ok {
			return
		}
	}
	id, device, err := s.store.approveGrant(r.Context(), code, p, seatBox, cert, s.cfg.Now(), func(deviceKey []byte) ([]byte, []byte, error) {
		pub, err := ecdh.X25519().NewPublicKey(deviceKey)
		if err != nil {
			return nil, nil, err
		}
		key, hash, err := s.newSecret(prefixAPIKey)
		if err != nil {
			return nil, nil, err
		}
		sealed, err := SealCredential(pub, key)
		return sealed, hash, err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := map[string]string{"grant_id": id, "status": "approved"}
	if device != "" {
		resp["device"] = device
	}
	writeJSON(w, http.StatusOK, resp)
}

// GET /v1/device/grants/{grant_id} (Bearer poll_token) → 200 {status, sealed_credential?, sealed_seat?, account_id?, org?}
//
// sealed_credential is answered exactly once; the directory forgets it as it
// hands it out. The same answer carries the approver's sealed_seat, if any,
// and the account_id and org the credential acts for.
func (s *Server) handlePollGrant(w http.ResponseWriter, r *http.Request) {
	tok, ok := httpx.Bearer(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "unauthorized", "the poll token is required")
		return
	}
	d, err := s.store.pollGrant(r.Context(), r.PathValue("grant_id"), hashSecret(tok), s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := map[string]string{"status": d.status}
	if d.sealed != nil {
		resp["sealed_credential"] = base64.StdEncoding.EncodeToString(d.sealed)
		resp["account_id"], resp["org"] = d.account, d.org
		if d.sealedSeat != nil {
			resp["sealed_seat"] = base64.StdEncoding.EncodeToString(d.sealedSeat)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

type grantParams struct {
	id        string
	deviceKey []byte
	signing   []byte // nil unless the grant is for a linked device
	person    string // with proof: the identity a restored device proved
	proof     []byte
	label     string
	pollHash  []byte
	remote    string // the creating client's address key
	maxOpen   int    // open grants allowed per remote; 0 for no cap
	newCode   func() (string, error)
	expires   time.Time
	now       time.Time
}

func (s *store) createGrant(ctx context.Context, g grantParams) (code string, err error) {
	err = s.write(ctx, func(tx txn) error {
		if g.maxOpen > 0 {
			// The count and the insert hold the address's lock, so
			// concurrent grants from one address are counted one by one.
			if err := tx.b.LockKey(ctx, tx.tx, "device_grants/"+g.remote); err != nil {
				return err
			}
			var (
				open   int
				oldest sql.NullInt64
			)
			if err := tx.queryRow(ctx,
				`SELECT COUNT(*), MIN(expires_at) FROM device_grants WHERE remote = ? AND status = 'pending' AND expires_at > ?`,
				g.remote, g.now.UnixNano()).Scan(&open, &oldest); err != nil {
				return err
			}
			if open >= g.maxOpen {
				return &grantCapError{retry: time.Duration(oldest.Int64 - g.now.UnixNano())}
			}
		}
		for range 8 {
			if code, err = g.newCode(); err != nil {
				return err
			}
			n, err := tx.execN(ctx,
				`INSERT INTO device_grants (id, device_key, signing_key, person, certificate, label, user_code, poll_hash, status, expires_at, created_at, remote)
				 VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (user_code) DO NOTHING`,
				g.id, g.deviceKey, g.signing, g.person, g.proof, g.label, code, g.pollHash, g.expires.UnixNano(), g.now.UnixNano(), g.remote)
			if err != nil || n == 1 {
				return err
			}
		}
		return errors.New("directory: no free user code")
	})
	return code, err
}

type grantView struct {
	id        string
	deviceKey []byte
	signing   []byte
	label     string
	expires   time.Time
}

// lookupGrant finds the pending, unexpired grant with userCode.
func (s *store) lookupGrant(ctx context.Context, userCode string, now time.Time) (grantView, error) {
	var (
		g       grantView
		status  string
		expires int64
	)
	err := s.queryRow(ctx,
		`SELECT id, device_key, signing_key, label, status, expires_at FROM device_grants WHERE user_code = ?`,
		userCode).Scan(&g.id, &g.deviceKey, &g.signing, &g.label, &status, &expires)
	if errors.Is(err, sql.ErrNoRows) || err == nil && (status == "expired" || expires <= now.UnixNano()) {
		return grantView{}, errNotFound
	}
	if err != nil {
		return grantView{}, err
	}
	if status != "pending" {
		return grantView{}, errGrantNotPending
	}
	g.expires = time.Unix(0, expires).UTC()
	return g, nil
}

// approveGrant approves the pending, unexpired grant with userCode: seal
// mints the credential for the device key, and only its sealed form and
// hash are stored, with the approver's sealedSeat (nil for none).
func (s *store) approveGrant(ctx context.Context, userCode string, by principal, sealedSeat, cert []byte, now time.Time, seal func(deviceKey []byte) (sealed, keyHash []byte, err error)) (id, device string, err error) {
	err = s.write(ctx, func(tx txn) error {
		var (
			deviceKey []byte
			signing   []byte
			person    string
			proved    []byte
			label     string
			account   = by.account
			status    string
			expires   int64
		)
		device = ""
		err := tx.queryRow(ctx,
			`SELECT id, device_key, signing_key, person, certificate, label, status, expires_at FROM device_grants WHERE user_code = ?`+tx.b.LockRow(),
			userCode).Scan(&id, &deviceKey, &signing, &person, &proved, &label, &status, &expires)
		if errors.Is(err, sql.ErrNoRows) || err == nil && (status == "expired" || expires <= now.UnixNano()) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		if status != "pending" {
			return errGrantNotPending
		}
		if by.device != "" {
			// A linked device holds no identity key: it approves only a
			// device that proved it holds the phrase of one of the
			// account's identities (a recovery).
			var mine bool
			if err := tx.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM seats WHERE identity = ? AND account_id = ?)`,
				person, account).Scan(&mine); err != nil {
				return err
			}
			if signing != nil || proved == nil || !mine {
				return errLinkedApprover
			}
		}
		var identity string
		if cert != nil {
			if _, identity, err = s.certifyGrant(ctx, tx, account, signing, deviceKey, cert); err != nil {
				return err
			}
		}
		sealed, keyHash, err := seal(deviceKey)
		if err != nil {
			return err
		}
		if _, err := tx.exec(ctx,
			`INSERT INTO api_keys (hash, account_id, channel, created_at) VALUES (?, ?, '', ?)`,
			keyHash, account, now.UnixNano()); err != nil {
			return err
		}
		if identity != "" {
			if err := linkDevice(ctx, tx, account, label, identity, signing, keyHash, now); err != nil {
				return err
			}
			device = deviceID(identity)
		}
		_, err = tx.exec(ctx,
			`UPDATE device_grants SET status = 'approved', sealed = ?, sealed_seat = ?, key_hash = ?, approved_by = ? WHERE id = ?`,
			sealed, sealedSeat, keyHash, account, id)
		return err
	})
	return id, device, err
}

// pollGrant answers a device's poll. The sealed credential comes back at
// most once: it is cleared in the same transaction that reads it. A grant
// approved but not collected before it expires loses its credential, and
// the API key minted for it is deleted.
type grantDelivery struct {
	status     string
	sealed     []byte // the sealed credential, once
	sealedSeat []byte // with it, the approver's box if any
	account    string // with it, the account the credential acts for
	org        string
}

func (s *store) pollGrant(ctx context.Context, id string, pollHash []byte, now time.Time) (grantDelivery, error) {
	if !storable(id) {
		return grantDelivery{}, errNotFound
	}
	var d grantDelivery
	err := s.write(ctx, func(tx txn) error {
		var (
			want     []byte
			keyHash  []byte
			expires  int64
			approver sql.NullString
		)
		d = grantDelivery{}
		err := tx.queryRow(ctx,
			`SELECT poll_hash, status, sealed, sealed_seat, key_hash, approved_by, expires_at FROM device_grants WHERE id = ?`+tx.b.LockRow(),
			id).Scan(&want, &d.status, &d.sealed, &d.sealedSeat, &keyHash, &approver, &expires)
		if errors.Is(err, sql.ErrNoRows) || err == nil && !hmac.Equal(want, pollHash) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		expired := expires <= now.UnixNano()
		switch {
		case d.status == "pending" && expired:
			d.status = "expired"
			_, err = tx.exec(ctx, `UPDATE device_grants SET status = 'expired', label = '', remote = '' WHERE id = ?`, id)
		case d.status == "approved" && d.sealed != nil && expired:
			d.status, d.sealed = "expired", nil
			if _, err = tx.exec(ctx, `DELETE FROM api_keys WHERE hash = ?`, keyHash); err == nil {
				_, err = tx.exec(ctx, `UPDATE device_grants SET status = 'expired', sealed = NULL, sealed_seat = NULL, approved_by = NULL, label = '', remote = '' WHERE id = ?`, id)
			}
		case d.status == "approved" && d.sealed != nil:
			d.account = approver.String
			err = tx.queryRow(ctx, `SELECT org FROM accounts WHERE id = ?`, d.account).Scan(&d.org)
			if errors.Is(err, sql.ErrNoRows) { // the account is gone, and its keys with it
				d.account, err = "", nil
			}
			if err == nil {
				// Delivered: the grant's job is done. It stays (so later
				// polls say approved) until the sweep, but without who
				// approved it, the device's label or the address it asked
				// from.
				_, err = tx.exec(ctx, `UPDATE device_grants SET sealed = NULL, sealed_seat = NULL, approved_by = NULL, label = '', remote = '' WHERE id = ?`, id)
			}
		}
		if d.sealed == nil {
			d.sealedSeat = nil
		}
		return err
	})
	if err != nil {
		return grantDelivery{}, err
	}
	return d, nil
}
