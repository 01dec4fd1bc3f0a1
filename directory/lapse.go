package directory

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Invite-join records that lapse.
//
// A join by an auto invite makes the joiner's account a member at once,
// before the joiner is in the group: it enters the group by its own
// external Commit, which needs the GroupInfo the join hands out. A joiner
// that never commits, or that joins the group under another identity
// than the one it named here (its own second key, the only other one it
// can prove, joinproof.go), keeps a membership that no removal of a leaf
// can name. So such a record lapses: the channel's owner, whose seat sees
// the group, lists the channel's invite-join records (GET
// /v1/channels/invite-joins) and lapses those whose identity is not in
// the group (POST /v1/channels/invite-joins/lapse). A lapse takes only
// records older than [LapseGrace], long enough for an honest joiner's
// join and Commit; it deletes the record, gives the invite's use back
// once per invite and account (a use the room never counted, since the
// identity never joined it; the room counts its own uses, so a use given
// back here admits nobody the room would not, and giving it back only
// once keeps an account that joins and lapses again and again to the
// invite's uses), and ends the account's membership when an invite join
// alone made it (a membership the owner or a Welcome made, or one the
// account holds for another record, stays). It is not a removal: nothing
// is recorded in channel_removals, so the account may join by invite
// again, as an honest joiner that was too slow must.
//
// Why the owner and not the room's admins: admins are roles in the group,
// which the directory never reads; the owner is the one account the
// directory knows may end others' memberships (it may end any member's by
// account id), so a lapse gives it no power it lacked. An admin's seat
// that finds a joiner under an unrecorded identity removes its leaf from
// the group; the owner's seat lapses the record on its next settle. The
// lapse names the epoch the owner's group is at, and the directory takes
// it only while the relay's commit fence stands at that epoch: a joiner
// whose Commit the relay accepted after the owner's seat last read the
// room is never lapsed for a view of the group that no longer holds.

// LapseGrace is how long an invite-join record stands before its owner
// may lapse it: the time an honest joiner has from its join at the
// directory to its Commit in the room.
const LapseGrace = 10 * time.Minute

// Bounds of the invite-join endpoints.
const (
	// maxInviteJoinsListed bounds one page of GET /v1/channels/invite-joins:
	// 500 records of at most about 1.2 KiB of JSON each.
	maxInviteJoinsListed = 500
	// maxLapse bounds the identities of one lapse request.
	maxLapse = 32
	// lapseBody caps a lapse request's body: 32 identities of 256
	// characters of up to 4 bytes, with their JSON.
	lapseBody = 64 << 10
)

// inviteJoin is one invite-join record.
type inviteJoin struct {
	identity string
	account  string
	added    int64 // Unix nanoseconds
}

// inviteJoinCursor is the position of a record in the list's order
// (added_at, account id, identity); the zero cursor is before the first.
type inviteJoinCursor struct {
	added    int64
	account  string
	identity string
}

// String is the cursor as GET /v1/channels/invite-joins answers it:
// "<added_at in Unix nanoseconds>:<account id>:<identity>".
func (c inviteJoinCursor) String() string {
	return strconv.FormatInt(c.added, 10) + ":" + c.account + ":" + c.identity
}

// parseInviteJoinCursor reads a cursor String wrote.
func parseInviteJoinCursor(v string) (inviteJoinCursor, bool) {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 {
		return inviteJoinCursor{}, false
	}
	n, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || n < 0 || !validAccountID(parts[1]) || !validIdentity(parts[2]) {
		return inviteJoinCursor{}, false
	}
	return inviteJoinCursor{n, parts[1], parts[2]}, true
}

// validIdentity reports whether id is a storable identity of 1 to
// MaxIdentity characters.
func validIdentity(id string) bool {
	n := utf8.RuneCountInString(id)
	return n >= 1 && n <= MaxIdentity && storable(id)
}

// inviteJoins is a page of the invite-join records of a channel the
// caller owns, after the cursor, oldest first, at most limit of them;
// more says records follow.
func (s *store) inviteJoins(ctx context.Context, channel, caller string, after inviteJoinCursor, limit int) (js []inviteJoin, more bool, err error) {
	chID, err := ownedChannel(ctx, s, channel, caller)
	if err != nil {
		return nil, false, err
	}
	rows, err := s.query(ctx,
		`SELECT identity, account_id, added_at FROM channel_identities
		 WHERE channel_id = ? AND (added_at > ? OR (added_at = ? AND (account_id > ? OR (account_id = ? AND identity > ?))))
		 ORDER BY added_at, account_id, identity LIMIT ?`,
		chID, after.added, after.added, after.account, after.account, after.identity, limit+1)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	js = []inviteJoin{}
	for rows.Next() {
		if len(js) == limit {
			more = true
			break
		}
		var j inviteJoin
		if err := rows.Scan(&j.identity, &j.account, &j.added); err != nil {
			return nil, false, err
		}
		js = append(js, j)
	}
	return js, more, rows.Err()
}

// lapsed is what lapseJoins did.
type lapsed struct {
	lapsed  []string // identities whose records lapsed
	waiting []string // identities with a record still in its grace
	ended   []string // accounts whose membership ended
}

// lapseJoins lapses, for the owner of channel (caller), the invite-join
// records of identities that are older than grace at now (see the top of
// this file). The owner's own records stay: nobody removes the owner.
func (s *store) lapseJoins(ctx context.Context, channel, caller string, identities []string, grace time.Duration, now time.Time) (lapsed, error) {
	var out lapsed
	err := s.write(ctx, func(tx txn) error {
		out = lapsed{lapsed: []string{}, waiting: []string{}, ended: []string{}}
		// The channel row is locked as a join locks it, so a join that
		// renews a record waits for the lapse, or the lapse for it.
		var chID, owner string
		err := tx.queryRow(ctx, `SELECT id, owner_id FROM channels WHERE name = ?`+tx.b.LockRow(), channel).Scan(&chID, &owner)
		if errors.Is(err, sql.ErrNoRows) {
			return errChannelNotFound
		}
		if err != nil {
			return err
		}
		if caller != owner {
			return errNotOwner
		}
		cutoff := now.Add(-grace).UnixNano()
		for _, id := range identities {
			done, wait, err := lapseIdentity(ctx, tx, chID, channel, owner, id, cutoff, now, &out.ended)
			if err != nil {
				return err
			}
			if done {
				out.lapsed = append(out.lapsed, id)
			}
			if wait {
				out.waiting = append(out.waiting, id)
			}
		}
		return nil
	})
	return out, err
}

// lapseIdentity lapses, in tx, the records of identity in chID made at or
// before cutoff, appending to ended each account whose membership ended.
// It reports whether a record lapsed, and whether one is still in its
// grace.
func lapseIdentity(ctx context.Context, tx txn, chID, chName, owner, identity string, cutoff int64, now time.Time, ended *[]string) (done, wait bool, err error) {
	type rec struct {
		account string
		added   int64
		hash    []byte
		fed     int
	}
	rows, err := tx.query(ctx,
		`SELECT account_id, added_at, invite_hash, invite_fed FROM channel_identities
		 WHERE channel_id = ? AND identity = ? ORDER BY account_id`, chID, identity)
	if err != nil {
		return false, false, err
	}
	var recs []rec
	for rows.Next() {
		var x rec
		if err := rows.Scan(&x.account, &x.added, &x.hash, &x.fed); err != nil {
			rows.Close()
			return false, false, err
		}
		recs = append(recs, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, false, err
	}
	for _, x := range recs {
		switch {
		case x.account == owner:
			continue
		case x.added > cutoff:
			wait = true
			continue
		}
		if _, err := tx.exec(ctx,
			`DELETE FROM channel_identities WHERE channel_id = ? AND identity = ? AND account_id = ?`,
			chID, identity, x.account); err != nil {
			return false, false, err
		}
		done = true
		if err := giveUseBack(ctx, tx, chID, x.account, x.hash, x.fed == 1, now); err != nil {
			return false, false, err
		}
		var others int
		if err := tx.queryRow(ctx,
			`SELECT COUNT(*) FROM channel_identities WHERE channel_id = ? AND account_id = ?`, chID, x.account).Scan(&others); err != nil {
			return false, false, err
		}
		if others > 0 {
			continue
		}
		var viaInvite int
		err := tx.queryRow(ctx,
			`SELECT via_invite FROM channel_members WHERE channel_id = ? AND account_id = ?`, chID, x.account).Scan(&viaInvite)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && viaInvite == 0) {
			continue // not a member, or one by the owner's or a Welcome's say
		}
		if err != nil {
			return false, false, err
		}
		was, err := removeMember(ctx, tx, chID, chName, x.account, now)
		if err != nil {
			return false, false, err
		}
		if was {
			*ended = append(*ended, x.account)
		}
	}
	return done, wait, nil
}

// giveUseBack gives back, in tx, the use of the invite (a federation
// invite, with fed) of hash in chID that a lapsed record of account made,
// unless a lapse gave one back to account for that invite before: an
// honest joiner gets its second try, while an account that keeps joining
// and lapsing makes the invite no more uses than it had.
func giveUseBack(ctx context.Context, tx txn, chID, account string, hash []byte, fed bool, now time.Time) error {
	if hash == nil {
		return nil // recorded before records kept their invite
	}
	n, err := tx.execN(ctx,
		`INSERT INTO invite_lapses (invite_hash, account_id, lapsed_at) VALUES (?, ?, ?)
		 ON CONFLICT (invite_hash, account_id) DO NOTHING`,
		hash, account, now.UnixNano())
	if err != nil || n == 0 {
		return err
	}
	q := `UPDATE invites SET uses = uses - 1 WHERE hash = ? AND channel_id = ? AND uses > 0`
	if fed {
		q = `UPDATE federation_invites SET uses = uses - 1 WHERE hash = ? AND channel_id = ? AND uses > 0`
	}
	_, err = tx.exec(ctx, q, hash, chID)
	return err
}

type inviteJoinEntry struct {
	Identity  string `json:"identity"`
	AccountID string `json:"account_id"`
	JoinedAt  string `json:"joined_at"`
	LapsesAt  string `json:"lapses_at"`
}

// GET /v1/channels/invite-joins?channel=…&after=<cursor> → 200 {channel,
// joins: [{identity, account_id, joined_at, lapses_at}], has_more, next}
//
// Who may call: the channel's owner (anyone else 403 not_owner, 404
// channel_not_found for a channel that does not exist), before anything
// is read. On whom it acts: nobody; it reads the channel's invite-join
// records (one per auto join not removed, lapsed or left since, so at
// most the uses of the channel's invites), oldest first, in pages of at
// most maxInviteJoinsListed; lapses_at is when the record's grace ends.
// It stores nothing. A member, a removed member and a stranger get 403
// not_owner and learn nothing; a crowd of accounts is held by the read
// bounds (reads.go).
func (s *Server) handleInviteJoins(w http.ResponseWriter, r *http.Request, p principal) {
	name := r.URL.Query().Get("channel")
	if !checkChannel(w, p, name) {
		return
	}
	c, ok := pageCursor(w, r, parseInviteJoinCursor)
	if !ok {
		return
	}
	var after inviteJoinCursor
	if c != nil {
		after = *c
	}
	js, more, err := s.store.inviteJoins(r.Context(), name, p.account, after, maxInviteJoinsListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]inviteJoinEntry, len(js))
	for i, j := range js {
		at := time.Unix(0, j.added).UTC()
		out[i] = inviteJoinEntry{Identity: j.identity, AccountID: j.account, JoinedAt: rfc3339(at), LapsesAt: rfc3339(at.Add(LapseGrace))}
	}
	ans := struct {
		Channel string            `json:"channel"`
		Joins   []inviteJoinEntry `json:"joins"`
		HasMore bool              `json:"has_more"`
		Next    string            `json:"next,omitempty"`
	}{Channel: name, Joins: out, HasMore: more}
	if more {
		last := js[len(js)-1]
		ans.Next = inviteJoinCursor{last.added, last.account, last.identity}.String()
	}
	writeJSON(w, http.StatusOK, ans)
}

type lapseRequest struct {
	Channel    string   `json:"channel"`
	Epoch      *uint64  `json:"epoch"`
	Identities []string `json:"identities"`
}

// POST /v1/channels/invite-joins/lapse {channel, epoch, identities} → 200
// {channel, epoch, lapsed: [identity], waiting: [identity], ended:
// [account_id]}
//
// Who may call: the channel's owner, saying its group is at epoch and
// that none of identities (1 to 32, each 1 to 256 characters) is in it.
// On whom it acts: the accounts recorded under those identities (see the
// top of this file): their records older than LapseGrace lapse, and the
// memberships that only those records made end (a member_removed event
// for the relay each, and the GroupInfo and trees they put go, as at any
// end of membership), with no removal recorded; records in their grace
// are named in waiting and stay. How much: it stores nothing new and
// answers at most the identities asked and the accounts recorded under
// them. The epoch must be the one the relay's commit fence stands at:
// below it 409 stale_epoch, above it 409 epoch_not_reached, each with the
// fence's "epoch"; without a fence to read, 503 fence_unavailable. A
// member, a removed member and a stranger get 403 not_owner and change
// nothing; a crowd of accounts can do nothing here, since only the owner
// acts, within the member-change rate limits.
func (s *Server) handleLapseInviteJoins(w http.ResponseWriter, r *http.Request, p principal) {
	var req lapseRequest
	if !decode(w, r, lapseBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	if req.Epoch == nil {
		badRequest(w, "epoch is required")
		return
	}
	if len(req.Identities) < 1 || len(req.Identities) > maxLapse {
		badRequest(w, "identities must list 1 to 32 identities")
		return
	}
	seen := map[string]bool{}
	var ids []string
	for _, id := range req.Identities {
		if !validIdentity(id) {
			badRequest(w, "identity must be 1 to 256 characters, none of them NUL")
			return
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	// The owner first, so that nobody else learns where the fence is.
	if _, err := ownedChannel(r.Context(), s.store, req.Channel, p.account); err != nil {
		s.fail(w, r, err)
		return
	}
	fence, err := s.fenceEpoch(r.Context(), req.Channel)
	if err != nil {
		s.groupInfoFail(w, r, err)
		return
	}
	switch {
	case *req.Epoch < fence:
		writeEpochError(w, "stale_epoch", "the room has moved on since that epoch; read it again and lapse what is still out of it", fence)
		return
	case *req.Epoch > fence:
		writeEpochError(w, "epoch_not_reached", "the relay's commit fence has not reached that epoch; try again", fence)
		return
	}
	out, err := s.store.lapseJoins(r.Context(), req.Channel, p.account, ids, LapseGrace, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Channel string   `json:"channel"`
		Epoch   uint64   `json:"epoch"`
		Lapsed  []string `json:"lapsed"`
		Waiting []string `json:"waiting"`
		Ended   []string `json:"ended"`
	}{req.Channel, *req.Epoch, out.lapsed, out.waiting, out.ended})
}
