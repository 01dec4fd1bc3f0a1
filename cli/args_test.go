package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestCLIFlagsAfterTextAreFlags: flags after a room's name or a log
// entry's words are flags, not text (`tally msg ops --json hi` sends
// "hi" and prints JSON); after `--` every word is text, dashes and all
// (`--` then `-` sends a dash rather than reading stdin); an empty
// message is refused and nothing is sent.
func TestCLIFlagsAfterTextAreFlags(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	mustTally(t, append(alice, "config", "set", "cover_traffic", "off")...)
	mustTally(t, append(alice, "room", "create", "ops")...)

	out := mustTally(t, append(alice, "msg", "ops", "--json", "hi")...)
	var sent struct {
		Room string
		Seq  uint64
	}
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.Seq == 0 {
		t.Fatalf("msg ops --json hi printed %q (%v), want one JSON object", out, err)
	}
	mustTally(t, append(alice, "msg", "ops", "--", "--json", "is", "text")...)
	if _, err := tally(t, "from stdin\n", append(alice, "msg", "ops", "--", "-")...); err != nil {
		t.Fatal(err)
	}
	for _, empty := range [][]string{{""}, {"  "}, {"--"}} {
		if _, err := tally(t, "", append(append(alice, "msg", "ops"), empty...)...); err == nil {
			t.Fatalf("msg ops %q was sent", empty)
		}
	}

	var texts []string
	for _, line := range strings.Split(strings.TrimSpace(mustTally(t, append(alice, "--json", "history", "ops")...)), "\n") {
		var m struct{ Text string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("history line %q: %v", line, err)
		}
		texts = append(texts, m.Text)
	}
	if want := []string{"hi", "--json is text", "-"}; strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("history holds %q, want %q", texts, want)
	}

	// The log's add likewise.
	mustTally(t, append(alice, "add", "milk", "--json")...)
	mustTally(t, append(alice, "add", "--", "-n", "eggs")...)
	if _, err := tally(t, "", append(alice, "add", "--")...); err == nil {
		t.Fatal("add with no words after -- was taken")
	}
	var entries []string
	for _, line := range strings.Split(strings.TrimSpace(mustTally(t, append(alice, "--json", "log")...)), "\n") {
		var e struct{ Text string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		entries = append(entries, e.Text)
	}
	if want := []string{"milk", "-n eggs"}; strings.Join(entries, "|") != strings.Join(want, "|") {
		t.Fatalf("the log holds %q, want %q", entries, want)
	}
}

// TestCLIExitCodes: a command line that cannot run exits 2, something
// named that does not exist 3, a refusal for the caller 4, other
// failures 1; with --json the error is one JSON object on stderr.
func TestCLIExitCodes(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	bob, _ := newHome(t, st, "bobco")
	mustTally(t, append(alice, "config", "set", "cover_traffic", "off")...)
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops", "--auto")...))
	mustTally(t, append(bob, "room", "join", "acme/rooms/ops", tok)...)

	for _, c := range []struct {
		args []string
		code int
		kind string
	}{
		{append(alice, "msg"), exitUsage, "usage"},
		{append(alice, "--bogus", "log"), exitUsage, "usage"},
		{append(alice, "bogus"), exitUsage, "usage"},
		{append(alice, "msg", "ops", ""), exitUsage, "usage"},
		{[]string{"serve", "--data", t.TempDir(), "--signup", "sometimes"}, exitUsage, "usage"},
		{[]string{"serve", "--data", t.TempDir(), "--trusted-proxy", "not-a-prefix"}, exitUsage, "usage"},
		{append(alice, "contact", "revoke", "nosuch"), exitNotFound, "not_found"},
		{append(bob, "room", "invite", "acme/rooms/ops"), exitNotAllowed, "not_allowed"},
		{append(initHomeOnly(t, st), "signin", "--api-key", "sk_live_bogus"), exitNotAllowed, "not_allowed"},
		{[]string{"--home", t.TempDir(), "--api-url", refusedURL(t), "signin", "--org", "x"}, 1, "error"},
	} {
		code, out, errw := mainOut(ctx, "", c.args...)
		if code != c.code {
			t.Errorf("tally %s: exit %d (%s), want %d", strings.Join(c.args, " "), code, strings.TrimSpace(errw), c.code)
		}
		if out != "" {
			t.Errorf("tally %s printed on stdout: %q", strings.Join(c.args, " "), out)
		}
		code, _, errw = mainOut(ctx, "", append(c.args, "--json")...)
		var e struct{ Error, Message string }
		if err := json.Unmarshal([]byte(errw), &e); err != nil || code != c.code || e.Message == "" || strings.Count(errw, "\n") != 1 {
			t.Errorf("tally %s --json: exit %d, stderr %q (%v)", strings.Join(c.args, " "), code, errw, err)
			continue
		}
		if e.Error != c.kind && c.kind != "error" {
			t.Errorf("tally %s --json: error %q, want %q", strings.Join(c.args, " "), e.Error, c.kind)
		}
	}
	// tally --help works and lists the codes.
	code, out, errw := mainOut(ctx, "", "--help")
	if code != 0 || !strings.Contains(out, "EXIT CODES") || errw != "" {
		t.Fatalf("tally --help: exit %d, stderr %q, stdout:\n%s", code, errw, out)
	}
}

// initHomeOnly is a home configured for st with a seed and no account.
func initHomeOnly(t *testing.T, st *skytaletest.Stack) []string {
	g, _ := initHome(t, st)
	return g
}
