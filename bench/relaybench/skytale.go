package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/jwt"
)

// env is the skytale target: the accounts, channels and credentials its
// scenarios share.
type env struct {
	o            options
	http         *http.Client
	jwt          []byte // the JWT secret, with -data
	internal     string // the internal secret, with -data
	org          string
	owner        account
	subs         []account // members of the fan-out channels, up to perAccount sockets each
	fan          string
	durableChans []string
	seq          atomic.Int64
}

type account struct {
	id, key string
}

// perAccount is how many sockets one account opens, under the relay's
// default of 64 per account.
const perAccount = 60

func setup(ctx context.Context, o options, maxSubs int) (*env, error) {
	e := &env{o: o, http: &http.Client{Timeout: 30 * time.Second}}
	if o.data != "" {
		for _, f := range []struct {
			name string
			dst  *[]byte
		}{{"jwt_secret", &e.jwt}} {
			b, err := os.ReadFile(filepath.Join(o.data, f.name))
			if err != nil {
				return nil, err
			}
			*f.dst = bytes.TrimSpace(b)
		}
		b, err := os.ReadFile(filepath.Join(o.data, "internal_secret"))
		if err != nil {
			return nil, err
		}
		e.internal = string(bytes.TrimSpace(b))
	}
	var id [6]byte
	rand.Read(id[:])
	e.org = "bench" + hex.EncodeToString(id[:])
	var err error
	if e.owner, err = e.signup(ctx, ""); err != nil {
		return nil, fmt.Errorf("signup: %w", err)
	}
	invite := ""
	need := (maxSubs + perAccount - 1) / perAccount
	if e.internal == "" && need > 0 {
		var out struct {
			Token string `json:"token"`
		}
		if err := e.post(ctx, "/v1/orgs/invites", e.owner.key, map[string]any{"org": e.org, "max_uses": 100}, &out); err != nil {
			return nil, fmt.Errorf("org invite: %w", err)
		}
		invite = out.Token
	}
	for range need {
		a, err := e.signup(ctx, invite)
		if err != nil {
			return nil, fmt.Errorf("signup of a subscriber account: %w", err)
		}
		e.subs = append(e.subs, a)
	}
	e.fan = e.org + "/bench/fanout"
	chans := []string{e.fan}
	conns := 0
	for _, d := range o.durable {
		conns = max(conns, d.conns)
	}
	for i := range conns {
		e.durableChans = append(e.durableChans, fmt.Sprintf("%s/bench/durable%d", e.org, i))
	}
	chans = append(chans, e.durableChans...)
	for _, ch := range chans {
		if err := e.post(ctx, "/v1/channels", e.owner.key, map[string]any{"name": ch}, nil); err != nil {
			return nil, fmt.Errorf("register %s: %w", ch, err)
		}
	}
	for _, a := range e.subs {
		if err := e.post(ctx, "/v1/channels/members", e.owner.key, map[string]any{"channel": e.fan, "account_id": a.id}, nil); err != nil {
			return nil, fmt.Errorf("add a member: %w", err)
		}
	}
	return e, nil
}

func (e *env) signup(ctx context.Context, invite string) (account, error) {
	body := map[string]any{"email": fmt.Sprintf("bench%d@%s.example", e.seq.Add(1), e.org), "org": e.org}
	if invite != "" {
		body["org_invite"] = invite
	}
	var out struct {
		AccountID string `json:"account_id"`
		APIKey    string `json:"api_key"`
	}
	err := e.post(ctx, "/v1/accounts", e.internal, body, &out)
	return account{out.AccountID, out.APIKey}, err
}

func (e *env) post(ctx context.Context, path, bearer string, body, out any) error {
	b, _ := json.Marshal(body)
	var rb []byte
	var resp *http.Response
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(e.o.api, "/")+path, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err = e.http.Do(req)
		if err != nil {
			return err
		}
		rb, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		// The directory's rate limits: wait as told, a few times.
		if resp.StatusCode != http.StatusTooManyRequests || try == 5 {
			break
		}
		wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		time.Sleep(time.Duration(max(wait, 1)) * time.Second)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, bytes.TrimSpace(rb))
	}
	if out != nil {
		return json.Unmarshal(rb, out)
	}
	return nil
}

// token returns a relay JWT for a.
func (e *env) token(ctx context.Context, a account) (string, error) {
	if e.jwt != nil {
		t := time.Now()
		return jwt.Mint(e.jwt, jwt.Claims{Subject: a.id, Audience: jwt.AudienceRelay, IssuedAt: t, ExpiresAt: t.Add(jwt.MaxTTL)})
	}
	var out struct {
		Token string `json:"token"`
	}
	err := e.post(ctx, "/v1/tokens", a.key, map[string]any{"audience": jwt.AudienceRelay}, &out)
	return out.Token, err
}

// sock is one relay WebSocket.
type sock struct {
	c   *websocket.Conn
	buf []byte
}

// dial opens a socket, authenticates and subscribes to ch.
func (e *env) dial(ctx context.Context, tok, ch string) (*sock, error) {
	u := "ws" + strings.TrimPrefix(strings.TrimRight(e.o.relay, "/"), "http") + "/ws"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(8 << 20)
	s := &sock{c: c}
	auth := map[string]any{"type": "auth", "token": tok}
	if e.o.batch {
		auth["batch"] = true
	}
	for _, f := range []any{auth, map[string]any{"type": "subscribe", "channel": ch}} {
		b, _ := json.Marshal(f)
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			c.CloseNow()
			return nil, err
		}
		msg, err := s.read(ctx)
		if err != nil {
			c.CloseNow()
			return nil, err
		}
		if !bytes.HasPrefix(msg, []byte(`{"type":"ok"`)) {
			c.CloseNow()
			return nil, fmt.Errorf("relay answered %.200s", msg)
		}
	}
	return s, nil
}

// read reads one whole message into the socket's buffer.
func (s *sock) read(ctx context.Context) ([]byte, error) {
	_, r, err := s.c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	s.buf = s.buf[:0]
	for {
		if len(s.buf) == cap(s.buf) {
			s.buf = append(s.buf, 0)[:len(s.buf)]
		}
		n, err := r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err == io.EOF {
			return s.buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

var payloadKey = []byte(`"payload":"`)

// stampOf reads the send time a pushed frame's payload starts with: the
// payload is the base64 string after key.
func stampOf(frame, key []byte) (int64, bool) {
	i := bytes.Index(frame, key)
	if i < 0 || len(frame) < i+len(key)+12 {
		return 0, false
	}
	var raw [9]byte
	if _, err := base64.StdEncoding.Decode(raw[:], frame[i+len(key):i+len(key)+12]); err != nil {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(raw[:8])), true
}

var messagePrefix = []byte(`{"type":"message"`)

// publishFrame builds a publish frame whose payload starts with the send
// time.
func publishFrame(ch string, size int) func() []byte {
	p := newStamped(size)
	prefix := []byte(`{"type":"publish","channel":"` + ch + `","payload":"`)
	buf := make([]byte, 0, len(prefix)+base64.StdEncoding.EncodedLen(size)+2)
	return func() []byte {
		buf = append(buf[:0], prefix...)
		buf = append(buf, p.stamp()...)
		return append(buf, '"', '}')
	}
}

// stamped is a random payload whose first 8 bytes are the send time, kept
// in base64 (for the two WebSocket servers). Each stamp re-encodes only
// the first 9 bytes: 9 is a multiple of 3, so they are exactly the first
// 12 characters, and a publish costs the client no base64 of the rest.
// Payloads are at least 16 bytes (the -size flag).
type stamped struct {
	payload []byte
	b64     []byte
}

func newStamped(size int) *stamped {
	p := &stamped{payload: make([]byte, size)}
	rand.Read(p.payload)
	p.b64 = base64.StdEncoding.AppendEncode(nil, p.payload)
	return p
}

// stamp writes the time into the payload and returns its base64, which
// is valid until the next stamp.
func (p *stamped) stamp() []byte {
	binary.BigEndian.PutUint64(p.payload, uint64(now()))
	base64.StdEncoding.Encode(p.b64[:12], p.payload[:9])
	return p.b64
}

// dialMany opens n subscriber sockets on ch, a few at a time (the relay
// bounds the sockets one address has waiting to authenticate).
func (e *env) dialMany(ctx context.Context, n int, ch string) ([]*sock, error) {
	toks := make([]string, (n+perAccount-1)/perAccount)
	for i := range toks {
		t, err := e.token(ctx, e.subs[i])
		if err != nil {
			return nil, err
		}
		toks[i] = t
	}
	return openAll(n, func(i int) (*sock, error) { return e.dial(ctx, toks[i/perAccount], ch) })
}

// The skytale relay as a target: accounts, channels and tokens from its
// directory, and the relay's WebSocket frames.

func (e *env) String() string {
	return fmt.Sprintf("relay %s, directory %s, batch %v", e.o.relay, e.o.api, e.o.batch)
}

func (e *env) wireMessages() bool { return true }

func (e *env) close() {}

func (s *sock) close() { s.c.CloseNow() }

// receive reads one WebSocket message and counts the pushes it carries.
func (s *sock) receive(ctx context.Context, h *hist) (int, error) {
	msg, err := s.read(ctx)
	if err != nil {
		return 0, err
	}
	return countPushes(msg, messagePrefix, payloadKey, h, nil), nil
}

func (e *env) subscribers(ctx context.Context, n int) ([]subscriber, error) {
	socks, err := e.dialMany(ctx, n, e.fan)
	if err != nil {
		return nil, err
	}
	subs := make([]subscriber, n)
	for i, s := range socks {
		subs[i] = s
	}
	return subs, nil
}

// skytalePub publishes on the fan-out channel; its acks are read and
// dropped.
type skytalePub struct {
	s    *sock
	next func() []byte
	done chan struct{}
}

func (e *env) publisher(ctx context.Context) (publisher, error) {
	tok, err := e.token(ctx, e.owner)
	if err != nil {
		return nil, err
	}
	s, err := e.dial(ctx, tok, e.fan)
	if err != nil {
		return nil, err
	}
	p := &skytalePub{s: s, next: publishFrame(e.fan, e.o.size), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			if _, err := s.read(context.Background()); err != nil {
				return
			}
		}
	}()
	return p, nil
}

func (p *skytalePub) publish(ctx context.Context) error {
	return p.s.c.Write(ctx, websocket.MessageText, p.next())
}

func (p *skytalePub) close() {
	p.s.c.CloseNow()
	<-p.done
}

// skytaleDurable publishes on one durable channel; each ack means the
// entry is in the archive.
type skytaleDurable struct {
	s    *sock
	next func() []byte
}

func (e *env) durables(ctx context.Context, conns, _ int) ([]durablePublisher, error) {
	tok, err := e.token(ctx, e.owner)
	if err != nil {
		return nil, err
	}
	var out []durablePublisher
	for i := range conns {
		s, err := e.dial(ctx, tok, e.durableChans[i])
		if err != nil {
			for _, d := range out {
				d.close()
			}
			return nil, err
		}
		out = append(out, &skytaleDurable{s: s, next: publishFrame(e.durableChans[i], e.o.size)})
	}
	return out, nil
}

func (d *skytaleDurable) publish(ctx context.Context) error {
	return d.s.c.Write(ctx, websocket.MessageText, d.next())
}

func (d *skytaleDurable) acked(ctx context.Context) (int, error) {
	msg, err := d.s.read(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for f := range bytes.SplitSeq(msg, []byte("\n")) {
		if !bytes.Contains(f, []byte(`"message":"published"`)) {
			return n, fmt.Errorf("relay answered %.200s", f)
		}
		n++
	}
	return n, nil
}

func (d *skytaleDurable) close() { d.s.c.CloseNow() }
