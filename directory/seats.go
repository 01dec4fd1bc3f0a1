package directory

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/skytale-oss/skytale/internal/channel"
)

type registerSeatRequest struct {
	Identity string `json:"identity"`
	Channel  string `json:"channel"`
}

type registerSeatResponse struct {
	SeatID     string `json:"seat_id"`
	Credential string `json:"credential"`
}

// POST /v1/seats {identity, channel} → 201 {seat_id, credential}
//
// Registers a seat's did:key identity and its sync channel (registering the
// channel for the account if nobody has) and answers a channel-scoped
// sk_chan_ credential. An identity registers once: a second registration is
// 409 even when byte-identical, because the guard is the point.
func (s *Server) handleRegisterSeat(w http.ResponseWriter, r *http.Request, p principal) {
	if p.channel != "" {
		forbidScoped(w)
		return
	}
	var req registerSeatRequest
	if !decode(w, r, smallBody, &req) {
		return
	}
	if !strings.HasPrefix(req.Identity, "did:key:") || len(req.Identity) == len("did:key:") ||
		!storable(req.Identity) || utf8.RuneCountInString(req.Identity) > MaxIdentity {
		badRequest(w, "identity must be a did:key of at most 256 characters, none of them NUL")
		return
	}
	if !checkChannel(w, p, req.Channel) {
		return
	}
	if org, _, _ := channel.Split(req.Channel); org != p.org {
		writeError(w, http.StatusForbidden, "wrong_org", "an account registers channels only under its own org")
		return
	}
	seatID, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	chID, err := s.newID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cred, hash, err := s.newSecret(prefixChanKey)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.registerSeat(r.Context(), seatID, chID, req.Identity, p.account, req.Channel, hash, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, registerSeatResponse{SeatID: seatID, Credential: cred})
}
