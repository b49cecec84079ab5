package actors

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// The journal of a finalized step goes once it is RetainFinalized old;
// one whose turn failed, and one too young, stay.
func TestPruneJournals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var clock atomic.Int64
	t0 := time.Now().Truncate(time.Second)
	clock.Store(t0.UnixNano())
	cfg := testConfig(t, dir, newEvents())
	cfg.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	cfg.RetainFinalized = time.Hour
	cfg.Provider = fake.New(
		fake.Step{Reply: "one two three"},
		fake.Step{Reply: "cut off before the end", FailAfter: 2},
		// A step that ended well in a turn that failed: tools are off.
		fake.Step{Reply: "let me look", Items: messages.Items{messages.ToolCall{CallID: "c1", Name: "grep", Arguments: []byte("{}")}},
			Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}},
		fake.Step{Reply: "later"})
	r := openRuntime(t, cfg)
	_, b, err := r.CreateSession(bg, "prune")
	if err != nil {
		t.Fatal(err)
	}
	turn := func(text string, want messages.TurnPhase) messages.StepID {
		t.Helper()
		s, err := r.Submit(bg, b.ID, text)
		if err != nil {
			t.Fatal(err)
		}
		if _, last := s.Wait(nil); last.Phase != want {
			t.Fatalf("turn %q ended %+v, want phase %s", text, last, want)
		}
		row, err := r.DB().TurnRow(bg, b.ID, s.Turn)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if hasJournal(t, r.streams, row.Step) {
				return row.Step
			} else if time.Now().After(deadline) {
				t.Fatalf("journal of turn %q: missing", text)
			}
		}
	}
	done := turn("first", messages.PhaseResponseFinalized)
	failed := turn("second", messages.PhaseFailed)
	refused := turn("tool call", messages.PhaseFailed)
	clock.Add(int64(2 * time.Hour))
	young := turn("third", messages.PhaseResponseFinalized)

	exists := func(step messages.StepID) bool { return hasJournal(t, r.streams, step) }
	if n, err := r.PruneJournals(bg); err != nil || n != 1 {
		t.Fatalf("PruneJournals = %d, %v; want 1", n, err)
	}
	if exists(done) || !exists(failed) || !exists(refused) || !exists(young) {
		t.Fatalf("after pruning: finalized %v, failed %v, failed after its step %v, young %v; want only the finalized one gone",
			exists(done), exists(failed), exists(refused), exists(young))
	}
	if n, err := r.PruneJournals(bg); err != nil || n != 0 {
		t.Fatalf("PruneJournals again = %d, %v; want 0", n, err)
	}
	// The failed turn's partial output is still there to show.
	if text, _, err := r.PartialOutput(failed); err != nil || text == "" {
		t.Fatalf("partial output of the failed turn = %q, %v", text, err)
	}

	// The runtime prunes by itself when it opens.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Add(int64(2 * time.Hour))
	r = openRuntime(t, cfg)
	for deadline := time.Now().Add(5 * time.Second); exists(young); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the runtime did not prune the journal that grew old at its start")
		}
	}
	if !exists(failed) {
		t.Fatal("the failed turn's journal was pruned")
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Retention 0 keeps every journal: the failed turn's would have gone
	// had it been finalized.
	cfg.RetainFinalized = 0
	cfg.Provider = fake.New(fake.Step{Reply: "kept"})
	r = openRuntime(t, cfg)
	defer r.Close()
	kept := turn("fourth", messages.PhaseResponseFinalized)
	clock.Add(int64(1000 * time.Hour))
	if n, err := r.PruneJournals(bg); err != nil || n != 0 || !exists(kept) {
		t.Fatalf("PruneJournals with retention 0 = %d, %v (journal there: %v)", n, err, exists(kept))
	}
}

func TestPruneInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ retain, want time.Duration }{
		{time.Minute, time.Minute}, {8 * time.Minute, 2 * time.Minute}, {168 * time.Hour, time.Hour},
	} {
		if got := pruneInterval(c.retain); got != c.want {
			t.Errorf("pruneInterval(%v) = %v, want %v", c.retain, got, c.want)
		}
	}
}
