package seat_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// countedStack is a stack whose relay logs at debug level, and a count of
// the WebSocket connections it has opened so far.
func countedStack(t *testing.T) (*skytaletest.Stack, func() int) {
	t.Helper()
	lb := &logBuffer{}
	lg := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := skytaletest.NewStackWith(t, skytaletest.Options{Relay: skytale.RelayConfig{Logger: lg}})
	return st, func() int { return strings.Count(lb.String(), "relay: connection opened") }
}

// watchHome starts a watch of room on another handle of m's home, as
// `tally watch` in a process of its own, and waits until it is live.
func watchHome(t *testing.T, st *skytaletest.Stack, m *member, room string) *watching {
	t.Helper()
	s, err := seat.Open(context.Background(), seat.Config{Home: m.home, APIURL: st.APIURL, RelayURL: st.RelayURL,
		Cover: cover.Config{MeanInterval: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	w := startWatch(t, s, room)
	w.connected(t)
	return w
}

// TestHandedOffPushAndCommitsOpenNoConnection: while a watch of the home
// runs, a push of the log and the commits of an add, an admin change, a
// removal and an admit made by another handle of the home (another
// process, as the tally commands are) open no relay connection: the
// watch performs them on its own. They take effect as before: the pushed
// entry reaches another device of the person, the added member is in the
// room and out again, the roles are back as they were.
func TestHandedOffPushAndCommitsOpenNoConnection(t *testing.T) {
	ctx := context.Background()
	st, conns := countedStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	carol := newMember(t, st, "carolco")
	carolTok, err := carol.ContactToken(ctx, time.Hour, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Add(ctx, "written while the watch runs"); err != nil {
		t.Fatal(err)
	}
	w := watchHome(t, st, alice, room)

	before := conns()
	if n, err := alice.Push(ctx); err != nil || n != 1 {
		t.Fatalf("push: %d, %v", n, err)
	}
	if n := conns(); n != before {
		t.Fatalf("the push opened %d relay connections", n-before)
	}
	added, err := alice.Room(room).Add(ctx, carolTok.Token, nil)
	if err != nil || len(added) == 0 || seat.PersonOf(added[0].Identity) != carol.did {
		t.Fatalf("add: %+v, %v", added, err)
	}
	if !inRoster(t, bob, room, carol.did) {
		t.Fatal("carol is not in the room after the add")
	}
	if err := alice.Room(room).AddAdmin(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	if roles, err := bob.Room(room).Roles(ctx); err != nil || roles.Role(bob.did) != seat.RoleAdmin {
		t.Fatalf("bob's role after AddAdmin: %+v, %v", roles, err)
	}
	if err := alice.Room(room).RemoveAdmin(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Room(room).Remove(ctx, carol.did); err != nil {
		t.Fatal(err)
	}
	if adm, err := alice.Room(room).Admit(ctx); err != nil || len(adm) != 0 {
		t.Fatalf("admit with nobody waiting: %+v, %v", adm, err)
	}
	if n := conns(); n != before {
		t.Fatalf("the push and the commits opened %d relay connections", n-before)
	}
	w.stop()

	if inRoster(t, bob, room, carol.did) {
		t.Fatal("carol is still in the room after the removal")
	}
	if roles, err := bob.Room(room).Roles(ctx); err != nil || roles.Role(bob.did) != seat.RoleMember {
		t.Fatalf("bob's role after RemoveAdmin: %+v, %v", roles, err)
	}
	// The pushed entry is on the relay, for another device of the person.
	words, err := alice.Phrase()
	if err != nil {
		t.Fatal(err)
	}
	other := openSeat(t, st, t.TempDir())
	if _, err := other.Restore(ctx, strings.Join(words, " ")); err != nil {
		t.Fatal(err)
	}
	if err := other.UseAccount(ctx, alice.acct.AccountID, alice.acct.Org, alice.acct.APIKey); err != nil {
		t.Fatal(err)
	}
	if n, err := other.Pull(ctx, nil); err != nil || n != 1 || !slices.Contains(texts(t, other), "written while the watch runs") {
		t.Fatalf("pull on another device: %d, %v, %q", n, err, texts(t, other))
	}
	// With no watch, a push opens a connection of its own again.
	if _, err := alice.Add(ctx, "alone"); err != nil {
		t.Fatal(err)
	}
	before = conns()
	if n, err := alice.Push(ctx); err != nil || n != 1 || conns() == before {
		t.Fatalf("push with no watch: %d, %v, %d connections", n, err, conns()-before)
	}
}

// inRoster reports whether the person did is in room, as m sees it.
func inRoster(t *testing.T, m *member, room, did string) bool {
	t.Helper()
	roster, err := m.Room(room).Members(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(roster.Members, func(x seat.RoomMember) bool { return seat.PersonOf(x.Identity) == did })
}

// TestHandedOffRefusalsAsBefore: an operation refused while a watch of
// the home performs it fails for the caller with the error it gets with
// no watch running: the same text, the same sentinel, the same room
// named.
func TestHandedOffRefusalsAsBefore(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	dave := newMember(t, st, "daveco")
	if _, err := alice.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	nowhere := "acme/rooms/nowhere"
	cases := []struct {
		name string
		run  func() error
		want error
	}{
		{"send to a room the home does not hold", func() error { _, err := alice.Room(nowhere).Send(ctx, "hi"); return err }, seat.ErrNoRoom},
		{"add to a room the home does not hold", func() error { _, err := alice.Room(nowhere).Add(ctx, dave.acct.AccountID, nil); return err }, seat.ErrNoRoom},
		{"add someone who did not agree", func() error { _, err := alice.Room(room).Add(ctx, dave.acct.AccountID, nil); return err }, seat.ErrNotAllowed},
		{"add by a plain member", func() error { _, err := bob.Room(room).Add(ctx, dave.acct.AccountID, nil); return err }, seat.ErrNotAdmin},
		{"remove the owner", func() error { _, err := bob.Room(room).Remove(ctx, alice.did); return err }, seat.ErrRemoveOwner},
		{"admin named by a member", func() error { return bob.Room(room).AddAdmin(ctx, bob.did) }, seat.ErrNotOwner},
		{"admit by a member", func() error { _, err := bob.Room(room).Admit(ctx); return err }, seat.ErrNotOwner},
		{"leave a room the home does not hold", func() error { return alice.Room(nowhere).Leave(ctx) }, seat.ErrNoRoom},
	}
	alone := make([]error, len(cases))
	for i, c := range cases {
		alone[i] = c.run()
		if !errors.Is(alone[i], c.want) {
			t.Fatalf("%s, no watch: %v, want %v", c.name, alone[i], c.want)
		}
	}
	watchHome(t, st, alice, room)
	watchHome(t, st, bob, room)
	for i, c := range cases {
		err := c.run()
		if !errors.Is(err, c.want) || err.Error() != alone[i].Error() {
			t.Errorf("%s, through the watch: %v, want %v", c.name, err, alone[i])
		}
		var re, reAlone *seat.RoomError
		if errors.As(alone[i], &reAlone) && (!errors.As(err, &re) || re.Room != reAlone.Room) {
			t.Errorf("%s, through the watch: %v names no room %q", c.name, err, reAlone.Room)
		}
	}
	// The typed error of the directory's refusal comes through too.
	_, err := alice.Room(room).Add(ctx, dave.acct.AccountID, nil)
	var ae *seat.APIError
	if !errors.As(err, &ae) || ae.Code != "not_allowed" {
		t.Fatalf("the directory's refusal through the watch: %#v", err)
	}
}

// handoffAsk writes line to the watch's socket in home and returns its
// answer, decoded.
func handoffAsk(t *testing.T, home string, line []byte) map[string]any {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(home, "watch.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	// An oversized line is cut off while it is written: write and read at
	// once, and let the write fail.
	go func() {
		c.Write(line)
		if !strings.HasSuffix(string(line), "\n") {
			c.(*net.UnixConn).CloseWrite()
		}
	}()
	answer, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no answer to %.80q: %v", line, err)
	}
	var rep map[string]any
	if err := json.Unmarshal(answer, &rep); err != nil {
		t.Fatalf("answer %q: %v", answer, err)
	}
	return rep
}

// TestHandoffRefusesHostileRequests: the watch's socket is its user's
// alone (mode 0600), and a request that is not JSON, not one object, of
// no or an unknown kind, with a field that is not the request's or one of
// another kind, without its line's end or longer than the bound, is
// refused as bad_request without anything done; a request about a room
// the home does not hold is refused as no_room. Nothing reaches the
// room; a well-formed request on the same socket is then carried out.
func TestHandoffRefusesHostileRequests(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	watchHome(t, st, alice, room)
	fi, err := os.Stat(filepath.Join(alice.home, "watch.sock"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the watch's socket: %v, %v", fi.Mode(), err)
	}
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	huge := `{"kind":"send","room":` + q(room) + `,"text":"` + strings.Repeat("a", 7*seat.MaxTextLen) + `"}` + "\n"
	for _, line := range []string{
		"hello\n",
		"\n",
		`{"kind":"send","room":` + q(room) + `,"text":"x","from":"bob"}` + "\n",
		`{"kind":"send","room":` + q(room) + `,"text":"x"} {"kind":"push"}` + "\n",
		`{"room":` + q(room) + `,"text":"x"}` + "\n",
		`{"kind":"rename","room":` + q(room) + `}` + "\n",
		`{"kind":"SEND","room":` + q(room) + `,"text":"x"}` + "\n",
		`{"kind":"push","room":` + q(room) + `}` + "\n",
		`{"kind":"remove","room":` + q(room) + `}` + "\n",
		`{"kind":"send","room":` + q(room) + `,"text":"x","member":` + q(bob.did) + `}` + "\n",
		`{"kind":"auto_invite","room":` + q(room) + `,"uses":-1}` + "\n",
		`{"kind":"send","room":` + q(room) + `,"text":"no end of line"}`,
		huge,
	} {
		if rep := handoffAsk(t, alice.home, []byte(line)); rep["code"] != "bad_request" {
			t.Errorf("%.80q: answered %v", line, rep)
		}
	}
	for _, line := range []string{
		`{"kind":"send","room":"acme/rooms/nowhere","text":"x"}` + "\n",
		`{"kind":"remove","room":"acme/rooms/nowhere","member":` + q(bob.did) + `}` + "\n",
		`{"kind":"leave","room":"acme/rooms/nowhere"}` + "\n",
	} {
		rep := handoffAsk(t, alice.home, []byte(line))
		if is, _ := rep["is"].([]any); rep["code"] != nil || !slices.Contains(is, any("no_room")) {
			t.Errorf("%.80q: answered %v", line, rep)
		}
	}
	if got := received(t, bob, room); len(got) != 0 {
		t.Fatalf("bob received %q", got)
	}
	rep := handoffAsk(t, alice.home, []byte(`{"kind":"send","room":`+q(room)+`,"text":"by the socket"}`+"\n"))
	if rep["error"] != nil || rep["seq"] == nil {
		t.Fatalf("a well-formed send: %v", rep)
	}
	expect(t, "bob", received(t, bob, room), "by the socket")
	if roster, err := alice.Room(room).Members(ctx); err != nil || len(roster.Members) != 2 {
		t.Fatalf("the room after the hostile requests: %+v, %v", roster, err)
	}
}
