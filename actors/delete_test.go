package actors

import (
	"errors"
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
)

// TestDeleteBranchAndSession: a session's first branch and a branch with
// forks are refused and nothing is deleted; a leaf fork is deleted with
// its stream journals, its parent kept, and is never activated again; a
// session is deleted with all its branches.
func TestDeleteBranchAndSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := openRuntime(t, testConfig(t, dir, newEvents()))
	defer r.Close()
	s, main, err := r.CreateSession(bg, "delete")
	if err != nil {
		t.Fatal(err)
	}
	turn := func(b persistence.BranchRow, text string) {
		t.Helper()
		ts, err := r.Submit(bg, b.ID, text)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, ts)
	}
	turn(main, "the parent's turn")
	f1, err := r.Fork(bg, main.ID, [16]byte{}, "f1")
	if err != nil {
		t.Fatal(err)
	}
	turn(f1, "the fork's turn")
	f2, err := r.Fork(bg, f1.ID, [16]byte{}, "f2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteBranch(bg, main.ID); !errors.Is(err, ErrFirstBranch) {
		t.Errorf("DeleteBranch(first) = %v, want ErrFirstBranch", err)
	}
	if _, err := r.DeleteBranch(bg, f1.ID); !errors.Is(err, ErrHasForks) {
		t.Errorf("DeleteBranch(with a fork) = %v, want ErrHasForks", err)
	}
	turn(f1, "f1 still takes turns after the refusal")
	if _, err := r.DeleteBranch(bg, f2.ID); err != nil {
		t.Fatal(err)
	}
	res, err := r.DeleteBranch(bg, f1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Nodes != 4 || len(res.Steps) != 2 || res.Journals != 2 {
		t.Errorf("DeleteBranch(f1) = %d nodes, %d steps, %d journals; want 4, 2, 2", res.Nodes, len(res.Steps), res.Journals)
	}
	for _, st := range res.Steps {
		if hasJournal(t, r.streams, st) {
			t.Errorf("journal of deleted step %s is still there", st)
		}
	}
	if _, err := r.Submit(bg, f1.ID, "back?"); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("Submit(deleted) = %v, want ErrNotFound", err)
	}
	if _, err := r.Inspect(bg, f1.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("Inspect(deleted) = %v, want ErrNotFound", err)
	}
	h, _, err := r.History(bg, main.ID, [16]byte{}, 10)
	if err != nil || len(h) != 2 {
		t.Errorf("History(parent) = %d entries, %v; want 2", len(h), err)
	}
	turn(main, "the parent goes on")
	res, err = r.DeleteSession(bg, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Branches) != 1 || res.Nodes != 4 || res.Journals != 2 {
		t.Errorf("DeleteSession = %d branches, %d nodes, %d journals; want 1, 4, 2", len(res.Branches), res.Nodes, res.Journals)
	}
	if _, err := r.db.Session(bg, s.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("Session(deleted) = %v", err)
	}
	if _, err := r.Submit(bg, main.ID, "back?"); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("Submit(deleted session's branch) = %v, want ErrNotFound", err)
	}
	if _, err := r.DeleteSession(bg, s.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("DeleteSession again = %v, want ErrNotFound", err)
	}
}

// A delete cut short after the store dropped the session and before its
// stream journals were removed leaves journals with no step row: the next
// open removes them, and keeps the journals of steps that have a row.
func TestOrphanJournalsGoAtOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, newEvents())
	r := openRuntime(t, cfg)
	s, gone, err := r.CreateSession(bg, "deleted")
	if err != nil {
		t.Fatal(err)
	}
	_, kept, err := r.CreateSession(bg, "kept")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []persistence.BranchRow{gone, kept} {
		ts, err := r.Submit(bg, b.ID, "hello")
		if err != nil {
			t.Fatal(err)
		}
		drain(t, ts)
	}
	r.Close() // the journals are closed with their steps
	r = openRuntime(t, cfg)
	steps, err := r.journals.List(bg)
	if err != nil || len(steps) != 2 {
		t.Fatalf("journals: %v, %v; want 2", steps, err)
	}
	// The store's part of DeleteSession, and then the crash.
	pr, err := r.db.Purge(bg, persistence.PurgeSpec{Session: s.ID, DeleteSession: true, Actors: []string{r.actorName(gone.ID)}})
	if err != nil || len(pr.Steps) != 1 {
		t.Fatalf("Purge = %+v, %v", pr, err)
	}
	r.Close()
	if !hasJournal(t, r.streams, pr.Steps[0]) {
		t.Fatalf("the deleted step's journal before the reopen is missing")
	}

	r = openRuntime(t, cfg)
	defer r.Close()
	if hasJournal(t, r.streams, pr.Steps[0]) {
		t.Errorf("the deleted step's journal after the reopen is there, want it removed")
	}
	left, err := r.journals.List(bg)
	if err != nil || len(left) != 1 || left[0] == pr.Steps[0] {
		t.Errorf("journals after the reopen: %v, %v; want the kept session's only", left, err)
	}
}
