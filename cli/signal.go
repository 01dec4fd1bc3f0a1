package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext is parent, also cancelled by SIGINT or SIGTERM with an
// [errSignal] naming the signal as its cause, until its stop function is
// called.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
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
