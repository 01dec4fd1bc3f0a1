package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"golang.org/x/sync/errgroup"

	"github.com/skytale-oss/skytale/seat"
)

var (
	abuseDuration = flag.Duration("abuse.duration", 0, "how long TestAbuseSoak attacks while honest seats work (default 20s)")
	abuseReport   = flag.String("abuse.report", "", "write TestAbuseSoak's figures as markdown to this file")
	abuseAttacks  = flag.String("abuse.attacks", "all", "TestAbuseSoak's attacks, comma-separated: idle, silent, tcp, signin, stranger, publish, read; all; or none for the honest seats alone")
)

// attackOn reports whether -abuse.attacks includes name.
func attackOn(name string) bool {
	for _, a := range strings.Split(*abuseAttacks, ",") {
		if a == "all" || a == name {
			return true
		}
	}
	return false
}

// The soak's stack is tally serve's defaults scaled down by eight, so that
// a few hundred sockets press it as a few thousand press the defaults:
// 512 connections per plane, 32 per address, 128 per /24 and 8 idle
// keep-alive ones per address at the listeners; the relay's sockets an eighth below that, 32 per address and
// 128 per /24, of which 4 and 16 in their login. The relay's budgets are
// small so that the attackers reach them within seconds: 2 MiB per
// account, 8 MiB per signup group (the accounts made from one /24), 64 MiB
// for the server.
const (
	soakMaxConns     = 512
	soakConnsPerIP   = 32
	soakConnsPerNet  = 128
	soakIdlePerIP    = 8
	soakLoginsPerIP  = 4
	soakLoginsPerNet = 16
	soakAccountQuota = 2 << 20
	soakGroupBudget  = 8 << 20
	soakServerBudget = 64 << 20
	// soakPublishNets is how many /24s the big publishers sign up from:
	// their groups hold at most soakPublishNets × soakGroupBudget, well
	// within the server's budget, which honest members share.
	soakPublishNets = 3
	// soakDiskTolerance is how much the data folder may grow once every
	// publishing group has been refused, besides what honest seats add
	// (soakDiskPerSeat each: an account, its seat and its join offers).
	soakDiskTolerance = 8 << 20
	soakDiskPerSeat   = 256 << 10
)

// TestAbuseSoak runs several attacks at once against tally serve's real
// listeners (connection admission, the relay's budgets, the directory's
// rate limits and read bounds), from many loopback addresses and /24s and
// many accounts, while honest seats sign in, make rooms, join them, send
// and read through the seat package as a user's tally would. The attacks:
// authenticated idle WebSockets from many accounts; silent WebSockets that
// never log in and silent TCP connections that never send a request, from
// many addresses and /24s; floods of bogus sign-ins; strangers claiming
// the honest seats' join offers and posting Welcomes to their inboxes; big
// publishes until the budgets refuse them; concurrent big reads (history
// pages, pending join requests, inboxes).
//
// It fails if an honest seat sees an error (the documented retries, a 429
// with a Retry-After that the seat waits out, are counted, not failures),
// if a stranger's claim or Welcome is ever accepted, or if the data folder
// keeps growing once every publishing group has been refused. It reports
// the honest latencies per operation, the documented retries, what each
// attack got, and the process's memory and the data folder's size over
// time (-abuse.report writes them as markdown). It never asserts a timing.
//
// The loopback addresses stand for the public: a trusted proxy at an
// address nobody uses keeps the listeners from exempting loopback.
// -abuse.duration sets how long it attacks; by default (the 20 s form CI
// runs, -short or not) the attacks get what the setup leaves of 16 s, at
// least 8 s, and stopping everything takes the rest.
func TestAbuseSoak(t *testing.T) {
	if !manyLoopbackAddrs() {
		t.Skip("this system does not route 127.0.0.0/8 to loopback, so the soak cannot come from many addresses")
	}
	dur := *abuseDuration
	data := t.TempDir()
	p := serveInProcess(t, serveOptions{
		Data: data, MaxConns: soakMaxConns, MaxConnsPerIP: soakConnsPerIP,
		admissionOptions: admissionOptions{
			HealthAddr:     "127.0.0.1:0",
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.255.255.254/32")},
			MaxConnsPerNet: soakConnsPerNet, MaxIdlePerIP: soakIdlePerIP, RelayConnsPerIP: soakConnsPerIP, RelayConnsPerNet: soakConnsPerNet,
			RelayLoginsPerIP: soakLoginsPerIP, RelayLoginsPerNet: soakLoginsPerNet,
		},
		budgetOptions: budgetOptions{AccountQuota: soakAccountQuota, GroupBudget: soakGroupBudget, ServerBudget: soakServerBudget},
	})
	s := &soak{t: t, p: p, data: data, lat: map[string][]time.Duration{}, retries: map[string]int{},
		attacks: map[string]map[string]int{}, refusedGroups: map[int]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	setup, setupCancel := context.WithTimeout(ctx, 3*time.Minute)
	t0 := time.Now()
	atk := s.prepare(setup)
	setupCancel()
	s.start = time.Now()
	t.Logf("the attackers' accounts and pending requests took %v to make", s.start.Sub(t0).Round(time.Millisecond))
	if dur <= 0 {
		// The 20 s form: the attack gets what the setup left of 16 s, at
		// least 8 s, and stopping takes the rest.
		dur = max(8*time.Second, 16*time.Second-s.start.Sub(t0))
	}
	var wg sync.WaitGroup
	goN := func(n int, f func(ctx context.Context, i int)) {
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); f(ctx, i) }()
		}
	}
	goN(1, func(ctx context.Context, _ int) { s.sample(ctx) })
	goN(1, func(ctx context.Context, _ int) { s.health(ctx) })
	attack := func(name string, n int, f func(ctx context.Context, i int)) {
		if attackOn(name) {
			goN(n, f)
		}
	}
	attack("idle", len(atk.idle)*soakSocketsPerAccount, func(ctx context.Context, i int) { s.idleSocket(ctx, atk.idle[i%len(atk.idle)], i) })
	attack("silent", 160, s.silentSocket)
	attack("tcp", 96, s.silentTCP)
	attack("signin", 2, s.bogusSignIns)
	attack("stranger", len(atk.strangers), func(ctx context.Context, i int) { s.strangerFlood(ctx, atk.strangers[i]) })
	attack("publish", len(atk.publishers), func(ctx context.Context, i int) { s.bigPublish(ctx, atk.publishers[i]) })
	attack("read", 8, func(ctx context.Context, i int) { s.bigReads(ctx, atk, i) })

	// Honest seats: each worker makes rooms of two new people, who join,
	// talk and read, and then leave the stage to the next pair.
	var honest sync.WaitGroup
	for w := range 3 {
		honest.Add(1)
		go func() { defer honest.Done(); s.honestWorker(ctx, w) }()
	}
	time.Sleep(dur) // time passes: the attacks and honest seats run side by side for dur
	s.stopped.Store(true)
	cancel()
	honest.Wait()
	wg.Wait()
	t.Logf("the attackers and seats took %v to stop", time.Since(s.start.Add(dur)).Round(time.Millisecond))
	s.sampleOnce() // after the attacks, before the servers stop
	closeClients()
	t1 := time.Now()
	if err := p.stop(); err != nil {
		t.Errorf("tally serve after the soak: %v", err)
	}
	t.Logf("tally serve took %v to stop", time.Since(t1).Round(time.Millisecond))
	s.report()
}

type soak struct {
	t     *testing.T
	p     *inProcess
	data  string
	start time.Time

	nextHonest atomic.Int32 // the honest seats' addresses, 127.10.k.1 and on

	mu sync.Mutex // guards the following fields
	// lat holds the honest operations' latencies, by operation.
	lat map[string][]time.Duration
	// honestErrs are the errors honest seats saw; retries the documented
	// retries (429 or 503 answers with a Retry-After) they waited out.
	honestErrs []string
	retries    map[string]int
	// attacks counts what each attack got, by outcome.
	attacks map[string]map[string]int
	// refusedGroups are the publishing /24s refused for their group's
	// budget; allRefused is when the last of them was.
	refusedGroups map[int]bool
	allRefused    time.Time
	samples       []soakSample
	honestSeats   int
	honestIDs     []string // the honest seats' account ids
	cutShort      int      // honest operations the end of the soak cancelled

	stopped atomic.Bool // the soak is over: honest operations are being cancelled
}

type soakSample struct {
	at                 time.Duration
	rss, heap, sys     uint64
	relayDisk, dirDisk int64
}

// addr is the loopback address 127.a.b.c.
func addr(a, b, c int) string { return fmt.Sprintf("127.%d.%d.%d", a, b, c) }

// manyLoopbackAddrs reports whether a socket can be bound to a loopback
// address other than 127.0.0.1 (Linux routes all of 127.0.0.0/8 to lo).
func manyLoopbackAddrs() bool {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false
	}
	defer l.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.3.4.5")}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// dialerFrom dials from the loopback address ip.
func dialerFrom(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 30 * time.Second}
}

// clients are the HTTP clients of the soak's addresses, one per address.
var clients sync.Map // of string to *http.Client

// clientFrom is the HTTP client whose connections come from ip.
func clientFrom(ip string) *http.Client {
	if c, ok := clients.Load(ip); ok {
		return c.(*http.Client)
	}
	c, _ := clients.LoadOrStore(ip, &http.Client{Transport: &http.Transport{DialContext: dialerFrom(ip).DialContext,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 20 * time.Second}})
	return c.(*http.Client)
}

// closeClients closes the idle connections of every client: the servers'
// shutdown waits seconds for a connection a client dialled and never
// used.
func closeClients() {
	clients.Range(func(_, c any) bool {
		c.(*http.Client).CloseIdleConnections()
		return true
	})
}

func (s *soak) count(attack, outcome string) {
	s.mu.Lock()
	m := s.attacks[attack]
	if m == nil {
		m = map[string]int{}
		s.attacks[attack] = m
	}
	m[outcome]++
	s.mu.Unlock()
}

// pause waits d or until ctx ends, and reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// apiCall sends a JSON request (in is marshalled, or sent as it is if it
// is []byte) and returns the status, the error code and the body; with
// discard the body of a 2xx answer is read and dropped, as an attacker
// that only wants the server to build it would.
func apiCall(ctx context.Context, hc *http.Client, method, url, bearer string, in any, discard ...bool) (int, string, []byte, error) {
	var body io.Reader
	if raw, ok := in.([]byte); ok {
		body = bytes.NewReader(raw)
	} else if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, "", nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	if len(discard) > 0 && discard[0] && resp.StatusCode/100 == 2 {
		_, err := io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, "", nil, err
	}
	b, err := io.ReadAll(resp.Body)
	var e struct {
		Error string `json:"error"`
	}
	if resp.StatusCode/100 != 2 {
		json.Unmarshal(b, &e)
	}
	return resp.StatusCode, e.Error, b, err
}

// outcome names an answer for the attack counts.
func outcome(status int, code string, err error) string {
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		return "cancelled"
	case err != nil:
		return "transport error"
	case code != "":
		return fmt.Sprintf("%d %s", status, code)
	}
	return fmt.Sprint(status)
}

// attacker is an account an attack signed up for itself.
type attacker struct {
	ip, id, key, org, channel string
	net                       int // the /24 it signed up from, for the publishers

	mu       sync.Mutex
	token    string
	tokenExp time.Time
}

// relayToken mints (and caches) a relay token for the attacker.
func (a *attacker) relayToken(ctx context.Context, s *soak) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token != "" && time.Until(a.tokenExp) > time.Minute {
		return a.token, nil
	}
	status, code, b, err := apiCall(ctx, clientFrom(a.ip), "POST", s.p.apiURL+"/v1/tokens", a.key, map[string]any{"audience": "skytale-relay"})
	if err != nil || status != 201 {
		return "", errors.New(outcome(status, code, err))
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	a.token, a.tokenExp = out.Token, out.ExpiresAt
	return a.token, nil
}

type attackers struct {
	idle, strangers, publishers, readers []*attacker
	// pendingOwner owns a channel that the readers filled with join
	// requests of 64 KiB key packages.
	pendingOwner *attacker
}

// signUp makes an attacker account in its own org from ip, with a channel
// of its own.
func (s *soak) signUp(ctx context.Context, ip, org string) (*attacker, error) {
	hc := clientFrom(ip)
	status, code, b, err := apiCall(ctx, hc, "POST", s.p.apiURL+"/v1/accounts", "", map[string]string{"email": org + "@attack.test", "org": org})
	if err != nil || status != 201 {
		return nil, fmt.Errorf("attacker signup from %s: %s", ip, outcome(status, code, err))
	}
	var acct struct {
		AccountID string `json:"account_id"`
		APIKey    string `json:"api_key"`
	}
	json.Unmarshal(b, &acct)
	a := &attacker{ip: ip, id: acct.AccountID, key: acct.APIKey, org: org, channel: org + "/big/ch"}
	if status, code, _, err := apiCall(ctx, hc, "POST", s.p.apiURL+"/v1/channels", a.key, map[string]string{"name": a.channel}); err != nil || status != 201 {
		return nil, fmt.Errorf("attacker channel: %s", outcome(status, code, err))
	}
	return a, nil
}

// Attackers: 16 accounts of idle sockets from 4 /24s, 3 strangers, 5
// accounts from each of soakPublishNets /24s that publish (five account
// quotas pass their group's budget), 4 readers.
const (
	soakIdleAccounts      = 16
	soakSocketsPerAccount = 30
	soakStrangers         = 3
	soakPublishersPerNet  = 5
	soakReaders           = 4
	// soakPending is how many join requests of 64 KiB key packages wait
	// on the readers' channel: a page of 50 and a few more.
	soakPending = 52
)

// prepare signs up the attackers' accounts (from their own addresses, as
// anyone may on an open directory; several at once) and fills a channel
// with big pending join requests for the readers.
func (s *soak) prepare(ctx context.Context) *attackers {
	atk := &attackers{
		idle:       make([]*attacker, soakIdleAccounts),
		strangers:  make([]*attacker, soakStrangers),
		publishers: make([]*attacker, soakPublishNets*soakPublishersPerNet),
		readers:    make([]*attacker, soakReaders),
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	make1 := func(dst **attacker, ip, org string, net int) {
		g.Go(func() error {
			a, err := s.signUp(gctx, ip, org)
			if a != nil {
				a.net = net
			}
			*dst = a
			return err
		})
	}
	for i := range atk.idle {
		make1(&atk.idle[i], addr(20, i%4, 1+i/4), fmt.Sprintf("idle%d", i), 0)
	}
	for i := range atk.strangers {
		make1(&atk.strangers[i], addr(23, i, 1), fmt.Sprintf("stranger%d", i), 0)
	}
	for i := range atk.publishers {
		make1(&atk.publishers[i], addr(24, i%soakPublishNets, 1+i/soakPublishNets), fmt.Sprintf("pub%d", i), i%soakPublishNets)
	}
	for i := range atk.readers {
		make1(&atk.readers[i], addr(25, i, 1), fmt.Sprintf("reader%d", i), 0)
	}
	if err := g.Wait(); err != nil {
		s.t.Fatal(err)
	}
	atk.pendingOwner = atk.readers[0]
	status, code, b, err := apiCall(ctx, clientFrom(atk.pendingOwner.ip), "POST", s.p.apiURL+"/v1/channels/invites", atk.pendingOwner.key,
		map[string]any{"channel": atk.pendingOwner.channel, "max_uses": 100})
	if err != nil || status != 201 {
		s.t.Fatalf("attacker invite: %s", outcome(status, code, err))
	}
	var inv struct{ Token string }
	json.Unmarshal(b, &inv)
	kp := base64.StdEncoding.EncodeToString(randomBytes(64 << 10))
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range soakPending {
		r := atk.readers[1+i%(len(atk.readers)-1)]
		g.Go(func() error {
			status, code, _, err := apiCall(gctx, clientFrom(r.ip), "POST", s.p.apiURL+"/v1/channels/join", r.key,
				map[string]any{"channel": atk.pendingOwner.channel, "token": inv.Token, "identity": fmt.Sprintf("did:fake:%d", i), "key_package": kp})
			if err != nil || status != 201 {
				return fmt.Errorf("attacker join request %d: %s", i, outcome(status, code, err))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.t.Fatal(err)
	}
	return atk
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func (s *soak) wsURL(path string) string { return "ws" + strings.TrimPrefix(s.p.relURL, "http") + path }

// idleSocket holds an authenticated WebSocket that does nothing (it
// answers pings), from one of a few dozen addresses, and logs in again
// whenever the relay closes it.
func (s *soak) idleSocket(ctx context.Context, a *attacker, i int) {
	ip := addr(20, i%4, 100+i%32) // the socket's address, apart from the signup's
	for ctx.Err() == nil {
		tok, err := a.relayToken(ctx, s)
		if err != nil {
			s.count("idle sockets", "token: "+err.Error())
			pause(ctx, time.Second)
			continue
		}
		c, resp, err := websocket.Dial(ctx, s.wsURL("/ws"), &websocket.DialOptions{HTTPClient: clientFrom(ip)})
		if err != nil {
			s.count("idle sockets", upgradeRefused(resp))
			pause(ctx, time.Second)
			continue
		}
		var f soakFrame
		if err := wsjson.Write(ctx, c, soakFrame{Type: "auth", Token: tok}); err == nil {
			err = wsjson.Read(ctx, c, &f)
		}
		if f.Type != "ok" {
			s.count("idle sockets", "login refused")
			c.CloseNow()
			pause(ctx, time.Second)
			continue
		}
		s.count("idle sockets", "held")
		// Read (and so answer pings) until the relay closes it.
		for {
			if _, _, err := c.Read(ctx); err != nil {
				if st := websocket.CloseStatus(err); st != -1 {
					s.count("idle sockets", fmt.Sprintf("closed %d", st))
				}
				break
			}
		}
		c.CloseNow()
		pause(ctx, 500*time.Millisecond)
	}
}

// silentSocket opens WebSockets that never log in, from 64 addresses in
// 16 /24s, again whenever the relay closes one.
func (s *soak) silentSocket(ctx context.Context, i int) {
	ip := addr(21, i%16, 1+i/16%4)
	for ctx.Err() == nil {
		c, resp, err := websocket.Dial(ctx, s.wsURL("/ws"), &websocket.DialOptions{HTTPClient: clientFrom(ip)})
		if err != nil {
			s.count("silent websockets", upgradeRefused(resp))
			pause(ctx, time.Second)
			continue
		}
		s.count("silent websockets", "opened")
		_, _, err = c.Read(ctx)
		if st := websocket.CloseStatus(err); st != -1 {
			s.count("silent websockets", fmt.Sprintf("closed %d", st))
		}
		c.CloseNow()
		pause(ctx, time.Second)
	}
}

// silentTCP opens TCP connections to both planes' public listeners that
// never send a byte, from 48 addresses in 12 /24s, again whenever one is
// closed.
func (s *soak) silentTCP(ctx context.Context, i int) {
	ip := addr(26, i%12, 1+i/12%4)
	target := strings.TrimPrefix(s.p.apiURL, "http://")
	if i%2 == 1 {
		target = strings.TrimPrefix(s.p.relURL, "http://")
	}
	buf := make([]byte, 1)
	for ctx.Err() == nil {
		c, err := dialerFrom(ip).DialContext(ctx, "tcp", target)
		if err != nil {
			s.count("silent tcp", "dial failed")
			pause(ctx, time.Second)
			continue
		}
		s.count("silent tcp", "opened")
		stop := context.AfterFunc(ctx, func() { c.Close() })
		c.Read(buf) // until the server (or the end) closes it
		stop()
		c.Close()
		pause(ctx, 200*time.Millisecond)
	}
}

// bogusSignIns floods POST /v1/tokens with keys that do not exist, from
// 256 addresses in 16 /24s.
func (s *soak) bogusSignIns(ctx context.Context, i int) {
	for n := 0; ctx.Err() == nil; n++ {
		hc := clientFrom(addr(22, (n+i)%16, 1+(n/16)%16))
		status, code, _, err := apiCall(ctx, hc, "POST", s.p.apiURL+"/v1/tokens", "sk_live_"+base64.RawURLEncoding.EncodeToString(randomBytes(24)), map[string]any{})
		s.count("bogus sign-ins", outcome(status, code, err))
		hc.CloseIdleConnections()
		pause(ctx, 25*time.Millisecond)
	}
}

// strangerFlood has an account with no relationship to the honest seats
// claim their join offers and post Welcomes for claims it never got.
func (s *soak) strangerFlood(ctx context.Context, a *attacker) {
	hc := clientFrom(a.ip)
	welcome := base64.StdEncoding.EncodeToString(randomBytes(256 << 10))
	body := func() []byte {
		b, _ := json.Marshal(map[string]any{"claim_id": fmt.Sprintf("%x", randomBytes(16)), "welcome": welcome})
		return b
	}()
	for n := 0; ctx.Err() == nil; n++ {
		target := s.honestAccount(n)
		if target != "" {
			status, code, _, err := apiCall(ctx, hc, "POST", s.p.apiURL+"/v1/keypackages/claim", a.key,
				map[string]any{"account_id": target, "channel": a.channel})
			s.count("stranger claims", outcome(status, code, err))
		}
		status, code, _, err := apiCall(ctx, hc, "POST", s.p.apiURL+"/v1/inbox", a.key, body)
		s.count("stranger welcomes", outcome(status, code, err))
		pause(ctx, 100*time.Millisecond)
	}
}

// honestAccount is one of the honest seats' account ids, for the
// strangers ("" before the first signs in).
func (s *soak) honestAccount(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.honestIDs) == 0 {
		return ""
	}
	return s.honestIDs[n%len(s.honestIDs)]
}

// bigPublish publishes 1 MiB payloads to the attacker's channel, and goes
// on after the budgets refuse them.
func (s *soak) bigPublish(ctx context.Context, a *attacker) {
	payload := base64.StdEncoding.EncodeToString(randomBytes(1 << 20))
	for ctx.Err() == nil {
		tok, err := a.relayToken(ctx, s)
		if err != nil {
			s.count("big publishes", "token refused")
			pause(ctx, time.Second)
			continue
		}
		c, resp, err := websocket.Dial(ctx, s.wsURL("/ws/"+a.channel), &websocket.DialOptions{HTTPClient: clientFrom(a.ip)})
		if err != nil {
			s.count("big publishes", upgradeRefused(resp))
			pause(ctx, time.Second)
			continue
		}
		c.SetReadLimit(4 << 20)
		var f soakFrame
		if err := wsjson.Write(ctx, c, soakFrame{Type: "auth", Token: tok}); err == nil {
			err = wsjson.Read(ctx, c, &f)
		}
		for f.Type == "ok" && ctx.Err() == nil {
			if err := wsjson.Write(ctx, c, soakFrame{Type: "publish", Channel: a.channel, Payload: payload}); err != nil {
				break
			}
			f = soakFrame{}
			if err := wsjson.Read(ctx, c, &f); err != nil {
				break
			}
			switch {
			case f.Type == "ok":
				s.count("big publishes", "stored")
			case f.Code == "quota_exceeded":
				s.count("big publishes", "refused: "+f.Scope)
				if f.Scope == "group" {
					s.groupRefused(a.net)
				}
				f.Type = "ok" // and on
				pause(ctx, 500*time.Millisecond)
			default:
				s.count("big publishes", "error "+f.Code)
			}
		}
		c.CloseNow()
		pause(ctx, 500*time.Millisecond)
	}
}

func (s *soak) groupRefused(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusedGroups[n] {
		return
	}
	s.refusedGroups[n] = true
	if len(s.refusedGroups) == soakPublishNets {
		s.allRefused = time.Now()
	}
}

// bigReads reads big answers at once from several accounts: history
// pages of the publishers' channels, the pending requests of a channel of
// 64 KiB key packages, and inboxes.
func (s *soak) bigReads(ctx context.Context, atk *attackers, i int) {
	for n := 0; ctx.Err() == nil; n++ {
		var status int
		var code string
		var err error
		var what string
		switch n % 3 {
		case 0:
			a := atk.publishers[(i+n)%len(atk.publishers)]
			tok, terr := a.relayToken(ctx, s)
			if terr != nil {
				s.count("big reads", "token refused")
				break
			}
			what = "history"
			status, code, _, err = apiCall(ctx, clientFrom(a.ip), "GET", s.p.relURL+"/v1/sync?limit=500&since_seq=0&channel="+strings.ReplaceAll(a.channel, "/", "%2F"), tok, nil, true)
		case 1:
			what = "pending"
			status, code, _, err = apiCall(ctx, clientFrom(atk.pendingOwner.ip), "GET", s.p.apiURL+"/v1/channels/pending?channel="+strings.ReplaceAll(atk.pendingOwner.channel, "/", "%2F"), atk.pendingOwner.key, nil, true)
		default:
			a := atk.readers[(i+n)%len(atk.readers)]
			what = "inbox"
			status, code, _, err = apiCall(ctx, clientFrom(a.ip), "GET", s.p.apiURL+"/v1/inbox", a.key, nil, true)
		}
		if what != "" {
			s.count("big reads", what+" "+outcome(status, code, err))
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// upgradeRefused names a refused WebSocket upgrade by its answer.
func upgradeRefused(resp *http.Response) string {
	if resp == nil {
		return "upgrade failed"
	}
	return fmt.Sprintf("upgrade refused %d", resp.StatusCode)
}

type soakFrame struct {
	Type    string `json:"type"`
	Token   string `json:"token,omitempty"`
	Channel string `json:"channel,omitempty"`
	Payload string `json:"payload,omitempty"`
	Code    string `json:"code,omitempty"`
	Scope   string `json:"scope,omitempty"`
	Message string `json:"message,omitempty"`
}

// retryCounter counts the answers a seat waits out and sends again: 429
// and 503 with a Retry-After.
type retryCounter struct {
	s    *soak
	base http.RoundTripper
}

func (rc retryCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := rc.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == 429 || resp.StatusCode == 503) && resp.Header.Get("Retry-After") != "" {
		rc.s.mu.Lock()
		rc.s.retries[fmt.Sprintf("%d %s %s", resp.StatusCode, r.Method, r.URL.Path)]++
		rc.s.mu.Unlock()
	}
	return resp, err
}

// honestSeat is a new person: a seat of its own on an address of its own
// (in a /24 of its own), signed in.
func (s *soak) honestSeat(ctx context.Context) (*seat.Seat, string, error) {
	k := int(s.nextHonest.Add(1))
	ip := addr(10+k/250, k%250, 1)
	hc := &http.Client{Transport: retryCounter{s, clientFrom(ip).Transport}}
	home := s.t.TempDir()
	st, err := seat.Open(ctx, seat.Config{Home: home, APIURL: s.p.apiURL, RelayURL: s.p.relURL, HTTPClient: hc})
	if err != nil {
		return nil, "", err
	}
	var did string
	err = s.timed("sign-in", func() error {
		var err error
		if did, err = st.Init(ctx); err != nil {
			return err
		}
		a, err := st.SignIn(ctx, fmt.Sprintf("person%d@honest.test", k), fmt.Sprintf("honest%d", k))
		if err == nil {
			s.mu.Lock()
			s.honestIDs = append(s.honestIDs, a.AccountID)
			s.mu.Unlock()
		}
		return err
	})
	s.mu.Lock()
	s.honestSeats++
	s.mu.Unlock()
	if err != nil {
		st.Close(context.Background())
		return nil, "", err
	}
	return st, did, nil
}

// timed runs f, records its latency under op when it succeeds and its
// error when it does not.
func (s *soak) timed(op string, f func() error) error {
	start := time.Now()
	err := f()
	d := time.Since(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && s.stopped.Load() {
		// The end of the soak cut it short.
		s.cutShort++
		return err
	}
	if err != nil {
		s.honestErrs = append(s.honestErrs, fmt.Sprintf("%s at %s: %v", op, time.Since(s.start).Round(time.Second), err))
		return err
	}
	s.lat[op] = append(s.lat[op], d)
	return nil
}

// honestWorker makes a room of two new people, has them talk and read a
// few times, and starts over with two more, until ctx ends. Each
// operation has a generous deadline of its own, never a timing check.
func (s *soak) honestWorker(ctx context.Context, w int) {
	for ctx.Err() == nil {
		s.honestRound(ctx, w)
	}
}

func (s *soak) honestRound(stop context.Context, w int) {
	// The end of the soak cancels what is in flight (timed does not count
	// that as a failure); each round has a generous deadline of its own.
	ctx, cancel := context.WithTimeout(stop, 5*time.Minute)
	defer cancel()
	owner, _, err := s.honestSeat(ctx)
	if err != nil {
		pause(stop, time.Second)
		return
	}
	defer owner.Close(context.Background())
	joiner, joinerDID, err := s.honestSeat(ctx)
	if err != nil {
		pause(stop, time.Second)
		return
	}
	defer joiner.Close(context.Background())
	var room string
	if s.timed("create room", func() error { room, err = owner.Room(fmt.Sprintf("talk%d", w)).Create(ctx, nil); return err }) != nil {
		return
	}
	if s.timed("join", func() error {
		tok, err := owner.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
		if err != nil {
			return err
		}
		if _, err := joiner.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrWelcomeWait) {
			return fmt.Errorf("join before the admit: %v", err)
		}
		adm, err := owner.Room(room).Admit(ctx)
		if err != nil {
			return err
		}
		if len(adm) != 1 || adm[0].Identity != joinerDID {
			return fmt.Errorf("admitted %+v, not the joiner", adm)
		}
		_, err = joiner.Room(room).Join(ctx, "", &seat.JoinOptions{Wait: time.Minute})
		return err
	}) != nil {
		return
	}
	for r := 0; r < 5 && stop.Err() == nil; r++ {
		for _, pair := range [][2]*seat.Seat{{owner, joiner}, {joiner, owner}} {
			text := fmt.Sprintf("round %d from %p", r, pair[0])
			if s.timed("send", func() error { _, err := pair[0].Room(room).Send(ctx, text); return err }) != nil {
				return
			}
			if s.timed("read", func() error { return readUntil(ctx, pair[1], room, text) }) != nil {
				return
			}
		}
		pause(stop, 300*time.Millisecond)
	}
}

// readUntil syncs room until text arrives.
func readUntil(ctx context.Context, st *seat.Seat, room, text string) error {
	for {
		msgs, err := st.Room(room).Sync(ctx)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Kind == "" && m.Text == text {
				return nil
			}
		}
		if !pause(ctx, 100*time.Millisecond) {
			return fmt.Errorf("%q never arrived: %w", text, ctx.Err())
		}
	}
}

// health asks both planes' public /health, and the health listener's,
// from an honest address twice a second.
func (s *soak) health(ctx context.Context) {
	hc := clientFrom(addr(9, 0, 1))
	for ctx.Err() == nil {
		for _, h := range []struct{ op, url string }{
			{"health (relay)", s.p.relURL}, {"health (directory)", s.p.apiURL}, {"health (own listener)", s.p.healthURL},
		} {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			s.timed(h.op, func() error {
				status, _, _, err := apiCall(rctx, hc, "GET", h.url+"/health", "", nil)
				if err == nil && status != 200 {
					err = fmt.Errorf("status %d", status)
				}
				return err
			})
			cancel()
		}
		pause(ctx, 500*time.Millisecond)
	}
}

// sample records the process's memory and the data folder's size every
// two seconds.
func (s *soak) sample(ctx context.Context) {
	for {
		s.sampleOnce()
		if !pause(ctx, 2*time.Second) {
			return
		}
	}
}

func (s *soak) sampleOnce() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	relay, dir := int64(0), int64(0)
	filepath.WalkDir(s.data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		n := diskUsage(path)
		if strings.HasPrefix(filepath.Base(path), "directory.db") {
			dir += n
		} else {
			relay += n
		}
		return nil
	})
	s.mu.Lock()
	s.samples = append(s.samples, soakSample{at: time.Since(s.start), rss: processRSS(), heap: ms.HeapInuse, sys: ms.Sys, relayDisk: relay, dirDisk: dir})
	s.mu.Unlock()
}

func mib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q * float64(len(ds)-1))
	return ds[i]
}

// report logs the figures, writes them as markdown with -abuse.report,
// and fails the test on what must not happen.
func (s *soak) report() {
	t := s.t
	s.mu.Lock()
	defer s.mu.Unlock()
	var md strings.Builder
	fmt.Fprintf(&md, "Honest operations (%d seats; latencies of the ones that succeeded):\n\n", s.honestSeats)
	fmt.Fprintf(&md, "| operation | count | p50 | p99 | max |\n| --- | ---: | ---: | ---: | ---: |\n")
	ops := make([]string, 0, len(s.lat))
	for op := range s.lat {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		ds := slices.Clone(s.lat[op])
		slices.Sort(ds)
		fmt.Fprintf(&md, "| %s | %d | %v | %v | %v |\n", op, len(ds), quantile(ds, 0.5).Round(time.Millisecond),
			quantile(ds, 0.99).Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	fmt.Fprintf(&md, "\nDocumented retries the honest seats waited out: ")
	if len(s.retries) == 0 {
		md.WriteString("none.\n")
	} else {
		md.WriteString("\n\n")
		for _, k := range slices.Sorted(mapKeys(s.retries)) {
			fmt.Fprintf(&md, "- %s: %d\n", k, s.retries[k])
		}
	}
	fmt.Fprintf(&md, "\nErrors the honest seats saw: %d (and %d operations cut short by the end of the run).\n", len(s.honestErrs), s.cutShort)
	fmt.Fprintf(&md, "\nWhat the attacks got:\n\n| attack | outcome | count |\n| --- | --- | ---: |\n")
	for _, a := range slices.Sorted(mapKeys(s.attacks)) {
		for _, o := range slices.Sorted(mapKeys(s.attacks[a])) {
			fmt.Fprintf(&md, "| %s | %s | %d |\n", a, o, s.attacks[a][o])
		}
	}
	fmt.Fprintf(&md, "\nThe test process (servers, attackers and seats) and the data folder over time "+
		"(RSS is VmRSS of /proc/self/status; heap is runtime.MemStats HeapInuse, sys its Sys; disk is the blocks allocated to the files, in MiB):\n\n")
	fmt.Fprintf(&md, "| t | RSS | heap | sys | relay disk | directory disk |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	every := max(1, len(s.samples)/30)
	for i, sm := range s.samples {
		if i%every != 0 && i != len(s.samples)-1 {
			continue
		}
		fmt.Fprintf(&md, "| %v | %s | %s | %s | %s | %s |\n", sm.at.Round(time.Second), mib(int64(sm.rss)), mib(int64(sm.heap)),
			mib(int64(sm.sys)), mib(sm.relayDisk), mib(sm.dirDisk))
	}
	var flat string
	if !s.allRefused.IsZero() {
		flat = s.checkFlat()
		md.WriteString("\n" + flat + "\n")
	} else {
		md.WriteString("\nNot every publishing group reached its budget, so disk flatness was not checked.\n")
	}
	t.Log("\n" + md.String())
	if *abuseReport != "" {
		if err := os.WriteFile(*abuseReport, []byte(md.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, e := range s.honestErrs {
		t.Errorf("an honest seat saw: %s", e)
	}
	for _, a := range []string{"stranger claims", "stranger welcomes"} {
		for o, n := range s.attacks[a] {
			if strings.HasPrefix(o, "2") {
				t.Errorf("%s: %d answered %s", a, n, o)
			}
		}
	}
	if strings.HasPrefix(flat, "FAIL") {
		t.Error(flat)
	}
}

// checkFlat compares the data folder at the end with its size a few
// seconds after every publishing group was refused (the indexer and the
// log have caught up by then): it may grow by soakDiskTolerance and what
// the honest seats made since.
func (s *soak) checkFlat() string {
	since := s.allRefused.Sub(s.start) + 4*time.Second
	var base *soakSample
	for i := range s.samples {
		if s.samples[i].at >= since {
			base = &s.samples[i]
			break
		}
	}
	last := s.samples[len(s.samples)-1]
	if base == nil || base == &s.samples[len(s.samples)-1] {
		return "Every publishing group was refused too late in the run to check the disk afterwards."
	}
	before, after := base.relayDisk+base.dirDisk, last.relayDisk+last.dirDisk
	tol := int64(soakDiskTolerance) + int64(s.honestSeats)*soakDiskPerSeat
	msg := fmt.Sprintf("Every publishing group was refused by %v; the data folder went from %s MiB (at %v) to %s MiB (at %v); allowed: %s MiB more "+
		"(%s MiB, and %s MiB for each of the %d honest seats).",
		s.allRefused.Sub(s.start).Round(time.Second), mib(before), base.at.Round(time.Second), mib(after), last.at.Round(time.Second),
		mib(tol), mib(soakDiskTolerance), mib(soakDiskPerSeat), s.honestSeats)
	if after-before > tol {
		return "FAIL: the data folder kept growing once the budgets refused: " + msg
	}
	return msg
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
