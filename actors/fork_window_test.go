package actors

import (
	"slices"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// nextUserTexts returns the user messages of b's next context's window
// and pending turns, in order.
func nextUserTexts(t *testing.T, r *Runtime, b messages.BranchID) (window, pending []string) {
	t.Helper()
	d, err := r.DebugNextContext(bg, b, "next?")
	if err != nil {
		t.Fatal(err)
	}
	users := func(ms []messages.Message) []string {
		var out []string
		for _, m := range ms {
			if m.Role == messages.RoleUser {
				out = append(out, m.RenderedText)
			}
		}
		return out
	}
	return users(d.Context.Window), users(d.Context.Pending)
}

// A fork's next context shows the verbatim window its parent's showed at
// the fork point, whether the fork is at the head, at a pending turn, at
// the last turn a state folded, or at a turn folded with later ones; and
// it keeps it across a restart.
func TestForkKeepsWindow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ev := newEvents()
	cfg := testConfig(t, dir, ev)
	cfg.Fold = &core.Policy{K: 100, B: 100} // folds only when asked
	r := openRuntime(t, cfg)
	_, b, _ := r.CreateSession(bg, "forks")
	commit := func(states int) {
		t.Helper()
		if err := r.CommitPending(bg, b.ID); err != nil {
			t.Fatal(err)
		}
		ev.waitFor(t, "state_committed", states, isType[messages.StateCommitted])
	}
	turn := func(from, to int) {
		for i := from; i <= to; i++ {
			runTurn(t, r, b.ID, "turn "+string(rune('0'+i)))
		}
	}
	turn(1, 5)
	commit(1) // state 1 folds turns 1–5
	turn(6, 7)
	commit(2)  // state 2 folds turns 6 and 7
	turn(8, 8) // pending
	rows, err := r.DB().TurnRows(bg, b.ID, 0, 10)
	if err != nil || len(rows) != 8 {
		t.Fatalf("turn rows %v, %v", rows, err)
	}
	texts := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, "turn "+string(rune('0'+i)))
		}
		return out
	}
	if w, p := nextUserTexts(t, r, b.ID); !slices.Equal(w, texts(2, 7)) || !slices.Equal(p, texts(8, 8)) {
		t.Fatalf("the parent's next context: window %q, pending %q", w, p)
	}
	tests := []struct {
		name          string
		at            messages.NodeID
		window, pendg []string
	}{
		{"the head", messages.NodeID{}, texts(2, 7), texts(8, 8)},
		{"a pending turn", rows[7].ID, texts(2, 7), texts(8, 8)},
		{"the last turn of a state", rows[6].ID, texts(2, 7), nil},
		{"a turn folded with a later one", rows[5].ID, texts(1, 5), texts(6, 6)},
		{"a turn of the first state", rows[2].ID, nil, texts(1, 3)},
	}
	forks := make([]messages.BranchID, len(tests))
	for i, tc := range tests {
		fork, err := r.Fork(bg, b.ID, tc.at, "")
		if err != nil {
			t.Fatalf("fork at %s: %v", tc.name, err)
		}
		forks[i] = fork.ID
		if w, p := nextUserTexts(t, r, fork.ID); !slices.Equal(w, tc.window) || !slices.Equal(p, tc.pendg) {
			t.Errorf("fork at %s: window %q, pending %q; want %q, %q", tc.name, w, p, tc.window, tc.pendg)
		}
	}
	// A fork of the fork at the head, at a turn its state folded with a
	// later one: the states and turns before it are the first parent's.
	runTurn(t, r, forks[0], "turn 9")
	if err := r.CommitPending(bg, forks[0]); err != nil { // folds turns 8 and 9
		t.Fatal(err)
	}
	ev.waitFor(t, "state_committed", 3, isType[messages.StateCommitted])
	ff, err := r.Fork(bg, forks[0], rows[7].ID, "")
	if err != nil {
		t.Fatal(err)
	}
	forks = append(forks, ff.ID)
	if w, p := nextUserTexts(t, r, ff.ID); !slices.Equal(w, texts(2, 7)) || !slices.Equal(p, texts(8, 8)) {
		t.Errorf("fork of a fork: window %q, pending %q; want %q, %q", w, p, texts(2, 7), texts(8, 8))
	}
	type next struct{ window, pending []string }
	before := make([]next, len(forks))
	for i, f := range forks {
		before[i].window, before[i].pending = nextUserTexts(t, r, f)
	}
	r.Close()
	r = openRuntime(t, cfg)
	defer r.Close()
	for i, f := range forks {
		if w, p := nextUserTexts(t, r, f); !slices.Equal(w, before[i].window) || !slices.Equal(p, before[i].pending) {
			t.Errorf("after a restart, fork %d: window %q, pending %q; want %q, %q", i, w, p, before[i].window, before[i].pending)
		}
	}
}
