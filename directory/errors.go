package directory

import (
	"bufio"
	"errors"
	"io"
	"net/http"

	"github.com/skytale-oss/skytale/internal/httpx"
)

func writeJSON(w http.ResponseWriter, status int, v any) { httpx.WriteJSON(w, status, v) }

func writeError(w http.ResponseWriter, status int, code, message string) {
	httpx.WriteError(w, status, code, message)
}

// decode reads a JSON body of at most max bytes into v. On failure it writes
// the error answer and returns false.
func decode(w http.ResponseWriter, r *http.Request, max int64, v any) bool {
	if err := httpx.DecodeJSON(w, r, max, v); err != nil {
		httpx.WriteBodyError(w, err)
		return false
	}
	return true
}

// hasBody reports whether the request has a non-empty body, for endpoints
// where the whole body is optional. It leaves the body readable.
func hasBody(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return false
	}
	br := bufio.NewReaderSize(r.Body, 16)
	if _, err := br.Peek(1); err != nil {
		return false
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	return true
}

// fail writes the answer for an error from the store or a check. Errors not
// in the table are internal: they are logged (database errors carry no
// request values) and answered with a bare 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	retryAfterFor(w, err)
	var qe *quotaError
	if errors.As(err, &qe) {
		s.metrics.quotaRefusal(qe.scope)
		writeQuotaExceeded(w, qe.scope)
		return
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			writeError(w, e.status, e.code, e.msg)
			return
		}
	}
	s.metrics.backendError()
	s.log.Error("directory internal error", "method", r.Method, "path", s.logPath(r.URL.Path, r.Pattern), "err", err)
	writeError(w, http.StatusInternalServerError, "internal", "internal error")
}

var errorTable = []struct {
	err    error
	status int
	code   string
	msg    string
}{
	{errNotFound, http.StatusNotFound, "not_found", "not found"},
	{errChannelNotFound, http.StatusNotFound, "channel_not_found", "channel not found"},
	{errNotOwner, http.StatusForbidden, "not_owner", "caller does not own the channel"},
	{errChannelTaken, http.StatusConflict, "channel_taken", "channel is registered by another account"},
	{errInviteInvalid, http.StatusForbidden, "invalid_invite", "invite token is invalid, expired or used up"},
	{errFederationDenied, http.StatusForbidden, "invalid_federation_token", "federation token is invalid, expired, used up or for another org"},
	{errTooManyPending, http.StatusTooManyRequests, "too_many_pending", "channel already has 1000 pending join requests"},
	{errSeatExists, http.StatusConflict, "seat_exists", "seat identity is already registered"},
	{errGrantNotPending, http.StatusConflict, "already_approved", "device grant is already approved"},
	{errTooManyGrants, http.StatusTooManyRequests, "too_many_grants", "this address already has the most open device grants allowed; approve them or let them expire"},
	{errAccountNotFound, http.StatusNotFound, "account_not_found", "account not found"},
	{errNotMember, http.StatusForbidden, "not_member", "caller is neither the owner nor a member of the channel"},
	{errRemoved, http.StatusForbidden, "removed", "this account was removed from the channel; only an invite made since readmits it"},
	{errInviteExists, http.StatusConflict, "invite_exists", "an invite with that token hash exists; make another token"},
	{errOwnerCannotLeave, http.StatusConflict, "owner_cannot_leave", "the owner of a channel cannot be removed from it"},
	{errOrgTaken, http.StatusForbidden, "org_taken", "the org exists: joining it needs an org invite (org_invite) from one of its accounts"},
	{errOrgInviteInvalid, http.StatusForbidden, "invalid_org_invite", "org invite is invalid, expired, used up or for another org"},
	{errSignupTokenInvalid, http.StatusForbidden, "invalid_signup_token", "signup token is invalid, expired or already used"},
	{errSignupNeedsInvite, http.StatusForbidden, "signup_requires_invite", "signup here needs an org invite (org_invite) or a signup token from the operator (signup_token)"},
	{errOwnsChannels, http.StatusConflict, "account_owns_channels", "the account owns channels; removing it would orphan their members, so it stays"},
	{errKeyPackageRequired, http.StatusBadRequest, "invalid_request", "key_package is required unless the invite is an auto invite"},
	{errNotAMember, http.StatusForbidden, "not_a_member", "caller is neither the owner nor a member of the channel"},
	{errStockFull, http.StatusConflict, "stock_full", "the key-package stock is full: at most 100 one-time key packages per device and 10 devices per account"},
	{errNoKeyPackages, http.StatusNotFound, "no_key_packages", "the account has no key packages in stock"},
	{errSelfClaim, http.StatusBadRequest, "invalid_request", "an account cannot claim its own key packages"},
	{errAlreadyDelivered, http.StatusConflict, "already_delivered", "a Welcome was already delivered for this claim"},
	{errInboxFull, http.StatusConflict, "inbox_full", "the account's inbox is full until it reads and deletes entries"},
	{errIdentityNotYours, http.StatusForbidden, "identity_not_yours", "a device name must be the caller's registered seat identity, or a device identity certified by that identity's key (with device_key)"},
	{errNotAllowed, http.StatusForbidden, "not_allowed", "the caller shares no room or org with that person and presents no add-token of theirs"},
	{errAddTokenInvalid, http.StatusForbidden, "invalid_add_token", "add-token is invalid, expired, used up or revoked"},
	{errTooManyAddTokens, http.StatusTooManyRequests, "too_many_add_tokens", "the account already holds 100 live add-tokens; revoke some or let them expire"},
	{errOffersRationed, http.StatusTooManyRequests, "rate_limited", "the person's one-time join offers for this hour are used up and the device has no last-resort offer"},
	{errTooManyDevices, http.StatusConflict, "too_many_devices", "the account has linked the most devices allowed (50, revoked ones included)"},
	{errBadCertificate, http.StatusForbidden, "invalid_certificate", "the device certificate is not signed by an identity of this account over this grant's keys, or names a revoked key"},
	{errLinkNeedsSignature, http.StatusBadRequest, "invalid_request", "a certificate can only approve a grant made with a signing_key"},
	{errLinkedApprover, http.StatusForbidden, "not_identity_holder", "a linked device holds no identity: it can approve only a device restored from the phrase (whose grant carries the identity's proof); link devices from one that holds the identity"},
	{errBadRevocation, http.StatusForbidden, "revocation_not_yours", "the revocation is not signed by an identity this account registered"},
	{errTooManyRevocations, http.StatusConflict, "too_many_revocations", "this identity has revoked the most devices allowed (200)"},
	{errProofRequired, http.StatusForbidden, "proof_required", "a join by an auto invite needs proof: the identity's member key's signature over the join (an older seat must be updated)"},
	{errInvalidProof, http.StatusForbidden, "invalid_proof", "proof must be the signature of the named identity's member key over the join label, the account id, the channel, the identity and the token's SHA-256"},
	{errSenderQuota, http.StatusTooManyRequests, "quota_exceeded", "the caller's share of that person's inbox is used up until the person reads or declines them"},
}

func badRequest(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadRequest, "invalid_request", msg)
}
