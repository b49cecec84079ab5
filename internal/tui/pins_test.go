package tui

import (
	"errors"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
)

// shellKinds is the kinds of the messages for the shell, in order:
// "status", "error", "switch", "refresh", "close".
func shellKinds(ms []tea.Msg) []string {
	var out []string
	for _, m := range ms {
		switch m := m.(type) {
		case StatusMsg:
			if m.Err != nil {
				out = append(out, "error")
			} else {
				out = append(out, "status")
			}
		case SwitchMsg:
			out = append(out, "switch")
		case RefreshMsg:
			out = append(out, "refresh")
		case CloseMsg:
			out = append(out, "close")
		}
	}
	slices.Sort(out) // a batch's order is not the screen's to promise
	return out
}

func TestPinsScreenList(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewPinsScreen())
	r.golden("pins", 80, 24)
	r.golden("pins_small", 40, 8)

	f.pins = nil
	r.run(r.scr.Open(r.st))
	if got := r.view(80, 24); !strings.Contains(got, "no pinned facts: a pins one") {
		t.Errorf("no pins: got\n%s", got)
	}
	r.press("e", "x", "delete")
	if r.scr.(Modal).Modal() {
		t.Errorf("e, x with no pins opened a question")
	}
}

func TestPinsScreenAdd(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewPinsScreen())
	r.press("a")
	r.typeText("Prod is frozen on Fridays.")
	r.golden("pins_add_ask", 80, 24)
	r.press("enter")
	if got, want := f.calls[len(f.calls)-1], "pin Prod is frozen on Fridays."; got != want {
		t.Errorf("add: backend call %q, want %q", got, want)
	}
	if got, want := shellKinds(r.takeShell()), []string{"refresh", "status"}; !slices.Equal(got, want) {
		t.Errorf("add: shell got %v, want %v (the header's pins changed)", got, want)
	}
	r.golden("pins_added", 80, 24) // the new pin, selected

	// Over the limit: the backend's error on the status line and on the
	// screen, and the text kept to shorten it.
	long := "The staging cluster lives in eu-central-1 and is rebuilt nightly."
	r.press("a")
	r.typeText(long)
	r.press("enter")
	st := r.takeShell()
	if got, want := shellKinds(st), []string{"error"}; !slices.Equal(got, want) {
		t.Fatalf("add too long: shell got %v, want %v", got, want)
	}
	if err := st[0].(StatusMsg).Err; !strings.Contains(err.Error(), "limit 64 (context.max_pin_bytes)") {
		t.Errorf("add too long: error %q, want the backend's limit", err)
	}
	if !r.scr.(Modal).Modal() {
		t.Fatalf("add too long: the question is gone, want it asked again")
	}
	r.golden("pins_add_refused", 80, 24)
	for range len(" and is rebuilt nightly.") {
		r.press("backspace")
	}
	r.press("enter")
	if got, want := f.calls[len(f.calls)-1], "pin The staging cluster lives in eu-central-1"; got != want {
		t.Errorf("add shortened: backend call %q, want %q", got, want)
	}
	if got, want := len(f.pins), 4; got != want {
		t.Errorf("pins after two adds: %d, want %d", got, want)
	}

	// The count limit.
	r.press("a")
	r.typeText("one more")
	r.press("enter")
	if st := r.takeShell(); len(st) == 0 || !strings.Contains(st[len(st)-1].(StatusMsg).Err.Error(), "limit 4 (context.max_pins)") {
		t.Errorf("a fifth pin: shell got %v, want the max_pins error", st)
	}
	r.press("esc")
	if n := len(f.calls); f.calls[n-1] != "pin one more" {
		t.Errorf("esc after a refused add called the backend: %q", f.calls[n-1])
	}
}

func TestPinsScreenEdit(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewPinsScreen())
	r.press("down", "e") // #3
	r.golden("pins_edit_ask", 80, 24)
	for range len(" without asking first.") {
		r.press("backspace")
	}
	r.typeText(".")
	r.press("enter")
	want := "editpin 3 Deploys go to eu-west-1 only; never touch the us-east-1 stack."
	if got := f.calls[len(f.calls)-1]; got != want {
		t.Errorf("edit: backend call %q, want %q", got, want)
	}
	if got, want := shellKinds(r.takeShell()), []string{"refresh", "status"}; !slices.Equal(got, want) {
		t.Errorf("edit: shell got %v, want %v", got, want)
	}
	r.golden("pins_edited", 80, 24)

	// An emptied fact is not sent: x unpins.
	n := len(f.calls)
	r.press("e")
	for range 80 {
		r.press("backspace")
	}
	r.press("enter")
	if len(f.calls) != n {
		t.Errorf("edit to empty: backend calls %q, want none", f.calls[n:])
	}
}

func TestPinsScreenRemove(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewPinsScreen())
	r.press("x")
	r.golden("pins_remove_ask", 80, 24)
	r.press("n")
	if slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, "unpin") }) {
		t.Errorf("x, n: backend calls %q, want no unpin", f.calls)
	}
	r.press("delete", "y")
	if got, want := f.calls[len(f.calls)-1], "unpin 1"; got != want {
		t.Errorf("delete, y: backend call %q, want %q", got, want)
	}
	if got, want := shellKinds(r.takeShell()), []string{"refresh", "status"}; !slices.Equal(got, want) {
		t.Errorf("unpin: shell got %v, want %v", got, want)
	}
	r.golden("pins_removed", 80, 24)

	// A pin unpinned elsewhere in the meantime: the backend's error.
	f.pins = nil
	r.press("x", "y")
	st := r.takeShell()
	if len(st) != 1 || st[0].(StatusMsg).Err == nil || !strings.Contains(st[0].(StatusMsg).Err.Error(), "no pinned fact #3") {
		t.Errorf("unpin a pin gone: shell got %v, want the backend's error", st)
	}
	if errors.Is(st[0].(StatusMsg).Err, errFakeSession) {
		t.Errorf("unpin called a method the screen should not")
	}
}
