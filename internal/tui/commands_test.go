package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/messages"
)

// TestSwitch switches by label, by short id (the header's) and by id
// prefix, and says why when a name matches no branch or several.
func TestSwitch(t *testing.T) {
	f := newFakeShell()
	main, exp := f.branches[0], f.branches[1]
	h := newHarness(t, f, 80, 24)

	h.enter("/switch experiment")
	h.settle()
	if h.m.st.Branch.ID != exp.ID {
		t.Fatalf("/switch experiment: on %s, want %s", h.m.st.Branch.ID, exp.ID)
	}
	h.golden("switch_label_80x24")
	h.contains("branch experiment "+short(exp.ID), "state #1", "now on branch experiment", "assistant: An experiment.")

	h.enter("/switch " + strings.ToLower(short(main.ID)))
	h.settle()
	if h.m.st.Branch.ID != main.ID {
		t.Fatalf("/switch %s (short id): on %s, want main %s", short(main.ID), h.m.st.Branch.ID, main.ID)
	}

	h.enter("/switch " + exp.ID.String())
	h.settle()
	if h.m.st.Branch.ID != exp.ID {
		t.Fatalf("/switch by full id: on %s, want %s", h.m.st.Branch.ID, exp.ID)
	}

	h.enter("/switch nosuch")
	h.settle()
	if h.m.st.Branch.ID != exp.ID {
		t.Errorf("/switch nosuch moved to %s", h.m.st.Branch.ID)
	}
	h.contains(`error: /switch: tui: no such branch: "nosuch" is no branch's label (labels: mai`)

	// The fake's ids share their first characters: a prefix names both.
	prefix := main.ID.String()[:6]
	h.enter("/switch " + prefix)
	h.settle()
	if !strings.Contains(h.line(-2), "ambiguous branch name") {
		t.Errorf("/switch %s (both branches' prefix): status %q, want it to say it matches 2 branches", prefix, h.line(-2))
	}
}

// TestFork forks at a turn with a label, and at the head with a free
// default label, and moves to the fork.
func TestFork(t *testing.T) {
	f := newFakeShell()
	main := f.branches[0]
	h := newHarness(t, f, 80, 24)

	h.enter("/fork 1 idea")
	h.settle()
	if len(f.forks) != 1 || f.forks[0] != (forkCall{from: main.ID, at: fakeID[messages.TurnID](1), label: "idea"}) {
		t.Fatalf("forks %+v, want one of main at turn 1's id labeled idea", f.forks)
	}
	if h.m.st.Branch.Label != "idea" {
		t.Fatalf("after /fork: on %q, want the fork idea", h.m.st.Branch.Label)
	}
	h.golden("fork_80x24")
	h.contains("branch idea", "forked at turn 1 of main "+short(main.ID)+": now on branch idea")

	h.enter("/fork")
	h.enter("/fork") // waits for the first: picks its label after it

	h.settle()
	if n := len(f.forks); n != 3 || f.forks[1].label != "fork" || f.forks[2].label != "fork-2" || !f.forks[2].at.IsZero() {
		t.Errorf("forks %+v, want /fork at the head labeled fork, then fork-2", f.forks)
	}
	h.enter("/fork main")
	h.settle()
	h.contains(`error: /fork: label "main" is taken in this session`)
	h.enter("/fork 9")
	h.settle()
	h.contains("error: /fork: turn 9: persistence: not found")
}

// TestForkTypedQuickly enters /fork twice before the first fork lands:
// the second waits for the first and runs on it as if typed after it,
// so the forks are labeled fork and fork-2. A /fork whose fork fails
// does not hold back the one queued after it.
func TestForkTypedQuickly(t *testing.T) {
	f := newFakeShell()
	main := f.branches[0]
	h := newHarness(t, f, 80, 24)

	// enterHeld enters each line; the commands the enters return are
	// started only once every line is in, and their Fork calls are held
	// until each of them has reached Fork (has read the branches): the
	// worst order for labels picked from the branches read. Each command
	// must reach Fork.
	enterHeld := func(lines ...string) {
		t.Helper()
		arrive, proceed := make(chan struct{}), make(chan struct{})
		f.mu.Lock()
		f.forkArrive, f.forkProceed = arrive, proceed
		f.mu.Unlock()
		var cmds []tea.Cmd
		for _, l := range lines {
			h.typeText(l)
			h.settle()
			_, cmd := h.m.Update(keyPress("enter"))
			if cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
		for _, c := range cmds {
			h.run(c)
		}
		for range cmds {
			<-arrive
		}
		f.mu.Lock()
		f.forkArrive, f.forkProceed = nil, nil
		f.mu.Unlock()
		close(proceed)
	}

	enterHeld("/fork", "/fork")
	if !strings.Contains(h.line(-2), "/fork: waits for the fork under way") {
		t.Errorf("status %q while the second /fork waits, want it to say so", h.line(-2))
	}
	h.settle()
	if len(f.forks) != 2 || f.forks[0] != (forkCall{from: main.ID, label: "fork"}) ||
		f.forks[1] != (forkCall{from: f.branches[2].ID, label: "fork-2"}) {
		t.Fatalf("forks %+v, want main at the head labeled fork, then that fork at its head labeled fork-2", f.forks)
	}
	if h.m.st.Branch.Label != "fork-2" {
		t.Errorf("after /fork twice: on %q, want fork-2", h.m.st.Branch.Label)
	}
	h.contains("forked at the head of fork " + short(f.branches[2].ID) + ": now on branch fork-2")

	// The UI refuses /fork main (a label taken) before calling Fork; the
	// /fork and /rollback queued after it still run, in order.
	h.enter("/fork main")
	h.enter("/fork")
	h.enter("/rollback 1")
	h.settle()
	if len(f.forks) != 3 || f.forks[2] != (forkCall{from: f.branches[3].ID, label: "fork-3"}) {
		t.Errorf("forks %+v, want the /fork after the refused /fork main to fork fork-2 as fork-3", f.forks)
	}
	h.contains("error: /rollback: turn 1: persistence: not found")
}

// TestRollback forks at turn N and switches to it.
func TestRollback(t *testing.T) {
	f := newFakeShell()
	main := f.branches[0]
	h := newHarness(t, f, 80, 24)
	h.enter("/rollback 1")
	h.settle()
	if len(f.forks) != 1 || f.forks[0] != (forkCall{from: main.ID, at: fakeID[messages.TurnID](1), label: "rollback-1"}) {
		t.Fatalf("forks %+v, want one of main at turn 1 labeled rollback-1", f.forks)
	}
	if h.m.st.Branch.Label != "rollback-1" {
		t.Errorf("after /rollback 1: on %q, want rollback-1", h.m.st.Branch.Label)
	}
	h.golden("rollback_80x24")
	h.enter("/rollback")
	h.contains("error: /rollback: usage /rollback N")
}

func TestPin(t *testing.T) {
	f := newFakeShell()
	h := newHarness(t, f, 80, 24)
	h.enter("/pin The user's name is Ada")
	h.settle()
	if fmt.Sprint(f.pins) != "[The user's name is Ada]" {
		t.Fatalf("pins %q, want the fact", f.pins)
	}
	h.golden("pin_80x24")
	h.contains("pinned #1: The user's name is Ada")
	h.enter("/pin")
	h.contains("error: /pin: usage /pin FACT")
}

func TestCommit(t *testing.T) {
	f := newFakeShell()
	h := newHarness(t, f, 80, 24)
	h.contains("state #3", "pending 1")
	h.enter("/commit")
	h.settle()
	if f.commits != 1 {
		t.Fatalf("CommitPending called %d times, want 1", f.commits)
	}
	h.golden("commit_80x24")
	h.contains("state #4", "pending 0", "committing the pending turns")
}

func TestModel(t *testing.T) {
	f := newFakeShell()
	h := newHarness(t, f, 80, 24)
	h.enter("/model")
	h.settle()
	h.contains("models: echo-1, gpt")
	h.enter("/model gpt")
	h.settle()
	if fmt.Sprint(f.selected) != "[gpt]" {
		t.Fatalf("selected %q, want [gpt]", f.selected)
	}
	h.golden("model_80x24")
	h.contains("model gpt", "model gpt selected for the next turns")
	h.enter("/model nosuch")
	h.settle()
	h.contains(`error: /model nosuch: no model "nosuch"`)
	h.enter("/model default")
	h.settle()
	if fmt.Sprint(f.selected) != "[gpt ]" {
		t.Errorf("selected %q, want gpt then the default (\"\")", f.selected)
	}
	h.contains("model echo-1")
}

// TestUnknownCommand and the commands of screens not built in say so.
func TestUnknownCommand(t *testing.T) {
	h := newHarness(t, newFakeShell(), 80, 24)
	h.enter("/frobnicate")
	h.contains("error: unknown command /frobnicate (F1 or /help lists them)")
	h.enter("/history")
	h.contains("error: /history: no history screen in this build")
}

// TestScreens opens screens by key and command (with its arguments),
// closes them with esc, and acts on what they return: a status, a
// switch, a refresh, a close.
func TestScreens(t *testing.T) {
	f := newFakeShell()
	hist := &fakeScreen{name: "History"}
	br := &fakeScreen{name: "Branches"}
	steps := &fakeScreen{name: "Steps"}
	// Given out of order: the keys follow screenOrder.
	h := newHarness(t, f, 80, 24, steps, br, hist)

	h.press("f2")
	if h.m.active == nil || h.m.active.screen != hist || hist.opened != 1 {
		t.Fatalf("F2 opened %v, want the history screen", h.m.active)
	}
	h.golden("screen_history_80x24")
	h.contains("the History screen of branch main", "esc close", "x act", "· History")
	h.press("esc")
	if h.m.active != nil {
		t.Fatal("esc left the screen open")
	}
	h.contains("you: What is ContextInfinity?")

	h.enter("/steps 2")
	if h.m.active == nil || h.m.active.screen != steps || steps.args != "2" {
		t.Fatalf("/steps 2: active %v, args %q; want the steps screen with 2", h.m.active, steps.args)
	}
	h.press("esc")
	h.enter("/steps x")
	h.contains("error: /steps: N must be a turn number")

	h.press("f3")
	if h.m.active == nil || h.m.active.screen != br {
		t.Fatalf("F3 opened %v, want the branches screen", h.m.active)
	}
	h.press("a", "up", "enter")
	if fmt.Sprint(br.keys) != "[a up enter]" {
		t.Errorf("the screen got keys %q, want [a up enter]", br.keys)
	}
	br.reply = func() tea.Msg { return StatusMsg{Text: "hello from the screen"} }
	h.press("x")
	h.settle()
	h.contains("hello from the screen")
	br.reply = func() tea.Msg { return SwitchMsg{Branch: f.branches[1]} }
	h.press("x")
	h.settle()
	if h.m.st.Branch.ID != f.branches[1].ID || h.m.active != nil {
		t.Fatalf("SwitchMsg: on %s, screen %v; want experiment, the conversation", h.m.st.Branch.Label, h.m.active)
	}
	h.contains("now on branch experiment", "assistant: An experiment.")

	h.press("f3")
	br.reply = func() tea.Msg { return CloseMsg{} }
	h.press("x")
	h.settle()
	if h.m.active != nil {
		t.Error("CloseMsg left the screen open")
	}
	h.press("f3")
	f.mu.Lock()
	info := f.info[f.branches[1].ID]
	info.Pending = 7
	f.info[f.branches[1].ID] = info
	f.mu.Unlock()
	br.reply = func() tea.Msg { return RefreshMsg{} }
	h.press("x")
	h.settle()
	h.contains("pending 7")
}

// TestFullHelp lists every key and command at 80×24, and toggles with
// F1 and ? (? only on an empty input line, where it is not text).
func TestFullHelp(t *testing.T) {
	h := newHarness(t, newFakeShell(), 80, 24, &fakeScreen{name: "History"}, &fakeScreen{name: "Pinned facts"})
	h.press("?")
	if !h.m.showHelp {
		t.Fatal("? on an empty line did not open the help")
	}
	h.golden("help_80x24")
	s := h.screen()
	for _, c := range commands {
		if !strings.Contains(s, c.name) {
			t.Errorf("full help lacks %s", c.name)
		}
	}
	for _, k := range []string{"enter", "↑/↓", "pgup/pgdn", "esc", "ctrl+c", "ctrl+d", "F1/?", "home/end", "alt+←/→", "F2", "F3"} {
		if !strings.Contains(s, k) {
			t.Errorf("full help lacks the key %s", k)
		}
	}
	h.press("esc")
	if h.m.showHelp {
		t.Fatal("esc did not close the help")
	}
	h.press("f1")
	if !h.m.showHelp {
		t.Fatal("F1 did not open the help")
	}
	h.press("f1")
	h.typeText("why?")
	if h.m.showHelp || h.m.in.value() != "why?" {
		t.Errorf("? in a line: help %v, input %q; want no help, why?", h.m.showHelp, h.m.in.value())
	}
}

// TestFullHelpScrolls: on a terminal too short for every row, the full
// help says which rows it shows, ↓ and pgdn scroll to the last ones, and
// no entry is cut at 80 columns.
func TestFullHelpScrolls(t *testing.T) {
	h := newHarness(t, newFakeShell(), 80, 14, realScreens()...)
	h.press("f1")
	first := h.screen()
	if !strings.Contains(first, "Keys and commands 1–") || !strings.Contains(first, "scroll") {
		t.Fatalf("a short terminal's help does not say it scrolls:\n%s", first)
	}
	if strings.Contains(first, "/quit ") {
		t.Fatalf("the last command is on the first page already: the test does not test scrolling:\n%s", first)
	}
	h.press("pgdown", "pgdown", "down", "down", "down")
	last := h.screen()
	if !strings.Contains(last, "/quit") || strings.Contains(last, "enter     send") {
		t.Errorf("after scrolling down the help does not end with /quit:\n%s", last)
	}
	for _, l := range strings.Split(first+"\n"+last, "\n") {
		if strings.Contains(l, "…") {
			t.Errorf("a help line is cut: %q", l)
		}
	}
	h.press("pgup", "pgup", "up", "up", "up")
	if !strings.Contains(h.screen(), "enter     send") {
		t.Errorf("pgup/up do not scroll back to the top:\n%s", h.screen())
	}
}
