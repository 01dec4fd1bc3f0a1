package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestCLIRemovedAutoJoinerStaysOut drives through the command tree an
// auto invite with uses to spare, a join by it, the joiner's removal,
// which ends its account's membership, and the removed person's join with
// the same token, refused as removed.
func TestCLIRemovedAutoJoinerStaysOut(t *testing.T) {
	st := skytaletest.NewStack(t)
	home := func(name, org string) ([]string, string, string) {
		h := []string{"--home", t.TempDir()}
		mustTally(t, append(h, "config", "set", "api_url", st.APIURL)...)
		mustTally(t, append(h, "config", "set", "relay_url", st.RelayURL)...)
		mustTally(t, append(h, "init", "--name", name)...)
		var a struct {
			AccountID string `json:"account_id"`
		}
		if err := json.Unmarshal([]byte(mustTally(t, append(h, "--json", "signin", "--org", org)...)), &a); err != nil {
			t.Fatal(err)
		}
		var who struct {
			Identity string `json:"identity"`
		}
		if err := json.Unmarshal([]byte(mustTally(t, append(h, "--json", "whoami")...)), &who); err != nil {
			t.Fatal(err)
		}
		return h, a.AccountID, who.Identity
	}
	alice, _, _ := home("Alice", "acme")
	carol, carolAccount, carolDID := home("Carol", "carolco")
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops", "--auto", "--uses", "3")...))
	if !strings.HasPrefix(tok, "skt_room_") {
		t.Fatalf("an auto invite's token: %q", tok)
	}
	if out := mustTally(t, append(carol, "room", "join", "acme/rooms/ops", tok)...); !strings.Contains(out, "joined") {
		t.Fatalf("carol's join: %q", out)
	}
	mustTally(t, append(carol, "msg", "acme/rooms/ops", "hello")...)
	var rm struct {
		AccountID       string `json:"account_id"`
		MembershipEnded bool   `json:"membership_ended"`
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(alice, "--json", "room", "remove", "ops", carolDID)...)), &rm); err != nil {
		t.Fatal(err)
	}
	if rm.AccountID != carolAccount || !rm.MembershipEnded {
		t.Fatalf("the removal: %+v, want %s ended", rm, carolAccount)
	}
	if _, err := tally(t, "", append(carol, "msg", "acme/rooms/ops", "still here?")...); err == nil {
		t.Fatal("a removed member sent")
	}
	mustTally(t, append(carol, "room", "leave", "acme/rooms/ops")...)
	if _, err := tally(t, "", append(carol, "room", "join", "acme/rooms/ops", tok)...); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("the removed member's join with its old token: %v", err)
	}
	if out := mustTally(t, append(alice, "room", "members", "ops")...); !strings.Contains(out, "1 member") || strings.Contains(out, "Carol") {
		t.Fatalf("members after the removal: %q", out)
	}
}
