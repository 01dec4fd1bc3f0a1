package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestCLIDeviceGrant: home A is set up and pushes; home B runs
// `signin --recover` with A's phrase, A approves the code B shows, and B
// pulls the whole log and pushes without ever running connect.
// recoverLine is the first JSON line of `signin --recover`.
type recoverLine struct {
	UserCode    string `json:"user_code"`
	Device      string `json:"device"`
	Fingerprint string `json:"fingerprint"`
}

// startRecover runs `tally --json signin --recover` on the home args
// with phrase in the background and returns its first line, the scanner
// of the lines after it, and the command's end.
func startRecover(t *testing.T, args []string, phrase string) (recoverLine, *bufio.Scanner, <-chan error) {
	t.Helper()
	return startRecoverAs(t, args, phrase, "laptop")
}

// startRecoverAs is startRecover for a device that gives label as its
// name.
func startRecoverAs(t *testing.T, args []string, phrase, label string) (recoverLine, *bufio.Scanner, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"tally", "--json"}, append(args, "signin", "--recover", "--label", label)...),
			strings.NewReader(phrase), pw, io.Discard)
		pw.CloseWithError(err)
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("no first line: %v", lines.Err())
	}
	var first recoverLine
	if err := json.Unmarshal(lines.Bytes(), &first); err != nil {
		t.Fatalf("first line %q: %v", lines.Text(), err)
	}
	return first, lines, done
}

func TestCLIDeviceGrant(t *testing.T) {
	st := skytaletest.NewStack(t)
	urls := []string{"--api-url", st.APIURL, "--relay-url", st.RelayURL}
	a := append([]string{"--home", t.TempDir()}, urls...)
	b := append([]string{"--home", t.TempDir()}, urls...)

	mustTally(t, append(a, "init")...)
	mustTally(t, append(a, "signin", "--org", "acme")...)
	mustTally(t, append(a, "connect")...)
	mustTally(t, append(a, "add", "first")...)
	mustTally(t, append(a, "add", "second")...)
	mustTally(t, append(a, "push")...)
	phrase := mustTally(t, append(a, "backup", "--yes")...)

	// B waits in the background; its first JSON line carries the code.
	first, lines, done := startRecover(t, b, phrase)
	if len(first.UserCode) != 9 {
		t.Fatalf("first line %+v", first)
	}

	if _, err := tally(t, "", append(a, "devices", "approve", "BCDF-GHJK")...); err == nil || !strings.Contains(err.Error(), "no pending device") {
		t.Fatalf("approve of an unknown code: %v", err)
	}
	// Without a terminal the fingerprint is a flag; a wrong one, or none,
	// approves nothing.
	if _, err := tally(t, "", append(a, "devices", "approve", first.UserCode)...); err == nil || !strings.Contains(err.Error(), "--fingerprint") {
		t.Fatalf("approve without a fingerprint off a terminal: %v", err)
	}
	if _, err := tally(t, "", append(a, "devices", "approve", "--fingerprint", "0000 0000 0000", first.UserCode)...); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("approve with a wrong fingerprint: %v", err)
	}
	if first.Fingerprint != first.Device || first.Fingerprint == "" {
		t.Fatalf("signin --recover --json: fingerprint %q, device %q", first.Fingerprint, first.Device)
	}
	// At a terminal it shows the fingerprint and asks; anything but yes
	// approves nothing.
	testOnlyTerminal = true
	var prompt bytes.Buffer
	err := run(context.Background(), append([]string{"tally"}, append(a, "devices", "approve", first.UserCode)...), strings.NewReader("n\n"), io.Discard, &prompt)
	testOnlyTerminal = false
	if err == nil || !strings.Contains(err.Error(), "not approved") {
		t.Fatalf("approve answered no: %v", err)
	}
	if !strings.Contains(prompt.String(), first.Fingerprint) || !strings.Contains(prompt.String(), "[y/N]") {
		t.Fatalf("the question does not show the fingerprint first: %q", prompt.String())
	}
	testOnlyTerminal = true
	out, err := tally(t, "y\n", append(a, "devices", "approve", first.UserCode)...)
	testOnlyTerminal = false
	if err != nil {
		t.Fatalf("approve answered yes: %v", err)
	}
	if !strings.Contains(out, "approved laptop (device "+first.Device+")") || !strings.Contains(out, "sync credential") {
		t.Fatalf("approve: %s", out)
	}

	if !lines.Scan() {
		t.Fatalf("no result line: %v", lines.Err())
	}
	var res struct {
		Org       string `json:"org"`
		Connected bool   `json:"connected"`
	}
	if err := json.Unmarshal(lines.Bytes(), &res); err != nil || res.Org != "acme" || !res.Connected {
		t.Fatalf("result line %q: %v", lines.Text(), err)
	}
	for lines.Scan() {
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if out := mustTally(t, append(b, "pull")...); !strings.Contains(out, "pulled 2 new entries") {
		t.Fatalf("pull on B: %s", out)
	}
	if out := mustTally(t, append(b, "log")...); !strings.Contains(out, "first") || !strings.Contains(out, "second") {
		t.Fatalf("log on B: %s", out)
	}
	mustTally(t, append(b, "add", "from", "b")...)
	if out := mustTally(t, append(b, "push")...); !strings.Contains(out, "pushed 1 entry") {
		t.Fatalf("push on B: %s", out)
	}
	if out := mustTally(t, append(a, "pull")...); !strings.Contains(out, "pulled 1 new entry") {
		t.Fatalf("pull on A: %s", out)
	}
}

func TestCLIRecoverBadInput(t *testing.T) {
	st := skytaletest.NewStack(t)
	g := []string{"--home", t.TempDir(), "--api-url", st.APIURL}
	if _, err := tally(t, "", append(g, "signin", "--recover")...); err == nil || !strings.Contains(err.Error(), "no recovery phrase") {
		t.Fatalf("empty stdin: %v", err)
	}
	if _, err := tally(t, "not a phrase\n", append(g, "signin", "--recover")...); err == nil || !strings.Contains(err.Error(), "24 words") {
		t.Fatalf("bad phrase: %v", err)
	}
	// A short wait ends with a clear message.
	words := strings.Repeat("abandon ", 23) + "art\n"
	_, err := tally(t, words, append(g, "signin", "--recover", "--wait", "300ms")...)
	if err == nil || !strings.Contains(err.Error(), "not approved within 300ms") {
		t.Fatalf("timeout: %v", err)
	}
	// Running it again with the same phrase is fine (and times out again).
	_, err = tally(t, words, append(g, "signin", "--recover", "--wait", "100ms")...)
	if err == nil || !strings.Contains(err.Error(), "not approved within") {
		t.Fatalf("second try: %v", err)
	}
	if _, err := tally(t, "", append(g, "devices", "approve", "BCDF-GHJK")...); err == nil || !strings.Contains(err.Error(), "tally signin") {
		t.Fatalf("approve while not signed in: %v", err)
	}
}

func TestCLIRecoverInterrupted(t *testing.T) {
	st := skytaletest.NewStack(t)
	g := []string{"--home", t.TempDir(), "--api-url", st.APIURL}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Interrupt once the user code is shown, that is while the command
	// waits for the approval.
	out := &cancelOnWrite{cancel: cancel, marker: "user code: "}
	err := run(ctx, append([]string{"tally"}, append(g, "signin", "--recover")...),
		strings.NewReader(strings.Repeat("abandon ", 23)+"art\n"), out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "stopped before the device was approved") {
		t.Fatalf("interrupted wait: %v", err)
	}
	if !strings.HasPrefix(out.String(), "user code: ") {
		t.Fatalf("output %q", out.String())
	}
}

// cancelOnWrite collects output and calls cancel once it contains marker.
type cancelOnWrite struct {
	strings.Builder
	cancel func()
	marker string
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	n, err := w.Builder.Write(p)
	if strings.Contains(w.Builder.String(), w.marker) {
		w.cancel()
	}
	return n, err
}
