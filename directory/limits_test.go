package directory

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// clientFrom returns a client whose connections leave from the loopback
// address ip (127.0.0.x), so the directory sees a distinct remote address.
// It skips the test where the system cannot bind that address.
func (e *env) clientFrom(ip string) *http.Client {
	e.t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		e.t.Skipf("cannot dial from %s: %v", ip, err)
	}
	c.Close()
	tr := &http.Transport{DialContext: d.DialContext}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func grantBody(t testing.TB) map[string]string {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"device_key": base64.StdEncoding.EncodeToString(k.PublicKey().Bytes()), "label": "laptop"}
}

// withLimits is a newEnv config with limits on: l over the defaults.
func withLimits(l Limits) func(*Config) {
	return func(c *Config) { c.Limits = l }
}

// TestGrantFloodIsContained: unauthenticated device grants from one
// address used to fill a global cap of 10,000 open grants, after which
// every user's grant creation got 429 for ten minutes. Now one address gets
// at most its own share and everyone else is unaffected.
func TestGrantFloodIsContained(t *testing.T) {
	e := newEnv(t, withLimits(Limits{}))
	mallory := e.clientFrom("127.0.0.2")
	alice := e.clientFrom("127.0.0.3")
	// Alice signs up before the flood; so does a user behind Mallory's
	// address.
	r := e.doVia(alice, "POST", "/v1/accounts", "", map[string]string{"email": "alice@example.com", "org": "acme"})
	want(t, r, 201, "")
	aliceKey := r.str("api_key")
	r = e.doVia(mallory, "POST", "/v1/accounts", "", map[string]string{"email": "bob@example.com", "org": "bobco"})
	want(t, r, 201, "")
	bobKey := r.str("api_key")

	body := grantBody(t)
	count := map[string]int{}
	for range 10_001 {
		r := e.doVia(mallory, "POST", "/v1/device/grants", "", body)
		switch {
		case r.status == 201:
			count["created"]++
		case r.status == 429 && (r.code() == "rate_limited" || r.code() == "too_many_grants"):
			if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
				t.Fatalf("429 without a Retry-After: %s", r)
			}
			count[r.code()]++
		default:
			t.Fatalf("grant %d: %s", count["created"], r)
		}
	}
	if count["created"] != DefaultLimits.OpenGrantsPerAddr {
		t.Fatalf("one address created %d grants (%v), want %d", count["created"], count, DefaultLimits.OpenGrantsPerAddr)
	}

	// Alice, from another address, creates a grant and approves it.
	r = e.doVia(alice, "POST", "/v1/device/grants", "", grantBody(t))
	want(t, r, 201, "")
	want(t, e.doVia(alice, "POST", "/v1/device/grants/approve", aliceKey, map[string]string{"user_code": r.str("user_code")}), 200, "")
	// Everyone still signs in, Bob behind Mallory's address too.
	want(t, e.doVia(alice, "POST", "/v1/tokens", aliceKey, nil), 201, "")
	want(t, e.doVia(mallory, "POST", "/v1/tokens", bobKey, nil), 201, "")
}

// tightLimits gives every bucket a burst of 2 refilled once a minute
// (per address or per account, the other unlimited).
func tightLimits(perAccount bool) Limits {
	tight := Bucket{Burst: 2, Every: time.Minute}
	open := Bucket{Burst: -1}
	r := Rate{PerAddr: tight, PerAccount: open}
	if perAccount {
		r = Rate{PerAddr: open, PerAccount: tight}
	}
	return Limits{Signup: Rate{PerAddr: tight}, Token: r, Channel: r, Invite: r, Grant: r, Join: r, Member: r, OpenGrantsPerAddr: -1}
}

// provision creates an account in process, past every limit.
func (e *env) provision(org string) (id, key string) {
	e.t.Helper()
	id, key, err := e.s.CreateAccount(context.Background(), org+"@example.com", org)
	if err != nil {
		e.t.Fatal(err)
	}
	return id, key
}

// grantInProcess creates a pending device grant past every limit and
// returns its user code.
func (e *env) grantInProcess() string {
	e.t.Helper()
	id, _ := e.s.newID()
	_, poll, _ := e.s.newSecret(prefixPollToken)
	now := e.clock.Now()
	dk, _ := ecdh.X25519().GenerateKey(rand.Reader)
	code, err := e.s.store.createGrant(context.Background(), grantParams{
		id: id, deviceKey: dk.PublicKey().Bytes(), pollHash: poll, newCode: e.s.newUserCode,
		expires: now.Add(GrantLifetime), now: now,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return code
}

// limitedRequests returns, for each limited kind, a function making one
// request of that kind with key (fresh inputs each call, so only the
// limit can refuse). Its setup runs in process, past the limits.
func limitedRequests(t *testing.T, e *env, ownerID string) map[string]func(c *http.Client, key string) reply {
	i := 0
	next := func() int { i++; return i }
	const ch = "acme/limits/room"
	if ownerID != "" {
		if _, err := e.s.store.registerChannel(t.Context(), "room-id", ch, ownerID, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	invite := func() string {
		tok, hash, _ := e.s.newSecret(prefixInvite)
		if err := e.s.store.createInvite(t.Context(), ch, ownerID, hash, 1, false, e.clock.Now().Add(time.Hour), e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// ownChannel registers a fresh channel for the account behind key.
	ownChannel := func(key string) string {
		name := fmt.Sprintf("acme/limits/o%d", next())
		if p, _, err := e.s.store.lookupKey(t.Context(), hashSecret(key)); err == nil {
			if _, err := e.s.store.registerChannel(t.Context(), name, name, p.account, e.clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		return name
	}
	return map[string]func(*http.Client, string) reply{
		"token": func(c *http.Client, key string) reply { return e.doVia(c, "POST", "/v1/tokens", key, nil) },
		"channel": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/channels", key, map[string]string{"name": fmt.Sprintf("acme/limits/c%d", next())})
		},
		"seat": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/seats", key, e.seatBody(key, fmt.Sprint(next()), fmt.Sprintf("acme/limits/s%d", next())))
		},
		"invite": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/channels/invites", key, map[string]string{"channel": ownChannel(key)})
		},
		"federation invite": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/federation/invites", key, map[string]string{"channel": ownChannel(key), "org": "partner"})
		},
		"org invite": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/orgs/invites", key, map[string]string{"org": "acme"})
		},
		"grant approve": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/device/grants/approve", key, map[string]string{"user_code": e.grantInProcess()})
		},
		"grant lookup": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/device/grants/lookup", key, map[string]string{"user_code": e.grantInProcess()})
		},
		"member add": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/channels/members", key, map[string]string{"channel": ownChannel(key), "account_id": ownerID})
		},
		"member remove": func(c *http.Client, key string) reply {
			return e.doVia(c, "DELETE", membersPath(ownChannel(key), ownerID), key, nil)
		},
		"fence": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/channels/fence", key, map[string]any{"channel": ownChannel(key), "epoch": 1})
		},
		"join": func(c *http.Client, key string) reply {
			return e.doVia(c, "POST", "/v1/channels/join", key, map[string]string{
				"channel": ch, "token": invite(), "identity": fmt.Sprintf("did:web:%d", next()),
				"key_package": base64.StdEncoding.EncodeToString([]byte("kp")),
			})
		},
	}
}

// wantLimited checks a 429 rate_limited answer with its Retry-After.
func wantLimited(t *testing.T, what string, r reply, retry string) {
	t.Helper()
	if r.status != 429 || r.code() != "rate_limited" || r.str("message") == "" {
		t.Fatalf("%s: got %s, want 429 rate_limited", what, r)
	}
	if got := r.header.Get("Retry-After"); got != retry {
		t.Fatalf("%s: Retry-After %q, want %q", what, got, retry)
	}
}

// TestRateLimitsPerAccount: each kind of request has its own bucket per
// account; another account is not affected, and the bucket refills.
func TestRateLimitsPerAccount(t *testing.T) {
	for kind := range limitedRequests(t, newEnv(t, nil), "") {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, withLimits(tightLimits(true)))
			c := e.ts.Client()
			ownerID, _ := e.provision("acme")
			_, other := e.provision("acme")
			_, key := e.provision("acme")
			do := limitedRequests(t, e, ownerID)[kind]
			for i := range 2 {
				if r := do(c, key); r.status >= 300 {
					t.Fatalf("request %d: %s", i, r)
				}
			}
			wantLimited(t, kind, do(c, key), "60")
			if r := do(c, other); r.status >= 300 {
				t.Fatalf("another account was limited: %s", r)
			}
			e.clock.Advance(30 * time.Second)
			wantLimited(t, kind, do(c, key), "30")
			e.clock.Advance(30 * time.Second)
			if r := do(c, key); r.status >= 300 {
				t.Fatalf("after the refill: %s", r)
			}
		})
	}
}

// TestRateLimitsPerAddr: each kind of request has its own bucket per
// remote address; another address is not affected.
func TestRateLimitsPerAddr(t *testing.T) {
	for kind := range limitedRequests(t, newEnv(t, nil), "") {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, withLimits(tightLimits(false)))
			one, two := e.clientFrom("127.0.0.2"), e.clientFrom("127.0.0.3")
			ownerID, _ := e.provision("acme")
			_, a := e.provision("acme")
			_, b := e.provision("acme")
			do := limitedRequests(t, e, ownerID)[kind]
			if r := do(one, a); r.status >= 300 {
				t.Fatal(r)
			}
			if r := do(one, b); r.status >= 300 {
				t.Fatal(r)
			}
			wantLimited(t, kind, do(one, a), "60")
			// Not even a bad credential gets past the address's bucket.
			wantLimited(t, kind, do(one, "sk_live_nonsense"), "60")
			if r := do(two, a); r.status >= 300 {
				t.Fatalf("another address was limited: %s", r)
			}
		})
	}
}

func TestSignupAndGrantLimitsPerAddr(t *testing.T) {
	e := newEnv(t, withLimits(tightLimits(false)))
	one, two := e.clientFrom("127.0.0.2"), e.clientFrom("127.0.0.3")
	signup := func(c *http.Client, org string) reply {
		return e.doVia(c, "POST", "/v1/accounts", "", map[string]string{"email": "x@example.com", "org": org})
	}
	want(t, signup(one, "a1"), 201, "")
	want(t, signup(one, "a2"), 201, "")
	before := e.snapshot()
	wantLimited(t, "signup", signup(one, "a3"), "60")
	if e.snapshot() != before {
		t.Fatal("a refused signup changed the store")
	}
	want(t, signup(two, "a3"), 201, "")
	// The operator is never limited.
	for i := range 5 {
		want(t, e.doVia(one, "POST", "/v1/accounts", testInternalSecret, map[string]string{"email": "x@example.com", "org": fmt.Sprint("op", i)}), 201, "")
	}

	grant := func(c *http.Client) reply { return e.doVia(c, "POST", "/v1/device/grants", "", grantBody(t)) }
	want(t, grant(one), 201, "")
	want(t, grant(one), 201, "")
	wantLimited(t, "grant", grant(one), "60")
	want(t, grant(two), 201, "")
}

// TestOpenGrantsPerAddr: an address may hold only so many pending grants;
// approving or expiring them frees its share, and other addresses never
// share it.
func TestOpenGrantsPerAddr(t *testing.T) {
	e := newEnv(t, withLimits(Limits{Grant: Rate{PerAddr: Bucket{Burst: -1}, PerAccount: Bucket{Burst: -1}}, OpenGrantsPerAddr: 3}))
	one, two := e.clientFrom("127.0.0.2"), e.clientFrom("127.0.0.3")
	_, key := e.account("acme")
	grant := func(c *http.Client) reply { return e.doVia(c, "POST", "/v1/device/grants", "", grantBody(t)) }
	var codes []string
	for range 3 {
		r := grant(one)
		want(t, r, 201, "")
		codes = append(codes, r.str("user_code"))
		e.clock.Advance(time.Minute)
	}
	before := e.snapshot()
	r := grant(one)
	want(t, r, 429, "too_many_grants")
	// The oldest grant expires 10 minutes after its creation, 3 minutes ago.
	if got := r.header.Get("Retry-After"); got != "420" {
		t.Fatalf("Retry-After %q, want 420", got)
	}
	if e.snapshot() != before {
		t.Fatal("a refused grant changed the store")
	}
	want(t, grant(two), 201, "")
	// Approving one frees a place.
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": codes[0]}), 200, "")
	want(t, grant(one), 201, "")
	want(t, grant(one), 429, "too_many_grants")
	// So does expiry.
	e.clock.Advance(8 * time.Minute)
	want(t, grant(one), 201, "")
}

// TestLimitsOff: with Limits.Off nothing is limited (benchmarks).
func TestLimitsOff(t *testing.T) {
	e := newEnv(t, withLimits(Limits{Off: true, Signup: Rate{PerAddr: Bucket{Burst: 1, Every: time.Hour}}, OpenGrantsPerAddr: 1}))
	for i := range 30 {
		want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "x@example.com", "org": fmt.Sprint("o", i)}), 201, "")
		want(t, e.do("POST", "/v1/device/grants", "", grantBody(t)), 201, "")
	}
}

// TestTrustedProxy: behind a trusted proxy the client's address is the
// rightmost X-Forwarded-For entry that is not a trusted proxy; from any
// other peer the header is ignored.
func TestTrustedProxy(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Limits = tightLimits(false)
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	signup := func(client *http.Client, xff ...string) int {
		req, _ := http.NewRequest("POST", e.ts.URL+"/v1/accounts", nil)
		for _, v := range xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Bodies are empty: 400 means the limit let the request through.
	for _, c := range []struct {
		xff  []string
		want int
	}{
		{[]string{"203.0.113.9, 198.51.100.1"}, 400},
		{[]string{"203.0.113.9", "198.51.100.1"}, 400},
		{[]string{"198.51.100.1"}, 429}, // the same client a third time
		{[]string{"198.51.100.1, 198.51.100.2"}, 400},
		{[]string{"198.51.100.2, 127.0.0.1"}, 400}, // a trusted hop is skipped
		{[]string{"198.51.100.2"}, 429},
		{[]string{"2001:db8::1"}, 400},
		{[]string{"[2001:db8::2]"}, 400},
		{[]string{"2001:db8::3"}, 429}, // the same /64
		{[]string{"garbage"}, 400},     // the TCP peer's address
		{nil, 400},                     // the proxy itself
		{[]string{"unknown"}, 429},
	} {
		if got := signup(e.ts.Client(), c.xff...); got != c.want {
			t.Fatalf("X-Forwarded-For %q: %d, want %d", c.xff, got, c.want)
		}
	}
	// An untrusted peer's header is ignored: it is counted as itself.
	other := e.clientFrom("127.0.0.2")
	for i, want := range []int{400, 400, 429} {
		if got := signup(other, fmt.Sprintf("203.0.113.%d", 100+i)); got != want {
			t.Fatalf("untrusted peer, request %d: %d, want %d", i, got, want)
		}
	}
}

// TestSharedProxyAddress: behind a proxy, one client's bogus sign-ins
// exhaust the sign-in bucket of everyone behind it unless the proxy is
// trusted; with TrustedProxies only that client is refused.
func TestSharedProxyAddress(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprint("trusted=", trusted), func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				c.Limits = Limits{Token: Rate{PerAddr: Bucket{Burst: 30, Every: time.Minute}}}
				if trusted {
					c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
				}
			})
			_, key := e.provision("alice")
			signIn := func(client, bearer string) int {
				req, _ := http.NewRequest("POST", e.ts.URL+"/v1/tokens", nil)
				req.Header.Set("X-Forwarded-For", client)
				req.Header.Set("Authorization", "Bearer "+bearer)
				resp, err := e.ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			for range 40 {
				signIn("203.0.113.66", prefixAPIKey+"bogus")
			}
			if got := signIn("203.0.113.66", key); got != 429 {
				t.Fatalf("the abusive client: %d, want 429", got)
			}
			got := signIn("203.0.113.7", key)
			if !trusted {
				// Without the setting the proxy is one client.
				if got != 429 {
					t.Fatalf("untrusted proxy: another client's sign-in %d, want 429", got)
				}
				return
			}
			if got != 201 {
				t.Fatalf("another client behind a trusted proxy: %d, want 201", got)
			}
		})
	}
}

// TestLimiterMemoryIsBounded: a flood of distinct addresses never makes
// the directory track more than MaxKeys of them per bucket set.
func TestLimiterMemoryIsBounded(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Limits = Limits{MaxKeys: 100}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	c := e.ts.Client()
	for i := range 2000 {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", e.ts.URL+"/v1/device/grants", nil)
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.1", i/256, i%256))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := e.s.limits.addr[limitGrant].Len(); n > 100 {
		t.Fatalf("%d addresses tracked, cap 100", n)
	}
}
