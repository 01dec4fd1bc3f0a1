package seat

import (
	"context"
	"errors"
	"fmt"
)

// Rejoining instead of dying.
//
// The relay keeps a bounded log per channel. A member that stays away
// longer than the log reaches back finds, on its next catch-up, that the
// relay no longer holds what came after its cursor (/v1/sync says
// "truncated"): the gap goes into the history as a NoticeGap. If commits
// were in the gap, the member cannot follow the group any more: it then
// rejoins by an external Commit that replaces its own leaf (a resync,
// RFC 9420 §12.4.3.2, which every member admits from a leaf's own key,
// autojoin.go), from the GroupInfo the directory keeps, and says so with a
// NoticeRejoined. Its history keeps what it had; what it missed stays
// missed. [Room.Rejoin] does the same on request, for a room whose
// state is lost or stuck.

// Notices of gaps and rejoins.
const (
	// NoticeGap: the relay no longer held the room's entries before Seq
	// that this seat had not read; Text says so.
	NoticeGap = "gap"
	// NoticeRejoined: this seat took its place in the room again, at a
	// later epoch, after missing commits.
	NoticeRejoined = "rejoined"
)

// noteGap records that the entries between r's cursor and oldest are gone.
func (s *Seat) noteGap(ctx context.Context, r *room, oldest uint64, onMsg func(RoomMessage)) error {
	m := RoomMessage{Room: r.channel, Seq: oldest - 1, Kind: NoticeGap, Time: s.cfg.Now(),
		Text: fmt.Sprintf("missed what was sent between seq %d and %d: the relay no longer holds it", r.lastSeq+1, oldest-1)}
	if err := s.saveRoom(ctx, r, false, m); err != nil {
		return err
	}
	if onMsg != nil {
		onMsg(m)
	}
	return nil
}

// rejoinIfBehind rejoins r when the directory's GroupInfo is of a later
// epoch than r's group, after a gap.
func (s *Seat) rejoinIfBehind(ctx context.Context, r *room) error {
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	epoch, gi, err := s.directory(key).GroupInfo(ctx, r.channel)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == 404 {
			return nil // nobody put one: nothing to rejoin from
		}
		return err
	}
	if epoch <= r.g.Epoch() {
		return nil // only messages were missed
	}
	return s.rejoin(ctx, r, gi)
}

// rejoin replaces r's group by an external Commit from gi that takes this
// seat's own leaf again.
func (s *Seat) rejoin(ctx context.Context, r *room, gi []byte) error {
	sig, id, err := s.memberKey(ctx)
	if err != nil {
		return err
	}
	nr, err := s.externalCommit(ctx, r.channel, gi, sig, id, nil)
	if err != nil {
		return fmt.Errorf("seat: rejoining %s: %w", r.channel, err)
	}
	r.g, r.lastSeq, r.refused, r.offers = nr.g, max(r.lastSeq, nr.lastSeq), false, nil
	return s.saveRoom(ctx, r, false, RoomMessage{Room: r.channel, Seq: nr.lastSeq, Kind: NoticeRejoined, Time: s.cfg.Now(),
		Text: fmt.Sprintf("rejoined the room at epoch %d, after missing commits", r.g.Epoch())})
}

// rejoinRoom is [Room.Rejoin] on the room called name.
func (s *Seat) rejoinRoom(ctx context.Context, name string) error {
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return err
	}
	key, err := s.apiKey(ctx)
	if err != nil {
		return err
	}
	s.lockRooms()
	defer s.unlockRooms()
	_, gi, err := s.directory(key).GroupInfo(ctx, ch)
	if err != nil {
		return fmt.Errorf("seat: no GroupInfo of %s to rejoin from: %w", ch, err)
	}
	r, err := s.loadRoom(ctx, ch)
	if errors.Is(err, ErrNoRoom) {
		sig, id, err := s.memberKey(ctx)
		if err != nil {
			return err
		}
		nr, err := s.externalCommit(ctx, ch, gi, sig, id, nil)
		if err != nil {
			return fmt.Errorf("seat: rejoining %s: %w", ch, err)
		}
		return s.saveRoom(ctx, nr, true, RoomMessage{Room: ch, Seq: nr.lastSeq, Kind: NoticeRejoined, Time: s.cfg.Now(),
			Text: fmt.Sprintf("rejoined the room at epoch %d", nr.g.Epoch())})
	}
	if err != nil {
		return err
	}
	return s.rejoin(ctx, r, gi)
}

// gapPending reports whether a gap in ch still waits for its check.
func (s *Seat) gapPending(ctx context.Context, ch string) bool {
	v, err := s.st.meta(ctx, "gap:"+ch)
	return err == nil && v == "1"
}

func (s *Seat) setGapPending(ctx context.Context, ch string, on bool) error {
	v := ""
	if on {
		v = "1"
	}
	return s.st.setMeta(ctx, "gap:"+ch, v)
}
