// Package golden runs golden transcripts, as internal/core's and
// actors/lifecycle's tests keep them (raft's interaction tests are the
// model): in testdata/*.txt, a line "> command" is run by the test's
// script and the lines after it, up to the next command, blank line or
// comment, are what it printed. Blank lines and "#" comments are kept as
// they are. With -rewrite the printed lines are written back, to be
// reviewed as a diff.
//
// It is a test helper: it imports only the standard library, so that
// the core's tests, which import nothing else of the module but
// messages, may use it.
package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// Rewrite reports whether the test runs with -rewrite: a test of its
// own golden file writes it back rather than compare.
func Rewrite() bool { return *rewrite }

// Exec runs one command of a transcript and returns what it printed.
type Exec func(command string) ([]string, error)

// Run runs every transcript in testdata, each as a parallel subtest on
// a script of its own (newScript), and fails a subtest whose output
// differs, listing the lines that do.
func Run(t *testing.T, newScript func(t *testing.T) Exec) {
	t.Helper()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := string(data)
			got := Transcript(t, want, newScript(t))
			if got == want {
				return
			}
			if *rewrite {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Errorf("%s differs (run with -rewrite and review the diff):\n%s", file, Diff(want, got))
		})
	}
}

// Transcript runs the commands of text with exec and returns text with
// each command's output in place of the old.
func Transcript(t *testing.T, text string, exec Exec) string {
	t.Helper()
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			out.WriteString(line + "\n")
		case strings.HasPrefix(line, "> "):
			out.WriteString(line + "\n")
			printed, err := exec(strings.TrimPrefix(line, "> "))
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

// Diff lists the lines that differ between want and got.
func Diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
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
