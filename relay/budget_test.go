package relay

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/datadir"
	"github.com/skytale-oss/skytale/internal/jwt"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// mintPayer mints a relay token with the org and grp claims the
// directory puts in (empty for none).
func mintPayer(t testing.TB, sub, org, grp string, at time.Time) string {
	t.Helper()
	tok, err := jwt.Mint(testSecret, jwt.Claims{Subject: sub, Org: org, Group: grp, Audience: jwt.AudienceRelay,
		IssuedAt: at, ExpiresAt: at.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// budgetOf returns the bytes a budget holds (stored, and on JetStream
// charged but not yet mirrored) once the archive has settled.
func budgetOf(t testing.TB, tr *testRelay, scope, key string) int64 {
	t.Helper()
	return settled(t, tr).Held(scope, key)
}

// waitBudget waits until a budget holds want bytes: on JetStream the
// mirror learns of an entry (and of what the cap pushed out for it) a
// little after the publish is acknowledged.
func waitBudget(t testing.TB, tr *testRelay, when, scope, key string, want int64) {
	t.Helper()
	waitfor.Nil(t, 10*time.Second, func() error {
		if got := budgetOf(t, tr, scope, key); got != want {
			return fmt.Errorf("%s: %s %q holds %d bytes, want %d", when, scope, key, got, want)
		}
		return nil
	})
}

// TestBudgetsAddUp: accounts that each stay under their quota together
// reach their signup group's budget, then their org's, then the server's,
// and each is refused with quota_exceeded naming that scope (nothing
// stored), while an account of another group or org still publishes. The
// budgets hold across a clean restart and a crash's recount, and bytes the
// TTL sweep and the cap evict go back to the budgets that paid for them.
func TestBudgetsAddUp(t *testing.T) { forBackends(t, testBudgetsAddUp) }

func testBudgetsAddUp(t *testing.T, be *testBackend) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true, OpenChannels: true, ArchiveCap: 4, ArchiveTTL: time.Hour, Now: clock,
		AccountQuota: 1000, GroupBudget: 2500, OrgBudget: 4000, ServerBudget: 6000}
	tr := be.start(t, cfg)
	p := bytes.Repeat([]byte{'p'}, 300)
	// Each account publishes on a channel of its own, so the cap evicts
	// nothing until the test asks it to.
	publish := func(tr *testRelay, sub, org, grp string, n int) *wsClient {
		t.Helper()
		c := dialWS(t, tr.URL, "/ws")
		c.auth(mintPayer(t, sub, org, grp, clock()))
		c.subscribe("acme/budget/" + sub)
		for range n {
			c.publishAck("acme/budget/"+sub, p)
		}
		return c
	}
	refused := func(c *wsClient, sub, scope string) {
		t.Helper()
		c.publish("acme/budget/"+sub, p)
		if m := c.expectError("quota_exceeded"); m["scope"] != scope {
			t.Fatalf("%s refused with %v, want scope %q", sub, m, scope)
		}
	}

	// Group g1 of org o1: three accounts of 900 bytes would be 2700.
	publish(tr, "a1", "o1", "g1", 3)
	publish(tr, "a2", "o1", "g1", 3)
	a3 := publish(tr, "a3", "o1", "g1", 2)
	refused(a3, "a3", backend.ScopeGroup)
	// Another group of o1 still publishes, until the org's 4000.
	publish(tr, "b1", "o1", "g2", 3)
	b2 := publish(tr, "b2", "o1", "g2", 2)
	refused(b2, "b2", backend.ScopeOrg)
	// Another org still publishes, until the server's 6000.
	publish(tr, "c1", "o2", "g3", 3)
	publish(tr, "c2", "o2", "g3", 3)
	c3 := publish(tr, "c3", "o2", "g3", 1)
	refused(c3, "c3", backend.ScopeServer)
	// A token without the claims is its own group and org, and still
	// meets the server's budget.
	d := dialWS(t, tr.URL, "/ws")
	d.auth(mintPayer(t, "d1", "", "", clock()))
	d.subscribe("acme/budget/d1")
	refused(d, "d1", backend.ScopeServer)
	for _, c := range []struct {
		scope, key string
		want       int64
	}{{backend.ScopeServer, "", 6000}, {backend.ScopeGroup, "g1", 2400}, {backend.ScopeGroup, "g2", 1500}, {backend.ScopeGroup, "g3", 2100}, {backend.ScopeOrg, "o1", 3900}, {backend.ScopeOrg, "o2", 2100}, {backend.ScopeAccount, "a3", 600}} {
		waitBudget(t, tr, "full", c.scope, c.key, c.want)
	}
	for _, c := range []*wsClient{a3, b2, c3, d} {
		c.c.CloseNow()
	}

	// A clean restart keeps every budget where it was.
	check := func(tr *testRelay, when string) {
		t.Helper()
		for _, c := range []struct{ sub, org, grp, scope string }{
			{"a3", "o1", "g1", backend.ScopeGroup}, {"b2", "o1", "g2", backend.ScopeOrg}, {"c3", "o2", "g3", backend.ScopeServer}} {
			w := dialWS(t, tr.URL, "/ws")
			w.auth(mintPayer(t, c.sub, c.org, c.grp, clock()))
			w.subscribe("acme/budget/" + c.sub)
			w.publish("acme/budget/"+c.sub, p)
			if m := w.expectError("quota_exceeded"); m["scope"] != c.scope {
				t.Fatalf("%s: %s refused with %v, want scope %q", when, c.sub, m, c.scope)
			}
			w.c.CloseNow()
		}
	}
	tr.stop(t)
	tr = be.start(t, cfg)
	check(tr, "after a clean restart")
	if be.nats == nil {
		// After a crash the figures are recounted from the rows, whose
		// payer strings carry the org and group.
		tr.stop(t)
		markUnclean(t, path)
		tr = be.start(t, cfg)
		check(tr, "after an unclean restart")
	}

	// The TTL sweep: every entry expires, and every budget is empty. (The
	// sweep runs every TTL of real time, so the relay starts again with a
	// short one; JetStream's own expiry runs on real time too.)
	tr.stop(t)
	short := cfg
	short.ArchiveTTL = 50 * time.Millisecond
	tr = be.start(t, short)
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	waitfor.Nil(t, 20*time.Second, func() error {
		server, g1, o1 := budgetOf(t, tr, backend.ScopeServer, ""), budgetOf(t, tr, backend.ScopeGroup, "g1"), budgetOf(t, tr, backend.ScopeOrg, "o1")
		if server != 0 || g1 != 0 || o1 != 0 {
			return fmt.Errorf("after the sweep the archive holds %d bytes, g1 %d, o1 %d", server, g1, o1)
		}
		return nil
	})
	tr.stop(t)
	tr = be.start(t, cfg)
	// The cap: c2's channel keeps 4 entries, so its fifth publish evicts
	// its first, and the bytes go back to c2, g3, o2 and the server.
	small := bytes.Repeat([]byte{'s'}, 200)
	c := dialWS(t, tr.URL, "/ws")
	c.auth(mintPayer(t, "c2", "o2", "g3", clock()))
	c.subscribe("acme/budget/c2")
	for range 5 {
		c.publishAck("acme/budget/c2", small)
	}
	for _, x := range []struct {
		scope, key string
		want       int64
	}{{backend.ScopeAccount, "c2", 800}, {backend.ScopeGroup, "g3", 800}, {backend.ScopeOrg, "o2", 800}, {backend.ScopeServer, "", 800}} {
		waitBudget(t, tr, "after an eviction by the cap", x.scope, x.key, x.want)
	}
	c.c.CloseNow()
	// The group's budget is whole again, and binds at the same point.
	publish(tr, "a1", "o1", "g1", 3)
	publish(tr, "a2", "o1", "g1", 3)
	a3 = publish(tr, "a3", "o1", "g1", 2)
	refused(a3, "a3", backend.ScopeGroup)
}

// markUnclean makes the next start of the stopped archive at path
// recount its usage from the rows, as after a crash: the saved figures
// stale and not marked current.
func markUnclean(t *testing.T, path string) {
	t.Helper()
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`UPDATE usage SET bytes = 5`, `UPDATE state SET value = 0 WHERE key = 'usage_clean'`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBudgetDefaults: the default server budget is half of what the data
// directory's disk could hold, at most 1 TiB, the org's half of it and
// the group's 1 GiB at most a quarter; in memory the server's is 1 GiB.
func TestBudgetDefaults(t *testing.T) {
	dir := t.TempDir()
	free, ok := datadir.FreeSpace(dir)
	if !ok {
		t.Skip("no free-space figure on this system")
	}
	cfg := Config{DBPath: filepath.Join(dir, "relay.db"), AccountQuota: 1}
	l := budgetLimits(&cfg, 1000)
	want := min((free+1000)/2, DefaultServerBudgetCap)
	// The free space moves a little under a busy machine.
	if d := l.Server - want; d < -(64<<20) || d > 64<<20 {
		t.Fatalf("server budget %d, want about %d", l.Server, want)
	}
	if l.Org != l.Server/2 || l.Group != min(DefaultGroupBudget, l.Server/4) || l.Account != 1 {
		t.Fatalf("budgets %+v", l)
	}
	mem := Config{AccountQuota: 1}
	if l := budgetLimits(&mem, 0); l.Server != DefaultMemoryBudget || l.Group != DefaultMemoryBudget/4 || mem.ServerBudget != DefaultMemoryBudget {
		t.Fatalf("in-memory budgets %+v", l)
	}
	set := Config{AccountQuota: 1, ServerBudget: 100, OrgBudget: 70, GroupBudget: 60}
	if l := budgetLimits(&set, 0); l != (backend.Limits{Account: 1, Group: 60, Org: 70, Server: 100}) {
		t.Fatalf("set budgets %+v", l)
	}
}

// TestBudgetStats: the stats show the server's use, the largest user of
// each scope and the refusals by scope.
func TestBudgetStats(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, AccountQuota: 1000, GroupBudget: 1500, ServerBudget: 10000})
	// Each pays for a channel of its own (the channel pays for its
	// entries, budget.go).
	for i, sub := range []string{"m1", "m2"} {
		ch := []string{chA, chLog}[i]
		c := dialWS(t, tr.URL, "/ws/"+ch)
		c.auth(mintPayer(t, sub, "org-m", "grp-m", time.Now()))
		c.publishAck(ch, bytes.Repeat([]byte{1}, 700+100*i))
		if i == 1 {
			c.publish(ch, bytes.Repeat([]byte{1}, 100))
			c.expectError("quota_exceeded")
		}
		c.c.CloseNow()
	}
	settled(t, tr)
	st := tr.Stats()
	server, account, group := budgetStats(t, st, "server"), budgetStats(t, st, "account"), budgetStats(t, st, "group")
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"server used", server.Used, 1500},
		{"largest account", account.Largest, 800},
		{"largest group", group.Largest, 1500},
		{"accounts", int64(account.Users), 2},
		{"group budget", group.Size, 1500},
		{"group refusals", int64(group.QuotaRefusalsTotal), 1},
		{"account refusals", int64(account.QuotaRefusalsTotal), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// FuzzPayer: the payer string of any claims splits back into the same
// account, org and group (claims holding the separator count as absent),
// and a payer string read back from an archive, whatever it holds, splits
// without panicking into parts that join back to it.
func FuzzPayer(f *testing.F) {
	f.Add("alice", "", "")
	f.Add("alice", "acme", "g1")
	f.Add("a\x1fb", "", "")
	f.Add("a\x1fb\x1fc", "acme", "")
	f.Add("", "\x1f", "x")
	f.Fuzz(func(t *testing.T, sub, org, grp string) {
		p := backend.ParsePayer(payerOf(jwt.Claims{Subject: sub, Org: org, Group: grp}))
		wantOrg, wantGrp := org, grp
		if strings.IndexByte(org, backend.PayerSep) >= 0 {
			wantOrg = ""
		}
		if strings.IndexByte(grp, backend.PayerSep) >= 0 {
			wantGrp = ""
		}
		if p.Account != sub || p.Org != wantOrg || p.Group != wantGrp {
			t.Fatalf("claims %q %q %q split into %+v", sub, org, grp, p)
		}
		raw := sub + org + grp
		q := backend.ParsePayer(raw)
		if q.Full != raw || (q.Org != "" || q.Group != "") && q.Account+string(backend.PayerSep)+q.Org+string(backend.PayerSep)+q.Group != raw {
			t.Fatalf("%q split into %+v", raw, q)
		}
	})
}

// TestBudgetsInConfig: New fills the budget fields it defaulted, so the
// relay's Config (and its start's log line) says what binds.
func TestBudgetsInConfig(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	if c := tr.cfg; c.ServerBudget != DefaultMemoryBudget || c.OrgBudget != DefaultMemoryBudget/2 || c.GroupBudget != DefaultMemoryBudget/4 || c.AccountQuota != DefaultAccountQuota {
		t.Fatalf("budgets %d %d %d %d", c.AccountQuota, c.GroupBudget, c.OrgBudget, c.ServerBudget)
	}
}
