package directory

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/jwt"
)

// signupVia posts an account of org from client, with the extra fields.
func (e *env) signupVia(client *http.Client, org string, extra map[string]string) reply {
	e.t.Helper()
	body := map[string]string{"email": org + "@example.com", "org": org}
	for k, v := range extra {
		body[k] = v
	}
	return e.doVia(client, "POST", "/v1/accounts", "", body)
}

// forwardedFrom is a client that says, to a directory that trusts
// loopback as its proxy, that it forwards for ip.
func forwardedFrom(ip string) *http.Client {
	return &http.Client{Transport: headerTransport{"X-Forwarded-For", ip}}
}

type headerTransport struct{ k, v string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.k, h.v)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSignupPerNetwork: signups from many addresses of one IPv4 /24 (from
// loopback source addresses, and behind a trusted proxy) or one IPv6 /64
// stop at the network's limit although every address is within its own,
// while another network still signs up; refused signups change nothing.
func TestSignupPerNetwork(t *testing.T) {
	limits := Limits{Signup: Rate{PerAddr: Bucket{Burst: 2, Every: time.Hour}}, SignupPerNet: Bucket{Burst: 5, Every: time.Hour}}
	t.Run("loopback", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Limits = limits })
		n := 0
		for i := 1; i <= 4; i++ {
			c := e.clientFrom(fmt.Sprintf("127.0.0.%d", i))
			for j := range 2 {
				r := e.signupVia(c, fmt.Sprintf("o%d-%d", i, j), nil)
				if r.status == 201 {
					n++
					continue
				}
				want(t, r, 429, "rate_limited")
				if !strings.Contains(r.str("message"), "network") {
					t.Fatalf("refusal %s does not name the network", r)
				}
			}
		}
		if n != 5 {
			t.Fatalf("%d signups from one /24, want 5", n)
		}
		// 127.0.1.0/24 is another network.
		want(t, e.signupVia(e.clientFrom("127.0.1.1"), "other", nil), 201, "")
	})
	t.Run("proxy", func(t *testing.T) {
		e := newEnv(t, func(c *Config) {
			c.Limits = limits
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		})
		// An IPv6 client is counted by its /64 already as an address,
		// so the /64 stops at the address's burst.
		for k, tc := range []struct {
			prefix, other string
			n             int
		}{
			{"198.51.100.%d", "198.51.101.1", 5},
			{"2001:db8:1:2::%x", "2001:db8:1:3::1", 2},
		} {
			n := 0
			for i := 1; i <= 6; i++ {
				r := e.signupVia(forwardedFrom(fmt.Sprintf(tc.prefix, i)), fmt.Sprintf("p%d-%d", k, i), nil)
				if r.status == 201 {
					n++
				} else {
					want(t, r, 429, "rate_limited")
				}
			}
			if n != tc.n {
				t.Fatalf("%s: %d signups, want %d", tc.prefix, n, tc.n)
			}
			before := e.snapshot()
			want(t, e.signupVia(forwardedFrom(fmt.Sprintf(tc.prefix, 7)), fmt.Sprint("refused-", k), nil), 429, "rate_limited")
			if e.snapshot() != before {
				t.Fatal("a refused signup changed the store")
			}
			want(t, e.signupVia(forwardedFrom(tc.other), fmt.Sprint("other-", k), nil), 201, "")
		}
	})
}

// TestSignupGroupClaims: the accounts made from one /24 share a signup
// group, those from another network do not, and the tokens they mint say
// so (grp) with their org; the group id is not the address. Accounts the
// operator made have no group.
func TestSignupGroupClaims(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	claims := func(key string) jwt.Claims {
		t.Helper()
		c, err := jwt.Verify(testJWTSecret, e.jwt(key, nil), e.clock.Now(), jwt.AudienceAPI)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	key := func(ip, org string) string {
		r := e.signupVia(forwardedFrom(ip), org, nil)
		want(t, r, 201, "")
		return r.str("api_key")
	}
	a, b, c := claims(key("198.51.100.7", "ga")), claims(key("198.51.100.200", "gb")), claims(key("198.51.101.7", "gc"))
	if a.Group == "" || a.Group != b.Group || a.Group == c.Group || a.Org != "ga" || c.Org != "gc" {
		t.Fatalf("groups %q %q %q, orgs %q %q", a.Group, b.Group, c.Group, a.Org, c.Org)
	}
	if strings.Contains(a.Group, "198") || strings.Contains(e.snapshot(), "198.51") {
		t.Fatalf("the group id or the store holds the address: %q", a.Group)
	}
	_, opKey := e.provision("operator-made")
	if g := claims(opKey); g.Group != "" || g.Org != "operator-made" {
		t.Fatalf("operator's account claims %+v", g)
	}
}

// TestSignupModes: "invite" lets in only an org invite or an operator's
// signup token, each once; "closed" only the operator; the old OpenSignup
// field still means open or closed.
func TestSignupModes(t *testing.T) {
	t.Run("invite", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Signup = SignupInvite })
		before := e.snapshot()
		want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "a@example.com", "org": "acme"}), 403, "signup_requires_invite")
		want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "a@example.com", "org": "acme", "signup_token": prefixSignupToken + "guess"}), 403, "invalid_signup_token")
		if e.snapshot() != before {
			t.Fatal("refused signups changed the store")
		}
		// Only the operator mints signup tokens.
		_, stranger := e.provision("stranger")
		want(t, e.do("POST", "/v1/internal/signup-tokens", stranger, nil), 401, "unauthorized")
		want(t, e.do("POST", "/v1/internal/signup-tokens", testInternalSecret, map[string]any{"ttl_seconds": 1}), 400, "invalid_request")
		r := e.do("POST", "/v1/internal/signup-tokens", testInternalSecret, nil)
		want(t, r, 201, "")
		tok := r.str("token")
		if !strings.HasPrefix(tok, prefixSignupToken) || strings.Contains(e.snapshot(), tok) {
			t.Fatalf("token %q, or stored in the clear", tok)
		}
		r = e.do("POST", "/v1/accounts", "", map[string]string{"email": "a@example.com", "org": "acme", "signup_token": tok})
		want(t, r, 201, "")
		// Used once.
		want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "b@example.com", "org": "beta", "signup_token": tok}), 403, "invalid_signup_token")
		// An org invite lets a person into that org.
		inv := e.orgInvite(r.str("api_key"), "acme", 1)
		want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "c@example.com", "org": "acme", "org_invite": inv}), 201, "")
		// Expired tokens are refused.
		r = e.do("POST", "/v1/internal/signup-tokens", testInternalSecret, map[string]any{"ttl_seconds": 60})
		e.clock.Advance(2 * time.Minute)
		want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "d@example.com", "org": "delta", "signup_token": r.str("token")}), 403, "invalid_signup_token")
	})
	t.Run("closed", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Signup = SignupClosed; c.OpenSignup = true })
		want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "a@example.com", "org": "acme"}), 401, "unauthorized")
		want(t, e.do("POST", "/v1/accounts", testInternalSecret, map[string]string{"email": "a@example.com", "org": "acme"}), 201, "")
	})
	t.Run("deprecated", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.OpenSignup = false })
		want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "a@example.com", "org": "acme"}), 401, "unauthorized")
		if _, err := New(context.Background(), Config{JWTSecret: testJWTSecret, Signup: "sometimes"}); err == nil {
			t.Fatal("an unknown signup mode was accepted")
		}
	})
}

// TestIdleAccounts: sign-ins are recorded to the day; the operator lists
// the accounts idle for at least N days (paged) and removes one, which
// is revoked and gone with its keys; an account that owns a channel is
// not removed; nobody else may list or remove.
func TestIdleAccounts(t *testing.T) {
	e := newEnv(t, nil)
	idleID, idleKey := e.account("idle")
	activeID, activeKey := e.account("active")
	ownerID, ownerKey := e.account("owner")
	e.channel(ownerKey, "owner/rooms/a")
	e.clock.Advance(40 * 24 * time.Hour)
	e.jwt(activeKey, nil)
	list := func(bearer, q string) reply {
		t.Helper()
		return e.do("GET", "/v1/internal/accounts?"+q, bearer, nil)
	}
	want(t, list(activeKey, "idle_days=30"), 401, "unauthorized")
	r := list(testInternalSecret, "idle_days=30")
	want(t, r, 200, "")
	ids := map[string]bool{}
	for _, a := range r.body["accounts"].([]any) {
		ids[a.(map[string]any)["account_id"].(string)] = true
	}
	if !ids[idleID] || !ids[ownerID] || ids[activeID] || len(ids) != 2 {
		t.Fatalf("idle accounts %v (idle %s, owner %s, active %s)", ids, idleID, ownerID, activeID)
	}
	// Pages.
	r = list(testInternalSecret, "limit=1")
	want(t, r, 200, "")
	if r.body["has_more"] != true || len(r.body["accounts"].([]any)) != 1 {
		t.Fatalf("first page %s", r)
	}
	r = list(testInternalSecret, "limit=5&after="+r.str("next"))
	if r.body["has_more"] != false || len(r.body["accounts"].([]any)) != 2 {
		t.Fatalf("second page %s", r)
	}
	want(t, list(testInternalSecret, "idle_days=-1"), 400, "invalid_request")

	want(t, e.do("DELETE", "/v1/internal/accounts/"+idleID, activeKey, nil), 401, "unauthorized")
	want(t, e.do("DELETE", "/v1/internal/accounts/"+ownerID, testInternalSecret, nil), 409, "account_owns_channels")
	want(t, e.do("DELETE", "/v1/internal/accounts/"+idleID, testInternalSecret, nil), 200, "")
	want(t, e.do("POST", "/v1/tokens", idleKey, nil), 401, "unauthorized")
	want(t, e.do("DELETE", "/v1/internal/accounts/"+idleID, testInternalSecret, nil), 404, "account_not_found")
	subs, _, err := e.s.RevokedSince(context.Background(), 0)
	if err != nil || len(subs) != 1 || subs[0] != idleID {
		t.Fatalf("revoked %v, %v", subs, err)
	}
	// The owner still signs in.
	e.jwt(ownerKey, nil)
}

// TestListedAccountsSayDisabled: the operator's list of accounts marks a
// revoked (disabled) account, and only that one.
func TestListedAccountsSayDisabled(t *testing.T) {
	e := newEnv(t, nil)
	offID, _ := e.account("off")
	onID, _ := e.account("on")
	want(t, e.do("POST", "/v1/revocations", testInternalSecret, map[string]any{"did": "did:skytale:" + offID}), 200, "")
	r := e.do("GET", "/v1/internal/accounts", testInternalSecret, nil)
	want(t, r, 200, "")
	got := map[string]any{}
	for _, a := range r.body["accounts"].([]any) {
		m := a.(map[string]any)
		got[m["account_id"].(string)] = m["disabled"]
	}
	if got[offID] != true || got[onID] != false {
		t.Fatalf("disabled: %v (off %s, on %s)", got, offID, onID)
	}
}
