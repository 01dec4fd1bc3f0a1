package directory

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
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

// Claim limits, the defaults of Config.ClaimsPerClaimer and
// ClaimsPerDevice: how many one-time offers of one device claims take per
// hour (claimWindow). One claimer takes at most ClaimsPerClaimer of a
// device's one-time offers an hour, a few rooms' worth, and all claimers
// together at most ClaimsPerDevice, a third of a full stock (the seat
// keeps 30 up and restocks on each sync), so no crowd of accounts, however
// related, can use up a person's one-time offers faster than they come
// back. Past either limit a claim is answered with the device's
// last-resort offer, which keeps working: the add goes through, with an
// offer that is reused until the device replaces it (RFC 9420 §16.8).
const (
	ClaimsPerClaimer = 10
	ClaimsPerDevice  = 30
	claimWindow      = time.Hour
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
// (replacing the one before). Over a cap, and past a storage budget
// (budget.go), nothing is stored.
//
// The device must be account's: person, the did:key the device name
// belongs to (checkDeviceName), must be a seat identity account
// registered, else errIdentityNotYours.
func (s *store) putStock(ctx context.Context, account, device, person string, oneTime [][]byte, lastResort []byte, now time.Time) (sc stockCount, err error) {
	if !storable(device) {
		return sc, errNotFound
	}
	err = s.write(ctx, func(tx txn) error {
		var mine bool
		if err := tx.queryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM seats WHERE identity = ? AND account_id = ?)`, person, account).Scan(&mine); err != nil {
			return err
		}
		if !mine {
			return errIdentityNotYours
		}
		if err := tx.b.LockKey(ctx, tx.tx, stockLock(account)); err != nil {
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
		u := usage{}
		for _, kp := range oneTime {
			if _, err := tx.exec(ctx,
				`INSERT INTO key_packages (account_id, device, last_resort, key_package, created_at) VALUES (?, ?, 0, ?, ?)`,
				account, device, kp, now.UnixNano()); err != nil {
				return err
			}
			u.add(account, int64(len(kp)))
		}
		if lastResort != nil {
			var old int64
			err := tx.queryRow(ctx,
				`DELETE FROM key_packages WHERE account_id = ? AND device = ? AND last_resort = 1 RETURNING LENGTH(key_package)`,
				account, device).Scan(&old)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if _, err := tx.exec(ctx,
				`INSERT INTO key_packages (account_id, device, last_resort, key_package, created_at) VALUES (?, ?, 1, ?, ?)`,
				account, device, lastResort, now.UnixNano()); err != nil {
				return err
			}
			u.add(account, int64(len(lastResort))-old)
		}
		return tx.settle(ctx, u)
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

// stockAccount returns the account whose registered seat identity is
// the person identity names (identity itself, or the did:key before its
// "#" for a device identity), for caller, a member of channel. An identity
// no seat registered is errNotAllowed, the answer a stranger gets for one
// that is registered (claimStock), so nobody learns from a claim whose
// identity is whose.
func (s *store) stockAccount(ctx context.Context, caller, channel, identity string) (string, error) {
	if _, err := memberChannel(ctx, s, channel, caller); err != nil {
		return "", err
	}
	person, _, _ := strings.Cut(identity, "#")
	var account string
	err := s.queryRow(ctx, `SELECT account_id FROM seats WHERE identity = ?`, person).Scan(&account)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNotAllowed
	}
	return account, err
}

// claimStock takes, for the caller (an owner or member of channel) who may
// add target (allowAdd: a shared channel or org, or else the add-token
// whose hash is tokenHash, which then uses one use), one key package of
// each of target's devices: the oldest one-time key package, consumed,
// or, when the device has none left or the claim limits (ClaimsPerClaimer,
// ClaimsPerDevice) are reached, its last-resort one, which stays. Each is
// recorded as a claim for target to see. A device past the limits with no
// last-resort offer gives nothing; if no device gives anything the claim
// is errOffersRationed.
func (s *store) claimStock(ctx context.Context, caller, target, channel string, tokenHash []byte, newID func() (string, error), now time.Time) (claims []claim, err error) {
	if caller == target {
		return nil, errSelfClaim
	}
	err = s.write(ctx, func(tx txn) error {
		claims = nil
		chID, err := memberChannel(ctx, tx, channel, caller)
		if err != nil {
			return err
		}
		if err := allowAdd(ctx, tx, caller, target, tokenHash, now); err != nil {
			return err
		}
		if err := tx.b.LockKey(ctx, tx.tx, stockLock(target)); err != nil {
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
		rationed := false
		for _, d := range devices {
			c := claim{device: d}
			var kpID int64
			limited, err := claimLimited(ctx, tx, s.consent, caller, target, d, now)
			if err != nil {
				return err
			}
			if !limited {
				err = tx.queryRow(ctx,
					`SELECT id, key_package FROM key_packages WHERE account_id = ? AND device = ? AND last_resort = 0
					 ORDER BY id LIMIT 1`, target, d).Scan(&kpID, &c.keyPackage)
			}
			switch {
			case limited || errors.Is(err, sql.ErrNoRows):
				c.lastResort = true
				err = tx.queryRow(ctx,
					`SELECT key_package FROM key_packages WHERE account_id = ? AND device = ? AND last_resort = 1`,
					target, d).Scan(&c.keyPackage)
				if limited && errors.Is(err, sql.ErrNoRows) {
					rationed = true
					continue
				}
			case err == nil:
				var n int64
				n, err = tx.execN(ctx, `DELETE FROM key_packages WHERE id = ?`, kpID)
				if err == nil && n != 1 {
					err = errors.New("directory: a claimed key package went missing under the stock lock")
				}
				if err == nil {
					err = tx.charge(ctx, target, -int64(len(c.keyPackage)))
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
		if len(claims) == 0 && rationed {
			return errOffersRationed
		}
		return nil
	})
	return claims, err
}

// claimLimited reports whether caller's claim on target's device d must
// take the last-resort offer: in the last claimWindow caller took
// c.claimsPerClaimer of d's one-time offers (Config.ClaimsPerClaimer), or
// all claimers together took c.claimsPerDevice. The caller holds target's stock lock, so the counts
// cannot move under it.
func claimLimited(ctx context.Context, tx txn, c consent, caller, target, d string, now time.Time) (bool, error) {
	var all, mine int
	err := tx.queryRow(ctx,
		`SELECT COUNT(*), COALESCE(SUM(CASE WHEN claimed_by = ? THEN 1 ELSE 0 END), 0) FROM key_package_claims
		 WHERE account_id = ? AND device = ? AND last_resort = 0 AND created_at > ?`,
		caller, target, d, now.Add(-claimWindow).UnixNano()).Scan(&all, &mine)
	return all >= c.claimsPerDevice || mine >= c.claimsPerClaimer, err
}

// claimRecord is a claim as the stock's owner sees it.
type claimRecord struct {
	seq                            int64
	id, device, channel, claimedBy string
	lastResort                     bool
	at                             time.Time
}

// stock returns the stock of each of account's devices (by device name)
// and up to limit of the claims on it not acknowledged yet, oldest first.
func (s *store) stock(ctx context.Context, account string, limit int) ([]stockCount, []claimRecord, error) {
	devices, claims, _, err := s.stockPage(ctx, account, 0, limit)
	return devices, claims, err
}

// stockPage is stock from the claim after the one whose seq is after (0:
// from the first); more says claims follow.
func (s *store) stockPage(ctx context.Context, account string, after int64, limit int) (devices []stockCount, claims []claimRecord, more bool, err error) {
	rows, err := s.query(ctx,
		`SELECT device, SUM(1 - last_resort), MAX(last_resort) FROM key_packages
		 WHERE account_id = ? GROUP BY device ORDER BY device`, account)
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	devices = []stockCount{}
	for rows.Next() {
		var sc stockCount
		var lr int
		if err := rows.Scan(&sc.device, &sc.oneTime, &lr); err != nil {
			return nil, nil, false, err
		}
		sc.lastResort = lr == 1
		devices = append(devices, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, false, err
	}
	rows.Close()
	rows, err = s.query(ctx,
		`SELECT k.seq, k.id, k.device, c.name, k.claimed_by, k.last_resort, k.created_at
		 FROM key_package_claims k JOIN channels c ON c.id = k.channel_id
		 WHERE k.account_id = ? AND k.acked = 0 AND k.seq > ? ORDER BY k.seq LIMIT ?`, account, after, limit+1)
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	claims = []claimRecord{}
	for rows.Next() {
		if len(claims) == limit {
			more = true
			break
		}
		var c claimRecord
		var lr int
		var at int64
		if err := rows.Scan(&c.seq, &c.id, &c.device, &c.channel, &c.claimedBy, &lr, &at); err != nil {
			return nil, nil, false, err
		}
		c.lastResort, c.at = lr == 1, time.Unix(0, at).UTC()
		claims = append(claims, c)
	}
	return devices, claims, more, rows.Err()
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
	// DeviceKey is the device's Ed25519 public key (standard base64),
	// required when Device is a device identity "<did:key>#dev:z<sig>".
	DeviceKey string `json:"device_key"`
}

type stockResponse struct {
	OneTime    int  `json:"one_time"`
	LastResort bool `json:"last_resort"`
}

// POST /v1/keypackages {device, key_packages, last_resort?, device_key?} → 201 {one_time, last_resort}
//
// Account-wide credentials only: the stock is the account's. An offer is
// bound to its uploader: device must be a seat identity the caller
// registered (POST /v1/seats), or a device of it, "<did:key>#dev:z<sig>"
// with device_key, where sig is that did:key's signature over
// DeviceKeyLabel and device_key. Anything else, such as another person's
// did:key or a made-up device of it, is 403 identity_not_yours, so
// nobody publishes offers under someone else's identity.
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
	var deviceKey []byte
	if req.DeviceKey != "" {
		var err error
		if deviceKey, err = base64.StdEncoding.DecodeString(req.DeviceKey); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_base64", "device_key is not standard base64")
			return
		}
	}
	person, err := checkDeviceName(req.Device, deviceKey)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sc, err := s.store.putStock(r.Context(), p.account, req.Device, person, kps, lastResort, s.cfg.Now())
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

// GET /v1/keypackages?after=<cursor> → 200 {devices: [...], claims: [...], has_more, next}
//
// Who may call: an account, with an account-wide credential. On whom it
// acts: nobody; it reads the caller's own stock (one count per device, at
// most MaxStockDevices) and the claims on it not acknowledged yet, oldest
// first, at most maxClaimsListed a page (no key packages: a page is a few
// tens of KiB); next, present with has_more, is the cursor of the page
// after (an absent cursor is the first page). It stores nothing.
func (s *Server) handleGetStock(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	after, ok := seqCursor(w, r, "after must be a cursor from an earlier page")
	if !ok {
		return
	}
	devices, claims, more, err := s.store.stockPage(r.Context(), p.account, after, maxClaimsListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Devices []stockDevice `json:"devices"`
		Claims  []claimEntry  `json:"claims"`
		HasMore bool          `json:"has_more"`
		Next    string        `json:"next,omitempty"`
	}{Devices: make([]stockDevice, len(devices)), Claims: make([]claimEntry, len(claims)), HasMore: more}
	for i, d := range devices {
		out.Devices[i] = stockDevice{Device: d.device, OneTime: d.oneTime, LastResort: d.lastResort}
	}
	for i, c := range claims {
		out.Claims[i] = claimEntry{ID: c.id, Device: c.device, Channel: c.channel, ClaimedBy: c.claimedBy, LastResort: c.lastResort, At: rfc3339(c.at)}
	}
	if more {
		out.Next = strconv.FormatInt(claims[len(claims)-1].seq, 10)
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
	// AddToken is an add-token of the person (skt_add_…): with it a
	// caller who shares no room or org with them may claim, using one of
	// its uses. Given alone, it names the person too.
	AddToken string `json:"add_token"`
}

type claimAnswer struct {
	// AccountID is the person's account, which a caller that named them
	// by identity or add-token needs to end their channel membership when
	// it removes them.
	AccountID  string `json:"account_id"`
	ClaimID    string `json:"claim_id"`
	Device     string `json:"device"`
	KeyPackage string `json:"key_package"`
	LastResort bool   `json:"last_resort"`
}

// POST /v1/keypackages/claim {account_id | identity | add_token, channel, add_token?} → 200 {claims: [...]}
//
// Who may call: an owner or member of channel (else 403 not_a_member)
// who may add the person (contacts.go: a shared channel or org, or their
// add-token; else 403 not_allowed, also for an identity nobody
// registered). On whom it acts: the person named, whose one-time offers
// it takes within the hourly limits (ClaimsPerClaimer, ClaimsPerDevice;
// past them the last-resort offer answers), each recorded as a claim the
// person sees (GET /v1/keypackages). It returns at most one offer per
// device, MaxStockDevices in all. A crowd of accounts gets, together, no
// more than ClaimsPerDevice one-time offers of a device an hour.
func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request, p principal) {
	var req claimRequest
	if !decode(w, r, smallBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	var tokenHash []byte
	if req.AddToken != "" {
		if !validAddToken(req.AddToken) {
			badRequest(w, "add_token must be an add-token (skt_add_…)")
			return
		}
		tokenHash = hashSecret(req.AddToken)
	}
	switch {
	case req.Identity != "" && req.AccountID != "":
		badRequest(w, "give account_id or identity, not both")
		return
	case req.Identity == "" && req.AccountID == "" && tokenHash != nil:
		// The add-token names its maker. A caller may claim only for a
		// channel it is in, checked (as for every claim) before anything
		// about the token is answered.
		if _, err := memberChannel(r.Context(), s.store, req.Channel, p.account); err != nil {
			s.fail(w, r, err)
			return
		}
		account, err := addTokenOwner(r.Context(), s.store, tokenHash, s.cfg.Now())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		req.AccountID = account
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
	claims, err := s.store.claimStock(r.Context(), p.account, req.AccountID, req.Channel, tokenHash, s.newID, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]claimAnswer, len(claims))
	for i, c := range claims {
		out[i] = claimAnswer{AccountID: req.AccountID, ClaimID: c.id, Device: c.device, KeyPackage: base64.StdEncoding.EncodeToString(c.keyPackage), LastResort: c.lastResort}
	}
	writeJSON(w, http.StatusOK, struct {
		Claims []claimAnswer `json:"claims"`
	}{out})
}
