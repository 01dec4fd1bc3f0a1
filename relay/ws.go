package relay

import (
	"bufio"
	"encoding/base64"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/relay/internal/backend"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
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

	// writeTimeout bounds one socket write; a peer that accepts nothing for
	// this long is cut off.
	writeTimeout = 10 * time.Second
)

// The segment log carries the largest payload the relay stores (a
// conversion of a negative constant does not compile).
const _ = uint(seglog.MaxPayload - MaxHandshakePayload)

// frameLimit is the largest client frame publishing an n-byte payload:
// its base64 plus room for the JSON around it.
func frameLimit(n int) int64 { return int64(base64.StdEncoding.EncodedLen(n)) + 4096 }

// largeFrameWeight is what a frame publishing an n-byte handshake holds
// of the large-frame budget while it is read and decoded: its buffer and
// the decoded payload.
func largeFrameWeight(n int) int64 { return frameLimit(n) + frameSlack + int64(n) }

// conn is one WebSocket client. Its reader goroutine handles frames in
// order; its writer goroutine drains the bounded send queue, writing every
// frame queued since it last looked with a single socket write. The writer
// runs only while there is something to write: it starts when a frame is
// queued to an empty queue (or the socket starts closing), and ends when
// it finds the queue empty, so an idle socket holds no writer goroutine
// and no stack for it.
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

	// wrote is closed when the writer has sent the close frame (or a
	// write failed): no writer starts after that.
	wrote chan struct{}
	// writer is writeLoop as a func value made once: go c.writer() then
	// allocates nothing, where go c.writeLoop() makes a closure each time.
	writer func()

	// rbuf is the frame being handled when it is over readLimit: its
	// buffer is not reused, so publish builds the push frame in it.
	// Reader goroutine only.
	rbuf []byte

	mu          sync.Mutex // guards the following fields
	q           [][]byte
	qBufs       []*backend.PushBuf // per frame in q: its lent buffer, or nil
	spareBufs   []*backend.PushBuf
	qBytes      int // bytes in q
	qLarge      int // bytes in q of frames over readLimit
	qSlots      int // answers in q holding a slot
	spare       [][]byte
	closing     bool
	closeCode   websocket.StatusCode
	closeReason string
	final       []byte      // sent before the close frame
	linger      *time.Timer // cuts an evicted socket's close handshake short
	writing     bool        // a writer goroutine runs
	wroteAll    bool        // the writer has ended for good (wrote is closed)
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
	start := c.startWriterLocked()
	c.mu.Unlock()
	if start {
		go c.writer()
	}
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
		c.srv.arch.Submit(backend.Request{Conn: c, Reply: f})
		return
	}
	c.push(f)
}

// fail replies with an error frame and keeps the connection open.
func (c *conn) fail(code, message string) {
	c.reply(backend.ErrorFrame(code, message))
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
		wrote:  make(chan struct{}),
		// At most half the send queue may be waiting for archive answers,
		// so a commit's burst of acks always fits the queue.
		slots: make(chan struct{}, max(1, s.cfg.SendQueue/2)),
	}
	c.writer = c.writeLoop
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
	// An eviction while the upgrade ran found no socket to write to: the
	// writer that closes it (or writes what came first) starts now.
	start := (c.closing || len(c.q) > 0) && c.startWriterLocked()
	c.mu.Unlock()
	if start {
		go c.writer()
	}
	// client is the address admission counts: the remote one, or behind
	// a trusted proxy the one it forwards for.
	s.log.Info("relay: connection opened", "remote", c.remote, "client", c.adm.keys.Addr, "path", s.logPath(r))
	s.hub.register(c)
	if s.gate.Closed() {
		c.closeWith(websocket.StatusGoingAway, "relay shutting down", nil, true)
	}
	// The socket is served on a goroutine of its own and the handler
	// returns: net/http then lets go of what it held for the upgrade
	// request (its write buffer, the parsed request, the stack its serve
	// goroutine grew), which each idle socket would otherwise keep for its
	// whole life. The gate's entry moves to that goroutine, so Close still
	// waits for it; a closing gate (the socket is being told to go) keeps
	// it here.
	if s.gate.Enter() {
		go func() {
			defer s.gate.Leave()
			s.serveConn(c, pathChannel)
		}()
		return
	}
	s.serveConn(c, pathChannel)
}

// serveConn reads and answers an upgraded socket's frames until it ends,
// then lets go of it.
func (s *Server) serveConn(c *conn, pathChannel string) {
	timer := time.AfterFunc(s.cfg.AuthTimeout, func() {
		if !c.authed.Load() {
			s.log.Info("relay: authentication timeout", "remote", c.remote)
			c.closeWith(websocket.StatusPolicyViolation, "authentication timeout",
				backend.ErrorFrame("auth_timeout", "no auth frame within the time limit"), true)
		}
	})
	c.readLoop(pathChannel)
	timer.Stop()
	c.stopExpiry()
	c.stopPings()
	s.adm.leave(c)
	// Closing starts a writer if none runs; it ends with the close frame.
	c.closeWith(websocket.StatusNormalClosure, "", nil, false)
	<-c.wrote
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
