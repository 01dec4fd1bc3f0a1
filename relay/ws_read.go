package relay

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// readLoop reads and handles frames until the peer goes away or the
// connection is closing.
func (c *conn) readLoop(pathChannel string) {
	var buf []byte
	for {
		typ, r, err := c.ws.Reader(context.Background())
		if err != nil {
			c.logReadEnd(err)
			return
		}
		var eof bool
		buf, eof, err = readUpTo(r, buf[:0], readLimit+1)
		if err != nil {
			c.logReadEnd(err)
			return
		}
		var held int64
		if !eof {
			var ok bool
			if buf, held, ok = c.readLarge(r, buf); !ok {
				return
			}
			if buf == nil {
				continue // refused and discarded
			}
		}
		if c.isClosing() {
			c.releaseLarge(held)
			return
		}
		if typ != websocket.MessageText {
			c.releaseLarge(held)
			if !c.authed.Load() {
				// The first frame must be an auth frame, whatever its kind.
				c.refuseUnauthenticated()
				return
			}
			c.fail("binary_frame", "frames must be JSON text frames")
		} else {
			if held > 0 {
				c.rbuf = buf
			}
			ok := c.handle(buf, pathChannel)
			c.rbuf = nil
			c.releaseLarge(held)
			if !ok {
				return
			}
		}
		if cap(buf) > 64<<10 {
			buf = nil
		}
	}
}

func (c *conn) logReadEnd(err error) {
	switch {
	case websocket.CloseStatus(err) != -1:
		c.srv.log.Info("relay: connection closed by peer", "remote", c.remote, "sub", c.sub, "code", int(websocket.CloseStatus(err)))
	case errors.Is(err, websocket.ErrMessageTooBig):
		c.srv.log.Info("relay: frame over the read limit, closing", "remote", c.remote, "sub", c.sub)
	default:
		c.srv.log.Debug("relay: connection read ended", "remote", c.remote, "sub", c.sub)
	}
}

// readAll appends the whole message r reads to buf.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	buf, _, err := readUpTo(r, buf, math.MaxInt)
	return buf, err
}

// readUpTo appends the message r reads to buf until its end (eof true) or
// until buf holds limit bytes (eof false, the rest unread).
func readUpTo(r io.Reader, buf []byte, limit int) (_ []byte, eof bool, err error) {
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(cap(buf), 512), limit-len(buf)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// readLarge goes on reading a message that is over readLimit, whose first
// readLimit+1 bytes are in buf. Only a publish of an MLS handshake may be
// that large, and only within the relay's large-frame budget: anything
// else closes the socket (1009, as for any frame over the limit), and a
// handshake that finds no budget within LargeFrameWait is read on and
// discarded without being kept (buf nil), its publisher told busy. held
// is the budget the frame holds until it is handled; ok false ends the
// connection.
func (c *conn) readLarge(r io.Reader, buf []byte) (_ []byte, held int64, ok bool) {
	s := c.srv
	if !c.authed.Load() || s.maxHandshake <= MaxPayload || !peekHandshake(buf) {
		s.log.Info("relay: frame over the read limit, closing", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusMessageTooBig, "frame over the 1 MiB limit",
			backend.ErrorFrame("payload_too_large", "a frame over 1 MiB must publish an MLS commit, proposal or Welcome"), true)
		return nil, 0, false
	}
	ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.LargeFrameWait)
	s.counters.largeWaiting.Add(1)
	err := s.large.Acquire(ctx, s.largeWeight)
	s.counters.largeWaiting.Add(-1)
	cancel()
	if err != nil {
		s.counters.largeRefused.Add(1)
		s.log.Info("relay: no budget for a large handshake, discarding it", "remote", c.remote, "sub", c.sub)
		if _, err := io.Copy(io.Discard, r); err != nil {
			c.logReadEnd(err)
			return nil, 0, false
		}
		c.fail("busy", "the relay is reading too many large handshakes at once; publish again shortly")
		return nil, 0, true
	}
	held = s.largeWeight
	s.counters.largeHeld.Add(held)
	full := int(s.largeReadLimit) + frameSlack
	if len(buf) == cap(buf) {
		buf = slices.Grow(buf, min(cap(buf), full-len(buf)))
	}
	// The budget is held while the rest arrives; a socket that takes
	// longer than LargeFrameTimeout is closed, which ends the read.
	slow := time.AfterFunc(s.cfg.LargeFrameTimeout, func() {
		s.log.Info("relay: a large handshake took too long to arrive, closing", "remote", c.remote, "sub", c.sub)
		c.ws.CloseNow()
	})
	buf, eof, err := readUpTo(r, buf, full)
	slow.Stop()
	if err == nil && !eof {
		// Over the archive's cap (a NATS max_payload below 16 MiB) but
		// within MaxHandshakePayload, the library's limit: the rest is
		// read without being kept, and the publisher told the cap.
		c.releaseLarge(held)
		if _, err := io.Copy(io.Discard, r); err != nil {
			c.logReadEnd(err)
			return nil, 0, false
		}
		c.fail("payload_too_large", handshakeTooLarge(s.maxHandshake))
		return nil, 0, true
	}
	if err != nil {
		c.releaseLarge(held)
		c.logReadEnd(err)
		return nil, 0, false
	}
	if cap(buf)-len(buf) < frameSlack {
		buf = slices.Grow(buf, frameSlack)
	}
	return buf, held, true
}

// releaseLarge gives back what a large frame held of the budget.
func (c *conn) releaseLarge(held int64) {
	if held > 0 {
		c.srv.counters.largeHeld.Add(-held)
		c.srv.large.Release(held)
	}
}
