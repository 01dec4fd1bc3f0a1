package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestCLIRoomsWithoutTheOwner runs the flows of rooms that work when
// their owner is away through the command tree: an invite that admits on
// its own, an offline person added by account, a post-quantum room, and a
// leave the owner's next command commits.
func TestCLIRoomsWithoutTheOwner(t *testing.T) {
	st := skytaletest.NewStack(t)
	home := func(name string) []string {
		h := []string{"--home", t.TempDir()}
		mustTally(t, append(h, "config", "set", "api_url", st.APIURL)...)
		mustTally(t, append(h, "config", "set", "relay_url", st.RelayURL)...)
		mustTally(t, append(h, "init", "--name", name)...)
		return h
	}
	signin := func(h []string, org string) string {
		var a struct {
			AccountID string `json:"account_id"`
		}
		if err := json.Unmarshal([]byte(mustTally(t, append(h, "--json", "signin", "--org", org)...)), &a); err != nil || a.AccountID == "" {
			t.Fatalf("signin: %+v %v", a, err)
		}
		return a.AccountID
	}
	alice, carol, dave := home("Alice"), home("Carol"), home("Dave")
	signin(alice, "acme")
	signin(carol, "carolco")
	daveAccount := signin(dave, "daveco")

	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops", "--auto")...))
	// Carol joins at once: nobody admits her.
	if out := mustTally(t, append(carol, "room", "join", "acme/rooms/ops", tok)...); !strings.Contains(out, "joined") {
		t.Fatalf("carol's join: %q", out)
	}
	mustTally(t, append(carol, "msg", "acme/rooms/ops", "hi, I let myself in")...)
	if out := mustTally(t, append(alice, "history", "ops")...); !strings.Contains(out, "hi, I let myself in") || !strings.Contains(out, "Carol") {
		t.Fatalf("alice's history: %q", out)
	}

	// Dave is offline; alice adds him by account, and his next command
	// finds him in the room. (whoami tells people their account id.)
	if out := mustTally(t, append(dave, "whoami")...); !strings.Contains(out, "account    "+daveAccount+"\n") {
		t.Fatalf("whoami: %q", out)
	}
	// Alice and dave share no room or org: without his add-token she
	// cannot add him; he hands her one.
	if _, err := tally(t, "", append(alice, "room", "add", "ops", daveAccount)...); err == nil || !strings.Contains(err.Error(), "add-token") {
		t.Fatalf("room add without dave's consent: %v", err)
	}
	daveTok := strings.TrimSpace(mustTally(t, append(dave, "contact", "token", "--uses", "2")...))
	if !strings.HasPrefix(daveTok, "skt_add_") {
		t.Fatalf("contact token: %q", daveTok)
	}
	if out := mustTally(t, append(dave, "contact", "tokens")...); !strings.Contains(out, "used 0 of 2") || strings.Contains(out, daveTok) {
		t.Fatalf("contact tokens: %q", out)
	}
	if out := mustTally(t, append(alice, "room", "add", "ops", daveAccount, "--token", daveTok)...); !strings.Contains(out, "added 1 device") {
		t.Fatalf("room add: %q", out)
	}
	if _, err := tally(t, "", append(alice, "room", "add", "ops", "did:key:z6Mkabc")...); err == nil {
		t.Fatal("room add of a did nobody's stock holds")
	}
	mustTally(t, append(alice, "msg", "ops", "welcome, dave")...)
	if out := mustTally(t, append(dave, "history", "acme/rooms/ops")...); !strings.Contains(out, "welcome, dave") {
		t.Fatalf("dave's history: %q", out)
	}
	members := mustTally(t, append(alice, "room", "members", "ops")...)
	for _, want := range []string{"3 members", "suite pq", "Carol", "Dave"} {
		if !strings.Contains(members, want) {
			t.Fatalf("members %q lacks %q", members, want)
		}
	}

	// Erin is added by her did:key.
	erin := home("Erin")
	signin(erin, "erinco")
	var who struct {
		Identity string `json:"identity"`
	}
	json.Unmarshal([]byte(mustTally(t, append(erin, "--json", "whoami")...)), &who)
	erinTok := strings.TrimSpace(mustTally(t, append(erin, "contact", "token")...))
	if out := mustTally(t, append(alice, "room", "add", "ops", who.Identity, "--token", erinTok)...); !strings.Contains(out, "added 1 device") {
		t.Fatalf("room add by did: %q", out)
	}
	// Erin sees who claimed her offer, for which room.
	var claims struct {
		Claims []struct {
			ClaimedBy string `json:"claimed_by"`
			Channel   string `json:"channel"`
		} `json:"claims"`
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(erin, "--json", "contact", "claims")...)), &claims); err != nil ||
		len(claims.Claims) != 1 || claims.Claims[0].Channel != "acme/rooms/ops" || claims.Claims[0].ClaimedBy == "" {
		t.Fatalf("erin's claims: %+v %v", claims, err)
	}
	mustTally(t, append(alice, "msg", "ops", "welcome, erin")...)
	if out := mustTally(t, append(erin, "history", "acme/rooms/ops")...); !strings.Contains(out, "welcome, erin") {
		t.Fatalf("erin's history: %q", out)
	}

	// Carol leaves; alice's next command commits it.
	mustTally(t, append(carol, "room", "leave", "acme/rooms/ops")...)
	if members := mustTally(t, append(alice, "room", "members", "ops")...); !strings.Contains(members, "3 members") || strings.Contains(members, "Carol") {
		t.Fatalf("members after carol left: %q", members)
	}

	// New rooms are post-quantum; a classic room says so.
	mustTally(t, append(alice, "room", "create", "plain", "--suite", "classic")...)
	if out := mustTally(t, append(alice, "room", "members", "plain")...); !strings.Contains(out, "suite classic") {
		t.Fatalf("members of the classic room: %q", out)
	}
	if out := mustTally(t, append(alice, "room", "list")...); !strings.Contains(out, "pq") || !strings.Contains(out, "classic") {
		t.Fatalf("room list: %q", out)
	}
	if _, err := tally(t, "", append(alice, "room", "create", "other", "--suite", "x448")...); err == nil {
		t.Fatal("a room in an unknown suite")
	}
}

// TestCLIEveryDeviceAndRejoin drives through the command tree a person's
// second device, approved from the first, into her room, its revocation,
// and a member who was away past the relay's log rejoining on its own.
func TestCLIEveryDeviceAndRejoin(t *testing.T) {
	st := skytaletest.NewStackWith(t, skytaletest.Options{Relay: skytale.RelayConfig{ArchiveCap: 4}})
	urls := []string{"--api-url", st.APIURL, "--relay-url", st.RelayURL}
	alice := append([]string{"--home", t.TempDir()}, urls...)
	laptop := append([]string{"--home", t.TempDir()}, urls...)
	bob := append([]string{"--home", t.TempDir()}, urls...)
	mustTally(t, append(alice, "init", "--name", "Alice")...)
	mustTally(t, append(alice, "signin", "--org", "acme")...)
	mustTally(t, append(alice, "connect")...)
	mustTally(t, append(bob, "init", "--name", "Bob")...)
	mustTally(t, append(bob, "signin", "--org", "bobco")...)
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops", "--auto")...))
	mustTally(t, append(bob, "room", "join", "acme/rooms/ops", tok)...)

	// The laptop: the phrase, then Alice's approval.
	phrase := mustTally(t, append(alice, "backup", "--yes")...)
	first, lines, done := startRecover(t, laptop, phrase)
	mustTally(t, append(alice, "devices", "approve", "--fingerprint", first.Fingerprint, first.UserCode)...)
	for lines.Scan() {
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Alice's next command in the room adds the laptop; it joins.
	if out := mustTally(t, append(alice, "room", "members", "ops")...); !strings.Contains(out, "3 members") || !strings.Contains(out, "device") {
		t.Fatalf("members with the laptop: %q", out)
	}
	if out := mustTally(t, append(laptop, "devices", "join")...); !strings.Contains(out, "joined ops") {
		t.Fatalf("devices join: %q", out)
	}
	mustTally(t, append(laptop, "msg", "ops", "from the laptop")...)
	if out := mustTally(t, append(bob, "history", "acme/rooms/ops")...); !strings.Contains(out, "Alice") || !strings.Contains(out, "from the laptop") {
		t.Fatalf("bob's history: %q", out)
	}
	var devs struct {
		Devices []struct {
			ID   string `json:"id"`
			This bool   `json:"this"`
		} `json:"devices"`
	}
	json.Unmarshal([]byte(mustTally(t, append(alice, "--json", "devices", "list")...)), &devs)
	var id string
	for _, d := range devs.Devices {
		if !d.This {
			id = d.ID
		}
	}
	if id == "" {
		t.Fatalf("devices list: %+v", devs)
	}
	mustTally(t, append(alice, "devices", "revoke", id)...)
	if out := mustTally(t, append(alice, "room", "members", "ops")...); !strings.Contains(out, "2 members") {
		t.Fatalf("members after the revocation: %q", out)
	}

	// Bob is away while the log (four entries of each kind here) moves on.
	var who struct {
		Identity string `json:"identity"`
	}
	json.Unmarshal([]byte(mustTally(t, append(bob, "--json", "whoami")...)), &who)
	for range 3 {
		mustTally(t, append(alice, "room", "admins", "add", "ops", who.Identity)...)
		mustTally(t, append(alice, "room", "admins", "remove", "ops", who.Identity)...)
	}
	for _, m := range []string{"one", "two", "three", "four", "five"} {
		mustTally(t, append(alice, "msg", "ops", m)...)
	}
	out := mustTally(t, append(bob, "history", "acme/rooms/ops")...)
	if !strings.Contains(out, "missed what was sent") || !strings.Contains(out, "rejoined the room") {
		t.Fatalf("bob's history after being away: %q", out)
	}
	mustTally(t, append(alice, "msg", "ops", "welcome back")...)
	if out := mustTally(t, append(bob, "history", "acme/rooms/ops")...); !strings.Contains(out, "welcome back") {
		t.Fatalf("bob after rejoining: %q", out)
	}
}

// TestCLIPendingAndDecline: a person added to two rooms lists them as
// pending without joining, declines one, and the next room list joins the
// other only.
func TestCLIPendingAndDecline(t *testing.T) {
	st := skytaletest.NewStack(t)
	home := func(name string) []string {
		h := []string{"--home", t.TempDir()}
		mustTally(t, append(h, "config", "set", "api_url", st.APIURL)...)
		mustTally(t, append(h, "config", "set", "relay_url", st.RelayURL)...)
		mustTally(t, append(h, "init", "--name", name)...)
		return h
	}
	alice, dave := home("Alice"), home("Dave")
	mustTally(t, append(alice, "signin", "--org", "acme")...)
	mustTally(t, append(dave, "signin", "--org", "daveco")...)
	tok := strings.TrimSpace(mustTally(t, append(dave, "contact", "token", "--uses", "2")...))
	for _, r := range []string{"ops", "noise"} {
		mustTally(t, append(alice, "room", "create", r)...)
		mustTally(t, append(alice, "room", "add", r, tok)...)
	}
	var p struct {
		Pending []struct {
			Room string `json:"room"`
		} `json:"pending"`
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(dave, "--json", "room", "list", "--pending")...)), &p); err != nil ||
		len(p.Pending) != 2 || p.Pending[0].Room != "acme/rooms/ops" {
		t.Fatalf("pending: %+v %v", p, err)
	}
	if out := mustTally(t, append(dave, "room", "decline", "noise")...); !strings.Contains(out, "declined acme/rooms/noise") {
		t.Fatalf("decline: %q", out)
	}
	if _, err := tally(t, "", append(dave, "room", "decline", "noise")...); err == nil {
		t.Fatal("declined twice")
	}
	if out := mustTally(t, append(dave, "room", "list")...); !strings.Contains(out, "ops") || strings.Contains(out, "noise") {
		t.Fatalf("room list after the decline: %q", out)
	}
}
