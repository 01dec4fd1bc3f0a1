package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLILinkOnServe drives a linked laptop end to end on `tally serve`:
// `signin --link` prints its code and fingerprint and waits, the person's
// identity device approves it, the laptop pulls the log and reads the
// room without ever holding the phrase, and after `devices revoke` it is
// out of both: its commands say revoked, and what is sent after reaches
// only the devices left.
func TestCLILinkOnServe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs tally serve")
	}
	srv := startServe(t, t.TempDir())
	urls := []string{"--api-url", srv.apiURL, "--relay-url", srv.relURL}
	alice := append([]string{"--home", t.TempDir()}, urls...)
	bob := append([]string{"--home", t.TempDir()}, urls...)
	laptopHome := t.TempDir()
	laptop := append([]string{"--home", laptopHome}, urls...)
	mustTally(t, append(alice, "init", "--name", "Alice")...)
	mustTally(t, append(alice, "signin", "--org", "acme")...)
	mustTally(t, append(bob, "init", "--name", "Bob")...)
	mustTally(t, append(bob, "signin", "--org", "bobco")...)
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops", "--auto")...))
	mustTally(t, append(bob, "room", "join", "acme/rooms/ops", tok)...)
	mustTally(t, append(alice, "add", "written before the laptop")...)
	mustTally(t, append(alice, "push")...)

	// The laptop asks; its first two lines are the code and fingerprint.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"tally"}, append(laptop, "signin", "--link", "--label", "laptop")...), strings.NewReader(""), pw, io.Discard)
		pw.CloseWithError(err)
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	var code, fp string
	for (code == "" || fp == "") && lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "code: "); ok {
			code = v
		}
		if v, ok := strings.CutPrefix(lines.Text(), "fingerprint: "); ok {
			fp = v
		}
	}
	if code == "" || fp == "" {
		t.Fatalf("no code and fingerprint lines: %v", lines.Err())
	}
	if _, err := tally(t, "", append(laptop, "devices", "approve", "--fingerprint", fp, code)...); err == nil || !strings.Contains(err.Error(), "no pending device") && !strings.Contains(err.Error(), "not signed in") {
		t.Fatalf("the laptop approving itself: %v", err)
	}
	if out := mustTally(t, append(alice, "devices", "approve", "--fingerprint", fp, code)...); !strings.Contains(out, "linked as device") {
		t.Fatalf("approve: %q", out)
	}
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rest.String(), "linked: device") || !strings.Contains(rest.String(), "holds no phrase") {
		t.Fatalf("the laptop says %q", rest.String())
	}
	if _, err := os.Stat(filepath.Join(laptopHome, "phrase")); !os.IsNotExist(err) {
		t.Fatalf("the linked home has a phrase file: %v", err)
	}
	if _, err := tally(t, "", append(laptop, "backup", "--yes")...); err == nil {
		t.Fatal("the linked laptop shows a phrase")
	}

	// It pulls the log and reads the room.
	mustTally(t, append(laptop, "pull")...)
	if out := mustTally(t, append(laptop, "log")...); !strings.Contains(out, "written before the laptop") {
		t.Fatalf("the laptop's log: %q", out)
	}
	mustTally(t, append(alice, "room", "members", "ops")...) // adds the laptop
	if out := mustTally(t, append(laptop, "devices", "join")...); !strings.Contains(out, "joined ops") {
		t.Fatalf("devices join: %q", out)
	}
	mustTally(t, append(bob, "msg", "acme/rooms/ops", "hello laptop")...)
	if out := mustTally(t, append(laptop, "history", "ops")...); !strings.Contains(out, "hello laptop") {
		t.Fatalf("the laptop's history: %q", out)
	}

	var devs struct {
		Devices []struct {
			ID            string `json:"id"`
			Label         string `json:"label"`
			HoldsIdentity bool   `json:"holds_identity"`
			This          bool   `json:"this"`
			LinkedAt      string `json:"linked_at"`
			LastSeen      string `json:"last_seen"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(alice, "--json", "devices", "list")...)), &devs); err != nil {
		t.Fatal(err)
	}
	var id string
	for _, d := range devs.Devices {
		if d.Label == "laptop" && !d.HoldsIdentity && d.LinkedAt != "-" && d.LastSeen != "-" {
			id = d.ID
		}
	}
	if id == "" {
		t.Fatalf("devices list: %+v", devs)
	}
	if _, err := tally(t, "", append(laptop, "devices", "revoke", id)...); err == nil || !strings.Contains(err.Error(), "does not hold the identity") {
		t.Fatalf("the laptop revoking: %v", err)
	}
	if out := mustTally(t, append(alice, "devices", "revoke", id)...); !strings.Contains(out, "epoch 1") || !strings.Contains(out, "removed from") {
		t.Fatalf("revoke: %q", out)
	}

	// Out of both: what is sent after reaches only the devices left.
	mustTally(t, append(alice, "add", "written after the revocation")...)
	mustTally(t, append(alice, "push")...)
	mustTally(t, append(bob, "msg", "acme/rooms/ops", "after the revocation")...)
	for _, cmd := range [][]string{{"pull"}, {"history", "ops"}, {"room", "create", "mine"}} {
		if out, err := tally(t, "", append(laptop, cmd...)...); err == nil || !strings.Contains(err.Error(), "revoked") || strings.Contains(out, "after the revocation") {
			t.Fatalf("the revoked laptop's %v: %q %v", cmd, out, err)
		}
	}
	if out := mustTally(t, append(laptop, "log")...); strings.Contains(out, "after the revocation") {
		t.Fatalf("the revoked laptop's log: %q", out)
	}
	if out := mustTally(t, append(alice, "history", "ops")...); !strings.Contains(out, "after the revocation") {
		t.Fatalf("alice's history: %q", out)
	}
}
