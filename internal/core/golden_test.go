package core

import (
	"testing"

	"github.com/contextinfinity/ctxinf/internal/golden"
)

// TestGolden runs the transcripts in testdata (internal/golden): a line
// "> command" is a script command (see script_test.go) and the lines
// after it are what it printed. With -rewrite the printed lines are
// written back; review the diff.
func TestGolden(t *testing.T) {
	t.Parallel()
	golden.Run(t, func(t *testing.T) golden.Exec { return newScript(t).exec })
}
