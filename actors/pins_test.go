package actors

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// pinFacts returns the texts of pins, in order.
func pinFacts(pins []messages.PinnedFact) []string { return core.PinFacts(pins) }

// nextPinned returns the pinned facts of branch b's next context.
func nextPinned(t *testing.T, r *Runtime, b messages.BranchID) []string {
	t.Helper()
	d, err := r.DebugNextContext(bg, b, "next?")
	if err != nil {
		t.Fatal(err)
	}
	return d.Context.PinnedFacts
}

// Pins have ids; unpinning and editing one shows in the next context,
// survives a restart of the branch and of the runtime, and an unknown id
// is ErrNoPin.
func TestPinUnpinEdit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, newEvents())
	r := openRuntime(t, cfg)
	_, b, _ := r.CreateSession(bg, "pins")
	var ids []uint64
	for _, f := range []string{"answer in French", "use tabs", "deploy to eu-west-1"} {
		p, err := r.Pin(bg, b.ID, f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	if !slices.Equal(ids, []uint64{1, 2, 3}) {
		t.Fatalf("pin ids %v, want [1 2 3]", ids)
	}
	if p, err := r.Pin(bg, b.ID, "use tabs"); err != nil || p.ID != 2 {
		t.Errorf("Pin(a fact pinned already) = %+v, %v, want pin 2", p, err)
	}
	runTurn(t, r, b.ID, "hello")
	if err := r.Unpin(bg, b.ID, 2); err != nil {
		t.Fatal(err)
	}
	p, err := r.EditPin(bg, b.ID, 1, "answer in English")
	if err != nil || p.ID != 1 || p.Fact != "answer in English" || p.Seq != 1 {
		t.Fatalf("EditPin = %+v, %v, want pin 1 edited at turn 1", p, err)
	}
	want := []string{"answer in English", "deploy to eu-west-1"}
	if got := nextPinned(t, r, b.ID); !slices.Equal(got, want) {
		t.Errorf("next context pins %q, want %q", got, want)
	}
	if err := r.Unpin(bg, b.ID, 2); !errors.Is(err, core.ErrNoPin) {
		t.Errorf("Unpin(2) again = %v, want ErrNoPin", err)
	}
	if _, err := r.EditPin(bg, b.ID, 9, "x"); !errors.Is(err, core.ErrNoPin) {
		t.Errorf("EditPin(9) = %v, want ErrNoPin", err)
	}
	// The local provider's reply counts the pinned facts it was sent.
	if reply, _, _ := runTurn(t, r, b.ID, "how many pins?"); !strings.Contains(reply, "2 pinned facts") {
		t.Errorf("reply %q does not report 2 pinned facts", reply)
	}

	check := func(when string) {
		t.Helper()
		pins, err := r.Pins(bg, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := pinFacts(pins); !slices.Equal(got, want) || pins[0].ID != 1 || pins[1].ID != 3 {
			t.Errorf("%s: pins %+v, want %q as pins 1 and 3", when, pins, want)
		}
	}
	check("live")
	if err := r.kill(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	check("after a kill")
	r.Close()
	r = openRuntime(t, cfg)
	defer r.Close()
	check("after a restart")
	if p, err := r.Pin(bg, b.ID, "new"); err != nil || p.ID != 4 {
		t.Errorf("Pin after a restart = %+v, %v, want pin 4", p, err)
	}
}

// The limits refuse a pin or an edit with an error naming the key and
// the limit, and store nothing; unpinning makes room.
func TestPinLimits(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	f := fake.New().WithContextLimit(900)
	cfg.Provider, cfg.MaxOutputTokens, cfg.SafetyMargin = f, 100, 10 // input budget 790
	cfg.Pins = core.PinLimits{MaxPins: 2, MaxBytes: 1000}
	cfg.MaxPinnedShare = 0.25 // 197 tokens
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "limits")
	for _, fact := range []string{"a", "b"} {
		if _, err := r.Pin(bg, b.ID, fact); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		what string
		do   func() error
		want string
	}{
		{"a third pin", func() error { _, err := r.Pin(bg, b.ID, "c"); return err },
			"fact: the branch has 2 pinned facts, limit 2 (context.max_pins)"},
		{"a long pin", func() error { _, err := r.Pin(bg, b.ID, strings.Repeat("x", 1001)); return err },
			"fact: 1001 bytes, limit 1000 (context.max_pin_bytes)"},
		{"a long edit", func() error { _, err := r.EditPin(bg, b.ID, 1, strings.Repeat("x", 1001)); return err },
			"fact: 1001 bytes, limit 1000 (context.max_pin_bytes)"},
		{"an edit over the token share", func() error { _, err := r.EditPin(bg, b.ID, 1, strings.Repeat("word ", 180)); return err },
			"limit 197 (context.max_pinned_share 0.25 of the input budget of 790 tokens"},
	}
	for _, tc := range tests {
		err := tc.do()
		if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid containing %q", tc.what, err, tc.want)
		}
		if pins, _ := r.Pins(bg, b.ID); !slices.Equal(pinFacts(pins), []string{"a", "b"}) {
			t.Errorf("%s: pins %+v, want a and b unchanged", tc.what, pins)
		}
	}
	if err := r.Unpin(bg, b.ID, 1); err != nil {
		t.Fatal(err)
	}
	if p, err := r.Pin(bg, b.ID, "c"); err != nil || p.ID != 3 {
		t.Errorf("Pin after an unpin = %+v, %v, want pin 3", p, err)
	}
	if err := r.Unpin(bg, b.ID, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pin(bg, b.ID, strings.Repeat("word ", 160)); err == nil || !strings.Contains(err.Error(), "context.max_pinned_share") {
		t.Errorf("a pin over the token share: %v", err)
	}
}

// A fork after turn T starts with exactly the pins in effect when T was
// the latest turn, whether T was folded alone, with later turns, or not
// at all.
func TestForkKeepsPinsInEffect(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Fold = &core.Policy{K: 100, B: 100} // folds only when asked
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "forks")
	pin := func(f string) {
		t.Helper()
		if _, err := r.Pin(bg, b.ID, f); err != nil {
			t.Fatal(err)
		}
	}
	pin("P1") // pin 1, before turn 1
	runTurn(t, r, b.ID, "turn 1")
	pin("P2") // pin 2, at turn 1
	runTurn(t, r, b.ID, "turn 2")
	pin("P3") // pin 3, at turn 2
	if err := r.Unpin(bg, b.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.CommitPending(bg, b.ID); err != nil { // one state folds turns 1 and 2
		t.Fatal(err)
	}
	ev.waitFor(t, "state_committed", 1, isType[messages.StateCommitted])
	runTurn(t, r, b.ID, "turn 3")
	runTurn(t, r, b.ID, "turn 4") // turns 3 and 4 stay pending
	if _, err := r.EditPin(bg, b.ID, 2, "P2 edited"); err != nil {
		t.Fatal(err)
	}
	rows, err := r.DB().TurnRows(bg, b.ID, 0, 10)
	if err != nil || len(rows) != 4 {
		t.Fatalf("turn rows %v, %v", rows, err)
	}
	tests := []struct {
		at   messages.TurnID
		name string
		want []string
		ids  []uint64
	}{
		{rows[0].ID, "turn 1 (folded with turn 2)", []string{"P1", "P2"}, []uint64{1, 2}},
		{rows[1].ID, "turn 2 (the last turn of a state)", []string{"P2", "P3"}, []uint64{2, 3}},
		{rows[2].ID, "turn 3 (pending)", []string{"P2", "P3"}, []uint64{2, 3}},
		{messages.NodeID{}, "the head", []string{"P2 edited", "P3"}, []uint64{2, 3}},
	}
	for _, tc := range tests {
		fork, err := r.Fork(bg, b.ID, tc.at, "")
		if err != nil {
			t.Fatalf("fork at %s: %v", tc.name, err)
		}
		if got := nextPinned(t, r, fork.ID); !slices.Equal(got, tc.want) {
			t.Errorf("fork at %s: next context pins %q, want %q", tc.name, got, tc.want)
		}
		pins, err := r.Pins(bg, fork.ID)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, p := range pins {
			ids = append(ids, p.ID)
		}
		if !slices.Equal(ids, tc.ids) {
			t.Errorf("fork at %s: pin ids %v, want %v", tc.name, ids, tc.ids)
		}
		// The fork's pins are its own: unpinning one leaves the parent's.
		if err := r.Unpin(bg, fork.ID, tc.ids[0]); err != nil {
			t.Errorf("fork at %s: unpin %d: %v", tc.name, tc.ids[0], err)
		}
	}
	if got := nextPinned(t, r, b.ID); !slices.Equal(got, []string{"P2 edited", "P3"}) {
		t.Errorf("the parent's pins became %q", got)
	}
}
