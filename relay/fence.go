package relay

import (
	"context"
	"crypto/hmac"
	"errors"
	"net/http"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/internal/httpx"
)

// The commit fence, read from outside: the directory keeps a channel's
// GroupInfo only for the epoch the fence has reached, so a member cannot
// store one for an epoch the group never had.

var errFenceChannel = errors.New("relay: the fence of a name that is not a channel")

// NextEpoch returns the commit epoch the relay expects next on channel (a
// commit at epoch e is accepted only while it expects e, and then it
// expects e+1), and known false when the channel has had neither a commit
// nor a fence reset. Only what is durable counts: once a publisher holds
// the ack of its commit, NextEpoch shows the epoch after it. On JetStream
// the fence is read from the stream, so every relay of a cluster answers
// the same. It makes *Server a directory.FenceSource.
func (s *Server) NextEpoch(ctx context.Context, ch string) (epoch uint64, known bool, err error) {
	if channel.Valid(ch) != nil {
		return 0, false, errFenceChannel
	}
	if !s.gate.Enter() {
		return 0, false, errors.New("relay: closed")
	}
	defer s.gate.Leave()
	return s.arch.NextEpoch(ctx, ch)
}

// fenceAnswer is the body of GET /v1/internal/fence.
type fenceAnswer struct {
	Channel string `json:"channel"`
	Epoch   uint64 `json:"epoch"`
	Known   bool   `json:"known"`
}

// GET /v1/internal/fence?channel=… (Bearer internal secret) → 200 {channel, epoch, known}
//
// Who: only the holder of Config.InternalSecret (a directory that runs
// apart from its relays); without the secret configured the endpoint
// answers 401 to everyone, and so it does to any account token, member or
// not. On whom: it reads one channel's fence and changes nothing. How
// much: it stores nothing and answers a few dozen bytes.
func (s *Server) handleInternalFence(w http.ResponseWriter, r *http.Request) {
	tok, ok := httpx.Bearer(r)
	if !ok || len(s.cfg.InternalSecret) == 0 || !hmac.Equal([]byte(tok), s.cfg.InternalSecret) {
		s.logRequest(r, http.StatusUnauthorized)
		writeError(w, http.StatusUnauthorized, "unauthorized", "the internal secret is required")
		return
	}
	name := r.URL.Query().Get("channel")
	if channel.Valid(name) != nil {
		s.logRequest(r, http.StatusBadRequest)
		writeError(w, http.StatusBadRequest, "invalid_channel", "channel must be org/namespace/service")
		return
	}
	epoch, known, err := s.arch.NextEpoch(r.Context(), name)
	if err != nil {
		s.log.Error("relay: fence read failed", "err", err)
		s.logRequest(r, http.StatusServiceUnavailable)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the commit fence cannot be read")
		return
	}
	s.logRequest(r, http.StatusOK)
	httpx.WriteJSON(w, http.StatusOK, fenceAnswer{Channel: name, Epoch: epoch, Known: known})
}
