package actors

import (
	"errors"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// A turn is read through a branch only when it is on that branch's
// transcript (its own or its ancestors' up to the fork point): another
// session's turn is not found there.
func TestTurnsAreReadOnlyThroughTheirBranches(t *testing.T) {
	t.Parallel()
	r := openRuntime(t, testConfig(t, t.TempDir(), newEvents()))
	defer r.Close()
	turn := func(b messages.BranchID, text string) messages.TurnID {
		t.Helper()
		s, err := r.Submit(bg, b, text)
		if err != nil {
			t.Fatal(err)
		}
		waitTurn(t, s)
		return s.Turn
	}
	_, a, err := r.CreateSession(bg, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := r.CreateSession(bg, "other")
	if err != nil {
		t.Fatal(err)
	}
	a1 := turn(a.ID, "the secret is 42")
	a2 := turn(a.ID, "second")
	o1 := turn(other.ID, "another session")
	fork, err := r.Fork(bg, a.ID, a1, "fork")
	if err != nil {
		t.Fatal(err)
	}
	f1 := turn(fork.ID, "on the fork")

	for _, tc := range []struct {
		branch messages.BranchID
		turn   messages.TurnID
		ok     bool
	}{
		{a.ID, a1, true}, {a.ID, a2, true}, {fork.ID, a1, true}, {fork.ID, f1, true},
		{a.ID, o1, false}, {other.ID, a1, false}, {fork.ID, a2, false}, {a.ID, f1, false},
	} {
		_, err := r.DebugContext(bg, tc.branch, tc.turn)
		if tc.ok && err != nil {
			t.Errorf("DebugContext(%s, %s) = %v, want the context", tc.branch, tc.turn, err)
		}
		if !tc.ok && !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Errorf("DebugContext(%s, %s) = %v, want ErrNodeNotFound", tc.branch, tc.turn, err)
		}
		row, err := r.TurnRow(bg, tc.branch, tc.turn)
		if tc.ok && (err != nil || row.ID != tc.turn) {
			t.Errorf("TurnRow(%s, %s) = %+v, %v", tc.branch, tc.turn, row, err)
		}
		if !tc.ok && !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Errorf("TurnRow(%s, %s) = %v, want ErrNodeNotFound", tc.branch, tc.turn, err)
		}
		_, _, err = r.History(bg, tc.branch, tc.turn, 10)
		if tc.ok && err != nil {
			t.Errorf("History(%s, before %s) = %v", tc.branch, tc.turn, err)
		}
		if !tc.ok && !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Errorf("History(%s, before %s) = %v, want ErrNodeNotFound", tc.branch, tc.turn, err)
		}
	}
}
