package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAPIDocListsEveryErrorCode: every error code an HTTP answer of the
// directory or the relay carries is in docs/API.md's table of HTTP error
// codes, and the table lists no code the planes never answer with.
func TestAPIDocListsEveryErrorCode(t *testing.T) {
	b, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## HTTP error codes\n")
	if !ok {
		t.Fatal("docs/API.md has no HTTP error codes section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	doc := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| [0-9, ]+ \\| `([a-z0-9_]+)` \\|").FindAllStringSubmatch(sec, -1) {
		doc[m[1]] = true
	}
	// The shapes an error code takes in the planes' sources: an answer
	// written with its status, a row of the directory's error table, a
	// body error of internal/httpx, and the JSON of an epoch refusal.
	res := []*regexp.Regexp{
		regexp.MustCompile(`(?:writeError|WriteError)\(\w+, [^,"]+, "([a-z0-9_]+)"`),
		regexp.MustCompile(`\{err\w+, http\.Status\w+, "([a-z0-9_]+)"`),
		regexp.MustCompile(`&BodyError\{http\.Status\w+, "([a-z0-9_]+)"`),
		regexp.MustCompile(`writeEpochError\(\w+, "([a-z0-9_]+)"`),
	}
	code := map[string]bool{}
	for _, dir := range []string{"../directory", "../relay", "../internal/httpx"} {
		files, _ := filepath.Glob(dir + "/*.go")
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, re := range res {
				for _, m := range re.FindAllStringSubmatch(string(src), -1) {
					code[m[1]] = true
				}
			}
		}
	}
	if len(code) < 40 {
		t.Fatalf("found only %d error codes in the sources: the patterns no longer match the code", len(code))
	}
	for c := range code {
		if !doc[c] {
			t.Errorf("the HTTP error code %s is not in docs/API.md's table", c)
		}
	}
	for c := range doc {
		if !code[c] {
			t.Errorf("docs/API.md's table lists the HTTP error code %s, which no plane answers with", c)
		}
	}
}
