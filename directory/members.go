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

	"github.com/skytale-oss/skytale/internal/feed"
)

// MaxFenceEpoch is the highest epoch POST /v1/channels/fence accepts, the
// same bound the relay puts on the first commit of a channel.
const MaxFenceEpoch = 1 << 32

// addMember makes account a member of the channel (id chID, name chName)
// and writes a member_added event, in tx. It reports whether the account
// was not a member before; adding a member again writes nothing but
// marks the membership as not owed to an invite join (lapse.go): the
// owner or the person said so.
func addMember(ctx context.Context, tx txn, chID, chName, account string, now time.Time) (bool, error) {
	added, err := insertMember(ctx, tx, chID, chName, account, false, now)
	if err != nil || added {
		return added, err
	}
	_, err = tx.exec(ctx,
		`UPDATE channel_members SET via_invite = 0 WHERE channel_id = ? AND account_id = ? AND via_invite <> 0`,
		chID, account)
	return false, err
}

// addInviteMember is addMember for a join by an auto invite: a new
// membership is marked as owed to the invite join alone, so that it ends
// when its record lapses (lapse.go); one the account had already keeps
// what it was.
func addInviteMember(ctx context.Context, tx txn, chID, chName, account string, now time.Time) (bool, error) {
	return insertMember(ctx, tx, chID, chName, account, true, now)
}

func insertMember(ctx context.Context, tx txn, chID, chName, account string, viaInvite bool, now time.Time) (bool, error) {
	n, err := tx.execN(ctx,
		`INSERT INTO channel_members (channel_id, account_id, added_at, via_invite) VALUES (?, ?, ?, ?)
		 ON CONFLICT (channel_id, account_id) DO NOTHING`,
		chID, account, now.UnixNano(), sqlBool(viaInvite))
	if err != nil || n == 0 {
		return false, err
	}
	return true, writeEvent(ctx, tx, feed.MemberAdded, chName, account, 0, now)
}

// removeMember ends account's membership of the channel and writes a
// member_removed event, in tx; the GroupInfo and trees it put for the
// channel go with it (clearPutBy). It reports whether the account was a
// member.
func removeMember(ctx context.Context, tx txn, chID, chName, account string, now time.Time) (bool, error) {
	n, err := tx.execN(ctx,
		`DELETE FROM channel_members WHERE channel_id = ? AND account_id = ?`, chID, account)
	if err != nil || n == 0 {
		return false, err
	}
	if err := clearPutBy(ctx, tx, chID, account); err != nil {
		return false, err
	}
	return true, writeEvent(ctx, tx, feed.MemberRemoved, chName, account, 0, now)
}

// Removal by identity, and what it leaves behind.
//
// A joiner by an auto invite enters the group by its own external Commit,
// so the member that later removes it never saw a join request naming its
// account. The directory keeps, per channel, the identity each auto join
// named and the account that made it (channel_identities, one row per
// join, so at most one per use of the channel's invites), and the owner
// ends a membership by identity: DELETE /v1/channels/members?identity=…
// ends the membership of every account that joined under that identity,
// unless the account joined under another identity too that nobody has
// removed. An account another removed (by account, by identity, or with a
// fence reset) is recorded in channel_removals, one row per channel and
// account: its joins with an invite made before the removal are refused
// (403 removed) and so is its GroupInfo fetch while it is not a member.
// The members' own engines refuse the same person's second use of an
// invite whatever the directory says; this keeps the relay's service
// from a removed account too.

// recordIdentity notes, in tx, that account joined the channel chID under
// identity at now, with the invite (a federation invite, with fed) of
// inviteHash. A join again under the same identity renews the record: its
// time and invite are the latest join's, so its grace (lapse.go) starts
// again.
func recordIdentity(ctx context.Context, tx txn, chID, identity, account string, inviteHash []byte, fed bool, now time.Time) error {
	_, err := tx.exec(ctx,
		`INSERT INTO channel_identities (channel_id, identity, account_id, added_at, invite_hash, invite_fed) VALUES (?, ?, ?, ?, ?, ?)
		 ON CONFLICT (channel_id, identity, account_id) DO UPDATE
		 SET added_at = excluded.added_at, invite_hash = excluded.invite_hash, invite_fed = excluded.invite_fed`,
		chID, identity, account, now.UnixNano(), inviteHash, sqlBool(fed))
	return err
}

// noteRemoval records, in tx, that someone else removed account from the
// channel chID at now.
func noteRemoval(ctx context.Context, tx txn, chID, account string, now time.Time) error {
	_, err := tx.exec(ctx,
		`INSERT INTO channel_removals (channel_id, account_id, removed_at) VALUES (?, ?, ?)
		 ON CONFLICT (channel_id, account_id) DO UPDATE SET removed_at = excluded.removed_at`,
		chID, account, now.UnixNano())
	return err
}

// checkNotRemoved refuses with errRemoved a join by account with an
// invite made at invitedAt (Unix nanoseconds) if the account was removed
// from the channel chID since.
func checkNotRemoved(ctx context.Context, q queryer, chID, account string, invitedAt int64) error {
	var at int64
	err := q.queryRow(ctx, `SELECT removed_at FROM channel_removals WHERE channel_id = ? AND account_id = ?`, chID, account).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if at >= invitedAt {
		return errRemoved
	}
	return nil
}

// removedOr turns err, a refusal of account because it is not a member of
// the channel name, into errRemoved when someone removed it.
func removedOr(ctx context.Context, q queryer, name, account string, err error) error {
	if !errors.Is(err, errNotAMember) && !errors.Is(err, errNotMember) {
		return err
	}
	var one int
	if qerr := q.queryRow(ctx,
		`SELECT 1 FROM channel_removals r JOIN channels c ON c.id = r.channel_id WHERE c.name = ? AND r.account_id = ?`,
		name, account).Scan(&one); qerr == nil {
		return errRemoved
	}
	return err
}

// identityRemoval is what removeByIdentity did.
type identityRemoval struct {
	ended []string // the accounts whose membership ended
	kept  bool     // an account kept its membership for another identity
}

// removeByIdentity ends, for the owner of channel (caller), the
// membership of every account that joined it under identity (see above).
func (s *store) removeByIdentity(ctx context.Context, channel, caller, identity string, now time.Time) (identityRemoval, error) {
	var out identityRemoval
	err := s.write(ctx, func(tx txn) error {
		out = identityRemoval{}
		chID, owner, err := channelOwner(ctx, tx, channel)
		if err != nil {
			return err
		}
		if caller != owner {
			return errNotOwner
		}
		accounts, err := identityAccounts(ctx, tx, chID, identity)
		if err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `DELETE FROM channel_identities WHERE channel_id = ? AND identity = ?`, chID, identity); err != nil {
			return err
		}
		for _, a := range accounts {
			if a == owner {
				continue // nobody removes the owner
			}
			var others int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM channel_identities WHERE channel_id = ? AND account_id = ?`, chID, a).Scan(&others); err != nil {
				return err
			}
			if others > 0 {
				out.kept = true
				continue
			}
			was, err := removeMember(ctx, tx, chID, channel, a, now)
			if err != nil {
				return err
			}
			if !was {
				continue // it left by itself
			}
			if err := noteRemoval(ctx, tx, chID, a, now); err != nil {
				return err
			}
			out.ended = append(out.ended, a)
		}
		return nil
	})
	return out, err
}

// identityAccounts lists the accounts that joined chID under identity.
func identityAccounts(ctx context.Context, q txn, chID, identity string) ([]string, error) {
	rows, err := q.query(ctx, `SELECT account_id FROM channel_identities WHERE channel_id = ? AND identity = ? ORDER BY account_id`, chID, identity)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// writeEvent appends an event to the channel feed, in tx. Its id comes
// from the backend, so that a reader polling the feed never sees an id
// before every lower one is visible. Its time is kept to the second: the
// feed is ordered by id, and nothing needs to know more of when someone
// joined or left.
//
// A membership event supersedes the earlier ones of the same account in
// the same channel, which go in the same transaction: the feed's readers
// (the relays) keep, per channel and account, what the last event says,
// so a superseded event changes nothing for a reader at any cursor (one
// behind it applies the later event instead; one past it applied it and
// applies the later one too). What stays of a membership's history is its
// last change.
func writeEvent(ctx context.Context, tx txn, kind, channel, account string, epoch uint64, now time.Time) error {
	now = now.Truncate(time.Second)
	if kind == feed.MemberAdded || kind == feed.MemberRemoved {
		if _, err := tx.exec(ctx, `DELETE FROM channel_events WHERE channel = ? AND account_id = ?
			AND kind IN ('member_added', 'member_removed')`, channel, account); err != nil {
			return err
		}
	}
	id, err := tx.b.NextID(ctx, tx.tx, "channel_events")
	if err != nil {
		return err
	}
	if id == 0 {
		_, err = tx.exec(ctx,
			`INSERT INTO channel_events (kind, channel, account_id, epoch, created_at) VALUES (?, ?, ?, ?, ?)`,
			kind, channel, account, int64(epoch), now.UnixNano())
		return err
	}
	_, err = tx.exec(ctx,
		`INSERT INTO channel_events (id, kind, channel, account_id, epoch, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		id, kind, channel, account, int64(epoch), now.UnixNano())
	return err
}

// channelOwner returns the id and owner of the channel name.
func channelOwner(ctx context.Context, q queryer, name string) (id, owner string, err error) {
	err = q.queryRow(ctx, `SELECT id, owner_id FROM channels WHERE name = ?`, name).Scan(&id, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", errChannelNotFound
	}
	return id, owner, err
}

func accountExists(ctx context.Context, q queryer, id string) error {
	if !storable(id) {
		return errAccountNotFound
	}
	var one int
	err := q.queryRow(ctx, `SELECT 1 FROM accounts WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return errAccountNotFound
	}
	return err
}

// addMemberByOwner adds account to a channel the caller owns.
func (s *store) addMemberByOwner(ctx context.Context, channel, caller, account string, now time.Time) error {
	return s.write(ctx, func(tx txn) error {
		chID, err := ownedChannel(ctx, tx, channel, caller)
		if err != nil {
			return err
		}
		if err := accountExists(ctx, tx, account); err != nil {
			return err
		}
		_, err = addMember(ctx, tx, chID, channel, account, now)
		return err
	})
}

// dropMember removes account from channel: the owner may remove anyone but
// itself, any other caller only itself.
func (s *store) dropMember(ctx context.Context, channel, caller, account string, now time.Time) error {
	return s.write(ctx, func(tx txn) error {
		chID, owner, err := channelOwner(ctx, tx, channel)
		if err != nil {
			return err
		}
		if caller != owner && caller != account {
			return errNotOwner
		}
		if account == owner {
			return errOwnerCannotLeave
		}
		if err := accountExists(ctx, tx, account); err != nil {
			return err
		}
		was, err := removeMember(ctx, tx, chID, channel, account, now)
		if err != nil {
			return err
		}
		if caller == account {
			// Leaving: the identities it joined under go with it.
			_, err = tx.exec(ctx, `DELETE FROM channel_identities WHERE channel_id = ? AND account_id = ?`, chID, account)
			return err
		}
		if !was {
			return nil // not a member: it left, or was removed before
		}
		return noteRemoval(ctx, tx, chID, account, now)
	})
}

type member struct {
	account string
	addedAt time.Time
}

// members lists all the members of channel, oldest first, for its owner
// or a member (anyone else gets errNotMember before the list is read); it
// also returns the owner.
func (s *store) members(ctx context.Context, channel, caller string) (owner string, ms []member, err error) {
	owner, ms, _, err = s.membersPage(ctx, channel, caller, memberCursor{}, 0)
	return owner, ms, err
}

// memberCursor is the position of a member in the list's order (added_at,
// then account id); the zero cursor is before the first.
type memberCursor struct {
	added   int64
	account string
}

// String is the cursor as GET /v1/channels/members answers it:
// "<added_at in Unix nanoseconds>:<account id>".
func (c memberCursor) String() string { return strconv.FormatInt(c.added, 10) + ":" + c.account }

// parseMemberCursor reads a cursor String wrote.
func parseMemberCursor(v string) (memberCursor, bool) {
	a, acct, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(a, 10, 64)
	if !ok || err != nil || n < 0 || !validAccountID(acct) {
		return memberCursor{}, false
	}
	return memberCursor{n, acct}, true
}

// membersPage is a page of channel's members after the cursor, oldest
// first, at most limit of them (0: all), for its owner or a member
// (anyone else gets errNotMember before the list is read); more says
// members follow. It also returns the owner.
func (s *store) membersPage(ctx context.Context, channel, caller string, after memberCursor, limit int) (owner string, ms []member, more bool, err error) {
	chID, owner, err := channelOwner(ctx, s, channel)
	if err != nil {
		return "", nil, false, err
	}
	if caller != owner {
		var one int
		err := s.queryRow(ctx,
			`SELECT 1 FROM channel_members WHERE channel_id = ? AND account_id = ?`, chID, caller).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil, false, errNotMember
		}
		if err != nil {
			return "", nil, false, err
		}
	}
	q := `SELECT account_id, added_at FROM channel_members
	      WHERE channel_id = ? AND (added_at > ? OR (added_at = ? AND account_id > ?))
	      ORDER BY added_at, account_id`
	args := []any{chID, after.added, after.added, after.account}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit+1)
	}
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return "", nil, false, err
	}
	defer rows.Close()
	ms = []member{}
	for rows.Next() {
		if limit > 0 && len(ms) == limit {
			more = true
			break
		}
		var m member
		var added int64
		if err := rows.Scan(&m.account, &added); err != nil {
			return "", nil, false, err
		}
		m.addedAt = time.Unix(0, added).UTC()
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return "", nil, false, err
	}
	return owner, ms, more, nil
}

// resetFence writes a fence_reset event for a channel the caller owns,
// after removing remove (if non-empty and a member) with its own event,
// and clears a GroupInfo of another epoch than the reset's (clearForReset).
func (s *store) resetFence(ctx context.Context, channel, caller, remove string, epoch uint64, now time.Time) error {
	return s.write(ctx, func(tx txn) error {
		chID, err := ownedChannel(ctx, tx, channel, caller)
		if err != nil {
			return err
		}
		if remove != "" {
			if remove == caller {
				return errOwnerCannotLeave
			}
			if err := accountExists(ctx, tx, remove); err != nil {
				return err
			}
			if _, err := removeMember(ctx, tx, chID, channel, remove, now); err != nil {
				return err
			}
			if err := noteRemoval(ctx, tx, chID, remove, now); err != nil {
				return err
			}
		}
		if err := clearForReset(ctx, tx, chID, epoch); err != nil {
			return err
		}
		return writeEvent(ctx, tx, feed.FenceReset, channel, "", epoch, now)
	})
}

// channelEventsSince returns up to limit events after the cursor, and the
// cursor to pass next time.
func (s *store) channelEventsSince(ctx context.Context, after int64, limit int) ([]feed.Event, int64, error) {
	rows, err := s.query(ctx,
		`SELECT id, kind, channel, account_id, epoch FROM channel_events WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, after, err
	}
	defer rows.Close()
	evs := []feed.Event{}
	next := after
	for rows.Next() {
		var ev feed.Event
		var epoch int64
		if err := rows.Scan(&ev.ID, &ev.Kind, &ev.Channel, &ev.Account, &epoch); err != nil {
			return nil, after, err
		}
		ev.Epoch = uint64(epoch)
		next = ev.ID
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, after, err
	}
	return evs, next, nil
}

// ChannelEventsSince returns the channel feed's events after the cursor (at
// most feed.PageSize of them, in order) and the cursor to pass next time
// (unchanged when there is nothing new). A relay embedded in the same
// process polls it directly; it makes *Server a relay.MembershipSource.
func (s *Server) ChannelEventsSince(ctx context.Context, after int64) ([]feed.Event, int64, error) {
	return s.store.channelEventsSince(ctx, after, feed.PageSize)
}

type memberRequest struct {
	Channel   string `json:"channel"`
	AccountID string `json:"account_id"`
}

type memberResponse struct {
	Channel   string `json:"channel"`
	AccountID string `json:"account_id"`
	Member    bool   `json:"member"`
}

func validAccountID(id string) bool { return id != "" && len(id) <= maxAccountID }

const (
	maxAccountID    = 64
	accountIDErrMsg = "account_id must be 1 to 64 bytes"
)

// POST /v1/channels/members {channel, account_id} → 200 {channel, account_id, member: true}
//
// Owner-only and idempotent.
func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request, p principal) {
	var req memberRequest
	if !decode(w, r, smallBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	if !validAccountID(req.AccountID) {
		badRequest(w, accountIDErrMsg)
		return
	}
	if err := s.store.addMemberByOwner(r.Context(), req.Channel, p.account, req.AccountID, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, memberResponse{Channel: req.Channel, AccountID: req.AccountID, Member: true})
}

// DELETE /v1/channels/members?channel=…&account_id=… → 200 {channel, account_id, member: false}
//
// The owner may remove any member but itself; a member may remove itself.
// Removing an account that is not a member answers the same. An account
// the owner removes is recorded as removed (see removeByIdentity).
//
// DELETE /v1/channels/members?channel=…&identity=… → 200 {channel,
// identity, ended: [account_id…], kept}
//
// Owner-only: ends the membership of the accounts that joined the channel
// by auto invite under identity (1 to 256 characters), unless they joined
// under another identity too (kept is then true). It stores one removal
// record per account it ends (and drops that identity's join records), and
// answers at most the accounts of that identity's joins, bounded by the
// uses of the channel's invites. A stranger, a member and a removed
// account get 403 not_owner and change nothing; an identity nobody joined
// under answers ended: []; a crowd of accounts can do nothing here, since
// only the owner acts.
func (s *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	name, account := q.Get("channel"), q.Get("account_id")
	if !checkChannel(w, p, name) {
		return
	}
	if identity := q.Get("identity"); identity != "" && account == "" {
		s.removeIdentity(w, r, p, name, identity)
		return
	}
	if !validAccountID(account) {
		badRequest(w, accountIDErrMsg)
		return
	}
	if err := s.store.dropMember(r.Context(), name, p.account, account, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, memberResponse{Channel: name, AccountID: account, Member: false})
}

func (s *Server) removeIdentity(w http.ResponseWriter, r *http.Request, p principal, name, identity string) {
	if n := utf8.RuneCountInString(identity); n > MaxIdentity || !storable(identity) {
		badRequest(w, "identity must be 1 to 256 characters, none of them NUL")
		return
	}
	out, err := s.store.removeByIdentity(r.Context(), name, p.account, identity, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if out.ended == nil {
		out.ended = []string{}
	}
	writeJSON(w, http.StatusOK, struct {
		Channel  string   `json:"channel"`
		Identity string   `json:"identity"`
		Ended    []string `json:"ended"`
		Kept     bool     `json:"kept"`
	}{name, identity, out.ended, out.kept})
}

type memberEntry struct {
	AccountID string `json:"account_id"`
	AddedAt   string `json:"added_at"`
}

// maxMembersListed bounds one page of GET /v1/channels/members: 500
// members, about 60 KiB of JSON.
const maxMembersListed = 500

// GET /v1/channels/members?channel=…&after=<cursor> → 200 {channel, owner,
// members: [{account_id, added_at}], has_more, next}
//
// Who may call: the owner and the members (anyone else 403 not_member,
// before anything is read). On whom it acts: nobody; it reads the
// channel's member list, oldest first, in pages of at most
// maxMembersListed; next, present with has_more, is the cursor of the
// page after (an absent cursor is the first page). It stores nothing. A
// crowd of accounts reading it is held by the read bounds (reads.go).
func (s *Server) handleListMembers(w http.ResponseWriter, r *http.Request, p principal) {
	name := r.URL.Query().Get("channel")
	if !checkChannel(w, p, name) {
		return
	}
	c, ok := pageCursor(w, r, parseMemberCursor)
	if !ok {
		return
	}
	var after memberCursor
	if c != nil {
		after = *c
	}
	owner, ms, more, err := s.store.membersPage(r.Context(), name, p.account, after, maxMembersListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]memberEntry, len(ms))
	for i, m := range ms {
		out[i] = memberEntry{AccountID: m.account, AddedAt: rfc3339(m.addedAt)}
	}
	ans := struct {
		Channel string        `json:"channel"`
		Owner   string        `json:"owner"`
		Members []memberEntry `json:"members"`
		HasMore bool          `json:"has_more"`
		Next    string        `json:"next,omitempty"`
	}{Channel: name, Owner: owner, Members: out, HasMore: more}
	if more {
		last := ms[len(ms)-1]
		ans.Next = memberCursor{last.addedAt.UnixNano(), last.account}.String()
	}
	writeJSON(w, http.StatusOK, ans)
}

type fenceRequest struct {
	Channel         string  `json:"channel"`
	Epoch           *uint64 `json:"epoch"`
	RemoveAccountID string  `json:"remove_account_id"`
}

// POST /v1/channels/fence {channel, epoch, remove_account_id?} → 200 {channel, epoch}
//
// Owner-only. Tells the relay (through the channel feed) to expect epoch as
// the next commit epoch on the channel, after removing remove_account_id's
// membership if it has one.
func (s *Server) handleResetFence(w http.ResponseWriter, r *http.Request, p principal) {
	var req fenceRequest
	if !decode(w, r, smallBody, &req) || !checkChannel(w, p, req.Channel) {
		return
	}
	if req.Epoch == nil {
		badRequest(w, "epoch is required")
		return
	}
	if *req.Epoch > MaxFenceEpoch {
		badRequest(w, "epoch must be at most 4294967296")
		return
	}
	if req.RemoveAccountID != "" && !validAccountID(req.RemoveAccountID) {
		badRequest(w, "remove_"+accountIDErrMsg)
		return
	}
	if err := s.store.resetFence(r.Context(), req.Channel, p.account, req.RemoveAccountID, *req.Epoch, s.cfg.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Channel string `json:"channel"`
		Epoch   uint64 `json:"epoch"`
	}{req.Channel, *req.Epoch})
}

// GET /v1/internal/channels/events?after=N (Bearer internal secret) → 200 feed.Page
func (s *Server) handleInternalChannelEvents(w http.ResponseWriter, r *http.Request) {
	after, ok := s.internalCursor(w, r)
	if !ok {
		return
	}
	evs, next, err := s.ChannelEventsSince(r.Context(), after)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, feed.Page{Events: evs, Next: next})
}

// internalCursor checks the internal secret of a feed request and parses
// its after cursor (default 0). On false the answer has been written.
func (s *Server) internalCursor(w http.ResponseWriter, r *http.Request) (int64, bool) {
	if !s.isInternal(r) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "the internal secret is required")
		return 0, false
	}
	return seqCursor(w, r, "after must be a non-negative integer")
}

// seqCursor parses a request's after parameter, a sequence number (0 when
// absent). On failure it answers 400 with complaint and returns false.
func seqCursor(w http.ResponseWriter, r *http.Request, complaint string) (int64, bool) {
	c, ok := pageCursorOr(w, r, complaint, func(a string) (int64, bool) {
		v, err := strconv.ParseInt(a, 10, 64)
		return v, err == nil && v >= 0
	})
	if c == nil {
		return 0, ok
	}
	return *c, ok
}

// pageCursor parses a request's after parameter with parse: nil when
// absent. On a cursor parse refuses it answers 400 and returns false.
func pageCursor[T any](w http.ResponseWriter, r *http.Request, parse func(string) (T, bool)) (*T, bool) {
	return pageCursorOr(w, r, "after must be a cursor from an earlier page", parse)
}

func pageCursorOr[T any](w http.ResponseWriter, r *http.Request, complaint string, parse func(string) (T, bool)) (*T, bool) {
	a := r.URL.Query().Get("after")
	if a == "" {
		return nil, true
	}
	c, ok := parse(a)
	if !ok {
		badRequest(w, complaint)
		return nil, false
	}
	return &c, true
}

// identityRecorded reports, for the owner or a member of channel
// (caller), whether some account joined it by auto invite under identity
// and has not been removed under it since (channel_identities). Anyone
// else gets errNotMember, or errRemoved when someone removed it.
func (s *store) identityRecorded(ctx context.Context, channel, caller, identity string) (bool, error) {
	chID, owner, err := channelOwner(ctx, s, channel)
	if err != nil {
		return false, err
	}
	if caller != owner {
		var one int
		err := s.queryRow(ctx,
			`SELECT 1 FROM channel_members WHERE channel_id = ? AND account_id = ?`, chID, caller).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, removedOr(ctx, s, channel, caller, errNotMember)
		}
		if err != nil {
			return false, err
		}
	}
	var one int
	err = s.queryRow(ctx,
		`SELECT 1 FROM channel_identities WHERE channel_id = ? AND identity = ? LIMIT 1`, chID, identity).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// GET /v1/channels/identities?channel=…&identity=… → 200 {channel,
// identity, recorded}
//
// Whether an account joined the channel by auto invite under identity (1
// to 256 characters), as the directory recorded at the join, before it
// handed out the GroupInfo: a room's members ask it of each joiner by
// invite, and remove one the directory holds no record of (a joiner that
// named another key of its own here, whose removal could not name its
// account; the record of that other key lapses, lapse.go).
// Who may call it: the channel's owner and members. On whom it acts:
// nobody; it reads one row and stores nothing. What it returns: one
// boolean, never an account. A stranger gets 403 not_member (404 for a
// channel that does not exist), a removed member 403 removed; a crowd of
// accounts is held by the per-account request limits, and none of them
// learns more than whether an identity joined a channel it is in.
func (s *Server) handleIdentityRecorded(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	name, identity := q.Get("channel"), q.Get("identity")
	if !checkChannel(w, p, name) {
		return
	}
	if n := utf8.RuneCountInString(identity); n == 0 || n > MaxIdentity || !storable(identity) {
		badRequest(w, "identity must be 1 to 256 characters, none of them NUL")
		return
	}
	ok, err := s.store.identityRecorded(r.Context(), name, p.account, identity)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Channel  string `json:"channel"`
		Identity string `json:"identity"`
		Recorded bool   `json:"recorded"`
	}{name, identity, ok})
}
