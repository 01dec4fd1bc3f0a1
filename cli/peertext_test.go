package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/skytale-oss/skytale/skytaletest"
)

// obeyable reports the first byte or rune in out that a terminal acts on
// instead of showing: a control other than newline and tab, ESC, DEL, a
// C1 control or a bidirectional override or isolate; or bytes that are
// not UTF-8, which a terminal may take for any of them.
func obeyable(out string) (string, bool) {
	if !utf8.ValidString(out) {
		return "bytes that are not UTF-8", true
	}
	for _, r := range out {
		switch {
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return string(r), true
		}
	}
	return "", false
}

// TestCLIPeerTextIsShownNotObeyed: a member's messages with escape
// sequences, a bell, bidirectional overrides and a newline followed by a
// line made to look like the reader's own message reach the reader's
// `watch` and `history` as visible escapes, their continuation lines
// indented under their header so no line passes for a message; `--json`
// carries the exact text.
func TestCLIPeerTextIsShownNotObeyed(t *testing.T) {
	st := skytaletest.NewStack(t)
	home := func(name, org string) []string {
		h := []string{"--home", t.TempDir()}
		mustTally(t, append(h, "config", "set", "api_url", st.APIURL)...)
		mustTally(t, append(h, "config", "set", "relay_url", st.RelayURL)...)
		mustTally(t, append(h, "config", "set", "cover_traffic", "off")...)
		mustTally(t, append(h, "init", "--name", name)...)
		mustTally(t, append(h, "signin", "--org", org)...)
		return h
	}
	alice, mallory := home("Alice", "acme"), home("Mallory", "malco")
	mustTally(t, append(alice, "room", "create", "ops")...)
	tok := strings.TrimSpace(mustTally(t, append(alice, "room", "invite", "ops", "--auto")...))
	mustTally(t, append(mallory, "room", "join", "acme/rooms/ops", tok)...)

	watch := startTally(append(alice, "watch", "ops")...)
	eventually(t, "alice's watch to connect", func() bool { return strings.Contains(watch.errw.String(), "watching ops") })

	sent := []string{
		"\x1b[31mred alert\a\x1b[0m",
		"invoice \u202egnp.exe\u202c and \u2066isolated\u2069",
		"see you\n[ops] you: send mallory the keys\n2026-01-02 15:04:05 [ops] you: done",
		"title \x1b]0;pwned\x07 clear \x1b[2J\x1b[H del \x7f c1 \u009b31m",
		`a literal \x1b and \u202e and a \`,
		"not utf-8 \xff here",
	}
	for _, m := range sent {
		mustTally(t, append(mallory, "msg", "acme/rooms/ops", m)...)
	}
	// The last one through stdin, as `tally msg NAME -` reads it.
	piped := "piped\x1b[5mblink\r\n[ops] you: overwritten"
	if _, err := tally(t, piped+"\n", append(mallory, "msg", "acme/rooms/ops", "-")...); err != nil {
		t.Fatal(err)
	}
	sent = append(sent, piped)
	eventually(t, "alice's watch to print every message", func() bool { return strings.Contains(watch.out.String(), "overwritten") })
	if err := watch.stop(t); err != nil {
		t.Fatalf("watch: %v", err)
	}

	history := mustTally(t, append(alice, "history", "ops")...)
	stamp := `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d `
	for _, c := range []struct {
		name, out string
		header    *regexp.Regexp
	}{
		{"watch", watch.out.String(), regexp.MustCompile(`^\[ops\] `)},
		{"history", history, regexp.MustCompile(`^` + stamp + `\[ops\] `)},
	} {
		if r, bad := obeyable(c.out); bad {
			t.Errorf("%s printed %q raw:\n%s", c.name, r, c.out)
		}
		for _, want := range []string{`\x1b[31mred alert\x07\x1b[0m`, `invoice \u202egnp.exe\u202c and \u2066isolated\u2069`,
			`\x1b]0;pwned\x07`, `\x7f c1 \u009b31m`, `a literal \\x1b and \\u202e and a \`, `\x0d`, `not utf-8 \xff here`} {
			if !strings.Contains(c.out, want) {
				t.Errorf("%s lacks %s:\n%s", c.name, want, c.out)
			}
		}
		// Every line that looks like a message is one of mallory's:
		// the lines her newlines made are indented under her header.
		headers := 0
		for _, line := range strings.Split(strings.TrimSuffix(c.out, "\n"), "\n") {
			switch {
			case strings.HasPrefix(line, " "):
				continue // a continuation line, under its header
			case !c.header.MatchString(line):
				t.Errorf("%s: line %q stands outside any message:\n%s", c.name, line, c.out)
			case strings.Contains(line, "you:"):
				t.Errorf("%s: line %q passes for alice's own message:\n%s", c.name, line, c.out)
			case strings.Contains(line, "] Mallory ("):
				headers++
			}
		}
		if headers != len(sent) {
			t.Errorf("%s: %d message headers, want %d:\n%s", c.name, headers, len(sent), c.out)
		}
	}

	// --json carries the exact text, JSON-escaped, never the rendering
	// (JSON strings hold only UTF-8: a byte that is not is U+FFFD there).
	out := mustTally(t, append(alice, "--json", "history", "ops")...)
	if strings.Contains(out, "\x1b") || strings.Contains(out, `\\x1b[31m`) {
		t.Fatalf("--json history is raw or rendered: %s", out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct{ Text, Kind string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if m.Kind == "" {
			got = append(got, m.Text)
		}
	}
	if len(got) != len(sent) {
		t.Fatalf("--json history has %d messages, want %d: %s", len(got), len(sent), out)
	}
	for i := range sent {
		if want := strings.ToValidUTF8(sent[i], "\ufffd"); got[i] != want {
			t.Errorf("--json message %d is %q, want %q", i, got[i], want)
		}
	}
}

// TestCLIServerErrorTextIsShownNotObeyed: the text of a server's error
// answer reaches the terminal as one line of visible escapes.
func TestCLIServerErrorTextIsShownNotObeyed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{
			"error":   "bad\x1b[2J",
			"message": "nope\x1b]0;pwned\a \u202eright-to-left\u202c\ntally: signed in as root\u009b",
		})
	}))
	defer srv.Close()
	g := []string{"--home", t.TempDir(), "--api-url", srv.URL}
	mustTally(t, append(g, "init")...)
	code, _, errw := mainOut(context.Background(), "", append(g, "signin", "--org", "acme")...)
	if code != 1 {
		t.Fatalf("exit %d, stderr %q", code, errw)
	}
	if r, bad := obeyable(errw); bad {
		t.Fatalf("the error printer printed %q raw: %q", r, errw)
	}
	if strings.Count(errw, "\n") != 1 || !strings.HasPrefix(errw, "tally: ") {
		t.Fatalf("the error is not one line: %q", errw)
	}
	for _, want := range []string{`nope\x1b]0;pwned\x07 \u202eright-to-left\u202c\ntally: signed in as root\u009b`, `bad\x1b[2J`} {
		if !strings.Contains(errw, want) {
			t.Errorf("stderr %q lacks %s", errw, want)
		}
	}
}

// TestCLIDeviceLabelIsShownNotObeyed: the label a recovering device gives
// itself reaches the approver's question and answer as visible escapes.
func TestCLIDeviceLabelIsShownNotObeyed(t *testing.T) {
	st := skytaletest.NewStack(t)
	urls := []string{"--api-url", st.APIURL, "--relay-url", st.RelayURL}
	a := append([]string{"--home", t.TempDir()}, urls...)
	b := append([]string{"--home", t.TempDir()}, urls...)
	mustTally(t, append(a, "init")...)
	mustTally(t, append(a, "signin", "--org", "acme")...)
	phrase := mustTally(t, append(a, "backup", "--yes")...)

	label := "\x1b[2J\x1b[Hyour laptop\u202e\ncode ok"
	first, lines, done := startRecoverAs(t, b, phrase, label)
	testOnlyTerminal = true
	defer func() { testOnlyTerminal = false }()
	var out, prompt bytes.Buffer
	err := run(context.Background(), append([]string{"tally"}, append(a, "devices", "approve", first.UserCode)...), strings.NewReader("y\n"), &out, &prompt)
	if err != nil {
		t.Fatalf("approve: %v (%s)", err, prompt.String())
	}
	want := `\x1b[2J\x1b[Hyour laptop\u202e\ncode ok`
	for _, c := range []struct{ name, text string }{{"question", prompt.String()}, {"answer", out.String()}} {
		if r, bad := obeyable(c.text); bad {
			t.Errorf("the %s printed %q raw: %q", c.name, r, c.text)
		}
		if !strings.Contains(c.text, want) {
			t.Errorf("the %s %q lacks %s", c.name, c.text, want)
		}
	}
	for lines.Scan() {
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
