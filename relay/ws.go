package relay

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/internal/jwt"
)

// Limits of the WebSocket protocol (docs/API.md lists them for clients).
const (
	// MaxPayload is the largest decoded publish payload, inclusive, of
	// everything but MLS handshake messages.
	MaxPayload = 1 << 20
	// MaxHandshakePayload is the largest decoded payload, inclusive, of an
	// MLS handshake message: a payload whose cleartext header (the first
	// bytes, see classify) makes it a PublicMessage or PrivateMessage with
	// content type commit or proposal, or a Welcome. A commit over a
	// sparse ratchet tree grows with the group (in the X-Wing suite it
	// passes 1 MiB at about 885 members and is 11.7 MB at 10,000), so
	// handshakes get this larger cap; every other payload keeps
	// MaxPayload. A frame over the 1 MiB limit is read on only within
	// Config.LargeFrameBudget. On JetStream the cap is lower when the NATS
	// servers' max_payload admits less.
	MaxHandshakePayload = 16 << 20
	// MaxFrame is the largest WebSocket message the relay accepts from a
	// client or sends to one: the publish or push frame of a
	// MaxHandshakePayload handshake (its base64 and the JSON around it).
	// A client sets its read limit to it to receive every handshake.
	MaxFrame = (MaxHandshakePayload+2)/3*4 + 4096
	// MaxSubscriptions is the number of channels one connection may join.
	MaxSubscriptions = 50

	// readLimit caps one client frame once the socket has authenticated:
	// the base64 of a MaxPayload payload plus room for the JSON around it
	// (type, a 256-byte channel name). Before that the cap is
	// Config.PreAuthReadLimit.
	readLimit = (MaxPayload+2)/3*4 + 4096

	// frameSlack is room a large frame's buffer keeps after the frame, for
	// the push frame's tail built in place (pushSuffix).
	frameSlack = 256

	// maxInflightBytes bounds the payload bytes held between the readers
	// and the archive; a publisher past it waits.
	maxInflightBytes = 64 << 20

	// writeTimeout bounds one socket write; a peer that accepts nothing for
	// this long is cut off.
	writeTimeout = 10 * time.Second
)

// frameLimit is the largest client frame publishing an n-byte payload:
// its base64 plus room for the JSON around it.
func frameLimit(n int) int64 { return int64(base64.StdEncoding.EncodedLen(n)) + 4096 }

// largeFrameWeight is what a frame publishing an n-byte handshake holds
// of the large-frame budget while it is read and decoded: its buffer and
// the decoded payload.
func largeFrameWeight(n int) int64 { return frameLimit(n) + frameSlack + int64(n) }

// conn is one WebSocket client. Its reader goroutine handles frames in
// order; its writer goroutine drains the bounded send queue, writing every
// frame queued since its last wakeup with a single socket write.
type conn struct {
	srv    *Server
	id     uint64 // unique in the process; names the publisher to the other relays of a cluster
	ws     *websocket.Conn
	cc     *frameConn
	remote string

	authed atomic.Bool
	// batch is set at authentication when the client asked for coalesced
	// pushes: the writer then packs queued frames into one message.
	batch atomic.Bool
	sub   string // set once at authentication, before the conn is findable by subject
	payer string // who the archive charges for the conn's publishes (budget.go); set with sub
	scope string // the token's chan claim, "" for an unscoped token
	dev   string // the token's dev claim: the linked device it was minted for, or ""

	// adm is the conn's seat in the relay's admission (admission.go),
	// guarded by the admission's mutex; active is when it last had
	// traffic, a publish or a delivery (Unix nanoseconds).
	adm    admTicket
	active atomic.Int64

	pingMu      sync.Mutex // guards pingTimer and pingStopped
	pingTimer   *time.Timer
	pingStopped bool

	// exp is when the token in force expires (Unix nanoseconds); expTimer
	// closes the socket then unless a fresh auth frame moved exp.
	exp      atomic.Int64
	expMu    sync.Mutex // guards expTimer
	expTimer *time.Timer

	// subs is owned by the reader goroutine: the channels this conn is
	// subscribed to, each true when its account is known as a member (so
	// publishes there skip the membership check). memGen is the
	// Server.memGen it last synced subs with.
	subs   map[string]bool
	memGen uint64
	// lastPub is the channel of the conn's last publish, kept so that a
	// run of publishes to one channel (the usual case) shares one string.
	// Reader goroutine only.
	lastPub string

	// pending counts requests of this conn queued in the archive writer.
	// While it is non-zero, replies go through the writer too, so replies
	// and acks leave in the order the frames arrived.
	pending atomic.Int64
	slots   chan struct{} // one per request in the archive; bounds pending

	wake chan struct{} // capacity 1

	// rbuf is the frame being handled when it is over readLimit: its
	// buffer is not reused, so publish builds the push frame in it.
	// Reader goroutine only.
	rbuf []byte

	mu          sync.Mutex // guards the following fields
	q           [][]byte
	qBufs       []*pushBuf // per frame in q: its lent buffer, or nil
	spareBufs   []*pushBuf
	qBytes      int // bytes in q
	qLarge      int // bytes in q of frames over readLimit
	qSlots      int // answers in q holding a slot
	spare       [][]byte
	closing     bool
	closeCode   websocket.StatusCode
	closeReason string
	final       []byte      // sent before the close frame
	linger      *time.Timer // cuts an evicted socket's close handshake short
}

// push queues a frame; the frame is shared and must not be modified. A full
// queue disconnects the connection as a slow consumer, without blocking.
func (c *conn) push(f []byte) { c.enqueue(f, false, nil) }

// pushLent is push for a frame holding a reference to its lent buffer pb
// (nil for none), which the queue gives back once the frame is written or
// dropped.
func (c *conn) pushLent(f []byte, pb *pushBuf) { c.enqueue(f, false, pb) }

// pushAnswer queues the answer to a request that holds one of c.slots; the
// slot is freed once the answer is written to the socket (or dropped), so
// answers never hold more than half the send queue.
func (c *conn) pushAnswer(f []byte) {
	c.srv.counters.publishAnswered(f)
	c.enqueue(f, true, nil)
}

func (c *conn) enqueue(f []byte, slot bool, pb *pushBuf) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		pb.release()
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
		c.mu.Unlock()
		pb.release()
		if slot {
			<-c.slots
		}
		c.srv.counters.slow.Add(1)
		c.srv.log.Info("relay: slow consumer disconnected", "remote", c.remote, "sub", c.sub)
		c.signal()
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
	first := len(c.q) == 1
	c.mu.Unlock()
	if first {
		c.signal()
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
func releaseBufs(bufs []*pushBuf) {
	for i, pb := range bufs {
		pb.release()
		bufs[i] = nil
	}
}

func (c *conn) releaseSlots(n int) {
	for range n {
		<-c.slots
	}
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// closeWith starts closing the connection: final (if any) is sent, then a
// close frame with code and reason. With drop, frames still queued are
// discarded instead of sent first.
func (c *conn) closeWith(code websocket.StatusCode, reason string, final []byte, drop bool) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.closeCode = code
	c.closeReason = reason
	c.final = final
	if drop {
		c.dropLocked()
	}
	c.mu.Unlock()
	c.signal()
}

func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// reply sends a reply frame in order with the acks of earlier publishes.
func (c *conn) reply(f []byte) {
	if c.pending.Load() > 0 {
		c.slots <- struct{}{}
		c.pending.Add(1)
		c.srv.arch.submit(&pubReq{c: c, reply: f})
		return
	}
	c.push(f)
}

func (c *conn) writeLoop() {
	for range c.wake {
		c.mu.Lock()
		batch, bufs, slots := c.q, c.qBufs, c.qSlots
		c.q, c.qBytes, c.qLarge, c.qSlots = c.spare[:0], 0, 0, 0
		c.qBufs = c.spareBufs[:0]
		c.spare, c.spareBufs = nil, nil
		closing, code, reason, final := c.closing, c.closeCode, c.closeReason, c.final
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
			return
		}
	}
}

// writeBatch writes frames as WebSocket text messages with one socket
// write (or one per flushAt bytes): one message per frame, or, for a
// client that asked for batches, as many frames per message as fit
// maxBatchBytes.
func (c *conn) writeBatch(frames [][]byte) error {
	return c.cc.writeFrames(frames, c.batch.Load())
}

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
			errorFrame("payload_too_large", "a frame over 1 MiB must publish an MLS commit, proposal or Welcome"), true)
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

// fail replies with an error frame and keeps the connection open.
func (c *conn) fail(code, message string) {
	c.reply(errorFrame(code, message))
}

// refuseUnauthenticated closes a connection whose first frame is not an
// auth frame.
func (c *conn) refuseUnauthenticated() {
	c.closeWith(websocket.StatusPolicyViolation, "authentication required",
		errorFrame("auth_required", "the first frame must be an auth frame"), true)
}

// handle processes one text frame; false ends the connection.
func (c *conn) handle(b []byte, pathChannel string) bool {
	var f frame
	var err error
	if len(b) > readLimit {
		// A frame this large was let in as a handshake publish; it is
		// decoded in place, never copied by encoding/json.
		var ok bool
		if f, ok = decodeFlat(b); !ok || string(f.Type) != "publish" {
			c.fail("bad_frame", "a frame over 1 MiB must be a publish frame: a flat JSON object of strings without escapes, each key once")
			return true
		}
	} else {
		f, err = decodeFrame(b)
	}
	if err != nil {
		if !c.authed.Load() {
			c.refuseUnauthenticated()
			return false
		}
		c.fail("bad_frame", "frame is not a JSON object of string fields, each key once and spelled exactly")
		return true
	}
	typ := string(f.Type)
	if !c.authed.Load() {
		if typ != "auth" {
			c.refuseUnauthenticated()
			return false
		}
		return c.authenticate(string(f.Token), f.Batch, pathChannel)
	}
	if c.srv.cfg.Now().UnixNano() >= c.exp.Load() {
		c.expire()
		return false
	}
	c.syncMembership()
	switch typ {
	case "auth":
		return c.reauthenticate(string(f.Token))
	case "subscribe":
		c.subscribe(string(f.Channel))
	case "unsubscribe":
		c.unsubscribe(string(f.Channel))
	case "publish":
		ch := f.Channel
		if len(ch) == 0 && pathChannel != "" {
			ch = []byte(pathChannel) // the path's channel is the default
		}
		c.publish(ch, f.Payload, f.ID)
	case "":
		c.fail("bad_frame", "frame has no type")
	default:
		c.fail("unknown_type", "unknown frame type")
	}
	return true
}

func (c *conn) authenticate(token string, batch bool, pathChannel string) bool {
	s := c.srv
	claims, err := jwt.Verify(s.cfg.JWTSecret, token, s.cfg.Now(), jwt.AudienceAPI, jwt.AudienceRelay)
	if err != nil {
		s.log.Info("relay: authentication failed", "remote", c.remote)
		c.closeWith(websocket.StatusPolicyViolation, "authentication failed",
			errorFrame("unauthorized", "invalid or expired token"), true)
		return false
	}
	if pathChannel != "" && claims.Channel != "" && claims.Channel != pathChannel {
		s.log.Info("relay: token scoped to another channel", "remote", c.remote, "sub", claims.Subject)
		c.closeWith(websocket.StatusPolicyViolation, "forbidden",
			errorFrame("forbidden", "token is scoped to another channel"), true)
		return false
	}
	c.sub = claims.Subject
	c.payer = payerOf(claims)
	c.scope = claims.Channel
	c.dev = claims.Device
	// Register for revocation before checking it, so a concurrent
	// revocation either sees this conn or is seen here.
	if !s.hub.authenticated(c, s.cfg.MaxConnsPerAccount) {
		s.counters.refused.Add(1)
		s.log.Info("relay: too many connections for one account", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusTryAgainLater, "too many connections",
			errorFrame("too_many_connections", "this account has too many open connections; close one and retry"), true)
		return false
	}
	victim, ok := s.adm.loggedIn(c)
	if !ok {
		return false // its login seat went to a newer socket
	}
	if victim != nil {
		victim.evictIdle()
	}
	c.authed.Store(true)
	c.startPings()
	// readLoop holds frames to readLimit itself, and reads a handshake
	// past it within the large-frame budget, up to the archive's cap; the
	// library's limit is that of the largest handshake.
	c.ws.SetReadLimit(MaxFrame)
	if s.isRevokedClaims(c.sub, c.dev) {
		s.log.Info("relay: revoked subject refused", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusPolicyViolation, "forbidden",
			errorFrame("forbidden", "subject is revoked"), true)
		return false
	}
	c.memGen = s.memGen.Load()
	c.batch.Store(batch)
	c.setExpiry(claims.ExpiresAt)
	joined := pathChannel == "" || c.join(pathChannel)
	s.log.Info("relay: authenticated", "remote", c.remote, "sub", c.sub)
	c.push(okFrame("authenticated"))
	if !joined {
		c.push(notMemberFrame(pathChannel))
	}
	return true
}

// reauthenticate handles an auth frame on an authenticated socket: a fresh
// token for the same subject and scope moves the socket's expiry. A token
// that does not verify is refused and the one in force stays; a token for
// another subject or scope closes the socket.
func (c *conn) reauthenticate(token string) bool {
	s := c.srv
	claims, err := jwt.Verify(s.cfg.JWTSecret, token, s.cfg.Now(), jwt.AudienceAPI, jwt.AudienceRelay)
	if err != nil {
		c.fail("unauthorized", "invalid or expired token; the current one stays in force until it expires")
		return true
	}
	if claims.Subject != c.sub || claims.Channel != c.scope || claims.Device != c.dev {
		s.log.Info("relay: reauthentication as another subject or scope", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusPolicyViolation, "reauthentication changed the subject or scope",
			errorFrame("forbidden", "a fresh token must have the same subject and channel scope as the first"), false)
		return false
	}
	if s.isRevokedClaims(c.sub, c.dev) {
		c.closeWith(websocket.StatusPolicyViolation, "forbidden", errorFrame("forbidden", "subject is revoked"), true)
		return false
	}
	c.setExpiry(claims.ExpiresAt)
	c.reply(okFrame("reauthenticated"))
	return true
}

// setExpiry makes exp the moment the socket closes unless reauthenticated.
func (c *conn) setExpiry(exp time.Time) {
	c.exp.Store(exp.UnixNano())
	d := exp.Sub(c.srv.cfg.Now())
	c.expMu.Lock()
	defer c.expMu.Unlock()
	if c.expTimer == nil {
		c.expTimer = time.AfterFunc(d, c.checkExpiry)
	} else {
		c.expTimer.Reset(d)
	}
}

// checkExpiry runs on the expiry timer; a token renewed meanwhile moves
// the timer instead.
func (c *conn) checkExpiry() {
	left := time.Unix(0, c.exp.Load()).Sub(c.srv.cfg.Now())
	if left > 0 {
		c.expMu.Lock()
		c.expTimer.Reset(left)
		c.expMu.Unlock()
		return
	}
	c.expire()
}

func (c *conn) stopExpiry() {
	c.expMu.Lock()
	defer c.expMu.Unlock()
	if c.expTimer != nil {
		c.expTimer.Stop()
	}
}

// expire closes a socket whose token has expired, after the frames
// already queued for it.
func (c *conn) expire() {
	if c.isClosing() {
		return
	}
	c.srv.log.Info("relay: token expired, closing", "remote", c.remote, "sub", c.sub)
	c.closeWith(websocket.StatusPolicyViolation, "token expired",
		errorFrame("token_expired", "the token expired; send a fresh auth frame before exp to stay connected"), false)
}

func notMemberFrame(ch string) []byte {
	return channelErrorFrame("not_a_member", ch, "this account is not a member of "+ch)
}

// join subscribes c to ch if its account may read ch, and reports whether
// it did.
func (c *conn) join(ch string) bool {
	s := c.srv
	if s.readsGated() && !s.checkMember(context.Background(), ch, c.sub) {
		return false
	}
	if !s.hub.subscribeIf(ch, c, func() bool { return !s.readsGated() || s.isMember(ch, c.sub) }) {
		return false
	}
	c.subs[ch] = !s.gated() || s.isMember(ch, c.sub)
	return true
}

// checkChannel validates a channel name against the name rules and the
// token's scope, replying with an error frame when it fails.
func (c *conn) checkChannel(name string) bool {
	if err := channel.Valid(name); err != nil {
		c.fail("invalid_channel", "channel must be org/namespace/service: "+err.Error())
		return false
	}
	if c.scope != "" && c.scope != name {
		c.fail("forbidden", "token is scoped to another channel")
		return false
	}
	return true
}

func (c *conn) subscribe(name string) {
	if !c.checkChannel(name) {
		return
	}
	if _, ok := c.subs[name]; !ok {
		if len(c.subs) >= MaxSubscriptions {
			c.fail("too_many_subscriptions", "at most 50 channels per connection")
			return
		}
		if !c.join(name) {
			c.reply(notMemberFrame(name))
			return
		}
	}
	c.reply(okFrame("subscribed to " + name))
}

func (c *conn) unsubscribe(name string) {
	if !c.checkChannel(name) {
		return
	}
	if _, ok := c.subs[name]; !ok {
		c.fail("not_subscribed", "not subscribed to "+name)
		return
	}
	delete(c.subs, name)
	c.srv.hub.unsubscribe(name, c)
	c.reply(okFrame("unsubscribed from " + name))
}

func (c *conn) publish(name, b64, id []byte) {
	member, ok := c.subs[string(name)]
	if !ok {
		if c.checkChannel(string(name)) {
			if !c.srv.checkMember(context.Background(), string(name), c.sub) {
				c.reply(notMemberFrame(string(name)))
			} else {
				c.fail("not_subscribed", "subscribe to the channel before publishing to it")
			}
		}
		return
	}
	if !member {
		// Subscribed with open reads, or before a removal elsewhere
		// made the reader recheck: publishing needs membership.
		if !c.srv.checkMember(context.Background(), string(name), c.sub) {
			c.reply(notMemberFrame(string(name)))
			return
		}
		c.subs[string(name)] = true
	}
	if len(b64) == 0 {
		c.fail("bad_payload", "payload is empty")
		return
	}
	if len(id) > MaxPublishID {
		c.fail("bad_id", "id is over 64 bytes")
		return
	}
	s := c.srv
	if len(b64) > base64.StdEncoding.EncodedLen(s.maxHandshake) {
		c.fail("payload_too_large", handshakeTooLarge(s.maxHandshake))
		return
	}
	// The payload's size is bounded by the frame: a frame over readLimit
	// holds the large-frame budget, which counts this buffer.
	payload := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Strict().Decode(payload, b64)
	// Rejecting anything but canonical base64 (no line breaks) lets the
	// push frame carry the client's encoding unchanged.
	if err != nil || base64.StdEncoding.EncodedLen(n) != len(b64) {
		c.fail("bad_payload", "payload is not standard padded base64")
		return
	}
	payload = payload[:n]
	hdr := classify(payload)
	if hdr.entryType == EntryApp && n > MaxPayload {
		c.fail("payload_too_large", "payload is over 1 MiB decoded")
		return
	}
	if n > s.maxHandshake {
		c.fail("payload_too_large", handshakeTooLarge(s.maxHandshake))
		return
	}
	ch := c.lastPub
	if string(name) != ch {
		ch = string(name)
		c.lastPub = ch
	}
	c.touch(time.Now().UnixNano())
	f, pb := c.pushFrame(ch, b64, s.lendFrames)
	c.slots <- struct{}{}
	c.pending.Add(1)
	s.counters.publishedBytes.Add(uint64(n))
	s.arch.acquire(int64(len(payload)))
	r := &pubReq{c: c, sub: c.payer, channel: ch, payload: payload, hdr: hdr, frame: f, buf: pb, weight: int64(len(payload))}
	if len(id) > 0 {
		r.id = dedupKey(c.sub, ch, string(id))
	}
	s.arch.submit(r)
}

func handshakeTooLarge(max int) string {
	return "handshake payload is over " + strconv.Itoa(max) + " bytes decoded"
}

// pushFrame starts the push frame of a publish: everything up to and
// including the payload's base64 b64. For a frame over readLimit (c.rbuf),
// whose buffer is not reused, it is built in that buffer over the
// publish frame's own head when that is long enough ({"type":"publish",
// "channel":… before the payload is exactly as long as the push frame's
// head), so a large handshake is held once as base64, not twice.
func (c *conn) pushFrame(ch string, b64 []byte, lend bool) ([]byte, *pushBuf) {
	if b := c.rbuf; b != nil && len(b64) > 0 {
		off := cap(b) - cap(b64)
		head := pushPrefix(ch, 0)
		if off >= len(head) && off+len(b64) <= len(b) && &b[off] == &b64[0] {
			start := off - len(head)
			copy(b[start:off], head)
			return b[start : off+len(b64)], nil
		}
	}
	if lend {
		f, pb := lendPushPrefix(ch, len(b64))
		return append(f, b64...), pb
	}
	return append(pushPrefix(ch, len(b64)), b64...), nil
}

// connIDs numbers the conns of the process.
var connIDs atomic.Uint64

// handleWS serves /ws and /ws/{org}/{ns}/{svc}.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	var pathChannel string
	if org := r.PathValue("org"); org != "" {
		pathChannel = org + "/" + r.PathValue("ns") + "/" + r.PathValue("svc")
		if err := channel.Valid(pathChannel); err != nil {
			s.logRequest(r, http.StatusBadRequest)
			writeError(w, http.StatusBadRequest, "invalid_channel", "channel must be org/namespace/service")
			return
		}
	}
	c := &conn{
		srv:    s,
		id:     connIDs.Add(1),
		remote: r.RemoteAddr,
		subs:   make(map[string]bool),
		wake:   make(chan struct{}, 1),
		// At most half the send queue may be waiting for archive answers,
		// so a commit's burst of acks always fits the queue.
		slots: make(chan struct{}, max(1, s.cfg.SendQueue/2)),
	}
	c.adm.keys = s.clientKeys(r)
	victim, refused := s.adm.admit(c)
	if refused != "" {
		s.counters.admissionRefused(refused)
		s.log.Info("relay: too many sockets from one client address or network", "remote", r.RemoteAddr, "client", c.adm.keys.Addr, "share", refused)
		s.logRequest(r, http.StatusTooManyRequests)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "rate_limited", refusedMessage[refused])
		return
	}
	if victim != nil {
		victim.evictLogin()
	}
	hw := &hijackWriter{ResponseWriter: w}
	ws, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		// Authentication is a token in the first frame, never an ambient
		// credential such as a cookie, so cross-origin pages gain nothing.
		InsecureSkipVerify: true,
		// Ciphertext does not compress.
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		s.adm.leave(c)
		s.log.Info("relay: websocket upgrade failed", "remote", r.RemoteAddr)
		if hw.failed != 0 {
			writeError(w, hw.failed, "bad_handshake", "not a valid WebSocket handshake")
		}
		return
	}
	ws.SetReadLimit(s.cfg.PreAuthReadLimit)
	c.mu.Lock() // an eviction's linger timer may read cc
	c.ws, c.cc = ws, hw.cc
	c.mu.Unlock()
	// client is the address admission counts: the remote one, or behind
	// a trusted proxy the one it forwards for.
	s.log.Info("relay: connection opened", "remote", c.remote, "client", c.adm.keys.Addr, "path", s.logPath(r))
	s.hub.register(c)
	if s.gate.Closed() {
		c.closeWith(websocket.StatusGoingAway, "relay shutting down", nil, true)
	}
	timer := time.AfterFunc(s.cfg.AuthTimeout, func() {
		if !c.authed.Load() {
			s.log.Info("relay: authentication timeout", "remote", c.remote)
			c.closeWith(websocket.StatusPolicyViolation, "authentication timeout",
				errorFrame("auth_timeout", "no auth frame within the time limit"), true)
		}
	})
	var wg sync.WaitGroup
	wg.Go(c.writeLoop)
	c.readLoop(pathChannel)
	timer.Stop()
	c.stopExpiry()
	c.stopPings()
	s.adm.leave(c)
	c.closeWith(websocket.StatusNormalClosure, "", nil, false)
	wg.Wait()
	c.stopLinger()
	c.ws.CloseNow()
	s.hub.remove(c, c.subs)
	s.log.Info("relay: connection ended", "remote", c.remote, "sub", c.sub)
}

// refusedMessage explains each share a socket can be refused for.
var refusedMessage = map[string]string{
	"address_login": "too many sockets from this address waiting to authenticate; retry later",
	"network_login": "too many sockets from this network waiting to authenticate; retry later",
	"address":       "too many sockets from this address; close one and retry",
	"network":       "too many sockets from this network; close one and retry",
}

// hijackWriter hands the WebSocket library a frameConn, so the relay can
// write its data frames itself, many per socket write. It also holds back
// the library's plain-text answer to a bad handshake, so handleWS can
// answer in the JSON error shape instead.
type hijackWriter struct {
	http.ResponseWriter
	cc     *frameConn
	failed int // the status of a refused handshake
}

func (h *hijackWriter) WriteHeader(code int) {
	if code >= 400 {
		h.failed = code
		return
	}
	h.ResponseWriter.WriteHeader(code)
}

func (h *hijackWriter) Write(b []byte) (int, error) {
	if h.failed != 0 {
		return len(b), nil
	}
	return h.ResponseWriter.Write(b)
}

func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		nc.Close()
		return nil, nil, err
	}
	h.cc = &frameConn{Conn: nc}
	return h.cc, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(h.cc, 512)), nil
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
