package tui

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

var update = flag.Bool("update", false, "rewrite the golden screens under testdata/shell")

// harness drives the shell as a tea.Program would: Update on one
// goroutine (the test's), commands on their own, their results and the
// streamed updates back through msgs.
type harness struct {
	t           *testing.T
	m           *Model
	f           *fakeShell
	msgs        chan tea.Msg
	outstanding int
	quit        bool
}

// cmdDone carries a command's result.
type cmdDone struct{ msg tea.Msg }

func newHarness(t *testing.T, f *fakeShell, w, h int, screens ...Screen) *harness {
	t.Helper()
	m := New(Options{Ctx: t.Context(), Backend: f, Branch: f.branches[0], Screens: screens})
	hs := &harness{t: t, m: m, f: f, msgs: make(chan tea.Msg, 1024)}
	m.SetSend(func(msg tea.Msg) { hs.msgs <- msg })
	m.tick = nil // no timed refreshes: the screens depend on the messages alone
	hs.send(tea.WindowSizeMsg{Width: w, Height: h})
	hs.run(m.Init())
	hs.settle()
	return hs
}

func (h *harness) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	h.outstanding++
	go func() { h.msgs <- cmdDone{cmd()} }()
}

// send gives msg to Update and runs the command it returns.
func (h *harness) send(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil:
		return
	case tea.BatchMsg:
		for _, c := range msg {
			h.run(c)
		}
		return
	case tea.QuitMsg:
		h.quit = true
		return
	}
	_, cmd := h.m.Update(msg)
	h.run(cmd)
}

// step takes the next message (a command's result or a streamed update)
// and gives it to Update; it fails the test after a deadline.
func (h *harness) step() {
	h.t.Helper()
	select {
	case msg := <-h.msgs:
		if d, ok := msg.(cmdDone); ok {
			h.outstanding--
			msg = d.msg
		}
		h.send(msg)
	case <-time.After(10 * time.Second):
		h.t.Fatalf("no message within 10s; screen:\n%s", h.screen())
	}
}

// settle runs every command to its end.
func (h *harness) settle() {
	h.t.Helper()
	for h.outstanding > 0 || len(h.msgs) > 0 {
		h.step()
	}
}

// until steps until cond holds.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("never %s; screen:\n%s", what, h.screen())
		}
		h.step()
	}
}

// press sends keys by name ("enter", "up", "ctrl+c", "f2").
func (h *harness) press(names ...string) {
	for _, n := range names {
		h.send(keyPress(n))
	}
}

// typeText types s a character at a time.
func (h *harness) typeText(s string) {
	for _, r := range s {
		h.send(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// enter types line and presses enter, then runs what it started,
// unless a stream is gated.
func (h *harness) enter(line string) {
	h.typeText(line)
	h.press("enter")
}

var keyCodes = map[string]rune{
	"enter": tea.KeyEnter, "up": tea.KeyUp, "down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight,
	"home": tea.KeyHome, "end": tea.KeyEnd, "esc": tea.KeyEscape, "pgup": tea.KeyPgUp, "pgdown": tea.KeyPgDown,
	"backspace": tea.KeyBackspace, "f1": tea.KeyF1, "f2": tea.KeyF2, "f3": tea.KeyF3,
}

func keyPress(name string) tea.KeyPressMsg {
	if mod, k, ok := strings.Cut(name, "+"); ok {
		m := map[string]tea.KeyMod{"ctrl": tea.ModCtrl, "alt": tea.ModAlt}[mod]
		if c, ok := keyCodes[k]; ok {
			return tea.KeyPressMsg{Code: c, Mod: m}
		}
		return tea.KeyPressMsg{Code: []rune(k)[0], Mod: m}
	}
	if c, ok := keyCodes[name]; ok {
		return tea.KeyPressMsg{Code: c}
	}
	return tea.KeyPressMsg{Code: []rune(name)[0], Text: name}
}

// screen is the view as plain text: no colours, no trailing blanks.
func (h *harness) screen() string {
	lines := strings.Split(ansi.Strip(h.m.View().Content), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// golden compares the screen with testdata/shell/name.golden (-update
// rewrites it) and checks it fits the terminal.
func (h *harness) golden(name string) {
	h.t.Helper()
	got := h.screen()
	lines := strings.Split(got, "\n")
	if len(lines) != h.m.st.Height {
		h.t.Errorf("%s: %d lines, want the terminal's %d", name, len(lines), h.m.st.Height)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > h.m.st.Width {
			h.t.Errorf("%s: line %d is %d cells wide, more than %d: %q", name, i, w, h.m.st.Width, l)
		}
	}
	path := filepath.Join("testdata", "shell", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			h.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			h.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		h.t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		h.t.Errorf("%s: screen differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// contains fails unless the screen shows each of subs.
func (h *harness) contains(subs ...string) {
	h.t.Helper()
	s := h.screen()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			h.t.Errorf("screen lacks %q:\n%s", sub, s)
		}
	}
}

// line returns the screen's line i (negative: from the end).
func (h *harness) line(i int) string {
	lines := strings.Split(h.screen(), "\n")
	if i < 0 {
		i += len(lines)
	}
	return lines[i]
}

// fakeScreen is a Screen that records what it gets and returns the
// command the test sets.
type fakeScreen struct {
	name   string
	opened int
	args   string
	keys   []string
	reply  tea.Cmd // what Update returns for the key "x"
}

func (s *fakeScreen) Name() string { return s.name }
func (s *fakeScreen) Open(*State) tea.Cmd {
	s.opened++
	return nil
}
func (s *fakeScreen) OpenArgs(_ *State, args string) tea.Cmd {
	s.opened++
	s.args = args
	return nil
}
func (s *fakeScreen) Update(_ *State, msg tea.Msg) tea.Cmd {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		s.keys = append(s.keys, k.String())
		if k.String() == "x" {
			return s.reply
		}
	}
	return nil
}
func (s *fakeScreen) View(st *State, w, h int) string {
	return "the " + s.name + " screen of branch " + st.Branch.Label
}
func (s *fakeScreen) Keys() []key.Binding {
	return []key.Binding{key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "act"))}
}
