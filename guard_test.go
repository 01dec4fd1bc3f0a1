package skytale_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"

	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// goPackages maps every package directory of the module to its non-test
// Go files.
func goPackages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() && path != "." {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (the examples, the benchmark harness)
			}
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestPackageDocs requires exactly one package doc comment per package.
func TestPackageDocs(t *testing.T) {
	for dir, files := range goPackages(t) {
		docs := 0
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" && !strings.HasPrefix(af.Doc.Text(), "Code generated") {
				docs++
			}
		}
		if docs != 1 {
			t.Errorf("%s: %d package doc comments, want exactly 1", dir, docs)
		}
	}
}

// TestImportRules keeps the dependency graph pointing inward: library code
// never imports testing, mls stays free of I/O and logging, and the server
// planes never import each other.
func TestImportRules(t *testing.T) {
	forbidden := func(dir, imp string) string {
		top := strings.Split(filepath.ToSlash(dir), "/")[0]
		switch {
		case imp == "testing" && top != "skytaletest":
			return "library code must not import testing"
		case top == "mls" && (strings.HasPrefix(imp, "net") || imp == "database/sql" || imp == "log" || imp == "log/slog" || imp == "os"):
			return "mls does no I/O and never logs"
		case top == "mls" && strings.HasPrefix(imp, "github.com/skytale-oss/skytale/") && !strings.HasPrefix(imp, "github.com/skytale-oss/skytale/mls"):
			return "mls imports nothing else of this module"
		case strings.HasPrefix(imp, "github.com/nats-io/nats-server"):
			return "only tests and the examples' module run an embedded nats-server"
		case top == "relay" && strings.HasPrefix(imp, "github.com/skytale-oss/skytale/directory"),
			top == "directory" && strings.HasPrefix(imp, "github.com/skytale-oss/skytale/relay"):
			return "the planes are independent"
		case top == "padding" || top == "cover":
			if strings.HasPrefix(imp, "github.com/skytale-oss/skytale/") && !strings.HasPrefix(imp, "github.com/skytale-oss/skytale/"+top) && !strings.HasPrefix(imp, "github.com/skytale-oss/skytale/padding") {
				return "padding and cover are leaves"
			}
		}
		return ""
	}
	for dir, files := range goPackages(t) {
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, is := range af.Imports {
				imp, _ := strconv.Unquote(is.Path.Value)
				if why := forbidden(dir, imp); why != "" {
					t.Errorf("%s imports %s: %s", f, imp, why)
				}
			}
		}
	}
}

// TestSeatLinksNoServer: a program that embeds only a seat links none of
// the servers' backends or metrics.
func TestSeatLinksNoServer(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", "./seat").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, server := range []string{"github.com/jackc/pgx", "github.com/nats-io/", "github.com/prometheus/",
			"github.com/skytale-oss/skytale/directory", "github.com/skytale-oss/skytale/relay"} {
			if strings.HasPrefix(dep, server) {
				t.Errorf("seat links %s", dep)
			}
		}
	}
}
