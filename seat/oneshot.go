package seat

import (
	"context"
	"time"
)

// One-shot sends that look like cover.
//
// A send from a process that runs no watch would open a connection, publish
// one frame and close: the relay would tell it from the cover a watch sends
// by its connection alone (a short life, no cover around the frame). When
// [Config].Cover sets a MeanLifetime, every connection a watch opens lasts
// a lifetime drawn from one distribution and is then opened again, and a
// one-shot send is made the same way: the connection opens as a watch's
// does (a token, the subscription, a read of the room's log), sends cover
// at the configured rate for a lifetime drawn from the same distribution,
// carries the message at a uniformly drawn moment of it (where a cover
// frame would be), and closes when the lifetime is over. The send returns
// then, so it takes up to four mean lifetimes; a send handed to a running
// watch (handoff.go) returns at once.

// oneShot is the state of a one-shot send's watch. Only the watch's
// goroutine touches it, and the send's goroutine before it closes its
// done channel.
type oneShot struct {
	room, text string
	sent       bool // the send was started (on the connection that ends the watch)
	seq        uint64
	err        error
}

// sendAsCover sends text to the room on a connection of a watch's shape.
// ok is false when cover or connection lifetimes are off: the caller sends
// it the short way.
func (s *Seat) sendAsCover(ctx context.Context, name, text string) (seq uint64, ok bool, err error) {
	if s.cfg.Cover.Disabled || s.cfg.Cover.MeanLifetime <= 0 {
		return 0, false, nil
	}
	ch, err := s.roomChannel(ctx, name)
	if err != nil {
		return 0, true, err
	}
	if _, watched := s.watchConn(ch); watched {
		return 0, false, nil // a watch in this process sends it
	}
	one := &oneShot{room: name, text: text}
	// A stuck relay must not hold the send for ever: four mean
	// lifetimes are the longest a connection lasts, the rest is for
	// reconnecting.
	ctx, cancel := context.WithTimeout(ctx, 10*s.cfg.Cover.MeanLifetime+time.Minute)
	defer cancel()
	err = s.WatchWith(ctx, []string{name}, WatchOptions{oneShot: one})
	switch {
	case one.err != nil:
		return 0, true, one.err
	case err != nil:
		return 0, true, err
	case !one.sent && ctx.Err() != nil:
		return 0, true, ctx.Err()
	case !one.sent:
		return 0, true, errWatchStopping
	}
	return one.seq, true, nil
}
