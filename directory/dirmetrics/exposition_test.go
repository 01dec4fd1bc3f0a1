package dirmetrics_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/directory/dirmetrics"
	"github.com/skytale-oss/skytale/internal/metricstest"
)

var update = flag.Bool("update", false, "rewrite testdata/exposition.txt from the current output")

var (
	jwtSecret = []byte("test-jwt-secret-0123456789abcdef")
	internal  = "test-internal-secret-0123456789"
)

// client drives a directory over HTTP, as any client does.
type client struct {
	t  testing.TB
	ts *httptest.Server
}

// do sends body as JSON (nil sends none) and returns the status and the
// decoded answer.
func (c client) do(method, path, bearer string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.ts.URL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.ts.Client().Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// must is do that fails the test unless the answer has status.
func (c client) must(status int, method, path, bearer string, body any) map[string]any {
	c.t.Helper()
	got, out := c.do(method, path, bearer, body)
	if got != status {
		c.t.Fatalf("%s %s: %d %v, want %d", method, path, got, out, status)
	}
	return out
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// start runs a directory on loopback with cfg (the secrets and a fixed
// clock filled in) until the test ends.
func start(t *testing.T, cfg directory.Config) (client, *directory.Server) {
	t.Helper()
	cfg.JWTSecret, cfg.InternalSecret = jwtSecret, []byte(internal)
	if cfg.Now == nil {
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		cfg.Now = func() time.Time { return now }
	}
	s, err := directory.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return client{t: t, ts: ts}, s
}

// run starts a directory whose metrics go to reg and sends it a fixed
// run of requests: two accounts, a channel and an invite, joins up to the
// joiner's storage budget and one past it, sign-ins up to the rate limit
// and one past it, an unknown route, an unauthenticated call, a
// revocation and a health check. It returns the joiner's account id.
func run(t *testing.T, reg prometheus.Registerer) string {
	t.Helper()
	tight := directory.Bucket{Burst: 2, Every: time.Minute}
	c, _ := start(t, directory.Config{
		Signup:  directory.SignupOpen,
		Metrics: dirmetrics.New(reg),
		Limits:  directory.Limits{Token: directory.Rate{PerAddr: tight, PerAccount: directory.Bucket{Burst: -1}}},
		// Two join requests' key packages fill an account's budget.
		AccountBudget: 2 * directory.MaxKeyPackage, GroupBudget: 1 << 30, OrgBudget: 1 << 30, ServerBudget: 1 << 30,
	})
	owner := str(c.must(201, "POST", "/v1/accounts", "", map[string]string{"email": "o@host.example", "org": "host"}), "api_key")
	joiner := c.must(201, "POST", "/v1/accounts", "", map[string]string{"email": "j@crowd.example", "org": "crowd"})
	key := str(joiner, "api_key")
	c.must(201, "POST", "/v1/channels", owner, map[string]string{"name": "host/rooms/lobby"})
	inv := str(c.must(201, "POST", "/v1/channels/invites", owner, map[string]any{"channel": "host/rooms/lobby", "max_uses": 10}), "token")
	for i, status := range []int{201, 201, 413} {
		kp := bytes.Repeat([]byte{byte(i + 1)}, directory.MaxKeyPackage)
		c.must(status, "POST", "/v1/channels/join", key, map[string]string{
			"channel": "host/rooms/lobby", "token": inv, "identity": "did:web:joiner-" + string(rune('a'+i)),
			"key_package": base64.StdEncoding.EncodeToString(kp),
		})
	}
	for _, status := range []int{201, 201, 429} {
		c.must(status, "POST", "/v1/tokens", key, nil)
	}
	c.must(404, "GET", "/v1/nowhere", "", nil)
	c.must(401, "POST", "/v1/channels", "", map[string]string{"name": "host/rooms/other"})
	id := str(joiner, "account_id")
	c.must(200, "POST", "/v1/revocations", key, map[string]string{"did": "did:skytale:" + id})
	c.must(200, "GET", "/health", "", nil)
	return id
}

// TestExposition: the names, help texts, types, labels and values that
// GET /metrics shows after a fixed run of requests (accounts, a channel,
// joins up to the account's storage budget and one past it, sign-ins up
// to the rate limit and one past it, an unknown route, a revocation) are
// the ones in testdata/exposition.txt, byte for byte. Operators' alerts
// and dashboards read these names; a change here breaks them.
func TestExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	run(t, reg)
	// The request durations depend on timing.
	got := metricstest.Exposition(t, reg, func(line string) bool {
		return strings.HasPrefix(line, "skytale_directory_request_duration_seconds")
	})
	metricstest.Golden(t, filepath.Join("testdata", "exposition.txt"), got, *update)
}
