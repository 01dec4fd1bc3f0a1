package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/skytaletest"
)

// cliJoin has joiner join room with a fresh invite while owner admits it
// with one `room admit`.
func cliJoin(t *testing.T, owner, joiner []string, ownerRoom, room, joinerDID string) {
	t.Helper()
	tok := strings.TrimSpace(mustTally(t, append(owner, "room", "invite", ownerRoom)...))
	j := startTally(append(joiner, "room", "join", room, tok, "--wait", "1m")...)
	eventually(t, "join to wait", func() bool { return strings.Contains(j.errw.String(), "waiting for the owner") })
	eventually(t, "the owner to admit "+joinerDID, func() bool {
		return strings.Contains(mustTally(t, append(owner, "room", "admit", ownerRoom)...), "admitted "+shortID(joinerDID))
	})
	if err := j.wait(t); err != nil {
		t.Fatalf("join: %v (%s)", err, j.errw.String())
	}
}

// historyTexts returns the texts of `tally --json history room`.
func historyTexts(t *testing.T, g []string, room string) []string {
	t.Helper()
	var texts []string
	for _, line := range strings.Split(strings.TrimSpace(mustTally(t, append(append([]string{}, g...), "--json", "history", room)...)), "\n") {
		if line == "" {
			continue
		}
		var m struct{ Text string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("history line %q: %v", line, err)
		}
		texts = append(texts, m.Text)
	}
	return texts
}

// TestCLIRoomThreeSeats runs the three-seat flow through the command tree:
// messages in every direction, a member offline during two commits catches
// up, a removed member reads nothing further, and neither plane's database
// holds a message.
func TestCLIRoomThreeSeats(t *testing.T) {
	dir := t.TempDir()
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{DBPath: filepath.Join(dir, "relay.db")},
		Directory: skytale.DirectoryConfig{DBPath: filepath.Join(dir, "directory.db")},
	})
	alice, _ := newHome(t, st, "acme")
	bob, bobDID := newHome(t, st, "bobco")
	carol, carolDID := newHome(t, st, "carolco")
	dave, daveDID := newHome(t, st, "daveco")
	const room = "acme/rooms/ops"
	mustTally(t, append(alice, "room", "create", "ops")...)
	cliJoin(t, alice, bob, "ops", room, bobDID)
	cliJoin(t, alice, carol, "ops", room, carolDID)

	mustTally(t, append(alice, "msg", "ops", "from alice")...)
	mustTally(t, append(bob, "msg", room, "from bob")...)
	mustTally(t, append(carol, "msg", room, "from carol")...)
	for who, g := range map[string][]string{"alice": alice, "bob": bob, "carol": carol} {
		if got := strings.Join(historyTexts(t, g, room), "|"); got != "from alice|from bob|from carol" {
			t.Fatalf("%s's history: %s", who, got)
		}
	}

	// Carol is offline while dave is added and removed (two commits).
	cliJoin(t, alice, dave, "ops", room, daveDID)
	mustTally(t, append(alice, "room", "remove", "ops", daveDID)...)
	mustTally(t, append(bob, "msg", room, "after two commits")...)
	if h := historyTexts(t, carol, room); h[len(h)-1] != "after two commits" {
		t.Fatalf("carol did not catch up: %q", h)
	}
	var mem struct {
		Epoch   uint64
		Members []struct{ Identity string }
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(carol, "--json", "room", "members", room)...)), &mem); err != nil || len(mem.Members) != 3 || mem.Epoch != 4 {
		t.Fatalf("carol's roster: %+v %v", mem, err)
	}

	// Bob is removed: he cannot send, and reads nothing further.
	mustTally(t, append(alice, "room", "remove", "ops", bobDID)...)
	mustTally(t, append(carol, "msg", room, "bob cannot read this")...)
	// Bob learns it from the commit, or, once the relay has learned of the
	// removal (within a second), from the relay's refusal.
	if _, err := tally(t, "", append(bob, "msg", room, "let me in")...); err == nil ||
		!strings.Contains(err.Error(), "removed from "+room) && !strings.Contains(err.Error(), "not a member of "+room+" at the relay") {
		t.Fatalf("msg of a removed member: %v", err)
	}
	if h, _ := tally(t, "", append(bob, "history", room)...); strings.Contains(h, "bob cannot read this") {
		t.Fatalf("removed member read: %s", h)
	}
	if h := historyTexts(t, alice, room); h[len(h)-1] != "bob cannot read this" {
		t.Fatalf("alice's history: %q", h)
	}

	for _, f := range []string{"relay.db", "relay.db-wal", "directory.db", "directory.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, s := range []string{"from alice", "from bob", "from carol", "after two commits", "bob cannot read this", "let me in"} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q", f, s)
			}
		}
	}
}
