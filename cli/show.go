package cli

import (
	"fmt"
	"io"

	"github.com/skytale-oss/skytale/internal/termtext"
)

// Text that came from another party or a server (messages, names, room
// and channel names, identities, tokens, device labels, error text) is
// shown on the terminal, never obeyed: every line the command tree prints
// for a person goes through showf, env.out, status.update, printMessage
// or printError, which render it with termtext. Their formats are the
// program's own; what fills them may be anyone's. --json output is
// encoded from the exact text and never rendered.

// continuation begins each line of a message after its first, so that no
// line a sender writes passes for a message header or for the reader's
// own line.
const continuation = "    | "

// showf is fmt.Fprintf with every string, error and fmt.Stringer among
// args rendered as one line for a terminal ([termtext.Line]). Its verbs
// for text are %s and %v: %q would escape the rendering a second time.
func showf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, lineArgs(args)...)
}

// lineArgs renders the text among args as single lines; numbers and
// other values go through as they are.
func lineArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch a.(type) {
		case string, error, fmt.Stringer:
			out[i] = termtext.Line(fmt.Sprint(a))
		default:
			out[i] = a
		}
	}
	return out
}
