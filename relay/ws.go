package relay

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/internal/httpx"
	"github.com/skytale-oss/skytale/internal/jwt"
)

// Limits of the WebSocket protocol (the seeds' API reference and DESIGN.md).
const (
	// MaxPayload is the largest decoded publish payload, inclusive.
	MaxPayload = 1 << 20
	// MaxSubscriptions is the number of channels one connection may join.
	MaxSubscriptions = 50

	// readLimit caps one client frame once the socket has authenticated:
	// the base64 of a MaxPayload payload plus room for the JSON around it
	// (type, a 256-byte channel name). Before that the cap is
	// Config.PreAuthReadLimit.
	readLimit = (MaxPayload+2)/3*4 + 4096

	// maxInflightBytes bounds the payload bytes held between the readers
	// and the archive; a publisher past it waits.
	maxInflightBytes = 64 << 20

	// writeTimeout bounds one socket write; a peer that accepts nothing for
	// this long is cut off.
	writeTimeout = 10 * time.Second
)

var maxB64 = base64.StdEncoding.EncodedLen(MaxPayload)

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
	scope string // the token's chan claim, "" for an unscoped token

	// unauthAddr is the remote IP whose unauthenticated-socket slot this
	// conn holds, "" once released. Reader goroutine only.
	unauthAddr string
	holdsSlot  bool

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

	// pending counts requests of this conn queued in the archive writer.
	// While it is non-zero, replies go through the writer too, so replies
	// and acks leave in the order the frames arrived.
	pending atomic.Int64
	slots   chan struct{} // one per request in the archive; bounds pending

	wake chan struct{} // capacity 1

	mu          sync.Mutex // guards the following fields
	q           [][]byte
	qBytes      int // bytes in q
	qSlots      int // answers in q holding a slot
	spare       [][]byte
	closing     bool
	closeCode   websocket.StatusCode
	closeReason string
	final       []byte // sent before the close frame
}

// push queues a frame; the frame is shared and must not be modified. A full
// queue disconnects the connection as a slow consumer, without blocking.
func (c *conn) push(f []byte) { c.enqueue(f, false) }

// pushAnswer queues the answer to a request that holds one of c.slots; the
// slot is freed once the answer is written to the socket (or dropped), so
// answers never hold more than half the send queue.
func (c *conn) pushAnswer(f []byte) {
	c.srv.counters.publishAnswered(f)
	c.enqueue(f, true)
}

func (c *conn) enqueue(f []byte, slot bool) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		if slot {
			<-c.slots
		}
		return
	}
	if len(c.q) >= c.srv.cfg.SendQueue || c.qBytes+len(f) > c.srv.cfg.MaxQueueBytes && len(c.q) > 0 {
		c.closing = true
		c.closeCode = websocket.StatusTryAgainLater
		c.closeReason = "slow consumer: send queue full"
		c.dropLocked()
		c.mu.Unlock()
		if slot {
			<-c.slots
		}
		c.srv.counters.slow.Add(1)
		c.srv.log.Info("relay: slow consumer disconnected", "remote", c.remote, "sub", c.sub)
		c.signal()
		return
	}
	c.q = append(c.q, f)
	c.qBytes += len(f)
	if slot {
		c.qSlots++
	}
	first := len(c.q) == 1
	c.mu.Unlock()
	if first {
		c.signal()
	}
}

// dropLocked discards the queue, freeing the slots its answers held.
func (c *conn) dropLocked() {
	c.q, c.qBytes = nil, 0
	c.releaseSlots(c.qSlots)
	c.qSlots = 0
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
		batch, slots := c.q, c.qSlots
		c.q, c.qBytes, c.qSlots = c.spare[:0], 0, 0
		c.spare = nil
		closing, code, reason, final := c.closing, c.closeCode, c.closeReason, c.final
		c.mu.Unlock()

		if len(batch) > 0 {
			err := c.writeBatch(batch)
			c.releaseSlots(slots)
			clear(batch)
			c.mu.Lock()
			if cap(batch) <= 4*c.srv.cfg.SendQueue {
				c.spare = batch[:0]
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
		buf, err = readAll(r, buf[:0])
		if err != nil {
			c.logReadEnd(err)
			return
		}
		if c.isClosing() {
			return
		}
		if typ != websocket.MessageText {
			if !c.authed.Load() {
				// The first frame must be an auth frame, whatever its kind.
				c.refuseUnauthenticated()
				return
			}
			c.fail("binary_frame", "frames must be JSON text frames")
		} else if !c.handle(buf, pathChannel) {
			return
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

func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
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
	f, err := decodeFrame(b)
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
		c.publish(ch, f.Payload)
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
	c.scope = claims.Channel
	// Register for revocation before checking it, so a concurrent
	// revocation either sees this conn or is seen here.
	if !s.hub.authenticated(c, s.cfg.MaxConnsPerAccount) {
		s.counters.refused.Add(1)
		s.log.Info("relay: too many connections for one account", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusTryAgainLater, "too many connections",
			errorFrame("too_many_connections", "this account has too many open connections; close one and retry"), true)
		return false
	}
	c.authed.Store(true)
	c.releaseSlot()
	c.ws.SetReadLimit(readLimit)
	if s.isRevoked(c.sub) {
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
	if claims.Subject != c.sub || claims.Channel != c.scope {
		s.log.Info("relay: reauthentication as another subject or scope", "remote", c.remote, "sub", c.sub)
		c.closeWith(websocket.StatusPolicyViolation, "reauthentication changed the subject or scope",
			errorFrame("forbidden", "a fresh token must have the same subject and channel scope as the first"), false)
		return false
	}
	if s.isRevoked(c.sub) {
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

func (c *conn) publish(name, b64 []byte) {
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
	if len(b64) > maxB64 {
		c.fail("payload_too_large", "payload is over 1 MiB decoded")
		return
	}
	payload := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Strict().Decode(payload, b64)
	// Rejecting anything but canonical base64 (no line breaks) lets the
	// push frame carry the client's encoding unchanged.
	if err != nil || base64.StdEncoding.EncodedLen(n) != len(b64) {
		c.fail("bad_payload", "payload is not standard padded base64")
		return
	}
	payload = payload[:n]
	if n > MaxPayload {
		c.fail("payload_too_large", "payload is over 1 MiB decoded")
		return
	}
	ch := string(name)
	f := pushPrefix(ch, len(b64))
	f = append(f, b64...)
	c.slots <- struct{}{}
	c.pending.Add(1)
	c.srv.arch.acquire(int64(len(payload)))
	c.srv.arch.submit(&pubReq{c: c, sub: c.sub, channel: ch, payload: payload, hdr: classify(payload), frame: f, weight: int64(len(payload))})
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
	addr := remoteIP(r.RemoteAddr)
	if !s.takeSlot(addr) {
		s.log.Info("relay: too many unauthenticated sockets", "remote", r.RemoteAddr)
		s.logRequest(r, http.StatusTooManyRequests)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many sockets waiting to authenticate; retry later")
		return
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
		s.releaseSlot(addr)
		s.log.Info("relay: websocket upgrade failed", "remote", r.RemoteAddr)
		if hw.failed != 0 {
			writeError(w, hw.failed, "bad_handshake", "not a valid WebSocket handshake")
		}
		return
	}
	ws.SetReadLimit(s.cfg.PreAuthReadLimit)
	c := &conn{
		srv:        s,
		id:         connIDs.Add(1),
		ws:         ws,
		cc:         hw.cc,
		remote:     r.RemoteAddr,
		unauthAddr: addr,
		holdsSlot:  true,
		subs:       make(map[string]bool),
		wake:       make(chan struct{}, 1),
		// At most half the send queue may be waiting for archive answers,
		// so a commit's burst of acks always fits the queue.
		slots: make(chan struct{}, max(1, s.cfg.SendQueue/2)),
	}
	s.log.Info("relay: connection opened", "remote", c.remote, "path", httpx.LogPath(r.URL.Path))
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
	c.releaseSlot()
	c.closeWith(websocket.StatusNormalClosure, "", nil, false)
	wg.Wait()
	c.ws.CloseNow()
	s.hub.remove(c, c.subs)
	s.log.Info("relay: connection ended", "remote", c.remote, "sub", c.sub)
}

// releaseSlot gives back the conn's unauthenticated-socket slot, once.
func (c *conn) releaseSlot() {
	if c.holdsSlot {
		c.holdsSlot = false
		c.srv.releaseSlot(c.unauthAddr)
	}
}

// remoteIP is the address part of a RemoteAddr, the key of the
// per-address cap.
func remoteIP(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// takeSlot admits one more unauthenticated socket from addr, within
// Config.MaxUnauthConns and MaxUnauthConnsPerAddr.
func (s *Server) takeSlot(addr string) bool {
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	if s.unauth >= s.cfg.MaxUnauthConns || s.unauthBy[addr] >= s.cfg.MaxUnauthConnsPerAddr {
		return false
	}
	s.unauth++
	s.unauthBy[addr]++
	return true
}

func (s *Server) releaseSlot(addr string) {
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	s.unauth--
	if s.unauthBy[addr]--; s.unauthBy[addr] <= 0 {
		delete(s.unauthBy, addr)
	}
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
