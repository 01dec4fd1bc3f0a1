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

// putGroupInfo keeps data as the channel's GroupInfo, of epoch, unless
// the one kept is of a later epoch (a *staleEpochError); an equal epoch
// replaces it. The caller must own the channel or be a member, checked
// under the channel's tree lock, which a removal takes too, so a member
// removed meanwhile stores nothing. The handler has checked epoch against
// the commit fence, so only the epoch the relay has reached gets here; the
// later-epoch rule orders two puts that raced a commit. The bytes are
// charged to the caller, with its trees, against store.treeQuota (one
// budget for what an account makes the directory keep for rooms); the
// GroupInfo it replaces is no longer charged to whoever put it.
//
// over, when not negative, is the epoch of a kept GroupInfo the caller has
// found beyond the fence (kept under the old highest-epoch rule, which let
// a member jam it): the put replaces that one too.
func (s *store) putGroupInfo(ctx context.Context, channel, caller string, epoch uint64, data []byte, over int64, now time.Time) error {
	if epoch > math.MaxInt64 {
		return errors.New("directory: epoch out of range")
	}
	return s.write(ctx, func(tx txn) error {
		chID, _, err := channelOwner(ctx, tx, channel)
		if err != nil {
			return err
		}
		if err := tx.b.LockKey(ctx, tx.tx, treeLockPrefix+chID); err != nil {
			return err
		}
		if _, err := memberChannel(ctx, tx, channel, caller); err != nil {
			return err
		}
		// The GroupInfo replaced, if any, is given back to whoever put
		// it, and the new one charged to the caller (budget.go).
		u := usage{}
		var oldBy string
		var oldSize int64
		switch err := tx.queryRow(ctx, `SELECT updated_by, LENGTH(group_info) FROM group_infos WHERE channel_id = ?`, chID).Scan(&oldBy, &oldSize); {
		case err == nil:
			u.add(oldBy, -oldSize)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		u.add(caller, int64(len(data)))
		n, err := tx.execN(ctx,
			`INSERT INTO group_infos (channel_id, epoch, group_info, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)
			 ON CONFLICT (channel_id) DO UPDATE SET epoch = excluded.epoch, group_info = excluded.group_info,
			   updated_by = excluded.updated_by, updated_at = excluded.updated_at
			 WHERE group_infos.epoch <= excluded.epoch OR group_infos.epoch = ?`,
			chID, int64(epoch), data, caller, now.Truncate(time.Second).UnixNano(), over)
		if err != nil {
			return err
		}
		if n == 1 {
			return tx.settle(ctx, u)
		}
		gi, err := readGroupInfo(ctx, tx, chID)
		if err != nil {
			return err
		}
		return &staleEpochError{gi.epoch}
	})
}

// clearPutBy deletes the GroupInfo and the trees account put for the
// channel chID, in tx: what a removed member put must not outlive its
// membership (a GroupInfo of its choosing would otherwise stay what
// joiners get). The owner's next put replaces nothing then.
func clearPutBy(ctx context.Context, tx txn, chID, account string) error {
	if err := tx.b.LockKey(ctx, tx.tx, treeLockPrefix+chID); err != nil {
		return err
	}
	if _, err := freeRows(ctx, tx,
		`DELETE FROM group_infos WHERE channel_id = ? AND updated_by = ? RETURNING updated_by, LENGTH(group_info)`, chID, account); err != nil {
		return err
	}
	if _, err := tx.exec(ctx,
		`DELETE FROM channel_tree_parts WHERE tree_seq IN (SELECT seq FROM channel_trees WHERE channel_id = ? AND uploaded_by = ?)`,
		chID, account); err != nil {
		return err
	}
	_, err := freeRows(ctx, tx,
		`DELETE FROM channel_trees WHERE channel_id = ? AND uploaded_by = ? RETURNING uploaded_by, size`, chID, account)
	return err
}

// clearForReset deletes the channel's GroupInfo unless it is of epoch,
// the epoch a fence reset makes the relay expect, and with it the trees
// its putter put for the channel, in tx. A GroupInfo of another epoch
// can never be joined from after the reset, and one far ahead would
// otherwise refuse every later put as stale.
func clearForReset(ctx context.Context, tx txn, chID string, epoch uint64) error {
	var kept int64
	var by string
	err := tx.queryRow(ctx, `SELECT epoch, updated_by FROM group_infos WHERE channel_id = ?`, chID).Scan(&kept, &by)
	if errors.Is(err, sql.ErrNoRows) || err == nil && uint64(kept) == epoch {
		return nil
	}
	if err != nil {
		return err
	}
	return clearPutBy(ctx, tx, chID, by)
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
//
// Who: the channel's owner or a member (anyone else 403 not_a_member, an
// unknown channel 404, before anything about the fence is said). On whom:
// the channel's one GroupInfo, which every joiner by external Commit gets.
// Only the epoch the relay's commit fence has reached is accepted: the
// epoch the fence expects next, which is the group's epoch right after
// the last commit the relay took, or 0 while the channel has had no
// commit; an earlier epoch is 409 stale_epoch, a later one 409
// epoch_not_reached, each with the fence's epoch. Without a fence source
// (Config.Fence) nothing is accepted (503 fence_unavailable), since the
// directory could not tell a real epoch from a jam. How much: at most
// MaxGroupInfo bytes, charged to the caller's storage budgets (budget.go:
// 413 quota_exceeded naming the scope). A member's
// removal and a fence reset clear what no longer belongs (members.go).
func (s *Server) handlePutGroupInfo(w http.ResponseWriter, r *http.Request, p principal) {
	var req putGroupInfoRequest
	if !decode(w, r, groupInfoBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	data, ok := decodeB64(w, "group_info", req.GroupInfo, MaxGroupInfo)
	if !ok {
		return
	}
	if _, ok := s.fencedPut(w, r, p, req.Channel, req.Epoch, 0, "epoch is the one accepted now"); !ok {
		return
	}
	err := s.store.putGroupInfo(r.Context(), req.Channel, p.account, *req.Epoch, data, -1, s.cfg.Now())
	var se *staleEpochError
	if errors.As(err, &se) {
		// A later epoch is kept: a put that raced a commit, or one kept
		// beyond the fence (before the fence was checked). Which it is,
		// the fence says now.
		fence, ferr := s.fenceEpoch(r.Context(), req.Channel)
		if ferr != nil {
			s.groupInfoFail(w, r, ferr)
			return
		}
		if fence != *req.Epoch {
			writeEpochError(w, "stale_epoch", "the relay's commit fence is past that epoch; epoch is the one accepted now", fence)
			return
		}
		err = s.store.putGroupInfo(r.Context(), req.Channel, p.account, *req.Epoch, data, int64(se.epoch), s.cfg.Now())
	}
	if errors.As(err, &se) {
		writeEpochError(w, "stale_epoch", "a GroupInfo of a later epoch is kept; epoch is its epoch", se.epoch)
		return
	}
	if err != nil {
		s.groupInfoFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Epoch uint64 `json:"epoch"`
	}{*req.Epoch})
}

func writeEpochError(w http.ResponseWriter, code, message string, epoch uint64) {
	writeJSON(w, http.StatusConflict, struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		Epoch   uint64 `json:"epoch"`
	}{code, message, epoch})
}

// groupInfoFail answers the fence's and the quota's errors, and the others
// as fail.
func (s *Server) groupInfoFail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errNoFence):
		writeError(w, http.StatusServiceUnavailable, "fence_unavailable",
			"this directory has no relay commit fence to check GroupInfo epochs against, so it keeps none")
	case errors.Is(err, errFenceUnavailable):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "fence_unavailable", "the relay's commit fence cannot be read now; try again")
	default:
		s.fail(w, r, err)
	}
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
