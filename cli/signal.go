package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Command runs tally as a process: standard streams, SIGINT and SIGTERM
// cancel the command. It returns the exit code.
func Command(args []string) int {
	ctx, stop := signalContext()
	defer stop()
	return Main(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}
