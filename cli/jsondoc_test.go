package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/skytaletest"
)

// jsonShape is what docs/CLI.md says a command prints with --json.
type jsonShape struct {
	kind   string            // "one" object, JSON "lines", or objects "turn" by turn
	tables []map[string]bool // field path (x, or x[].y) → optional; one table per object in turn
}

var cliDocHeading = regexp.MustCompile("^### `tally (.+)`$")

// readCLIDoc reads the shapes of docs/CLI.md by command ("room admit
// --watch"); the error object is under "error".
func readCLIDoc(t *testing.T) map[string]*jsonShape {
	t.Helper()
	b, err := os.ReadFile("../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string]*jsonShape{}
	var cur *jsonShape
	inTable := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "## Errors":
			cur = &jsonShape{kind: "one"}
			shapes["error"] = cur
		case strings.HasPrefix(line, "## "):
			cur = nil
		case cliDocHeading.MatchString(line):
			cur = &jsonShape{}
			shapes[cliDocHeading.FindStringSubmatch(line)[1]] = cur
		case cur == nil:
		case cur.kind == "" && strings.HasPrefix(line, "One object"):
			cur.kind = "one"
		case cur.kind == "" && strings.HasPrefix(line, "JSON Lines"):
			cur.kind = "lines"
		case cur.kind == "" && strings.HasPrefix(line, "Objects in turn"):
			cur.kind = "turn"
		case strings.HasPrefix(line, "| `"):
			if !inTable {
				cur.tables = append(cur.tables, map[string]bool{})
				inTable = true
			}
			cells := strings.Split(line, "|")
			field := strings.Trim(strings.TrimSpace(cells[1]), "`")
			cur.tables[len(cur.tables)-1][field] = strings.Contains(cells[2], "optional")
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
		}
	}
	return shapes
}

// matchShape reports how obj differs from the fields of table: a field
// not documented, or a field documented and not optional that is missing,
// at the top and in the objects of its lists.
func matchShape(table map[string]bool, obj map[string]any) []string {
	var diffs []string
	for k, v := range obj {
		if _, ok := table[k]; !ok {
			diffs = append(diffs, "undocumented field "+k)
			continue
		}
		list, _ := v.([]any)
		for _, el := range list {
			m, ok := el.(map[string]any)
			if !ok {
				continue
			}
			for ek := range m {
				if _, ok := table[k+"[]."+ek]; !ok {
					diffs = append(diffs, "undocumented field "+k+"[]."+ek)
				}
			}
			for f, opt := range table {
				if sub, ok := strings.CutPrefix(f, k+"[]."); ok && !opt {
					if _, ok := m[sub]; !ok {
						diffs = append(diffs, "missing field "+f)
					}
				}
			}
		}
	}
	for f, opt := range table {
		if _, ok := obj[f]; !ok && !opt && !strings.Contains(f, "[].") {
			diffs = append(diffs, "missing field "+f)
		}
	}
	slices.Sort(diffs)
	return slices.Compact(diffs)
}

// jsonDoc checks what commands print against docs/CLI.md.
type jsonDoc struct {
	t      *testing.T
	shapes map[string]*jsonShape
	mu     sync.Mutex
	seen   map[string]bool
}

// check checks the lines a command printed with --json against the shape
// docs/CLI.md gives for name.
func (d *jsonDoc) check(name string, out string) {
	d.t.Helper()
	sh := d.shapes[name]
	if sh == nil {
		d.t.Errorf("docs/CLI.md has no `tally %s`", name)
		return
	}
	d.mu.Lock()
	d.seen[name] = true
	d.mu.Unlock()
	var objs []map[string]any
	for l := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			d.t.Errorf("tally %s --json printed %q, not a JSON object a line: %v", name, l, err)
			return
		}
		objs = append(objs, m)
	}
	switch {
	case sh.kind == "one" && len(objs) != 1, sh.kind == "turn" && len(objs) != len(sh.tables):
		d.t.Errorf("tally %s --json printed %d objects, docs/CLI.md says %s (%d tables):\n%s", name, len(objs), sh.kind, len(sh.tables), out)
		return
	case sh.kind == "lines" && len(objs) == 0:
		d.t.Errorf("tally %s --json printed nothing to check", name)
		return
	}
	for i, obj := range objs {
		table := sh.tables[0]
		if sh.kind == "turn" {
			table = sh.tables[i]
		}
		if diffs := matchShape(table, obj); len(diffs) > 0 {
			d.t.Errorf("tally %s --json, object %d, against docs/CLI.md: %s\n%s", name, i+1, strings.Join(diffs, "; "), out)
		}
	}
}

// run runs tally --json args in-process, checks its stdout as name and
// returns it.
func (d *jsonDoc) run(name string, args ...string) string {
	d.t.Helper()
	var out, errw syncBuffer
	if err := run(context.Background(), append([]string{"tally", "--json"}, args...), strings.NewReader(""), &out, &errw); err != nil {
		d.t.Fatalf("tally --json %s: %v\n%s", strings.Join(args, " "), err, errw.String())
	}
	d.check(name, out.String())
	return out.String()
}

// jsonStream is a command running with --json whose stdout is read a
// line at a time.
type jsonStream struct {
	lines  *bufio.Scanner
	done   chan error
	cancel context.CancelFunc
}

func (d *jsonDoc) start(args ...string) *jsonStream {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	pr, pw := io.Pipe()
	b := &jsonStream{lines: bufio.NewScanner(pr), done: make(chan error, 1), cancel: cancel}
	go func() {
		err := run(ctx, append([]string{"tally", "--json"}, args...), strings.NewReader(""), pw, io.Discard)
		pw.CloseWithError(err)
		b.done <- err
	}()
	d.t.Cleanup(cancel)
	return b
}

// next is the command's next line of stdout.
func (b *jsonStream) next(t *testing.T) string {
	t.Helper()
	if !b.lines.Scan() {
		t.Fatalf("no line: %v", b.lines.Err())
	}
	return b.lines.Text() + "\n"
}

func field(t *testing.T, out, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	s, _ := m[name].(string)
	return s
}

// TestCLIJSONIsDocumented runs every command docs/CLI.md documents with
// --json on a real stack and checks that each prints the documented
// objects with exactly their fields; every command of the tree is either
// documented or among those that print no JSON, and the error object and
// exit codes are the documented ones.
func TestCLIJSONIsDocumented(t *testing.T) {
	d := &jsonDoc{t: t, shapes: readCLIDoc(t), seen: map[string]bool{}}
	st := skytaletest.NewStack(t)
	urls := []string{"--api-url", st.APIURL, "--relay-url", st.RelayURL}
	home := func() []string { return append([]string{"--home", t.TempDir()}, urls...) }
	alice, bob, carol, dave := home(), home(), home(), home()
	with := func(g []string, args ...string) []string { return append(slices.Clone(g), args...) }

	// The seat.
	d.run("init", with(alice, "init")...)
	d.run("signin", with(alice, "signin", "--org", "acme")...)
	bobID := field(t, d.run("init", with(bob, "init")...), "identity")
	mustTally(t, with(bob, "signin", "--org", "beta")...)
	carolID := field(t, mustTally(t, with(carol, "--json", "init")...), "identity")
	mustTally(t, with(carol, "signin", "--org", "gamma")...)
	mustTally(t, with(dave, "init")...)
	mustTally(t, with(dave, "signin", "--org", "delta")...)
	d.run("connect", with(alice, "connect")...)
	d.run("add", with(alice, "add", "buy milk")...)
	d.run("log", with(alice, "log")...)
	d.run("push", with(alice, "push")...)
	d.run("pull", with(alice, "pull")...)
	d.run("whoami", with(alice, "whoami")...)
	d.run("config set", with(alice, "config", "set", "cover_traffic", "off")...)
	d.run("config get", with(alice, "config", "get", "cover_interval")...)
	d.run("config list", with(alice, "config", "list")...)
	d.run("version", "version")
	var backup struct{ Words []string }
	json.Unmarshal([]byte(d.run("backup", with(alice, "backup", "--yes")...)), &backup)

	// Rooms.
	d.run("room create", with(alice, "room", "create", "ops")...)
	tok := field(t, d.run("room invite", with(alice, "room", "invite", "ops", "--auto")...), "token")
	d.run("room join", with(bob, "room", "join", "acme/rooms/ops", tok)...)

	// Carol waits for the owner to admit her.
	defer func(iv time.Duration) { admitInterval = iv }(admitInterval)
	admitInterval = 100 * time.Millisecond
	tok = field(t, mustTally(t, with(alice, "--json", "room", "invite", "ops")...), "token")
	carolJoin := d.start(with(carol, "room", "join", "acme/rooms/ops", tok)...)
	eventually(t, "alice to admit carol", func() bool {
		return strings.Contains(d.run("room admit", with(alice, "room", "admit", "ops")...), carolID)
	})
	d.check("room join", carolJoin.next(t))
	if err := <-carolJoin.done; err != nil {
		t.Fatal(err)
	}
	// Dave is admitted by a watching owner.
	tok = field(t, mustTally(t, with(alice, "--json", "room", "invite", "ops")...), "token")
	admit := d.start(with(alice, "room", "admit", "ops", "--watch")...)
	daveJoin := d.start(with(dave, "room", "join", "acme/rooms/ops", tok)...)
	d.check("room admit --watch", admit.next(t))
	admit.cancel()
	d.check("room join", daveJoin.next(t))
	<-daveJoin.done
	<-admit.done

	d.run("room members", with(alice, "room", "members", "ops")...)
	d.run("room list", with(alice, "room", "list")...)
	watch := d.start(with(alice, "watch", "ops")...)
	d.run("msg", with(bob, "msg", "acme/rooms/ops", "hello", "alice")...)
	d.check("watch", watch.next(t))
	watch.cancel()
	<-watch.done
	d.run("history", with(alice, "history", "ops")...)
	d.run("room admins add", with(alice, "room", "admins", "add", "ops", bobID)...)
	d.run("room admins remove", with(alice, "room", "admins", "remove", "ops", bobID)...)
	d.run("room create", with(alice, "room", "create", "dev", "--suite", "classic")...)
	d.run("room add", with(alice, "room", "add", "dev", bobID)...)
	d.run("room list --pending", with(bob, "room", "list", "--pending")...)
	d.run("room decline", with(bob, "room", "decline", "acme/rooms/dev")...)
	d.run("contact claims", with(bob, "contact", "claims")...)
	d.run("room remove", with(alice, "room", "remove", "ops", carolID)...)
	d.run("room leave", with(bob, "room", "leave", "acme/rooms/ops")...)

	// Orgs and contacts.
	d.run("org invite", with(alice, "org", "invite")...)
	id := field(t, d.run("contact token", with(alice, "contact", "token")...), "id")
	d.run("contact tokens", with(alice, "contact", "tokens")...)
	d.run("contact revoke", with(alice, "contact", "revoke", id)...)

	// Devices: a linked laptop, a phone that brings the phrase.
	laptop := home()
	link := d.start(with(laptop, "signin", "--link", "--label", "laptop")...)
	first := link.next(t)
	approved := d.run("devices approve", with(alice, "devices", "approve", "--fingerprint", field(t, first, "fingerprint"), field(t, first, "code"))...)
	d.check("signin --link", first+link.next(t))
	if err := <-link.done; err != nil {
		t.Fatal(err)
	}
	d.run("devices join", with(laptop, "devices", "join")...)
	d.run("devices list", with(alice, "devices", "list")...)
	d.run("devices revoke", with(alice, "devices", "revoke", field(t, approved, "device_id"))...)
	phone := home()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	recoverDone := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"tally", "--json"}, with(phone, "signin", "--recover")...), strings.NewReader(strings.Join(backup.Words, " ")+"\n"), pw, io.Discard)
		pw.CloseWithError(err)
		recoverDone <- err
	}()
	rec := &jsonStream{lines: bufio.NewScanner(pr)}
	first = rec.next(t)
	mustTally(t, with(alice, "devices", "approve", "--fingerprint", field(t, first, "fingerprint"), field(t, first, "user_code"))...)
	d.check("signin --recover", first+rec.next(t))
	if err := <-recoverDone; err != nil {
		t.Fatal(err)
	}

	// The operator's commands, on a data folder no serve runs on.
	op := []string{"--data", t.TempDir(), "--api-url", refusedURL(t)}
	d.run("serve token", append([]string{"serve", "token"}, op...)...)
	acct := field(t, d.run("serve accounts create", append([]string{"serve", "accounts", "create", "--email", "ann@example.com", "--org", "annco"}, op...)...), "account_id")
	d.run("serve accounts list", append([]string{"serve", "accounts", "list"}, op...)...)
	d.run("serve accounts disable", append([]string{"serve", "accounts", "disable", acct}, op...)...)
	d.run("serve accounts remove", append([]string{"serve", "accounts", "remove", acct}, op...)...)

	// The error object, and its exit code.
	code, out, errw := mainOut(context.Background(), "", with(alice, "--json", "room", "members", "nosuchroom")...)
	if code != exitNotAllowed || out != "" {
		t.Errorf("room members of a room this home lacks: exit %d, stdout %q", code, out)
	}
	d.check("error", errw)
	if code, _, errw := mainOut(context.Background(), "", "--json", "frobnicate"); code != exitUsage || field(t, errw, "error") != "usage" {
		t.Errorf("an unknown command: exit %d, %q", code, errw)
	}

	for name := range d.shapes {
		if !d.seen[name] {
			t.Errorf("docs/CLI.md documents `tally %s`, which this test does not run", name)
		}
	}
	// Every command of the tree is documented, or prints no JSON.
	noJSON := map[string]bool{"help": true, "man": true, "completion": true, "serve backup": true, "serve check-config": true,
		"serve cluster update-stream": true, "serve account create": true}
	documented := map[string]bool{}
	for name := range d.shapes {
		var words []string
		for _, w := range strings.Fields(name) {
			if !strings.HasPrefix(w, "-") {
				words = append(words, w)
			}
		}
		documented[strings.Join(words, " ")] = true
	}
	var walk func(path string, cmds []*ucli.Command)
	walk = func(path string, cmds []*ucli.Command) {
		for _, c := range cmds {
			p := strings.TrimSpace(path + " " + c.Name)
			if c.Hidden {
				continue
			}
			if len(c.Subcommands) > 0 {
				walk(p, c.Subcommands)
				continue
			}
			if !documented[p] && !noJSON[p] {
				t.Errorf("tally %s is not in docs/CLI.md", p)
			}
		}
	}
	walk("", newApp(nil, io.Discard, io.Discard).Commands)
}
