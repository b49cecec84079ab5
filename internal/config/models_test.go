package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDefaultModelsAreCurrent checks every default model id against the
// pinned SDK of its provider: an id the SDK marks Deprecated (an end of life
// announced) is not one a newcomer's `make run` should start on.
func TestDefaultModelsAreCurrent(t *testing.T) {
	t.Parallel()
	sdks := map[string]struct{ module, file string }{
		"openai":    {"github.com/openai/openai-go/v3", "shared/shared.go"},
		"anthropic": {"github.com/anthropics/anthropic-sdk-go", "message.go"},
	}
	for name, m := range Default().Models {
		sdk, ok := sdks[m.Provider]
		if !ok {
			continue
		}
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", sdk.module).Output()
		if err != nil {
			t.Fatalf("go list -m %s: %v", sdk.module, err)
		}
		path := filepath.Join(strings.TrimSpace(string(out)), sdk.file)
		docs := modelDocs(t, path)
		doc, known := docs[m.ModelID]
		switch {
		case !known:
			t.Errorf("models.%s.model_id %q: not a model id of %s (%s)", name, m.ModelID, sdk.module, path)
		case strings.Contains(doc, "Deprecated:"):
			t.Errorf("models.%s.model_id %q is deprecated in %s: %s", name, m.ModelID, sdk.module, doc)
		}
	}
}

// modelDocs returns the doc comment of every string constant in the Go file
// at path, by the constant's value.
func modelDocs(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				val, err := strconv.Unquote(lit.Value)
				if err != nil {
					continue
				}
				docs[val] = strings.Join(strings.Fields(vs.Doc.Text()), " ")
			}
		}
	}
	return docs
}
