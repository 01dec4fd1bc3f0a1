package directory

import (
	"net/http"
	"time"
)

type createOrgInviteRequest struct {
	Org        string `json:"org"`
	MaxUses    *int64 `json:"max_uses"`
	TTLSeconds *int64 `json:"ttl_seconds"`
}

// POST /v1/orgs/invites {org, max_uses?, ttl_seconds?} → 201 {token: "skt_org_…", expires_at}
//
// Any account of org (with an account-wide credential) may invite another
// account into it; signup takes the token as org_invite. Uses and lifetime
// follow the channel invites' ranges and defaults.
func (s *Server) handleCreateOrgInvite(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	var req createOrgInviteRequest
	if !decode(w, r, smallBody, &req) {
		return
	}
	if !checkOrg(w, req.Org) {
		return
	}
	if req.Org != p.org {
		writeError(w, http.StatusForbidden, "wrong_org", "an account invites only into its own org")
		return
	}
	s.mintInvite(w, r, prefixOrgInvite, req.MaxUses, req.TTLSeconds, func(hash []byte, uses int, exp, now time.Time) error {
		return s.store.createOrgInvite(r.Context(), req.Org, p.account, hash, uses, exp, now)
	})
}
