// Package cli is the tally command tree. Each command is a thin call into
// the library. [Main] is its one entry: cli/tally's main calls it with the
// process's arguments and streams, and the tests call it (or run, which
// returns the error instead of printing it) in-process.
package cli

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"

	ucli "github.com/urfave/cli/v2"
)

// Version is the tally version string when the build carries no module
// version (a build from a working tree).
var Version = "0.1.0-dev"

// Main runs the tally command line args (args[0] is the program name)
// with the given standard streams, prints its error (one line, or one
// JSON object with --json) and returns the exit code `tally help` lists.
// The command stops when ctx is done or, while Main runs, at SIGINT or
// SIGTERM: a command stopped by ctx or Ctrl-C exits 130, whatever the
// command; one that stops cleanly on SIGTERM, as serve does, exits 0.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signalContext(ctx)
	defer stop()
	err := run(ctx, args, stdin, stdout, stderr)
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

// run executes the tally command line args (args[0] is the program name)
// with the given standard streams, and returns when the command is done or
// ctx is cancelled, with the command's error unprinted.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	app := newApp(stdin, stdout, stderr)
	args, literal := hoistFlags(app, args)
	app.Metadata = map[string]any{literalKey: literal}
	parsing.Lock()
	var once sync.Once
	release := func() { once.Do(parsing.Unlock) }
	defer release()
	releaseAtLeaves(app.Commands, release)
	return app.RunContext(ctx, args)
}

// parsing is held while a command line is parsed. urfave/cli gives every
// command its package-level --help flag (cli.HelpFlag) and writes to it in
// each parse, so two command lines parsed at once in one process (Main
// called from two goroutines) would race; the commands' actions still run
// side by side, since the lock is let go before each one.
var parsing sync.Mutex

// releaseAtLeaves makes every command without subcommands call release
// before its own Before and Action: by then its command line is parsed.
func releaseAtLeaves(cmds []*ucli.Command, release func()) {
	for _, c := range cmds {
		if len(c.Subcommands) > 0 {
			releaseAtLeaves(c.Subcommands, release)
			continue
		}
		before := c.Before
		c.Before = func(cc *ucli.Context) error {
			release()
			if before != nil {
				return before(cc)
			}
			return nil
		}
	}
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
	app.Commands = append(app.Commands, helpCommand(), completeCommand())
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
