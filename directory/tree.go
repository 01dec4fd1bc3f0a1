package directory

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"math"
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
//
// A tree is put for an epoch, checked against the relay's commit fence
// (fence.go) as a GroupInfo is: the epoch the fence has reached (the
// tree of the group's current epoch, which a GroupInfo names), or the
// next one (the tree a Welcome names, which the committer puts before its
// Commit at the fence's epoch goes out, so that the Welcome is of use the
// moment the Commit is). Nothing further ahead: a tree no Commit has made
// yet can be put only by whoever builds that Commit, and that is the next
// epoch at most. The directory cannot tell the committer before its
// Commit is accepted, so any member may put trees for those two epochs;
// what makes that harmless is that each account's tree of an id is its
// own. An id is the tree's hash, which anyone can know once a Commit is
// out; a tree put under it by another account, complete or not, right or
// wrong, neither blocks nor replaces the honest put, and a reader gets the
// tree put by whoever put the channel's GroupInfo before any other.

// Caps of the tree store. Sizes are decoded bytes, inclusive.
const (
	MaxTreePart        = 1 << 20          // 1,048,576 bytes per part
	MaxTreeParts       = 64               // parts per tree
	MaxTree            = MaxTreePart * 64 // 67,108,864 bytes per tree
	MaxTreesPerChannel = 4                // trees kept per channel
	maxTreeID          = 128              // characters of a tree id
	treeBody           = 1536 << 10       // a 1 MiB part is 1,398,104 base64 characters
	treeUploadWindow   = 10 * time.Minute // how long an unfinished tree is safe from eviction
	treeLockPrefix     = "trees:"         // lockKey of a channel's trees
	treeSweepAge       = 24 * time.Hour   // unfinished trees older than this are swept
)

// Errors of the tree store, answered by treeFail.
var (
	errTreeMismatch = errors.New("directory: the tree is being put with another number of parts")
	errTreePartSet  = errors.New("directory: that part of the tree is stored with other bytes")
	errTooManyTrees = errors.New("directory: the channel's trees are all being put")
)

// treeState is what the directory holds of one tree.
type treeState struct {
	epoch    uint64 // the epoch the tree was put for
	parts    int    // parts the tree has in all
	received int    // parts stored
	size     int64  // bytes stored
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

// readOwnTree returns the tree id that owner put for the channel chID and
// its row's seq, or errNotFound.
func readOwnTree(ctx context.Context, q queryer, chID, id, owner string) (seq int64, st treeState, err error) {
	var epoch int64
	err = q.queryRow(ctx,
		`SELECT seq, epoch, parts, received, size FROM channel_trees WHERE channel_id = ? AND tree_id = ? AND uploaded_by = ?`,
		chID, id, owner).Scan(&seq, &epoch, &st.parts, &st.received, &st.size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, st, errNotFound
	}
	st.epoch = uint64(epoch)
	return seq, st, err
}

// servedTree returns the seq and state of the tree id of the channel chID
// that readers get, or errNotFound: of the accounts' trees of that id,
// a complete one before one still being put, the one put by whoever put
// the channel's GroupInfo (which names it) before the others, then the
// latest epoch, then the first put.
func servedTree(ctx context.Context, q queryer, chID, id string) (seq int64, st treeState, err error) {
	var epoch int64
	err = q.queryRow(ctx,
		`SELECT t.seq, t.epoch, t.parts, t.received, t.size FROM channel_trees t
		 LEFT JOIN group_infos g ON g.channel_id = t.channel_id AND g.updated_by = t.uploaded_by
		 WHERE t.channel_id = ? AND t.tree_id = ?
		 ORDER BY CASE WHEN t.received = t.parts THEN 0 ELSE 1 END, CASE WHEN g.channel_id IS NULL THEN 1 ELSE 0 END, t.epoch DESC, t.seq
		 LIMIT 1`,
		chID, id).Scan(&seq, &epoch, &st.parts, &st.received, &st.size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, st, errNotFound
	}
	st.epoch = uint64(epoch)
	return seq, st, err
}

// putTreePart stores part of the caller's tree id of channel, for epoch,
// which has parts parts in all, for a caller who owns the channel or is a
// member. The handler has checked epoch against the commit fence, whose
// epoch is fence. The first part put (any of them) creates the caller's
// tree, charged to the caller; another account's tree of the same id is
// another tree. Putting a part again with the same bytes changes nothing
// (a retry); with other bytes it is errTreePartSet. A put for a later
// epoch than the tree's moves the tree to it (the same tree can be the
// tree of two epochs). Over a cap nothing is stored.
//
// A new tree makes room for itself among the channel's MaxTreesPerChannel
// by deleting a tree that is complete, has not been finished within
// treeUploadWindow, or is of an epoch before the fence's (a tree still
// being put for an epoch the fence has passed belongs to a Commit that
// lost the race, and can never be finished for a Welcome): the oldest of
// those put by whoever holds the most of
// the channel's trees, so that a member who puts trees over and over
// replaces its own and cannot push out the trees of the members who
// commit (a Welcome's or a GroupInfo's). When every tree is still being
// put, it is errTooManyTrees. The channel's trees change under one lock, and the
// part's bytes are charged to the caller's storage budgets (budget.go) in
// the same transaction, so the caps hold under concurrent puts.
func (s *store) putTreePart(ctx context.Context, channel, caller, id string, epoch, fence uint64, part, parts int, data []byte, now time.Time) (st treeState, err error) {
	if epoch > math.MaxInt64 || fence > math.MaxInt64 {
		return treeState{}, errors.New("directory: epoch out of range")
	}
	err = s.write(ctx, func(tx txn) error {
		chID, err := memberChannel(ctx, tx, channel, caller)
		if err != nil {
			return err
		}
		if err := tx.b.LockKey(ctx, tx.tx, treeLockPrefix+chID); err != nil {
			return err
		}
		// Again under the lock a removal takes (clearPutBy): a member
		// removed meanwhile leaves nothing behind.
		if _, err := memberChannel(ctx, tx, channel, caller); err != nil {
			return err
		}
		seq, cur, err := readOwnTree(ctx, tx, chID, id, caller)
		switch {
		case errors.Is(err, errNotFound):
			seq, cur, err = newTree(ctx, tx, chID, caller, id, epoch, fence, parts, now)
			if err != nil {
				return err
			}
		case err != nil:
			return err
		case cur.parts != parts:
			return errTreeMismatch
		case epoch > cur.epoch:
			if _, err := tx.exec(ctx, `UPDATE channel_trees SET epoch = ? WHERE seq = ?`, int64(epoch), seq); err != nil {
				return err
			}
			cur.epoch = epoch
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
		if _, err := tx.exec(ctx, `INSERT INTO channel_tree_parts (tree_seq, part, data) VALUES (?, ?, ?)`, seq, part, data); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `UPDATE channel_trees SET received = received + 1, size = size + ? WHERE seq = ?`, len(data), seq); err != nil {
			return err
		}
		st = treeState{epoch: cur.epoch, parts: cur.parts, received: cur.received + 1, size: cur.size + int64(len(data))}
		return tx.charge(ctx, caller, int64(len(data)))
	})
	return st, err
}

// newTree creates the caller's tree id of the channel chID for epoch,
// charged to caller, in tx, deleting the channel's oldest evictable tree
// if it holds MaxTreesPerChannel already (fence is the fence's epoch).
// The caller holds the channel's tree lock.
func newTree(ctx context.Context, tx txn, chID, caller, id string, epoch, fence uint64, parts int, now time.Time) (int64, treeState, error) {
	var n int
	if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM channel_trees WHERE channel_id = ?`, chID).Scan(&n); err != nil {
		return 0, treeState{}, err
	}
	for ; n >= MaxTreesPerChannel; n-- {
		var old int64
		err := tx.queryRow(ctx,
			`SELECT seq FROM channel_trees t WHERE channel_id = ? AND (received = parts OR created_at < ? OR epoch < ?)
			 ORDER BY (SELECT COUNT(*) FROM channel_trees u WHERE u.channel_id = t.channel_id AND u.uploaded_by = t.uploaded_by) DESC, seq
			 LIMIT 1`,
			chID, now.Add(-treeUploadWindow).UnixNano(), int64(fence)).Scan(&old)
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
		`INSERT INTO channel_trees (channel_id, tree_id, epoch, parts, received, size, uploaded_by, created_at)
		 VALUES (?, ?, ?, ?, 0, 0, ?, ?) RETURNING seq`,
		chID, id, int64(epoch), parts, caller, now.Truncate(time.Second).UnixNano()).Scan(&seq)
	return seq, treeState{epoch: epoch, parts: parts}, err
}

// deleteTree deletes the tree seq and gives its bytes back to whoever
// put it.
func deleteTree(ctx context.Context, tx txn, seq int64) error {
	if _, err := tx.exec(ctx, `DELETE FROM channel_tree_parts WHERE tree_seq = ?`, seq); err != nil {
		return err
	}
	_, err := freeRows(ctx, tx, `DELETE FROM channel_trees WHERE seq = ? RETURNING uploaded_by, size`, seq)
	return err
}

// treeInfo returns the state of the tree id of channel for its owner or a
// member.
func (s *store) treeInfo(ctx context.Context, channel, caller, id string) (treeState, error) {
	chID, err := memberOrInvitedChannel(ctx, s, channel, caller)
	if err != nil {
		return treeState{}, err
	}
	_, st, err := servedTree(ctx, s, chID, id)
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
	seq, st, err := servedTree(ctx, s, chID, id)
	if err != nil {
		return treeState{}, nil, err
	}
	if !st.complete() {
		return treeState{}, nil, errNotFound
	}
	var data []byte
	err = s.queryRow(ctx, `SELECT data FROM channel_tree_parts WHERE tree_seq = ? AND part = ?`, seq, part).Scan(&data)
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
	Channel string  `json:"channel"`
	ID      string  `json:"id"`
	Epoch   *uint64 `json:"epoch"`
	Part    *int    `json:"part"`
	Parts   *int    `json:"parts"`
	Data    string  `json:"data"`
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

// PUT /v1/channels/tree {channel, id, epoch, part, parts, data} → 200 {channel, id, parts, received, size, complete}
//
// Who: the channel's owner or a member (anyone else 403 not_a_member, an
// unknown channel 404, before anything about the fence is said). On whom:
// the caller's own tree of that id in the channel; another account's tree
// of the same id is untouched. For which epoch: the one the relay's
// commit fence has reached or the next (the tree a Welcome names, put
// before its Commit); an earlier one is 409 stale_epoch, a later one 409
// epoch_not_reached, each with the fence's epoch; without a fence source
// 503 fence_unavailable. How much: parts of at most MaxTreePart bytes, at
// most MaxTreeParts of them, MaxTreesPerChannel trees per channel, charged
// to the caller's storage budgets (413 quota_exceeded naming the scope). A
// member's removal and a fence reset clear what it put (groupinfo.go).
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
	fence, ok := s.fencedPut(w, r, p, req.Channel, req.Epoch, 1, "a tree is accepted for epoch and the next")
	if !ok {
		return
	}
	st, err := s.store.putTreePart(r.Context(), req.Channel, p.account, req.ID, *req.Epoch, fence, *req.Part, *req.Parts, data, s.cfg.Now())
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
	case errors.Is(err, errTooManyTrees):
		w.Header().Set("Retry-After", strconv.Itoa(int(treeUploadWindow/time.Second)))
		writeError(w, http.StatusTooManyRequests, "too_many_trees",
			"the channel already holds 4 trees still being put; finish one or wait for it to expire")
	default:
		s.fail(w, r, err)
	}
}
