package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

type inProcess struct {
	apiURL, relURL string
	healthURL      string // with HealthAddr
	metricsURL     string // with MetricsAddr
	log            *syncBuffer
	stop           func() error // cancels serve and returns its error
}

// serveInProcess runs serve in this process with o (ephemeral loopback
// ports unless o says otherwise) and waits until every plane it runs
// listens. It fails the test if serve returns first.
func serveInProcess(t *testing.T, o serveOptions) *inProcess {
	t.Helper()
	if o.APIAddr == "" {
		o.APIAddr = "127.0.0.1:0"
	}
	if o.RelayAddr == "" {
		o.RelayAddr = "127.0.0.1:0"
	}
	o.Quiet = true
	urls := make(chan [2]string, 4)
	o.listening = func(plane, url string) { urls <- [2]string{plane, url} }
	p := &inProcess{log: new(syncBuffer)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, p.log) }()
	want := 2
	if o.Only != "" {
		want = 1
	}
	if o.HealthAddr != "" {
		want++
	}
	if o.MetricsAddr != "" {
		want++
	}
	for range want {
		select {
		case u := <-urls:
			if u[0] == "directory" {
				p.apiURL = u[1]
			} else if u[0] == "health" {
				p.healthURL = u[1]
			} else if u[0] == "metrics" {
				p.metricsURL = u[1]
			} else {
				p.relURL = u[1]
			}
		case err := <-done:
			cancel()
			t.Fatalf("serve returned before listening: %v\n%s", err, p.log)
		}
	}
	var once sync.Once
	var err error
	p.stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { p.stop() })
	return p
}

// TestServeSecondServeOnOneDataFolderRefused: while one `tally serve` runs
// on a data folder, another on the same folder exits at once with one line
// that names the folder, without touching its databases; in-process as
// well. Once the first is gone (even by SIGKILL) the folder can be served
// again.
func TestServeSecondServeOnOneDataFolderRefused(t *testing.T) {
	data := t.TempDir()
	first := startServe(t, data, "--quiet")
	acct, tok := signUp(t, first.apiURL)
	registerChannel(t, first.apiURL, acct.APIKey, "acme/ops/locked")

	cmd := exec.Command(os.Args[0], "serve", "--data", data, "--api-addr", "127.0.0.1:0", "--relay-addr", "127.0.0.1:0", "--quiet")
	cmd.Env = append(os.Environ(), "TALLY_TEST_AS_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second serve: %v, want exit status 1; stderr: %s", err, stderr.String())
	}
	msg := strings.TrimSpace(stderr.String())
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, data) || !strings.Contains(msg, "in use") {
		t.Fatalf("second serve said %q, want one line naming %s as in use", msg, data)
	}
	if strings.Contains(msg, "listening") {
		t.Fatal("the second serve listened before refusing")
	}

	// Each plane has its own lock: a second directory alone, or a second
	// relay alone, is refused too.
	for _, only := range []string{"directory", "relay"} {
		err := serve(context.Background(), serveOptions{Data: data, Only: only, APIAddr: "127.0.0.1:0", RelayAddr: "127.0.0.1:0", Quiet: true}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "another tally serve runs its "+only) {
			t.Fatalf("second %s in this process: %v", only, err)
		}
	}

	// The first one still serves, untouched.
	if code := getJSON(t, first.relURL+"/v1/sync?channel=acme%2Fops%2Flocked", tok, nil); code != 200 {
		t.Fatalf("first serve after the refused ones: %d", code)
	}

	// A killed serve leaves no lock behind: the kernel drops it.
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.waitErr
	again := startServe(t, data, "--quiet")
	var got testToken
	if code := postJSON(t, again.apiURL+"/v1/tokens", acct.APIKey, map[string]any{}, &got); code != 201 {
		t.Fatalf("token from the restarted serve: %d", code)
	}
	// And a cleanly stopped one releases its locks at exit.
	again.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-again.waitErr; err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	p := serveInProcess(t, serveOptions{Data: data})
	if err := p.stop(); err != nil {
		t.Fatalf("serve after a clean stop: %v", err)
	}
}

// TestServeTightensModes: a data folder that already exists as 0755 with
// world-readable databases and secrets is made 0700 with owner-only files
// at start, and the files SQLite creates while serving (-wal, -shm) are
// owner-only too. A file the operator made read-only is not made writable.
func TestServeTightensModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	data := t.TempDir()
	p := serveInProcess(t, serveOptions{Data: data})
	acct, _ := signUp(t, p.apiURL)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	// Loosen everything, as a folder made by hand or by an older build.
	os.Chmod(data, 0o755)
	entries, _ := os.ReadDir(data)
	if len(entries) < 4 {
		t.Fatalf("data folder has %d files", len(entries))
	}
	for _, e := range entries {
		if e.IsDir() {
			os.Chmod(filepath.Join(data, e.Name()), 0o755)
			sub, _ := os.ReadDir(filepath.Join(data, e.Name()))
			for _, f := range sub {
				os.Chmod(filepath.Join(data, e.Name(), f.Name()), 0o644)
			}
			continue
		}
		os.Chmod(filepath.Join(data, e.Name()), 0o644)
	}
	// SQLite makes new -wal and -shm files: remove them so the run below
	// creates them under the umask.
	for _, n := range []string{"directory.db-wal", "directory.db-shm", "relay.db-wal", "relay.db-shm"} {
		os.Remove(filepath.Join(data, n))
	}

	p = serveInProcess(t, serveOptions{Data: data})
	tok := mintToken(t, p.apiURL, acct.APIKey)
	registerChannel(t, p.apiURL, acct.APIKey, "acme/ops/modes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, send := relaySocket(ctx, t, p.relURL+"/ws/acme/ops/modes", tok)
	if r := send(frame{Type: "publish", Channel: "acme/ops/modes", Payload: "YQ=="}); r.Type != "ok" {
		t.Fatalf("publish: %+v", r)
	}
	ws.Close(websocket.StatusNormalClosure, "")

	fi, err := os.Stat(data)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data folder mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	entries, _ = os.ReadDir(data)
	seen := map[string]bool{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		seen[e.Name()] = true
		if e.IsDir() {
			// The relay archive's log: a folder of its own.
			if m := info.Mode().Perm(); m != 0o700 {
				t.Errorf("%s: mode %v, want 0700", e.Name(), m)
			}
			sub, _ := os.ReadDir(filepath.Join(data, e.Name()))
			for _, f := range sub {
				if fi, err := f.Info(); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s/%s: mode %v (%v), want 0600", e.Name(), f.Name(), fi.Mode().Perm(), err)
				}
			}
			continue
		}
		if m := info.Mode().Perm(); m != 0o600 {
			t.Errorf("%s: mode %v, want 0600", e.Name(), m)
		}
	}
	for _, n := range []string{"directory.db", "relay.db", "directory.db-wal", "relay.db-wal", "relay.db-log", "jwt_secret", "internal_secret", "directory.lock", "relay.lock"} {
		if !seen[n] {
			t.Errorf("%s missing from the data folder (have %v)", n, seen)
		}
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}

	// Read-only stays read-only: serve refuses instead of changing it.
	if os.Geteuid() != 0 {
		os.Chmod(filepath.Join(data, "relay.db"), 0o400)
		err := serve(context.Background(), serveOptions{Data: data, APIAddr: "127.0.0.1:0", RelayAddr: "127.0.0.1:0"}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "relay.db is not writable") {
			t.Fatalf("serve with a read-only relay.db: %v", err)
		}
		if m := perm(t, filepath.Join(data, "relay.db")); m != 0o400 {
			t.Fatalf("relay.db mode %v after the refused start", m)
		}
	}
}

func perm(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestServeRefusesUnwritableDatabase: a database this process cannot
// write stops serve at start with a message naming the file, for each
// plane, and nothing listens. As root, whom modes do not stop, the file is
// made immutable instead.
func TestServeRefusesUnwritableDatabase(t *testing.T) {
	for _, db := range []string{"directory.db", "relay.db"} {
		t.Run(db, func(t *testing.T) {
			data := t.TempDir()
			p := serveInProcess(t, serveOptions{Data: data})
			signUp(t, p.apiURL)
			if err := p.stop(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(data, db)
			makeUnwritable(t, path)
			var logs syncBuffer
			listened := false
			err := serve(context.Background(), serveOptions{
				Data: data, APIAddr: "127.0.0.1:0", RelayAddr: "127.0.0.1:0",
				listening: func(string, string) { listened = true },
			}, &logs)
			if err == nil || !strings.Contains(err.Error(), path+" is not writable") {
				t.Fatalf("serve with an unwritable %s: %v", db, err)
			}
			if listened || strings.Contains(logs.String(), "listening") {
				t.Fatalf("serve listened before refusing: %s", logs.String())
			}
		})
	}
}

// TestServePlainHTTPOnlyOnLoopback: a non-loopback address without
// --insecure-http is refused before anything is created, with a message
// that says what to do; with the flag, serve starts and logs a warning.
func TestServePlainHTTPOnlyOnLoopback(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, o := range []serveOptions{
		{Data: data, APIAddr: "0.0.0.0:0", RelayAddr: "127.0.0.1:0"},
		{Data: data, APIAddr: "127.0.0.1:0", RelayAddr: "[::]:0"},
		{Data: data, Only: "relay", RelayAddr: ":0"},
	} {
		err := serve(context.Background(), o, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "TLS proxy") || !strings.Contains(err.Error(), "--insecure-http") {
			t.Fatalf("%s/%s without --insecure-http: %v", o.APIAddr, o.RelayAddr, err)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Fatalf("a refused serve created the data folder (%v)", err)
		}
	}
	// --only directory does not look at the relay's address.
	p := serveInProcess(t, serveOptions{Data: data, Only: "directory", RelayAddr: "0.0.0.0:8443"})
	if strings.Contains(p.log.String(), "WARN") {
		t.Fatalf("a loopback directory warned: %s", p.log)
	}
	p.stop()

	p = serveInProcess(t, serveOptions{Data: data, APIAddr: "0.0.0.0:0", InsecureHTTP: true})
	if !strings.Contains(p.log.String(), "level=WARN msg=\"directory serves plain HTTP on a non-loopback address") {
		t.Fatalf("no warning for plain HTTP on 0.0.0.0: %s", p.log)
	}
	if strings.Contains(p.log.String(), "signup=open") {
		t.Fatal("signup opened by default on a non-loopback address")
	}
	if code := getJSON(t, p.apiURL+"/health", "", nil); code != 200 {
		t.Fatalf("health: %d", code)
	}
}

// dialRaw opens a TCP connection to a plane's URL.
func dialRaw(t *testing.T, url string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reads from c until the server closes it and returns what
// it sent; it fails the test if the connection is still open after a
// minute (the timeouts under test are a second).
func closedByServer(t *testing.T, c net.Conn, what string) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server still holds the connection", what)
	}
	return string(b)
}

// TestServeCutsSlowAndIdleConnections reproduces "idle and partial-body
// HTTP connections are held forever": a request body that stops half way,
// a request header that never ends, and an idle keep-alive connection are
// each closed by the server on both planes, after the read, header and
// idle timeouts; a WebSocket outlives all of them.
func TestServeCutsSlowAndIdleConnections(t *testing.T) {
	p := serveInProcess(t, serveOptions{
		Data:        t.TempDir(),
		ReadTimeout: time.Second, ReadHeaderTimeout: time.Second,
		WriteTimeout: time.Second, IdleTimeout: time.Second,
	})
	for _, u := range []string{p.apiURL, p.relURL} {
		// A partial body: 1000 bytes announced, 10 sent.
		c := dialRaw(t, u)
		fmt.Fprintf(c, "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"email\":")
		closedByServer(t, c, u+": partial body")

		// A header that never ends.
		c = dialRaw(t, u)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: a")
		closedByServer(t, c, u+": partial header")

		// An idle keep-alive connection after a complete request.
		c = dialRaw(t, u)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: health on a raw connection: %v", u, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.Close {
			t.Fatalf("%s: the server did not keep the connection alive", u)
		}
		closedByServer(t, c, u+": idle keep-alive")
	}

	// A WebSocket is not cut by the read, write or idle timeouts: the
	// relay takes the connection over and sets its own deadlines.
	acct, tok := signUp(t, p.apiURL)
	registerChannel(t, p.apiURL, acct.APIKey, "acme/ops/slow")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, send := relaySocket(ctx, t, p.relURL+"/ws/acme/ops/slow", tok)
	time.Sleep(2500 * time.Millisecond) // past every timeout of the HTTP server
	if r := send(frame{Type: "publish", Channel: "acme/ops/slow", Payload: "YQ=="}); r.Type != "ok" {
		t.Fatalf("publish on a socket older than the HTTP timeouts: %+v", r)
	}
	ws.Close(websocket.StatusNormalClosure, "")
}

// TestServeConnectionCap: with --max-conns 2, two open connections to a
// plane make a third wait (it is not refused); it is answered as soon as
// one of the two closes. The cap counts WebSockets too.
func TestServeConnectionCap(t *testing.T) {
	p := serveInProcess(t, serveOptions{Data: t.TempDir(), MaxConns: 2, ReadTimeout: time.Minute, IdleTimeout: time.Minute,
		// The relay's own admission would make room by closing the idle
		// WebSocket; this test is about the listener.
		admissionOptions: admissionOptions{RelayMaxConns: 100}})
	if !strings.Contains(p.log.String(), "max_conns=2") {
		t.Fatalf("the cap is not logged: %s", p.log)
	}
	// Two keep-alive connections that have been answered, so the server
	// has accepted both.
	var held []net.Conn
	for range 2 {
		c := dialRaw(t, p.apiURL)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("health: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		held = append(held, c)
	}
	answered := getInBackground(p.apiURL + "/health")
	select {
	case code := <-answered:
		t.Fatalf("a third connection over the cap of 2 was answered (%d)", code)
	case <-time.After(200 * time.Millisecond):
	}
	held[0].Close()
	if code := <-answered; code != 200 {
		t.Fatalf("the waiting request, once a slot was free: %d", code)
	}

	// On the relay, two WebSockets fill the cap.
	acct, tok := signUp(t, p.apiURL)
	registerChannel(t, p.apiURL, acct.APIKey, "acme/ops/cap")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws1, _ := relaySocket(ctx, t, p.relURL+"/ws/acme/ops/cap", tok)
	relaySocket(ctx, t, p.relURL+"/ws/acme/ops/cap", tok)
	answered = getInBackground(p.relURL + "/health")
	select {
	case code := <-answered:
		t.Fatalf("the relay answered over a cap of two WebSockets (%d)", code)
	case <-time.After(200 * time.Millisecond):
	}
	ws1.Close(websocket.StatusNormalClosure, "")
	if code := <-answered; code != 200 {
		t.Fatalf("relay health once a WebSocket closed: %d", code)
	}
}

// getInBackground GETs url on a connection of its own and sends the status
// on the channel it returns, or -1 if the request failed.
func getInBackground(url string) <-chan int {
	answered := make(chan int, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{}}).Get(url)
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	return answered
}
