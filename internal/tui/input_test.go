package tui

import (
	"fmt"
	"strings"
	"testing"
)

// TestInputHistory: up recalls earlier inputs (newest first), down goes
// back to the draft; an arrow is never text, and a recalled line sends
// as typed.
func TestInputHistory(t *testing.T) {
	f := newFakeShell()
	h := newHarness(t, f, 80, 24)
	h.press("up")
	if v := h.m.in.value(); v != "" {
		t.Fatalf("up with no history: input %q, want empty", v)
	}
	h.enter("first")
	h.settle()
	h.enter("second")
	h.settle()
	h.typeText("draft")
	for _, step := range []struct{ key, want string }{
		{"up", "second"}, {"up", "first"}, {"up", "first"}, {"down", "second"}, {"down", "draft"}, {"down", "draft"},
		{"up", "second"}, {"up", "first"},
	} {
		h.press(step.key)
		if v := h.m.in.value(); v != step.want {
			t.Fatalf("after %s: input %q, want %q", step.key, v, step.want)
		}
	}
	h.golden("input_recalled_80x24")
	h.press("enter")
	h.settle()
	if want := []string{"first", "second", "first"}; fmt.Sprint(f.submitted) != fmt.Sprint(want) {
		t.Errorf("submitted %q, want %q", f.submitted, want)
	}
	for _, s := range f.submitted {
		if strings.ContainsAny(s, "\x1b[") {
			t.Errorf("sent %q: an escape sequence went out as text", s)
		}
	}
}

// TestInputEditing: the input line moves by character, word and line
// and deletes words, as the text input's key map says.
func TestInputEditing(t *testing.T) {
	h := newHarness(t, newFakeShell(), 80, 24)
	h.typeText("hello world")
	h.press("home")
	h.typeText(">")
	h.press("end")
	h.typeText("!")
	h.press("alt+left")
	h.typeText("big ")
	h.press("backspace")
	if v := h.m.in.value(); v != ">hello bigworld!" {
		t.Fatalf("input %q, want %q", v, ">hello bigworld!")
	}
	h.press("right", "ctrl+w")
	if v := h.m.in.value(); v != ">hello orld!" {
		t.Errorf("after ctrl+w: input %q, want %q", v, ">hello orld!")
	}
}
