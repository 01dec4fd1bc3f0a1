package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/skytaletest"
)

// tally2 runs the command tree in-process and returns stdout and stderr.
func tally2(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	err := run(context.Background(), append([]string{"tally"}, args...), strings.NewReader(stdin), &out, &errw)
	return out.String(), errw.String(), err
}

// mainOut runs tally as main does and returns the exit code, stdout and
// stderr.
func mainOut(ctx context.Context, stdin string, args ...string) (int, string, string) {
	var out, errw bytes.Buffer
	code := Main(ctx, append([]string{"tally"}, args...), strings.NewReader(stdin), &out, &errw)
	return code, out.String(), errw.String()
}

// refusedURL is an http URL on loopback where nothing listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// TestCLIServerDown: with nothing listening, each plane's failure names
// the URL and says what to do, for HTTP requests and for the WebSocket
// dial of watch; no raw Go error reaches the user.
func TestCLIServerDown(t *testing.T) {
	st := skytaletest.NewStack(t)
	down := refusedURL(t)

	g := []string{"--home", t.TempDir()}
	mustTally(t, append(g, "init")...)
	code, out, errw := mainOut(context.Background(), "", append(g, "--api-url", down, "signin", "--org", "acme")...)
	want := "tally: nothing is listening at " + down + " (the directory): start one with `tally serve`, or point tally at yours with `tally config set api_url URL`\n"
	if code != 1 || out != "" || errw != want {
		t.Fatalf("signin with the directory down: exit %d, stdout %q, stderr %q\nwant %q", code, out, errw, want)
	}

	// The directory is up, the relay is not.
	up := append(append([]string{}, g...), "--api-url", st.APIURL, "--relay-url", st.RelayURL)
	mustTally(t, append(up, "signin", "--org", "acme")...)
	mustTally(t, append(up, "connect")...)
	mustTally(t, append(up, "room", "create", "ops")...)
	g = append(g, "--api-url", st.APIURL, "--relay-url", down)
	mustTally(t, append(g, "add", "x")...)
	_, err := tally(t, "", append(g, "push")...)
	if err == nil || err.Error() != "nothing is listening at "+down+" (the relay): start one with `tally serve`, or point tally at yours with `tally config set relay_url URL`" {
		t.Fatalf("push with the relay down: %v", err)
	}
	w := startTally(append(g, "watch")...)
	eventually(t, "watch to report the relay down", func() bool { return strings.Contains(w.errw.String(), "trying again") })
	w.stop(t)
	line, _, _ := strings.Cut(w.errw.String(), "\n")
	if !strings.HasPrefix(line, "not connected (nothing is listening at "+down+" (the relay): start one with `tally serve`") ||
		strings.Contains(w.errw.String(), "dial tcp") || strings.Contains(w.errw.String(), "failed to WebSocket dial") {
		t.Fatalf("watch with the relay down: %q", w.errw.String())
	}
}

// TestCLIDefaultURLs: with no URL from a flag, the environment or the
// config, tally uses the addresses serve listens on by default and says so
// once per run on stderr, never in --json output; config list shows the
// defaults, marked.
func TestCLIDefaultURLs(t *testing.T) {
	// The defaults are serve's defaults.
	api, rel := defaultURLs()
	for _, f := range serveCommand().Flags {
		sf, ok := f.(*ucli.StringFlag)
		switch {
		case ok && sf.Name == "api-addr" && "http://"+sf.Value != api,
			ok && sf.Name == "relay-addr" && "http://"+sf.Value != rel:
			t.Fatalf("serve's --%s default %s is not tally's default URL", sf.Name, sf.Value)
		}
	}

	st := skytaletest.NewStack(t)
	testOnlyDefaultURLs = &[2]string{st.APIURL, st.RelayURL}
	defer func() { testOnlyDefaultURLs = nil }()
	g := []string{"--home", t.TempDir()}

	out := mustTally(t, append(g, "config", "list")...)
	wantList := "api_url = " + st.APIURL + "  (default)\nrelay_url = " + st.RelayURL + "  (default)\ncover_traffic = on  (default)\ncover_interval = 1m0s  (default)\ncover_lifetime = off  (default)\nname is not set\n"
	if out != wantList {
		t.Fatalf("config list on a fresh home:\n%s\nwant\n%s", out, wantList)
	}
	if _, errw, err := tally2(t, "", append(g, "init")...); err != nil || errw != "" {
		t.Fatalf("init (no server needed) said %q, %v", errw, err)
	}
	out, errw, err := tally2(t, "", append(g, "--json", "signin", "--org", "acme")...)
	if err != nil {
		t.Fatal(err)
	}
	var acct map[string]string
	if json.Unmarshal([]byte(out), &acct) != nil || acct["org"] != "acme" {
		t.Fatalf("--json signin stdout %q", out)
	}
	notice := func(plane, url, key string) string {
		return "no " + plane + " URL configured: using " + url + ", where `tally serve` listens by default (`tally config set " + key + " URL` changes it; said once per home)\n"
	}
	if want := notice("directory", st.APIURL, "api_url"); errw != want {
		t.Fatalf("signin stderr %q, want %q", errw, want)
	}
	mustTally(t, append(g, "connect")...)
	mustTally(t, append(g, "add", "one")...)
	out, errw, err = tally2(t, "", append(g, "push")...)
	if err != nil || out != "pushed 1 entry\n" {
		t.Fatalf("push: %q %v", out, err)
	}
	if want := notice("relay", st.RelayURL, "relay_url"); errw != want {
		t.Fatalf("first push stderr %q, want %q (the directory's notice was said already)", errw, want)
	}
	mustTally(t, append(g, "add", "two")...)
	if out, errw, err := tally2(t, "", append(g, "push")...); err != nil || out != "pushed 1 entry\n" || errw != "" {
		t.Fatalf("second push: %q %q %v", out, errw, err)
	}
	// Another home is told again.
	g2 := []string{"--home", t.TempDir()}
	mustTally(t, append(g2, "init")...)
	if _, errw, err := tally2(t, "", append(g2, "signin", "--org", "other")...); err != nil || errw != notice("directory", st.APIURL, "api_url") {
		t.Fatalf("signin in another home: %q %v", errw, err)
	}

	// A configured URL is used without a word.
	mustTally(t, append(g, "config", "set", "api_url", st.APIURL)...)
	if _, errw, err := tally2(t, "", append(g, "--relay-url", st.RelayURL, "push")...); err != nil || errw != "" {
		t.Fatalf("push with URLs set said %q, %v", errw, err)
	}
	out = mustTally(t, append(g, "config", "list")...)
	if !strings.HasPrefix(out, "api_url = "+st.APIURL+"\nrelay_url = "+st.RelayURL+"  (default)\n") {
		t.Fatalf("config list after set:\n%s", out)
	}
	var list struct {
		Settings []struct {
			Key, Value string
			Default    bool
		}
	}
	if err := json.Unmarshal([]byte(mustTally(t, append(g, "--json", "config", "list")...)), &list); err != nil || len(list.Settings) != 6 ||
		list.Settings[0].Default || !list.Settings[1].Default {
		t.Fatalf("config list --json: %+v %v", list, err)
	}
	if out := mustTally(t, append(g, "config", "get", "cover_interval")...); out != "1m0s\n" {
		t.Fatalf("config get of a default: %q", out)
	}
}

// TestCLIServeSaysItStarts: serve's first line says it is starting and
// where it will listen, before it opens the databases.
func TestCLIServeSaysItStarts(t *testing.T) {
	p := serveInProcess(t, serveOptions{Data: t.TempDir()})
	first, _, _ := strings.Cut(p.log.String(), "\n")
	if !strings.Contains(first, `msg="tally serve starting" directory=http://127.0.0.1:0 relay=http://127.0.0.1:0 data=`) {
		t.Fatalf("first line %q", first)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "go run ./cli/tally serve  ") || !strings.Contains(string(readme), "builds tally first") {
		t.Fatal("the README's first command does not say it builds first")
	}
}

// TestCLIHelpVersionCompletionMan: tally help, tally version, the
// completion scripts and the man page, all from the command tree.
func TestCLIHelpVersionCompletionMan(t *testing.T) {
	home := t.TempDir()
	out := mustTally(t, "help")
	for _, c := range []string{"room", "whoami", "version", "completion", "man", "serve"} {
		if !strings.Contains(out, "\n   "+c) {
			t.Errorf("tally help lacks %s:\n%s", c, out)
		}
	}
	for _, args := range [][]string{{"help", "room"}, {"room", "help"}, {"room"}, {"room", "--help"}} {
		if out := mustTally(t, args...); !strings.Contains(out, "   list ") || !strings.Contains(out, "   join ") || strings.Contains(out, "Shows a list") {
			t.Errorf("tally %s:\n%s", strings.Join(args, " "), out)
		}
	}
	out = mustTally(t, "version")
	if !strings.HasPrefix(out, "tally ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version: %q", out)
	}
	var v buildInfo
	if err := json.Unmarshal([]byte(mustTally(t, "--json", "version")), &v); err != nil || v.GoVersion != runtime.Version() || v.Version == "" {
		t.Errorf("version --json: %+v %v", v, err)
	}
	for sh, want := range map[string]string{
		"bash": "complete -o bashdefault -o default -F _tally_complete tally",
		"zsh":  "#compdef tally",
		"fish": "complete -c tally",
	} {
		if out := mustTally(t, "completion", sh); !strings.Contains(out, want) {
			t.Errorf("completion %s lacks %q", sh, want)
		}
	}
	if _, err := tally(t, "", "completion", "tcsh"); err == nil || !strings.Contains(err.Error(), "tally completion bash|zsh|fish") {
		t.Errorf("completion tcsh: %v", err)
	}
	// What the bash and zsh scripts ask tally for (urfave/cli writes the
	// words to the process's stdout, so ask a process).
	cmd := exec.Command(os.Args[0], "--home", home, "room", "--generate-bash-completion")
	cmd.Env = append(os.Environ(), "TALLY_TEST_AS_MAIN=1")
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "join\n") || !strings.Contains(string(out), "list\n") {
		t.Errorf("completion words of room: %q %v", out, err)
	}
	out = mustTally(t, "man")
	if !strings.Contains(out, ".TH tally 8") && !strings.Contains(out, ".TH tally") || !strings.Contains(out, "room") || !strings.Contains(out, "backup") {
		t.Errorf("man page: %.300q", out)
	}
}

// TestCLIDidYouMean: a mistyped command gets the nearest one, if any is
// near.
func TestCLIDidYouMean(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct{ args, want string }{
		{"lgo", "tally: unknown command \"tally lgo\": did you mean `tally log`? see `tally --help`\n"},
		{"room lsit", "tally: unknown command \"tally room lsit\": did you mean `tally room list`? see `tally room --help`\n"},
		{"wathc", "did you mean `tally watch`?"},
		{"frobnicate", "tally: unknown command \"tally frobnicate\": see `tally --help`\n"},
	} {
		code, out, errw := mainOut(context.Background(), "", append([]string{"--home", home}, strings.Fields(c.args)...)...)
		if code != exitUsage || out != "" || !strings.Contains(errw, c.want) || strings.Count(errw, "\n") != 1 {
			t.Errorf("tally %s: exit %d stderr %q, want %q", c.args, code, errw, c.want)
		}
	}
}

// TestCLIGlobalFlagsAfterCommand: the global flags work after the command
// too, and after its arguments.
func TestCLIGlobalFlagsAfterCommand(t *testing.T) {
	st := skytaletest.NewStack(t)
	home := t.TempDir()
	mustTally(t, "init", "--home", home)
	mustTally(t, "signin", "--org", "acme", "--home", home, "--api-url", st.APIURL)
	mustTally(t, "add", "--home", home, "buy", "milk")
	out := mustTally(t, "log", "--home", home, "--json")
	var e struct{ Text string }
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.Text != "buy milk" {
		t.Fatalf("log --json: %q", out)
	}
	g := []string{"--home", home, "--api-url", st.APIURL, "--relay-url", st.RelayURL}
	mustTally(t, append(g, "room", "create", "ops")...)
	out = mustTally(t, "--home", home, "room", "list", "--json")
	var rooms struct {
		Rooms []struct{ Room, Name, Role string }
	}
	if err := json.Unmarshal([]byte(out), &rooms); err != nil || len(rooms.Rooms) != 1 || rooms.Rooms[0].Room != "acme/rooms/ops" || rooms.Rooms[0].Role != "owner" {
		t.Fatalf("room list --json: %q", out)
	}
	out = mustTally(t, "--home", home, "--api-url", st.APIURL, "--relay-url", st.RelayURL, "room", "members", "ops", "--json")
	if !strings.HasPrefix(out, `{"epoch"`) {
		t.Fatalf("members ops --json: %q", out)
	}
}

// TestCLIHelpHasNoContradictions: no flag's help says its default twice,
// and every command says what it does.
func TestCLIHelpHasNoContradictions(t *testing.T) {
	app := newApp(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	var walk func(path []string, cmds []*ucli.Command)
	walk = func(path []string, cmds []*ucli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			p := append(append([]string{}, path...), c.Name)
			if c.Usage == "" {
				t.Errorf("tally %s has no description", strings.Join(p, " "))
			}
			out := mustTally(t, append(p, "--help")...)
			for _, line := range strings.Split(out, "\n") {
				if strings.Count(line, "(default") > 1 || strings.Contains(line, "(default: 0)") || strings.Contains(line, "(default: 0s)") || strings.Contains(line, "(default: false)") {
					t.Errorf("tally %s --help: %q", strings.Join(p, " "), line)
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	out := mustTally(t, "room", "invite", "--help")
	if !strings.Contains(out, "--uses value  how many seats may join with it, 1 to 100 (default: 1)") || !strings.Contains(out, "(default: 1h)") {
		t.Errorf("room invite --help:\n%s", out)
	}
	out = mustTally(t, "serve", "--help")
	if !strings.Contains(out, "(default: on when both planes listen on loopback)") {
		t.Errorf("serve --help:\n%s", out)
	}
	out = mustTally(t, "config", "--help")
	for _, s := range []string{"set", "get", "list", "cover_interval"} {
		if !strings.Contains(out, s) {
			t.Errorf("config --help lacks %s:\n%s", s, out)
		}
	}
}

// TestCLIJoinChecksBeforeWaiting: a bad token or a bad name fails without
// a word about waiting for the owner.
func TestCLIJoinChecksBeforeWaiting(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	bob, _ := newHome(t, st, "bobco")
	mustTally(t, append(alice, "room", "create", "ops")...)
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{append(bob, "room", "join", "acme/rooms/ops", "skt_inv_nonsense"), "the invite token is invalid, expired or used up", exitNotAllowed},
		{append(bob, "room", "join", "acme/rooms/nope", "skt_inv_nonsense"), "", exitNotFound},
		{append(bob, "room", "join", "Not A Name!", "skt_inv_x"), "", 1},
	} {
		code, _, errw := mainOut(context.Background(), "", c.args...)
		if code != c.code || strings.Contains(errw, "waiting") || !strings.Contains(errw, c.want) {
			t.Errorf("tally %s: exit %d, stderr %q", strings.Join(c.args[2:], " "), code, errw)
		}
	}
}

// TestCLIProgressOnlyOnTerminals: pull's progress is plain lines in a
// pipe and a line rewritten in place on a terminal; an error never starts
// with an escape sequence; colour only on a terminal without NO_COLOR.
func TestCLIProgressOnlyOnTerminals(t *testing.T) {
	st := skytaletest.NewStack(t)
	g := []string{"--home", t.TempDir(), "--api-url", st.APIURL, "--relay-url", st.RelayURL}
	mustTally(t, append(g, "init")...)
	mustTally(t, append(g, "signin", "--org", "acme")...)
	mustTally(t, append(g, "connect")...)
	mustTally(t, append(g, "add", "x")...)
	mustTally(t, append(g, "push")...)

	_, errw, err := tally2(t, "", append(g, "pull")...)
	if err != nil || strings.ContainsAny(errw, "\r\033") || !strings.Contains(errw, "pulled up to seq 1\n") {
		t.Fatalf("pull into a pipe: stderr %q, %v", errw, err)
	}

	mustTally(t, append(g, "add", "y")...)
	mustTally(t, append(g, "push")...)
	testOnlyStderrTerminal = true
	testOnlyEnv = map[string]string{"NO_COLOR": "", "TERM": "xterm"}
	defer func() { testOnlyStderrTerminal, testOnlyEnv = false, nil }()
	_, errw, err = tally2(t, "", append(g, "pull")...)
	if err != nil || !strings.HasPrefix(errw, "\rpulled up to seq 2\033[K") || !strings.HasSuffix(errw, "\r\033[K") {
		t.Fatalf("pull on a terminal: stderr %q, %v", errw, err)
	}
	mustTally(t, append(g, "add", "z")...)
	if _, errw, err = tally2(t, "", append(g, "push")...); err != nil || !strings.HasPrefix(errw, "\rpushed 1 of 1 batches\033[K") {
		t.Fatalf("push on a terminal: stderr %q, %v", errw, err)
	}
	// An error on a terminal: coloured prefix, no erase sequence first.
	down := refusedURL(t)
	_, _, errw = mainOut(context.Background(), "", append(g, "--relay-url", down, "pull")...)
	if !strings.HasPrefix(errw, "\033[31mtally:\033[0m nothing is listening at "+down) {
		t.Fatalf("error on a terminal: %q", errw)
	}
	testOnlyEnv["NO_COLOR"] = "1"
	_, _, errw = mainOut(context.Background(), "", append(g, "--relay-url", down, "pull")...)
	if !strings.HasPrefix(errw, "tally: nothing is listening at "+down) {
		t.Fatalf("error with NO_COLOR: %q", errw)
	}
	testOnlyStderrTerminal = false
	testOnlyEnv["NO_COLOR"] = ""
	_, _, errw = mainOut(context.Background(), "", append(g, "--relay-url", down, "pull")...)
	if strings.Contains(errw, "\033") {
		t.Fatalf("error into a pipe: %q", errw)
	}
}

// TestCLISeatlessHome: signin and log on a home without a seed refuse
// with a clear line and a non-zero exit, and create no seed.
func TestCLISeatlessHome(t *testing.T) {
	st := skytaletest.NewStack(t)
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-url", st.APIURL, "signin", "--org", "acme"}, "tally: this home has no seat yet, so there is nothing to sign in: run `tally init` first"},
		{[]string{"log"}, "tally: this home has no seat yet (no seed): run `tally init`"},
		{[]string{"add", "x"}, "tally: this home has no seat yet (no seed): run `tally init`"},
	} {
		code, out, errw := mainOut(context.Background(), "", append([]string{"--home", home}, c.args...)...)
		if code != 1 || out != "" || !strings.HasPrefix(errw, c.want) {
			t.Errorf("tally %s: exit %d, stdout %q, stderr %q", strings.Join(c.args, " "), code, out, errw)
		}
	}
	if _, err := os.Stat(home + "/phrase"); err == nil {
		t.Fatal("a refused command made a seed")
	}
}

// TestCLIInterruptExitCode: Ctrl-C exits 130 whatever the command; a
// clean stop on SIGTERM exits 0.
func TestCLIInterruptExitCode(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops")...))
	bob, _ := newHome(t, st, "bobco")
	fresh := []string{"--home", t.TempDir(), "--api-url", st.APIURL}

	interrupt := func(marker string) (context.Context, func(p []byte)) {
		ctx, cancel := context.WithCancelCause(context.Background())
		var once sync.Once
		var seen strings.Builder
		return ctx, func(p []byte) {
			seen.Write(p)
			if strings.Contains(seen.String(), marker) {
				once.Do(func() { cancel(errSignal{syscall.SIGINT}) })
			}
		}
	}
	for _, c := range []struct {
		name, stdin, marker string
		args                []string
	}{
		{"join", "", "waiting for the owner", append(bob, "room", "join", "acme/rooms/ops", tok)},
		{"signin --recover", strings.Repeat("abandon ", 23) + "art\n", "on a signed-in device run", append(fresh, "signin", "--recover")},
		{"watch", "", "watching", append(alice, "watch")},
		{"admit --watch", "", "admitting join requests", append(alice, "room", "admit", "ops", "--watch")},
	} {
		ctx, see := interrupt(c.marker)
		errw := &hookWriter{see: see}
		code := Main(ctx, append([]string{"tally"}, c.args...), strings.NewReader(c.stdin), &bytes.Buffer{}, errw)
		if code != exitInterrupted {
			t.Errorf("%s interrupted: exit %d, want %d; stderr %q", c.name, code, exitInterrupted, errw.b.String())
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errSignal{syscall.SIGTERM})
	if code, _, errw := mainOut(ctx, "", append(alice, "watch")...); code != 0 {
		t.Errorf("watch stopped by SIGTERM: exit %d: %s", code, errw)
	}
}

// hookWriter shows what is written to see, and keeps it.
type hookWriter struct {
	mu  sync.Mutex
	b   bytes.Buffer
	see func([]byte)
}

func (w *hookWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.see(p)
	return w.b.Write(p)
}

// TestCLINamesAreConsistent: a room is named the same way in every line
// of its owner's output, a sender the same way in watch, members and
// history (its short form), and whole DIDs come with --verbose and --json.
func TestCLINamesAreConsistent(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, aliceDID := newHome(t, st, "acme")
	bob, bobDID := newHome(t, st, "bobco")
	mustTally(t, append(bob, "config", "set", "cover_traffic", "off")...)
	mustTally(t, append(alice, "config", "set", "cover_traffic", "off")...)
	var lines []string
	run := func(g []string, args ...string) string {
		out, errw, err := tally2(t, "", append(g, args...)...)
		if err != nil {
			t.Fatalf("tally %s: %v", strings.Join(args, " "), err)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(out+errw), "\n")...)
		return out
	}
	run(alice, "room", "create", "ops")
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops")...))
	cliJoin(t, alice, bob, "ops", "acme/rooms/ops", bobDID)
	w := startTally(append(alice, "watch", "ops")...)
	eventually(t, "watch", func() bool { return strings.Contains(w.errw.String(), "watching ops") })
	mustTally(t, append(bob, "msg", "acme/rooms/ops", "hi")...)
	eventually(t, "the message", func() bool { return strings.Contains(w.out.String(), "hi") })
	w.stop(t)
	_ = tok
	run(alice, "msg", "ops", "hello")
	members := run(alice, "room", "members", "ops")
	history := run(alice, "history", "ops")
	run(alice, "room", "list")

	short := shortID(bobDID)
	if got := strings.TrimSpace(w.out.String()); got != "[ops] "+short+": hi" {
		t.Errorf("watch: %q", got)
	}
	if !strings.Contains(members, "member "+short+"\n") || !strings.Contains(members, "owner  "+shortID(aliceDID)+"  (you)") {
		t.Errorf("members:\n%s", members)
	}
	if !strings.Contains(history, "[ops] "+short+": hi\n") || !strings.Contains(history, "[ops] you: hello\n") {
		t.Errorf("history:\n%s", history)
	}
	for _, l := range lines {
		if strings.Contains(l, "acme/rooms/ops") || strings.Contains(l, "did:key:") {
			t.Errorf("owner's line names the room or a member another way: %q", l)
		}
	}
	if out := mustTally(t, append(alice, "--verbose", "room", "members", "ops")...); !strings.Contains(out, "member "+bobDID+"\n") {
		t.Errorf("members --verbose:\n%s", out)
	}
	if out := mustTally(t, append(alice, "history", "ops", "--verbose")...); !strings.Contains(out, "[ops] "+bobDID+": hi") {
		t.Errorf("history --verbose:\n%s", out)
	}
	if out := mustTally(t, append(alice, "--json", "history", "ops")...); !strings.Contains(out, `"sender":"`+bobDID+`"`) {
		t.Errorf("history --json:\n%s", out)
	}
	// The short form is enough to name a member.
	if out := mustTally(t, append(alice, "room", "admins", "add", "ops", short)...); out != short+" is now an admin of ops\n" {
		t.Errorf("admins add by short form: %q", out)
	}
}

// TestCLIMsgFromStdin: `msg NAME -` sends what stdin holds; history shows
// its second line under its header; after `--` a word that looks like a
// flag is text.
func TestCLIMsgFromStdin(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	mustTally(t, append(alice, "room", "create", "ops")...)
	if _, err := tally(t, "line one\nline two\n", append(alice, "msg", "ops", "-")...); err != nil {
		t.Fatal(err)
	}
	mustTally(t, append(alice, "msg", "ops", "--", "--not-a-flag")...)
	out := mustTally(t, append(alice, "history", "ops")...)
	if !strings.Contains(out, "you: line one\n"+continuation+"line two\n") || !strings.Contains(out, "you: --not-a-flag\n") {
		t.Fatalf("history:\n%s", out)
	}
	if _, err := tally(t, "", append(alice, "msg", "ops", "-")...); err == nil || !strings.Contains(err.Error(), "no message on stdin") {
		t.Fatalf("empty stdin: %v", err)
	}
}

// TestCLIWhoamiAndRoomList: whoami and room list on a fresh and on a
// signed-in home.
func TestCLIWhoamiAndRoomList(t *testing.T) {
	st := skytaletest.NewStack(t)
	g, did := initHome(t, st)
	out := mustTally(t, append(g, "whoami")...)
	if !strings.HasPrefix(out, "identity   "+shortID(did)+"\norg        (not signed in") || !strings.Contains(out, "directory  "+st.APIURL+"\n") {
		t.Fatalf("whoami before signin:\n%s", out)
	}
	_, errw, err := tally2(t, "", append(g, "room", "list")...)
	if err != nil || !strings.Contains(errw, "this home has no rooms") {
		t.Fatalf("room list of none: %q %v", errw, err)
	}
	mustTally(t, append(g, "signin", "--org", "acme")...)
	mustTally(t, append(g, "room", "create", "ops")...)
	mustTally(t, append(g, "room", "create", "dev")...)
	if out := mustTally(t, append(g, "room", "list")...); out != "dev                      owner  pq\nops                      owner  pq\n" {
		t.Fatalf("room list:\n%q", out)
	}
	var w map[string]string
	if err := json.Unmarshal([]byte(mustTally(t, append(g, "--json", "whoami")...)), &w); err != nil || w["identity"] != did || w["org"] != "acme" || !strings.HasPrefix(w["sync_channel"], "acme/tally/") {
		t.Fatalf("whoami --json: %v %v", w, err)
	}
}

// TestCLIConcurrentJoinsOneHome: two joins from one home at once; the one
// that loses the race says so clearly.
func TestCLIConcurrentJoinsOneHome(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	bob, bobDID := newHome(t, st, "bobco")
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops", "--uses", "2")...))
	// (One after the other: urfave/cli's help flag is shared by every
	// command tree of the process, so two may not parse at once.)
	j1 := startTally(append(bob, "room", "join", "acme/rooms/ops", tok, "--wait", "1m")...)
	eventually(t, "the first join to wait", func() bool { return strings.Contains(j1.errw.String(), "waiting") })
	j2 := startTally(append(bob, "room", "join", "acme/rooms/ops", tok, "--wait", "1m")...)
	eventually(t, "the second join to wait", func() bool { return strings.Contains(j2.errw.String(), "waiting") })
	eventually(t, "the owner to admit bob", func() bool {
		return strings.Contains(mustTally(t, append(alice, "room", "admit", "ops")...), "admitted "+shortID(bobDID))
	})
	e1, e2 := j1.wait(t), j2.wait(t)
	for _, err := range []error{e1, e2} {
		if err != nil && !strings.Contains(err.Error(), "another tally on this home joined acme/rooms/ops while this one waited") {
			t.Errorf("the join that lost the race: %v", err)
		}
	}
	if e1 != nil && e2 != nil {
		t.Fatal("neither join finished")
	}
	if out := mustTally(t, append(bob, "room", "list")...); !strings.Contains(out, "acme/rooms/ops") {
		t.Fatalf("room list: %s", out)
	}
}

// TestCLIWatchRelayGoesAway: a watch whose serve stops says, in words,
// that the relay closed the connection and then that nothing listens.
func TestCLIWatchRelayGoesAway(t *testing.T) {
	p := serveInProcess(t, serveOptions{Data: t.TempDir()})
	g := []string{"--home", t.TempDir(), "--api-url", p.apiURL, "--relay-url", p.relURL}
	mustTally(t, append(g, "init")...)
	mustTally(t, append(g, "signin", "--org", "acme")...)
	mustTally(t, append(g, "room", "create", "ops")...)
	w := startTally(append(g, "watch")...)
	eventually(t, "watch", func() bool { return strings.Contains(w.errw.String(), "watching") })
	p.stop()
	eventually(t, "watch to find nothing listening", func() bool { return strings.Contains(w.errw.String(), "nothing is listening at "+p.relURL) })
	w.stop(t)
	lines := strings.Split(w.errw.String(), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "not connected (the relay closed the connection: relay shutting down); trying again in ") {
		t.Fatalf("watch said:\n%s", w.errw.String())
	}
}

// TestCLIFlagDidYouMean: a mistyped flag gets the nearest flag of the
// command.
func TestCLIFlagDidYouMean(t *testing.T) {
	code, _, errw := mainOut(context.Background(), "", "--home", t.TempDir(), "log", "--jsno")
	if code != exitUsage || errw != "tally: unknown flag --jsno: did you mean --json? see `tally log --help`\n" {
		t.Fatalf("exit %d, stderr %q", code, errw)
	}
}

// TestCLIDisplayNames: a name a person gives shows beside the short form
// of their key, the same in watch, history and members; a bad name is
// refused; the notice of a new name reads as words.
func TestCLIDisplayNames(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	bob, bobDID := newHome(t, st, "bobco")
	mustTally(t, append(alice, "room", "create", "ops")...)
	cliJoin(t, alice, bob, "ops", "acme/rooms/ops", bobDID)
	for _, bad := range []string{" Bob", "B\u202eob", strings.Repeat("x", 65)} {
		if _, err := tally(t, "", append(bob, "config", "set", "name", bad)...); err == nil || !strings.Contains(err.Error(), "is not a name tally can show") {
			t.Errorf("config set name %q: %v", bad, err)
		}
	}
	mustTally(t, append(bob, "config", "set", "name", "Bob")...)
	w := startTally(append(alice, "watch", "ops")...)
	eventually(t, "watch", func() bool { return strings.Contains(w.errw.String(), "watching ops") })
	mustTally(t, append(bob, "msg", "acme/rooms/ops", "hi")...)
	label := "Bob (" + shortID(bobDID) + ")"
	eventually(t, "the message", func() bool { return strings.Contains(w.out.String(), "hi") })
	w.stop(t)
	if !strings.Contains(w.out.String(), "[ops] "+label+": hi\n") {
		t.Errorf("watch:\n%s", w.out.String())
	}
	history := mustTally(t, append(alice, "history", "ops")...)
	if !strings.Contains(history, "[ops] "+shortID(bobDID)+" now goes by the name \"Bob\"\n") || !strings.Contains(history, "[ops] "+label+": hi\n") {
		t.Errorf("history:\n%s", history)
	}
	if out := mustTally(t, append(alice, "room", "members", "ops")...); !strings.Contains(out, "member "+label+"\n") {
		t.Errorf("members:\n%s", out)
	}
	g := []string{"--home", t.TempDir()}
	mustTally(t, append(g, "init", "--name", "Carol")...)
	if out := mustTally(t, append(g, "whoami")...); !strings.HasPrefix(out, "identity   Carol (") {
		t.Errorf("whoami after init --name: %s", out)
	}
}

// TestCLIDevicesList: devices list shows this device in the home's rooms;
// revoking an unknown device is refused.
func TestCLIDevicesList(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	mustTally(t, append(alice, "room", "create", "ops")...)
	out := mustTally(t, append(alice, "devices", "list")...)
	if !strings.Contains(out, "this device, 1 room\n") || !strings.Contains(out, "  yes  ") {
		t.Fatalf("devices list: %q", out)
	}
	if _, err := tally(t, "", append(alice, "devices", "revoke", "nosuchid")...); err == nil || !strings.Contains(err.Error(), "no device nosuchid of yours") {
		t.Fatalf("revoke unknown: %v", err)
	}
	_, errw, err := tally2(t, "", append(alice, "devices", "join")...)
	if err != nil || !strings.Contains(errw, "no room has let this device in yet") {
		t.Fatalf("devices join: %q %v", errw, err)
	}
}
