package directory

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSignupCannotClaimAnotherOrg: a second signup claiming an existing org used
// to succeed and register the org's channel names first. Now the org
// belongs to its first account.
func TestSignupCannotClaimAnotherOrg(t *testing.T) {
	e := newEnv(t, nil)
	_, acme := e.account("acme")
	before := e.snapshot()
	r := e.do("POST", "/v1/accounts", "", map[string]string{"email": "mallory@evil.example", "org": "acme"})
	want(t, r, 403, "org_taken")
	if !strings.Contains(r.str("message"), "org_invite") {
		t.Fatalf("refusal does not say what to do: %s", r)
	}
	if e.snapshot() != before {
		t.Fatal("a refused signup changed the store")
	}
	// The real acme still gets its channel.
	e.channel(acme, "acme/rooms/payroll")
}

func TestOrgInvites(t *testing.T) {
	e := newEnv(t, nil)
	_, acme := e.account("acme")
	_, globex := e.account("globex")
	seat := e.do("POST", "/v1/seats", acme, e.seatBody(acme, "z6MkOrg", "acme/seat/home"))
	want(t, seat, 201, "")
	scoped := seat.str("credential")

	mint := func(key string, body any) reply { return e.do("POST", "/v1/orgs/invites", key, body) }
	before := e.snapshot()
	want(t, mint("", map[string]any{"org": "acme"}), 401, "unauthorized")
	want(t, mint(globex, map[string]any{"org": "acme"}), 403, "wrong_org")
	want(t, mint(scoped, map[string]any{"org": "acme"}), 403, "forbidden")
	want(t, mint(e.jwt(scoped, nil), map[string]any{"org": "acme"}), 403, "forbidden")
	for _, bad := range []map[string]any{
		{"org": "acme", "max_uses": 0},
		{"org": "acme", "max_uses": 101},
		{"org": "acme", "ttl_seconds": 59},
		{"org": "acme", "ttl_seconds": 604801},
		{"org": "a/b"},
		{},
	} {
		want(t, mint(acme, bad), 400, "invalid_request")
	}
	want(t, mint(acme, `{"org":"acme","max_uses":"1"}`), 400, "invalid_json")
	want(t, mint(acme, `{"org":"acme","uses":1}`), 400, "invalid_json")
	if e.snapshot() != before {
		t.Fatal("a refused org invite changed the store")
	}

	// Defaults: one use, one hour; stored only as a hash.
	r := mint(acme, map[string]any{"org": "acme"})
	want(t, r, 201, "")
	tok := r.str("token")
	if !strings.HasPrefix(tok, "skt_org_") || strings.Contains(e.snapshot(), tok) || strings.Contains(e.snapshot(), strings.TrimPrefix(tok, "skt_org_")) {
		t.Fatalf("org invite %q (or stored raw)", tok)
	}
	if exp, err := time.Parse(time.RFC3339, r.str("expires_at")); err != nil || !exp.Equal(e.clock.Now().Add(time.Hour)) {
		t.Fatalf("expires_at %q", r.str("expires_at"))
	}
	long := mint(acme, map[string]any{"org": "acme", "max_uses": 100, "ttl_seconds": 604800})
	want(t, long, 201, "")
	short := mint(acme, map[string]any{"org": "acme", "max_uses": 2, "ttl_seconds": 60}).str("token")
	gx := mint(globex, map[string]any{"org": "globex"}).str("token")

	signup := func(org, invite string) reply {
		return e.do("POST", "/v1/accounts", "", map[string]string{"email": "new@example.com", "org": org, "org_invite": invite})
	}
	before = e.snapshot()
	want(t, signup("acme", "skt_org_nonsense"), 403, "invalid_org_invite")
	want(t, signup("acme", gx), 403, "invalid_org_invite")   // another org's invite
	want(t, signup("newco", tok), 403, "invalid_org_invite") // an org that does not exist
	want(t, signup("acme", "sk_live_"+tok[8:]), 403, "invalid_org_invite")
	if e.snapshot() != before {
		t.Fatal("a refused invited signup changed the store")
	}

	// The invite lets one account in, once.
	r = signup("acme", tok)
	want(t, r, 201, "")
	if r.str("org") != "acme" {
		t.Fatalf("account = %s", r)
	}
	invited := r.str("api_key")
	want(t, signup("acme", tok), 403, "invalid_org_invite")
	// An invited account is of the org: it registers its channels and
	// invites others.
	e.channel(invited, "acme/rooms/ops")
	want(t, mint(invited, map[string]any{"org": "acme"}), 201, "")

	// Expiry.
	e.clock.Advance(61 * time.Second)
	want(t, signup("acme", short), 403, "invalid_org_invite")
	want(t, signup("acme", long.str("token")), 201, "")
}

// TestOrgOperatorProvisions: the operator (internal secret, or in process)
// creates accounts in an existing org without an invite.
func TestOrgOperatorProvisions(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OpenSignup = false })
	body := map[string]string{"email": "a@example.com", "org": "acme"}
	want(t, e.do("POST", "/v1/accounts", testInternalSecret, body), 201, "")
	want(t, e.do("POST", "/v1/accounts", testInternalSecret, body), 201, "")
	if _, _, err := e.s.CreateAccount(t.Context(), "b@example.com", "acme"); err != nil {
		t.Fatal(err)
	}
	var owners int
	e.queryRow(`SELECT COUNT(*) FROM orgs WHERE name = 'acme'`).Scan(&owners)
	if owners != 1 {
		t.Fatalf("%d org rows", owners)
	}
}

// TestConcurrentOrgSignupsNeverOverUse fires 20 signups at once with an
// org invite of max_uses 5: exactly 5 accounts are created.
func TestConcurrentOrgSignupsNeverOverUse(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		inv := e.orgInvite(owner, "acme", 5)
		count := raceStatuses(20, func(i int) int {
			return e.do("POST", "/v1/accounts", "", map[string]string{
				"email": fmt.Sprintf("u%d@acme.example", i), "org": "acme", "org_invite": inv,
			}).status
		})
		wantWinners(t, count, 5, 15)
		var uses, accounts int
		e.queryRow(`SELECT uses FROM org_invites`).Scan(&uses)
		e.queryRow(`SELECT COUNT(*) FROM accounts WHERE org = 'acme'`).Scan(&accounts)
		if uses != 5 || accounts != 6 {
			t.Fatalf("uses %d, accounts %d", uses, accounts)
		}
	})
}

// TestFederationNeedsOwnedOrg: declaring the org a federation invite names
// no longer passes its org check; an account the org invited does.
func TestFederationNeedsOwnedOrg(t *testing.T) {
	e := newEnv(t, nil)
	_, acme := e.account("acme")
	_, partner := e.account("partner")
	const ch = "acme/shared/agents"
	e.channel(acme, ch)
	r := e.do("POST", "/v1/federation/invites", acme, map[string]any{"channel": ch, "org": "partner", "max_uses": 5})
	want(t, r, 201, "")
	fed := r.str("token")
	fedJoin := func(key, identity string) reply {
		return e.do("POST", "/v1/channels/join", key, map[string]string{
			"channel": ch, "federation_token": fed, "identity": identity,
			"key_package": base64.StdEncoding.EncodeToString([]byte("kp")),
		})
	}

	// Mallory claims the partner org: refused, so she has no account there.
	want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "m@evil.example", "org": "partner"}), 403, "org_taken")
	_, mallory := e.account("evil")
	want(t, fedJoin(mallory, "did:web:mallory"), 403, "invalid_federation_token")

	// The partner org's own accounts join, the invited one too.
	want(t, fedJoin(partner, "did:web:p1"), 201, "")
	_, invited := e.account("partner")
	want(t, fedJoin(invited, "did:web:p2"), 201, "")
}

// TestOrgsBackfill opens a database written before orgs were owned: each
// org belongs to its earliest account, and joining it needs an invite.
func TestOrgsBackfill(t *testing.T) {
	path, db := oldDatabase(t, 3)
	for _, a := range []struct {
		id, org string
		at      int
	}{{"late", "acme", 20}, {"first", "acme", 10}, {"tie-a", "globex", 5}, {"tie-b", "globex", 5}} {
		if _, err := db.Exec(`INSERT INTO accounts (id, email, org, created_at) VALUES (?, 'x@example.com', ?, ?)`, a.id, a.org, a.at); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	c := newClock()
	e := newEnvFrom(t, Config{JWTSecret: testJWTSecret, OpenSignup: true, DBPath: path, Now: c.Now}, c)
	defer e.close()
	got := map[string]string{}
	rows, err := e.s.store.db.Query(`SELECT name, owner_id FROM orgs`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, o string
		rows.Scan(&n, &o)
		got[n] = o
	}
	rows.Close()
	if len(got) != 2 || got["acme"] != "first" || got["globex"] != "tie-a" {
		t.Fatalf("orgs after back-fill: %v", got)
	}
	want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "n@example.com", "org": "acme"}), 403, "org_taken")
	want(t, e.do("POST", "/v1/accounts", "", map[string]string{"email": "n@example.com", "org": "initech"}), 201, "")
}
