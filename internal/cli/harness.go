package cli

import (
	"os"
	"runtime/pprof"
	"strings"
	"unicode/utf8"
)

// WorkDir returns dir, created if missing, or when dir is empty a new
// temporary directory named after prefix; done removes what WorkDir made.
func WorkDir(dir, prefix string) (path string, done func(), err error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// StartCPUProfile writes a CPU profile to path until stop is called.
func StartCPUProfile(path string) (stop func(), err error) {
	fh, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(fh); err != nil {
		fh.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		fh.Close()
	}, nil
}

// OneLine is s on one line, its runs of white space made one space, cut
// to n bytes (on a rune boundary) with an ellipsis.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // never split a UTF-8 rune
	}
	return s[:n] + "…"
}

// Indent indents every line of s by four spaces; "(empty)" for "".
func Indent(s string) string {
	if s == "" {
		return "    (empty)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
