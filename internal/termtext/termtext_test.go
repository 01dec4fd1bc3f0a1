package termtext

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"hello, world", "hello, world"},
		{"héllo 世界 🙂 \ufffd", "héllo 世界 🙂 \ufffd"},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"bell\a", `bell\x07`},
		{"a\nb\tc\rd\x00e\x7f", `a\nb\tc\x0dd\x00e\x7f`},
		{"c1 \u0085 \u009b", `c1 \u0085 \u009b`},
		{"\u202ecba\u202c \u2066x\u2069 \u200e\u200f\u061c", `\u202ecba\u202c \u2066x\u2069 \u200e\u200f\u061c`},
		{"ls\u2028ps\u2029", `ls\u2028ps\u2029`},
		{"bad \xff\xc3 utf-8", `bad \xff\xc3 utf-8`},
		// A backslash is doubled only where it would start an escape.
		{`C:\Users\me`, `C:\Users\me`},
		{`a literal \x1b`, `a literal \\x1b`},
		{`\u202e`, `\\u202e`},
		{`\n and \t`, `\\n and \\t`},
		{`\\`, `\\\`},
		{"\\\x1b", `\\\x1b`},
		{"\\\xff", `\\\xff`},
		{"\\\n", `\\\n`},
		{`end\`, `end\`},
	} {
		if got := Line(c.in); got != c.want {
			t.Errorf("Line(%q) = %s, want %s", c.in, got, c.want)
		}
		if got := unescape(Line(c.in)); got != c.in {
			t.Errorf("Line(%q) reads back as %q", c.in, got)
		}
	}
}

func TestBlock(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"one line", "one line"},
		{"a\nb", "a\n  | b"},
		{"a\n[room] you: fake\n", "a\n  | [room] you: fake\n  | "},
		{"tab\tkept", "tab\tkept"},
		{"\x1b[2J\r\nnext", "\\x1b[2J\\x0d\n  | next"},
		{"\\\nx", "\\\n  | x"},
		{"\\\tx", "\\\tx"},
		{`\x`, `\\x`},
	} {
		if got := Block(c.in, "  | "); got != c.want {
			t.Errorf("Block(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// unescape reads a rendering of Line back to its text: the reader's view
// of the escapes, which must name exactly one text.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '\\':
			b.WriteByte('\\')
			i++
		case 'n':
			b.WriteByte('\n')
			i++
		case 't':
			b.WriteByte('\t')
			i++
		case 'x':
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				panic("bad \\x escape in " + strconv.Quote(s))
			}
			b.WriteByte(byte(v))
			i += 3
		case 'u':
			v, err := strconv.ParseUint(s[i+2:i+6], 16, 32)
			if err != nil {
				panic("bad \\u escape in " + strconv.Quote(s))
			}
			b.WriteRune(rune(v))
			i += 5
		default:
			b.WriteByte('\\')
		}
	}
	return b.String()
}

// obeyed returns the first thing in out a terminal would act on, given
// the controls allowed through.
func obeyed(out, allowed string) (string, bool) {
	if !utf8.ValidString(out) {
		return "invalid UTF-8", true
	}
	for _, r := range out {
		if r < 0x20 && !strings.ContainsRune(allowed, r) || r == 0x7f || r >= 0x80 && special(r) {
			return string(r), true
		}
	}
	return "", false
}

// FuzzRender checks, for any text, that neither rendering lets through
// anything a terminal acts on, that a Line is one line and reads back to
// the text, that a Block keeps exactly the text's newlines, each followed
// by the indent, and that text with nothing to escape is shown as it is.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"", "plain text", "\x1b[31mred\x1b[0m\a", "\x1b]0;title\x07", "\u202egnp.exe", "\u2066\u2069\u200e",
		"\u0085\u009b\u009c", "a\nb\r\nc", "tab\there", "\x00\x7f", "\xff\xfe", "\xc3", "\xed\xa0\x80",
		`\`, `\\`, `\x1b`, `\u202e`, "\\\x1b", "\\\n", "\\\u202e", "\\\xff", "世界\n[ops] you: hi", "\u2028\u2029",
	} {
		f.Add(s)
	}
	const indent = "    | "
	f.Fuzz(func(t *testing.T, s string) {
		line := Line(s)
		if r, bad := obeyed(line, ""); bad {
			t.Fatalf("Line(%q) = %q lets %q through", s, line, r)
		}
		if back := unescape(line); back != s {
			t.Fatalf("Line(%q) = %q reads back as %q", s, line, back)
		}
		block := Block(s, indent)
		if r, bad := obeyed(block, "\n\t"); bad {
			t.Fatalf("Block(%q) = %q lets %q through", s, block, r)
		}
		if strings.Count(block, "\n") != strings.Count(s, "\n") || strings.Count(block, "\n"+indent) != strings.Count(s, "\n") {
			t.Fatalf("Block(%q) = %q does not indent each of its lines", s, block)
		}
		for i, part := range strings.Split(block, "\n"+indent) {
			if strings.Contains(part, "\n") {
				t.Fatalf("Block(%q) = %q: line %d is not indented", s, block, i)
			}
		}
		if hasSpecial(s) {
			return
		}
		if !strings.ContainsAny(s, "\n\t") && line != s {
			t.Fatalf("Line(%q) = %q, want the text itself", s, line)
		}
		if want := strings.ReplaceAll(s, "\n", "\n"+indent); block != want {
			t.Fatalf("Block(%q) = %q, want %q", s, block, want)
		}
	})
}

// hasSpecial reports, independently of the renderer, whether s holds
// anything it must change: invalid UTF-8, a control other than newline
// and tab, DEL, a C1 or bidirectional control, a line or paragraph
// separator, or a backslash.
func hasSpecial(s string) bool {
	if !utf8.ValidString(s) || strings.Contains(s, `\`) {
		return true
	}
	for _, r := range s {
		switch {
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x2028 && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return true
		}
	}
	return false
}
