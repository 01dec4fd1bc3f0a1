package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestMain lets the test binary act as the tally command, so the serve
// tests run the real thing as a subprocess without a separate build, and
// the README's scripts (testdata/readme) find it as `tally` on their PATH.
func TestMain(m *testing.M) {
	if os.Getenv("TALLY_TEST_AS_MAIN") == "1" {
		os.Exit(Main(context.Background(), append([]string{"tally"}, os.Args[1:]...), os.Stdin, os.Stdout, os.Stderr))
	}
	testscript.Main(leakChecked{m}, map[string]func(){"tally": scriptTally})
}

// leakChecked runs the tests, then fails the run if a goroutine of the
// module's code outlives them.
type leakChecked struct{ m *testing.M }

func (l leakChecked) Run() int { return leakcheck.Run(l.m.Run, os.Stderr) }

type served struct {
	cmd            *exec.Cmd
	apiURL, relURL string
	stderrTail     *bytes.Buffer
	waitErr        chan error
}

var listenRE = regexp.MustCompile(`msg="(directory|relay) listening" url=(http://\S+)`)

// startServe runs `tally serve` on ephemeral loopback ports and waits until
// both planes (or the one --only names) have logged their URLs.
func startServe(t *testing.T, data string, extra ...string) *served {
	t.Helper()
	args := append([]string{"serve", "--data", data, "--api-addr", "127.0.0.1:0", "--relay-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TALLY_TEST_AS_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, stderrTail: new(bytes.Buffer), waitErr: make(chan error, 1)}
	urls := make(chan [2]string, 2)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				urls <- [2]string{m[1], m[2]}
			}
		}
		s.waitErr <- cmd.Wait()
	}()
	// With --only, wait for that plane alone.
	want := map[string]bool{"directory": true, "relay": true}
	for i, a := range extra {
		if a == "--only" && i+1 < len(extra) {
			want = map[string]bool{extra[i+1]: true}
		}
	}
	deadline := time.After(30 * time.Second)
	for want["directory"] && s.apiURL == "" || want["relay"] && s.relURL == "" {
		select {
		case u := <-urls:
			if u[0] == "directory" {
				s.apiURL = u[1]
			} else {
				s.relURL = u[1]
			}
		case err := <-s.waitErr:
			t.Fatalf("tally serve exited early: %v", err)
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("tally serve did not report its URLs")
		}
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.waitErr
		}
	})
	return s
}

func postJSON(t *testing.T, url, bearer string, in, out any) int {
	t.Helper()
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

func getJSON(t *testing.T, url, bearer string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

type frame struct {
	Type      string `json:"type"`
	Token     string `json:"token,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Payload   string `json:"payload,omitempty"`
	Message   string `json:"message,omitempty"`
	Code      string `json:"code,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	EntryType int    `json:"entry_type,omitempty"`
}

// TestServeDurableAcrossKill publishes through a real `tally serve`, kills
// it with SIGKILL, restarts it on the same data folder, and finds every
// acknowledged entry with its seq; new publishes continue the sequence.
func TestServeDurableAcrossKill(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "--quiet")

	acct, tok := signUp(t, s.apiURL)
	registerChannel(t, s.apiURL, acct.APIKey, "acme/ops/durable")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, send := relaySocket(ctx, t, s.relURL+"/ws/acme/ops/durable", tok)
	const n = 200
	acked := map[uint64]string{}
	for i := 0; i < n; i++ {
		p := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("entry %d", i)))
		r := send(frame{Type: "publish", Channel: "acme/ops/durable", Payload: p})
		if r.Type != "ok" || r.Seq != uint64(i+1) {
			t.Fatalf("publish %d: %+v", i, r)
		}
		acked[r.Seq] = p
	}

	// SIGKILL: no shutdown path runs.
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.waitErr
	c.CloseNow()

	s2 := startServe(t, data, "--quiet")
	tok = mintToken(t, s2.apiURL, acct.APIKey)
	got := map[uint64]string{}
	since := uint64(0)
	for {
		var page struct {
			Entries []struct {
				Seq     uint64 `json:"seq"`
				Payload string `json:"payload"`
			} `json:"entries"`
			HasMore bool `json:"has_more"`
		}
		url := fmt.Sprintf("%s/v1/sync?channel=acme%%2Fops%%2Fdurable&since_seq=%d&limit=500", s2.relURL, since)
		if code := getJSON(t, url, tok, &page); code != 200 {
			t.Fatalf("sync: %d", code)
		}
		for _, e := range page.Entries {
			got[e.Seq] = e.Payload
			since = e.Seq
		}
		if !page.HasMore {
			break
		}
	}
	for seq, p := range acked {
		if got[seq] != p {
			t.Fatalf("seq %d: acknowledged %q, after restart %q", seq, p, got[seq])
		}
	}
	if len(got) != n {
		t.Fatalf("after restart %d entries, want %d", len(got), n)
	}

	// The sequence continues and is never reused (the relay may skip
	// numbers it had reserved before the crash).
	_, send = relaySocket(ctx, t, s2.relURL+"/ws/acme/ops/durable", tok)
	if r := send(frame{Type: "publish", Channel: "acme/ops/durable", Payload: "YWZ0ZXI="}); r.Type != "ok" || r.Seq <= n {
		t.Fatalf("publish after restart: %+v, want seq > %d", r, n)
	}

	// Secrets were written once, mode 0600, and reused.
	for _, name := range []string{"jwt_secret", "internal_secret"} {
		fi, err := os.Stat(data + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", name, fi.Mode().Perm())
		}
	}
}

// TestServeGracefulShutdown checks SIGTERM ends serve cleanly with exit 0.
func TestServeGracefulShutdown(t *testing.T) {
	s := startServe(t, t.TempDir(), "--quiet")
	var h struct {
		Status string  `json:"status"`
		Uptime float64 `json:"uptime"`
	}
	for _, u := range []string{s.apiURL, s.relURL} {
		if code := getJSON(t, u+"/health", "", &h); code != 200 || h.Status != "ok" {
			t.Fatalf("%s/health: %d %+v", u, code, h)
		}
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.waitErr:
		if err != nil {
			t.Fatalf("serve exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}

// TestServeSplitRevocation runs the planes as two `tally serve --only`
// processes sharing one data folder: the relay learns a revocation by
// polling the directory with the internal secret, closes the revoked
// account's live socket and answers 403 to its token.
func TestServeSplitRevocation(t *testing.T) {
	data := t.TempDir()
	d := startServe(t, data, "--quiet", "--only", "directory")
	r := startServe(t, data, "--quiet", "--only", "relay", "--directory-url", d.apiURL)
	if code := getJSON(t, d.apiURL+"/health", "", nil); code != 200 {
		t.Fatalf("directory health: %d", code)
	}
	if code := getJSON(t, r.relURL+"/health", "", nil); code != 200 {
		t.Fatalf("relay health: %d", code)
	}

	acct, tok := signUp(t, d.apiURL)
	registerChannel(t, d.apiURL, acct.APIKey, "acme/ops/split")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, send := relaySocket(ctx, t, r.relURL+"/ws/acme/ops/split", tok)
	if got := send(frame{Type: "publish", Channel: "acme/ops/split", Payload: "YQ=="}); got.Type != "ok" || got.Seq != 1 {
		t.Fatalf("publish: %+v", got)
	}

	// The split relay learns channel members from the directory too: an
	// account of another org is not one, and is refused.
	_, otherTok := signUpIn(t, d.apiURL, "eve@evil.test", "evil")
	_, sendOther := relaySocket(ctx, t, r.relURL+"/ws", otherTok)
	if got := sendOther(frame{Type: "publish", Channel: "acme/ops/split", Payload: "Yg=="}); got.Type != "error" || got.Code != "not_a_member" {
		t.Fatalf("a non-member's publish on the split relay: %+v", got)
	}
	if code := getJSON(t, r.relURL+"/v1/sync?channel=acme%2Fops%2Fsplit", otherTok, nil); code != 403 {
		t.Fatalf("a non-member's sync on the split relay: %d, want 403", code)
	}

	var rev struct{ Revoked bool }
	if code := postJSON(t, d.apiURL+"/v1/revocations", acct.APIKey, map[string]string{"did": "did:skytale:" + acct.AccountID}, &rev); code != 200 || !rev.Revoked {
		t.Fatalf("revoke: %d %+v", code, rev)
	}
	start := time.Now()
	var got frame
	if err := wsjson.Read(ctx, c, &got); err != nil || got.Type != "error" || got.Code != "forbidden" {
		t.Fatalf("after revocation: %+v, %v", got, err)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("socket of a revoked account: %v, want close 1008", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("revoked socket closed after %v", d)
	}
	if code := getJSON(t, r.relURL+"/v1/sync?channel=acme/ops/split", tok, nil); code != 403 {
		t.Fatalf("revoked token on the split relay: %d, want 403", code)
	}
}

// relaySocket dials a relay WebSocket (url is http://…), authenticates with
// tok, and returns the connection and a send-one-frame-read-one helper.
func relaySocket(ctx context.Context, t *testing.T, url, tok string) (*websocket.Conn, func(frame) frame) {
	t.Helper()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	send := func(f frame) frame {
		if err := wsjson.Write(ctx, c, f); err != nil {
			t.Fatal(err)
		}
		var got frame
		if err := wsjson.Read(ctx, c, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := send(frame{Type: "auth", Token: tok}); got.Type != "ok" {
		t.Fatalf("auth: %+v", got)
	}
	return c, send
}

type testAccount struct {
	AccountID string `json:"account_id"`
	APIKey    string `json:"api_key"`
}

type testToken struct{ Token string }

// signUp creates an account in org acme on an open-signup directory and
// mints a token for it.
func signUp(t *testing.T, apiURL string) (testAccount, string) {
	t.Helper()
	return signUpIn(t, apiURL, "ops@acme.test", "acme")
}
