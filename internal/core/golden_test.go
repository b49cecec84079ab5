package core

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// TestGolden runs the transcripts in testdata. In a transcript, a line
// "> command" is a script command (see script_test.go) and the lines after
// it, up to the next command, blank line or comment, are what it printed.
// Blank lines and "#" comments are kept as they are. With -rewrite the
// printed lines are written back; review the diff.
func TestGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := string(data)
			got := runTranscript(t, want)
			if got == want {
				return
			}
			if *rewrite {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Errorf("%s differs (run with -rewrite and review the diff):\n%s", file, lineDiff(want, got))
		})
	}
}

// runTranscript runs the commands of text and returns it with each
// command's output in place of the old.
func runTranscript(t *testing.T, text string) string {
	s := newScript(t)
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			out.WriteString(line + "\n")
		case strings.HasPrefix(line, "> "):
			out.WriteString(line + "\n")
			printed, err := s.exec(strings.TrimPrefix(line, "> "))
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			for _, p := range printed {
				out.WriteString(p + "\n")
			}
		}
		// Anything else is old output.
	}
	return out.String()
}

// lineDiff lists the lines that differ between want and got.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
