// Package cli is the tally command tree. Each command is a thin call into
// the library; the tree runs in-process through [Run], which is how the
// tests drive it.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"

	ucli "github.com/urfave/cli/v2"

	"github.com/skytale-oss/skytale/internal/termtext"
	"github.com/skytale-oss/skytale/seat"
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
			if slices.ContainsFunc(pending, isHelpFlag) {
				return append(out, "--help"), 0
			}
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
	if slices.ContainsFunc(pending, isHelpFlag) {
		// Help is asked for: the command's own, whatever else was typed.
		return append(out, "--help"), 0
	}
	if len(pos) == 0 {
		return append(out, pending...), 0
	}
	return append(append(append(out, pending...), "--"), pos...), len(pos)
}

// isHelpFlag reports whether a asks for help.
func isHelpFlag(a string) bool {
	switch a {
	case "-h", "--help", "-help", "--help=true", "-help=true", "-h=true":
		return true
	}
	return false
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
	// Our help command takes the place of urfave's, which would also have
	// given the app its --help.
	// A flag of its own, not urfave's shared HelpFlag: flags keep state
	// as they parse, and tally's apps may run side by side.
	app.Flags = append(app.Flags, &ucli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help", DisableDefaultText: true})
	app.CustomAppHelpTemplate = ucli.AppHelpTemplate + "\n" + exitCodes
	withGlobalFlags(app.Commands)
	nameSubcommands(app.Commands)
	oneLineErrors(app.Commands, "tally")
	return app
}

// nameSubcommands makes the usage line of every command group say that a
// command follows (tally room COMMAND …).
func nameSubcommands(cmds []*ucli.Command) {
	for _, c := range cmds {
		if len(c.Subcommands) > 0 && c.ArgsUsage == "" {
			c.ArgsUsage = "COMMAND [arguments…]"
		}
		nameSubcommands(c.Subcommands)
	}
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
			return badUsage("unknown flag --"+typed, "did you mean --"+near+"? see `"+name+" --help`")
		}
		return badUsage("unknown flag --"+typed, "see `"+name+" --help`")
	}
	return badUsage(err.Error(), "see `"+name+" --help`")
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
			return badUsage(msg, "did you mean `"+name+" "+near+"`? see `"+name+" --help`")
		}
		return badUsage(msg, "see `"+name+" --help`")
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

// exitError gives err an exit code other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badUsage is a usageError of a command line that cannot be run as
// written (exit 2).
func badUsage(msg, hint string) error {
	return &exitError{exitUsage, &usageError{msg, hint}}
}

// notFound is a usageError of something named that does not exist (exit 3).
func notFound(msg, hint string) error {
	return &exitError{exitNotFound, &usageError{msg, hint}}
}

// notAllowed is a usageError of a refusal: a credential refused, a
// membership or role missing, a token invalid, a device revoked (exit 4).
func notAllowed(msg, hint string) error {
	return &exitError{exitNotAllowed, &usageError{msg, hint}}
}

// exitCode is the exit code of a command that failed with err (see
// exitCodes).
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ae *seat.APIError
	switch {
	case errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden):
		return exitNotAllowed
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		return exitNotFound
	case errors.Is(err, seat.ErrNotMember), errors.Is(err, seat.ErrRemovedRoom):
		return exitNotAllowed
	case errors.Is(err, seat.ErrNoRoom):
		return exitNotFound
	}
	return 1
}

// errorCode is the "error" of err as --json prints it: the server's code
// when a server refused, else the kind of its exit code.
func errorCode(err error, code int) string {
	var ae *seat.APIError
	if errors.As(err, &ae) && ae.Code != "" {
		return ae.Code
	}
	switch code {
	case exitUsage:
		return "usage"
	case exitNotFound:
		return "not_found"
	case exitNotAllowed:
		return "not_allowed"
	case exitInterrupted, exitTerminated:
		return "interrupted"
	}
	return "error"
}

// exitCodes is what `tally help` says of the exit codes.
const exitCodes = `EXIT CODES:
   0    done
   1    failed (a server or the network refused, or something broke)
   2    usage: the command line cannot be run as written
   3    not found: a room, device, token or file named does not exist
   4    not allowed: a credential refused, not a member, no role for it, revoked
   130  interrupted (Ctrl-C); 143 stopped by SIGTERM while failing
`

// Exit codes besides 0 and 1.
const (
	// exitUsage is the code of a command line that cannot be run.
	exitUsage = 2
	// exitNotFound is the code of a command whose subject does not exist.
	exitNotFound = 3
	// exitNotAllowed is the code of a command refused for its caller.
	exitNotAllowed = 4
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
	asJSON := wantsJSON(args)
	if ctx.Err() != nil {
		var sig errSignal
		if errors.As(context.Cause(ctx), &sig) && sig.sig == syscall.SIGTERM {
			if err == nil || errors.Is(err, context.Canceled) {
				return 0 // a clean stop, as a service manager expects
			}
			printError(stderr, err, exitTerminated, asJSON)
			return exitTerminated
		}
		printError(stderr, err, exitInterrupted, asJSON)
		return exitInterrupted
	}
	if err == nil {
		return 0
	}
	code := exitCode(err)
	printError(stderr, err, code, asJSON)
	return code
}

// wantsJSON reports whether the command line asks for --json (before any
// `--`), so that its error is JSON too.
func wantsJSON(args []string) bool {
	for _, a := range args[min(1, len(args)):] {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}

// printError prints err as one line, unless it says no more than that
// the command was stopped (what was stopped has said so itself); with
// asJSON, as one JSON object {"error": code, "message": text}.
func printError(stderr io.Writer, err error, code int, asJSON bool) {
	if err == nil || errors.Is(err, context.Canceled) && !isUsage(err) {
		return
	}
	msg := strings.TrimSpace(err.Error())
	if asJSON {
		// JSON carries the exact text, escaped.
		b, _ := json.Marshal(struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}{errorCode(err, code), msg})
		stderr.Write(append(b, '\n'))
		return
	}
	// The text may be a server's or a peer's: shown as one line, never obeyed.
	fmt.Fprintf(stderr, "%s %s\n", paint(stderr, colourRed, "tally:"), termtext.Line(msg))
}

func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}
