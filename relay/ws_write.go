package relay

import (
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// push queues a frame; the frame is shared and must not be modified. A full
// queue disconnects the connection as a slow consumer, without blocking.
func (c *conn) push(f []byte) { c.enqueue(f, false, nil) }

// pushLent is push for a frame holding a reference to its lent buffer pb
// (nil for none), which the queue gives back once the frame is written or
// dropped.
func (c *conn) pushLent(f []byte, pb *backend.PushBuf) { c.enqueue(f, false, pb) }

// pushAnswer queues the answer to a request that holds one of c.slots; the
// slot is freed once the answer is written to the socket (or dropped), so
// answers never hold more than half the send queue.
func (c *conn) pushAnswer(f []byte) {
	c.srv.counters.publishAnswered(f)
	c.enqueue(f, true, nil)
}

func (c *conn) enqueue(f []byte, slot bool, pb *backend.PushBuf) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		pb.Release()
		if slot {
			<-c.slots
		}
		return
	}
	if len(c.q) >= c.srv.cfg.SendQueue || len(c.q) > 0 && c.overBytes(len(f)) {
		c.closing = true
		c.closeCode = websocket.StatusTryAgainLater
		c.closeReason = "slow consumer: send queue full"
		c.dropLocked()
		start := c.startWriterLocked()
		c.mu.Unlock()
		pb.Release()
		if slot {
			<-c.slots
		}
		c.srv.counters.slow.Add(1)
		c.srv.log.Info("relay: slow consumer disconnected", "remote", c.remote, "sub", c.sub)
		if start {
			go c.writer()
		}
		return
	}
	c.q = append(c.q, f)
	c.qBufs = append(c.qBufs, pb)
	c.qBytes += len(f)
	if len(f) > readLimit {
		c.qLarge += len(f)
	}
	if slot {
		c.qSlots++
	}
	start := c.startWriterLocked()
	c.mu.Unlock()
	if start {
		go c.writer()
	}
}

// overBytes reports whether a frame of n bytes would take the queue past
// its byte bounds: MaxQueueBytes for the frames up to readLimit, and
// MaxQueueBytes plus one largest handshake push frame for all of them,
// so that a large commit finds room on a healthy subscriber's queue.
// c.mu is held.
func (c *conn) overBytes(n int) bool {
	limit := c.srv.cfg.MaxQueueBytes
	if c.qBytes+n > limit+int(c.srv.largeReadLimit) {
		return true
	}
	return n <= readLimit && c.qBytes-c.qLarge+n > limit
}

// dropLocked discards the queue, freeing the slots its answers held.
func (c *conn) dropLocked() {
	c.q, c.qBytes, c.qLarge = nil, 0, 0
	releaseBufs(c.qBufs)
	c.qBufs = nil
	c.releaseSlots(c.qSlots)
	c.qSlots = 0
}

// releaseBufs gives back the references of a queue's lent buffers.
func releaseBufs(bufs []*backend.PushBuf) {
	for i, pb := range bufs {
		pb.Release()
		bufs[i] = nil
	}
}

func (c *conn) releaseSlots(n int) {
	for range n {
		<-c.slots
	}
}

// startWriterLocked reports whether the caller must start the writer
// (go c.writer()) once it has let go of c.mu: when none runs, none has
// ended for good, and the upgrade has given the socket (before that,
// handleWS starts it if the socket is closing by then). c.mu is held.
func (c *conn) startWriterLocked() bool {
	if c.writing || c.wroteAll || c.cc == nil {
		return false
	}
	c.writing = true
	return true
}

// writeLoop writes what is queued until it finds the queue empty, and
// ends then; or, once the socket is closing, sends the final frame and
// the close frame and ends for good.
func (c *conn) writeLoop() {
	for {
		c.mu.Lock()
		batch, bufs, slots := c.q, c.qBufs, c.qSlots
		closing, code, reason, final := c.closing, c.closeCode, c.closeReason, c.final
		if len(batch) == 0 && !closing {
			// Nothing left: the next frame queued starts a writer again.
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.q, c.qBytes, c.qLarge, c.qSlots = c.spare[:0], 0, 0, 0
		c.qBufs = c.spareBufs[:0]
		c.spare, c.spareBufs = nil, nil
		c.mu.Unlock()

		if len(batch) > 0 {
			err := c.writeBatch(batch)
			c.releaseSlots(slots)
			// writeBatch copied the frames out: their lent buffers
			// may go back.
			releaseBufs(bufs)
			clear(batch)
			c.mu.Lock()
			if cap(batch) <= 4*c.srv.cfg.SendQueue {
				c.spare, c.spareBufs = batch[:0], bufs[:0]
			}
			c.mu.Unlock()
			if err != nil {
				c.endWriter()
				c.closeWith(websocket.StatusInternalError, "write failed", nil, true)
				c.ws.CloseNow()
				return
			}
		}
		if closing {
			if final != nil {
				c.writeBatch([][]byte{final})
			}
			c.ws.Close(code, reason)
			c.endWriter()
			return
		}
	}
}

// endWriter marks the writer ended for good: no writer starts again, and
// whoever waits on c.wrote goes on.
func (c *conn) endWriter() {
	c.mu.Lock()
	c.writing, c.wroteAll = false, true
	c.mu.Unlock()
	close(c.wrote)
}

// writeBatch writes frames as WebSocket text messages with one socket
// write (or one per flushAt bytes): one message per frame, or, for a
// client that asked for batches, as many frames per message as fit
// maxBatchBytes.
func (c *conn) writeBatch(frames [][]byte) error {
	return c.cc.writeFrames(frames, c.batch.Load())
}

// frameConn is the server side of a WebSocket connection. The library
// writes its control frames (pong, close) through Write, each frame in one
// call (they fit its 512-byte buffer); the relay's writer goroutine frames
// its text messages itself in writeFrames and sends all that are queued
// with one write, instead of one write per message. The mutex keeps the
// two from interleaving, and every socket write has a deadline.
type frameConn struct {
	net.Conn
	mu sync.Mutex // serializes writes
}

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// flushAt bounds how much one socket write carries.
const flushAt = 256 << 10

func (c *frameConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeRaw(p)
}

func (c *frameConn) writeRaw(p []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.Conn.Write(p)
}

// maxBatchBytes bounds one coalesced message: frames are packed into it
// while the next one still fits (a frame larger than the bound goes
// alone). The writer never waits for more frames, so a batch is whatever
// was queued when it woke.
const maxBatchBytes = 64 << 10

// writeFrames sends the frames as unmasked, final text messages (RFC 6455
// §5.2): each frame its own message, or with pack as few messages as
// maxBatchBytes allows, the frames of one message separated by "\n".
// Frames are JSON objects without a raw newline, so a client splits a
// message at each one.
func (c *frameConn) writeFrames(msgs [][]byte, pack bool) error {
	bp := framePool.Get().(*[]byte)
	b := (*bp)[:0]
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for i := 0; i < len(msgs); {
		j, n := i+1, len(msgs[i])
		if pack {
			for j < len(msgs) && n+1+len(msgs[j]) <= maxBatchBytes {
				n += 1 + len(msgs[j])
				j++
			}
		}
		switch {
		case n < 126:
			b = append(b, 0x81, byte(n))
		case n <= 0xffff:
			b = append(b, 0x81, 126, byte(n>>8), byte(n))
		default:
			b = append(b, 0x81, 127)
			b = binary.BigEndian.AppendUint64(b, uint64(n))
		}
		b = append(b, msgs[i]...)
		for _, m := range msgs[i+1 : j] {
			b = append(b, '\n')
			b = append(b, m...)
		}
		i = j
		if len(b) >= flushAt {
			if _, err = c.writeRaw(b); err != nil {
				break
			}
			b = b[:0]
		}
	}
	if err == nil && len(b) > 0 {
		_, err = c.writeRaw(b)
	}
	if cap(b) <= 1<<20 {
		*bp = b[:0]
		framePool.Put(bp)
	}
	return err
}

// ID is the connection's id (backend.Conn).
func (c *conn) ID() uint64 { return c.id }

// Answer sends the answer to one of the connection's publishes and ends
// it (backend.Conn). It is queued before pending drops, so a reply the
// reader sends directly can never overtake it.
func (c *conn) Answer(f []byte) {
	c.pushAnswer(f)
	c.pending.Add(-1)
}
