package cli

// Hostile clients and crashes against a real `tally serve`, from outside,
// over HTTP and WebSockets only: each test reproduces one way the planes
// were broken by a client or an operator fault, and checks it is closed.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// signUpIn creates an account in org on an open-signup directory and mints
// a token for it.
func signUpIn(t *testing.T, apiURL, email, org string) (testAccount, string) {
	t.Helper()
	var acct testAccount
	if code := postJSON(t, apiURL+"/v1/accounts", "", map[string]string{"email": email, "org": org}, &acct); code != 201 {
		t.Fatalf("account %s in %s: %d", email, org, code)
	}
	return acct, mintToken(t, apiURL, acct.APIKey)
}

func mintToken(t *testing.T, apiURL, apiKey string) string {
	t.Helper()
	var tok testToken
	if code := postJSON(t, apiURL+"/v1/tokens", apiKey, map[string]any{}, &tok); code != 201 {
		t.Fatalf("token: %d", code)
	}
	return tok.Token
}

// registerChannel registers name for the account with apiKey, which makes
// the account its owner and first member.
func registerChannel(t *testing.T, apiURL, apiKey, name string) {
	t.Helper()
	if code := postJSON(t, apiURL+"/v1/channels", apiKey, map[string]string{"name": name}, nil); code != 201 && code != 200 {
		t.Fatalf("register %s: %d", name, code)
	}
}

// mlsCommit is the cleartext header of a PrivateMessage carrying a commit
// at epoch (RFC 9420 §6.3): all the relay reads of a message.
func mlsCommit(epoch uint64) string {
	b := []byte{0, 1, 0, 2, 4, 'g', 'r', 'p', '1'}
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = append(b, 3) // content type: commit
	b = append(b, "forged ciphertext"...)
	return base64.StdEncoding.EncodeToString(b)
}

// syncAll pages GET /v1/sync (or /v1/messages) and returns seq → payload.
func syncAll(t *testing.T, relURL, path, ch, tok string) map[uint64]string {
	t.Helper()
	got := map[uint64]string{}
	since := uint64(0)
	for {
		var page struct {
			Entries []struct {
				Seq     uint64
				Payload string
			} `json:"entries"`
			Messages []struct {
				Seq     uint64
				Payload string
			} `json:"messages"`
			HasMore bool `json:"has_more"`
		}
		url := fmt.Sprintf("%s%s?channel=%s&since_seq=%d&limit=500", relURL, path, ch, since)
		if code := getJSON(t, url, tok, &page); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		for _, e := range append(page.Entries, page.Messages...) {
			got[e.Seq] = e.Payload
			since = max(since, e.Seq)
		}
		if !page.HasMore {
			return got
		}
	}
}

// Acknowledged entries vanished after a crash, once one more
// publish followed the restart, because the archive's cap assumed seqs
// without gaps and a crash leaves one.
func TestAckedEntriesSurviveACrashGap(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "--quiet")
	acct, tok := signUp(t, s.apiURL)
	const ch = "acme/ops/gap"
	registerChannel(t, s.apiURL, acct.APIKey, ch)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, send := relaySocket(ctx, t, s.relURL+"/ws/"+ch, tok)
	const n = 900
	acked := map[uint64]string{}
	body := bytes.Repeat([]byte{'x'}, 4000)
	for i := range n {
		p := base64.StdEncoding.EncodeToString(append([]byte(fmt.Sprintf("%06d", i)), body...))
		r := send(frame{Type: "publish", Channel: ch, Payload: p})
		if r.Type != "ok" {
			t.Fatalf("publish %d: %+v", i, r)
		}
		acked[r.Seq] = p
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.waitErr
	c.CloseNow()

	s2 := startServe(t, data, "--quiet")
	tok = mintToken(t, s2.apiURL, acct.APIKey)
	_, send = relaySocket(ctx, t, s2.relURL+"/ws/"+ch, tok)
	if r := send(frame{Type: "publish", Channel: ch, Payload: "b25lIG1vcmU="}); r.Type != "ok" || r.Seq <= n {
		t.Fatalf("publish after restart: %+v", r)
	}
	for _, path := range []string{"/v1/messages", "/v1/sync"} {
		got := syncAll(t, s2.relURL, path, ch, tok)
		lost := 0
		for seq, p := range acked {
			if got[seq] != p {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("%s after a crash and one more publish: %d of %d acknowledged entries lost", path, lost, n)
		}
	}
}

// An outsider with any account jammed a room for good with one
// forged commit header; and a member could set a fence no group reaches.
func TestOutsiderCannotJamARoom(t *testing.T) {
	s := startServe(t, t.TempDir(), "--quiet")
	owner, ownerTok := signUpIn(t, s.apiURL, "owner@acme.test", "acme")
	_, evilTok := signUpIn(t, s.apiURL, "mallory@evil.test", "evil")
	const room = "acme/rooms/payroll"
	registerChannel(t, s.apiURL, owner.APIKey, room)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, evil := relaySocket(ctx, t, s.relURL+"/ws", evilTok)
	if r := evil(frame{Type: "subscribe", Channel: room}); r.Type != "error" || r.Code != "not_a_member" {
		t.Errorf("outsider subscribe: %+v, want not_a_member", r)
	}
	for _, epoch := range []uint64{0, 1<<64 - 2} {
		if r := evil(frame{Type: "publish", Channel: room, Payload: mlsCommit(epoch)}); r.Type != "error" {
			t.Errorf("outsider's forged commit at epoch %d: %+v", epoch, r)
		}
	}
	_, own := relaySocket(ctx, t, s.relURL+"/ws/"+room, ownerTok)
	if r := own(frame{Type: "publish", Channel: room, Payload: mlsCommit(0)}); r.Type != "ok" {
		t.Fatalf("the owner's commit after the outsider's attempt: %+v", r)
	}
	for _, path := range []string{"/v1/messages", "/v1/sync"} {
		if code := getJSON(t, s.relURL+path+"?channel="+room, evilTok, nil); code != 403 {
			t.Errorf("outsider GET %s: %d, want 403", path, code)
		}
	}

	// A member cannot set a fence the group could never reach.
	const fresh = "acme/rooms/fresh"
	registerChannel(t, s.apiURL, owner.APIKey, fresh)
	_, own2 := relaySocket(ctx, t, s.relURL+"/ws/"+fresh, ownerTok)
	if r := own2(frame{Type: "publish", Channel: fresh, Payload: mlsCommit(1<<64 - 2)}); r.Type != "error" {
		t.Errorf("first commit at epoch 2^64-2: %+v, want refused", r)
	}
	if r := own2(frame{Type: "publish", Channel: fresh, Payload: mlsCommit(0)}); r.Type != "ok" {
		t.Errorf("first commit at epoch 0 after the refused one: %+v", r)
	}
}

// Memory and disk a client could make the server hold.
func TestBoundedResources(t *testing.T) {
	s := startServe(t, t.TempDir(), "--quiet")
	acct, tok := signUp(t, s.apiURL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// An unauthenticated socket that declares a 1.4 MB first frame is cut
	// off after a few KiB instead of being buffered.
	addr := strings.TrimPrefix(s.relURL, "http://")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", addr)
	hdr := []byte{0x81, 0x80 | 127}
	hdr = binary.BigEndian.AppendUint64(hdr, 1400<<10)
	hdr = append(hdr, 0, 0, 0, 0) // mask
	nc.Write(hdr)
	nc.Write(bytes.Repeat([]byte{'a'}, 16<<10))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var resp bytes.Buffer
	buf := make([]byte, 4096)
	for !bytes.Contains(resp.Bytes(), []byte{0x03, 0xf1}) {
		n, err := nc.Read(buf)
		resp.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !bytes.Contains(resp.Bytes(), []byte{0x03, 0xf1}) { // close 1009, message too big
		t.Errorf("an unauthenticated 1.4 MB frame was not refused with 1009: %q", resp.Bytes())
	}

	// An account cannot fill channels it does not belong to, registered
	// or not.
	_, send := relaySocket(ctx, t, s.relURL+"/ws", tok)
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 1<<20))
	if r := send(frame{Type: "subscribe", Channel: "nobody/owns/this"}); r.Type != "error" {
		t.Errorf("subscribe to an unregistered channel: %+v", r)
	}
	if r := send(frame{Type: "publish", Channel: "nobody/owns/this", Payload: big}); r.Type != "error" {
		t.Errorf("1 MiB into an unregistered channel: %+v", r)
	}

	// Pages are bounded in bytes, not only in entries: six 1 MiB entries
	// do not come back in one page.
	const ch = "acme/ops/big"
	registerChannel(t, s.apiURL, acct.APIKey, ch)
	_, send = relaySocket(ctx, t, s.relURL+"/ws/"+ch, tok)
	for i := range 6 {
		if r := send(frame{Type: "publish", Channel: ch, Payload: big}); r.Type != "ok" {
			t.Fatalf("publish %d: %+v", i, r)
		}
	}
	var page struct {
		Entries []struct{ Seq uint64 } `json:"entries"`
		HasMore bool                   `json:"has_more"`
	}
	if code := getJSON(t, s.relURL+"/v1/sync?channel="+ch+"&limit=500", tok, &page); code != 200 || !page.HasMore || len(page.Entries) >= 6 || len(page.Entries) == 0 {
		t.Errorf("sync of six 1 MiB entries: %d, %d entries, has_more %v; want a byte-bounded page", code, len(page.Entries), page.HasMore)
	}
	if got := syncAll(t, s.relURL, "/v1/sync", ch, tok); len(got) != 6 {
		t.Errorf("paging through the byte-bounded pages found %d entries, want 6", len(got))
	}
}

// One client filled the directory's one global cap on device
// grants, and everybody's sign-in failed. Now the caps are per address:
// a flood from one loopback address leaves another's grant untouched.
func TestGrantFloodFromOneAddress(t *testing.T) {
	s := startServe(t, t.TempDir(), "--quiet")
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	grant := func(c *http.Client) int {
		key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
		resp, err := c.Post(s.apiURL+"/v1/device/grants", "application/json",
			strings.NewReader(`{"device_key":"`+key+`","label":"laptop"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	attacker, user := from("127.0.0.2"), from("127.0.0.3")
	refused := 0
	for i := 0; i < 10_001 && refused < 50; i++ {
		if code := grant(attacker); code == http.StatusTooManyRequests {
			refused++
		} else if code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("grant %d: %d", i, code)
		}
	}
	if refused == 0 {
		t.Error("10,001 grants from one address were all accepted")
	}
	if code := grant(user); code != http.StatusCreated && code != http.StatusOK {
		t.Errorf("another address's device grant after the flood: %d", code)
	}
}

// A second account claimed an existing org by naming it.
func TestOrgsAreOwned(t *testing.T) {
	s := startServe(t, t.TempDir(), "--quiet")
	signUpIn(t, s.apiURL, "founder@acme.test", "acme")
	var e struct{ Error string }
	if code := postJSON(t, s.apiURL+"/v1/accounts", "", map[string]string{"email": "mallory@evil.test", "org": "acme"}, &e); code != 403 || e.Error != "org_taken" {
		t.Errorf("signup into an existing org without an invite: %d %q, want 403 org_taken", code, e.Error)
	}
}

// Two servers ran on one data folder (forking groups), an
// unwritable database was found only by requests, and an existing 0755
// folder left the databases world-readable.
func TestServeOperationalFaults(t *testing.T) {
	data := t.TempDir()
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, data, "--quiet")
	acct, _ := signUp(t, s.apiURL)
	registerChannel(t, s.apiURL, acct.APIKey, "acme/ops/perm")
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("data folder mode %v, want 0700", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(data)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v, readable by others", e.Name(), info.Mode().Perm())
		}
	}

	// A second serve on the same folder refuses to start.
	if out, err := runBriefly(t, "serve", "--data", data, "--api-addr", "127.0.0.1:0", "--relay-addr", "127.0.0.1:0", "--quiet"); err == nil {
		t.Errorf("a second serve on one data folder started: %s", out)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.waitErr

	// Unwritable databases stop serve at start, not at the first request.
	if os.Geteuid() == 0 {
		t.Log("running as root: file modes do not stop root, unwritable databases not checked")
		return
	}
	for _, name := range []string{"directory.db", "relay.db"} {
		os.Chmod(filepath.Join(data, name), 0o400)
	}
	if out, err := runBriefly(t, "serve", "--data", data, "--api-addr", "127.0.0.1:0", "--relay-addr", "127.0.0.1:0", "--quiet"); err == nil {
		t.Errorf("serve started with read-only databases: %s", out)
	}
}

// Small contract holes: a ten-year token, a socket that kept
// publishing past its token's expiry, and request bodies read two ways.
func TestContractHoles(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "--quiet")
	acct, _ := signUp(t, s.apiURL)
	const ch = "acme/ops/tokens"
	registerChannel(t, s.apiURL, acct.APIKey, ch)
	secret, err := os.ReadFile(filepath.Join(data, "jwt_secret"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	long := hs256(bytes.TrimSpace(secret), acct.AccountID, now, now.Add(10*365*24*time.Hour))
	if code := getJSON(t, s.relURL+"/v1/sync?channel="+ch, long, nil); code != 401 {
		t.Errorf("a token valid for ten years: %d, want 401", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	short := hs256(bytes.TrimSpace(secret), acct.AccountID, now, now.Add(2*time.Second))
	c, send := relaySocket(ctx, t, s.relURL+"/ws/"+ch, short)
	if r := send(frame{Type: "publish", Channel: ch, Payload: "YQ=="}); r.Type != "ok" {
		t.Fatalf("publish before expiry: %+v", r)
	}
	time.Sleep(time.Until(now.Add(3 * time.Second))) // time passes: past the short token's expiry
	wsjson.Write(ctx, c, frame{Type: "publish", Channel: ch, Payload: "Yg=="})
	for {
		var f frame
		err := wsjson.Read(ctx, c, &f)
		if err != nil {
			if websocket.CloseStatus(err) == -1 {
				t.Errorf("socket after its token expired: %v, want a close", err)
			}
			break
		}
		if f.Type == "ok" && f.Seq != 0 {
			t.Errorf("a socket published after its token expired: %+v", f)
			break
		}
	}

	for _, body := range []string{
		`{"name":"acme/ops/one","name":"acme/ops/two"}`,
		`{"Name":"acme/ops/three"}`,
	} {
		req, _ := http.NewRequest("POST", s.apiURL+"/v1/channels", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+acct.APIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("POST /v1/channels %s: %d, want 400", body, resp.StatusCode)
		}
	}
}

// hs256 signs a relay token by hand, as anyone holding the secret could.
func hs256(secret []byte, sub string, iat, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	head, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"iss": "skytale-api", "aud": "skytale-api", "sub": sub, "iat": iat.Unix(), "exp": exp.Unix()})
	msg := enc(head) + "." + enc(claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(msg))
	return msg + "." + enc(m.Sum(nil))
}

// runBriefly runs the test binary as the tally command and returns its
// output and exit error; a command still running after ten seconds (a
// serve that started) is stopped and reported as a nil error.
func runBriefly(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TALLY_TEST_AS_MAIN=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return out, nil
	}
	return out, err
}
