package tui

import (
	"testing"

	tea "charm.land/bubbletea/v2"
)

// TestSessionScreensEsc checks the rule the shell relies on: out of their own
// modes the screens are not Modal and ignore esc (the shell closes
// them); in a question they are, and esc only leaves the question.
func TestSessionScreensEsc(t *testing.T) {
	for _, c := range []struct {
		scr  Screen
		mode []string // keys that open a question
	}{
		{NewHistoryScreen(), []string{"f"}},
		{NewBranchesScreen(), []string{"f"}},
		{NewPinsScreen(), []string{"a"}},
	} {
		f := historyFakeSession()
		r := newSessionRun(t, f, "main", c.scr)
		m, ok := c.scr.(Modal)
		if !ok {
			t.Fatalf("%s is not a Modal", c.scr.Name())
		}
		if m.Modal() {
			t.Errorf("%s: Modal() = true on open, want false", c.scr.Name())
		}
		if cmd := c.scr.Update(r.st, sessionKey("esc")); cmd != nil {
			t.Errorf("%s: Update(esc) out of a question returned a command, want nil", c.scr.Name())
		}
		r.press(c.mode...)
		if !m.Modal() {
			t.Errorf("%s: Modal() = false in a question, want true", c.scr.Name())
		}
		if cmd := c.scr.Update(r.st, sessionKey("esc")); cmd != nil {
			t.Errorf("%s: Update(esc) in a question returned a command, want nil", c.scr.Name())
		}
		if m.Modal() {
			t.Errorf("%s: Modal() = true after esc, want false", c.scr.Name())
		}
		if len(c.scr.Keys()) == 0 {
			t.Errorf("%s: no Keys", c.scr.Name())
		}
	}
}

// TestSessionScreensFit renders the screens in every mode at many sizes: each
// fills exactly its area and no line is wider.
func TestSessionScreensFit(t *testing.T) {
	sizes := [][2]int{{80, 24}, {40, 10}, {120, 40}, {20, 5}, {10, 3}, {1, 1}}
	for _, c := range []struct {
		scr  Screen
		keys [][]string
	}{
		{NewHistoryScreen(), [][]string{nil, {"up", "up", "up", "enter"}, {"esc", "f"}, {"esc", "pgup"}}},
		{NewBranchesScreen(), [][]string{nil, {"d"}, {"n", "/", "e", "x"}, {"enter"}}},
		{NewPinsScreen(), [][]string{nil, {"e"}, {"esc", "x"}}},
	} {
		f := historyFakeSession()
		r := newSessionRun(t, f, "fix-typo", c.scr)
		for _, ks := range c.keys {
			r.press(ks...)
			for _, sz := range sizes {
				r.view(sz[0], sz[1])
				r.send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			}
		}
	}
}
