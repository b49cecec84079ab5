package tests

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// tuiScreen is a ctxinf running under a pseudo-terminal of 80×24 whose
// output a terminal emulator draws: what a user would see.
type tuiScreen struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	emu  *vt.SafeEmulator
	read chan struct{} // closed when the output ends
	done chan error    // the process's exit
}

func startTUI(t *testing.T, environ []string, args ...string) *tuiScreen {
	t.Helper()
	s := &tuiScreen{t: t, emu: vt.NewSafeEmulator(80, 24), read: make(chan struct{}), done: make(chan error, 1)}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Env = append(environ, "TERM=xterm-256color")
	var err error
	if s.ptmx, err = pty.StartWithSize(s.cmd, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.read)
		buf := make([]byte, 32<<10)
		for {
			n, err := s.ptmx.Read(buf)
			if n > 0 {
				_, _ = s.emu.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	// The emulator answers the program's queries (cursor position,
	// colours) on its input side: back to the program. This goroutine
	// stays blocked in Read after the test (the emulator's Close is not
	// safe against a concurrent Read).
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := s.emu.Read(buf)
			if err != nil {
				return
			}
			if _, err := s.ptmx.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		s.ptmx.Close()
	})
	return s
}

// screen is the emulator's screen as text, trailing blanks cut.
func (s *tuiScreen) screen() string {
	lines := strings.Split(ansi.Strip(s.emu.Render()), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// waitFor polls the screen until every pattern matches, or fails the test
// after a deadline, showing the screen.
func (s *tuiScreen) waitFor(what string, patterns ...string) string {
	s.t.Helper()
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		res[i] = regexp.MustCompile(p)
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		scr := s.screen()
		ok := true
		for _, re := range res {
			ok = ok && re.MatchString(scr)
		}
		if ok {
			return scr
		}
		select {
		case err := <-s.done:
			s.done <- err
			s.t.Fatalf("ctxinf exited (%v) before %s; screen:\n%s", err, what, scr)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s within 30s; screen:\n%s", what, scr)
		}
	}
}

func (s *tuiScreen) send(keys string) {
	s.t.Helper()
	if _, err := s.ptmx.Write([]byte(keys)); err != nil {
		s.t.Fatal(err)
	}
}

// exit waits for the process to end and fails unless it exits 0.
func (s *tuiScreen) exit() {
	s.t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			s.t.Fatalf("ctxinf tui exited with %v; screen:\n%s", err, s.screen())
		}
	case <-time.After(30 * time.Second):
		s.t.Fatalf("ctxinf tui did not exit within 30s; screen:\n%s", s.screen())
	}
}

// TestTUI runs ctxinf tui on a new data directory with the offline
// model at 80×24: a message gets a reply, the header shows the branch
// and the head state, F1 shows the help, ctrl+d quits with status 0.
// With CTX_TUI_CAPTURE=FILE it writes the screen with the reply to FILE
// (the README's).
func TestTUI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startTUI(t, env(dir), "tui")
	s.waitFor("the header and the input line", `ctxinf · session chat \w{8} · branch main \w{8} · model`,
		`state #0( \w{8})? · pending 0 · turn: idle`, `> a message, or /help`, `F1/\? help`)
	s.send("What is a branch in ContextInfinity?")
	s.waitFor("the typed text", `> What is a branch in ContextInfinity\?`)
	s.send("\r")
	scr := s.waitFor("the reply and the turn's end in the header",
		`you: What is a branch in ContextInfinity\?`, `assistant: \S+`,
		`branch main \w{8}`, `state #\d+ `, `turn 1: (response_finalized|state_committed|indexed|done)`,
		`Stream: (\d+)/(\d+) B`)
	if m := regexp.MustCompile(`Stream: (\d+)/(\d+) B`).FindStringSubmatch(scr); m[1] != m[2] || m[2] == "0" {
		t.Errorf("after the turn, Stream: %s/%s B: want the reply's text bytes, durable and displayed equal", m[1], m[2])
	}
	if strings.Contains(scr, "\x1b[A") || strings.Contains(scr, "error") {
		t.Errorf("screen shows an error:\n%s", scr)
	}
	if path := os.Getenv("CTX_TUI_CAPTURE"); path != "" {
		if err := os.WriteFile(path, []byte(scr+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// An up arrow recalls the message into the line; it is not sent.
	s.send("\x1b[A")
	s.waitFor("the recalled input", `> What is a branch in ContextInfinity\?`)
	s.send("\x15") // ctrl+u: clear the line

	s.send("\x1bOP") // F1
	s.waitFor("the full help", `Keys and commands`, `/switch B`, `/rollback N`, `ctrl\+d\s+quit`)
	s.send("\x1bOP")
	s.waitFor("the conversation again", `you: What is a branch`)

	// Each screen opens on its key, with its name in the header, and esc
	// brings the conversation back (the chunks screen opens on its query
	// input: the first esc leaves it).
	for _, k := range []struct{ seq, name, body string }{
		{"\x1bOQ", "History", `History of main`},
		{"\x1bOR", "Branches", `\* main`},
		{"\x1bOS", "Pins", `Pinned facts of main`},
		{"\x1b[15~", "Chunks", `query>`},
		{"\x1b[17~", "Pending", `1 pending turn`},
		{"\x1b[18~", "Steps", `Turn 1 of 1`},
		{"\x1b[19~", "Models", `local`},
	} {
		s.send(k.seq)
		s.waitFor("the "+k.name+" screen", `model \w+ · `+k.name, k.body)
		s.send("\x1b")
		if k.name == "Chunks" {
			s.waitFor("the chunks screen out of its input", `esc close`)
			s.send("\x1b")
		}
		s.waitFor("the conversation after the "+k.name+" screen", `you: What is a branch`, `> a message, or /help`)
	}
	s.send("\x04") // ctrl+d
	s.exit()
}

// TestTUIServer runs ctxinf tui as a client of a running server: the
// same conversation, through the API.
func TestTUIServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServe(t, dir)
	s := startTUI(t, env(t.TempDir()), "tui", "--server", srv.url)
	s.waitFor("the header", `branch main \w{8}`, `turn: idle`, `server http://127\.0\.0\.1:\d+`)
	s.send("Hello over the API\r")
	s.waitFor("the reply", `you: Hello over the API`, `assistant: \S+`, `turn 1: \w+`, `state #\d+ `)
	s.send("/fork\r")
	s.waitFor("the fork", `branch fork \w{8}`, `now on branch fork`)
	s.send("/switch main\r")
	s.waitFor("the switch back", `branch main \w{8}`, `you: Hello over the API`)
	s.send("\x04")
	s.exit()
}
