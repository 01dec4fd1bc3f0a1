// Command relaybench drives a running relay (tally serve, or any relay with
// its directory) over real sockets from a separate process, with the
// closed-loop method of docs/BENCHMARKS.md:
//
//   - fan-out: one publisher, N subscribers on one channel, 1 KiB
//     payloads, at most K messages outstanding per subscriber (published
//     and not yet received by it); reports delivered/s, the publish →
//     delivery latency under that load and the frames per WebSocket
//     message seen on the wire (batches);
//   - latency: one publisher, one subscriber, one message in flight;
//   - durable: C connections, each on its own channel with F publishes in
//     flight, counting acks (an ack means the entry is durable).
//
// Rounds interleave the scenarios, so a change in the machine's load hits
// them alike; the summary gives the median of the rounds.
//
//	go run ./internal/cmd/relaybench -data ~/.local/share/skytale
//
// With -data (the serve's data folder) it creates accounts with the
// operator's internal secret and mints tokens with the JWT secret;
// without, it signs up through the directory's open signup (on for a
// loopback serve; 20 signups per 3 minutes from one address) and mints
// tokens through POST /v1/tokens.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/jwt"
)

type options struct {
	api, relay, data string
	subs             []int
	outstanding      int
	size             int
	rounds           int
	round            time.Duration
	batch            bool
	durable          []durableCase
	latency          bool
}

type durableCase struct{ conns, inflight int }

func main() {
	var o options
	var subs, durable string
	flag.StringVar(&o.api, "api", "http://127.0.0.1:3100", "the directory's URL")
	flag.StringVar(&o.relay, "relay", "http://127.0.0.1:8443", "the relay's URL")
	flag.StringVar(&o.data, "data", "", "the serve's data folder: create accounts with its internal secret and mint tokens with its JWT secret")
	flag.StringVar(&subs, "subs", "1,100,1000", "fan-out subscriber counts")
	flag.IntVar(&o.outstanding, "outstanding", 256, "messages outstanding per subscriber in fan-out")
	flag.IntVar(&o.size, "size", 1024, "payload bytes")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds")
	flag.DurationVar(&o.round, "duration", 10*time.Second, "length of each measurement")
	flag.BoolVar(&o.batch, "batch", true, "ask the relay for coalesced pushes")
	flag.StringVar(&durable, "durable", "16x64,1x1", "durable publish cases, connections x in flight (empty for none)")
	flag.BoolVar(&o.latency, "latency", true, "run the one-in-flight latency case")
	flag.Parse()
	for _, s := range strings.Split(subs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-subs: %q is not a positive count", s))
		}
		o.subs = append(o.subs, n)
	}
	for _, s := range strings.Split(durable, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		var d durableCase
		if _, err := fmt.Sscanf(s, "%dx%d", &d.conns, &d.inflight); err != nil || d.conns < 1 || d.inflight < 1 || d.conns > 60 {
			fatal(fmt.Errorf("-durable: %q is not CONNSxINFLIGHT (connections 1 to 60)", s))
		}
		o.durable = append(o.durable, d)
	}
	if o.size < 16 || o.size > 1<<20 {
		fatal(errors.New("-size must be 16 to 1048576"))
	}
	if err := run(o); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "relaybench:", err)
	os.Exit(1)
}

// start is the clock payloads carry: nanoseconds since the process began,
// monotonic.
var start = time.Now()

func now() int64 { return int64(time.Since(start)) }

func run(o options) error {
	ctx := context.Background()
	maxSubs := slices.Max(append(slices.Clone(o.subs), 1))
	env, err := setup(ctx, o, maxSubs)
	if err != nil {
		return err
	}
	fmt.Printf("relay %s, directory %s, payload %d B, %d outstanding per subscriber, %d rounds of %s, batch %v\n\n",
		o.relay, o.api, o.size, o.outstanding, o.rounds, o.round, o.batch)
	results := map[string][]result{}
	var order []string
	add := func(name string, r result) {
		if _, ok := results[name]; !ok {
			order = append(order, name)
		}
		results[name] = append(results[name], r)
		fmt.Printf("round %d  %-22s %s\n", len(results[name]), name, r)
	}
	for range o.rounds {
		for _, n := range o.subs {
			r, err := env.fanout(ctx, n, o.outstanding)
			if err != nil {
				return fmt.Errorf("fan-out 1→%d: %w", n, err)
			}
			add(fmt.Sprintf("fan-out 1→%d", n), r)
		}
		if o.latency {
			r, err := env.fanout(ctx, 1, 1)
			if err != nil {
				return fmt.Errorf("latency: %w", err)
			}
			add("latency 1→1, 1 in flight", r)
		}
		for _, d := range o.durable {
			r, err := env.durable(ctx, d)
			if err != nil {
				return fmt.Errorf("durable %dx%d: %w", d.conns, d.inflight, err)
			}
			add(fmt.Sprintf("durable %d conn × %d", d.conns, d.inflight), r)
		}
	}
	fmt.Printf("\nmedian of %d rounds\n", o.rounds)
	for _, name := range order {
		fmt.Printf("%-26s %s\n", name, median(results[name]))
	}
	return nil
}

// result is one measurement.
type result struct {
	rate         float64 // delivered/s, or acks/s
	unit         string
	p50, p99     time.Duration
	p999         time.Duration
	batchMean    float64 // frames per message; 0 when not measured
	batchP50     int
	batchP99     int
	batchMax     int
	messages     int64
	framesPerMsg bool
}

func (r result) String() string {
	s := fmt.Sprintf("%10.0f %-12s p50 %8s  p99 %8s  p99.9 %8s", r.rate, r.unit, round(r.p50), round(r.p99), round(r.p999))
	if r.framesPerMsg {
		s += fmt.Sprintf("  frames/message mean %.1f p50 %d p99 %d max %d", r.batchMean, r.batchP50, r.batchP99, r.batchMax)
	}
	return s
}

func round(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%.2fms", float64(d)/1e6)
}

// median takes each figure's median over the rounds.
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out := rs[0]
	out.rate = pick(func(r result) float64 { return r.rate })
	out.p50 = time.Duration(pick(func(r result) float64 { return float64(r.p50) }))
	out.p99 = time.Duration(pick(func(r result) float64 { return float64(r.p99) }))
	out.p999 = time.Duration(pick(func(r result) float64 { return float64(r.p999) }))
	out.batchMean = pick(func(r result) float64 { return r.batchMean })
	out.batchP50 = int(pick(func(r result) float64 { return float64(r.batchP50) }))
	out.batchP99 = int(pick(func(r result) float64 { return float64(r.batchP99) }))
	out.batchMax = int(pick(func(r result) float64 { return float64(r.batchMax) }))
	return out
}

// hist is a log-linear histogram of durations in nanoseconds: 32 linear
// steps per power of two, so a percentile is within about 3 %.
type hist struct{ b [64 * 32]int64 }

func bucketOf(v int64) int {
	if v < 32 {
		return int(max(v, 0))
	}
	e := 63 - bits.LeadingZeros64(uint64(v)) // v in [2^e, 2^(e+1))
	return (e-4)*32 + int(v>>(e-5)) - 32
}

func lowOf(b int) int64 {
	if b < 32 {
		return int64(b)
	}
	e := b/32 + 4
	return int64(b%32+32) << (e - 5)
}

func (h *hist) add(v int64) { h.b[bucketOf(v)]++ }
func (h *hist) merge(o *hist) {
	for i, n := range o.b {
		h.b[i] += n
	}
}

func (h *hist) count() int64 {
	var n int64
	for _, c := range h.b {
		n += c
	}
	return n
}

func (h *hist) quantile(q float64) int64 {
	total := h.count()
	if total == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(total)))
	var n int64
	for i, c := range h.b {
		n += c
		if n >= want {
			return lowOf(i)
		}
	}
	return lowOf(len(h.b) - 1)
}

// env is what the scenarios share: accounts, channels and credentials.
type env struct {
	o        options
	http     *http.Client
	jwt      []byte // the JWT secret, with -data
	internal string // the internal secret, with -data
	org      string
	owner    account
	subs     []account // members of the fan-out channels, up to perAccount sockets each
	fan      string
	durables []string
	seq      atomic.Int64
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
		e.durables = append(e.durables, fmt.Sprintf("%s/bench/durable%d", e.org, i))
	}
	chans = append(chans, e.durables...)
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

// stampOf reads the send time a pushed frame's payload starts with.
func stampOf(frame []byte) (int64, bool) {
	i := bytes.Index(frame, payloadKey)
	if i < 0 || len(frame) < i+len(payloadKey)+12 {
		return 0, false
	}
	var raw [9]byte
	if _, err := base64.StdEncoding.Decode(raw[:], frame[i+len(payloadKey):i+len(payloadKey)+12]); err != nil {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(raw[:8])), true
}

var messagePrefix = []byte(`{"type":"message"`)

// publishFrame builds a publish frame whose payload starts with the send
// time.
func publishFrame(ch string, size int) func() []byte {
	payload := make([]byte, size)
	rand.Read(payload)
	prefix := []byte(`{"type":"publish","channel":"` + ch + `","payload":"`)
	buf := make([]byte, 0, len(prefix)+base64.StdEncoding.EncodedLen(size)+2)
	return func() []byte {
		binary.BigEndian.PutUint64(payload, uint64(now()))
		buf = append(buf[:0], prefix...)
		buf = base64.StdEncoding.AppendEncode(buf, payload)
		return append(buf, '"', '}')
	}
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
	socks := make([]*sock, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := e.dial(ctx, toks[i/perAccount], ch)
			if err != nil {
				errs <- err
				return
			}
			socks[i] = s
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		for _, s := range socks {
			if s != nil {
				s.c.CloseNow()
			}
		}
		return nil, err
	}
	return socks, nil
}

// fanout runs one publisher to n subscribers with at most k messages
// outstanding per subscriber.
func (e *env) fanout(ctx context.Context, n, k int) (result, error) {
	subs, err := e.dialMany(ctx, n, e.fan)
	if err != nil {
		return result{}, err
	}
	defer func() {
		for _, s := range subs {
			s.c.CloseNow()
		}
	}()
	tok, err := e.token(ctx, e.owner)
	if err != nil {
		return result{}, err
	}
	pub, err := e.dial(ctx, tok, e.fan)
	if err != nil {
		return result{}, err
	}
	defer pub.c.CloseNow()

	var measuring atomic.Bool
	received := make([]atomic.Int64, n)
	hists := make([]*hist, n)
	batches := make([]*hist, n)
	var wg sync.WaitGroup
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	for i, s := range subs {
		hists[i], batches[i] = new(hist), new(hist)
		wg.Go(func() {
			h, bh := hists[i], batches[i]
			for {
				msg, err := s.read(rctx)
				if err != nil {
					return
				}
				frames := 0
				for len(msg) > 0 {
					j := bytes.IndexByte(msg, '\n')
					f := msg
					if j >= 0 {
						f, msg = msg[:j], msg[j+1:]
					} else {
						msg = nil
					}
					if !bytes.HasPrefix(f, messagePrefix) {
						continue
					}
					frames++
					if measuring.Load() {
						if ts, ok := stampOf(f); ok {
							h.add(now() - ts)
						}
					}
				}
				if frames == 0 {
					continue
				}
				if measuring.Load() {
					bh.add(int64(frames))
				}
				received[i].Add(int64(frames))
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
	}
	// The publisher's acks are read and dropped.
	wg.Go(func() {
		for {
			if _, err := pub.read(rctx); err != nil {
				return
			}
		}
	})
	next := publishFrame(e.fan, e.o.size)
	minRecv := func() int64 {
		m := int64(math.MaxInt64)
		for i := range received {
			m = min(m, received[i].Load())
		}
		return m
	}
	var sent int64
	stall := time.NewTimer(time.Hour)
	defer stall.Stop()
	publish := func(until time.Time) error {
		for time.Now().Before(until) {
			room := int64(k) - (sent - minRecv())
			if room <= 0 {
				stall.Reset(time.Second)
				select {
				case <-wake:
				case <-stall.C:
					return fmt.Errorf("no delivery for a second (%d sent, %d received by the slowest subscriber)", sent, minRecv())
				}
				continue
			}
			for range room {
				if err := pub.c.Write(ctx, websocket.MessageText, next()); err != nil {
					return err
				}
				sent++
			}
		}
		return nil
	}
	// Warm up, then measure.
	if err := publish(time.Now().Add(time.Second)); err != nil {
		return result{}, err
	}
	base := make([]int64, n)
	for i := range received {
		base[i] = received[i].Load()
	}
	measuring.Store(true)
	t0 := time.Now()
	if err := publish(t0.Add(e.o.round)); err != nil {
		return result{}, err
	}
	elapsed := time.Since(t0)
	measuring.Store(false)
	var delivered int64
	for i := range received {
		delivered += received[i].Load() - base[i]
	}
	cancel()
	for _, s := range subs {
		s.c.CloseNow()
	}
	pub.c.CloseNow()
	wg.Wait()
	var h, bh hist
	for i := range hists {
		h.merge(hists[i])
		bh.merge(batches[i])
	}
	r := result{
		rate: float64(delivered) / elapsed.Seconds(), unit: "delivered/s",
		p50: time.Duration(h.quantile(0.5)), p99: time.Duration(h.quantile(0.99)), p999: time.Duration(h.quantile(0.999)),
		framesPerMsg: true, batchP50: int(bh.quantile(0.5)), batchP99: int(bh.quantile(0.99)), batchMax: int(bh.quantile(1)),
	}
	if m := bh.count(); m > 0 {
		var frames float64
		for i, c := range bh.b {
			frames += float64(c) * float64(lowOf(i))
		}
		r.batchMean, r.messages = frames/float64(m), m
	}
	return r, nil
}

// durable runs d.conns publishers, each on its own channel with
// d.inflight publishes in flight, and counts the acks.
func (e *env) durable(ctx context.Context, d durableCase) (result, error) {
	tok, err := e.token(ctx, e.owner)
	if err != nil {
		return result{}, err
	}
	socks := make([]*sock, d.conns)
	for i := range socks {
		if socks[i], err = e.dial(ctx, tok, e.durables[i]); err != nil {
			return result{}, err
		}
	}
	defer func() {
		for _, s := range socks {
			s.c.CloseNow()
		}
	}()
	var measuring atomic.Bool
	var acks atomic.Int64
	hists := make([]*hist, d.conns)
	errs := make(chan error, d.conns)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range socks {
		hists[i] = new(hist)
		wg.Go(func() {
			next := publishFrame(e.durables[i], e.o.size)
			sent := make(chan int64, d.inflight) // send times, in order
			done := make(chan error, 1)
			go func() {
				for {
					msg, err := s.read(ctx)
					if err != nil {
						done <- err
						return
					}
					for f := range bytes.SplitSeq(msg, []byte("\n")) {
						if !bytes.Contains(f, []byte(`"message":"published"`)) {
							done <- fmt.Errorf("relay answered %.200s", f)
							return
						}
						t := <-sent
						if measuring.Load() {
							hists[i].add(now() - t)
							acks.Add(1)
						}
					}
				}
			}()
			for {
				select {
				case <-stop:
					errs <- nil
					return
				case err := <-done:
					errs <- err
					return
				case sent <- now():
				}
				if err := s.c.Write(ctx, websocket.MessageText, next()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	time.Sleep(time.Second)
	measuring.Store(true)
	t0 := time.Now()
	time.Sleep(e.o.round)
	measuring.Store(false)
	elapsed := time.Since(t0)
	n := acks.Load()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	var h hist
	for _, x := range hists {
		h.merge(x)
	}
	return result{rate: float64(n) / elapsed.Seconds(), unit: "acks/s",
		p50: time.Duration(h.quantile(0.5)), p99: time.Duration(h.quantile(0.99)), p999: time.Duration(h.quantile(0.999))}, nil
}
