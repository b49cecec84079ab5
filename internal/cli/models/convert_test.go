package models

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
)

func TestModelsConvert(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "wink.json")
	json := `{"precision":8,"l2NormIndex":2,"wordIndex":3,"size":3,"dimensions":2,"words":["the","cat","dog"],
		"vectors":{"the":[1,1,1.41,0],"cat":[1,0,1,1],"dog":[0.9,0.1,0.9,2]},"unkVector":[0,0,0,-1]}`
	if err := os.WriteFile(in, []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "models", "glove-2d.ctxvec")
	var stdout bytes.Buffer
	e := &cli.Env{Stdout: &stdout, Stderr: &stdout}
	if err := Convert(e, []string{"--from", "wink", "--in", in, "--out", out, "--max-words", "2"}); err != nil {
		t.Fatalf("models convert: %v", err)
	}
	m, err := retrieval.LoadStatic(out)
	if err != nil {
		t.Fatalf("LoadStatic(output): %v", err)
	}
	if m.Name() != "glove-2d" || m.Len() != 2 || m.Dim() != 2 {
		t.Errorf("output: %s, %d words of dim %d; want glove-2d, 2 words of dim 2", m.Name(), m.Len(), m.Dim())
	}
	if !strings.Contains(stdout.String(), "2 words × 2 dims") {
		t.Errorf("report %q does not give the words and dims", stdout.String())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "models", "*.tmp*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}

	// A bad input leaves no output behind.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"vectors":{"a":[1,`), 0o644); err != nil {
		t.Fatal(err)
	}
	badOut := filepath.Join(dir, "bad.ctxvec")
	if err := Convert(e, []string{"--from", "wink", "--in", bad, "--out", badOut}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("models convert of a cut JSON = %v, want an error naming %s", err, bad)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "bad.ctxvec*")); len(left) > 0 {
		t.Errorf("a failed conversion left %v", left)
	}

	err = Convert(e, []string{"--from", "glove-txt", "--max-words", "-1"})
	for _, want := range []string{`--from "glove-txt"`, "--in: required", "--out: required", "--max-words -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("models convert with bad flags = %v, want it to name %s", err, want)
		}
	}
}
