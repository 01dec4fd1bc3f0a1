package cli

import (
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

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
// completion request is left as it is: its words are another command
// line's.
func hoistFlags(app *ucli.App, args []string) (out []string, literal int) {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" || args[1] == completeName {
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
