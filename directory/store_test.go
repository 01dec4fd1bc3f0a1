package directory

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// TestConcurrentJoinsNeverOverUseAnInvite fires 20 joins at once at an
// invite with max_uses 5: exactly 5 succeed.
func TestConcurrentJoinsNeverOverUseAnInvite(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		_, owner := e.account("acme")
		const ch = "acme/pay/agent"
		e.channel(owner, ch)
		inv := e.invite(owner, ch, 5)
		keys := make([]string, 20)
		for i := range keys {
			_, keys[i] = e.account("globex")
		}
		count := raceStatuses(len(keys), func(i int) int {
			return e.join(keys[i], ch, inv, fmt.Sprint("did:web:", i), []byte("kp")).status
		})
		wantWinners(t, count, 5, 15)
		var uses, pending int
		e.queryRow(`SELECT uses FROM invites`).Scan(&uses)
		e.queryRow(`SELECT COUNT(*) FROM join_requests`).Scan(&pending)
		if uses != 5 || pending != 5 {
			t.Fatalf("uses %d, requests %d", uses, pending)
		}
	})
}

// onEveryBackend runs f in one subtest per backend (in-memory SQLite, a
// SQLite file, PostgreSQL), each on a fresh database.
func onEveryBackend(t *testing.T, f func(t *testing.T, e *env)) {
	forBackends(t, func(t *testing.T, b testBackend) { f(t, envOn(t, b, nil)) })
}

// wantWinners fails unless won of the raced requests were answered 201
// and lost of them 403.
func wantWinners(t *testing.T, count map[int]int, won, lost int) {
	t.Helper()
	if count[201] != won || count[403] != lost {
		t.Fatalf("statuses %v, want %d×201 and %d×403", count, won, lost)
	}
}

// raceStatuses runs do(0) … do(n-1) at the same moment and counts the
// statuses they return.
func raceStatuses(n int, do func(i int) int) map[int]int {
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			statuses[i] = do(i)
		})
	}
	close(start)
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	return count
}

func TestSweep(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SweepInterval = 5 * time.Millisecond })
	_, owner := e.account("acme")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	inv := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "max_uses": 10, "ttl_seconds": 604800}).str("token")
	done := e.join(owner, ch, inv, "did:web:done", []byte("kp")).str("request_id")
	stale := e.join(owner, ch, inv, "did:web:stale", []byte("kp")).str("request_id")
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": done, "welcome": "AA=="}), 200, "")

	count := func() int {
		var n int
		e.queryRow(`SELECT COUNT(*) FROM join_requests`).Scan(&n)
		return n
	}
	time.Sleep(30 * time.Millisecond) // time passes: several sweeps, nothing is old enough yet
	if n := count(); n != 2 {
		t.Fatalf("%d requests before the retention passed", n)
	}
	e.clock.Advance(23 * time.Hour)
	r := e.join(owner, ch, inv, "did:web:fresh", []byte("kp"))
	want(t, r, 201, "")
	fresh := r.str("request_id")
	e.clock.Advance(time.Hour + time.Second)
	waitfor.Nil(t, 5*time.Second, func() error {
		if n := count(); n != 1 {
			return fmt.Errorf("sweep left %d requests", n)
		}
		return nil
	})
	want(t, e.do("GET", "/v1/channels/welcome/"+done, owner, nil), 404, "not_found")
	want(t, e.do("GET", "/v1/channels/welcome/"+stale, owner, nil), 404, "not_found")
	want(t, e.do("GET", "/v1/channels/welcome/"+fresh, owner, nil), 200, "")
}

func TestCloseStopsSweep(t *testing.T) {
	s, err := New(context.Background(), Config{JWTSecret: testJWTSecret, SweepInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // time passes: sweeps run before the close
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestNewNeedsJWTSecret(t *testing.T) {
	if _, err := New(context.Background(), Config{}); err == nil {
		t.Fatal("New accepted an empty JWT secret")
	}
}

// TestPersistenceAcrossReopen: on every durable backend, what the
// directory acknowledged over HTTP is there after a restart.
func TestPersistenceAcrossReopen(t *testing.T) {
	for _, b := range testBackends {
		if b.durable {
			t.Run(b.name, func(t *testing.T) { testPersistenceAcrossReopen(t, b.database(t)) })
		}
	}
}

func testPersistenceAcrossReopen(t *testing.T, database string) {
	c := newClock()
	cfg := Config{JWTSecret: testJWTSecret, InternalSecret: []byte(testInternalSecret), OpenSignup: true, Database: database, Now: c.Now}
	onPostgres(&cfg)

	e := newEnvFrom(t, cfg, c)
	_, owner := e.account("acme")
	_, joiner := e.account("globex")
	const ch = "acme/pay/agent"
	chID := e.channel(owner, ch)
	inv := e.invite(owner, ch, 2)
	id := e.join(joiner, ch, inv, "did:web:a", []byte("persisted kp")).str("request_id")
	seat := e.do("POST", "/v1/seats", owner, e.seatBody(owner, "z6Mk1", "acme/seat/home"))
	want(t, seat, 201, "")
	want(t, e.do("POST", "/v1/revocations", testInternalSecret, map[string]string{"did": "did:skytale:gone"}), 200, "")
	e.close()

	e = newEnvFrom(t, cfg, c)
	if got := e.channel(owner, ch); got != chID {
		t.Fatalf("channel id %s after reopen, was %s", got, chID)
	}
	r := e.do("GET", "/v1/channels/pending?channel="+ch, owner, nil)
	reqs := r.body["requests"].([]any)
	if len(reqs) != 1 || reqs[0].(map[string]any)["id"] != id {
		t.Fatalf("pending after reopen = %s", r)
	}
	// One use left on the invite, not two.
	want(t, e.join(joiner, ch, inv, "did:web:b", []byte("kp")), 201, "")
	want(t, e.join(joiner, ch, inv, "did:web:c", []byte("kp")), 403, "invalid_invite")
	// The seat guard and the seat credential survive.
	want(t, e.do("POST", "/v1/seats", owner, e.seatBody(owner, "z6Mk1", "acme/seat/home")), 409, "seat_exists")
	e.jwt(seat.str("credential"), nil)
	if subs, next, err := e.s.RevokedSince(t.Context(), 0); err != nil || len(subs) != 1 || subs[0] != "gone" || next != 1 {
		t.Fatalf("revocations after reopen: %v %d %v", subs, next, err)
	}
	e.close()
}

// newEnvFrom starts a server with an explicit config, for reopen tests.
func newEnvFrom(t *testing.T, cfg Config, c *clock) *env {
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, s: s, clock: c}
	e.ts = httptest.NewServer(s)
	return e
}

func (e *env) close() {
	e.ts.Close()
	if err := e.s.Close(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func TestRequestLogCarriesNoSecrets(t *testing.T) {
	var buf syncBuffer
	e := newEnv(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	})
	_, key := e.account("acme")
	e.channel(key, "acme/pay/agent")
	inv := e.invite(key, "acme/pay/agent", 1)
	tok := e.jwt(key, nil)
	e.join(tok, "acme/pay/agent", inv, "did:web:a", []byte("kp")).str("request_id")
	e.do("GET", "/v1/channels/pending?channel=acme/pay/agent&token="+inv, key, nil)
	e.do("GET", "/v1/internal/revocations?after=0", testInternalSecret, nil)
	e.do("POST", "/v1/channels", "sk_live_bogus", `{"name":"acme/x/y"}`)
	e.do("GET", "/v1/channels/welcome/"+inv, key, nil)
	e.do("GET", "/v1/channels/welcome/"+tok, key, nil)

	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 10 {
		t.Fatalf("%d log lines for 10 requests:\n%s", len(lines), out)
	}
	for _, l := range lines {
		for _, f := range []string{"method=", "path=", "status=", "duration="} {
			if !strings.Contains(l, f) {
				t.Fatalf("log line without %s: %s", f, l)
			}
		}
	}
	for _, secret := range []string{key, inv, tok, testInternalSecret, "sk_live_bogus", "token="} {
		if strings.Contains(out, secret) {
			t.Fatalf("log contains a secret (%.12s…):\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "method=POST path=/v1/channels/join status=201") {
		t.Fatalf("join not logged:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
