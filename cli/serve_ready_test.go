package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

func hexSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// statusOf answers the status code and body of GET url.
func statusOf(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitGet polls GET url until it answers want, failing after a minute.
func waitGet(t *testing.T, url string, want int) string {
	t.Helper()
	var body string
	waitfor.Nil(t, time.Minute, func() error {
		var code int
		if code, body = statusOf(t, url); code != want {
			return fmt.Errorf("GET %s: %d %s, want %d", url, code, body, want)
		}
		return nil
	})
	return body
}

// TestServeQuietKeepsWarnings: --quiet drops the request lines and
// nothing else: a relay whose directory is unreachable still logs its
// failed polls, and answers not ready on its own listener and on
// --health-addr, whose /health stays 200.
func TestServeQuietKeepsWarnings(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close()
	p := serveInProcess(t, serveOptions{Data: t.TempDir(), Only: "relay", DirectoryURL: deadURL, ReadyFeedLag: 200 * time.Millisecond,
		admissionOptions: admissionOptions{HealthAddr: "127.0.0.1:0"},
		secretSources:    secretSources{JWTEnv: hexSecret(), InternalEnv: hexSecret()}})
	body := waitGet(t, p.relURL+"/ready", http.StatusServiceUnavailable)
	if !strings.Contains(body, `"unavailable"`) || !strings.Contains(body, "feed") {
		t.Fatalf("relay /ready: %s", body)
	}
	body = waitGet(t, p.healthURL+"/ready", http.StatusServiceUnavailable)
	if !strings.Contains(body, "relay not ready") {
		t.Fatalf("health listener /ready: %s", body)
	}
	if code, _ := statusOf(t, p.healthURL+"/health"); code != http.StatusOK {
		t.Fatalf("health listener /health: %d", code)
	}
	for range 3 {
		statusOf(t, p.relURL+"/health")
	}
	waitfor.True(t, 30*time.Second, func() bool { return strings.Contains(p.log.String(), "poll failed") },
		"--quiet hid the relay's warnings:\n%s", p.log)
	if strings.Contains(p.log.String(), "path=/health") || strings.Contains(p.log.String(), "path=/ready") {
		t.Fatalf("--quiet logged request lines:\n%s", p.log)
	}
}

// TestServeReadyOnHealthListener: with both planes running, /ready is 200
// on each plane and on --health-addr. Without --quiet, requests are
// logged (so TestServeQuietKeepsWarnings proves something).
func TestServeReadyOnHealthListener(t *testing.T) {
	log := new(syncBuffer)
	p := serveInProcess(t, serveOptions{Data: t.TempDir(), admissionOptions: admissionOptions{HealthAddr: "127.0.0.1:0"}})
	for _, u := range []string{p.apiURL, p.relURL, p.healthURL} {
		if body := waitGet(t, u+"/ready", http.StatusOK); !strings.Contains(body, `"ready"`) {
			t.Fatalf("%s/ready: %s", u, body)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, serveOptions{Data: t.TempDir(), APIAddr: "127.0.0.1:0", RelayAddr: "127.0.0.1:0",
			listening: func(plane, url string) {
				if plane == "relay" {
					urls <- url
				}
			}}, log)
	}()
	defer func() { cancel(); <-done }()
	var relURL string
	select {
	case relURL = <-urls:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	waitGet(t, relURL+"/ready", http.StatusOK)
	statusOf(t, relURL+"/health")
	waitfor.True(t, 30*time.Second, func() bool { return strings.Contains(log.String(), "path=/health") },
		"without --quiet no request line was logged:\n%s", log)
}

// TestServeWaitsForNATS: tally serve started while its NATS is down does
// not exit: it listens, answers /health 200 and everything else 503
// unavailable, and serves once a nats-server comes up on the address.
func TestServeWaitsForNATS(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	jwtFile, internalFile := filepath.Join(dir, "jwt"), filepath.Join(dir, "internal")
	os.WriteFile(jwtFile, []byte(hexSecret()+"\n"), 0o600)
	os.WriteFile(internalFile, []byte(hexSecret()), 0o600)
	p := serveInProcess(t, serveOptions{Data: t.TempDir(), RelayNATS: fmt.Sprintf("nats://127.0.0.1:%d", port),
		admissionOptions: admissionOptions{HealthAddr: "127.0.0.1:0"},
		secretSources:    secretSources{JWTFile: jwtFile, InternalFile: internalFile}})
	for _, u := range []string{p.apiURL, p.relURL, p.healthURL} {
		if code, body := statusOf(t, u+"/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "NATS") {
			t.Fatalf("%s/ready while NATS is down: %d %s", u, code, body)
		}
		if code, _ := statusOf(t, u+"/health"); code != http.StatusOK {
			t.Fatalf("%s/health while NATS is down: %d", u, code)
		}
	}
	if code, body := statusOf(t, p.relURL+"/v1/sync?channel=acme%2Fops%2Fx"); code != http.StatusServiceUnavailable || !strings.Contains(body, "unavailable") {
		t.Fatalf("a read while NATS is down: %d %s", code, body)
	}

	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: 8 << 20, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	for _, u := range []string{p.apiURL, p.relURL, p.healthURL} {
		waitGet(t, u+"/ready", http.StatusOK)
	}
	acct, tok := signUp(t, p.apiURL)
	registerChannel(t, p.apiURL, acct.APIKey, "acme/ops/late")
	if code := getJSON(t, p.relURL+"/v1/sync?channel=acme%2Fops%2Flate", tok, nil); code != http.StatusOK {
		t.Fatalf("a read once NATS came: %d", code)
	}
}

// TestServeJoiningNeedsSecrets: a node meant to join a cluster does not
// generate secrets: without them it refuses before creating anything,
// saying which flag gives them; a secret given twice, or one that is not
// hex of 32 bytes, is refused without quoting it.
func TestServeJoiningNeedsSecrets(t *testing.T) {
	for _, o := range []serveOptions{
		{Only: "relay"},
		{RelayNATS: "nats://127.0.0.1:1"},
		{DirectoryDB: "postgres://u@127.0.0.1:1/db"},
		{Only: "relay", secretSources: secretSources{JWTEnv: hexSecret()}},
	} {
		o.Data = filepath.Join(t.TempDir(), "data")
		o.APIAddr, o.RelayAddr = "127.0.0.1:0", "127.0.0.1:0"
		err := serve(context.Background(), o, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-secret-file") || !strings.Contains(err.Error(), "joins a cluster") {
			t.Fatalf("%+v: %v", o, err)
		}
		if _, err := os.Stat(o.Data); !os.IsNotExist(err) {
			t.Fatalf("a refused serve created the data folder (%v)", err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("hunter2-not-hex"), 0o600)
	for _, s := range []secretSources{
		{JWTFile: bad, InternalEnv: hexSecret()},
		{JWTEnv: "hunter2-not-hex", InternalEnv: hexSecret()},
		{JWTFile: bad, JWTEnv: hexSecret(), InternalEnv: hexSecret()},
	} {
		err := serve(context.Background(), serveOptions{Data: t.TempDir(), Only: "relay", APIAddr: "127.0.0.1:0", RelayAddr: "127.0.0.1:0", secretSources: s}, io.Discard)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("%+v: %v", s, err)
		}
	}
}
