package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	messagesPath = "github.com/contextinfinity/ctxinf/messages"
	// goldenPath is the golden transcripts' runner, which imports only
	// the standard library: the core's tests may use it.
	goldenPath = "github.com/contextinfinity/ctxinf/internal/golden"
)

// Standard packages the core must not use outside tests: they reach the
// world (files, network, processes), randomness or concurrency.
var forbiddenImports = map[string]bool{
	"crypto/rand": true, "io/ioutil": true, "log": true, "log/slog": true, "math/rand": true,
	"math/rand/v2": true, "net": true, "net/http": true, "os": true, "os/exec": true,
	"os/signal": true, "runtime": true, "sync": true, "sync/atomic": true, "syscall": true,
	"unsafe": true,
}

// Calls that read the clock, sleep or make random ids.
var forbiddenCalls = map[string]bool{
	"time.Now": true, "time.Since": true, "time.Until": true, "time.Sleep": true, "time.After": true,
	"time.AfterFunc": true, "time.Tick": true, "time.NewTimer": true, "time.NewTicker": true,
	"messages.NewID": true,
}

// TestImports enforces that the core is a deterministic heart: its files
// import only the standard library and messages (tests included), and
// outside tests they do no I/O, read no clock, draw no random numbers and
// start no goroutines. Its tests may also import the golden runner
// (internal/golden), which imports only the standard library.
func TestImports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	for _, file := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		test := strings.HasSuffix(file, "_test.go")
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			// Standard packages have no dot in their first element.
			std := !strings.Contains(strings.Split(path, "/")[0], ".")
			switch {
			case !std && path != messagesPath && !(test && path == goldenPath):
				t.Errorf("%s imports %s; the core imports only the standard library and messages (its tests also internal/golden)", file, path)
			case !test && forbiddenImports[path]:
				t.Errorf("%s imports %s; the core does no I/O, reads no randomness and runs no goroutines", file, path)
			}
		}
		if test {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement; the core starts no goroutines", fset.Position(n.Pos()))
			case *ast.SelectStmt:
				t.Errorf("%s: select statement; the core does not wait", fset.Position(n.Pos()))
			case *ast.ChanType:
				t.Errorf("%s: channel type; the core does not communicate", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && forbiddenCalls[x.Name+"."+n.Sel.Name] {
					t.Errorf("%s: %s.%s; time and ids come in as arguments", fset.Position(n.Pos()), x.Name, n.Sel.Name)
				}
			}
			return true
		})
	}
}
