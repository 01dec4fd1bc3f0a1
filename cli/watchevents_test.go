package cli

import (
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestCLIWatchTellsWhatHappens: a watch prints who joined, who was made
// an admin, who was removed and who left, as they happen, and --json
// prints them as events with their kind.
func TestCLIWatchTellsWhatHappens(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	bob, bobDID := newHome(t, st, "bobco")
	carol, carolDID := newHome(t, st, "carolco")
	for _, h := range [][]string{alice, bob, carol} {
		mustTally(t, append(h, "config", "set", "cover_traffic", "off")...)
	}
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops", "--auto", "--uses", "2")...))

	// One after the other: urfave's help flag is one value that every
	// command tree's parse writes, so two parses at once race.
	watch := startTally(append(alice, "watch", "ops")...)
	eventually(t, "the watch to connect", func() bool { return strings.Contains(watch.errw.String(), "watching ops") })
	jsonWatch := startTally(append(alice, "--json", "watch", "ops")...)
	eventually(t, "the JSON watch to connect", func() bool { return strings.Contains(jsonWatch.errw.String(), "watching ops") })

	mustTally(t, append(bob, "room", "join", "acme/rooms/ops", tok)...)
	mustTally(t, append(carol, "room", "join", "acme/rooms/ops", tok)...)
	mustTally(t, append(alice, "room", "admins", "add", "ops", bobDID)...)
	mustTally(t, append(alice, "room", "remove", "ops", carolDID)...)
	mustTally(t, append(bob, "room", "leave", "acme/rooms/ops")...)

	bobS, carolS := shortID(bobDID), shortID(carolDID)
	want := []string{
		"[ops] " + bobS + " joined",
		"[ops] " + carolS + " joined",
		"[ops] you made " + bobS + " an admin",
		"[ops] you removed " + carolS,
		"[ops] " + bobS + " left",
	}
	defer func() {
		if t.Failed() {
			t.Logf("watch:\n%s\nJSON watch:\n%s", watch.out.String(), jsonWatch.out.String())
		}
	}()
	eventually(t, "the watch to tell every change", func() bool { return strings.Contains(watch.out.String(), want[len(want)-1]) })
	out := watch.out.String()
	at := 0
	for _, w := range want {
		i := strings.Index(out[at:], w)
		if i < 0 {
			t.Fatalf("the watch does not say %q (in order) in:\n%s", w, out)
		}
		at += i + len(w)
	}
	eventually(t, "the JSON watch to tell the last change", func() bool { return strings.Contains(jsonWatch.out.String(), `"kind":"left"`) })
	for _, k := range []string{`"kind":"joined"`, `"kind":"role","role":"admin"`, `"kind":"removed-member"`, `"kind":"left"`} {
		if !strings.Contains(jsonWatch.out.String(), k) {
			t.Errorf("the JSON watch has no %s in:\n%s", k, jsonWatch.out.String())
		}
	}
	for _, w := range []*background{watch, jsonWatch} {
		if err := w.stop(t); err != nil {
			t.Fatalf("watch: %v", err)
		}
	}
	// The notices are for watches: the history holds none of them.
	if h := mustTally(t, append(alice, "history", "ops")...); strings.Contains(h, "joined") || strings.Contains(h, "left") {
		t.Fatalf("history holds membership notices:\n%s", h)
	}
}
