package directory

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/directory/pgstore"
	"github.com/skytale-oss/skytale/internal/datadir"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// budgetKP is the size of the key packages the budget tests queue in join
// requests: the largest a join takes.
const budgetKP = MaxKeyPackage

// lobby is a channel of its own org with an invite of 100 uses, which the
// budget tests' crowds join: every join request keeps a key package of
// the joiner's, charged to the joiner's budgets.
type lobby struct {
	e        *env
	owner    string
	ch, inv  string
	identity int
}

func newLobby(e *env, org string) *lobby {
	_, owner := e.account(org)
	l := &lobby{e: e, owner: owner, ch: org + "/rooms/lobby"}
	e.channel(owner, l.ch)
	l.inv = e.invite(owner, l.ch, 100)
	return l
}

// join queues a join request of key with a budgetKP key package.
func (l *lobby) join(key string) reply {
	l.e.t.Helper()
	l.identity++
	kp := bytes.Repeat([]byte{byte(l.identity)}, budgetKP)
	return l.e.join(key, l.ch, l.inv, fmt.Sprintf("did:web:joiner-%d", l.identity), kp)
}

// wantQuota fails unless r is 413 quota_exceeded naming scope.
func wantQuota(t testing.TB, r reply, scope string) {
	t.Helper()
	want(t, r, http.StatusRequestEntityTooLarge, "quota_exceeded")
	if r.str("scope") != scope {
		t.Fatalf("refusal %s names scope %q, want %q", r, r.str("scope"), scope)
	}
}

// crowdFill has each of keys join the lobby up to perAccount times, until
// a join is refused; it returns how many joins passed and the refusal.
func (l *lobby) crowdFill(keys []string, perAccount int) (int, reply) {
	l.e.t.Helper()
	passed := 0
	for _, k := range keys {
		for range perAccount {
			r := l.join(k)
			if r.status != http.StatusCreated {
				return passed, r
			}
			passed++
		}
	}
	l.e.t.Fatalf("the crowd stored %d key packages and none was refused", passed)
	return 0, reply{}
}

// TestBudgetOrgCrowd: many accounts of one org, each within its own
// budget, together stop at the org's (413 quota_exceeded, scope org),
// and the refusal changes nothing; an account of another org still
// stores, and every account of the crowd is refused, however much of its
// own budget is left.
func TestBudgetOrgCrowd(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.AccountBudget, c.GroupBudget, c.OrgBudget, c.ServerBudget = 3*budgetKP, 1<<30, 10*budgetKP, 1<<30
	})
	l := newLobby(e, "host")
	var crowd []string
	for range 5 {
		_, k := e.account("crowd")
		crowd = append(crowd, k)
	}
	before := e.snapshot()
	passed, r := l.crowdFill(crowd, 3)
	if passed != 10 {
		t.Fatalf("the org's accounts stored %d key packages, want its budget's 10", passed)
	}
	wantQuota(t, r, scopeOrg)
	after := e.snapshot()
	wantQuota(t, l.join(crowd[4]), scopeOrg)
	if e.snapshot() != after {
		t.Fatal("a put past the org budget changed the store")
	}
	if after == before {
		t.Fatal("nothing was stored")
	}
	_, honest := e.account("hooli")
	want(t, l.join(honest), 201, "")
}

// TestBudgetGroupCrowd: accounts of many orgs signed up from many
// addresses of one IPv4 /24 stop together at the signup group's budget
// (scope group); an account signed up from another /24 still stores.
func TestBudgetGroupCrowd(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.AccountBudget, c.GroupBudget, c.OrgBudget, c.ServerBudget = 3*budgetKP, 10*budgetKP, 1<<30, 1<<30
	})
	l := newLobby(e, "host")
	var crowd []string
	for i := range 5 {
		r := e.signupVia(e.clientFrom(fmt.Sprintf("127.0.0.%d", 10+i)), fmt.Sprintf("crowd%d", i), nil)
		want(t, r, 201, "")
		crowd = append(crowd, r.str("api_key"))
	}
	// The lobby's owner signed up from 127.0.0.1 and stores nothing.
	passed, r := l.crowdFill(crowd, 3)
	if passed != 10 {
		t.Fatalf("one /24's accounts stored %d key packages, want the group budget's 10", passed)
	}
	wantQuota(t, r, scopeGroup)
	before := e.snapshot()
	wantQuota(t, l.join(crowd[4]), scopeGroup)
	if e.snapshot() != before {
		t.Fatal("a put past the group budget changed the store")
	}
	r = e.signupVia(e.clientFrom("127.0.1.1"), "elsewhere", nil)
	want(t, r, 201, "")
	want(t, l.join(r.str("api_key")), 201, "")
	// The operator's accounts belong to no signup group.
	_, op, err := e.s.CreateAccount(context.Background(), "op@example.com", "operated")
	must(t, err)
	want(t, l.join(op), 201, "")
}

// TestBudgetServerCrowd: many orgs, each within its budgets, together
// stop at the server's (scope server); then nobody stores more, reads
// still answer, and the bytes the sweep frees let puts in again.
func TestBudgetServerCrowd(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.AccountBudget, c.GroupBudget, c.OrgBudget, c.ServerBudget = 3*budgetKP, 1<<30, 3*budgetKP, 10*budgetKP
	})
	l := newLobby(e, "host")
	var crowd []string
	for i := range 5 {
		_, k, err := e.s.CreateAccount(context.Background(), "c@example.com", fmt.Sprintf("org%d", i))
		must(t, err)
		crowd = append(crowd, k)
	}
	passed, r := l.crowdFill(crowd, 3)
	if passed != 10 {
		t.Fatalf("the orgs stored %d key packages, want the server budget's 10", passed)
	}
	wantQuota(t, r, scopeServer)
	_, honest, err := e.s.CreateAccount(context.Background(), "h@example.com", "honest")
	must(t, err)
	before := e.snapshot()
	wantQuota(t, l.join(honest), scopeServer)
	if e.snapshot() != before {
		t.Fatal("a put past the server budget changed the store")
	}
	r = e.do("GET", "/v1/channels/pending?channel="+l.ch, l.owner, nil)
	want(t, r, 200, "")
	// The requests expire; the sweep gives their bytes back.
	e.clock.Advance(DefaultRetention + time.Minute)
	if _, err := e.s.store.sweep(context.Background(), e.clock.Now(), DefaultRetention); err != nil {
		t.Fatal(err)
	}
	checkLedger(t, e.s)
	l.inv = e.invite(l.owner, l.ch, 10)
	want(t, l.join(honest), 201, "")
}

// TestBudgetRacingPuts: puts racing past a budget never overshoot it: of
// many concurrent joins by accounts of different orgs (the server budget)
// and by one account (its own), exactly what fits passes, on every
// backend, and the ledger holds what is stored.
func TestBudgetRacingPuts(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		e := envOn(t, b, func(c *Config) {
			c.AccountBudget, c.GroupBudget, c.OrgBudget, c.ServerBudget = 4*budgetKP, 1<<30, 1<<30, 8*budgetKP
		})
		l := newLobby(e, "host")
		var keys []string
		for i := range 8 {
			_, k, err := e.s.CreateAccount(context.Background(), "r@example.com", fmt.Sprintf("racer%d", i))
			must(t, err)
			keys = append(keys, k)
		}
		race := func(keys []string, n int) (passed int, scopes map[string]int) {
			var mu sync.Mutex
			scopes = map[string]int{}
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					kp := bytes.Repeat([]byte{byte(i)}, budgetKP)
					r := e.join(keys[i%len(keys)], l.ch, l.inv, fmt.Sprintf("did:web:race-%d-%d", len(keys), i), kp)
					mu.Lock()
					defer mu.Unlock()
					switch r.status {
					case http.StatusCreated:
						passed++
					case http.StatusRequestEntityTooLarge:
						scopes[r.str("scope")]++
					default:
						t.Errorf("racing join: %s", r)
					}
				})
			}
			wg.Wait()
			return passed, scopes
		}
		// One account, 12 racing joins: its budget holds 4.
		passed, scopes := race(keys[:1], 12)
		if passed != 4 || scopes[scopeAccount] != 8 {
			t.Fatalf("one account's racing joins: %d passed, refusals %v; want 4 and 8 account", passed, scopes)
		}
		// Seven more accounts, 4 racing joins each: the server holds 4 more.
		passed, scopes = race(keys[1:], 28)
		if passed != 4 || scopes[scopeServer] != 24 {
			t.Fatalf("a crowd's racing joins: %d passed, refusals %v; want 4 and 24 server", passed, scopes)
		}
		checkLedger(t, e.s)
	})
}

// TestBudgetFreedGoesBack: what is freed goes back to the budgets it was
// charged to, exactly: a claimed key package, a replaced last-resort
// one, an accepted and a declined Welcome, an acknowledged join request
// and its Welcome, and an account the operator removes, with everything
// it sent; the ledger holds what is stored after each step.
func TestBudgetFreedGoesBack(t *testing.T) {
	e := newEnv(t, nil)
	ownerID, owner := e.account("acme")
	peerID, peer := e.account("globex")
	e.relate(owner, peer)
	step := func(what string) {
		t.Helper()
		checkLedger(t, e.s)
		if t.Failed() {
			t.Fatalf("after %s", what)
		}
	}
	want(t, e.do("POST", "/v1/keypackages", peer, e.stockUpload(peer, "phone", 3, true)), 201, "")
	step("a stock upload")
	want(t, e.do("POST", "/v1/keypackages", peer, e.stockUpload(peer, "phone", 0, true)), 201, "")
	step("a last-resort replaced")
	const ch = "acme/rooms/a"
	e.channel(owner, ch)
	claims := e.claim(owner, peerID, ch)
	step("a claim")
	for i, c := range claims {
		r := e.do("POST", "/v1/inbox", owner, map[string]string{"claim_id": c, "welcome": b64(fmt.Sprintf("welcome %d", i))})
		want(t, r, 201, "")
	}
	step("a Welcome delivered")
	r := e.do("GET", "/v1/inbox", peer, nil)
	want(t, r, 200, "")
	entry := r.body["entries"].([]any)[0].(map[string]any)["id"].(string)
	want(t, e.do("POST", "/v1/inbox/"+entry+"/accept", peer, nil), 200, "")
	step("a Welcome accepted")
	inv := e.invite(owner, ch, 2)
	r = e.join(peer, ch, inv, "did:web:peer", []byte("peer's key package"))
	want(t, r, 201, "")
	step("a join request")
	req := r.str("request_id")
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": req, "welcome": b64("the owner's welcome")}), 200, "")
	step("a join request answered")
	want(t, e.do("POST", "/v1/channels/welcome/"+req+"/ack", peer, nil), 200, "")
	step("a join request acknowledged")
	// A third account sends a Welcome and queues a request, then the
	// operator removes it.
	thirdID, third := e.account("initech")
	want(t, e.do("POST", "/v1/channels/members", owner, map[string]string{"channel": ch, "account_id": thirdID}), 200, "")
	want(t, e.do("POST", "/v1/keypackages", owner, e.stockUpload(owner, "laptop", 2, false)), 201, "")
	for _, c := range e.claim(third, ownerID, ch) {
		want(t, e.do("POST", "/v1/inbox", third, map[string]string{"claim_id": c, "welcome": b64("from the third")}), 201, "")
	}
	want(t, e.join(third, ch, inv, "did:web:third", []byte("another key package")), 201, "")
	step("the third account stores")
	if ledger(t, e.s)[scopeAccount+"/"+thirdID] == 0 {
		t.Fatal("the third account holds nothing before its removal")
	}
	r = e.do("DELETE", "/v1/internal/accounts/"+thirdID, testInternalSecret, nil)
	want(t, r, 200, "")
	step("the removal")
	l := ledger(t, e.s)
	if l[scopeAccount+"/"+thirdID] != 0 || l[scopeOrg+"/initech"] != 0 {
		t.Fatalf("the removed account's budgets still hold bytes: %v", l)
	}
	if l[scopeServer+"/"] != l[scopeAccount+"/"+ownerID]+l[scopeAccount+"/"+peerID] {
		t.Fatalf("the server holds %d bytes, the accounts left %d", l[scopeServer+"/"], l[scopeAccount+"/"+ownerID]+l[scopeAccount+"/"+peerID])
	}
}

// TestBudgetDefaults: the defaults are derived from the server budget,
// which for a SQLite file is a quarter of its folder's free space plus
// what is stored; negative budgets are refused at start.
func TestBudgetDefaults(t *testing.T) {
	dir := t.TempDir()
	free, ok := datadir.FreeSpace(dir)
	var cfg Config
	b := resolveBudgets(&cfg, dir+"/dir.db", false, 1<<20)
	if ok && b.server != min((free+1<<20)/4, DefaultServerBudgetCap) {
		t.Fatalf("server budget %d with %d free", b.server, free)
	}
	if b.org != b.server/2 || b.group != min(DefaultGroupBudget, b.server/4) || b.account != min(DefaultAccountBudget, b.group) {
		t.Fatalf("budgets %+v", b)
	}
	cfg = Config{}
	if b := resolveBudgets(&cfg, "", false, 0); b.server != DefaultMemoryBudget || cfg.ServerBudget != DefaultMemoryBudget {
		t.Fatalf("in memory: %+v", b)
	}
	cfg = Config{ServerBudget: 1 << 20}
	if b := resolveBudgets(&cfg, "", true, 0); b.server != 1<<20 || b.group != 1<<18 || b.account != 1<<18 {
		t.Fatalf("a small server budget: %+v", b)
	}
	cfg = Config{}
	if b := resolveBudgets(&cfg, "", true, 0); b.server != DefaultPostgresBudget {
		t.Fatalf("on PostgreSQL: %+v", b)
	}
	for _, f := range []func(*Config){
		func(c *Config) { c.AccountBudget = -1 },
		func(c *Config) { c.GroupBudget = -1 },
		func(c *Config) { c.OrgBudget = -1 },
		func(c *Config) { c.ServerBudget = -1 },
	} {
		c := Config{JWTSecret: testJWTSecret}
		f(&c)
		if s, err := New(context.Background(), c); err == nil {
			s.Close(context.Background())
			t.Fatalf("a negative budget was accepted: %+v", c)
		}
	}
}

// TestBudgetLedgerBackfill: a database from before the budgets gets a
// ledger that holds exactly what it stores, charged as puts are charged
// now, on both backends.
func TestBudgetLedgerBackfill(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		if !b.durable {
			t.Skip("an in-memory database does not outlive its directory")
		}
		ctx := context.Background()
		dsn := b.database(t)
		var db *sql.DB
		var rebind func(string) string
		if isPostgresURL(dsn) {
			var err error
			if db, err = sql.Open("pgx", dsn); err != nil {
				t.Fatal(err)
			}
			must(t, pgstore.MigrateForTest(ctx, db, func(m string) bool { return strings.Contains(m, "CREATE TABLE budget_usage") }))
			rebind = pgstore.Backend{}.Rebind
		} else {
			var err error
			if db, err = sqlitedb.Open(dsn); err != nil {
				t.Fatal(err)
			}
			must(t, sqlitedb.Migrate(ctx, db, sqliteMigrations[:budgetStep(t, sqliteMigrations)]))
			rebind = func(q string) string { return q }
		}
		for _, st := range []struct {
			q    string
			args []any
		}{
			{`INSERT INTO accounts (id, email, org, created_at, signup_group, last_signin) VALUES (?, 'a@x', 'acme', 0, 'net1', 0)`, []any{"a1"}},
			{`INSERT INTO accounts (id, email, org, created_at, signup_group, last_signin) VALUES (?, 'b@x', 'acme', 0, 'net1', 0)`, []any{"a2"}},
			{`INSERT INTO accounts (id, email, org, created_at, signup_group, last_signin) VALUES (?, 'c@x', 'globex', 0, '', 0)`, []any{"a3"}},
			{`INSERT INTO channels (id, name, owner_id, created_at) VALUES ('c1', 'acme/rooms/a', ?, 0)`, []any{"a1"}},
			{`INSERT INTO key_packages (account_id, device, last_resort, key_package, created_at) VALUES (?, 'd', 0, ?, 0)`, []any{"a2", make([]byte, 100)}},
			{`INSERT INTO key_packages (account_id, device, last_resort, key_package, created_at) VALUES (?, 'd', 1, ?, 0)`, []any{"a2", make([]byte, 50)}},
			{`INSERT INTO inbox (id, account_id, channel_id, device, from_id, welcome, created_at, size) VALUES ('i1', 'a2', 'c1', 'd', ?, ?, 0, 70)`, []any{"a3", make([]byte, 70)}},
			{`INSERT INTO inbox (id, account_id, channel_id, device, from_id, welcome, created_at, size) VALUES ('i2', 'a2', 'c1', 'd', ?, ?, 0, 9)`, []any{"gone", make([]byte, 9)}},
			{`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, welcome, status, created_at, updated_at) VALUES ('j1', 'c1', ?, 'x', ?, ?, 'completed', 0, 0)`, []any{"a3", make([]byte, 30), make([]byte, 40)}},
			{`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, status, created_at, updated_at) VALUES ('j2', 'c1', ?, 'y', ?, 'pending', 0, 0)`, []any{"a2", make([]byte, 20)}},
			{`INSERT INTO group_infos (channel_id, epoch, group_info, updated_by, updated_at) VALUES ('c1', 0, ?, ?, 0)`, []any{make([]byte, 300), "a2"}},
			{`INSERT INTO channel_trees (channel_id, tree_id, parts, received, size, uploaded_by, created_at) VALUES ('c1', 't', 2, 2, 1000, ?, 0)`, []any{"a3"}},
		} {
			if _, err := db.ExecContext(ctx, rebind(st.q), st.args...); err != nil {
				t.Fatalf("%s: %v", st.q, err)
			}
		}
		var seq int64
		if err := db.QueryRowContext(ctx, `SELECT seq FROM channel_trees`).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		for part, n := range []int{600, 400} {
			if _, err := db.ExecContext(ctx, rebind(`INSERT INTO channel_tree_parts (tree_seq, part, data) VALUES (?, ?, ?)`), seq, part, make([]byte, n)); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		e := newEnv(t, func(c *Config) { c.Database = dsn })
		checkLedger(t, e.s)
		l := ledger(t, e.s)
		wantLedger := map[string]int64{
			"account/a1": 40, "account/a2": 100 + 50 + 20 + 300, "account/a3": 70 + 30 + 1000,
			"group/net1": 40 + 470, "org/acme": 40 + 470, "org/globex": 1100, "server/": 40 + 470 + 1100,
		}
		if !maps.Equal(l, wantLedger) {
			t.Fatalf("back-filled ledger %v, want %v", l, wantLedger)
		}
	})
}

// budgetStep is the index of the migration that makes the ledger.
func budgetStep(t *testing.T, steps []string) int {
	t.Helper()
	i := slices.IndexFunc(steps, func(m string) bool { return strings.Contains(m, "CREATE TABLE budget_usage") })
	if i < 0 {
		t.Fatal("no migration makes budget_usage")
	}
	return i
}

// BenchmarkBudgetCharge is what the ledger adds to a put: a write
// transaction that charges one account's four budgets, against one that
// does nothing, on SQLite in memory and on PostgreSQL.
func BenchmarkBudgetCharge(b *testing.B) {
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", func(testing.TB) string { return "" }}, {"postgres", postgresURL}} {
		b.Run(db.name, func(b *testing.B) {
			e := newEnv(b, func(c *Config) { c.Database = db.dsn(b) })
			id, _ := e.account("acme")
			ctx := context.Background()
			b.Run("empty", func(b *testing.B) {
				for b.Loop() {
					must(b, e.s.store.write(ctx, func(tx txn) error { return nil }))
				}
			})
			b.Run("charge", func(b *testing.B) {
				for b.Loop() {
					must(b, e.s.store.write(ctx, func(tx txn) error { return tx.charge(ctx, id, 1) }))
				}
			})
			b.StopTimer()
			// Give the bytes back so the ledger matches what is stored.
			n := ledger(b, e.s)[scopeAccount+"/"+id]
			must(b, e.s.store.write(ctx, func(tx txn) error { return tx.charge(ctx, id, -n) }))
		})
	}
}
