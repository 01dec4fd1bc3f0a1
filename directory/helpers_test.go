package directory

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/directory/pgstore"
)

var (
	testJWTSecret      = []byte("test-jwt-secret-0123456789abcdef")
	testInternalSecret = "test-internal-secret-0123456789"
)

// clock is a settable time source for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a directory on loopback with a client.
type env struct {
	t     testing.TB
	s     *Server
	ts    *httptest.Server
	clock *clock

	orgKeys map[string]string // an API key of each org's first account

	databaseGone bool // the test stopped the database: no ledger check at the end
}

func newEnv(t testing.TB, mod func(*Config)) *env {
	t.Helper()
	c := newClock()
	cfg := Config{
		JWTSecret:      testJWTSecret,
		InternalSecret: []byte(testInternalSecret),
		OpenSignup:     true,
		Now:            c.Now,
		// Tests that are not about limits drive the directory from one
		// address far faster than any client would.
		Limits: Limits{Off: true},
	}
	if mod != nil {
		mod(&cfg)
	}
	if cfg.DBPath == "" && cfg.Database == "" {
		cfg.Database = defaultDatabase(t)
	}
	onPostgres(&cfg)
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	e := &env{t: t, s: s, ts: ts, clock: c}
	t.Cleanup(func() {
		ts.Close()
		// Whatever the test did, the storage ledger must hold exactly
		// what is stored (budget.go), unless the test took the
		// database away.
		if !t.Failed() && !e.databaseGone {
			checkLedger(t, s)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

// reply is a decoded JSON answer.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r reply) str(k string) string {
	s, _ := r.body[k].(string)
	return s
}

func (r reply) code() string { return r.str("error") }

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.raw)) }

// do sends a request. body is sent as is when it is a string or []byte,
// and JSON-encoded otherwise (nil sends no body).
func (e *env) do(method, path, bearer string, body any) reply {
	e.t.Helper()
	return e.doVia(e.ts.Client(), method, path, bearer, body)
}

// doVia is do with another client (one dialing from another address).
func (e *env) doVia(client *http.Client, method, path, bearer string, body any) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if r.status == http.StatusNoContent {
		if len(raw) != 0 {
			e.t.Fatalf("%s %s: 204 with a body %q", method, path, raw)
		}
		return r
	}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		e.t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("%s %s: content type %q", method, path, ct)
	}
	return r
}

// want fails the test unless r has the status (and, for errors, the code).
func want(t testing.TB, r reply, status int, code string) {
	t.Helper()
	if r.status != status || r.code() != code {
		t.Fatalf("got %s, want %d %q", r, status, code)
	}
	if status >= 400 && r.str("message") == "" {
		t.Fatalf("error answer without a message: %s", r)
	}
}

// account creates an account of org and returns its id and API key. The
// first account of an org (in this env) creates it; later ones join it
// with an org invite minted by the first.
func (e *env) account(org string) (id, key string) {
	e.t.Helper()
	body := map[string]string{"email": org + "@example.com", "org": org}
	if first, ok := e.orgKeys[org]; ok {
		body["org_invite"] = e.orgInvite(first, org, 1)
	}
	r := e.do("POST", "/v1/accounts", "", body)
	want(e.t, r, 201, "")
	if e.orgKeys == nil {
		e.orgKeys = map[string]string{}
	}
	if _, ok := e.orgKeys[org]; !ok {
		e.orgKeys[org] = r.str("api_key")
	}
	return r.str("account_id"), r.str("api_key")
}

// orgInvite mints an org invite of org with key.
func (e *env) orgInvite(key, org string, maxUses int) string {
	e.t.Helper()
	r := e.do("POST", "/v1/orgs/invites", key, map[string]any{"org": org, "max_uses": maxUses})
	want(e.t, r, 201, "")
	return r.str("token")
}

func (e *env) channel(key, name string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/channels", key, map[string]string{"name": name})
	want(e.t, r, 201, "")
	return r.str("id")
}

func (e *env) invite(key, channel string, maxUses int) string {
	e.t.Helper()
	r := e.do("POST", "/v1/channels/invites", key, map[string]any{"channel": channel, "max_uses": maxUses})
	want(e.t, r, 201, "")
	return r.str("token")
}

func (e *env) join(key, channel, token, identity string, kp []byte) reply {
	e.t.Helper()
	return e.do("POST", "/v1/channels/join", key, map[string]string{
		"channel":     channel,
		"token":       token,
		"identity":    identity,
		"key_package": base64.StdEncoding.EncodeToString(kp),
	})
}

func (e *env) jwt(key string, extra map[string]any) string {
	e.t.Helper()
	r := e.do("POST", "/v1/tokens", key, extra)
	want(e.t, r, 201, "")
	return r.str("token")
}

// snapshot renders every row of every table, to check that a refused
// request changed nothing.
func (e *env) snapshot() string {
	e.t.Helper()
	return snapshotDB(e.t, e.s)
}

func snapshotDB(t testing.TB, s *Server) string {
	t.Helper()
	ctx := context.Background()
	list, order := `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`, ` ORDER BY rowid`
	if _, ok := s.store.b.(pgstore.Backend); ok {
		list = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`
		order = ` t ORDER BY t::text`
	}
	rows, err := s.store.db.QueryContext(ctx, list)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, tb := range tables {
		fmt.Fprintf(&b, "== %s\n", tb)
		rows, err := s.store.db.QueryContext(ctx, `SELECT * FROM "`+tb+`"`+order)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if bs, ok := v.([]byte); ok {
					v = base64.StdEncoding.EncodeToString(bs)
				}
				fmt.Fprintf(&b, "%s=%v ", cols[i], v)
			}
			b.WriteString("\n")
		}
		rows.Close()
	}
	return b.String()
}

// craftJWT builds a token by hand so tests can produce what Mint refuses to.
func craftJWT(header, claims map[string]any, key []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	signing := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	if key == nil {
		return signing + "."
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
