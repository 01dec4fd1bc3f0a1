package seat

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// RelayClient speaks the relay's catch-up endpoints and opens WebSockets.
// Token returns a JWT for each request (it may hand out a cached one that
// is still valid).
type RelayClient struct {
	BaseURL string
	Token   func(ctx context.Context) (string, error)
	// Refresh, if set, mints a new JWT, never a cached one: a connection
	// sends it to the relay before the token in force expires. Nil means
	// Token.
	Refresh func(ctx context.Context) (string, error)
	HTTP    *http.Client
}

// maxFrame is the read limit of a relay WebSocket: the relay's MaxFrame,
// the push frame of the largest handshake it carries (16 MiB decoded, in
// base64 with the JSON around it), so that a large room's Commit pushed
// live does not end the socket. The seat does not import the relay's
// package; a test holds the two equal.
const maxFrame = (16<<20+2)/3*4 + 4096

// RelayEntry is one archived relay entry.
type RelayEntry struct {
	Seq       uint64 `json:"seq"`
	EntryType int    `json:"entry_type"`
	Payload   []byte `json:"payload"`
	TS        int64  `json:"ts"`
}

// Entry types, read by the relay from the cleartext MLS header.
const (
	EntryApp     = 0
	EntryCommit  = 1
	EntryWelcome = 2
)

// Sync returns one page of the channel's full log after since.
func (c *RelayClient) Sync(ctx context.Context, channel string, since uint64, limit int) ([]RelayEntry, bool, error) {
	var out struct {
		Entries []RelayEntry `json:"entries"`
		HasMore bool         `json:"has_more"`
	}
	err := c.get(ctx, "/v1/sync", channel, since, limit, &out)
	return out.Entries, out.HasMore, err
}

// Page is one page of a channel's log.
type Page struct {
	Entries   []RelayEntry
	HasMore   bool
	Truncated bool   // since was older than what the channel still holds
	OldestSeq uint64 // the oldest seq the channel still holds (0: none)
}

// SyncPage returns one page of the channel's full log after since. Truncated
// says that entries after since are gone from the relay (its cap or TTL
// dropped them): catching up from since cannot be complete.
func (c *RelayClient) SyncPage(ctx context.Context, channel string, since uint64, limit int) (Page, error) {
	var out struct {
		Entries   []RelayEntry `json:"entries"`
		HasMore   bool         `json:"has_more"`
		Truncated bool         `json:"truncated"`
		OldestSeq uint64       `json:"oldest_seq"`
	}
	if err := c.get(ctx, "/v1/sync", channel, since, limit, &out); err != nil {
		return Page{}, err
	}
	return Page{Entries: out.Entries, HasMore: out.HasMore, Truncated: out.Truncated, OldestSeq: out.OldestSeq}, nil
}

// Messages returns one page of the channel's application messages after since.
func (c *RelayClient) Messages(ctx context.Context, channel string, since uint64, limit int) ([]RelayEntry, bool, error) {
	var out struct {
		Messages []RelayEntry `json:"messages"`
		HasMore  bool         `json:"has_more"`
	}
	err := c.get(ctx, "/v1/messages", channel, since, limit, &out)
	return out.Messages, out.HasMore, err
}

func (c *RelayClient) get(ctx context.Context, path, channel string, since uint64, limit int, out any) error {
	if c.BaseURL == "" {
		return ErrNoRelayURL
	}
	tok, err := c.Token(ctx)
	if err != nil {
		return err
	}
	q := url.Values{"channel": {channel}, "since_seq": {fmt.Sprint(since)}}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	return doJSON(ctx, c.HTTP, "GET", strings.TrimRight(c.BaseURL, "/")+path+"?"+q.Encode(), tok, nil, out)
}

// SyncAll pages through the channel's log after since, calling f for every
// entry in order, and returns the last seq seen.
func (c *RelayClient) SyncAll(ctx context.Context, channel string, since uint64, f func(RelayEntry) error) (uint64, error) {
	for {
		entries, more, err := c.Sync(ctx, channel, since, 500)
		if err != nil {
			return since, err
		}
		for _, e := range entries {
			if err := f(e); err != nil {
				return since, err
			}
			since = e.Seq
		}
		if !more || len(entries) == 0 {
			return since, nil
		}
	}
}

// wireFrame is a relay WebSocket frame in either direction.
type wireFrame struct {
	Type      string `json:"type"`
	Token     string `json:"token,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Payload   string `json:"payload,omitempty"`
	Message   string `json:"message,omitempty"`
	Code      string `json:"code,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	EntryType int    `json:"entry_type,omitempty"`
	TS        int64  `json:"ts,omitempty"`
	Epoch     uint64 `json:"epoch,omitempty"`
	Batch     bool   `json:"batch,omitempty"`
	ID        string `json:"id,omitempty"`
}

// FrameError is an error frame from the relay.
type FrameError struct {
	Code    string
	Message string
	Epoch   uint64 // for stale_epoch: the epoch the relay expects
	Channel string // the channel, when the frame names it
}

func (e *FrameError) Error() string { return "seat: relay: " + e.Message + " (" + e.Code + ")" }

// Is makes a FrameError match the sentinel of its code: stale_epoch
// [ErrStaleEpoch], not_a_member [ErrNotMember], and the relay's
// admission closing the socket (evicted, busy, too_many_connections)
// [ErrTryAgainLater].
func (e *FrameError) Is(target error) bool {
	return target != nil && (codeSentinels[e.Code] == target || target == ErrTryAgainLater && tryAgainCodes[e.Code])
}

// tryAgainCodes are the error codes of a relay closing a socket with 1013.
var tryAgainCodes = map[string]bool{"evicted": true, "busy": true, "too_many_connections": true}

// Push is a message the relay delivered on a subscribed channel.
type Push struct {
	Channel string
	RelayEntry
}

// Conn is an authenticated relay WebSocket. Requests (subscribe, publish)
// are answered in order; pushes arrive on Pushes.
type Conn struct {
	ws        *websocket.Conn
	pushes    chan Push
	done      chan struct{}
	closing   chan struct{} // closed by Close: pushes nobody reads are dropped
	closeOnce sync.Once
	ignore    atomic.Bool // set by IgnorePushes

	// refresh mints the fresh tokens that keep the connection past its
	// first token's expiry; exp is the expiry of the token in force
	// (Unix nanoseconds, 0 when unknown).
	refresh func(ctx context.Context) (string, error)
	exp     atomic.Int64

	wmu     sync.Mutex // serializes writes and the order of waiters
	mu      sync.Mutex // guards the following fields
	waiters []chan wireFrame
	err     error
}

// Dial opens a WebSocket on /ws and authenticates.
func (c *RelayClient) Dial(ctx context.Context) (*Conn, error) {
	if c.BaseURL == "" {
		return nil, ErrNoRelayURL
	}
	tok, err := c.Token(ctx)
	if err != nil {
		return nil, err
	}
	u := strings.TrimRight(c.BaseURL, "/") + "/ws"
	u = "ws" + strings.TrimPrefix(u, "http")
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.HTTP, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, fmt.Errorf("seat: relay: %w", err)
	}
	ws.SetReadLimit(maxFrame)
	conn := &Conn{ws: ws, pushes: make(chan Push, 256), done: make(chan struct{}), closing: make(chan struct{}), refresh: c.Refresh}
	if conn.refresh == nil {
		conn.refresh = c.Token
	}
	go conn.readLoop()
	// Batch asks the relay to pack the frames queued for this socket into
	// one message, separated by newlines; a relay that does not know it
	// sends one frame per message, which readLoop reads alike.
	if _, err := conn.request(ctx, wireFrame{Type: "auth", Token: tok, Batch: true}); err != nil {
		ws.CloseNow()
		return nil, err
	}
	if exp, life, ok := tokenTimes(tok); ok {
		conn.exp.Store(exp.UnixNano())
		go conn.refreshLoop(exp, life)
	}
	return conn, nil
}

// The relay closes a socket when its token expires unless the client sends
// a fresh one first, in an auth frame of the same shape as the first
// ({"type":"auth","token":…}, answered {"type":"ok","message":
// "reauthenticated"}). A connection does so once two thirds of its token's
// lifetime have passed, and on a failure tries again until the token in
// force expires; then the relay closes the connection and its user
// reconnects as after any drop.

// tokenTimes reads the expiry and lifetime of a JWT without verifying it
// (the relay does that): the client only schedules by them.
func tokenTimes(tok string) (exp time.Time, life time.Duration, ok bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, 0, false
	}
	var c struct {
		Exp float64 `json:"exp"`
		Iat float64 `json:"iat"`
	}
	if json.Unmarshal(b, &c) != nil || c.Exp <= 0 {
		return time.Time{}, 0, false
	}
	exp = time.Unix(int64(c.Exp), 0)
	if c.Iat > 0 && c.Iat < c.Exp {
		life = time.Duration(c.Exp-c.Iat) * time.Second
	} else {
		life = time.Until(exp)
	}
	return exp, max(life, time.Second), true
}

// refreshDue is how long to wait before replacing a token of lifetime
// life that expires at exp: until a third of its lifetime is left, and
// never longer than two thirds of it from now, so a clock behind the
// directory's does not make the refresh late. It is never shorter than a
// twentieth of the lifetime either: with a clock ahead of the directory's
// (or a token whose expiry reads as past) every fresh token would
// otherwise look due at once, and the connection would mint and send
// tokens without pause.
func refreshDue(exp time.Time, life time.Duration) time.Duration {
	return max(min(time.Until(exp)-life/3, life*2/3), life/20)
}

func (c *Conn) refreshLoop(exp time.Time, life time.Duration) {
	wait := refreshDue(exp, life)
	for {
		t := time.NewTimer(max(wait, 0))
		select {
		case <-t.C:
		case <-c.closing:
			t.Stop()
			return
		case <-c.done:
			t.Stop()
			return
		}
		newExp, newLife, err := c.reauthenticate()
		if err == nil {
			exp, life = newExp, newLife
			wait = refreshDue(exp, life)
			continue
		}
		if c.Err() != nil {
			return // the connection ended
		}
		// The directory or the relay refused or failed: try again a few
		// times before the token in force runs out.
		left := time.Until(exp)
		if left <= 0 {
			return
		}
		wait = min(max(left/4, 100*time.Millisecond), 5*time.Second)
	}
}

// reauthenticate sends a fresh token and returns its expiry and lifetime
// once the relay has taken it.
func (c *Conn) reauthenticate() (time.Time, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := c.refresh(ctx)
	if err != nil {
		return time.Time{}, 0, err
	}
	exp, life, ok := tokenTimes(tok)
	if !ok {
		return time.Time{}, 0, errors.New("seat: the directory minted a token without an expiry")
	}
	if _, err := c.request(ctx, wireFrame{Type: "auth", Token: tok}); err != nil {
		return time.Time{}, 0, err
	}
	c.exp.Store(exp.UnixNano())
	return exp, life, nil
}

// Expiry returns when the token in force on the connection expires (the
// zero time if its token has no readable expiry). It moves forward each
// time the connection sends the relay a fresh token.
func (c *Conn) Expiry() time.Time {
	n := c.exp.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// IgnorePushes drops the messages the relay pushes on this connection,
// for a connection that only publishes: unread pushes would otherwise fill
// the queue and hold back the answers to its requests.
func (c *Conn) IgnorePushes() { c.ignore.Store(true) }

// DialPublisher opens a publisher on channel: a connection subscribed to
// it (the relay requires that) that drops what the relay pushes, and that
// is opened again when it ends while a publish waits for its answer.
func (c *RelayClient) DialPublisher(ctx context.Context, channel string) (*Publisher, error) {
	conn, err := c.dialPublisher(ctx, channel)
	if err != nil {
		return nil, err
	}
	return &Publisher{rc: c, channel: channel, conn: conn}, nil
}

func (c *RelayClient) dialPublisher(ctx context.Context, channel string) (*Conn, error) {
	conn, err := c.Dial(ctx)
	if err != nil {
		return nil, err
	}
	conn.IgnorePushes()
	if err := conn.Subscribe(ctx, channel); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// Publisher publishes on one channel. Each publish carries an id of its
// own, and a publish the relay could not store ("internal",
// "unavailable", "busy") or whose answer was lost with the connection is
// sent again with the same id, at most publishTries times in all, on a
// new connection when the old one ended: the relay stores an id once
// within its duplicate window (two minutes, or the archive's TTL if
// shorter) and acknowledges a retry with the first seq, so a retry never
// stores an entry twice.
//
// A connection that had already ended before a publish was written (the
// relay closed it, its token expired) is not opened again: nothing was
// sent, and the caller learns why it ended.
type Publisher struct {
	rc      *RelayClient
	channel string
	mu      sync.Mutex
	conn    *Conn
	closed  bool
}

// Publish publishes payload on channel (the publisher's own) and returns
// its seq once the relay has made it durable.
func (p *Publisher) Publish(ctx context.Context, channel string, payload []byte) (uint64, error) {
	return p.publishID(ctx, channel, payload, newPublishID())
}

// publishID is Publish with the publish id id: a publish whose answer was
// lost elsewhere is asked for again with its own id, and stored once.
func (p *Publisher) publishID(ctx context.Context, channel string, payload []byte, id string) (uint64, error) {
	if channel != p.channel {
		return 0, fmt.Errorf("seat: a publisher on %q cannot publish on %q", p.channel, channel)
	}
	var err error
	for try := 1; ; try++ {
		conn := p.current()
		if conn == nil {
			return 0, errors.New("seat: publisher closed")
		}
		var seq uint64
		seq, err = conn.publishOnce(ctx, channel, payload, id)
		if err == nil {
			return seq, nil
		}
		var lost *lostAnswer
		isLost := errors.As(err, &lost)
		if isLost {
			err = lost.err
		}
		if !(isLost || retryable(err)) || try == publishTries {
			return 0, err
		}
		if werr := backoffWait(ctx, try); werr != nil {
			return 0, err
		}
		if isLost {
			n, derr := p.rc.dialPublisher(ctx, p.channel)
			if derr != nil {
				return 0, fmt.Errorf("%w (and reconnecting failed: %v)", err, derr)
			}
			if !p.replace(conn, n) {
				return 0, errors.New("seat: publisher closed")
			}
		}
	}
}

func (p *Publisher) current() *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	return p.conn
}

// replace puts n in place of old, which has ended; false (and n closed)
// once the publisher is closed. When a concurrent publish replaced old
// first, n is closed and the publisher keeps that one.
func (p *Publisher) replace(old, n *Conn) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		n.Close()
		return false
	}
	if p.conn != old {
		p.mu.Unlock()
		n.Close()
		return true
	}
	p.conn = n
	p.mu.Unlock()
	old.Close()
	return true
}

// Expiry returns when the token in force on the publisher's connection
// expires (see [Conn.Expiry]).
func (p *Publisher) Expiry() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn.Expiry()
}

// Close closes the publisher's connection.
func (p *Publisher) Close() error {
	p.mu.Lock()
	p.closed = true
	conn := p.conn
	p.mu.Unlock()
	return conn.Close()
}

// publishTries bounds the sends of one publish: the first and its retries.
const publishTries = 5

// retryable reports whether err is a relay's answer that the entry was not
// stored for a passing reason, so the same publish may be sent again.
func retryable(err error) bool {
	var fe *FrameError
	if !errors.As(err, &fe) {
		return false
	}
	switch fe.Code {
	case "internal", "unavailable", "busy":
		return true
	}
	return false
}

// backoffWait waits before retry number try: 250 ms doubling to 2 s, with
// jitter, so that the retries of one publish span a NATS leader election
// (a few seconds) and many clients do not come back at once.
func backoffWait(ctx context.Context, try int) error {
	d := min(250*time.Millisecond<<(try-1), 2*time.Second)
	var b [1]byte
	rand.Read(b[:])
	d = d/2 + d*time.Duration(b[0])/512
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newPublishID returns a fresh publish id: 16 random bytes, in unpadded
// base64url (22 bytes, under the relay's 64).
func newPublishID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// lostAnswer marks the error of a request that was sent but whose answer
// never came: the connection ended while it waited. The relay may or may
// not have acted on it.
type lostAnswer struct{ err error }

func (e *lostAnswer) Error() string { return e.err.Error() }
func (e *lostAnswer) Unwrap() error { return e.err }

// eachFrame calls f with each frame of a relay message: one JSON object,
// or a batch of them separated by "\n" (no frame holds a raw newline). An
// empty part is not a frame: the message is unreadable.
func eachFrame(b []byte, f func([]byte) error) error {
	for {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if len(part) == 0 {
			return errors.New("seat: relay sent an unreadable frame")
		}
		if err := f(part); err != nil {
			return err
		}
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
}

// handleFrame handles one frame from the relay; an error ends the
// connection.
func (c *Conn) handleFrame(b []byte) error {
	var f wireFrame
	if json.Unmarshal(b, &f) != nil {
		return errors.New("seat: relay sent an unreadable frame")
	}
	if f.Type == "message" {
		p, derr := base64.StdEncoding.DecodeString(f.Payload)
		if derr != nil {
			return errors.New("seat: relay sent bad base64")
		}
		if c.ignore.Load() {
			return nil
		}
		select {
		case c.pushes <- Push{Channel: f.Channel, RelayEntry: RelayEntry{Seq: f.Seq, EntryType: f.EntryType, Payload: p, TS: f.TS}}:
		case <-c.closing:
		}
		return nil
	}
	if f.Type == "error" && f.Code == "not_a_member" {
		// The answer to a request, or the relay ending a subscription
		// of an account that was removed: the two look alike, and
		// either way the account may no longer use the channel. The
		// connection ends here, so no later answer is matched to the
		// wrong request; every request waiting gets this error.
		return &FrameError{Code: f.Code, Message: f.Message, Channel: f.Channel}
	}
	c.mu.Lock()
	if len(c.waiters) == 0 {
		c.mu.Unlock()
		if f.Type == "error" {
			return &FrameError{Code: f.Code, Message: f.Message, Channel: f.Channel}
		}
		return nil
	}
	w := c.waiters[0]
	c.waiters = c.waiters[1:]
	c.mu.Unlock()
	w <- f
	return nil
}

// Pushes delivers messages from subscribed channels. It is closed when the
// connection ends; Err then says why.
func (c *Conn) Pushes() <-chan Push { return c.pushes }

// Err returns why the connection ended, once Pushes is closed.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Subscribe subscribes to channel.
func (c *Conn) Subscribe(ctx context.Context, channel string) error {
	_, err := c.request(ctx, wireFrame{Type: "subscribe", Channel: channel})
	return err
}

// Publish publishes payload and returns its seq once the relay has made it
// durable. The publish carries an id, and a relay's answer that it could
// not store the entry ("internal", "unavailable", "busy") is followed by a
// retry with the same id on this connection, as [Publisher] does; an
// answer lost with the connection is not retried here (a [Publisher]
// reconnects for it).
func (c *Conn) Publish(ctx context.Context, channel string, payload []byte) (uint64, error) {
	seq, err := c.publishID(ctx, channel, payload, newPublishID())
	var lost *lostAnswer
	if errors.As(err, &lost) {
		return 0, lost.err
	}
	return seq, err
}

// publishID is Publish with the publish id id; an answer lost with the
// connection is a *lostAnswer, for the caller to ask again elsewhere with
// the same id.
func (c *Conn) publishID(ctx context.Context, channel string, payload []byte, id string) (uint64, error) {
	for try := 1; ; try++ {
		seq, err := c.publishOnce(ctx, channel, payload, id)
		var lost *lostAnswer
		if errors.As(err, &lost) {
			return 0, err
		}
		if err == nil || !retryable(err) || try == publishTries {
			return seq, err
		}
		if werr := backoffWait(ctx, try); werr != nil {
			return 0, err
		}
	}
}

// publishOnce sends one publish frame with id and waits for its answer; an
// answer lost with the connection is a *lostAnswer.
func (c *Conn) publishOnce(ctx context.Context, channel string, payload []byte, id string) (uint64, error) {
	f, err := c.request(ctx, wireFrame{Type: "publish", Channel: channel, Payload: base64.StdEncoding.EncodeToString(payload), ID: id})
	return f.Seq, err
}

// Close closes the connection. Pushes not read by then are dropped.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	<-c.done
	return err
}

func (c *Conn) request(ctx context.Context, f wireFrame) (wireFrame, error) {
	b, _ := json.Marshal(f)
	ch := make(chan wireFrame, 1)
	c.wmu.Lock()
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		c.wmu.Unlock()
		return wireFrame{}, err
	}
	c.waiters = append(c.waiters, ch)
	c.mu.Unlock()
	err := c.ws.Write(ctx, websocket.MessageText, b)
	c.wmu.Unlock()
	if err != nil {
		c.ws.CloseNow()
		if ctx.Err() != nil {
			return wireFrame{}, ctx.Err()
		}
		// Part of the frame may have left.
		return wireFrame{}, &lostAnswer{fmt.Errorf("seat: relay: %w", err)}
	}
	select {
	case r, ok := <-ch:
		if !ok {
			err := c.Err()
			var fe *FrameError
			if errors.As(err, &fe) {
				return wireFrame{}, err // the relay's answer ended the connection
			}
			return wireFrame{}, &lostAnswer{err}
		}
		if r.Type == "error" {
			return r, &FrameError{Code: r.Code, Message: r.Message, Epoch: r.Epoch, Channel: r.Channel}
		}
		return r, nil
	case <-ctx.Done():
		// The answer can no longer be matched to its request.
		c.ws.CloseNow()
		return wireFrame{}, ctx.Err()
	}
}

func (c *Conn) readLoop() {
	defer close(c.done)
	defer close(c.pushes)
	var err error
	for {
		var typ websocket.MessageType
		var b []byte
		typ, b, err = c.ws.Read(context.Background())
		if err != nil {
			break
		}
		if typ != websocket.MessageText {
			err = errors.New("seat: relay sent an unreadable frame")
			break
		}
		if err = eachFrame(b, c.handleFrame); err != nil {
			break
		}
	}
	c.ws.CloseNow()
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure:
		err = nil
	case websocket.StatusTryAgainLater:
		err = fmt.Errorf("seat: relay: %w (%w)", ErrTryAgainLater, err)
	}
	c.mu.Lock()
	if err == nil {
		err = errors.New("seat: relay connection closed")
	}
	c.err = err
	for _, w := range c.waiters {
		close(w)
	}
	c.waiters = nil
	c.mu.Unlock()
}
