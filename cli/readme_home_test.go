package cli

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestREADMESecondHome runs the README's "A second home" commands as
// written (the phrase piped in, the user code the laptop printed typed into
// the approval), after Alice's init and signin from the two-seat section.
func TestREADMESecondHome(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## A second home\n")
	if !ok {
		t.Fatal("README has no second-home section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var lines []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(sec, -1) {
		for _, l := range strings.Split(m[1], "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
	}

	st := skytaletest.NewStack(t)
	demo := t.TempDir()
	// The README configures no URL: tally's defaults stand for serve's.
	testOnlyDefaultURLs = &[2]string{st.APIURL, st.RelayURL}
	defer func() { testOnlyDefaultURLs = nil }()
	mustTally(t, "--home", demo+"/alice", "init")
	mustTally(t, "--home", demo+"/alice", "signin", "--org", "acme")

	var phrase, code, fp, lastOut string
	var rec *background
	for _, line := range lines {
		if !strings.HasPrefix(line, "tally ") {
			t.Fatalf("README line %q is not a tally command", line)
		}
		args := strings.Fields(strings.ReplaceAll(line, "/tmp/tally-demo", demo))[1:]
		cmd := strings.Join(args[2:], " ")
		switch {
		case cmd == "backup":
			out, err := tally(t, "y\n", args...)
			if err != nil || len(strings.Fields(out)) != 24 {
				t.Fatalf("%s: %v", line, err)
			}
			phrase = out
		case cmd == "signin --recover":
			ctx, cancel := context.WithCancel(context.Background())
			rec = &background{cancel: cancel, done: make(chan error, 1)}
			go func() {
				rec.done <- Run(ctx, append([]string{"tally"}, args...), strings.NewReader(phrase), &rec.out, &rec.errw)
			}()
			eventually(t, "the user code", func() bool { return strings.Contains(rec.out.String(), "user code: ") })
			_, code, _ = strings.Cut(rec.out.String(), "user code: ")
			code, _, _ = strings.Cut(code, "\n")
			_, fp, _ = strings.Cut(rec.out.String(), "device fingerprint: ")
			fp, _, _ = strings.Cut(fp, "\n")
		case strings.HasPrefix(cmd, "signin --link"):
			ctx, cancel := context.WithCancel(context.Background())
			rec = &background{cancel: cancel, done: make(chan error, 1)}
			go func() {
				rec.done <- Run(ctx, append([]string{"tally"}, args...), strings.NewReader(""), &rec.out, &rec.errw)
			}()
			eventually(t, "the code", func() bool { return strings.Contains(rec.out.String(), "fingerprint: ") })
			_, code, _ = strings.Cut(rec.out.String(), "code: ")
			code, _, _ = strings.Cut(code, "\n")
			_, fp, _ = strings.Cut(rec.out.String(), "fingerprint: ")
			fp, _, _ = strings.Cut(fp, "\n")
		case strings.HasPrefix(cmd, "devices approve "):
			args[len(args)-1] = code
			for i, a := range args {
				if a == "--fingerprint" {
					args[i+1] = strings.ReplaceAll(fp, " ", "")
				}
			}
			if _, err := tally(t, "", args...); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if err := rec.wait(t); err != nil {
				t.Fatalf("the new device's signin: %v (%s)", err, rec.errw.String())
			}
		default:
			if lastOut, err = tally(t, "", args...); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		}
	}
	if len(lines) < 8 || rec == nil || !strings.HasSuffix(lines[len(lines)-1], "laptop log") {
		t.Fatalf("the section's commands changed: %q", lines)
	}
	if !strings.Contains(lastOut, "buy milk") {
		t.Fatalf("the laptop's log: %q", lastOut)
	}
}
