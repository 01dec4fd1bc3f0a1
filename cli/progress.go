package cli

import (
	"fmt"
	"io"
)

// Progress and colour go to a terminal only. A pipe or a log file gets
// plain lines: no carriage returns, no escape sequences.
//
// Long work reports progress as one status line rewritten in place on a
// terminal. The seat reports how far it got (a sequence number reached, a
// wait going on) but not how far there is to go, so a bar would have no
// length to fill; a status line says all that is known.

// testOnlyStderrTerminal makes the command tree treat its error stream as
// a terminal, so tests can see what a terminal gets.
var testOnlyStderrTerminal bool

// onTerminal reports whether w is a terminal.
func onTerminal(w io.Writer) bool {
	return testOnlyStderrTerminal || isTerminal(w)
}

// colourOK reports whether w takes colour: a terminal, with NO_COLOR unset
// (https://no-color.org) and TERM not "dumb".
func colourOK(w io.Writer) bool {
	return onTerminal(w) && getenv(nil, "NO_COLOR") == "" && getenv(nil, "TERM") != "dumb"
}

const (
	colourRed = "31"
	colourDim = "2"
)

// paint wraps s in the SGR colour code when w takes colour.
func paint(w io.Writer, code, s string) string {
	if !colourOK(w) {
		return s
	}
	return "\033[" + code + "m" + s + "\033[0m"
}

// status is a progress line on w.
type status struct {
	w     io.Writer
	tty   bool
	shown bool   // a line is on the terminal, not yet ended
	last  string // the last line written to a pipe
}

func newStatus(w io.Writer) *status { return &status{w: w, tty: onTerminal(w)} }

// update shows a new state: rewritten in place on a terminal, a new line
// (when the text changed) elsewhere.
func (s *status) update(format string, args ...any) {
	line := fmt.Sprintf(format, lineArgs(args)...)
	if s.tty {
		fmt.Fprintf(s.w, "\r%s\033[K", line)
		s.shown = true
		return
	}
	if line != s.last {
		fmt.Fprintln(s.w, line)
		s.last = line
	}
}

// clear removes the terminal's status line, so what comes next (a result,
// an error) starts on a clean line.
func (s *status) clear() {
	if s.tty && s.shown {
		fmt.Fprint(s.w, "\r\033[K")
		s.shown = false
	}
}
