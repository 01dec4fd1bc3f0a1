package directory

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// SignupMode is who may create accounts (Config.Signup).
type SignupMode string

const (
	// SignupOpen lets anyone create an account, within the signup limits
	// per address and per network.
	SignupOpen SignupMode = "open"
	// SignupInvite needs an org invite (joining that org) or a one-use
	// signup token the operator minted (POST /v1/internal/signup-tokens).
	SignupInvite SignupMode = "invite"
	// SignupClosed leaves account creation to the operator (the internal
	// secret), who hands each person their API key.
	SignupClosed SignupMode = "closed"
)

// Signup tokens.
const (
	prefixSignupToken = "skt_sup_"
	// DefaultSignupTokenTTL is how long a signup token is valid unless
	// the operator says otherwise: a week to hand it over and use it.
	DefaultSignupTokenTTL = 7 * 24 * time.Hour
	// MaxSignupTokenTTL is the longest a signup token may be valid.
	MaxSignupTokenTTL = 30 * 24 * time.Hour
)

// groupKey derives the key of the signup groups' ids from the JWT secret,
// so the ids are stable across restarts and directory processes that
// share the secret, and nobody without it can tell which network an id
// stands for (a /24 is one of only 2^24).
func groupKey(jwtSecret []byte) []byte {
	m := hmac.New(sha256.New, jwtSecret)
	m.Write([]byte("skytale signup group v1"))
	return m.Sum(nil)
}

// signupGroup is the opaque id of the signup group of a request's client:
// a keyed hash of its IPv4 /24 or IPv6 /64, never the address. It is ""
// when the peer address does not parse.
func (s *Server) signupGroup(r *http.Request) string {
	n, ok := s.limits.clientNet(r)
	if !ok {
		return ""
	}
	m := hmac.New(sha256.New, s.groupKey)
	m.Write([]byte(n.String()))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// unixDay is the day of t, the granularity of the last sign-in: enough to
// find idle accounts, and no more about when people come and go.
func unixDay(t time.Time) int64 { return t.Unix() / 86400 }

type signupTokenRequest struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
}

// POST /v1/internal/signup-tokens (Bearer internal secret) {ttl_seconds?} → 201 {token, expires_at}
//
// Who: the operator only (401 for anyone else). On whom: nobody yet; the
// token lets one person create one account while signup is "invite" (or
// "open"). Storage: one row of a hash and two times per token, and the
// expired ones are deleted with each mint; the raw token is shown once.
// A stranger, a member or a crowd of accounts gets 401, and the tokens
// they might guess are 256-bit random.
func (s *Server) handleSignupToken(w http.ResponseWriter, r *http.Request) {
	if !s.isInternal(r) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "the internal secret is required")
		return
	}
	var req signupTokenRequest
	if hasBody(r) && !decode(w, r, smallBody, &req) {
		return
	}
	ttl := DefaultSignupTokenTTL
	if req.TTLSeconds != nil {
		if *req.TTLSeconds < 60 || *req.TTLSeconds > int64(MaxSignupTokenTTL/time.Second) {
			badRequest(w, "ttl_seconds must be 60 to 2592000")
			return
		}
		ttl = time.Duration(*req.TTLSeconds) * time.Second
	}
	raw, hash, err := s.newSecret(prefixSignupToken)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.cfg.Now()
	exp := now.Add(ttl)
	err = s.store.write(r.Context(), func(tx txn) error {
		if _, err := tx.exec(r.Context(), `DELETE FROM signup_tokens WHERE expires_at <= ?`, now.UnixNano()); err != nil {
			return err
		}
		_, err := tx.exec(r.Context(), `INSERT INTO signup_tokens (hash, expires_at, created_at) VALUES (?, ?, ?)`,
			hash, exp.UnixNano(), now.UnixNano())
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, tokenResponse{Token: raw, ExpiresAt: rfc3339(exp)})
}

// touchSignin records that p signed in today, unless its record says so
// already (one write per account and day at most).
func (s *Server) touchSignin(ctx context.Context, p principal) error {
	day := unixDay(s.cfg.Now())
	if p.lastSignin >= day {
		return nil
	}
	return s.store.write(ctx, func(tx txn) error {
		_, err := tx.exec(ctx, `UPDATE accounts SET last_signin = ? WHERE id = ? AND last_signin < ?`, day, p.account, day)
		return err
	})
}

type accountInfo struct {
	AccountID  string `json:"account_id"`
	Email      string `json:"email"`
	Org        string `json:"org"`
	CreatedAt  string `json:"created_at"`
	LastSignin string `json:"last_signin"` // the day, YYYY-MM-DD
	// Disabled is set once the account is revoked (POST /v1/revocations).
	Disabled bool `json:"disabled"`
}

// maxAccountsPage bounds one page of GET /v1/internal/accounts.
const maxAccountsPage = 500

// GET /v1/internal/accounts?idle_days=N&after=ID&limit=N (Bearer internal secret) → 200 {accounts, has_more, next}
//
// Who: the operator only (401 for anyone else). On whom: every account
// whose last sign-in (or signup) is at least idle_days days old (default
// 0: all), in id order from after. Returns at most limit (default 100,
// at most 500) accounts of a few hundred bytes each; has_more and next
// page on. A stranger, a member or a crowd of accounts gets 401.
func (s *Server) handleListAccounts(w http.ResponseWriter, r *http.Request) {
	if !s.isInternal(r) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "the internal secret is required")
		return
	}
	q := r.URL.Query()
	idle, limit := int64(0), int64(100)
	for _, f := range []struct {
		name string
		v    *int64
		max  int64
	}{{"idle_days", &idle, 1 << 20}, {"limit", &limit, maxAccountsPage}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || f.name == "limit" && n == 0 {
				badRequest(w, f.name+" must be a non-negative integer (limit positive)")
				return
			}
			*f.v = min(n, f.max)
		}
	}
	after := q.Get("after")
	if !storable(after) {
		badRequest(w, "after must be an account id")
		return
	}
	cutoff := unixDay(s.cfg.Now()) - idle
	rows, err := s.store.query(r.Context(),
		`SELECT a.id, a.email, a.org, a.created_at, a.last_signin, EXISTS (SELECT 1 FROM revocations r WHERE r.sub = a.id)
		 FROM accounts a WHERE a.id > ? AND a.last_signin <= ? ORDER BY a.id LIMIT ?`,
		after, cutoff, limit+1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rows.Close()
	out := []accountInfo{}
	for rows.Next() {
		var a accountInfo
		var created, day int64
		if err := rows.Scan(&a.AccountID, &a.Email, &a.Org, &created, &day, &a.Disabled); err != nil {
			s.fail(w, r, err)
			return
		}
		a.CreatedAt = rfc3339(time.Unix(0, created))
		a.LastSignin = time.Unix(day*86400, 0).UTC().Format(time.DateOnly)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		s.fail(w, r, err)
		return
	}
	more := int64(len(out)) > limit
	if more {
		out = out[:limit]
	}
	next := ""
	if len(out) > 0 {
		next = out[len(out)-1].AccountID
	}
	writeJSON(w, http.StatusOK, struct {
		Accounts []accountInfo `json:"accounts"`
		HasMore  bool          `json:"has_more"`
		Next     string        `json:"next"`
	}{out, more, next})
}

// DELETE /v1/internal/accounts/{account_id} (Bearer internal secret) → 200 {removed: true}
//
// Who: the operator only (401 for anyone else). On whom: one account. It
// is revoked (the relay closes its sockets and refuses it), and its row
// is deleted with everything the account holds (API keys, stock, inbox,
// memberships and join requests go with it, and the Welcomes it sent and
// the GroupInfos it put), its bytes given back to its storage budgets. An account that owns
// channels is not removed (409 account_owns_channels): their members
// would be left in a channel nobody owns. Unknown ids are 404. A
// stranger, a member or a crowd of accounts gets 401.
func (s *Server) handleRemoveAccount(w http.ResponseWriter, r *http.Request) {
	if !s.isInternal(r) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "the internal secret is required")
		return
	}
	id := r.PathValue("account_id")
	if _, _, err := s.store.lookupAccount(r.Context(), id); err != nil {
		if errors.Is(err, errNotFound) {
			err = errAccountNotFound
		}
		s.fail(w, r, err)
		return
	}
	var owned int64
	if err := s.store.queryRow(r.Context(), `SELECT count(*) FROM channels WHERE owner_id = ?`, id).Scan(&owned); err != nil {
		s.fail(w, r, err)
		return
	}
	if owned > 0 {
		s.fail(w, r, errOwnsChannels)
		return
	}
	if err := s.store.revoke(r.Context(), id, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.revocation()
	err := s.store.write(r.Context(), func(tx txn) error {
		var n int64
		if err := tx.queryRow(r.Context(), `SELECT count(*) FROM channels WHERE owner_id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errOwnsChannels
		}
		// What the account stored goes first, its bytes given back to
		// its budgets (budget.go), then the row and what cascades.
		if err := freeAccount(r.Context(), tx, id); err != nil {
			return err
		}
		_, err := tx.exec(r.Context(), `DELETE FROM accounts WHERE id = ?`, id)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"removed": true})
}
