package cli

import (
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
