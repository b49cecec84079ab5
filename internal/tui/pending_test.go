package tui

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

func TestPendingListsAndShowsTurns(t *testing.T) {
	f := newFakeTurns()
	p := NewPendingScreen().(*PendingScreen)
	d := driveTurns(t, f, p)
	d.golden("pending")
	if p.Modal() {
		t.Error("Modal() = true on the list, want false")
	}
	d.press("down", "enter")
	if !p.Modal() {
		t.Error("Modal() = false while a turn is shown, want true (Esc goes back to the list)")
	}
	d.golden("pending_turn")
	d.press("esc")
	if p.reading {
		t.Error("Esc on a turn did not go back to the list")
	}
	d.view(40, 10)
	d.view(20, 4)
}

func TestPendingCommitNow(t *testing.T) {
	f := newFakeTurns()
	d := driveTurns(t, f, NewPendingScreen())
	d.takeShell()
	d.press("c")
	if n := f.called("CommitPending"); n != 1 {
		t.Fatalf("c called CommitPending %d times, want 1", n)
	}
	msgs := d.takeShell()
	st := statuses(msgs)
	if len(st) != 1 || st[0].Err != nil || st[0].Text != "committed 2 pending turns into the summary" {
		t.Errorf("status after the commit = %+v, want the 2 turns committed", st)
	}
	if !hasMsg[RefreshMsg](msgs) {
		t.Error("the commit did not ask the shell to refresh its header")
	}
	if n := f.called("Pending"); n != 2 {
		t.Errorf("Pending was read %d times, want 2 (the commit reloads the list)", n)
	}
	d.golden("pending_commit")

	d.press("c") // nothing left: nothing to commit
	if n := f.called("CommitPending"); n != 1 {
		t.Errorf("c with nothing pending called CommitPending (%d calls)", n)
	}
	if st := statuses(d.takeShell()); len(st) != 1 || !strings.Contains(st[0].Text, "nothing to commit") {
		t.Errorf("status = %+v, want nothing to commit", st)
	}
}

func TestPendingCommitErrorIsStatus(t *testing.T) {
	f := newFakeTurns()
	f.commitErr = errors.New("branch is busy: turn in flight")
	d := driveTurns(t, f, NewPendingScreen())
	d.takeShell()
	d.press("c")
	msgs := d.takeShell()
	if st := statuses(msgs); len(st) != 1 || !errors.Is(st[0].Err, f.commitErr) {
		t.Errorf("status = %+v, want the commit's error", st)
	}
	if hasMsg[RefreshMsg](msgs) {
		t.Error("a failed commit asked for a refresh")
	}
	if v := d.view(80, 20); !strings.Contains(v, "Commit failed: branch is busy") {
		t.Errorf("the screen does not say the commit failed:\n%s", v)
	}
}

func TestFindEntriesWalksPages(t *testing.T) {
	f := newFakeTurns()
	var entries []Entry
	var nodes []messages.NodeID
	for i := range 130 {
		entries = append(entries, Entry{Turn: turnsID[messages.TurnID](byte(100 + i)), Depth: uint64(100 + i), Role: messages.RoleUser, Text: "m"})
		nodes = append(nodes, turnsID[messages.NodeID](byte(100+i)))
	}
	f.entries, f.nodes = append(entries, f.entries...), append(nodes, f.nodes...)
	want := map[messages.TurnID]bool{turnsID[messages.TurnID](101): true, turnsID[messages.TurnID](13): true}
	found, err := findEntries(context.Background(), f, f.branch.ID, messages.TurnID{}, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || found[turnsID[messages.TurnID](101)] == nil || found[turnsID[messages.TurnID](101)].user == nil {
		t.Fatalf("findEntries found %v, want both turns", found)
	}
	if te := found[turnsID[messages.TurnID](13)]; te.user == nil || te.user.Text != "Count the TODOs in main.go\nand list them" ||
		te.reply == nil || te.reply.Text != "There are 3 TODOs in main.go." || len(te.reply.Items) != 3 {
		t.Errorf("turn 13: %+v, want its user message and its reply with the tool call and output", te)
	}
	if n := f.called("History"); n != 3 {
		t.Errorf("findEntries read %d pages, want 3 (135 entries, 50 a page)", n)
	}
}
