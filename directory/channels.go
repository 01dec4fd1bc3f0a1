package directory

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/skytale-oss/skytale/internal/channel"
)

// Invite limits (inclusive) and defaults, shared by federation invites.
const (
	defaultMaxUses = 1
	maxMaxUses     = 100
	defaultTTL     = 3600
	minTTL         = 60
	maxTTL         = 604800
)

// checkChannel validates a channel name and the caller's scope. On failure
// it writes the answer and returns false.
func checkChannel(w http.ResponseWriter, p principal, name string) bool {
	if err := channel.Valid(name); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_channel", err.Error())
		return false
	}
	if !p.allows(name) {
		forbidScope(w)
		return false
	}
	return true
}

// decodeB64 decodes standard padded base64 of 1..max bytes. On failure it
// writes the answer and returns false.
func decodeB64(w http.ResponseWriter, field, s string, max int) ([]byte, bool) {
	if base64.StdEncoding.DecodedLen(len(s)) > max+2 {
		writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", field+" is too large")
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_base64", field+" is not valid standard base64")
		return nil, false
	}
	if len(b) == 0 {
		badRequest(w, field+" is empty")
		return nil, false
	}
	if len(b) > max {
		writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", field+" is too large")
		return nil, false
	}
	return b, true
}

type registerChannelRequest struct {
	Name string `json:"name"`
}

type channelResponse struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// POST /v1/channels {name} → 201 {id, name}; idempotent per account.
func (s *Server) handleRegisterChannel(w http.ResponseWriter, r *http.Request, p principal) {
	var req registerChannelRequest
	if !decode(w, r, smallBody, &req) || !checkChannel(w, p, req.Name) {
		return
	}
	if org, _, _ := channel.Split(req.Name); org != p.org {
		writeError(w, http.StatusForbidden, "wrong_org", "an account registers channels only under its own org")
		return
	}
	newID, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := s.store.registerChannel(r.Context(), newID, req.Name, p.account, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, channelResponse{ID: id, Name: req.Name})
}

// inviteLimits applies the defaults and ranges of max_uses and ttl_seconds:
// absent takes the default, present but out of range is refused.
func inviteLimits(w http.ResponseWriter, maxUses, ttl *int64) (int, time.Duration, bool) {
	uses, secs := int64(defaultMaxUses), int64(defaultTTL)
	if maxUses != nil {
		if *maxUses < 1 || *maxUses > maxMaxUses {
			badRequest(w, "max_uses must be 1 to 100")
			return 0, 0, false
		}
		uses = *maxUses
	}
	if ttl != nil {
		if *ttl < minTTL || *ttl > maxTTL {
			badRequest(w, "ttl_seconds must be 60 to 604800")
			return 0, 0, false
		}
		secs = *ttl
	}
	return int(uses), time.Duration(secs) * time.Second, true
}

type createInviteRequest struct {
	Channel    string `json:"channel"`
	MaxUses    *int64 `json:"max_uses"`
	TTLSeconds *int64 `json:"ttl_seconds"`
	Auto       bool   `json:"auto"`
	TokenHash  string `json:"token_hash"`
}

type inviteResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// POST /v1/channels/invites {channel, max_uses?, ttl_seconds?, auto?} → 201 {token, expires_at}
//
// With "auto": true and "token_hash" (standard base64 of the 32-byte
// SHA-256 of the token the owner's seat made) the directory mints nothing:
// it stores the hash as it would its own token's and answers 201
// {expires_at}. The seat derives that token and the invite's key from one
// secret the directory never sees, so nothing the directory holds lets it
// sign for the invite in the room; the token only counts uses, lifetime
// and the caller's channel here. As for any invite, only the channel's
// owner may make one (others get 403 not_owner), each is one row within
// the invite creation rate limits, and a hash already stored is 409
// invite_exists.
func (s *Server) handleCreateInvite(w http.ResponseWriter, r *http.Request, p principal) {
	var req createInviteRequest
	if !decode(w, r, smallBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	store := func(hash []byte, uses int, exp, now time.Time) error {
		return s.store.createInvite(r.Context(), req.Channel, p.account, hash, uses, req.Auto, exp, now)
	}
	if req.TokenHash == "" {
		s.mintInvite(w, r, prefixInvite, req.MaxUses, req.TTLSeconds, store)
		return
	}
	if !req.Auto {
		badRequest(w, "token_hash is only for auto invites")
		return
	}
	hash, err := base64.StdEncoding.Strict().DecodeString(req.TokenHash)
	if err != nil || len(hash) != sha256.Size {
		badRequest(w, "token_hash must be standard base64 of 32 bytes")
		return
	}
	uses, ttl, ok := inviteLimits(w, req.MaxUses, req.TTLSeconds)
	if !ok {
		return
	}
	now := s.cfg.Now()
	exp := now.Add(ttl)
	if err := store(hash, uses, exp, now); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, struct {
		ExpiresAt string `json:"expires_at"`
	}{rfc3339(exp)})
}

// mintInvite checks the use and lifetime limits, mints a token with prefix,
// stores its hash with store, and answers 201 {token, expires_at}.
func (s *Server) mintInvite(w http.ResponseWriter, r *http.Request, prefix string, maxUses, ttlSeconds *int64, store func(hash []byte, uses int, exp, now time.Time) error) {
	uses, ttl, ok := inviteLimits(w, maxUses, ttlSeconds)
	if !ok {
		return
	}
	tok, hash, err := s.newSecret(prefix)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.cfg.Now()
	exp := now.Add(ttl)
	if err := store(hash, uses, exp, now); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, inviteResponse{Token: tok, ExpiresAt: rfc3339(exp)})
}

type createFederationInviteRequest struct {
	Channel    string `json:"channel"`
	Org        string `json:"org"`
	MaxUses    *int64 `json:"max_uses"`
	TTLSeconds *int64 `json:"ttl_seconds"`
	Auto       bool   `json:"auto"`
}

// POST /v1/federation/invites {channel, org, max_uses?, ttl_seconds?, auto?} → 201 {token, expires_at}
func (s *Server) handleCreateFederationInvite(w http.ResponseWriter, r *http.Request, p principal) {
	var req createFederationInviteRequest
	if !decode(w, r, smallBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	if !checkOrg(w, req.Org) {
		return
	}
	s.mintInvite(w, r, prefixFed, req.MaxUses, req.TTLSeconds, func(hash []byte, uses int, exp, now time.Time) error {
		return s.store.createFederationInvite(r.Context(), req.Channel, p.account, req.Org, hash, uses, req.Auto, exp, now)
	})
}

type joinRequestBody struct {
	Channel         string `json:"channel"`
	Token           string `json:"token"`
	KeyPackage      string `json:"key_package"`
	Identity        string `json:"identity"`
	FederationToken string `json:"federation_token"`
	// Proof is the named identity's member key's Ed25519 signature over
	// JoinProof (standard base64); DeviceKey is that key (standard
	// base64) when Identity is a device identity (joinproof.go).
	Proof     string `json:"proof"`
	DeviceKey string `json:"device_key"`
}

// POST /v1/channels/join {channel, token, key_package?, identity, federation_token?, proof?, device_key?} → 201 {request_id}
//
// With federation_token the standard invite is not checked (nor consumed):
// the federation invite is, for the caller's org. With an auto invite the
// caller becomes a member at once, key_package is optional, and the
// answer is 201 {request_id, auto: true, epoch?, group_info?} with the
// channel's GroupInfo if one was put. A join by an auto invite proves
// possession of the identity's member key (joinproof.go): without proof
// it is 403 proof_required, with a proof that does not verify 403
// invalid_proof, and neither uses the invite.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request, p principal) {
	var req joinRequestBody
	if !decode(w, r, joinBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	if n := utf8.RuneCountInString(req.Identity); n < 1 || n > MaxIdentity || !storable(req.Identity) {
		badRequest(w, "identity must be 1 to 256 characters, none of them NUL")
		return
	}
	if req.Token == "" && req.FederationToken == "" {
		badRequest(w, "token (or federation_token) is required")
		return
	}
	// An absent key_package is refused in the store unless the invite
	// turns out to be an auto invite.
	var kp []byte
	if req.KeyPackage != "" {
		var ok bool
		if kp, ok = decodeB64(w, "key_package", req.KeyPackage, MaxKeyPackage); !ok {
			return
		}
	}
	id, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	jp := joinParams{
		id:         id,
		channel:    req.Channel,
		caller:     p,
		identity:   req.Identity,
		keyPackage: kp,
		maxPending: MaxPending,
		now:        s.cfg.Now(),
	}
	tokenHash := hashSecret(req.Token)
	if req.FederationToken != "" {
		tokenHash = hashSecret(req.FederationToken)
		jp.fedHash = tokenHash
	} else {
		jp.inviteHash = tokenHash
	}
	if !s.checkJoinRequestProof(w, r, p.account, &req, tokenHash) {
		return
	}
	j, err := s.store.join(r.Context(), jp)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !j.auto {
		writeJSON(w, http.StatusCreated, map[string]string{"request_id": id})
		return
	}
	out := autoJoinAnswer{RequestID: id, Auto: true}
	if j.groupInfo != nil {
		out.Epoch = &j.groupInfo.epoch
		out.GroupInfo = base64.StdEncoding.EncodeToString(j.groupInfo.data)
	}
	writeJSON(w, http.StatusCreated, out)
}

// autoJoinAnswer is the answer to a join by an auto invite.
type autoJoinAnswer struct {
	RequestID string  `json:"request_id"`
	Auto      bool    `json:"auto"`
	Epoch     *uint64 `json:"epoch,omitempty"`
	GroupInfo string  `json:"group_info,omitempty"`
}

type pendingEntry struct {
	ID         string `json:"id"`
	Identity   string `json:"identity"`
	AccountID  string `json:"account_id"`
	KeyPackage string `json:"key_package"`
	CreatedAt  string `json:"created_at"`
}

// GET /v1/channels/pending?channel=…&after=… → 200 {requests: [...], has_more, next?}, oldest first.
//
// A page of at most maxPendingListed requests (pending.go); with has_more,
// next is the after of the page after.
func (s *Server) handlePending(w http.ResponseWriter, r *http.Request, p principal) {
	name := r.URL.Query().Get("channel")
	after, ok := pageCursor(w, r, parsePendingCursor)
	if !ok || !checkChannel(w, p, name) {
		return
	}
	reqs, next, err := s.store.pendingPage(r.Context(), name, p.account, after, maxPendingListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]pendingEntry, len(reqs))
	for i, q := range reqs {
		out[i] = pendingEntry{
			ID:         q.id,
			Identity:   q.identity,
			AccountID:  q.account,
			KeyPackage: base64.StdEncoding.EncodeToString(q.keyPackage),
			CreatedAt:  rfc3339(q.createdAt),
		}
	}
	ans := struct {
		Requests []pendingEntry `json:"requests"`
		HasMore  bool           `json:"has_more"`
		Next     string         `json:"next,omitempty"`
	}{Requests: out, HasMore: next != nil}
	if next != nil {
		ans.Next = next.String()
	}
	writeJSON(w, http.StatusOK, ans)
}

type publishWelcomeRequest struct {
	RequestID string `json:"request_id"`
	Welcome   string `json:"welcome"`
}

// POST /v1/channels/welcome {request_id, welcome} → 200 {status: "completed", welcome: null}
func (s *Server) handlePublishWelcome(w http.ResponseWriter, r *http.Request, p principal) {
	var req publishWelcomeRequest
	if !decode(w, r, welcomeBody, &req) {
		return
	}
	if req.RequestID == "" {
		badRequest(w, "request_id is required")
		return
	}
	welcome, ok := decodeB64(w, "welcome", req.Welcome, MaxWelcome)
	if !ok {
		return
	}
	if err := s.store.completeRequest(r.Context(), req.RequestID, p.account, p.channel, welcome, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "completed", "welcome": nil})
}

// GET /v1/channels/welcome/{request_id} → 200 {status: "pending"} or {status: "completed", welcome}
func (s *Server) handlePollWelcome(w http.ResponseWriter, r *http.Request, p principal) {
	status, welcome, err := s.store.requestStatus(r.Context(), r.PathValue("request_id"), p.account, p.channel)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if status != "completed" || welcome == nil {
		// Pending, or completed by an auto invite (no Welcome: the
		// joiner enters the group by an external commit).
		writeJSON(w, http.StatusOK, map[string]string{"status": status})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"status":  status,
		"welcome": base64.StdEncoding.EncodeToString(welcome),
	})
}

// POST /v1/channels/welcome/{request_id}/ack → 200 {acked: true|false}
func (s *Server) handleAck(w http.ResponseWriter, r *http.Request, p principal) {
	acked, err := s.store.ackRequest(r.Context(), r.PathValue("request_id"), p.account, p.channel)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"acked": acked})
}
