package cli

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// routesInSource returns the "METHOD /path" patterns the non-test Go
// files of dir register on their mux.
func routesInSource(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`HandleFunc\("([A-Z]+ /[^"]*)"`)
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out = append(out, m[1])
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// documented returns the routes docs/API.md lists under a "## " section,
// without their query strings.
func documented(doc, section string) []string {
	_, sec, _ := strings.Cut(doc, "\n## "+section+"\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	var out []string
	for _, m := range regexp.MustCompile("(?m)^### `([A-Z]+ /[^`]*)`").FindAllStringSubmatch(sec, -1) {
		r, _, _ := strings.Cut(m[1], "?")
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// TestAPIDocMatchesRoutes: docs/API.md lists exactly the routes the
// directory and the relay register, and each one it lists answers on a
// running stack (not the muxes' 404 or 405).
func TestAPIDocMatchesRoutes(t *testing.T) {
	b, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	st := skytaletest.NewStack(t)
	for _, p := range []struct{ section, dir, base string }{
		{"Directory", "../directory", st.APIURL},
		{"Relay", "../relay", st.RelayURL},
	} {
		docd, code := documented(doc, p.section), routesInSource(t, p.dir)
		for _, r := range code {
			if !slices.Contains(docd, r) {
				t.Errorf("%s route %s is not in docs/API.md", p.section, r)
			}
		}
		for _, r := range docd {
			if !slices.Contains(code, r) {
				t.Errorf("docs/API.md lists %s route %s, which the code does not register", p.section, r)
			}
			method, path, _ := strings.Cut(r, " ")
			path = regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(path, "x")
			req, err := http.NewRequest(method, p.base+path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct{ Error, Message string }
			json.Unmarshal(body, &e)
			if e.Error == "method_not_allowed" || e.Message == "no such endpoint" {
				t.Errorf("%s %s: %d %s: no such route on a running %s", method, path, resp.StatusCode, body, p.section)
			}
		}
	}
	// The README's API reference is this file.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "(docs/API.md)") {
		t.Error("README does not link docs/API.md")
	}
}

// TestAPIDocMatchesFrames: docs/API.md lists exactly the frame types a
// client may send and the error codes the relay's frames carry.
func TestAPIDocMatchesFrames(t *testing.T) {
	b, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	_, frames, _ := strings.Cut(string(b), "\n## WebSocket frames\n")
	_, client, _ := strings.Cut(frames, "\n### Client to relay\n")
	client, relayTo, _ := strings.Cut(client, "\n### Relay to client\n")
	var docTypes []string
	for _, m := range regexp.MustCompile("(?m)^#### `([a-z_]+)`").FindAllStringSubmatch(client, -1) {
		docTypes = append(docTypes, m[1])
	}
	var docCodes []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(relayTo, -1) {
		docCodes = append(docCodes, m[1])
	}

	src, err := os.ReadFile("../relay/ws.go")
	if err != nil {
		t.Fatal(err)
	}
	_, handle, ok := strings.Cut(string(src), "func (c *conn) handle(")
	if !ok {
		t.Fatal("relay/ws.go has no conn.handle")
	}
	handle, _, _ = strings.Cut(handle, "\n}\n")
	var codeTypes []string
	for _, m := range regexp.MustCompile(`case "([a-z_]+)":`).FindAllStringSubmatch(handle, -1) {
		codeTypes = append(codeTypes, m[1])
	}
	var codeCodes []string
	// The relay and its archives send them: every package under relay/
	// (jsarchive, internal/sqlitearchive, internal/backend and any backend
	// added later).
	var files []string
	err = filepath.WalkDir("../relay", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	codeRe := regexp.MustCompile(`(?:[eE]rrorFrame|channelErrorFrame|fail|closeWith\([^"\n]*)\(?"([a-z0-9_]+)"|\{"error", "([a-z_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range codeRe.FindAllStringSubmatch(string(b), -1) {
			codeCodes = append(codeCodes, m[1]+m[2])
		}
	}
	sort.Strings(docTypes)
	sort.Strings(codeTypes)
	if !slices.Equal(docTypes, codeTypes) {
		t.Errorf("client frame types: docs/API.md %v, relay %v", docTypes, codeTypes)
	}
	sort.Strings(codeCodes)
	codeCodes = slices.Compact(codeCodes)
	for _, c := range codeCodes {
		if !slices.Contains(docCodes, c) {
			t.Errorf("the relay's error code %s is not in docs/API.md", c)
		}
	}
	for _, c := range docCodes {
		if !slices.Contains(codeCodes, c) {
			t.Errorf("docs/API.md lists the error code %s, which the relay never sends", c)
		}
	}
}
