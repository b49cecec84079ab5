package actors

import (
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/supervision"
)

// A job waiting out its backoff after many losses in a row is asked
// again as soon as another job of the branch succeeds: the workers are
// well again, and the branch does not sit out the rest of the wait.
func TestJobSuccessEndsTheBackoff(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Fold = &core.Policy{} // a fold is due after each turn
	r := openRuntime(t, cfg)
	defer r.Close()
	r.retryBase, r.retryMax, r.jobCheck = time.Hour, time.Hour, time.Hour // a waiting job waits for the test's whole length
	_, b, err := r.CreateSession(bg, "backoff")
	if err != nil {
		t.Fatal(err)
	}
	const kills = maxLostJobs + 1 // the last loss waits retryBase
	for range kills {
		r.kills.Arm(supervision.KindIndexer)
	}
	runTurn(t, r, b.ID, "one")
	ev.waitFor(t, "the first turn's fold", 1, isStateCommitted)
	deadline := time.Now().Add(10 * time.Second)
	for r.kills.Killed(supervision.KindIndexer) < kills {
		if time.Now().After(deadline) {
			t.Fatalf("%d indexer kills taken, want %d", r.kills.Killed(supervision.KindIndexer), kills)
		}
		time.Sleep(time.Millisecond)
	}
	// The first turn's index job now waits an hour; the second turn's
	// fold succeeds, and asks for it at once.
	runTurn(t, r, b.ID, "two")
	ev.waitFor(t, "both turns indexed", 2, isTurnIndexed)
}
