package cli

import (
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

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
