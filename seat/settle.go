package seat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// This file keeps a room moving when some of its members cannot, or will
// not:
//
//   - Proposals pending in an epoch are committed before this member sends
//     (RFC 9420 §12.4: a member that saw proposals must commit them before
//     sending application data). The commit leaves out what is invalid or
//     breaks the room's roles, so no proposal can stop anyone sending.
//   - A member that leaves proposes its own Remove (§12.1.3); the next
//     owner or admin to see it commits it, and any member commits it before
//     its next send.
//   - A commit that the relay accepted but every member refused (a hostile
//     member's, say one that breaks the roles) moves the relay's commit
//     fence past the epoch the group is in, and every honest commit then
//     gets stale_epoch. The owner's seat resets the fence to the group's
//     epoch through the directory (POST /v1/channels/fence).
//   - When a commit by an admin removed members, the owner's seat ends the
//     channel membership of their accounts at the directory: only the owner
//     can, and only the owner learned the accounts when it admitted them.

// errNothingToCommit ends a commit loop that found nothing left to do.
var errNothingToCommit = errors.New("seat: nothing to commit")

// fenceResetWait bounds how long the owner's seat waits for the relay to
// apply a fence reset (the relay reads the directory's channel events
// about once a second).
const fenceResetWait = 15 * time.Second

// commitPending commits the proposals pending in r's epoch, if any.
func (s *Seat) commitPending(ctx context.Context, r *room) error {
	_, err := s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
		if len(r.g.PendingProposals()) == 0 {
			return nil, errNothingToCommit
		}
		return r.g.Commit(mls.CommitOptions{})
	})
	if errors.Is(err, errNothingToCommit) {
		return nil
	}
	return err
}

// pendingLeave reports whether a member's proposal to remove itself waits
// in g's epoch.
func pendingLeave(g *mls.Group) bool { return len(leavers(g, g.Members())) > 0 }

// manages reports whether this member may add and remove others in r.
func (r *room) manages() bool {
	roles, has, err := rolesIn(r.g.Extensions())
	if err != nil {
		return false
	}
	if !has {
		return r.role == "owner"
	}
	return roles.manages(selfIdentity(r.g))
}

// settle does, after a catch-up, what the entries it applied call for:
// an owner or admin commits pending leaves; the owner checks the relay's
// fence after a refused handshake (a fresh-path commit, which resets the
// fence in commitWithRetry if it is ahead) and ends the memberships of
// removed members.
func (s *Seat) settle(ctx context.Context, r *room) error {
	if !r.g.Active() || r.g.HasPendingCommit() {
		return nil
	}
	var err error
	switch {
	case r.gap || s.gapPending(ctx, r.channel):
		// Recorded until the check succeeds, so a directory that cannot
		// be reached now does not leave this member behind for good.
		r.gap = false
		if err = s.setGapPending(ctx, r.channel, true); err == nil {
			if err = s.rejoinIfBehind(ctx, r); err == nil {
				err = s.setGapPending(ctx, r.channel, false)
			}
		}
	case len(r.offers) > 0:
		err = s.addOffers(ctx, r)
	case pendingLeave(r.g) && r.manages():
		err = s.commitPending(ctx, r)
	case r.refused && r.role == "owner":
		_, err = s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) { return r.g.SelfUpdate() })
	}
	r.refused = false
	if errors.Is(err, ErrFenceAhead) {
		err = nil // the owner's to fix; this member's reads go on
	}
	if err != nil {
		return err
	}
	s.checkInviteJoiners(ctx, r)
	if r.role == "owner" {
		// A failure is retried on the next settle: the records stay.
		s.endRemovedMemberships(ctx, r)
		s.lapseStrayJoins(ctx, r)
	}
	// Likewise: the room hears the name on a later settle.
	s.shareName(ctx, r)
	return nil
}

// catchUpSettled catches r up and settles what it applied.
func (s *Seat) catchUpSettled(ctx context.Context, r *room, onMsg func(RoomMessage)) error {
	if err := s.catchUp(ctx, r, onMsg); err != nil {
		return err
	}
	return s.settle(ctx, r)
}

// endRemovedMemberships ends, at the directory, the channel membership of
// every account this home admitted into r whose identities are all out of
// the group now, and forgets them. A failure leaves the record for the
// next time.
func (s *Seat) endRemovedMemberships(ctx context.Context, r *room) error {
	rows, err := s.st.db.QueryContext(ctx, `SELECT identity, account_id FROM room_accounts WHERE channel = ?`, r.channel)
	if err != nil {
		return err
	}
	type rec struct{ identity, account string }
	var recs []rec
	for rows.Next() {
		var x rec
		if err := rows.Scan(&x.identity, &x.account); err != nil {
			rows.Close()
			return err
		}
		recs = append(recs, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	in := map[string]bool{}
	for _, m := range r.g.Members() {
		in[m.Identity] = true
	}
	stays := map[string]bool{} // accounts with an identity still in the group
	for _, x := range recs {
		if in[x.identity] {
			stays[x.account] = true
		}
	}
	var dir *DirectoryClient
	for _, x := range recs {
		if in[x.identity] {
			continue
		}
		if !stays[x.account] {
			if dir == nil {
				key, err := s.apiKey(ctx)
				if err != nil {
					return err
				}
				dir = s.directory(key)
			}
			if err := dir.RemoveMember(ctx, r.channel, x.account); err != nil {
				var ae *APIError
				if !errors.As(err, &ae) || ae.Status != 404 {
					return fmt.Errorf("seat: ending the membership of %s in %s: %w", x.identity, r.channel, err)
				}
			}
		}
		if _, err := s.st.db.ExecContext(ctx, `DELETE FROM room_accounts WHERE channel = ? AND identity = ?`, r.channel, x.identity); err != nil {
			return err
		}
	}
	return nil
}

// proposeLeave sends a Remove proposal for this member's own leaf. It
// counts only if no commit ended its epoch before it in the room's log,
// so it is sent again in the new epoch when one did.
func (s *Seat) proposeLeave(ctx context.Context, r *room) error {
	if err := s.catchUp(ctx, r, nil); err != nil {
		return err
	}
	conn, err := s.roomPub(ctx, r.channel)
	if err != nil {
		return err
	}
	defer conn.Close()
	for attempt := 0; attempt < 5; attempt++ {
		if !r.g.Active() {
			return nil // removed already: nothing to propose
		}
		epoch := r.g.Epoch()
		msg, err := r.g.ProposeRemove(r.g.LeafIndex())
		if err != nil {
			return err
		}
		seq, err := conn.Publish(ctx, r.channel, msg)
		if err != nil {
			return err
		}
		if err := s.catchUpTo(ctx, r, seq, nil); err != nil {
			return err
		}
		if r.g.Epoch() == epoch {
			return nil
		}
	}
	return errStaleRetries
}

// fenceAhead reports whether err, a stale_epoch refusal of a commit that
// was answered after this member caught up with the log, names an epoch
// beyond the group's: the relay's fence sits on a commit this member
// refused.
func fenceAhead(err error, g *mls.Group) bool {
	var fe *FrameError
	return errors.As(err, &fe) && errors.Is(err, ErrStaleEpoch) && fe.Epoch > g.Epoch()
}

// waitFence sleeps before the next try of a commit after a fence reset.
func waitFence(ctx context.Context) error {
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// The account behind a join by invite.
//
// A joiner by auto invite names, in its join at the directory, the
// identity it will join the room as, with proof that it holds that
// identity's member key (the directory refuses a join that names an
// identity whose key the joiner cannot sign with, so nobody ties another
// person's identity to its account). The directory records that identity
// with the joiner's account (channel_identities) in the same transaction
// that makes the account a member and hands out the GroupInfo; a removal
// by identity later ends the membership of every account recorded under
// it. So an honest joiner's record exists before its external Commit can:
// the Commit needs the GroupInfo the directory gives only with, or after,
// the record.
//
// A joiner that holds two keys can still name one at the directory and
// join the room as the other. Two checks close that:
//
//   - The owner's and the admins' seats ask the directory, after each
//     catch-up, whether each identity that joined by invite is recorded,
//     and remove at once, with a commit, one that is not
//     (checkInviteJoiners): the room is rid of the leaf no removal could
//     tie to an account.
//   - The owner's seat lists the channel's invite-join records, at most
//     once every lapseSweepEvery, and lapses at the directory those whose
//     identity is not in the group (lapseStrayJoins): the identity the
//     liar named never joins the room, so its record lapses once its
//     grace (the directory's LapseGrace, 10 minutes) is over, and with it
//     the membership that only that join made. The relay then serves the
//     liar's account nothing, and the directory hands it no GroupInfo. A
//     lapse is not a removal: an honest joiner too slow to commit in its
//     grace joins by the invite again (the use it did not make in the room
//     is given back at the directory), and one whose identity is in the
//     group is never lapsed, since the lapse names the epoch the owner
//     read the group at and the directory takes it only while the relay's
//     fence stands there.
//
// Why a removal after the join and not a refusal in every member's
// engine: the answer comes from a server, over the network, while the
// engine's verdict must be the same at every member and at every later
// catch-up; a member that could not ask, or asks after the joiner left
// (its record goes with it), would refuse a Commit the others took and
// fork from the room. Removing is a Commit like any other, which every
// member applies alike.
//
// The roles: the record names the account that made the join, never one
// the joiner picks, and a removal by identity ends every account recorded
// under it, so a joiner cannot have another account's membership ended,
// nor keep its own by naming an identity that others use too. Only the
// owner lapses records: admins are roles in the group, which the
// directory does not read. A directory that lies can keep serving
// ciphertext anyway; with these checks it can only have an invite joiner
// removed. What the window leaves: for up to the grace and one sweep
// after it, the liar's account keeps the relay's service of ciphertext
// of epochs it holds no keys for, as any holder of a token that joins at
// the directory and never commits gets.

// lapseSweepEvery is how often the owner's seat reads a room's invite-join
// records to lapse those whose identity is not in the group: half the
// directory's grace, so a stray record lapses at most one sweep after its
// grace ends, while a busy room costs the directory one read of a page
// or two every five minutes.
const lapseSweepEvery = 5 * time.Minute

// lapseStrayJoins lapses, at the directory, the invite-join records of r
// whose identity is not in the group and whose grace is over, at most
// once every lapseSweepEvery for r (by this seat's clock). Best effort:
// what fails is tried on a later sweep.
func (s *Seat) lapseStrayJoins(ctx context.Context, r *room) {
	now := s.cfg.Now()
	s.mu.Lock()
	last, ok := s.swept[r.channel]
	due := !ok || now.Sub(last) >= lapseSweepEvery || now.Before(last)
	if due {
		// Marked before the read, so a directory that is away or refuses
		// is asked again only at the next sweep, not at every settle.
		if s.swept == nil {
			s.swept = map[string]time.Time{}
		}
		s.swept[r.channel] = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return
	}
	dir := s.directory(key)
	joins, err := dir.InviteJoins(ctx, r.channel)
	if err != nil {
		return
	}
	var stray []string
	seen := map[string]bool{}
	for _, j := range joins {
		if seen[j.Identity] || now.Before(j.LapsesAt) {
			continue
		}
		if _, in := r.g.MemberByIdentity(j.Identity); in {
			continue
		}
		seen[j.Identity] = true
		stray = append(stray, j.Identity)
	}
	for len(stray) > 0 {
		n := min(len(stray), maxLapse)
		if _, err := dir.LapseInviteJoins(ctx, r.channel, r.g.Epoch(), stray[:n]); err != nil {
			return // the room moved on, or the directory is away: next sweep
		}
		stray = stray[n:]
	}
}

// checkInviteJoiners removes, if this member may remove others, each
// identity that joined r by invite since the load, is still in the group,
// and that the directory has no record of. An identity whose record could
// not be read, or whose removal failed, stays for the next settle.
func (s *Seat) checkInviteJoiners(ctx context.Context, r *room) {
	if len(r.inviteJoiners) == 0 {
		return
	}
	if !r.manages() {
		r.inviteJoiners = nil
		return
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return
	}
	dir := s.directory(key)
	var left, liars []string
	for _, id := range r.inviteJoiners {
		if _, ok := r.g.MemberByIdentity(id); !ok || PersonOf(id) == PersonOf(selfIdentity(r.g)) {
			continue
		}
		ok, err := dir.IdentityRecorded(ctx, r.channel, id)
		switch {
		case err != nil:
			left = append(left, id)
		case !ok:
			liars = append(liars, id)
		}
	}
	r.inviteJoiners = left
	if len(liars) == 0 {
		return
	}
	_, err = s.commitWithRetry(ctx, r, func() (*mls.CommitResult, error) {
		var leaves []uint32
		var ids []string
		for _, id := range liars {
			if m, ok := r.g.MemberByIdentity(id); ok && checkMayRemove(r.g, id) == nil {
				leaves = append(leaves, m.LeafIndex)
				ids = append(ids, id)
			}
		}
		if len(leaves) == 0 {
			return nil, errNothingToCommit // another manager removed them
		}
		opts := mls.CommitOptions{Remove: leaves}
		exts, changed, err := withBarred(r.g.Extensions(), ids)
		if err != nil {
			return nil, err
		}
		if changed {
			opts.Extensions = exts
		}
		return r.g.Commit(opts)
	})
	if err != nil && !errors.Is(err, errNothingToCommit) {
		// Tried again on the next settle; this member's reads go on.
		r.inviteJoiners = append(r.inviteJoiners, liars...)
	}
}
