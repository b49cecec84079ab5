package config

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyConfigImportsViper enforces that the rest of the module receives a
// typed Config instead of reading viper itself.
func TestOnlyConfigImportsViper(t *testing.T) {
	const root = "../.."
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir, err := filepath.Abs(filepath.Dir(path))
		if err != nil || dir == self {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return nil // a file being edited elsewhere; the compiler will complain
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/spf13/viper") {
				t.Errorf("%s imports %s; only internal/config may", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
