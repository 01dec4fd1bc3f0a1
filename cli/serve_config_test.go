package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeConfig writes a tally serve config file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tally.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeConfigFile: every flag of tally serve has a key in the config
// file; a flag beats TALLY_SERVE_* which beats the file (a seat's
// TALLY_* variables are not serve's); a key serve does not
// know, a value a flag would refuse and --limits off off loopback are
// refused, naming what is wrong; check-config says so without starting.
func TestServeConfigFile(t *testing.T) {
	ctx := context.Background()
	good := writeConfig(t, `
data = "`+t.TempDir()+`"
api_addr = "127.0.0.1:0"
relay_addr = "127.0.0.1:0"
archive_cap = 3
archive_ttl = "36h"
log_format = "json"
log_level = "warn"
quiet = true
trusted_proxy = ["10.0.0.0/8", "192.168.0.0/16"]
`)
	if code, out, errw := mainOut(ctx, "", "serve", "check-config", "--config", good); code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("check-config of a good file: exit %d, %q %q", code, out, errw)
	}
	for _, c := range []struct{ text, want string }{
		{`archive_cpa = 3`, "archive_cpa"},
		{`archive_cap = "many"`, "archive_cap"},
		{`log_format = "xml"`, "log-format"},
		{`api_addr = "0.0.0.0:3100"` + "\n" + `limits = "off"`, "loopback"},
		{`archive_cap = [`, "not valid TOML"},
		{`[relay]` + "\n" + `archive_cap = 3`, "relay"},
	} {
		code, _, errw := mainOut(ctx, "", "serve", "check-config", "--config", writeConfig(t, c.text))
		if code != exitUsage || !strings.Contains(errw, c.want) {
			t.Errorf("check-config of %q: exit %d, stderr %q, want exit 2 naming %q", c.text, code, errw, c.want)
		}
	}

	// The file's settings reach the planes, JSON logs included; the
	// environment beats the file and a flag beats both.
	for _, c := range []struct {
		env  []string
		args []string
		cap  float64
	}{
		{nil, nil, 3},
		{[]string{"TALLY_SERVE_ARCHIVE_CAP=4"}, nil, 4},
		{[]string{"TALLY_SERVE_ARCHIVE_CAP=4"}, []string{"--archive-cap", "5"}, 5},
		// TALLY_* without SERVE_ is the seat's (TALLY_RELAY_URL set for a
		// client is not serve's --relay-url): serve reads none of it.
		{[]string{"TALLY_ARCHIVE_CAP=4"}, nil, 3},
	} {
		start := startedLine(t, append([]string{"serve", "--config", good, "--log-level", "info"}, c.args...), c.env)
		if start["archive_cap"] != c.cap || start["archive_ttl"] != "36h0m0s" {
			t.Errorf("env %v, args %v: started with %v, want archive_cap %v and archive_ttl 36h", c.env, c.args, start, c.cap)
		}
	}
}

// startedLine runs tally serve with args and env until its JSON
// "tally serve starting" line, and returns that line.
func startedLine(t *testing.T, args, env []string) map[string]any {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "TALLY_TEST_AS_MAIN=1"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := make(chan map[string]any)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "tally serve starting" {
				lines <- m
				return
			}
		}
	}()
	select {
	case m, ok := <-lines:
		if !ok {
			t.Fatalf("tally %s: no JSON line saying it started", strings.Join(args, " "))
		}
		return m
	case <-time.After(60 * time.Second):
		t.Fatalf("tally %s did not start", strings.Join(args, " "))
	}
	return nil
}

// TestCheckConfigShowsSignupInEffect: check-config gives the signup mode
// serve would run with, which depends on the listen addresses when no
// setting names it, and never lists a default's zero value as if serve
// used it.
func TestCheckConfigShowsSignupInEffect(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "# in effect: signup open\n"},
		{[]string{"--api-addr", "0.0.0.0:3100", "--insecure-http"}, "# in effect: signup closed\n"},
		{[]string{"--open-signup=false"}, "# in effect: signup closed\n"},
		{[]string{"--signup", "invite"}, "# in effect: signup invite\n"},
	} {
		args := append(append([]string{"serve"}, c.args...), "check-config")
		code, out, errw := mainOut(ctx, "", args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q in:\n%s", args, code, errw, c.want, out)
		}
		if c.args == nil && (strings.Contains(out, "open_signup = false") || strings.Contains(out, `signup = ""`)) {
			t.Errorf("check-config lists signup's zero value as its default:\n%s", out)
		}
	}
}
