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
	}
	return app.RunContext(ctx, args)
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
