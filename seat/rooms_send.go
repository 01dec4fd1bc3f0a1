package seat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// sendText is [Room.Send] on the room called name.
func (s *Seat) sendText(ctx context.Context, name, text string) (uint64, error) {
	// A watch of this home running in another process sends it on its
	// connection, among its cover (handoff.go).
	if rep, ok := s.handOff(ctx, handoffRequest{Kind: handSend, Room: name, Text: text}); ok {
		return rep.Seq, rep.err()
	}
	// With none, on a connection that looks like a watch's (oneshot.go).
	if seq, ok, err := s.sendAsCover(ctx, name, text); ok {
		return seq, err
	}
	return s.roomSend(ctx, name, text)
}

// roomSend is sendText in this process.
func (s *Seat) roomSend(ctx context.Context, name, text string) (uint64, error) {
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return 0, err
	}
	did, err := s.Identity()
	if err != nil {
		return 0, err
	}
	var seq uint64
	err = s.withRoom(ctx, ch, func(r *room) error {
		// A watch in this process keeps the room caught up by its pushes:
		// a read of the log before the send would tell it from cover.
		if _, watched := s.watchConn(ch); !watched {
			if err := s.catchUpSettled(ctx, r, nil); err != nil {
				return err
			}
		} else if err := s.settle(ctx, r); err != nil {
			return err
		}
		var err error
		seq, err = s.sendInRoom(ctx, r, append([]byte{roomText}, text...), func(seq uint64) []RoomMessage {
			return []RoomMessage{{Room: ch, Seq: seq, Sender: did, Text: text, Time: s.cfg.Now()}}
		})
		return err
	})
	return seq, err
}

// sendInRoom sends plain as an application message of r, which is loaded
// under the room lock and caught up, and returns its seq. Proposals
// pending in the epoch are committed first (settle.go). The history that
// hist returns for the seq is stored with the state once the relay took
// the message.
func (s *Seat) sendInRoom(ctx context.Context, r *room, plain []byte, hist func(seq uint64) []RoomMessage) (uint64, error) {
	if !r.g.Active() {
		return 0, ErrRemovedRoom
	}
	if err := s.commitPending(ctx, r); err != nil {
		return 0, err
	}
	ct, err := r.g.Protect(plain, nil)
	if err != nil {
		return 0, err
	}
	// The advanced ratchet is stored before the message leaves, so a
	// crash cannot make this seat reuse its message key.
	if err := s.saveRoom(ctx, r, false); err != nil {
		return 0, err
	}
	// A watch in this process sends on its connection, as its cover.
	_, watched := s.watchConn(r.channel)
	pub, err := s.roomPub(ctx, r.channel)
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	seq, err := pub.Publish(ctx, r.channel, ct)
	if err != nil {
		return 0, err
	}
	s.observeSend(r.channel, len(plain))
	if watched {
		// As after a cover frame: no read of the log follows the send
		// (it would mark the frame as a real one). The watch's pushes
		// bring what came before it, and its own message coming back is
		// skipped, so the cursor moves only when nothing is between.
		if r.lastSeq+1 == seq {
			r.lastSeq = seq
		}
		if err := s.saveRoom(ctx, r, false, hist(seq)...); !errors.Is(err, errRoomMoved) {
			return seq, err
		}
	}
	// The message is out: from here on nothing may send it again, so a
	// state another process stored meanwhile is reloaded, not retried.
	for attempt := 0; ; attempt++ {
		// Entries others published after the catch-up and before this
		// message come first.
		err := s.catchUpTo(ctx, r, seq, nil)
		if err == nil {
			r.lastSeq = max(r.lastSeq, seq)
			err = s.saveRoom(ctx, r, false, hist(seq)...)
		}
		if !errors.Is(err, errRoomMoved) {
			return seq, err
		}
		if attempt == 4 {
			return seq, fmt.Errorf("seat: the message was sent (seq %d) but not stored: %v", seq, err)
		}
		fresh, err := s.loadRoom(ctx, r.channel)
		if err != nil {
			return seq, err
		}
		*r = *fresh
	}
}

// syncNamed is [Room.Sync] on the room called name.
func (s *Seat) syncNamed(ctx context.Context, name string) ([]RoomMessage, error) {
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []RoomMessage
	f, err := s.newFeed(ctx, []string{ch}, func(m RoomMessage) { out = append(out, m) })
	if err != nil {
		return nil, err
	}
	err = s.withRoom(ctx, ch, func(r *room) error { return s.catchUpSettled(ctx, r, nil) })
	if ferr := f.emit(ctx); err == nil {
		err = ferr
	}
	return out, err
}

// historyOf is [Room.History] on the room called name.
func (s *Seat) historyOf(ctx context.Context, name string) ([]RoomMessage, error) {
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return nil, err
	}
	out, _, err := s.history(ctx, `WHERE channel = ? AND kind <> ? ORDER BY seq`, ch, noticeMembers)
	if err != nil {
		return nil, err
	}
	return out, s.withNames(ctx, out)
}

// history returns the history rows that the clause where (with args)
// selects, opened, and the rowid of the last one. A row that does not
// open fails the whole read: a history with a hole would look complete.
func (s *Seat) history(ctx context.Context, where string, args ...any) ([]RoomMessage, int64, error) {
	l, err := s.sealer()
	if err != nil {
		return nil, 0, err
	}
	rows, err := s.st.db.QueryContext(ctx, `SELECT rowid, channel, seq, ts, kind, body FROM room_history `+where, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []RoomMessage
	var last int64
	var buf openBuf
	for rows.Next() {
		var m RoomMessage
		var ts int64
		var body sql.RawBytes // opened before the next row
		if err := rows.Scan(&last, &m.Room, &m.Seq, &ts, &m.Kind, &body); err != nil {
			return nil, 0, err
		}
		if err := l.openMessage(&m, ts, body, &buf); err != nil {
			return nil, 0, err
		}
		m.Time = time.UnixMilli(ts)
		out = append(out, m)
	}
	return out, last, rows.Err()
}
