package seat

import (
	"context"
	"errors"
	"time"
)

// Publishes on a watch's connection.
//
// While a watch runs in this process, what the process publishes on the
// rooms the watch follows (messages, commits, proposals, Welcomes) leaves
// on the watch's long-lived connection, among its cover, not on a
// connection of its own; so does a push of the log, on the sync channel,
// which the watch's connection subscribes to at its first push. With the
// handoff (handoff.go), the same holds for what other processes of the
// home publish while a watch of it runs.

// watchPublishWait bounds the wait for the relay's answer on a watch's
// connection. A publish made under the room lock holds back the watch's
// loop, which waits for the same lock, and with it the connection's
// pushes; should they fill its queue, the answer behind them would never
// be read. An answer that does not come in time is asked for again, with
// the same publish id, on a connection of its own.
const watchPublishWait = time.Minute

// watchPub publishes on one channel: on a watch connection of this
// process when onWatch gives one, else on a publisher of its own.
type watchPub struct {
	ch      string
	onWatch func(context.Context) *Conn
	dial    func(context.Context) (*Publisher, error)
	own     *Publisher
}

// newWatchPub makes the publisher of ch. With no watch connection to use
// now, the connection of its own is opened at once, so that a failure to
// connect comes before anything is stored, as it always has.
func newWatchPub(ctx context.Context, ch string, onWatch func(context.Context) *Conn, dial func(context.Context) (*Publisher, error)) (*watchPub, error) {
	p := &watchPub{ch: ch, onWatch: onWatch, dial: dial}
	if onWatch(ctx) == nil {
		own, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		p.own = own
	}
	return p, nil
}

// Publish publishes payload on the publisher's channel and returns its
// seq. On a watch's connection that ended (its lifetime was over) or did
// not answer in time, it is asked for again with the same id on a
// connection of its own: the relay stores it once.
func (p *watchPub) Publish(ctx context.Context, ch string, payload []byte) (uint64, error) {
	id := newPublishID()
	if p.own == nil {
		if c := p.onWatch(ctx); c != nil {
			wctx, cancel := context.WithTimeout(ctx, watchPublishWait)
			seq, err := c.publishID(wctx, ch, payload, id)
			stalled := wctx.Err() != nil && ctx.Err() == nil
			cancel()
			var lost *lostAnswer
			var fe *FrameError
			switch {
			case err == nil:
				return seq, nil
			case errors.As(err, &lost), stalled:
			case !errors.As(err, &fe) && c.Err() != nil:
				// The connection had ended before the publish left.
			default:
				return 0, err // the relay's answer
			}
		}
		own, err := p.dial(ctx)
		if err != nil {
			return 0, err
		}
		p.own = own
	}
	return p.own.publishID(ctx, ch, payload, id)
}

// Close closes the connection of its own, if one was opened.
func (p *watchPub) Close() {
	if p.own != nil {
		p.own.Close()
	}
}

// roomPub is the publisher of the room channel ch: on the connection of
// a watch of ch in this process, else on a connection of its own.
func (s *Seat) roomPub(ctx context.Context, ch string) (*watchPub, error) {
	return newWatchPub(ctx, ch, func(context.Context) *Conn {
		c, _ := s.watchConn(ch)
		return c
	}, func(ctx context.Context) (*Publisher, error) { return s.roomPublisher(ctx, ch) })
}

// syncOnWatch returns a watch connection of this process subscribed to
// the sync channel ch (subscribing one at its first use), or nil when
// none runs or the relay refuses the subscription (too many on the
// connection): the push then goes out on a connection of its own.
func (s *Seat) syncOnWatch(ch string) func(context.Context) *Conn {
	return func(ctx context.Context) *Conn {
		s.mu.Lock()
		var c *Conn
		var subscribed bool
		for wc, subs := range s.watchSubs {
			c, subscribed = wc, subs[ch]
			if subscribed {
				break
			}
		}
		s.mu.Unlock()
		if c == nil || subscribed {
			return c
		}
		sctx, cancel := context.WithTimeout(ctx, watchPublishWait)
		err := c.Subscribe(sctx, ch)
		cancel()
		if err != nil {
			return nil
		}
		s.mu.Lock()
		if subs := s.watchSubs[c]; subs != nil {
			subs[ch] = true
		}
		s.mu.Unlock()
		return c
	}
}
