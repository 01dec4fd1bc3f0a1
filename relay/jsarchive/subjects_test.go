package jsarchive

import (
	"strings"
	"testing"
)

// TestSubjects: every channel name, dots and all, makes two subjects of
// three tokens with no wildcard, which parse back to it; what is not a
// subject of the stream does not parse.
func TestSubjects(t *testing.T) {
	a := &archive{name: "SKYTALE"}
	for _, name := range []string{"a.b/c/d", "a/b.c/d", "a/b/c.d", "a-b/c_d/e.f", "x/y/" + strings.Repeat("z", 250)} {
		for kind, subj := range map[byte]string{'a': a.appSubject(name), 'h': a.hsSubject(name)} {
			k, got, ok := a.parseSubject(subj)
			if !ok || k != kind || got != name || strings.Count(subj, ".") != 2 || strings.ContainsAny(subj, "*> ") {
				t.Fatalf("%q → subject %q → %q %c %v", name, subj, got, k, ok)
			}
		}
	}
	for _, bad := range []string{"SKYTALE.a", "SKYTALE.a.!!", "OTHER.a.YQ", "SKYTALE.q.YQ", "SKYTALE.a."} {
		if _, _, ok := a.parseSubject(bad); ok {
			t.Fatalf("subject %q parsed", bad)
		}
	}
}
