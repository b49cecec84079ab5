package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

// historyFakeSession is a transcript of 45 messages (the last exchange's
// question alone: its reply was cut off by a crash and recovered) with
// tool calls on reply 21 and a long question 22.
func historyFakeSession() *fakeSession {
	f := newFakeSession(23)
	f.msgs = f.msgs[:45]
	partial := "Step 23 needs the config file, then the server must be st"
	f.entry(45).Partial = &partial
	f.entry(42).Items = []messages.TranscriptItem{
		messages.ToolCall{CallID: "call_1", Name: "grep", Arguments: json.RawMessage(`{"q":"config"}`)},
		messages.ToolOutput{CallID: "call_1", Output: json.RawMessage(`"3 matches in config.yaml"`)},
		messages.ToolCall{CallID: "call_2", Name: "read_file", Arguments: json.RawMessage(`{"path":"/etc/x"}`)},
		messages.ToolOutput{CallID: "call_2", Output: json.RawMessage(`"permission denied"`), IsError: true},
		messages.Metadata{Key: "response_id", Value: "resp_1"},
	}
	f.entry(43).Text = "A long question. " + strings.Repeat("It goes on and on about the deployment, the config and the server. ", 6) +
		"\n\nAnd a second paragraph."
	return f
}

func TestHistoryScreenPages(t *testing.T) {
	f := historyFakeSession()
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	if got, want := f.calls, []string{"history  20"}; !slices.Equal(got, want) {
		t.Fatalf("Open: backend calls %q, want %q", got, want)
	}
	r.golden("history_newest", 80, 24)

	r.press("pgup")
	older := f.entry(26).Turn // the first message of the newest page
	if got, want := f.calls[len(f.calls)-1], fmt.Sprintf("history %s 20", older); got != want {
		t.Fatalf("pgup: backend call %q, want %q", got, want)
	}
	r.golden("history_page2", 80, 24)

	r.press("left") // left is pgup too
	r.golden("history_page3", 80, 24)
	r.press("pgup")
	if st := r.takeShell(); len(st) != 1 || !strings.Contains(st[0].(StatusMsg).Text, "oldest page") {
		t.Errorf("pgup on the oldest page: shell got %v, want a StatusMsg saying it is the oldest", st)
	}

	r.press("pgdown")
	if got := r.view(80, 24); !strings.Contains(got, "page 2 · messages #6–#25") {
		t.Errorf("pgdown from page 3: want page 2 (#6–#25), got\n%s", got)
	}
	r.press("right", "pgdown")
	if got := r.view(80, 24); !strings.Contains(got, "page 1 · messages #26–#45") {
		t.Errorf("right, pgdown: want page 1 (#26–#45), got\n%s", got)
	}
	if st := r.takeShell(); len(st) != 1 || !strings.Contains(st[0].(StatusMsg).Text, "newest page") {
		t.Errorf("pgdown on the newest page: shell got %v, want a StatusMsg saying it is the newest", st)
	}
}

// TestHistoryScreenSelect checks that moving the cursor scrolls the list
// so that the selected message stays visible, and the re-layout at
// another size.
func TestHistoryScreenSelect(t *testing.T) {
	f := historyFakeSession()
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	for range 5 {
		r.press("up")
	}
	r.golden("history_select", 80, 24)
	r.golden("history_small", 50, 12)
	for range 30 {
		r.press("up")
	}
	if got := r.view(80, 24); !strings.Contains(got, "› #26 assistant") {
		t.Errorf("30 × up: want #26 (the page's first) selected and shown, got\n%s", got)
	}
}

func TestHistoryScreenShow(t *testing.T) {
	f := historyFakeSession()
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	m := r.scr.(Modal)
	r.press("up", "up", "up") // #42, the reply with tool calls
	r.press("enter")
	if !m.Modal() {
		t.Errorf("showing a message: Modal() = false, want true (esc goes back to the list)")
	}
	r.golden("history_show", 80, 24)
	r.press("esc")
	if m.Modal() {
		t.Errorf("esc from the message: Modal() = true, want false")
	}
	if st := r.takeShell(); len(st) != 0 {
		t.Errorf("esc from the message: shell got %v, want nothing (the screen stays)", st)
	}
	if got := r.view(80, 24); !strings.Contains(got, "› #42 assistant") {
		t.Errorf("esc from the message: want the list with #42 selected, got\n%s", got)
	}
}

// TestHistoryScreenShowScroll scrolls a message longer than the screen.
func TestHistoryScreenShowScroll(t *testing.T) {
	f := historyFakeSession()
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	r.press("up", "up", "enter") // #43, the long question
	top := r.view(80, 8)
	if strings.Contains(top, "second paragraph") {
		t.Fatalf("#43 at 80×8 shows its end at once:\n%s", top)
	}
	r.press("down", "down", "down", "down", "down")
	if got := r.view(80, 8); !strings.Contains(got, "And a second paragraph.") {
		t.Errorf("#43 at 80×8 after 5 × down: want its end shown, got\n%s", got)
	}
	r.press("up", "up", "up", "up", "up")
	if got := r.view(80, 8); got != top {
		t.Errorf("back up: got\n%s\nwant\n%s", got, top)
	}
}

func TestHistoryScreenFork(t *testing.T) {
	f := historyFakeSession()
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	r.press("up", "up", "up") // #42, the reply of turn 21 (#41)
	r.press("f")
	if !r.scr.(Modal).Modal() {
		t.Fatal("f: Modal() = false, want true while the label is asked")
	}
	r.typeText("try-b")
	r.golden("history_fork_ask", 80, 24)
	r.press("enter")
	want := fmt.Sprintf("fork %s %s try-b", f.branch("main").ID, f.entry(41).Turn)
	if got := f.calls[len(f.calls)-1]; got != want {
		t.Errorf("fork: backend call %q, want %q", got, want)
	}
	st := r.takeShell()
	if len(st) != 1 {
		t.Fatalf("fork: shell got %v, want one StatusMsg", st)
	}
	if s, ok := st[0].(StatusMsg); !ok || s.Err != nil || !strings.Contains(s.Text, "forked at turn 21: branch try-b (F0RK0001)") {
		t.Errorf("fork: shell got %#v, want StatusMsg forked at turn 21", st[0])
	}

	// A label left empty is fork-N; a failed fork is an error on the status line.
	f.forkErr = errors.New("actors: not forkable: turn 21 is Responding")
	r.press("f", "enter")
	if got, want := f.calls[len(f.calls)-1], fmt.Sprintf("fork %s %s fork-21", f.branch("main").ID, f.entry(41).Turn); got != want {
		t.Errorf("fork with no label: backend call %q, want %q", got, want)
	}
	st = r.takeShell()
	if len(st) != 1 || st[0].(StatusMsg).Err == nil || !strings.Contains(st[0].(StatusMsg).Err.Error(), "turn 21 is Responding") {
		t.Errorf("failed fork: shell got %v, want a StatusMsg with the backend's error", st)
	}

	// Esc cancels the question without forking.
	n := len(f.calls)
	r.press("f", "esc")
	if len(f.calls) != n || r.scr.(Modal).Modal() {
		t.Errorf("f, esc: backend calls %q, Modal() %v; want no fork and the question gone", f.calls[n:], r.scr.(Modal).Modal())
	}
}

func TestHistoryScreenRollback(t *testing.T) {
	f := historyFakeSession()
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	r.press("up", "up") // #43, the question of turn 22
	r.press("r")
	r.golden("history_rollback_ask", 80, 24)
	r.press("enter")
	want := fmt.Sprintf("fork %s %s rollback-22", f.branch("main").ID, f.entry(43).Turn)
	if got := f.calls[len(f.calls)-1]; got != want {
		t.Errorf("rollback: backend call %q, want %q", got, want)
	}
	var sw *SwitchMsg
	for _, m := range r.takeShell() {
		if s, ok := m.(SwitchMsg); ok {
			sw = &s
		}
	}
	if sw == nil || sw.Branch.Label != "rollback-22" || sw.Branch.Parent != f.branch("main").ID {
		t.Errorf("rollback: SwitchMsg %+v, want one to the new branch rollback-22 forked from main", sw)
	}
}

// TestHistoryScreenRollbackPageEdge rolls back at a reply that opens its
// page: its question is on the older page, which the screen reads.
func TestHistoryScreenRollbackPageEdge(t *testing.T) {
	f := historyFakeSession()
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	r.press("pgup") // #6–#25: #6 is the reply of turn 3 (#5)
	r.press("home")
	r.press("r")
	r.typeText("back-to-3")
	r.press("enter")
	want := fmt.Sprintf("fork %s %s back-to-3", f.branch("main").ID, f.entry(5).Turn)
	if got := f.calls[len(f.calls)-1]; got != want {
		t.Errorf("rollback at #6: backend call %q, want %q", got, want)
	}
	sw := false
	for _, m := range r.takeShell() {
		_, ok := m.(SwitchMsg)
		sw = sw || ok
	}
	if !sw {
		t.Errorf("rollback at #6: no SwitchMsg")
	}
}

func TestHistoryScreenSteps(t *testing.T) {
	f := historyFakeSession()
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	r.press("up") // #44, the reply of turn 22
	r.press("s")
	st := r.takeShell()
	if len(st) != 1 || !strings.Contains(st[0].(StatusMsg).Text, "/steps 22") {
		t.Errorf("s on #44: shell got %v, want a StatusMsg telling /steps 22", st)
	}
}

func TestHistoryScreenErrors(t *testing.T) {
	f := historyFakeSession()
	f.historyErr = errors.New("persistence: closed")
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	if got := r.view(80, 24); !strings.Contains(got, "could not read the history: persistence: closed") {
		t.Errorf("a failed load: want the error on the screen, got\n%s", got)
	}
	if st := r.takeShell(); len(st) != 1 || st[0].(StatusMsg).Err == nil {
		t.Errorf("a failed load: shell got %v, want a StatusMsg with Err", st)
	}

	// A page that fails to load leaves the screen on the page it shows.
	f.historyErr = nil
	r = newSessionRun(t, f, "main", NewHistoryScreen())
	f.historyErr = errors.New("persistence: closed")
	r.press("pgup")
	if got := r.view(80, 24); !strings.Contains(got, "page 1 · messages #26–#45") {
		t.Errorf("a failed pgup: want page 1 still shown, got\n%s", got)
	}
	f.historyErr = nil
	r.press("pgup")
	if got := r.view(80, 24); !strings.Contains(got, "page 2 · messages #6–#25") {
		t.Errorf("pgup after a failed one: want page 2, got\n%s", got)
	}
}

func TestHistoryScreenEmpty(t *testing.T) {
	f := newFakeSession(0)
	r := newSessionRun(t, f, "main", NewHistoryScreen())
	if got := r.view(80, 24); !strings.Contains(got, "no messages yet") {
		t.Errorf("no messages: got\n%s", got)
	}
	r.press("f", "r", "s", "enter", "up", "down")
	if st := r.takeShell(); len(st) != 0 || r.scr.(Modal).Modal() {
		t.Errorf("keys on an empty history: shell got %v, Modal %v; want nothing", st, r.scr.(Modal).Modal())
	}
}
