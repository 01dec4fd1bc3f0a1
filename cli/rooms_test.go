package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// background runs a command until its context is cancelled.
type background struct {
	out, errw syncBuffer
	cancel    context.CancelFunc
	done      chan error
}

func startTally(args ...string) *background {
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{cancel: cancel, done: make(chan error, 1)}
	go func() {
		b.done <- run(ctx, append([]string{"tally"}, args...), strings.NewReader(""), &b.out, &b.errw)
	}()
	return b
}

// wait waits for the command to end by itself.
func (b *background) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-b.done:
		return err
	case <-time.After(30 * time.Second):
		b.cancel()
		t.Fatalf("command did not finish; stderr: %s", b.errw.String())
		return nil
	}
}

// stop interrupts the command and returns its error.
func (b *background) stop(t *testing.T) error {
	t.Helper()
	b.cancel()
	return b.wait(t)
}

// eventually waits until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, 20*time.Second, cond, "timed out waiting for %s", what)
}

// newHome makes a signed-in seat home in org and returns its global flags
// and identity.
func newHome(t *testing.T, st *skytaletest.Stack, org string) ([]string, string) {
	t.Helper()
	g, id := initHome(t, st)
	mustTally(t, append(g, "signin", "--org", org)...)
	return g, id
}

// initHome makes a seat home configured for st, with an identity and no
// account, and returns its global flags and identity.
func initHome(t *testing.T, st *skytaletest.Stack) ([]string, string) {
	t.Helper()
	g := []string{"--home", t.TempDir()}
	mustTally(t, append(g, "config", "set", "api_url", st.APIURL)...)
	mustTally(t, append(g, "config", "set", "relay_url", st.RelayURL)...)
	var id struct{ Identity string }
	if err := json.Unmarshal([]byte(mustTally(t, append(g, "--json", "init")...)), &id); err != nil {
		t.Fatal(err)
	}
	return g, id.Identity
}

// newHomeWithKey is newHome with the account made by the test, so the test
// holds its API key (to read the relay as a member of the account's
// channels).
func newHomeWithKey(t *testing.T, st *skytaletest.Stack, org string) ([]string, string, skytaletest.Account) {
	t.Helper()
	acct := st.NewAccount(t, org)
	g, id := initHome(t, st)
	s, err := seat.Open(context.Background(), seat.Config{Home: g[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.UseAccount(context.Background(), acct.ID, acct.Org, acct.APIKey); err != nil {
		t.Fatal(err)
	}
	return g, id, acct
}

func TestCLIRoomTwoSeats(t *testing.T) {
	defer func(d time.Duration) { admitInterval = d }(admitInterval)
	admitInterval = 100 * time.Millisecond
	st := skytaletest.NewStack(t)
	alice, _, aliceAcct := newHomeWithKey(t, st, "acme")
	bob, bobDID := newHome(t, st, "bobco")
	mustTally(t, append(bob, "config", "set", "cover_traffic", "off")...)

	if out := mustTally(t, append(alice, "room", "create", "ops")...); !strings.Contains(out, "created ops (pq)\n") {
		t.Fatalf("create: %s", out)
	}
	if _, err := tally(t, "", append(alice, "room", "create", "ops")...); err == nil || !strings.Contains(err.Error(), "already has ops") {
		t.Fatalf("second create: %v", err)
	}
	var inv struct{ Room, Token string }
	if err := json.Unmarshal([]byte(mustTally(t, append(alice, "--json", "room", "invite", "ops", "--uses", "1", "--ttl", "1h")...)), &inv); err != nil || inv.Room != "acme/rooms/ops" || inv.Token == "" {
		t.Fatalf("invite: %+v %v", inv, err)
	}
	// The human form prints the token alone on stdout.
	if out := mustTally(t, append(alice, "room", "invite", "ops")...); len(strings.Fields(out)) != 1 {
		t.Fatalf("invite printed %q", out)
	}

	// Bob waits for the Welcome while alice admits.
	join := startTally(append(bob, "room", "join", "acme/rooms/ops", inv.Token, "--wait", "1m")...)
	eventually(t, "join to say it waits", func() bool { return strings.Contains(join.errw.String(), "waiting for the owner") })
	eventually(t, "alice to admit bob", func() bool {
		var adm struct {
			Admitted []struct{ Identity string }
		}
		json.Unmarshal([]byte(mustTally(t, append(alice, "--json", "room", "admit", "ops")...)), &adm)
		return len(adm.Admitted) == 1 && adm.Admitted[0].Identity == bobDID
	})
	if err := join.wait(t); err != nil {
		t.Fatalf("join: %v (%s)", err, join.errw.String())
	}
	if !strings.Contains(join.out.String(), "joined acme/rooms/ops") {
		t.Fatalf("join printed %q", join.out.String())
	}

	// Bob watches (cover off in his config) while both write.
	// (Each background command is started only once the previous one is
	// running: urfave/cli's shared help flag is written during parsing.)
	watch := startTally(append(bob, "--json", "watch", "acme/rooms/ops")...)
	eventually(t, "bob's watch to connect", func() bool { return strings.Contains(watch.errw.String(), "watching acme/rooms/ops") })
	mustTally(t, append(alice, "msg", "ops", "hello", "bob")...)
	if out := mustTally(t, append(bob, "--json", "msg", "acme/rooms/ops", "hi alice")...); !strings.Contains(out, `"seq":`) {
		t.Fatalf("msg --json: %s", out)
	}
	eventually(t, "bob's watch to print alice's message", func() bool { return strings.Contains(watch.out.String(), `"text":"hello bob"`) })
	if err := watch.stop(t); err != nil {
		t.Fatalf("watch: %v", err)
	}
	var wm struct{ Room, Sender, Text string }
	if err := json.Unmarshal([]byte(strings.Split(watch.out.String(), "\n")[0]), &wm); err != nil || wm.Room != "acme/rooms/ops" || wm.Text != "hello bob" {
		t.Fatalf("watch line: %+v %v", wm, err)
	}

	out := mustTally(t, append(alice, "history", "ops")...)
	if !strings.Contains(out, "[ops] you: hello bob") || !strings.Contains(out, "[ops] "+bobDID[len(bobDID)-8:]+": hi alice") {
		t.Fatalf("alice's history:\n%s", out)
	}
	out = mustTally(t, append(bob, "--json", "history", "acme/rooms/ops")...)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "hello bob") {
		t.Fatalf("bob's history:\n%s", out)
	}

	var mem struct {
		Epoch   uint64
		Members []struct {
			Identity string
			Self     bool
		}
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(bob, "--json", "room", "members", "acme/rooms/ops")...)), &mem); err != nil || len(mem.Members) != 2 || mem.Epoch != 1 {
		t.Fatalf("members: %+v %v", mem, err)
	}
	if out := mustTally(t, append(alice, "room", "members", "ops")...); !strings.Contains(out, "ops: 2 members") || !strings.Contains(out, "member "+shortID(bobDID)) || strings.Contains(out, bobDID) {
		t.Fatalf("members: %s", out)
	}

	// Clear errors.
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(bob, "msg", "nope", "hi"), "not a member of nope: run `tally room join nope TOKEN`"},
		{append(bob, "msg", "ops"), "usage: tally msg NAME TEXT"},
		{append(bob, "room", "admit", "acme/rooms/ops"), "only the owner"},
		{append(alice, "room", "remove", "ops", "bob"), `"bob" is not a member of ops`},
		{append(bob, "room", "invite", "acme/rooms/ops"), "only the owner of acme/rooms/ops"},
		{append(bob, "room", "create", "acme/rooms/x"), "your own org"},
		{append(bob, "room", "invite", "ops", "--bogus"), "unknown flag --bogus"},
		{append(bob, "room", "join", "acme/rooms/ops", "skt_inv_nonsense"), "already has acme/rooms/ops"},
	} {
		if _, err := tally(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tally %s: %v, want %q", strings.Join(c.args[2:], " "), err, c.want)
		}
	}

	// The relay holds only the two real messages: bob's cover was off.
	tok := st.Token(t, aliceAcct.APIKey)
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return tok, nil }}
	apps := 0
	if _, err := rc.SyncAll(context.Background(), "acme/rooms/ops", 0, func(e seat.RelayEntry) error {
		if e.EntryType == seat.EntryApp {
			apps++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if apps != 2 {
		t.Fatalf("%d application entries on the relay, want 2", apps)
	}

	// Removal: bob is out of the group and his account out of the
	// channel, so the relay refuses him and tally says what happened.
	if out := mustTally(t, append(alice, "room", "remove", "ops", bobDID)...); !strings.Contains(out, "removed "+shortID(bobDID)) ||
		!strings.Contains(out, "its account no longer reaches the room at the relay") {
		t.Fatalf("remove: %s", out)
	}
	// Until the relay learns of the removal (within a second) bob reads
	// the commit that removed him; after, the relay refuses him.
	eventually(t, "the relay to refuse bob", func() bool {
		_, err := tally(t, "", append(bob, "msg", "acme/rooms/ops", "still here?")...)
		switch {
		case err != nil && strings.Contains(err.Error(), "not a member of acme/rooms/ops at the relay: the owner removed it"):
			return true
		case err != nil && strings.Contains(err.Error(), "this seat was removed from acme/rooms/ops"):
			return false
		}
		t.Fatalf("msg after removal: %v", err)
		return false
	})
	if _, err := tally(t, "", append(bob, "watch", "acme/rooms/ops")...); err == nil ||
		!strings.Contains(err.Error(), "not a member of acme/rooms/ops at the relay") {
		t.Fatalf("watch after removal: %v", err)
	}
	if out := mustTally(t, append(alice, "room", "members", "ops")...); !strings.Contains(out, "1 member,") {
		t.Fatalf("members after removal: %s", out)
	}
	if out := mustTally(t, append(bob, "room", "leave", "acme/rooms/ops")...); !strings.Contains(out, "left acme/rooms/ops") {
		t.Fatalf("leave: %s", out)
	}
	if _, err := tally(t, "", append(bob, "history", "acme/rooms/ops")...); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("history after leave: %v", err)
	}
}

func TestCLIRoomAdmitWatchAndInterruptedJoin(t *testing.T) {
	defer func(d time.Duration) { admitInterval = d }(admitInterval)
	admitInterval = 100 * time.Millisecond
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	carol, carolDID := newHome(t, st, "carolco")
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops")...))

	// Ctrl-C while waiting: a clean stop, and the same command resumes.
	join := startTally(append(carol, "room", "join", "acme/rooms/ops", tok)...)
	eventually(t, "join to wait", func() bool { return strings.Contains(join.errw.String(), "waiting") })
	time.Sleep(200 * time.Millisecond) // time passes: the interrupt comes while the join waits, not as it starts
	if err := join.stop(t); !errors.Is(err, context.Canceled) || !strings.Contains(join.errw.String(), "stopped waiting") {
		t.Fatalf("interrupted join: %v (%s)", err, join.errw.String())
	}
	var errw bytes.Buffer
	if code := Main(canceled(), append([]string{"tally"}, append(carol, "room", "join", "acme/rooms/ops", tok)...), strings.NewReader(""), &bytes.Buffer{}, &errw); code != exitInterrupted {
		t.Fatalf("interrupted join exit code %d, want %d: %s", code, exitInterrupted, errw.String())
	}

	admit := startTally(append(alice, "room", "admit", "ops", "--watch")...)
	eventually(t, "admit to run", func() bool { return strings.Contains(admit.errw.String(), "admitting join requests") })
	join = startTally(append(carol, "room", "join", "acme/rooms/ops", tok, "--wait", "1m")...)
	if err := join.wait(t); err != nil {
		t.Fatalf("join: %v (%s)", err, join.errw.String())
	}
	eventually(t, "admit to print", func() bool { return strings.Contains(admit.out.String(), "admitted "+shortID(carolDID)) })
	if err := admit.stop(t); err != nil {
		t.Fatalf("admit --watch: %v", err)
	}
	mustTally(t, append(carol, "msg", "acme/rooms/ops", "made it")...)
	if out := mustTally(t, append(alice, "history", "ops")...); !strings.Contains(out, "made it") {
		t.Fatalf("history: %s", out)
	}

	// watch with no rooms, and a join that times out.
	empty, _ := newHome(t, st, "emptyco")
	if _, err := tally(t, "", append(empty, "watch")...); err == nil || !strings.Contains(err.Error(), "no rooms") {
		t.Fatalf("watch with no rooms: %v", err)
	}
	if _, err := tally(t, "", append(empty, "room", "join", "acme/rooms/ops", "skt_inv_nonsense")...); err == nil || !strings.Contains(err.Error(), "invalid, expired or used up") {
		t.Fatalf("join with a bad token: %v", err)
	}
	tok = strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops")...))
	if _, err := tally(t, "", append(empty, "room", "join", "acme/rooms/ops", tok, "--wait", "100ms")...); err == nil || !strings.Contains(err.Error(), "tally room admit") {
		t.Fatalf("join timeout: %v", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestREADMETwoSeats runs the README's "Two seats in a room" commands as
// written, against an in-process stack standing in for `tally serve`.
func TestREADMETwoSeats(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## Two seats in a room")
	if !ok {
		t.Fatal("README has no two-seat section")
	}
	_, block, _ := strings.Cut(sec, "```sh\n")
	block, _, _ = strings.Cut(block, "```")

	st := skytaletest.NewStack(t)
	demo := t.TempDir()
	urls := strings.NewReplacer("http://127.0.0.1:3100", st.APIURL, "http://127.0.0.1:8443", st.RelayURL)
	testOnlyEnv = map[string]string{}
	// The README configures no URL: tally's defaults stand for serve's.
	testOnlyDefaultURLs = &[2]string{st.APIURL, st.RelayURL}
	defer func() { testOnlyEnv, testOnlyDefaultURLs = nil, nil }()

	var token string
	var bg []*background
	var watch *background
	ran := 0
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "export "):
			for _, kv := range strings.Fields(line)[1:] {
				k, v, _ := strings.Cut(kv, "=")
				testOnlyEnv[k] = urls.Replace(v)
			}
			continue
		case strings.HasPrefix(line, "tally serve"):
			continue
		case !strings.HasPrefix(line, "tally "):
			t.Fatalf("README line %q is not a tally command", line)
		}
		args := strings.Fields(line)[1:]
		for i, a := range args {
			a = strings.Replace(a, "/tmp/tally-demo", demo, 1)
			args[i] = strings.Replace(a, "skt_inv_…", token, 1)
		}
		ran++
		cmd := strings.Join(args[2:], " ")
		switch {
		case strings.HasPrefix(cmd, "room join"):
			j := startTally(args...)
			eventually(t, line, func() bool { return strings.Contains(j.errw.String(), "waiting") })
			bg = append(bg, j)
		case cmd == "watch":
			watch = startTally(args...)
			eventually(t, line, func() bool { return strings.Contains(watch.errw.String(), "watching") })
		default:
			out, err := tally(t, "", args...)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if strings.HasPrefix(cmd, "room invite") {
				token = strings.TrimSpace(out)
			}
			if strings.HasPrefix(cmd, "room admit") {
				for _, j := range bg {
					if err := j.wait(t); err != nil {
						t.Fatalf("join: %v", err)
					}
				}
			}
		}
	}
	if ran < 10 || token == "" || watch == nil {
		t.Fatalf("ran %d commands, token %q", ran, token)
	}
	eventually(t, "alice's watch to print bob's message", func() bool {
		return strings.Contains(watch.out.String(), "[ops] ") && strings.Contains(watch.out.String(), ": hello alice")
	})
	if err := watch.stop(t); err != nil {
		t.Fatal(err)
	}
}
