package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"

	"github.com/skytale-oss/skytale/internal/termtext"
	"github.com/skytale-oss/skytale/seat"
)

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
