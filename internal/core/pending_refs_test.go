package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// PendingRefs names the turns Pending returns, in order, as turns are
// finalized and folded.
func TestPendingRefsArePending(t *testing.T) {
	t.Parallel()
	var b Branch
	clock := t0
	n := 0
	newID := func(prefix string) string { n++; return fmt.Sprintf("%s%d", prefix, n) }
	apply := func(evs []messages.BranchEvent, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if _, err := b.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func() {
		t.Helper()
		pending, refs := b.Pending(), b.PendingRefs()
		if len(refs) != len(pending) {
			t.Fatalf("PendingRefs() = %d turns, Pending() %d", len(refs), len(pending))
		}
		for i, p := range pending {
			if refs[i] != (PendingRef{p.ID, p.Reply}) {
				t.Fatalf("PendingRefs()[%d] = %+v, want %s and %s", i, refs[i], p.ID, p.Reply)
			}
		}
	}
	apply(b.Create(messages.BranchCreated{Session: id[messages.SessionID]("se"), Branch: id[messages.BranchID]("b"), At: clock}))
	for turn := range 12 {
		clock = clock.Add(time.Minute)
		tid := id[messages.TurnID](newID("t"))
		step := id[messages.StepID](newID("s"))
		apply(b.Submit(tid, clock))
		check()
		apply(b.Start(tid, step, clock))
		apply(b.Finalize(tid, step, id[messages.NodeID](newID("r")), messages.StepOutcome{Kind: messages.OutcomeCompleted}, 10, 10, clock))
		check()
		if turn%4 == 3 {
			refs := b.PendingRefs()
			var ids []messages.TurnID
			for _, r := range refs[:2] {
				ids = append(ids, r.ID)
			}
			apply(b.Commit(messages.StateCheckpoint{ID: id[messages.StateID](newID("st")), Seq: b.State.Seq + 1,
				Summary: "summary"}, ids, b.Epoch, clock))
			check()
		}
	}
	if len(b.PendingRefs()) == 0 {
		t.Fatal("no turn pending at the end: the test checked little")
	}
}
