package actors

import (
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// turnRows returns the lifecycle rows of branch b that the store holds.
func turnRows(t *testing.T, r *Runtime, b messages.BranchID) []persistence.TurnRow {
	t.Helper()
	rows, err := r.DB().TurnRows(bg, b, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// branchOn opens a runtime with cfg, closed with the test, and creates
// a branch on it.
func branchOn(t testing.TB, cfg Config) (*Runtime, messages.BranchID) {
	t.Helper()
	r := openRuntime(t, cfg)
	t.Cleanup(func() { r.Close() })
	_, b, err := r.CreateSession(bg, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return r, b.ID
}

// fakeBranch is branchOn with a fake provider taking steps.
func fakeBranch(t *testing.T, steps ...fake.Step) (*Runtime, messages.BranchID) {
	t.Helper()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = fake.New(steps...)
	return branchOn(t, cfg)
}

// A deferred submit returns before the turn is in the store; the turn's
// acceptance is committed with its response, and the last update comes
// after that commit.
func TestSubmitDeferredCommitsAcceptanceWithResponse(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	r, b := fakeBranch(t, fake.Step{Reply: "deferred reply", Block: block})
	s, err := r.SubmitDeferred(bg, b, "hello", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The step has started (it waits on block); nothing is committed.
	if rows := turnRows(t, r, b); len(rows) != 0 {
		t.Fatalf("before the response: the store holds %+v, want no turn", rows)
	}
	close(block)
	text, last := s.Wait(nil)
	if text != "deferred reply" || last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn ended %+v with %q", last, text)
	}
	rows := turnRows(t, r, b)
	if len(rows) != 1 || rows[0].ID != s.Turn || rows[0].Phase < messages.PhaseResponseFinalized {
		t.Fatalf("after the last update: rows %+v, want turn %s finalized", rows, s.Turn)
	}
	if _, err := r.DB().Node(bg, s.Turn); err != nil {
		t.Errorf("the user message is not in the store: %v", err)
	}
}

// A deferred acceptance is committed by its deadline when the response
// takes longer, and before the branch answers any other request.
func TestSubmitDeferredCommitsByDeadlineOrRequest(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	r, b := fakeBranch(t, fake.Step{Reply: "slow", Block: block})
	s, err := r.SubmitDeferred(bg, b, "one", 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(turnRows(t, r, b)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the acceptance was not committed by its deadline")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rows := turnRows(t, r, b); rows[0].ID != s.Turn || rows[0].Phase != messages.PhaseResponding {
		t.Fatalf("while streaming: rows %+v, want turn %s responding", rows, s.Turn)
	}
	close(block)
	if _, last := s.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("first turn ended %+v", last)
	}

	block = make(chan struct{})
	r2, b2 := fakeBranch(t, fake.Step{Reply: "asked", Block: block})
	s2, err := r2.SubmitDeferred(bg, b2, "two", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	info, err := r2.Inspect(bg, b2)
	if err != nil {
		t.Fatal(err)
	}
	if rows := turnRows(t, r2, b2); len(rows) != 1 || rows[0].ID != s2.Turn {
		t.Fatalf("after Inspect (%+v): rows %+v, want turn %s committed first", info, rows, s2.Turn)
	}
	close(block)
	if _, last := s2.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("second turn ended %+v", last)
	}
}

// A branch that fails while it holds a deferred acceptance loses the
// turn, which nobody was told of: its stream ends failed, the store
// holds nothing of it, and the branch takes the next turn.
func TestSubmitDeferredCrashLosesTheUnacknowledgedTurn(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	r, b := fakeBranch(t, fake.Step{Reply: "never", Block: block}, fake.Step{Reply: "after the crash"})
	s, err := r.SubmitDeferred(bg, b, "lost", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.kill(bg, b); err != nil {
		t.Fatal(err)
	}
	if _, last := s.Wait(nil); last.Phase != messages.PhaseFailed {
		t.Fatalf("the stream ended %+v, want failed", last)
	}
	close(block)
	if rows := turnRows(t, r, b); len(rows) != 0 {
		t.Fatalf("after the crash: rows %+v, want none", rows)
	}
	text, last, _ := runTurn(t, r, b, "again")
	if text != "after the crash" || last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("next turn ended %+v with %q", last, text)
	}
	if rows := turnRows(t, r, b); len(rows) != 1 || rows[0].Seq != 1 {
		t.Fatalf("rows %+v, want the one turn after the crash, seq 1", rows)
	}
}

// A deferred acceptance's deadline is its own turn's: one set for an
// earlier turn that fires while a later turn's acceptance is held
// commits nothing.
func TestSubmitDeferredDeadlineIsTheTurnsOwn(t *testing.T) {
	block := make(chan struct{})
	r, b := fakeBranch(t, fake.Step{Reply: "quick"}, fake.Step{Reply: "slow", Block: block})
	const within = 50 * time.Millisecond
	first := time.Now()
	s, err := r.SubmitDeferred(bg, b, "one", within)
	if err != nil {
		t.Fatal(err)
	}
	if _, last := s.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("first turn ended %+v", last)
	}
	s2, err := r.SubmitDeferred(bg, b, "two", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(first) >= within {
		t.Skip("the first turn took longer than its deadline; nothing to check")
	}
	time.Sleep(4 * within) // the first turn's deadline has fired
	if rows := turnRows(t, r, b); len(rows) != 1 || rows[0].ID != s.Turn {
		t.Fatalf("while the second turn streams: rows %+v, want only the first turn %s", rows, s.Turn)
	}
	close(block)
	if _, last := s2.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("second turn ended %+v", last)
	}
	if rows := turnRows(t, r, b); len(rows) != 2 || rows[1].ID != s2.Turn {
		t.Fatalf("after the second turn: rows %+v", rows)
	}
}

// Index results held when a turn starts are committed with that turn's
// own write, not by their flush timer in the middle of it (which would
// stall the turn behind a synced write and commit its deferred
// acceptance early).
func TestIndexResultsWaitForTheTurnInFlight(t *testing.T) {
	block := make(chan struct{})
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Provider = fake.New(fake.Step{Reply: "first reply"}, fake.Step{Reply: "second reply", Block: block})
	cfg.Fold = &core.Policy{} // fold (and so index) every turn at once
	cfg.IndexFlushDelay = 200 * time.Millisecond
	r, b := branchOn(t, cfg)
	s, err := r.SubmitDeferred(bg, b, "one", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.Wait(nil)
	ev.waitFor(t, "the first turn's index results", 1, func(e messages.BranchEvent) bool {
		x, ok := e.(messages.TurnIndexed)
		return ok && x.Turn == s.Turn
	})
	held := time.Now() // the flush timer started about now
	s2, err := r.SubmitDeferred(bg, b, "two", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(held) >= cfg.IndexFlushDelay/2 {
		t.Skip("the second turn came too late to be in flight when the flush timer fired; nothing to check")
	}
	time.Sleep(2 * cfg.IndexFlushDelay) // the flush timer has fired
	rows := turnRows(t, r, b)
	if len(rows) != 1 || rows[0].ID != s.Turn || rows[0].Phase == messages.PhaseDone {
		t.Fatalf("while the second turn streams: rows %+v, want only the first turn, not yet marked indexed", rows)
	}
	close(block)
	if _, last := s2.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("second turn ended %+v", last)
	}
	rows = turnRows(t, r, b)
	if len(rows) != 2 || rows[0].Phase != messages.PhaseDone || rows[1].ID != s2.Turn {
		t.Fatalf("after the second turn: rows %+v, want the first indexed (committed with the second)", rows)
	}
}
