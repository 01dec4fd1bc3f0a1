package directory

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"time"
)

// MaxGroupInfo is the largest GroupInfo the directory keeps, in decoded
// bytes.
const MaxGroupInfo = 1 << 20 // 1,048,576

// groupInfoBody caps PUT /v1/channels/groupinfo: a 1 MiB GroupInfo is
// 1,398,104 base64 characters.
const groupInfoBody = 1536 << 10

// groupInfo is the GroupInfo kept for a channel.
type groupInfo struct {
	epoch uint64
	data  []byte
}

// staleEpochError is errStaleEpoch with the epoch of the GroupInfo kept.
type staleEpochError struct{ epoch uint64 }

func (e *staleEpochError) Error() string { return errStaleEpoch.Error() }
func (e *staleEpochError) Unwrap() error { return errStaleEpoch }

// readGroupInfo returns the GroupInfo kept for the channel chID, or
// errNotFound.
func readGroupInfo(ctx context.Context, q queryer, chID string) (*groupInfo, error) {
	var gi groupInfo
	var epoch int64
	err := q.queryRow(ctx, `SELECT epoch, group_info FROM group_infos WHERE channel_id = ?`, chID).Scan(&epoch, &gi.data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	gi.epoch = uint64(epoch)
	return &gi, nil
}

// putGroupInfo keeps data as the channel's GroupInfo unless the one kept
// is of a later epoch (a *staleEpochError); an equal epoch replaces it.
// The caller must own the channel or be a member. The check is part of
// the upsert's own statement, which a concurrent put of the channel waits
// on and then re-checks, so the highest epoch always wins.
func (s *store) putGroupInfo(ctx context.Context, channel, caller string, epoch uint64, data []byte, now time.Time) error {
	if epoch > math.MaxInt64 {
		return errors.New("directory: epoch out of range")
	}
	return s.write(ctx, func(tx txn) error {
		chID, err := memberChannel(ctx, tx, channel, caller)
		if err != nil {
			return err
		}
		n, err := tx.execN(ctx,
			`INSERT INTO group_infos (channel_id, epoch, group_info, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)
			 ON CONFLICT (channel_id) DO UPDATE SET epoch = excluded.epoch, group_info = excluded.group_info,
			   updated_by = excluded.updated_by, updated_at = excluded.updated_at
			 WHERE group_infos.epoch <= excluded.epoch`,
			chID, int64(epoch), data, caller, now.UnixNano())
		if err != nil {
			return err
		}
		if n == 1 {
			return nil
		}
		gi, err := readGroupInfo(ctx, tx, chID)
		if err != nil {
			return err
		}
		return &staleEpochError{gi.epoch}
	})
}

// getGroupInfo returns the GroupInfo of channel for its owner or a member.
func (s *store) getGroupInfo(ctx context.Context, channel, caller string) (*groupInfo, error) {
	chID, err := memberChannel(ctx, s, channel, caller)
	if err != nil {
		return nil, removedOr(ctx, s, channel, caller, err)
	}
	return readGroupInfo(ctx, s, chID)
}

type putGroupInfoRequest struct {
	Channel   string  `json:"channel"`
	Epoch     *uint64 `json:"epoch"`
	GroupInfo string  `json:"group_info"`
}

type groupInfoAnswer struct {
	Epoch     uint64 `json:"epoch"`
	GroupInfo string `json:"group_info"`
}

// PUT /v1/channels/groupinfo {channel, epoch, group_info} → 200 {epoch}
func (s *Server) handlePutGroupInfo(w http.ResponseWriter, r *http.Request, p principal) {
	var req putGroupInfoRequest
	if !decode(w, r, groupInfoBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	if req.Epoch == nil {
		badRequest(w, "epoch is required")
		return
	}
	if *req.Epoch > math.MaxInt64 {
		badRequest(w, "epoch must be at most 9223372036854775807")
		return
	}
	data, ok := decodeB64(w, "group_info", req.GroupInfo, MaxGroupInfo)
	if !ok {
		return
	}
	err := s.store.putGroupInfo(r.Context(), req.Channel, p.account, *req.Epoch, data, s.cfg.Now())
	var se *staleEpochError
	if errors.As(err, &se) {
		writeJSON(w, http.StatusConflict, struct {
			Error   string `json:"error"`
			Message string `json:"message"`
			Epoch   uint64 `json:"epoch"`
		}{"stale_epoch", "a GroupInfo of a later epoch is kept; epoch is its epoch", se.epoch})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Epoch uint64 `json:"epoch"`
	}{*req.Epoch})
}

// GET /v1/channels/groupinfo?channel=… → 200 {epoch, group_info}
func (s *Server) handleGetGroupInfo(w http.ResponseWriter, r *http.Request, p principal) {
	name := r.URL.Query().Get("channel")
	if !checkChannel(w, p, name) {
		return
	}
	gi, err := s.store.getGroupInfo(r.Context(), name, p.account)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, groupInfoAnswer{Epoch: gi.epoch, GroupInfo: base64.StdEncoding.EncodeToString(gi.data)})
}
