package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// roomRoles returns identity → role from `tally --json room members`, and
// the epoch.
func roomRoles(t *testing.T, g []string, room string) (map[string]string, uint64) {
	t.Helper()
	var mem struct {
		Epoch   uint64
		Members []struct{ Identity, Role string }
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(append([]string{}, g...), "--json", "room", "members", room)...)), &mem); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range mem.Members {
		out[m.Identity] = m.Role
	}
	return out, mem.Epoch
}

// TestCLIRoomRoles, through the command tree: a member that is not the
// owner could once remove the owner. Now `room remove` by a plain member
// fails with a clear error before anything is sent, nobody removes the
// owner, and the owner names admins who may remove members.
func TestCLIRoomRoles(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, aliceDID := newHome(t, st, "acme")
	bob, bobDID := newHome(t, st, "bobco")
	carol, carolDID := newHome(t, st, "carolco")
	const room = "acme/rooms/ops"
	mustTally(t, append(alice, "room", "create", "ops")...)
	cliJoin(t, alice, bob, "ops", room, bobDID)
	cliJoin(t, alice, carol, "ops", room, carolDID)

	roles, epoch := roomRoles(t, carol, room)
	if roles[aliceDID] != "owner" || roles[bobDID] != "member" || roles[carolDID] != "member" {
		t.Fatalf("carol sees roles %v", roles)
	}
	if out := mustTally(t, append(carol, "room", "members", room)...); !strings.Contains(out, "owner  "+shortID(aliceDID)) || !strings.Contains(out, "member "+shortID(bobDID)) {
		t.Fatalf("members:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(bob, "room", "remove", room, aliceDID), "nobody can remove the owner of " + room},
		{append(bob, "room", "remove", room, carolDID), "only the owner and admins of " + room + " can remove or add others; nothing was sent"},
		{append(bob, "room", "admins", "add", room, bobDID), "only the owner of " + room},
		{append(alice, "room", "admins", "add", "ops", "bob"), `"bob" is not a member of ops`},
	} {
		if _, err := tally(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tally %s: %v, want %q", strings.Join(c.args[2:], " "), err, c.want)
		}
	}
	if _, now := roomRoles(t, carol, room); now != epoch {
		t.Fatalf("a refused command moved the room from epoch %d to %d", epoch, now)
	}

	// The owner makes bob an admin; bob may then remove carol, but not
	// the owner.
	if out := mustTally(t, append(alice, "room", "admins", "add", "ops", bobDID)...); !strings.Contains(out, shortID(bobDID)+" is now an admin") {
		t.Fatalf("admins add: %s", out)
	}
	if roles, _ := roomRoles(t, carol, room); roles[bobDID] != "admin" {
		t.Fatalf("carol sees roles %v", roles)
	}
	if _, err := tally(t, "", append(bob, "room", "remove", room, aliceDID)...); err == nil || !strings.Contains(err.Error(), "nobody can remove the owner") {
		t.Fatalf("admin removing the owner: %v", err)
	}
	mustTally(t, append(bob, "room", "remove", room, carolDID)...)
	roles, _ = roomRoles(t, alice, room)
	if len(roles) != 2 || roles[aliceDID] != "owner" || roles[bobDID] != "admin" {
		t.Fatalf("alice sees roles %v", roles)
	}
	mustTally(t, append(alice, "room", "admins", "remove", "ops", bobDID)...)
	if roles, _ := roomRoles(t, bob, room); roles[bobDID] != "member" {
		t.Fatalf("bob sees roles %v", roles)
	}
}

// TestCLIRoomCreateOverLiveRoom: the owner's `room leave` and `room
// create` of the same name used to split the room in two.
func TestCLIRoomCreateOverLiveRoom(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	bob, bobDID := newHome(t, st, "bobco")
	const room = "acme/rooms/ops"
	mustTally(t, append(alice, "room", "create", "ops")...)
	cliJoin(t, alice, bob, "ops", room, bobDID)
	mustTally(t, append(alice, "room", "leave", "ops")...)
	if _, err := tally(t, "", append(alice, "room", "create", "ops")...); err == nil || !strings.Contains(err.Error(), "would split the room in two") {
		t.Fatalf("create over a live room: %v", err)
	}
}
