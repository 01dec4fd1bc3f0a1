package directory

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skytale-oss/skytale/internal/httpx"
	"github.com/skytale-oss/skytale/internal/jwt"
)

// didPrefix is the DID method of account subs, used by revocation.
const didPrefix = "did:skytale:"

type createAccountRequest struct {
	Email     string `json:"email"`
	Org       string `json:"org"`
	OrgInvite string `json:"org_invite"`
	// SignupToken is a one-use token the operator minted, needed (unless
	// OrgInvite) when signup is "invite".
	SignupToken string `json:"signup_token"`
}

type createAccountResponse struct {
	AccountID string `json:"account_id"`
	Org       string `json:"org"`
	APIKey    string `json:"api_key"`
}

// POST /v1/accounts {email, org, org_invite?, signup_token?} → 201 {account_id, org, api_key}
//
// The first account of an org owns it. Another account joins an existing
// org only with an org invite of that org (403 org_taken without one, 403
// invalid_org_invite with a bad one); the operator, with the internal
// secret, may create accounts in any org, whatever Config.Signup says.
// Others: with signup "closed" 401; with "invite" an org invite or a
// signup token is needed (403 signup_requires_invite; a bad token 403
// invalid_signup_token, spending nothing); and every signup takes a token
// of its address's bucket and of its network's (IPv4 /24, IPv6 /64).
// The account joins the signup group of that network, which the relay's
// storage budget counts together (the grp claim); the group id is a keyed
// hash of the network, never the address.
func (s *Server) handleCreateAccount(w http.ResponseWriter, r *http.Request) {
	internal := s.isInternal(r)
	if s.cfg.Signup == SignupClosed && !internal {
		writeError(w, http.StatusUnauthorized, "unauthorized", "signup is closed: the operator creates accounts")
		return
	}
	if !internal && !s.allowSignup(w, r) {
		return
	}
	var req createAccountRequest
	if !decode(w, r, smallBody, &req) {
		return
	}
	if !validEmail(req.Email) {
		badRequest(w, "email is invalid")
		return
	}
	if !checkOrg(w, req.Org) {
		return
	}
	a := newAccount{email: req.Email, org: req.Org, anyOrg: internal}
	if req.OrgInvite != "" {
		a.orgInvite = hashSecret(req.OrgInvite)
	}
	if req.SignupToken != "" {
		a.signupToken = hashSecret(req.SignupToken)
	}
	if !internal {
		if s.cfg.Signup == SignupInvite && a.orgInvite == nil && a.signupToken == nil {
			s.fail(w, r, errSignupNeedsInvite)
			return
		}
		a.group = s.signupGroup(r)
	}
	id, key, err := s.createAccountWith(r.Context(), a)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, createAccountResponse{AccountID: id, Org: req.Org, APIKey: key})
}

// CreateAccount creates an account in process, as POST /v1/accounts does
// over HTTP with the internal secret (whatever OpenSignup says, and in any
// org, existing or not), and returns its id and its API key. It is meant
// for embedders and test stacks that provision accounts without going
// through the network.
func (s *Server) CreateAccount(ctx context.Context, email, org string) (accountID, apiKey string, err error) {
	if !validEmail(email) {
		return "", "", errors.New("directory: email is invalid")
	}
	if !validOrg(org) {
		return "", "", errors.New("directory: org is invalid")
	}
	return s.createAccount(ctx, email, org, nil, true)
}

func (s *Server) createAccount(ctx context.Context, email, org string, orgInvite []byte, anyOrg bool) (id, key string, err error) {
	return s.createAccountWith(ctx, newAccount{email: email, org: org, orgInvite: orgInvite, anyOrg: anyOrg})
}

func (s *Server) createAccountWith(ctx context.Context, a newAccount) (id, key string, err error) {
	if a.id, err = s.newID(); err != nil {
		return "", "", err
	}
	key, a.keyHash, err = s.newSecret(prefixAPIKey)
	if err != nil {
		return "", "", err
	}
	if err := s.store.createAccountAs(ctx, a, s.cfg.Now()); err != nil {
		return "", "", err
	}
	return a.id, key, nil
}

func validEmail(e string) bool {
	if len(e) < 3 || len(e) > 254 || !utf8.ValidString(e) {
		return false
	}
	at := strings.LastIndexByte(e, '@')
	if at <= 0 || at == len(e)-1 {
		return false
	}
	for _, c := range e {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// validOrg accepts what can stand as the first part of a channel name.
func validOrg(o string) bool {
	if o == "" || len(o) > 128 || o == "." || o == ".." {
		return false
	}
	for i := 0; i < len(o); i++ {
		c := o[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// checkOrg answers 400 unless o is a valid org, and reports whether it is.
func checkOrg(w http.ResponseWriter, o string) bool {
	if !validOrg(o) {
		badRequest(w, "org must be 1 to 128 characters of [A-Za-z0-9_.-], not \".\" or \"..\"")
		return false
	}
	return true
}

type tokenRequest struct {
	TTLSeconds *int64  `json:"ttl_seconds"`
	Audience   *string `json:"audience"`
}

type tokenResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// POST /v1/tokens (Bearer API key) {ttl_seconds?, audience?} → 201 {token, expires_at}
//
// The token carries the account's org and signup group (the org and grp
// claims), which the relay's storage budgets count by, and the sign-in
// is recorded to the day (for the operator's list of idle accounts).
//
// Only an API key can mint: a JWT minting JWTs would let a token outlive
// its 300 seconds forever.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	tok, _ := httpx.Bearer(r)
	if !strings.HasPrefix(tok, prefixAPIKey) && !strings.HasPrefix(tok, prefixChanKey) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "an API key is required")
		return
	}
	p, ok := s.authLimited(w, r, limitToken)
	if !ok {
		return
	}
	var req tokenRequest
	if hasBody(r) && !decode(w, r, smallBody, &req) {
		return
	}
	ttl := jwt.MaxTTL
	if req.TTLSeconds != nil {
		if *req.TTLSeconds < 1 || *req.TTLSeconds > int64(jwt.MaxTTL/time.Second) {
			badRequest(w, "ttl_seconds must be 1 to 300")
			return
		}
		ttl = time.Duration(*req.TTLSeconds) * time.Second
	}
	aud := jwt.AudienceAPI
	if req.Audience != nil {
		if *req.Audience != jwt.AudienceAPI && *req.Audience != jwt.AudienceRelay {
			badRequest(w, "audience must be skytale-api or skytale-relay")
			return
		}
		aud = *req.Audience
	}
	if err := s.touchSignin(r.Context(), p); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.touchDevice(r.Context(), p, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.cfg.Now()
	exp := now.Add(ttl)
	token, err := jwt.Mint(s.cfg.JWTSecret, jwt.Claims{
		Subject:   p.account,
		Audience:  aud,
		Channel:   p.channel,
		Org:       p.org,
		Group:     p.group,
		Device:    p.device,
		IssuedAt:  now,
		ExpiresAt: exp,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, tokenResponse{Token: token, ExpiresAt: rfc3339(exp)})
}

type revokeRequest struct {
	DID string `json:"did"`
}

// POST /v1/revocations {did: "did:skytale:<sub>"} → 200 {revoked: true}
//
// An account may revoke itself; the internal secret may revoke any sub.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	internal := s.isInternal(r)
	var p principal
	if !internal {
		var ok bool
		if p, ok = s.authenticate(w, r); !ok {
			return
		}
		if p.channel != "" {
			forbidScoped(w)
			return
		}
	}
	var req revokeRequest
	if !decode(w, r, smallBody, &req) {
		return
	}
	sub, ok := strings.CutPrefix(req.DID, didPrefix)
	if !ok || sub == "" || len(sub) > 256 || !storable(sub) || strings.ContainsFunc(sub, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		badRequest(w, "did must be did:skytale:<sub>")
		return
	}
	if !internal && sub != p.account {
		writeError(w, http.StatusForbidden, "forbidden", "an account may only revoke itself")
		return
	}
	if !internal && p.device != "" {
		writeError(w, http.StatusForbidden, "forbidden", "a linked device cannot revoke its account; a device holding the identity can revoke the device")
		return
	}
	if err := s.store.revoke(r.Context(), sub, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.revocation()
	writeJSON(w, http.StatusOK, map[string]bool{"revoked": true})
}

// GET /v1/internal/revocations?after=N (Bearer internal secret) → 200 {subs, next}
func (s *Server) handleInternalRevocations(w http.ResponseWriter, r *http.Request) {
	after, ok := s.internalCursor(w, r)
	if !ok {
		return
	}
	subs, next, err := s.RevokedSince(r.Context(), after)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Subs []string `json:"subs"`
		Next int64    `json:"next"`
	}{subs, next})
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
