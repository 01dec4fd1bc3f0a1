// Package termtext renders text that came from another party (a room
// member, a server) for a terminal, so that the terminal shows it and never
// acts on it.
//
// A terminal obeys some bytes instead of showing them: ESC starts
// sequences that colour, move the cursor, clear the screen, set the window
// title or answer back; BEL rings; CR and BS move back over what was
// written; C1 controls (U+0080–U+009F) are ESC sequences in one rune on
// some terminals; the bidirectional controls reorder the text around them,
// so that what is read differs from what was sent; a newline starts a line
// that can pass for another message or for the reader's own. Every one of
// them is shown escaped instead, in a form that cannot be mistaken for the
// text itself:
//
//   - a C0 control, DEL, or a byte that is not UTF-8: \xHH (\x1b, \x07, \xff)
//   - a C1 control, a bidirectional control, or U+2028/U+2029: \uHHHH
//     (\u009b, \u202e)
//   - in [Line], newline and tab: \n and \t
//   - a backslash the reader could take for the start of one of these
//     escapes (one followed by x, u, n, t, a backslash, or an escaped
//     character): \\
//
// Every other backslash, and all other text, is shown as it is, so a
// rendering is the text itself unless the text holds one of these. The
// escapes read back to exactly the text ([Line] is one to one), which is
// what makes them unambiguous.
//
// [Line] is for fields of one line (names, identities, channel names,
// error text); [Block] is for a message, whose lines each begin with the
// indent of its header. JSON output never goes through this package:
// encoding/json escapes the exact text on its own.
package termtext

import (
	"strings"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// Line renders s as one line: every newline and tab is escaped too.
func Line(s string) string { return render(s, false, "") }

// Block renders s over as many lines as it has: each newline in s ends a
// line and the next begins with indent, so that no line s makes starts
// where a header starts. Tabs are kept. indent is written as given: it is
// the caller's, not the sender's.
func Block(s, indent string) string { return render(s, true, indent) }

func render(s string, block bool, indent string) string {
	if plain(s, block) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n' && block:
				b.WriteByte('\n')
				b.WriteString(indent)
			case c == '\t' && block:
				b.WriteByte('\t')
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20 || c == 0x7f:
				b.WriteString(`\x`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			case c == '\\' && beforeEscape(s[i+1:], block):
				b.WriteString(`\\`)
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		case special(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[r>>shift&0xf])
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// plain reports whether s renders as itself (in a Block, a newline never
// does: the indent follows it).
func plain(s string, block bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '\n' || escaped(c, block) || c == '\\' && beforeEscape(s[i+1:], block) {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || special(r) {
			return false
		}
		i += n
	}
	return true
}

// escaped reports whether the ASCII byte c is shown escaped.
func escaped(c byte, block bool) bool {
	if block && (c == '\n' || c == '\t') {
		return false
	}
	return c < 0x20 || c == 0x7f
}

// beforeEscape reports whether a backslash followed by rest would read as
// the start of an escape: rest begins with a letter that names one, with
// a backslash, or with something shown escaped (whose rendering begins
// with a backslash).
func beforeEscape(rest string, block bool) bool {
	if rest == "" {
		return false
	}
	switch c := rest[0]; {
	case c == 'x' || c == 'u' || c == 'n' || c == 't' || c == '\\':
		return true
	case c < utf8.RuneSelf:
		return escaped(c, block)
	}
	r, n := utf8.DecodeRuneInString(rest)
	return r == utf8.RuneError && n == 1 || special(r)
}

// special reports whether the non-ASCII rune r is shown escaped: a C1
// control, a bidirectional control (the embeddings, overrides and
// isolates U+202A–U+202E and U+2066–U+2069, and the marks U+061C,
// U+200E, U+200F), or the line and paragraph separators, which some
// terminals and viewers break lines at.
func special(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f,
		r == 0x061c, r == 0x200e, r == 0x200f,
		r >= 0x2028 && r <= 0x202e,
		r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
