package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// A slow librarian races new turns and pins: a summary computed for an
// epoch the branch has left is discarded (the epoch compare-and-swap) and
// the fold asked for again; no turn is folded twice or lost.
func TestSlowLibrarianRacesTurns(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Fold = &core.Policy{K: 2, B: 2}
	release := make(chan struct{})
	var calls atomic.Int32
	cfg.Summarize = func(ctx context.Context, prev string, ex []core.Exchange) (string, error) {
		if calls.Add(1) == 1 {
			<-release // the first summary is slow: the branch moves on meanwhile
		}
		return core.FallbackSummary(prev, ex), nil
	}
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "race")
	for i := range 4 { // the third turn asks for a fold, which hangs
		runTurn(t, r, b.ID, fmt.Sprint("turn ", i))
	}
	if _, err := r.Pin(bg, b.ID, "The user is Ada."); err != nil { // a new epoch: the hanging summary is stale
		t.Fatal(err)
	}
	for i := 4; i < 8; i++ {
		runTurn(t, r, b.ID, fmt.Sprint("turn ", i))
	}
	close(release)
	if err := r.CommitPending(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, "TurnIndexed", 8, isType[messages.TurnIndexed])
	folded := map[messages.TurnID]int{}
	var seqs []uint64
	ev.mu.Lock()
	for _, e := range ev.log {
		if c, ok := e.(messages.StateCommitted); ok {
			seqs = append(seqs, c.State.Seq)
			for _, id := range c.Turns {
				folded[id]++
			}
		}
	}
	ev.mu.Unlock()
	if len(folded) != 8 {
		t.Fatalf("%d turns folded, want 8", len(folded))
	}
	for id, n := range folded {
		if n != 1 {
			t.Errorf("turn %s folded %d times", id, n)
		}
	}
	if !slices.IsSorted(seqs) || slices.Compact(slices.Clone(seqs))[0] != 1 || len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
		t.Errorf("state seqs %v, want 1, 2, 3… once each", seqs)
	}
	info, _ := r.Inspect(bg, b.ID)
	if len(info.State.Pinned) != 1 || calls.Load() < 2 {
		t.Errorf("pinned %v after %d summaries", info.State.Pinned, calls.Load())
	}
}

// SRD §20: no pinned fact is lost over 1,000 turns, with the
// deterministic summarizer and with a librarian that drops and alters
// them: pinned facts are state of their own, sent verbatim in every
// context, and carried by every committed state.
func TestPinnedFactsSurviveAThousandTurns(t *testing.T) {
	t.Parallel()
	turns := 1000
	if testing.Short() {
		turns = 200
	}
	for _, name := range []string{"fallback", "forgetful librarian"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, t.TempDir(), newEvents())
			f := fake.New() // echoes; records every request
			cfg.Provider = f
			if name != "fallback" {
				cfg.Summarize = func(ctx context.Context, prev string, ex []core.Exchange) (string, error) {
					s := core.FallbackSummary(prev, ex)
					// Drop every pinned fact it can see, and alter numbers.
					for _, p := range PinnedFacts(ctx) {
						s = strings.ReplaceAll(s, p, "")
					}
					return strings.ReplaceAll(s, "8080", "9090"), nil
				}
			}
			r := openRuntime(t, cfg)
			defer r.Close()
			_, b, _ := r.CreateSession(bg, "pins")
			var pinned []string
			for i := range turns {
				if i%50 == 0 {
					fact := fmt.Sprintf("Fact %d: the service at /srv/app%d listens on port 8080.", i/50, i)
					if _, err := r.Pin(bg, b.ID, fact); err != nil {
						t.Fatal(err)
					}
					pinned = append(pinned, fact)
				}
				if _, last, _ := runTurn(t, r, b.ID, fmt.Sprint("message ", i)); last.Phase != messages.PhaseResponseFinalized {
					t.Fatalf("turn %d ended %+v", i, last)
				}
				reqs := f.Requests()
				if sent := reqs[len(reqs)-1].Context.PinnedFacts; !slices.Equal(sent, pinned) {
					t.Fatalf("turn %d: the context carried pinned facts %q, want %q", i, sent, pinned)
				}
			}
			if err := r.CommitPending(bg, b.ID); err != nil {
				t.Fatal(err)
			}
			info, err := r.Inspect(bg, b.ID)
			if err != nil || !slices.Equal(info.State.Pinned, pinned) {
				t.Fatalf("head state pinned %q, want %q (%v)", info.State.Pinned, pinned, err)
			}
		})
	}
}
