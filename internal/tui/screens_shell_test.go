package tui

import (
	"strings"
	"testing"
)

// realScreens are the screens cmd/ctxinf registers, in its order.
func realScreens() []Screen {
	return []Screen{NewHistoryScreen(), NewBranchesScreen(), NewPinsScreen(), NewChunksScreen(),
		NewPendingScreen(), NewStepsScreen(), NewModelsScreen()}
}

// TestRealScreensInShell runs the screens inside the shell: their keys,
// esc leaving a screen's own mode before it closes the screen (Modal),
// and the slash commands that pass arguments (/steps N, /search Q).
func TestRealScreensInShell(t *testing.T) {
	h := newHarness(t, newFakeShell(), 80, 24, realScreens()...)
	name := func() string {
		if h.m.active == nil {
			return ""
		}
		return h.m.active.screen.Name()
	}
	for key, want := range map[string]string{"f2": "History", "f3": "Branches", "f4": "Pins", "f5": "Chunks",
		"f6": "Pending", "f7": "Steps", "f8": "Models"} {
		h.press(key)
		h.settle()
		if !strings.Contains(name(), want) {
			t.Errorf("%s opened %q, want %s", key, name(), want)
		}
		h.press("esc")
		h.settle()
		if key == "f5" && name() != "" {
			h.press("esc") // the chunks screen opens on its query input
			h.settle()
		}
		if name() != "" {
			t.Errorf("esc after %s left %q open", key, name())
		}
	}

	// Pins: "a" asks for a fact (modal); esc cancels the question, and
	// only the next esc closes the screen.
	h.press("f4")
	h.settle()
	h.press("a")
	if md, ok := h.m.active.screen.(Modal); !ok || !md.Modal() {
		t.Fatal("pins: after a, the screen is not asking")
	}
	h.press("esc")
	h.settle()
	if name() != "Pins" {
		t.Fatalf("esc while the pins screen asks closed it (open: %q)", name())
	}
	h.press("esc")
	h.settle()
	if name() != "" {
		t.Errorf("second esc left %q open", name())
	}

	// /steps N opens the steps screen on turn N.
	h.enter("/steps 1")
	h.settle()
	st, ok := h.m.active.screen.(*StepsScreen)
	if !ok || st.seq != 1 {
		t.Fatalf("/steps 1: open %q (seq %v), want the steps of turn 1", name(), st)
	}
	h.press("esc")
	h.settle()

	// /search Q runs retrieval for Q on the chunks screen.
	h.enter("/search vault code")
	h.settle()
	cs, ok := h.m.active.screen.(*ChunksScreen)
	if !ok || cs.query != "vault code" {
		t.Fatalf("/search vault code: open %q, want the chunks screen searching for it", name())
	}
}
