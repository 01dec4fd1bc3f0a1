package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// The README's walk-throughs run as the scripts in testdata/readme, one
// per section, each on a fresh data folder and free loopback ports, with
// tally the test binary itself (TestMain). TestReadmeScriptsMatch keeps
// the README's blocks and the scripts the same commands.

// scriptTally is the tally command of the scripts: cli.Main, with its
// stdout and stderr also appended to the file $TALLY_SCRIPT_TEE names when set, so a
// script can read what a command running in the background has printed
// so far (testscript shows a background command's output only once it
// exits).
func scriptTally() {
	var stdout, stderr io.Writer = os.Stdout, os.Stderr
	if tee := os.Getenv("TALLY_SCRIPT_TEE"); tee != "" {
		f, err := os.OpenFile(tee, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		stdout, stderr = io.MultiWriter(os.Stdout, f), io.MultiWriter(os.Stderr, f)
	}
	code := Main(context.Background(), os.Args, os.Stdin, stdout, stderr)
	os.Exit(code)
}

func TestReadmeWalkthroughs(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/readme",
		Setup: func(env *testscript.Env) error {
			api, relay, err := twoFreePorts()
			if err != nil {
				return err
			}
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("DEMO", filepath.Join(env.WorkDir, "tally-demo"))
			env.Setenv("API_ADDR", api)
			env.Setenv("RELAY_ADDR", relay)
			env.Setenv("TALLY_API_URL", "http://"+api)
			env.Setenv("TALLY_RELAY_URL", "http://"+relay)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"grab":  cmdGrab,
			"await": cmdAwait,
			"ready": cmdReady,
		},
	})
}

// twoFreePorts returns two loopback addresses that were free a moment
// ago (held together, so they differ).
func twoFreePorts() (string, string, error) {
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", err
	}
	defer a.Close()
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", err
	}
	defer b.Close()
	return a.Addr().String(), b.Addr().String(), nil
}

// cmdGrab is `grab NAME REGEXP`: it sets $NAME to the first group of
// REGEXP's first match in the last command's stdout (its stderr with
// -stderr), and fails when nothing matches.
func cmdGrab(ts *testscript.TestScript, neg bool, args []string) {
	from := "stdout"
	if len(args) > 0 && args[0] == "-stderr" {
		from, args = "stderr", args[1:]
	}
	if neg || len(args) != 2 {
		ts.Fatalf("usage: grab [-stderr] NAME REGEXP")
	}
	re := regexp.MustCompile(args[1])
	m := re.FindStringSubmatch(ts.ReadFile(from))
	if len(m) < 2 {
		ts.Fatalf("no match for %q in %s", args[1], from)
	}
	ts.Setenv(args[0], m[1])
}

// cmdAwait is `await FILE NAME REGEXP`: it waits (up to a minute) until
// FILE, which a command in the background writes, matches REGEXP, then
// sets $NAME to the first group of the match.
func cmdAwait(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: await FILE NAME REGEXP")
	}
	re := regexp.MustCompile(args[2])
	err := waitfor.Poll(time.Minute, func() error {
		b, _ := os.ReadFile(ts.MkAbs(args[0]))
		if m := re.FindSubmatch(b); len(m) >= 2 {
			ts.Setenv(args[1], string(m[1]))
			return nil
		}
		return fmt.Errorf("%s never matched %q; it holds %q", args[0], args[2], b)
	})
	if err != nil {
		ts.Fatalf("%v", err)
	}
}

// cmdReady is `ready`: it waits (up to a minute) until the directory at
// $TALLY_API_URL and the relay at $TALLY_RELAY_URL answer /health.
func cmdReady(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: ready")
	}
	for _, base := range []string{ts.Getenv("TALLY_API_URL"), ts.Getenv("TALLY_RELAY_URL")} {
		err := waitfor.Poll(time.Minute, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/health", nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			cancel()
			if err == nil && resp.StatusCode == http.StatusOK {
				return nil
			}
			return fmt.Errorf("%s/health never answered 200: %v", base, err)
		})
		if err != nil {
			ts.Fatalf("%v", err)
		}
	}
}

// readmeScripts names the README sections whose shell blocks run as a
// script of testdata/readme (the section runs from its heading to the next
// heading of its level or above).
var readmeScripts = []struct{ section, script string }{
	{"Two seats in a room", "two-seats.txtar"},
	{"Rooms while their owner is away", "away.txtar"},
	{"A second home", "second-home.txtar"},
	{"Signup and storage budgets", "closed-signup.txtar"},
}

// TestReadmeScriptsMatch checks that every command of those sections'
// shell blocks is a command of its script, in the README's order, so the
// README says what CI runs. The rule, word by word:
//
//   - the README's comments (from a # that starts a word) are left out, and
//     so is a final `> FILE` (the script saves stdout with cp);
//   - only the script's lines that run tally count, and there other lines
//     may come between the README's (the plumbing and the checks);
//   - in the script, $DEMO stands for /tmp/tally-demo, and a final & or
//     &name& (in the background, as in a terminal of its own) and the
//     pairs --api-addr $API_ADDR, --relay-addr $RELAY_ADDR and
//     --api-url $TALLY_API_URL (free ports instead of the defaults) are
//     left out;
//   - a script word that is one variable alone ($INVITE) stands for the
//     value an earlier command printed, which the README shows as an
//     example or a placeholder (skt_inv_…, ACCOUNT_ID).
func TestReadmeScriptsMatch(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, rs := range readmeScripts {
		seen[rs.script] = true
		cmds := readmeSectionCommands(string(readme), rs.section)
		if len(cmds) == 0 {
			t.Errorf("README section %q has no shell commands", rs.section)
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata/readme", rs.script))
		if err != nil {
			t.Fatal(err)
		}
		lines := scriptTallyLines(string(b))
		j := 0
		for _, cmd := range cmds {
			for j < len(lines) && !sameCommand(cmd, lines[j]) {
				j++
			}
			if j == len(lines) {
				t.Errorf("README %q: %q is not in %s (in this order)", rs.section, strings.Join(cmd, " "), rs.script)
				break
			}
			j++
		}
	}
	files, _ := filepath.Glob("testdata/readme/*.txtar")
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s runs no README section (add it to readmeScripts)", f)
		}
	}
}

var headingRE = regexp.MustCompile(`^(#+) (.*)$`)

// readmeSectionCommands returns the commands of the shell blocks of the
// section headed title, each as its words.
func readmeSectionCommands(readme, title string) [][]string {
	var cmds [][]string
	level, inBlock := 0, false
	for line := range strings.Lines(readme) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock && line == "```sh"
			continue
		}
		if inBlock {
			if level > 0 {
				if words := shellWords(line, true); len(words) > 0 {
					if n := len(words); n > 2 && words[n-2] == ">" {
						words = words[:n-2]
					}
					cmds = append(cmds, words)
				}
			}
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			switch {
			case m[2] == title:
				level = len(m[1])
			case level > 0 && len(m[1]) <= level:
				return cmds
			}
		}
	}
	return cmds
}

var loneVarRE = regexp.MustCompile(`^\$[A-Za-z_][A-Za-z0-9_]*$`)

// scriptTallyLines returns the script's tally commands, as words, with
// the plumbing left out.
func scriptTallyLines(script string) [][]string {
	var out [][]string
	for line := range strings.Lines(script) {
		if strings.HasPrefix(line, "-- ") {
			break // the files of the archive
		}
		words := shellWords(strings.TrimSpace(line), false)
		if len(words) > 0 && words[0] == "exec" {
			words = words[1:]
		}
		if len(words) == 0 || words[0] != "tally" {
			continue
		}
		if last := words[len(words)-1]; last == "&" || strings.HasPrefix(last, "&") && strings.HasSuffix(last, "&") {
			words = words[:len(words)-1]
		}
		var kept []string
		for i := 0; i < len(words); i++ {
			if i+1 < len(words) && (words[i] == "--api-addr" && words[i+1] == "$API_ADDR" ||
				words[i] == "--relay-addr" && words[i+1] == "$RELAY_ADDR" ||
				words[i] == "--api-url" && words[i+1] == "$TALLY_API_URL") {
				i++
				continue
			}
			kept = append(kept, strings.ReplaceAll(words[i], "$DEMO", "/tmp/tally-demo"))
		}
		out = append(out, kept)
	}
	return out
}

func sameCommand(readme, script []string) bool {
	if len(readme) != len(script) {
		return false
	}
	for i := range readme {
		if readme[i] != script[i] && !loneVarRE.MatchString(script[i]) {
			return false
		}
	}
	return true
}

// shellWords splits a line into words as a shell does for these simple
// commands: blanks separate words, quotes ('…', and "…" when double is
// set) group them, and a # that starts a word starts a comment.
func shellWords(line string, double bool) []string {
	var words []string
	var word strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || double && r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// TestReadmeEmbedSnippetIsCompiled checks that the README's Go snippet is
// the function of example_test.go that ExampleNewRelay runs, word for
// word, so it compiles with every name defined.
func TestReadmeEmbedSnippetIsCompiled(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) != 1 {
		t.Fatalf("README has %d Go blocks, want the one of Embedding", len(blocks))
	}
	example, err := os.ReadFile("../example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	snippet := string(blocks[0][1])
	if !strings.HasPrefix(snippet, "func ") || !strings.Contains(string(example), "\n"+snippet) {
		t.Fatalf("the README's Go block is not a function of example_test.go as written:\n%s", snippet)
	}
	if !strings.Contains(string(example), "func ExampleNewRelay()") {
		t.Fatal("example_test.go has no ExampleNewRelay")
	}
}
