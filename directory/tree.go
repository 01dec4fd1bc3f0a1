package directory

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// A channel's ratchet trees, kept for joiners (PUT and GET
// /v1/channels/tree in docs/API.md). RFC 9420 lets the tree of a Welcome or a
// GroupInfo travel out of band (Section 12.4.3.3); the joiner checks it
// against the tree_hash of the GroupContext it decrypted or verified
// (Section 7.8), so the directory holds it as opaque bytes it cannot
// change unnoticed. A tree is put in parts of at most MaxTreePart bytes
// and read back the same way, so that no request or answer holds more than
// a part however large the room.

// Caps of the tree store. Sizes are decoded bytes, inclusive.
const (
	MaxTreePart        = 1 << 20          // 1,048,576 bytes per part
	MaxTreeParts       = 64               // parts per tree
	MaxTree            = MaxTreePart * 64 // 67,108,864 bytes per tree
	MaxTreesPerChannel = 4                // trees kept per channel
	MaxTreeBytes       = 4 * MaxTree      // bytes of trees and GroupInfos one account has put and the directory keeps (256 MiB)
	maxTreeID          = 128              // characters of a tree id
	treeBody           = 1536 << 10       // a 1 MiB part is 1,398,104 base64 characters
	treeUploadWindow   = 10 * time.Minute // how long an unfinished tree is safe from eviction
	treeLockPrefix     = "trees:"         // lockKey of a channel's trees
	treeQuotaPrefix    = "tree-quota:"    // lockKey of an account's tree bytes
	treeSweepAge       = 24 * time.Hour   // unfinished trees older than this are swept
)

// Errors of the tree store, answered by treeFail.
var (
	errTreeMismatch = errors.New("directory: the tree is being put with another number of parts")
	errTreePartSet  = errors.New("directory: that part of the tree is stored with other bytes")
	errTreeTaken    = errors.New("directory: the tree is being put by another account")
	errTooManyTrees = errors.New("directory: the channel's trees are all being put")
	errTreeQuota    = errors.New("directory: the account's trees and GroupInfos use up its quota")
)

// treeState is what the directory holds of one tree.
type treeState struct {
	parts    int   // parts the tree has in all
	received int   // parts stored
	size     int64 // bytes stored
}

func (t treeState) complete() bool { return t.received == t.parts }

// validTreeID reports whether id can name a tree: 1 to 128 letters,
// digits, '-', '_' or '.' (the seat uses the hex of the tree hash).
func validTreeID(id string) bool {
	if id == "" || len(id) > maxTreeID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// readTree returns the tree id of the channel chID and its row's seq, or
// errNotFound.
func readTree(ctx context.Context, q queryer, chID, id string) (seq int64, st treeState, owner string, err error) {
	err = q.queryRow(ctx,
		`SELECT seq, parts, received, size, uploaded_by FROM channel_trees WHERE channel_id = ? AND tree_id = ?`,
		chID, id).Scan(&seq, &st.parts, &st.received, &st.size, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, st, "", errNotFound
	}
	return seq, st, owner, err
}

// putTreePart stores part of the tree id of channel, which has parts parts
// in all, for a caller who owns the channel or is a member. The first part
// put (any of them) creates the tree, charged to the caller; only the
// caller may put its other parts. Putting a part again with the same bytes
// changes nothing (a retry); with other bytes it is errTreePartSet. Over
// a cap nothing is stored.
//
// A new tree makes room for itself among the channel's MaxTreesPerChannel
// by deleting a tree that is complete or has not been finished within
// treeUploadWindow: the oldest of those put by whoever holds the most of
// the channel's trees, so that a member who puts trees over and over
// replaces its own and cannot push out the trees of the members who
// commit (a Welcome's or a GroupInfo's). When every tree is still being
// put, it is errTooManyTrees. The channel's trees change under one lock, and the
// caller's quota is counted under another, so the caps hold under
// concurrent puts.
func (s *store) putTreePart(ctx context.Context, channel, caller, id string, part, parts int, data []byte, now time.Time) (st treeState, err error) {
	err = s.write(ctx, func(tx txn) error {
		chID, err := memberChannel(ctx, tx, channel, caller)
		if err != nil {
			return err
		}
		if err := tx.b.lockKey(ctx, tx.tx, treeLockPrefix+chID); err != nil {
			return err
		}
		// Again under the lock a removal takes (clearPutBy): a member
		// removed meanwhile leaves nothing behind.
		if _, err := memberChannel(ctx, tx, channel, caller); err != nil {
			return err
		}
		seq, cur, owner, err := readTree(ctx, tx, chID, id)
		switch {
		case errors.Is(err, errNotFound):
			seq, cur, err = newTree(ctx, tx, chID, caller, id, parts, now)
			if err != nil {
				return err
			}
		case err != nil:
			return err
		case owner != caller:
			return errTreeTaken
		case cur.parts != parts:
			return errTreeMismatch
		}
		var have []byte
		err = tx.queryRow(ctx, `SELECT data FROM channel_tree_parts WHERE tree_seq = ? AND part = ?`, seq, part).Scan(&have)
		if err == nil {
			if !bytes.Equal(have, data) {
				return errTreePartSet
			}
			st = cur
			return errUnchanged
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := tx.b.lockKey(ctx, tx.tx, treeQuotaPrefix+caller); err != nil {
			return err
		}
		used, err := roomBytes(ctx, tx, caller, "")
		if err != nil {
			return err
		}
		if used+int64(len(data)) > s.treeQuota {
			return errTreeQuota
		}
		if _, err := tx.exec(ctx, `INSERT INTO channel_tree_parts (tree_seq, part, data) VALUES (?, ?, ?)`, seq, part, data); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `UPDATE channel_trees SET received = received + 1, size = size + ? WHERE seq = ?`, len(data), seq); err != nil {
			return err
		}
		st = treeState{parts: cur.parts, received: cur.received + 1, size: cur.size + int64(len(data))}
		return nil
	})
	return st, err
}

// newTree creates the tree id of the channel chID, charged to caller, in
// tx, deleting the channel's oldest evictable tree if it holds
// MaxTreesPerChannel already. The caller holds the channel's tree lock.
func newTree(ctx context.Context, tx txn, chID, caller, id string, parts int, now time.Time) (int64, treeState, error) {
	var n int
	if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM channel_trees WHERE channel_id = ?`, chID).Scan(&n); err != nil {
		return 0, treeState{}, err
	}
	for ; n >= MaxTreesPerChannel; n-- {
		var old int64
		err := tx.queryRow(ctx,
			`SELECT seq FROM channel_trees t WHERE channel_id = ? AND (received = parts OR created_at < ?)
			 ORDER BY (SELECT COUNT(*) FROM channel_trees u WHERE u.channel_id = t.channel_id AND u.uploaded_by = t.uploaded_by) DESC, seq
			 LIMIT 1`,
			chID, now.Add(-treeUploadWindow).UnixNano()).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, treeState{}, errTooManyTrees
		}
		if err != nil {
			return 0, treeState{}, err
		}
		if err := deleteTree(ctx, tx, old); err != nil {
			return 0, treeState{}, err
		}
	}
	var seq int64
	err := tx.queryRow(ctx,
		`INSERT INTO channel_trees (channel_id, tree_id, parts, received, size, uploaded_by, created_at)
		 VALUES (?, ?, ?, 0, 0, ?, ?) RETURNING seq`,
		chID, id, parts, caller, now.UnixNano()).Scan(&seq)
	return seq, treeState{parts: parts}, err
}

func deleteTree(ctx context.Context, tx txn, seq int64) error {
	if _, err := tx.exec(ctx, `DELETE FROM channel_tree_parts WHERE tree_seq = ?`, seq); err != nil {
		return err
	}
	_, err := tx.exec(ctx, `DELETE FROM channel_trees WHERE seq = ?`, seq)
	return err
}

// treeInfo returns the state of the tree id of channel for its owner or a
// member.
func (s *store) treeInfo(ctx context.Context, channel, caller, id string) (treeState, error) {
	chID, err := memberOrInvitedChannel(ctx, s, channel, caller)
	if err != nil {
		return treeState{}, err
	}
	_, st, _, err := readTree(ctx, s, chID, id)
	return st, err
}

// treePart returns part of the complete tree id of channel for its owner
// or a member; a tree not complete yet is errNotFound, as one that does
// not exist.
func (s *store) treePart(ctx context.Context, channel, caller, id string, part int) (treeState, []byte, error) {
	chID, err := memberOrInvitedChannel(ctx, s, channel, caller)
	if err != nil {
		return treeState{}, nil, err
	}
	var st treeState
	var data []byte
	err = s.queryRow(ctx,
		`SELECT t.parts, t.received, t.size, p.data FROM channel_trees t JOIN channel_tree_parts p ON p.tree_seq = t.seq
		 WHERE t.channel_id = ? AND t.tree_id = ? AND p.part = ? AND t.received = t.parts`,
		chID, id, part).Scan(&st.parts, &st.received, &st.size, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return treeState{}, nil, errNotFound
	}
	return st, data, err
}

// sweepTrees deletes the trees not finished within treeSweepAge.
func (s *store) sweepTrees(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	err := s.write(ctx, func(tx txn) error {
		total = 0
		rows, err := tx.query(ctx, `SELECT seq FROM channel_trees WHERE received < parts AND created_at < ?`, now.Add(-treeSweepAge).UnixNano())
		if err != nil {
			return err
		}
		var seqs []int64
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return err
			}
			seqs = append(seqs, seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, seq := range seqs {
			if err := deleteTree(ctx, tx, seq); err != nil {
				return err
			}
		}
		total = int64(len(seqs))
		return nil
	})
	return total, err
}

type putTreeRequest struct {
	Channel string `json:"channel"`
	ID      string `json:"id"`
	Part    *int   `json:"part"`
	Parts   *int   `json:"parts"`
	Data    string `json:"data"`
}

// treeAnswer is the state of a tree, with one part's data when one was
// asked for.
type treeAnswer struct {
	Channel  string `json:"channel"`
	ID       string `json:"id"`
	Parts    int    `json:"parts"`
	Received int    `json:"received"`
	Size     int64  `json:"size"`
	Complete bool   `json:"complete"`
	Part     *int   `json:"part,omitempty"`
	Data     string `json:"data,omitempty"`
}

func newTreeAnswer(channel, id string, st treeState) treeAnswer {
	return treeAnswer{Channel: channel, ID: id, Parts: st.parts, Received: st.received, Size: st.size, Complete: st.complete()}
}

// PUT /v1/channels/tree {channel, id, part, parts, data} → 200 {channel, id, parts, received, size, complete}
func (s *Server) handlePutTree(w http.ResponseWriter, r *http.Request, p principal) {
	var req putTreeRequest
	if !decode(w, r, treeBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	if !validTreeID(req.ID) {
		badRequest(w, "id must be 1 to 128 letters, digits, '-', '_' or '.'")
		return
	}
	if req.Parts == nil || req.Part == nil {
		badRequest(w, "part and parts are required")
		return
	}
	if *req.Parts < 1 || *req.Parts > MaxTreeParts {
		writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large",
			"parts must be 1 to 64: a tree is at most 64 MiB, in parts of at most 1 MiB")
		return
	}
	if *req.Part < 0 || *req.Part >= *req.Parts {
		badRequest(w, "part must be 0 to parts-1")
		return
	}
	data, ok := decodeB64(w, "data", req.Data, MaxTreePart)
	if !ok {
		return
	}
	st, err := s.store.putTreePart(r.Context(), req.Channel, p.account, req.ID, *req.Part, *req.Parts, data, s.cfg.Now())
	if err != nil {
		s.treeFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newTreeAnswer(req.Channel, req.ID, st))
}

// GET /v1/channels/tree?channel=…&id=…[&part=…] → 200 {channel, id, parts, received, size, complete[, part, data]}
func (s *Server) handleGetTree(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	name, id := q.Get("channel"), q.Get("id")
	if !checkChannel(w, p, name) {
		return
	}
	if !validTreeID(id) {
		badRequest(w, "id must be 1 to 128 letters, digits, '-', '_' or '.'")
		return
	}
	if !q.Has("part") {
		st, err := s.store.treeInfo(r.Context(), name, p.account, id)
		if err != nil {
			s.treeFail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, newTreeAnswer(name, id, st))
		return
	}
	part, err := strconv.Atoi(q.Get("part"))
	if err != nil || part < 0 || part >= MaxTreeParts {
		badRequest(w, "part must be an integer 0 to 63")
		return
	}
	st, data, err := s.store.treePart(r.Context(), name, p.account, id, part)
	if err != nil {
		s.treeFail(w, r, err)
		return
	}
	a := newTreeAnswer(name, id, st)
	a.Part, a.Data = &part, base64.StdEncoding.EncodeToString(data)
	writeJSON(w, http.StatusOK, a)
}

// treeFail answers the tree store's own errors, and the others as fail.
func (s *Server) treeFail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errTreeMismatch):
		writeError(w, http.StatusConflict, "tree_mismatch", "the tree is being put with another number of parts")
	case errors.Is(err, errTreePartSet):
		writeError(w, http.StatusConflict, "tree_part_conflict", "that part of the tree is stored with other bytes")
	case errors.Is(err, errTreeTaken):
		writeError(w, http.StatusConflict, "tree_taken", "the tree is being put by another account")
	case errors.Is(err, errTooManyTrees):
		w.Header().Set("Retry-After", strconv.Itoa(int(treeUploadWindow/time.Second)))
		writeError(w, http.StatusTooManyRequests, "too_many_trees",
			"the channel already holds 4 trees still being put; finish one or wait for it to expire")
	case errors.Is(err, errTreeQuota):
		writeQuotaExceeded(w)
	default:
		s.fail(w, r, err)
	}
}
