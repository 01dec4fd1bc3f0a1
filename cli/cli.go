// Package cli is the tally command tree. Each command is a thin call into
// the library; the tree runs in-process through [Run], which is how the
// tests drive it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/termtext"
)

// Version is the tally version string when the build carries no module
// version (a build from a working tree).
var Version = "0.1.0-dev"

// Run executes the tally command line args (args[0] is the program name)
// with the given standard streams, and returns when the command is done or
// ctx is cancelled.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	app := newApp(stdin, stdout, stderr)
	args, literal := hoistFlags(app, args)
	app.Metadata = map[string]any{literalKey: literal}
	return app.RunContext(ctx, args)
}

// literalKey is the app's Metadata key of the index in the command's
// arguments from which they came after the user's `--`.
const literalKey = "literal"

// hoistFlags moves every flag of the command named in args, wherever it
// stands among the command's arguments, before them, and puts `--` between
// the two, so that flags are flags wherever they stand (`tally msg ops
// --json hi` sends "hi") and no argument is ever taken for a flag after
// that. Arguments after the user's own `--` stay arguments whatever they
// start with; literal is the index among the command's arguments from
// which they came after it (their count when there was none). A flag
// unknown to the command stays a flag, for the parser to refuse. A
// completion request is left as it is.
func hoistFlags(app *ucli.App, args []string) (out []string, literal int) {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args, 0
	}
	flags, cmds := app.Flags, app.Commands
	out = []string{args[0]}
	var pending, pos []string
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			literal = len(pos)
			pos = append(pos, rest[i+1:]...)
			return append(append(append(out, pending...), "--"), pos...), literal
		case strings.HasPrefix(a, "-") && a != "-":
			pending = append(pending, a)
			if takesValue(flags, a) && i+1 < len(rest) {
				i++
				pending = append(pending, rest[i])
			}
		case len(pos) == 0 && findCommand(cmds, a) != nil:
			c := findCommand(cmds, a)
			out = append(append(out, pending...), a)
			pending, flags, cmds = nil, c.Flags, c.Subcommands
		default:
			pos = append(pos, a)
		}
	}
	return append(append(append(out, pending...), "--"), pos...), len(pos)
}

// takesValue reports whether the flag a (-name, --name or --name=value)
// is one of flags and takes its value from the next argument.
func takesValue(flags []ucli.Flag, a string) bool {
	name, _, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
	if hasVal {
		return false
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				v, ok := f.(ucli.DocGenerationFlag)
				return ok && v.TakesValue()
			}
		}
	}
	return false
}

// findCommand is the command of cmds named or aliased name, or nil.
func findCommand(cmds []*ucli.Command, name string) *ucli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// literalFrom is the index among c's arguments from which they came after
// the user's `--` (see [hoistFlags]).
func literalFrom(c *ucli.Context) int {
	if n, ok := c.App.Metadata[literalKey].(int); ok {
		return n
	}
	return c.NArg()
}

// newApp builds the command tree.
func newApp(stdin io.Reader, stdout, stderr io.Writer) *ucli.App {
	app := &ucli.App{
		Name:                 "tally",
		Usage:                "end-to-end encrypted logs and rooms over a blind directory and relay",
		Version:              versionString(),
		Reader:               stdin,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		HideHelpCommand:      true,                          // ours below shows a group's subcommands too
		ExitErrHandler:       func(*ucli.Context, error) {}, // Run returns errors; main decides the exit code
		Flags:                globalFlags(),
		Action:               helpOrUnknown("tally"),
		OnUsageError:         usageErrorLine,
	}
	app.Commands = append(append(seatCommands(), roomCommands()...), serveCommand())
	app.Commands = append(app.Commands, infoCommands()...)
	app.Commands = append(app.Commands, helpCommand())
	withGlobalFlags(app.Commands)
	oneLineErrors(app.Commands, "tally")
	return app
}

// withGlobalFlags gives every command of a seat the global flags too, so
// that they work after the command name as well as before it
// (`tally log --json`).
func withGlobalFlags(cmds []*ucli.Command) { addFlags(cmds, true) }

func addFlags(cmds []*ucli.Command, global bool) {
	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		g := global && c.Name != "serve" // serve and its backup have no seat
		if g {
			c.Flags = append(c.Flags, globalFlags()...)
		}
		for _, f := range c.Flags {
			// A switch's help needs no "(default: false)".
			if b, ok := f.(*ucli.BoolFlag); ok && b.DefaultText == "" {
				b.DisableDefaultText = true
			}
		}
		addFlags(c.Subcommands, g)
	}
}

// helpCommand is `tally help [COMMAND…]`: the help of the app, or of the
// command named, as its --help shows it.
func helpCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "help",
		Usage:     "show the commands, or the help of one command",
		ArgsUsage: "[COMMAND…]",
		Action: func(c *ucli.Context) error {
			if c.NArg() == 0 {
				return ucli.ShowAppHelp(c)
			}
			args := append(append([]string{"tally"}, c.Args().Slice()...), "--help")
			return newApp(c.App.Reader, c.App.Writer, c.App.ErrWriter).RunContext(c.Context, args)
		},
	}
}

// oneLineErrors makes every command answer a bad flag, and every command
// group an unknown subcommand, with a one-line reason instead of the help
// text.
func oneLineErrors(cmds []*ucli.Command, parent string) {
	for _, c := range cmds {
		name := parent + " " + c.Name
		if c.OnUsageError == nil {
			c.OnUsageError = usageErrorLine
		}
		if len(c.Subcommands) > 0 {
			// `tally help GROUP` and `tally GROUP help` show the group's help.
			c.HideHelpCommand = true
			if c.Action == nil {
				c.Action = helpOrUnknown(name)
			}
		}
		oneLineErrors(c.Subcommands, name)
	}
}

func usageErrorLine(c *ucli.Context, err error, _ bool) error {
	name := "tally"
	flags := c.App.Flags
	if c.Command != nil && c.Command.HelpName != "" {
		name, flags = c.Command.HelpName, c.Command.Flags
	}
	if typed, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		typed = strings.TrimLeft(typed, "-")
		if near := nearestFlag(flags, typed); near != "" {
			return &usageError{"unknown flag --" + typed, "did you mean --" + near + "? see `" + name + " --help`"}
		}
		return &usageError{"unknown flag --" + typed, "see `" + name + " --help`"}
	}
	return &usageError{err.Error(), "see `" + name + " --help`"}
}

// nearestFlag returns the flag name within two edits of typed, or "".
func nearestFlag(flags []ucli.Flag, typed string) string {
	best, bestD := "", 3
	for _, f := range flags {
		for _, n := range f.Names() {
			if d := editDistance(typed, n); d <= 2 && d < bestD && len(n) > 1 {
				best, bestD = n, d
			}
		}
	}
	return best
}

// helpOrUnknown shows the help of a command group run without a
// subcommand, and refuses an unknown one, naming the closest command when
// one is near.
func helpOrUnknown(name string) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		if c.NArg() == 0 || name != "tally" && c.NArg() == 1 && c.Args().First() == "help" {
			if name == "tally" {
				return ucli.ShowAppHelp(c)
			}
			return ucli.ShowSubcommandHelp(c)
		}
		typed := c.Args().First()
		cmds := c.App.Commands
		if c.Command != nil && name != "tally" {
			cmds = c.Command.Subcommands
		}
		msg := fmt.Sprintf("unknown command %q", name+" "+typed)
		if near := nearestCommand(cmds, typed); near != "" {
			return &usageError{msg, "did you mean `" + name + " " + near + "`? see `" + name + " --help`"}
		}
		return &usageError{msg, "see `" + name + " --help`"}
	}
}

// nearestCommand returns the visible command name within two edits
// (a swap of two neighbours counts as one) of typed, or "".
func nearestCommand(cmds []*ucli.Command, typed string) string {
	best, bestD := "", 3
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		for _, n := range c.Names() {
			limit := 2
			if len(n) <= 3 {
				limit = 1
			}
			if d := editDistance(typed, n); d <= limit && d < bestD {
				best, bestD = n, d
			}
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of neighbours.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// usageError is an error with a hint on what to do next.
type usageError struct {
	msg, hint string
}

func (e *usageError) Error() string {
	if e.hint == "" {
		return e.msg
	}
	return e.msg + ": " + e.hint
}

// Exit codes besides 0 and 1.
const (
	// exitInterrupted is the code of a command stopped by Ctrl-C
	// (SIGINT), the shells' 128+2.
	exitInterrupted = 130
	// exitTerminated is the code of a command that failed as SIGTERM
	// stopped it (128+15). A command that stops cleanly on SIGTERM, as
	// serve does, exits 0.
	exitTerminated = 143
)

// errSignal is the cause of the context of a command stopped by a signal.
type errSignal struct{ sig syscall.Signal }

func (e errSignal) Error() string { return "stopped by " + e.sig.String() }

// Main runs tally and returns the process exit code. A command stopped
// by the cancellation of ctx (Ctrl-C) exits 130, whatever the command.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := Run(ctx, args, stdin, stdout, stderr)
	if ctx.Err() != nil {
		var sig errSignal
		if errors.As(context.Cause(ctx), &sig) && sig.sig == syscall.SIGTERM {
			if err == nil || errors.Is(err, context.Canceled) {
				return 0 // a clean stop, as a service manager expects
			}
			printError(stderr, err)
			return exitTerminated
		}
		printError(stderr, err)
		return exitInterrupted
	}
	if err == nil {
		return 0
	}
	printError(stderr, err)
	return 1
}

// printError prints err as one line, unless it says no more than that
// the command was stopped (what was stopped has said so itself).
func printError(stderr io.Writer, err error) {
	if err == nil || errors.Is(err, context.Canceled) && !isUsage(err) {
		return
	}
	// The text may be a server's or a peer's: shown as one line, never obeyed.
	fmt.Fprintf(stderr, "%s %s\n", paint(stderr, colourRed, "tally:"), termtext.Line(strings.TrimSpace(err.Error())))
}

func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}
