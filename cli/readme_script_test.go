package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// The README's walk-throughs run as the scripts in testdata/readme, one
// per section, each on a fresh data folder and free loopback ports, with
// tally the test binary itself (TestMain). TestReadmeScriptsMatch keeps
// the README's blocks and the scripts the same commands.

// scriptTally is the tally command of the scripts: cli.Main, with its
// stdout and stderr also appended to the file $TALLY_SCRIPT_TEE names when set, so a
// script can read what a command running in the background has printed
// so far (testscript shows a background command's output only once it
// exits).
func scriptTally() {
	var stdout, stderr io.Writer = os.Stdout, os.Stderr
	if tee := os.Getenv("TALLY_SCRIPT_TEE"); tee != "" {
		f, err := os.OpenFile(tee, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		stdout, stderr = io.MultiWriter(os.Stdout, f), io.MultiWriter(os.Stderr, f)
	}
	ctx, stop := signalContext()
	code := Main(ctx, os.Args, os.Stdin, stdout, stderr)
	stop()
	os.Exit(code)
}

func TestReadmeWalkthroughs(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/readme",
		RequireExplicitExec: false,
		Setup: func(env *testscript.Env) error {
			api, relay, err := twoFreePorts()
			if err != nil {
				return err
			}
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("DEMO", filepath.Join(env.WorkDir, "tally-demo"))
			env.Setenv("API_ADDR", api)
			env.Setenv("RELAY_ADDR", relay)
			env.Setenv("TALLY_API_URL", "http://"+api)
			env.Setenv("TALLY_RELAY_URL", "http://"+relay)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"grab":  cmdGrab,
			"await": cmdAwait,
			"ready": cmdReady,
		},
	})
}

// twoFreePorts returns two loopback addresses that were free a moment
// ago (held together, so they differ).
func twoFreePorts() (string, string, error) {
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", err
	}
	defer a.Close()
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", err
	}
	defer b.Close()
	return a.Addr().String(), b.Addr().String(), nil
}

// cmdGrab is `grab NAME REGEXP`: it sets $NAME to the first group of
// REGEXP's first match in the last command's stdout (its stderr with
// -stderr), and fails when nothing matches.
func cmdGrab(ts *testscript.TestScript, neg bool, args []string) {
	from := "stdout"
	if len(args) > 0 && args[0] == "-stderr" {
		from, args = "stderr", args[1:]
	}
	if neg || len(args) != 2 {
		ts.Fatalf("usage: grab [-stderr] NAME REGEXP")
	}
	re := regexp.MustCompile(args[1])
	m := re.FindStringSubmatch(ts.ReadFile(from))
	if len(m) < 2 {
		ts.Fatalf("no match for %q in %s", args[1], from)
	}
	ts.Setenv(args[0], m[1])
}

// cmdAwait is `await FILE NAME REGEXP`: it waits (up to a minute) until
// FILE, which a command in the background writes, matches REGEXP, then
// sets $NAME to the first group of the match.
func cmdAwait(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: await FILE NAME REGEXP")
	}
	re := regexp.MustCompile(args[2])
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(ts.MkAbs(args[0]))
		if m := re.FindSubmatch(b); len(m) >= 2 {
			ts.Setenv(args[1], string(m[1]))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s never matched %q; it holds %q", args[0], args[2], b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdReady is `ready`: it waits (up to a minute) until the directory at
// $TALLY_API_URL and the relay at $TALLY_RELAY_URL answer /health.
func cmdReady(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: ready")
	}
	for _, base := range []string{ts.Getenv("TALLY_API_URL"), ts.Getenv("TALLY_RELAY_URL")} {
		deadline := time.Now().Add(time.Minute)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/health", nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			cancel()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				ts.Fatalf("%s/health never answered 200: %v", base, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

var _ = strings.TrimSpace
