package cli

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"github.com/skytale-oss/skytale/internal/pgtest"
)

// TestServeRelayFollowsSeveralDirectories: two directories on one
// PostgreSQL and a relay given both (--directory-url a,b). The first
// directory is killed; a removal sent to the second takes effect on the
// relay (the removed member's subscription ends and its reads are
// refused), and the relay stays ready: the feed cursors it took from the
// first directory mean the same on the second.
func TestServeRelayFollowsSeveralDirectories(t *testing.T) {
	pg, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		if errors.Is(err, pgtest.ErrUnavailable) && os.Getenv("CI") == "" {
			t.Skipf("PostgreSQL not available: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	dbURL, err := pg.NewSchema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	secrets := t.TempDir()
	jwtFile, internalFile := filepath.Join(secrets, "jwt"), filepath.Join(secrets, "internal")
	os.WriteFile(jwtFile, []byte(hexSecret()), 0o600)
	os.WriteFile(internalFile, []byte(hexSecret()), 0o600)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	relAddr := l.Addr().String()
	l.Close()
	cluster := []string{"--quiet", "--jwt-secret-file", jwtFile, "--internal-secret-file", internalFile}
	dir := append([]string{"--only", "directory", "--directory-db", dbURL, "--relay-url", "http://" + relAddr}, cluster...)
	d1 := startServe(t, t.TempDir(), dir...)
	d2 := startServe(t, t.TempDir(), dir...)
	r := startServe(t, t.TempDir(), append([]string{"--only", "relay", "--relay-addr", relAddr,
		"--directory-url", d1.apiURL + "," + d2.apiURL}, cluster...)...)

	owner, _ := signUp(t, d1.apiURL)
	bob, bobTok := signUpIn(t, d1.apiURL, "bob@bravo.test", "bravo")
	const ch = "acme/ops/multi"
	registerChannel(t, d1.apiURL, owner.APIKey, ch)
	if code := postJSON(t, d1.apiURL+"/v1/channels/members", owner.APIKey, map[string]string{"channel": ch, "account_id": bob.AccountID}, nil); code != 200 {
		t.Fatalf("add bob: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, send := relaySocket(ctx, t, r.relURL+"/ws", bobTok)
	if got := send(frame{Type: "subscribe", Channel: ch}); got.Type != "ok" {
		t.Fatalf("bob subscribes: %+v", got)
	}
	if got := send(frame{Type: "publish", Channel: ch, Payload: "YQ=="}); got.Type != "ok" {
		t.Fatalf("bob publishes: %+v", got)
	}

	d1.cmd.Process.Kill()
	<-d1.waitErr
	// Tokens of the second directory are good on the relay too.
	ownerTok := mintToken(t, d2.apiURL, owner.APIKey)
	req, _ := http.NewRequest("DELETE", d2.apiURL+"/v1/channels/members?channel=acme%2Fops%2Fmulti&account_id="+bob.AccountID, nil)
	req.Header.Set("Authorization", "Bearer "+owner.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("remove bob on the second directory: %d", resp.StatusCode)
	}
	var got frame
	if err := wsjson.Read(ctx, c, &got); err != nil || got.Type != "error" || got.Code != "not_a_member" {
		t.Fatalf("bob's socket after his removal on the second directory: %+v, %v", got, err)
	}
	if code := getJSON(t, r.relURL+"/v1/sync?channel=acme%2Fops%2Fmulti", bobTok, nil); code != 403 {
		t.Fatalf("bob's read after his removal: %d, want 403", code)
	}
	if code := getJSON(t, r.relURL+"/v1/sync?channel=acme%2Fops%2Fmulti", ownerTok, nil); code != 200 {
		t.Fatalf("the owner's read: %d", code)
	}
	waitGet(t, r.relURL+"/ready", http.StatusOK)
}
