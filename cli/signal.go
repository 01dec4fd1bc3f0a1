package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext is cancelled by SIGINT or SIGTERM, with an [errSignal]
// naming the signal as its cause.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			sig, _ := s.(syscall.Signal)
			cancel(errSignal{sig})
			// A second signal is the default action again: a command
			// stuck in its shutdown can still be stopped.
			signal.Stop(ch)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	}
}

// Command runs tally as a process: standard streams, SIGINT and SIGTERM
// cancel the command. It returns the exit code.
func Command(args []string) int {
	ctx, stop := signalContext()
	defer stop()
	return Main(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}
