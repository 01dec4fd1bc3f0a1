package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds the length of a function of the command tree,
// counted from its func keyword to its closing brace (a function literal
// counts inside the function that holds it, and on its own).
const maxFuncLines = 120

// TestFunctionsAreShort keeps each command a function of its own: no
// function, method or function literal of the package (tests aside) is
// over maxFuncLines lines. Long ones are what the command tree was once
// made of (one literal holding every room command), so the bound names
// the function that breaks it.
func TestFunctionsAreShort(t *testing.T) {
	allowed := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			what := "a function literal"
			switch fn := n.(type) {
			case *ast.FuncDecl:
				body, what = fn.Body, funcName(fn)
			case *ast.FuncLit:
				body = fn.Body
			}
			if body == nil {
				return true
			}
			lines := fset.Position(body.End()).Line - fset.Position(n.Pos()).Line + 1
			if lines > maxFuncLines && !allowed[name+":"+what] {
				t.Errorf("%s: %s is %d lines, over %d: give its parts functions of their own", fset.Position(n.Pos()), what, lines, maxFuncLines)
			}
			return true
		})
	}
}
