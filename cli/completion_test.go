package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/skytaletest"
)

// hostileRooms are room names that a shell would read as more than a
// word: spaces, quotes, a newline, command substitutions. Each that runs
// makes a file named pwned-N in the shell's folder.
var hostileRooms = []string{
	"acme/rooms/$(touch pwned-1)",
	"acme/rooms/`touch pwned-2`",
	"acme/rooms/a b",
	"acme/rooms/it's\"q\"",
	"acme/rooms/x\n$(touch pwned-3)",
	"acme/rooms/;touch pwned-4;",
	"acme/rooms/*",
	"acme/rooms/\x1b]0;title\a",
}

// completionHome makes a home in org acme with the rooms ops and dev, a
// room of another org it joined (beta/rooms/plans), and the hostile rooms
// written into its database by hand: the seat refuses such names when a
// room is saved, so only a damaged or hand-edited database holds them,
// and completion must offer them to no shell even then.
func completionHome(t *testing.T) string {
	t.Helper()
	st := skytaletest.NewStack(t)
	alice, _ := newHome(t, st, "acme")
	bob, _ := newHome(t, st, "beta")
	mustTally(t, append(alice, "room", "create", "ops")...)
	mustTally(t, append(alice, "room", "create", "dev")...)
	mustTally(t, append(bob, "room", "create", "plans")...)
	tok := strings.TrimSpace(mustTally(t, append(bob, "room", "invite", "plans", "--auto")...))
	mustTally(t, append(alice, "room", "join", "beta/rooms/plans", tok)...)

	db, err := sqlitedb.Open(filepath.Join(alice[1], "seat.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range hostileRooms {
		if _, err := db.Exec(`INSERT INTO rooms (channel, role, created_at) VALUES (?, 'member', 0)`, name); err != nil {
			t.Fatal(err)
		}
	}
	return alice[1]
}

// complete1 runs `tally __complete WORDS…` in-process and returns its
// candidates.
func complete1(t *testing.T, words ...string) []string {
	t.Helper()
	out := mustTally(t, append([]string{completeName}, words...)...)
	return strings.Fields(out)
}

// TestCompletionWords: the hidden command offers commands, the flags of
// the command reached (wherever its flags stand), the values of a flag
// with few, and this home's room names where a room comes; nothing after
// `--` and nothing a shell would read as more than a word.
func TestCompletionWords(t *testing.T) {
	home := completionHome(t)
	g := []string{"--home", home}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"ro"}, []string{"room"}},
		{[]string{"room", "m"}, []string{"members"}},
		{append(g, "msg", ""), []string{"dev", "ops", "beta/rooms/plans"}},
		{[]string{"msg", "--home", home, "o"}, []string{"ops"}},
		{[]string{"msg", "--home=" + home, ""}, []string{"dev", "ops", "beta/rooms/plans"}},
		{append(g, "room", "members", "b"), []string{"beta/rooms/plans"}},
		{append(g, "watch", "ops", ""), []string{"dev", "ops", "beta/rooms/plans"}},
		{append(g, "msg", "ops", ""), nil},                   // the text
		{append(g, "msg", "ops", "--", "--"), nil},           // text after --
		{append(g, "room", "create", ""), nil},               // a new name
		{append(g, "room", "join", ""), nil},                 // the invite's name
		{[]string{"msg", "ops", "--js"}, []string{"--json"}}, // flags after the arguments
		{[]string{"room", "create", "--s"}, []string{"--suite"}},
		{[]string{"room", "create", "x", "--suite", ""}, []string{"pq", "classic"}},
		{[]string{"--home", ""}, nil}, // a folder: the shell's own file names
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"config", "get", "cover_"}, []string{"cover_traffic", "cover_interval", "cover_lifetime"}},
		{[]string{"help", "room", "ad"}, []string{"admit", "add", "admins"}},
		{[]string{"help", "__"}, nil},
		{[]string{"__"}, nil}, // the hidden command is not offered
	} {
		if got := complete1(t, c.words...); !slices.Equal(got, c.want) {
			t.Errorf("complete %q: %q, want %q", c.words, got, c.want)
		}
	}
	// Every flag of msg, the global ones too.
	got := complete1(t, "msg", "--")
	for _, f := range []string{"--json", "--home", "--verbose", "--api-url", "--help"} {
		if !slices.Contains(got, f) {
			t.Errorf("complete msg --: %q lacks %s", got, f)
		}
	}
	// A folder that holds no seat gives no rooms and is left as it was.
	empty := filepath.Join(t.TempDir(), "none")
	if got := complete1(t, "--home", empty, "msg", ""); len(got) != 0 {
		t.Errorf("rooms of a home that does not exist: %q", got)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("completion made the home %s: %v", empty, err)
	}
}

// TestCompletionRoomArgs keeps roomArgs naming commands of the tree whose
// arguments are rooms.
func TestCompletionRoomArgs(t *testing.T) {
	app := newApp(nil, nil, nil)
	for path, pos := range roomArgs {
		cmds := app.Commands
		var c *ucli.Command
		for _, n := range strings.Fields(path) {
			if c = findCommand(cmds, n); c == nil {
				t.Fatalf("roomArgs: no command %q", path)
			}
			cmds = c.Subcommands
		}
		want := "NAME"
		if pos < 0 {
			want = "[NAME…]"
		}
		if !strings.HasPrefix(c.ArgsUsage, want) {
			t.Errorf("roomArgs: tally %s takes %q, not a room at %d", path, c.ArgsUsage, pos)
		}
	}
}

// shellTally puts the test binary on a PATH as tally (TestMain runs it as
// the command) and returns the environment for a shell that runs it.
func shellTally(t *testing.T) []string {
	t.Helper()
	bin := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(bin, "tally")); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TALLY_TEST_AS_MAIN=1", "HOME="+t.TempDir())
}

// completionCase is a command line being completed, and what the shell
// should offer.
type completionCase struct {
	words []string // after tally, the last being typed
	want  []string
}

func completionCases(home string) []completionCase {
	return []completionCase{
		{[]string{"--home", home, "msg", ""}, []string{"dev", "ops", "beta/rooms/plans"}},
		{[]string{"--home", home, "room", "members", "o"}, []string{"ops"}},
		{[]string{"msg", "ops", "--js"}, []string{"--json"}},
		{[]string{"room", "adm"}, []string{"admit", "admins"}},
	}
}

// noPwned fails the test if a hostile room name ran in dir.
func noPwned(t *testing.T, dir string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "pwned-*"))
	if len(m) > 0 {
		t.Fatalf("completion ran a room's name: %q", m)
	}
}

// TestCompletionBash runs the bash script as bash runs it, with
// COMP_WORDS and COMP_CWORD set, and reads COMPREPLY.
func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	home := completionHome(t)
	env, dir := shellTally(t), t.TempDir()
	script := filepath.Join(dir, "tally.bash")
	if err := os.WriteFile(script, []byte(mustTally(t, "completion", "bash")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range completionCases(home) {
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c",
			`source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tally_complete; printf '%s\n' "${COMPREPLY[@]}"`,
			"bash", script, "tally")
		cmd.Args = append(cmd.Args, c.words...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("bash completes tally %q: %q %v, want %q", c.words, out, err, c.want)
		}
	}
	noPwned(t, dir)
}

// TestCompletionZsh runs the zsh script's function in zsh, with words and
// CURRENT set as zsh's completion sets them; compadd and _files, which
// exist only inside a completion widget, print what they are given.
func TestCompletionZsh(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("no zsh (Debian's zsh package)")
	}
	home := completionHome(t)
	env, dir := shellTally(t), t.TempDir()
	script := filepath.Join(dir, "_tally.zsh")
	if err := os.WriteFile(script, []byte(mustTally(t, "completion", "zsh")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range completionCases(home) {
		cmd := exec.Command("zsh", "-f", "-c",
			`compadd() { [[ $1 == -- ]] && shift; print -rl -- "$@" }; _files() { print -r -- '(files)' }; compdef() { : }
source "$1"; shift; words=("$@"); CURRENT=$#; _tally`,
			"zsh", script, "tally")
		cmd.Args = append(cmd.Args, c.words...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("zsh completes tally %q: %q %v, want %q", c.words, out, err, c.want)
		}
	}
	noPwned(t, dir)
}

// TestCompletionFish asks fish itself for the completions of command
// lines (complete -C) with the fish script loaded.
func TestCompletionFish(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("no fish (Debian's fish package)")
	}
	home := completionHome(t)
	env, dir := shellTally(t), t.TempDir()
	script := filepath.Join(dir, "tally.fish")
	if err := os.WriteFile(script, []byte(mustTally(t, "completion", "fish")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range completionCases(home) {
		line := "tally " + strings.Join(c.words, " ")
		cmd := exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, script, line)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		var got []string
		for l := range strings.Lines(string(out)) {
			cand, _, _ := strings.Cut(strings.TrimSpace(l), "\t")
			got = append(got, cand)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("fish completes %q: %q %v, want %q", line, out, err, want)
		}
	}
	noPwned(t, dir)
}

// TestCompletionScriptsAskTally: the three scripts ask the same hidden
// command, and none lets its shell evaluate what it prints.
func TestCompletionScriptsAskTally(t *testing.T) {
	for sh, script := range completionScripts {
		if !strings.Contains(script, " "+completeName+" ") {
			t.Errorf("the %s script does not run tally %s", sh, completeName)
		}
		for _, bad := range []string{"compgen -W", "eval", "--generate-bash-completion"} {
			if strings.Contains(script, bad) {
				t.Errorf("the %s script uses %s", sh, bad)
			}
		}
	}
}
