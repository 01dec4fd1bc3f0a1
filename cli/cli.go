// Package cli is the tally command tree. Each command is a thin call into
// the library; the tree runs in-process through [Run], which is how the
// tests drive it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"
)

// Version is the tally version string.
var Version = "0.1.0-dev"

// Run executes the tally command line args (args[0] is the program name)
// with the given standard streams, and returns when the command is done or
// ctx is cancelled.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	app := &ucli.App{
		Name:                 "tally",
		Usage:                "end-to-end encrypted logs and rooms over a blind directory and relay",
		Version:              Version,
		Reader:               stdin,
		Writer:               stdout,
		ErrWriter:            stderr,
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		ExitErrHandler:       func(*ucli.Context, error) {}, // Run returns errors; main decides the exit code
		Flags:                globalFlags(),
		Commands:             append(append(seatCommands(), roomCommands()...), serveCommand()),
		Action:               helpOrUnknown("tally"),
		OnUsageError:         usageErrorLine,
	}
	oneLineErrors(app.Commands, "tally")
	return app.RunContext(ctx, args)
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
		if len(c.Subcommands) > 0 && c.Action == nil {
			c.Action = helpOrUnknown(name)
		}
		oneLineErrors(c.Subcommands, name)
	}
}

func usageErrorLine(c *ucli.Context, err error, _ bool) error {
	return &usageError{err.Error(), "see `" + c.Command.HelpName + " --help`; the global flags --home, --api-url, --relay-url and --json go before the command"}
}

// helpOrUnknown shows the help of a command group run without a
// subcommand, and refuses an unknown one.
func helpOrUnknown(name string) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		if c.NArg() == 0 {
			if name == "tally" {
				return ucli.ShowAppHelp(c)
			}
			return ucli.ShowSubcommandHelp(c)
		}
		return &usageError{fmt.Sprintf("unknown command %q", name+" "+c.Args().First()), "see `" + name + " --help`"}
	}
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

// Main runs tally and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := Run(ctx, args, stdin, stdout, stderr)
	if err == nil || errors.Is(err, context.Canceled) {
		return 0
	}
	fmt.Fprintf(stderr, "tally: %v\n", err)
	return 1
}
