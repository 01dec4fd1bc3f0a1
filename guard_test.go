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

// deps lists the packages pkg links (go list -deps), skipping the test
// without a go command.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// heavy are the servers' backends and metrics: what a program that
// embeds only a seat, a directory on SQLite or an in-process test stack
// must not link.
var heavy = []string{"github.com/jackc/pgx", "github.com/nats-io/", "github.com/prometheus/"}

func isHeavy(dep string) bool {
	for _, h := range heavy {
		if strings.HasPrefix(dep, h) {
			return true
		}
	}
	return false
}

// TestSeatLinksNoServer: a program that embeds only a seat links none of
// the servers' backends or metrics.
func TestSeatLinksNoServer(t *testing.T) {
	for _, dep := range deps(t, "./seat") {
		if isHeavy(dep) || strings.HasPrefix(dep, "github.com/skytale-oss/skytale/directory") || strings.HasPrefix(dep, "github.com/skytale-oss/skytale/relay") {
			t.Errorf("seat links %s", dep)
		}
	}
}

// TestDirectoryLinksNoBackend: package directory links neither the
// PostgreSQL driver nor Prometheus nor NATS; they come only with
// directory/pgstore and directory/dirmetrics, which its users import.
func TestDirectoryLinksNoBackend(t *testing.T) {
	for _, dep := range deps(t, "./directory") {
		if isHeavy(dep) {
			t.Errorf("directory links %s", dep)
		}
	}
}

// TestRelayLinksNoBackend: package relay links neither the NATS client
// nor Prometheus; they come only with relay/jsarchive and
// relay/relaymetrics, which its users import.
func TestRelayLinksNoBackend(t *testing.T) {
	for _, dep := range deps(t, "./relay") {
		if isHeavy(dep) {
			t.Errorf("relay links %s", dep)
		}
	}
}

// TestStackLinksNoBackend: the in-process stack for tests (skytaletest)
// and the front door (the root package) link no PostgreSQL, NATS or
// Prometheus package: an embedder that wants a seat and a stack to test
// it against links none of them.
func TestStackLinksNoBackend(t *testing.T) {
	for _, pkg := range []string{"./skytaletest", "."} {
		for _, dep := range deps(t, pkg) {
			if isHeavy(dep) {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}

// TestNoNATSServer: no package of the module but tests links nats-server;
// the examples and benchmarks that run one are modules of their own.
func TestNoNATSServer(t *testing.T) {
	for _, dep := range deps(t, "./...") {
		if strings.HasPrefix(dep, "github.com/nats-io/nats-server") {
			t.Errorf("a package of the module links %s", dep)
		}
	}
}
