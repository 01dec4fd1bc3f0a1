package directory

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"net/http"
	"time"
)

// Caps of the key-package stock (see "Key-package stock" in the package
// documentation).
const (
	MaxStockPerDevice = 100 // one-time key packages per account and device
	MaxStockDevices   = 10  // devices with stock per account
	MaxDevice         = 256 // bytes of a device name
	maxClaimsListed   = 100 // unacknowledged claims per GET /v1/keypackages
)

// stockBody caps POST /v1/keypackages: a full batch of maximum-size key
// packages (100 one-time and a last-resort one, 87,384 base64 characters
// each) with room to spare.
const stockBody = 9 << 20

// memberChannel returns the id of the channel name if account owns it or
// is one of its members; anyone else gets errNotAMember.
func memberChannel(ctx context.Context, q queryer, name, account string) (string, error) {
	chID, owner, err := channelOwner(ctx, q, name)
	if err != nil {
		return "", err
	}
	if owner == account {
		return chID, nil
	}
	var one int
	err = q.queryRow(ctx,
		`SELECT 1 FROM channel_members WHERE channel_id = ? AND account_id = ?`, chID, account).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNotAMember
	}
	return chID, err
}

// stockLock is the lockKey key that orders the changes to one account's
// stock: uploads (which count it against the caps) and claims (which take
// from it), so two claims never take the same key package and the caps
// hold under concurrent uploads.
func stockLock(account string) string { return "stock:" + account }

// stockCount is the stock of one device.
type stockCount struct {
	device     string
	oneTime    int
	lastResort bool
}

// putStock adds oneTime key packages to the stock of account's device and,
// if lastResort is not nil, makes it the device's last-resort key package
// (replacing the one before). Over a cap nothing is stored.
func (s *store) putStock(ctx context.Context, account, device string, oneTime [][]byte, lastResort []byte, now time.Time) (sc stockCount, err error) {
	if !storable(device) {
		return sc, errNotFound
	}
	err = s.write(ctx, func(tx txn) error {
		if err := tx.b.lockKey(ctx, tx.tx, stockLock(account)); err != nil {
			return err
		}
		var have int
		var here bool
		if err := tx.queryRow(ctx,
			`SELECT COUNT(*), EXISTS (SELECT 1 FROM key_packages WHERE account_id = ? AND device = ? AND last_resort = 1)
			 FROM key_packages WHERE account_id = ? AND device = ? AND last_resort = 0`,
			account, device, account, device).Scan(&have, &here); err != nil {
			return err
		}
		if have+len(oneTime) > MaxStockPerDevice {
			return errStockFull
		}
		sc = stockCount{device: device, oneTime: have + len(oneTime), lastResort: here || lastResort != nil}
		if len(oneTime) == 0 && lastResort == nil {
			return errUnchanged
		}
		if have == 0 && !here {
			var others int
			if err := tx.queryRow(ctx,
				`SELECT COUNT(DISTINCT device) FROM key_packages WHERE account_id = ? AND device <> ?`,
				account, device).Scan(&others); err != nil {
				return err
			}
			if others >= MaxStockDevices {
				return errStockFull
			}
		}
		for _, kp := range oneTime {
			if _, err := tx.exec(ctx,
				`INSERT INTO key_packages (account_id, device, last_resort, key_package, created_at) VALUES (?, ?, 0, ?, ?)`,
				account, device, kp, now.UnixNano()); err != nil {
				return err
			}
		}
		if lastResort != nil {
			if _, err := tx.exec(ctx,
				`DELETE FROM key_packages WHERE account_id = ? AND device = ? AND last_resort = 1`, account, device); err != nil {
				return err
			}
			if _, err := tx.exec(ctx,
				`INSERT INTO key_packages (account_id, device, last_resort, key_package, created_at) VALUES (?, ?, 1, ?, ?)`,
				account, device, lastResort, now.UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
	return sc, err
}

// claim is one key package handed out by claimStock.
type claim struct {
	id         string
	device     string
	keyPackage []byte
	lastResort bool
}

// claimStock takes, for the caller (an owner or member of channel), one
// key package of each of target's devices: the oldest one-time key
// package, consumed, or when the device has none left its last-resort
// one, which stays. Each is recorded as a claim for target to see.
// stockAccount returns the one account whose stock holds a device
// identity that is identity or starts with identity and "#", for caller,
// a member of channel: anyone else learns nothing of whose stock holds
// what (errNotAMember first, as a claim would answer).
func (s *store) stockAccount(ctx context.Context, caller, channel, identity string) (string, error) {
	if _, err := memberChannel(ctx, s, channel, caller); err != nil {
		return "", err
	}
	rows, err := s.query(ctx,
		`SELECT DISTINCT account_id FROM key_packages WHERE device = ? OR substr(device, 1, ?) = ? LIMIT 2`,
		identity, len(identity)+1, identity+"#")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var accounts []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return "", err
		}
		accounts = append(accounts, a)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	switch len(accounts) {
	case 0:
		return "", errNoKeyPackages
	case 1:
		return accounts[0], nil
	}
	return "", errAmbiguousIdentity
}

func (s *store) claimStock(ctx context.Context, caller, target, channel string, newID func() (string, error), now time.Time) (claims []claim, err error) {
	if caller == target {
		return nil, errSelfClaim
	}
	err = s.write(ctx, func(tx txn) error {
		claims = nil
		chID, err := memberChannel(ctx, tx, channel, caller)
		if err != nil {
			return err
		}
		if err := accountExists(ctx, tx, target); err != nil {
			return err
		}
		if err := tx.b.lockKey(ctx, tx.tx, stockLock(target)); err != nil {
			return err
		}
		rows, err := tx.query(ctx,
			`SELECT DISTINCT device FROM key_packages WHERE account_id = ? ORDER BY device`, target)
		if err != nil {
			return err
		}
		var devices []string
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				rows.Close()
				return err
			}
			devices = append(devices, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(devices) == 0 {
			return errNoKeyPackages
		}
		for _, d := range devices {
			c := claim{device: d}
			var kpID int64
			err := tx.queryRow(ctx,
				`SELECT id, key_package FROM key_packages WHERE account_id = ? AND device = ? AND last_resort = 0
				 ORDER BY id LIMIT 1`, target, d).Scan(&kpID, &c.keyPackage)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				c.lastResort = true
				err = tx.queryRow(ctx,
					`SELECT key_package FROM key_packages WHERE account_id = ? AND device = ? AND last_resort = 1`,
					target, d).Scan(&c.keyPackage)
			case err == nil:
				var n int64
				n, err = tx.execN(ctx, `DELETE FROM key_packages WHERE id = ?`, kpID)
				if err == nil && n != 1 {
					err = errors.New("directory: a claimed key package went missing under the stock lock")
				}
			}
			if err != nil {
				return err
			}
			if c.id, err = newID(); err != nil {
				return err
			}
			if _, err := tx.exec(ctx,
				`INSERT INTO key_package_claims (id, account_id, device, channel_id, claimed_by, last_resort, created_at)
				 VALUES (?, ?, ?, ?, ?, ?, ?)`,
				c.id, target, d, chID, caller, sqlBool(c.lastResort), now.UnixNano()); err != nil {
				return err
			}
			claims = append(claims, c)
		}
		return nil
	})
	return claims, err
}

// claimRecord is a claim as the stock's owner sees it.
type claimRecord struct {
	id, device, channel, claimedBy string
	lastResort                     bool
	at                             time.Time
}

// stock returns the stock of each of account's devices (by device name)
// and up to limit of the claims on it not acknowledged yet, oldest first.
func (s *store) stock(ctx context.Context, account string, limit int) ([]stockCount, []claimRecord, error) {
	rows, err := s.query(ctx,
		`SELECT device, SUM(1 - last_resort), MAX(last_resort) FROM key_packages
		 WHERE account_id = ? GROUP BY device ORDER BY device`, account)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	devices := []stockCount{}
	for rows.Next() {
		var sc stockCount
		var lr int
		if err := rows.Scan(&sc.device, &sc.oneTime, &lr); err != nil {
			return nil, nil, err
		}
		sc.lastResort = lr == 1
		devices = append(devices, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows.Close()
	rows, err = s.query(ctx,
		`SELECT k.id, k.device, c.name, k.claimed_by, k.last_resort, k.created_at
		 FROM key_package_claims k JOIN channels c ON c.id = k.channel_id
		 WHERE k.account_id = ? AND k.acked = 0 ORDER BY k.seq LIMIT ?`, account, limit)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	claims := []claimRecord{}
	for rows.Next() {
		var c claimRecord
		var lr int
		var at int64
		if err := rows.Scan(&c.id, &c.device, &c.channel, &c.claimedBy, &lr, &at); err != nil {
			return nil, nil, err
		}
		c.lastResort, c.at = lr == 1, time.Unix(0, at).UTC()
		claims = append(claims, c)
	}
	return devices, claims, rows.Err()
}

// ackClaims acknowledges account's claims up to and including through,
// one of its own claims.
func (s *store) ackClaims(ctx context.Context, account, through string) error {
	if !storable(through) {
		return errNotFound
	}
	return s.write(ctx, func(tx txn) error {
		var seq int64
		err := tx.queryRow(ctx,
			`SELECT seq FROM key_package_claims WHERE id = ? AND account_id = ?`, through, account).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		_, err = tx.exec(ctx,
			`UPDATE key_package_claims SET acked = 1 WHERE account_id = ? AND acked = 0 AND seq <= ?`, account, seq)
		return err
	})
}

// checkDevice validates a device name. On failure it writes the answer
// and returns false.
func checkDevice(w http.ResponseWriter, d string) bool {
	if len(d) < 1 || len(d) > MaxDevice || !storable(d) {
		badRequest(w, "device must be 1 to 256 bytes of UTF-8, none of them NUL")
		return false
	}
	return true
}

type putStockRequest struct {
	Device      string   `json:"device"`
	KeyPackages []string `json:"key_packages"`
	LastResort  string   `json:"last_resort"`
}

type stockResponse struct {
	OneTime    int  `json:"one_time"`
	LastResort bool `json:"last_resort"`
}

// POST /v1/keypackages {device, key_packages, last_resort?} → 201 {one_time, last_resort}
//
// Account-wide credentials only: the stock is the account's.
func (s *Server) handlePutStock(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	var req putStockRequest
	if !decode(w, r, stockBody, &req) || !checkDevice(w, req.Device) {
		return
	}
	if len(req.KeyPackages) > MaxStockPerDevice {
		s.fail(w, r, errStockFull)
		return
	}
	kps := make([][]byte, len(req.KeyPackages))
	for i, b := range req.KeyPackages {
		kp, ok := decodeB64(w, "key_packages", b, MaxKeyPackage)
		if !ok {
			return
		}
		kps[i] = kp
	}
	var lastResort []byte
	if req.LastResort != "" {
		var ok bool
		if lastResort, ok = decodeB64(w, "last_resort", req.LastResort, MaxKeyPackage); !ok {
			return
		}
	}
	sc, err := s.store.putStock(r.Context(), p.account, req.Device, kps, lastResort, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, stockResponse{OneTime: sc.oneTime, LastResort: sc.lastResort})
}

type stockDevice struct {
	Device     string `json:"device"`
	OneTime    int    `json:"one_time"`
	LastResort bool   `json:"last_resort"`
}

type claimEntry struct {
	ID         string `json:"id"`
	Device     string `json:"device"`
	Channel    string `json:"channel"`
	ClaimedBy  string `json:"claimed_by"`
	LastResort bool   `json:"last_resort"`
	At         string `json:"at"`
}

// GET /v1/keypackages → 200 {devices: [...], claims: [...]}
func (s *Server) handleGetStock(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	devices, claims, err := s.store.stock(r.Context(), p.account, maxClaimsListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Devices []stockDevice `json:"devices"`
		Claims  []claimEntry  `json:"claims"`
	}{make([]stockDevice, len(devices)), make([]claimEntry, len(claims))}
	for i, d := range devices {
		out.Devices[i] = stockDevice{Device: d.device, OneTime: d.oneTime, LastResort: d.lastResort}
	}
	for i, c := range claims {
		out.Claims[i] = claimEntry{ID: c.id, Device: c.device, Channel: c.channel, ClaimedBy: c.claimedBy, LastResort: c.lastResort, At: rfc3339(c.at)}
	}
	writeJSON(w, http.StatusOK, out)
}

// DELETE /v1/keypackages/claims?through=<claim id> → 204
func (s *Server) handleAckClaims(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	through := r.URL.Query().Get("through")
	if through == "" {
		badRequest(w, "through (a claim id) is required")
		return
	}
	if err := s.store.ackClaims(r.Context(), p.account, through); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type claimRequest struct {
	AccountID string `json:"account_id"`
	// Identity, instead of AccountID, names the account by a device
	// identity its stock holds: the identity itself, or one that starts
	// with it and "#" (a person's device identities, as the seat writes
	// them).
	Identity string `json:"identity"`
	Channel  string `json:"channel"`
}

type claimAnswer struct {
	ClaimID    string `json:"claim_id"`
	Device     string `json:"device"`
	KeyPackage string `json:"key_package"`
	LastResort bool   `json:"last_resort"`
}

// POST /v1/keypackages/claim {account_id, channel} → 200 {claims: [...]}
func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request, p principal) {
	var req claimRequest
	if !decode(w, r, smallBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	switch {
	case req.Identity != "" && req.AccountID != "":
		badRequest(w, "give account_id or identity, not both")
		return
	case req.Identity != "":
		if len(req.Identity) > MaxDevice || !storable(req.Identity) {
			badRequest(w, "identity must be 1 to 256 bytes of text")
			return
		}
		account, err := s.store.stockAccount(r.Context(), p.account, req.Channel, req.Identity)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		req.AccountID = account
	case !validAccountID(req.AccountID):
		badRequest(w, accountIDErrMsg)
		return
	}
	claims, err := s.store.claimStock(r.Context(), p.account, req.AccountID, req.Channel, s.newID, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]claimAnswer, len(claims))
	for i, c := range claims {
		out[i] = claimAnswer{ClaimID: c.id, Device: c.device, KeyPackage: base64.StdEncoding.EncodeToString(c.keyPackage), LastResort: c.lastResort}
	}
	writeJSON(w, http.StatusOK, struct {
		Claims []claimAnswer `json:"claims"`
	}{out})
}
