package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPrintIsRendered keeps the command tree's output going through
// the renderer: outside the few functions that do the rendering, a fmt
// print takes a constant format and, besides constants, only text already
// rendered by termtext (or painted by paint). Anything else is to be
// printed with showf or env.out, which render it. serve and its backup
// print only what the operator gave them.
func TestEveryPrintIsRendered(t *testing.T) {
	// printMessage renders each part of a message line itself
	// (TestCLIPeerTextIsShownNotObeyed).
	renderers := map[string]bool{"showf": true, "(*status).update": true, "printMessage": true}
	operator := map[string]bool{"serve.go": true, "backup.go": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || operator[name] {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || renderers[funcName(fd)] {
				continue
			}
			ast.Inspect(fd, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				verb, ok := fmtPrint(call)
				if !ok {
					return true
				}
				args := call.Args
				if strings.HasPrefix(verb, "F") {
					args = args[1:] // the writer
				}
				if strings.HasSuffix(verb, "f") {
					if len(args) == 0 || !constant(args[0]) {
						t.Errorf("%s: fmt.%s with a format that is not a constant", fset.Position(call.Pos()), verb)
						return true
					}
					args = args[1:]
				}
				for _, a := range args {
					if !constant(a) && !rendered(a) {
						t.Errorf("%s: fmt.%s prints %s unrendered: print it with showf or env.out", fset.Position(a.Pos()), verb, types(a))
					}
				}
				return true
			})
		}
	}
}

// funcName is "f" for a function, "(*T).m" or "(T).m" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	switch r := fd.Recv.List[0].Type.(type) {
	case *ast.StarExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return "(*" + id.Name + ")." + fd.Name.Name
		}
	case *ast.Ident:
		return "(" + r.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}

// fmtPrint reports whether call is one of fmt's printers, and which.
func fmtPrint(call *ast.CallExpr) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "fmt" {
		return "", false
	}
	switch sel.Sel.Name {
	case "Fprint", "Fprintf", "Fprintln", "Print", "Printf", "Println":
		return sel.Sel.Name, true
	}
	return "", false
}

func constant(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.BinaryExpr:
		return constant(e.X) && constant(e.Y)
	case *ast.ParenExpr:
		return constant(e.X)
	}
	return false
}

// rendered reports whether e is a call of termtext's renderers, or of
// paint (whose colour codes are the program's own; what it paints is
// checked where paint is called).
func rendered(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		pkg, ok := f.X.(*ast.Ident)
		return ok && pkg.Name == "termtext" && (f.Sel.Name == "Line" || f.Sel.Name == "Block")
	case *ast.Ident:
		if f.Name != "paint" || len(call.Args) != 3 {
			return false
		}
		return constant(call.Args[2]) || rendered(call.Args[2])
	}
	return false
}

// types names an expression for a failure message.
func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.CallExpr:
		return "the result of a call"
	}
	return "an expression"
}
