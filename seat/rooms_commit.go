package seat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

// catchUp processes the room's log since its cursor: commits advance the
// epoch, application messages land in the history. Each entry is applied
// and stored in one transaction.
//
// When the relay no longer holds all that came after the cursor (its cap
// or TTL dropped it), the gap goes into the history as a NoticeGap, and
// settle finds out whether commits were in it (rejoin.go).
func (s *Seat) catchUp(ctx context.Context, r *room, onMsg func(RoomMessage)) error {
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		p, err := rc.SyncPage(ctx, r.channel, r.lastSeq, 500)
		if err != nil {
			return err
		}
		if first && p.Truncated && p.OldestSeq > r.lastSeq+1 {
			// From 0 (a member that joined by Welcome and has read
			// nothing yet) what is gone may all be from before it joined:
			// no notice, but settle checks whether it is behind.
			r.gap = true
			if r.lastSeq > 0 {
				if err := s.noteGap(ctx, r, p.OldestSeq, onMsg); err != nil {
					return err
				}
			}
		}
		for _, e := range p.Entries {
			if err := s.apply(ctx, r, e, onMsg); err != nil {
				return err
			}
		}
		if r.onPage != nil && len(p.Entries) > 0 {
			r.onPage(r.lastSeq)
		}
		if !p.HasMore || len(p.Entries) == 0 {
			break
		}
	}
	if r.g.HasPendingCommit() {
		// An own commit stored before a crash or a lost ack that is not in
		// the log: the relay never recorded it.
		r.g.DiscardCommit()
		return s.saveRoom(ctx, r, false)
	}
	return nil
}

// apply processes one relay entry of the room and stores the result.
// Entries this member cannot use (its own messages coming back, messages
// from before it joined, cover) advance the cursor and change nothing else.
func (s *Seat) apply(ctx context.Context, r *room, e RelayEntry, onMsg func(RoomMessage)) error {
	if e.Seq <= r.lastSeq {
		return nil
	}
	r.lastSeq = e.Seq
	if e.EntryType == EntryWelcome || noteOffer(r, e) {
		return s.saveRoom(ctx, r, false)
	}
	var members int
	var before []mls.Member
	var rolesBefore RoomRoles
	var left []string
	if e.EntryType == EntryCommit {
		r.handshake = true
		before = r.g.Members()
		members = len(before)
		rolesBefore, _, _ = rolesIn(r.g.Extensions())
		left = leavers(r.g, before)
	}
	// The revocation rules judge a Commit by when the relay archived it
	// (revocation.go).
	s.processingAt = time.UnixMilli(e.TS)
	rec, err := r.g.Process(e.Payload)
	s.processingAt = time.Time{}
	if err != nil {
		// Entries this member cannot use only advance the cursor: its own
		// messages coming back, messages from before it joined or past the
		// late-message window, cover it cannot read, and commits that do
		// not verify (hostile or broken; skipping one keeps this member on
		// the epoch it has, and settle sees that the relay's fence may have
		// moved past it). Process changed nothing.
		if e.EntryType == EntryCommit && !errors.Is(err, mls.ErrWrongEpoch) && r.g.Active() {
			r.refused = true
		}
		return s.saveRoom(ctx, r, false)
	}
	var hist []RoomMessage
	switch {
	case rec.Kind == mls.KindApplication && len(rec.Data) > 0 && rec.Data[0] == roomText:
		m := RoomMessage{Room: r.channel, Seq: e.Seq, Sender: PersonOf(rec.SenderIdentity), Text: string(rec.Data[1:]), Time: time.UnixMilli(e.TS)}
		hist = append(hist, m)
	case rec.Kind == mls.KindApplication && len(rec.Data) > 0 && rec.Data[0] == roomName:
		m := RoomMessage{Room: r.channel, Seq: e.Seq, Sender: PersonOf(rec.SenderIdentity), Text: string(rec.Data[1:]), Time: time.UnixMilli(e.TS)}
		if hist, err = s.nameNotice(ctx, m); err != nil {
			return err
		}
	case rec.Kind == mls.KindCommit && rec.Removed:
		hist = append(hist, RoomMessage{Room: r.channel, Seq: e.Seq, Sender: PersonOf(rec.SenderIdentity), Kind: NoticeRemoved,
			Text: "removed this seat from the room", Time: time.UnixMilli(e.TS)})
	case rec.Kind == mls.KindCommit && len(r.g.Members()) > members:
		r.newcomers = true
	}
	if rec.Kind == mls.KindCommit && bytes.HasPrefix(rec.AuthenticatedData, []byte(inviteTicketMagic)) &&
		!slices.ContainsFunc(before, func(m mls.Member) bool { return m.Identity == rec.SenderIdentity }) {
		r.inviteJoiners = append(r.inviteJoiners, rec.SenderIdentity)
	}
	if rec.Kind == mls.KindCommit && r.g.Active() {
		hist = append(hist, s.commitNotices(r, e.Seq, time.UnixMilli(e.TS), rec.SenderIdentity, before, left, rolesBefore)...)
	}
	if err := s.saveRoom(ctx, r, false, hist...); err != nil {
		return err
	}
	for _, m := range hist {
		if onMsg != nil {
			onMsg(m)
		}
	}
	if rec.Kind == mls.KindCommit && !rec.Removed && r.role == "owner" {
		s.endDeparted(ctx, r, before, rec.SenderIdentity)
	}
	return nil
}

// endDeparted is the owner's part in another member's removal of members
// this home did not admit: the commit by committer took the leaves of
// before that are gone from r's group, and only the owner may end, by
// identity, the memberships of the accounts that joined under them
// ([DirectoryClient.RemoveIdentity]; those this home admitted are
// endRemovedMemberships'). Leaves that left by themselves have ended
// theirs already, and the directory then records nothing. It is best
// effort: a failure leaves the membership, which the next removal of the
// same identity retries, while the commit keeps the member out of the
// room.
func (s *Seat) endDeparted(ctx context.Context, r *room, before []mls.Member, committer string) {
	var gone []string
	for _, m := range before {
		if _, ok := r.g.MemberByIdentity(m.Identity); ok || PersonOf(m.Identity) == PersonOf(committer) {
			continue
		}
		var known int
		if err := s.st.db.QueryRowContext(ctx, `SELECT count(*) FROM room_accounts WHERE channel = ? AND identity = ?`, r.channel, m.Identity).Scan(&known); err == nil && known == 0 {
			gone = append(gone, m.Identity)
		}
	}
	if len(gone) == 0 {
		return
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return
	}
	dir := s.directory(key)
	for _, id := range gone {
		dir.RemoveIdentity(ctx, r.channel, id)
	}
}

// publishCommit publishes a commit of r's group, confirming it on success;
// leaving are the persons whose own Remove proposals it takes.
// On stale_epoch it discards the commit, catches up and returns the
// stale error so the caller rebuilds its commit on the new epoch.
func (s *Seat) publishCommit(ctx context.Context, r *room, commit []byte, leaving []string) error {
	// On the connection of a watch of the room in this process, if one
	// runs (watchpub.go).
	conn, err := s.roomPub(ctx, r.channel)
	if err != nil {
		r.g.DiscardCommit()
		return err
	}
	defer conn.Close()
	// The state with the pending commit is stored before the commit
	// leaves: if the relay accepts it and this process dies before
	// confirming, the next catch-up finds the commit in the log and
	// confirms it (mls.Group.Process recognizes its own commit); if the
	// relay never recorded it, catch-up discards it.
	if err := s.saveRoom(ctx, r, false); err != nil {
		r.g.DiscardCommit()
		return err
	}
	if testOnlyBeforeCommit != nil {
		testOnlyBeforeCommit()
	}
	seq, err := conn.Publish(ctx, r.channel, commit)
	if err == nil && testOnlyAfterCommit != nil {
		err = testOnlyAfterCommit()
	}
	if err != nil {
		if !errors.Is(err, ErrStaleEpoch) {
			// The relay may or may not have the commit (a lost ack):
			// leave the stored pending commit for catch-up to settle.
			return err
		}
		r.g.DiscardCommit()
		if err := s.saveRoom(ctx, r, false); err != nil {
			return err
		}
		if cerr := s.catchUp(ctx, r, nil); cerr != nil {
			return cerr
		}
		return err
	}
	before := r.g.Members()
	rolesBefore, _, _ := rolesIn(r.g.Extensions())
	if err := r.g.ConfirmCommit(); err != nil {
		return err
	}
	notices := s.commitNotices(r, seq, s.cfg.Now(), selfIdentity(r.g), before, leaving, rolesBefore)
	// Entries between our cursor and our own commit were published before
	// it in the same epoch: catch up on them first (they are application
	// messages of the old epoch, which the window still decrypts).
	if err := s.catchUpTo(ctx, r, seq, nil); err != nil {
		return err
	}
	r.lastSeq = max(r.lastSeq, seq)
	return s.saveRoom(ctx, r, false, notices...)
}

// catchUpTo applies entries up to (not including) seq.
func (s *Seat) catchUpTo(ctx context.Context, r *room, seq uint64, onMsg func(RoomMessage)) error {
	if r.lastSeq+1 >= seq {
		return nil
	}
	rc, err := s.roomRelay(ctx)
	if err != nil {
		return err
	}
	for r.lastSeq+1 < seq {
		page, _, err := rc.Sync(ctx, r.channel, r.lastSeq, 500)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		for _, e := range page {
			if e.Seq >= seq {
				return nil
			}
			if err := s.apply(ctx, r, e, onMsg); err != nil {
				return err
			}
		}
	}
	return nil
}

// testOnlyBeforeCommit, when set by a test, runs before a commit is
// published, so a test can make another member commit first.
var testOnlyBeforeCommit func()

// testOnlyAfterCommit, when set by a test, runs after the relay accepted a
// commit; an error it returns stands for a crash before the commit is
// confirmed.
var testOnlyAfterCommit func() error

// commitWithRetry builds a commit with build, publishes it, and on
// stale_epoch catches up and rebuilds, a few times.
//
// When the relay's fence is ahead of the group (see settle.go), the owner
// resets it and retries until the relay applied the reset; anyone else
// gets ErrFenceAhead.
func (s *Seat) commitWithRetry(ctx context.Context, r *room, build func() (*mls.CommitResult, error)) (*mls.CommitResult, error) {
	var resetAt time.Time
	for attempt := 0; attempt < 5; {
		// Who leaves by this commit is known only before it takes their
		// proposals (the watch's notices).
		leaving := leavers(r.g, r.g.Members())
		res, err := build()
		if err != nil {
			return nil, err
		}
		// A Welcome without the tree is of no use until the tree is at
		// the directory: put it before the Commit leaves, so that a
		// failure here changes nothing (tree.go). It is the tree of the
		// epoch the Commit makes, the one after the group's; a put the
		// directory refuses as stale means the Commit is stale too, which
		// the relay answers below.
		if res.RatchetTree != nil {
			if err := s.putTree(ctx, r.channel, r.g.Epoch()+1, res.TreeHash, res.RatchetTree); err != nil && !treeStale(err) {
				r.g.DiscardCommit()
				return nil, err
			}
		}
		err = s.publishCommit(ctx, r, res.Commit, leaving)
		switch {
		case err == nil:
			if res.Welcome != nil {
				r.newcomers = true
			}
			s.shareGroupInfo(ctx, r)
			return res, nil
		case !errors.Is(err, ErrStaleEpoch):
			return nil, err
		case !fenceAhead(err, r.g):
			attempt++
			continue
		case r.role != "owner":
			return nil, fmt.Errorf("%w (%s)", ErrFenceAhead, r.channel)
		case resetAt.IsZero():
			key, err := s.apiKey(ctx)
			if err != nil {
				return nil, err
			}
			if err := s.directory(key).ResetFence(ctx, r.channel, r.g.Epoch()); err != nil {
				return nil, fmt.Errorf("seat: resetting the relay's commit fence of %s: %w", r.channel, err)
			}
			resetAt = time.Now()
		case time.Since(resetAt) > fenceResetWait:
			return nil, fmt.Errorf("seat: the relay has not applied the commit fence reset of %s yet; try again", r.channel)
		}
		if err := waitFence(ctx); err != nil {
			return nil, err
		}
	}
	return nil, errStaleRetries
}
