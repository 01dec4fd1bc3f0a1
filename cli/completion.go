package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/seat"
)

// completionCommand is `tally completion`.
func completionCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (commands, flags and this home's room names)",
		ArgsUsage: "bash|zsh|fish",
		Description: "Load it in your shell's start-up file, for example:\n" +
			"  bash: source <(tally completion bash)\n" +
			"  zsh:  source <(tally completion zsh)\n" +
			"  fish: tally completion fish | source\n" +
			"The scripts ask tally itself what may come next, so they follow the command tree;\n" +
			"room names come from the home's own database, without the network.",
		Action: runCompletion,
	}
}

// completionScripts are the scripts of `tally completion`, by shell.
var completionScripts = map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}

// runCompletion runs `tally completion SHELL`.
func runCompletion(c *ucli.Context) error {
	if c.NArg() != 1 {
		return badUsage("want a shell", "tally completion bash|zsh|fish")
	}
	sh := c.Args().First()
	script, ok := completionScripts[sh]
	if !ok {
		return badUsage(fmt.Sprintf("no completion for the shell %q", sh), "tally completion bash|zsh|fish")
	}
	io.WriteString(c.App.Writer, script)
	return nil
}

// completeName is the hidden command the completion scripts run:
// `tally __complete WORD…`, with the words of the command line after
// tally up to the one being typed (the last, "" for a new word), prints
// the words that may stand in the last one's place, one a line. It
// prints nothing where a file or a value of the user's own comes next,
// and the scripts then complete file names.
const completeName = "__complete"

// completeCommand is the hidden `tally __complete`. Its arguments are
// the words of another command line, never flags of its own.
func completeCommand() *ucli.Command {
	return &ucli.Command{
		Name:            completeName,
		Hidden:          true,
		SkipFlagParsing: true,
		HideHelp:        true, // `help` among the words is a word to complete
		HideHelpCommand: true,
		Action: func(c *ucli.Context) error {
			return complete(c.Context, c.App, c.Args().Slice(), c.App.Writer)
		},
	}
}

// roomArgs are the commands whose arguments name a room of this home,
// by the argument's position (-1: every argument). TestCompletionRoomArgs
// keeps each a command of the tree.
var roomArgs = map[string]int{
	"room invite": 0, "room admit": 0, "room members": 0, "room leave": 0,
	"room add": 0, "room remove": 0, "room admins add": 0, "room admins remove": 0,
	"msg": 0, "history": 0, "watch": -1,
}

// completion is where a command line stands for its completion: the
// command its words reached, and what they said on the way.
type completion struct {
	root  []*ucli.Command // the commands of the app
	flags []ucli.Flag     // the flags of the command reached
	cmds  []*ucli.Command // its subcommands
	path  []string        // the names of the commands reached, tally's own left out
	args  []string        // the arguments typed after it
	value string          // the flag whose value the last word is, or ""
	text  bool            // the last word comes after `--`: text
	home  string          // --home, if given
}

// complete writes the candidates for the last of words given the ones
// before it (see completeName). Every candidate is one word made of
// letters, digits and . _ / - = @ : + , only (a room name saved in the
// home that is not, whoever chose it, is never offered), so no shell that
// inserts it on the command line can read it as anything else.
func complete(ctx context.Context, app *ucli.App, words []string, w io.Writer) error {
	if len(words) == 0 {
		words = []string{""}
	}
	typed, cur := words[:len(words)-1], words[len(words)-1]
	at := walkWords(app, typed)
	for _, c := range at.candidates(ctx, cur) {
		if strings.HasPrefix(c, cur) && plainWord(c) {
			showf(w, "%s\n", c)
		}
	}
	return nil
}

// walkWords follows typed through the command tree as the parser would
// (see hoistFlags): flags wherever they stand, a command name before any
// argument, text after `--`.
func walkWords(app *ucli.App, typed []string) *completion {
	at := &completion{root: app.Commands, flags: app.Flags, cmds: app.Commands}
	for i := 0; i < len(typed); i++ {
		a := typed[i]
		switch {
		case at.text:
			at.args = append(at.args, a)
		case a == "--":
			at.text = true
		case strings.HasPrefix(a, "-") && a != "-":
			name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !hasVal && takesValue(at.flags, a) {
				// bash splits --flag=value at the "=" into three words.
				if i+1 < len(typed) && typed[i+1] == "=" {
					i++
				}
				if i+1 == len(typed) {
					at.value = name
					continue
				}
				i++
				val = typed[i]
			}
			if name == "home" {
				at.home = val
			}
		case len(at.args) == 0 && findCommand(at.cmds, a) != nil:
			c := findCommand(at.cmds, a)
			at.flags, at.cmds, at.path = c.Flags, c.Subcommands, append(at.path, c.Name)
		default:
			at.args = append(at.args, a)
		}
	}
	return at
}

// candidates are the words that may come where cur is typed.
func (at *completion) candidates(ctx context.Context, cur string) []string {
	switch {
	case at.text:
		return nil
	case at.value != "":
		return flagValues[at.value]
	case strings.HasPrefix(cur, "-"):
		if strings.Contains(cur, "=") {
			return nil
		}
		// Every command takes --help, which urfave gives it as it runs.
		return append(slices.DeleteFunc(flagNames(at.flags), func(n string) bool { return n == "--help" || n == "-h" }), "--help", "-h")
	case len(at.cmds) > 0 && len(at.args) == 0:
		return commandNames(at.cmds)
	}
	path := strings.Join(at.path, " ")
	switch {
	case path == "help":
		return helpNames(at.root, at.args)
	case path == "completion" && len(at.args) == 0:
		return slices.Sorted(func(yield func(string) bool) {
			for sh := range completionScripts {
				if !yield(sh) {
					return
				}
			}
		})
	case (path == "config set" || path == "config get") && len(at.args) == 0:
		return settingKeys()
	}
	if pos, ok := roomArgs[path]; ok && (pos < 0 || pos == len(at.args)) {
		return homeRooms(ctx, at.home)
	}
	return nil
}

// flagValues are the values of the flags that take one of a few words.
var flagValues = map[string][]string{"suite": {"pq", "classic"}}

// flagNames are the names of flags as they are typed: --name, or -n for
// a one-letter alias.
func flagNames(flags []ucli.Flag) []string {
	var out []string
	for _, f := range flags {
		for _, n := range f.Names() {
			name := "--" + n
			if len(n) == 1 {
				name = "-" + n
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// commandNames are the names of the visible commands of cmds.
func commandNames(cmds []*ucli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c.Name)
		}
	}
	return out
}

// helpNames are the command names that may follow `tally help` and the
// commands named after it.
func helpNames(cmds []*ucli.Command, named []string) []string {
	for _, n := range named {
		c := findCommand(cmds, n)
		if c == nil {
			return nil
		}
		cmds = c.Subcommands
	}
	return slices.DeleteFunc(commandNames(cmds), func(n string) bool { return n == "help" })
}

// homeRooms are the names of the rooms of the home (--home, $TALLY_HOME
// or ~/.tally), as they are typed: bare for the rooms of the seat's org.
// They come from the home's database alone, with no server asked; a
// folder that holds no seat yet gives none, and is left as it is.
func homeRooms(ctx context.Context, flag string) []string {
	home, err := homeFolder(flag)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(home, "seat.db")); err != nil {
		return nil
	}
	s, err := seat.Open(ctx, seat.Config{Home: home})
	if err != nil {
		return nil
	}
	defer s.Close(context.Background())
	rooms, err := s.Rooms(ctx)
	if err != nil {
		return nil
	}
	org, _ := s.Org(ctx)
	var out []string
	for _, r := range rooms {
		if channel.Valid(r.Channel) != nil {
			continue
		}
		name := r.Channel
		if n, ok := strings.CutPrefix(name, org+"/rooms/"); ok && org != "" {
			name = n
		}
		out = append(out, name)
	}
	return out
}

// plainWord reports whether s is a word no shell reads as more than
// itself: not empty, and only letters, digits and . _ / - = @ : + ,.
func plainWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._/-=@:+,", r)) {
			return false
		}
	}
	return true
}

// The scripts hand the words of the command line to `tally __complete`
// and take what it prints as data, one candidate a line: nothing of it is
// evaluated by the shell (no compgen -W, no eval), and each shell quotes
// what it inserts. When tally offers nothing, they complete file names.

const bashCompletion = `# bash completion for tally
_tally_complete() {
	local line
	COMPREPLY=()
	while IFS= read -r line; do
		COMPREPLY+=("$line")
	done < <("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
}
complete -o bashdefault -o default -F _tally_complete tally
`

const zshCompletion = `#compdef tally
# zsh completion for tally
_tally() {
	local -a candidates
	candidates=("${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	candidates=("${(@)candidates:#}")
	if (( ${#candidates} )); then
		compadd -- "${(@)candidates}"
	else
		_files
	fi
}
if [[ "$(basename -- ${(%):-%x})" != "_tally" ]]; then
	compdef _tally tally
fi
`

const fishCompletion = `# fish completion for tally
function __tally_complete
	set -l tokens (commandline -opc)
	set -l current (commandline -ct)
	set -l candidates (command $tokens[1] __complete $tokens[2..-1] $current 2>/dev/null)
	if test (count $candidates) -gt 0
		printf '%s\n' $candidates
	else
		__fish_complete_path $current
	end
end
complete -c tally -f -a '(__tally_complete)'
`
