package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/jwt"
)

// centrifugoTarget is a Centrifugo server, spoken to with its
// bidirectional JSON protocol over WebSocket: a command is a JSON object
// with an id, a reply carries the same id, and pushes carry none; one
// WebSocket message may hold several of them, one per line.
type centrifugoTarget struct {
	o    options
	url  string // the WebSocket's URL
	fan  string // the fan-out channel
	user atomic.Int64
}

func newCentrifugo(o options) (*centrifugoTarget, error) {
	if len(o.centrifugoSecret) == 0 {
		return nil, fmt.Errorf("no client.token.hmac_secret_key")
	}
	var id [6]byte
	rand.Read(id[:])
	u := "ws" + strings.TrimPrefix(strings.TrimRight(o.centrifugo, "/"), "http") + "/connection/websocket"
	return &centrifugoTarget{o: o, url: u, fan: "bench" + hex.EncodeToString(id[:])}, nil
}

func (c *centrifugoTarget) String() string {
	return fmt.Sprintf("centrifugo %s, JSON protocol, client-side publish", c.url)
}

func (c *centrifugoTarget) wireMessages() bool { return true }

func (c *centrifugoTarget) close() {}

func (c *centrifugoTarget) durables(context.Context, int, int) ([]durablePublisher, error) {
	return nil, fmt.Errorf("%w for centrifugo: its memory engine keeps no history", errNoDurable)
}

// centrifugoConn is one connection.
type centrifugoConn struct {
	c    *websocket.Conn
	buf  []byte
	next uint32 // the next command's id
}

// centrifugoReply is what a reply says, as far as this client cares.
type centrifugoReply struct {
	ID    uint32 `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// dial connects with a fresh user's token, and subscribes to ch unless
// it is empty.
func (c *centrifugoTarget) dial(ctx context.Context, ch string) (*centrifugoConn, error) {
	t := time.Now()
	tok, err := jwt.Mint(c.o.centrifugoSecret, jwt.Claims{
		Subject: "bench" + strconv.FormatInt(c.user.Add(1), 10), Audience: jwt.AudienceRelay,
		IssuedAt: t, ExpiresAt: t.Add(jwt.MaxTTL),
	})
	if err != nil {
		return nil, err
	}
	ws, _, err := websocket.Dial(ctx, c.url, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(8 << 20)
	cc := &centrifugoConn{c: ws, next: 1}
	cmds := []map[string]any{{"connect": map[string]any{"token": tok, "name": "relaybench"}}}
	if ch != "" {
		cmds = append(cmds, map[string]any{"subscribe": map[string]any{"channel": ch}})
	}
	for i, cmd := range cmds {
		id := cc.next
		cc.next++
		cmd["id"] = id
		b, _ := json.Marshal(cmd)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			ws.CloseNow()
			return nil, err
		}
		if err := cc.await(ctx, id); err != nil {
			ws.CloseNow()
			return nil, fmt.Errorf("centrifugo refused the %s: %w", []string{"connect", "subscribe"}[i], err)
		}
	}
	return cc, nil
}

// await reads until the reply to command id, answering pings.
func (cc *centrifugoConn) await(ctx context.Context, id uint32) error {
	for {
		msg, err := cc.read(ctx)
		if err != nil {
			return err
		}
		for line := range bytes.SplitSeq(msg, []byte("\n")) {
			if cc.pong(ctx, line) {
				continue
			}
			var r centrifugoReply
			if err := json.Unmarshal(line, &r); err != nil {
				return fmt.Errorf("centrifugo sent %.200q", line)
			}
			if r.ID != id {
				continue
			}
			if r.Error != nil {
				return fmt.Errorf("error %d: %s", r.Error.Code, r.Error.Message)
			}
			return nil
		}
	}
}

// pong answers a ping, an empty object, with one.
func (cc *centrifugoConn) pong(ctx context.Context, line []byte) bool {
	if !bytes.Equal(line, []byte("{}")) {
		return false
	}
	cc.c.Write(ctx, websocket.MessageText, []byte("{}"))
	return true
}

// read reads one whole message into the connection's buffer.
func (cc *centrifugoConn) read(ctx context.Context) ([]byte, error) {
	s := sock{c: cc.c, buf: cc.buf}
	msg, err := s.read(ctx)
	cc.buf = s.buf
	return msg, err
}

var (
	centrifugoPush = []byte(`{"push":`)
	centrifugoData = []byte(`"data":"`)
)

// receive reads one WebSocket message and counts the publications pushed
// in it.
func (cc *centrifugoConn) receive(ctx context.Context, h *hist) (int, error) {
	msg, err := cc.read(ctx)
	if err != nil {
		return 0, err
	}
	return countPushes(msg, centrifugoPush, centrifugoData, h, func(line []byte) { cc.pong(ctx, line) }), nil
}

func (cc *centrifugoConn) close() { cc.c.CloseNow() }

func (c *centrifugoTarget) subscribers(ctx context.Context, n int) ([]subscriber, error) {
	return openAll(n, func(int) (subscriber, error) { return c.dial(ctx, c.fan) })
}

// centrifugoPub publishes from a client connection that is not
// subscribed, so it gets none of its own publications; its replies are
// read, and the first error among them ends the publishing.
type centrifugoPub struct {
	cc      *centrifugoConn
	payload *stamped
	buf     []byte
	prefix  []byte
	failed  atomic.Pointer[error]
	done    chan struct{}
}

func (c *centrifugoTarget) publisher(ctx context.Context) (publisher, error) {
	cc, err := c.dial(ctx, "")
	if err != nil {
		return nil, err
	}
	p := &centrifugoPub{cc: cc, payload: newStamped(c.o.size), done: make(chan struct{})}
	p.prefix = []byte(`,"publish":{"channel":"` + c.fan + `","data":"`)
	go func() {
		defer close(p.done)
		for {
			msg, err := cc.read(context.Background())
			if err != nil {
				return
			}
			for line := range bytes.SplitSeq(msg, []byte("\n")) {
				if cc.pong(context.Background(), line) || !bytes.Contains(line, []byte(`"error"`)) {
					continue
				}
				err := fmt.Errorf("centrifugo refused a publish: %.200s", line)
				p.failed.CompareAndSwap(nil, &err)
			}
		}
	}()
	return p, nil
}

// failure is the first error a publish was answered with.
func (p *centrifugoPub) failure() error {
	if err := p.failed.Load(); err != nil {
		return *err
	}
	return nil
}

func (p *centrifugoPub) publish(ctx context.Context) error {
	if err := p.failure(); err != nil {
		return err
	}
	id := p.cc.next
	p.cc.next++
	p.buf = append(p.buf[:0], `{"id":`...)
	p.buf = strconv.AppendUint(p.buf, uint64(id), 10)
	p.buf = append(p.buf, p.prefix...)
	p.buf = append(p.buf, p.payload.stamp()...)
	p.buf = append(p.buf, `"}}`...)
	return p.cc.c.Write(ctx, websocket.MessageText, p.buf)
}

func (p *centrifugoPub) close() {
	p.cc.c.CloseNow()
	<-p.done
}
