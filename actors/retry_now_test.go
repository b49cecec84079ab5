package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
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

// gatedEmbedder blocks Embed while closed.
type gatedEmbedder struct {
	retrieval.HashEmbedder
	closed atomic.Bool
	open   chan struct{}
}

func (e *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.closed.Load() {
		<-e.open
	}
	return e.HashEmbedder.Embed(ctx, texts)
}

// A branch actor that fails and restarts takes over the index jobs its
// failed instance asked for and a worker still holds, rather than asking
// for each again: under many kills, asking again multiplied the
// indexers' backlog, and branches waited minutes for their turns to be
// indexed after the kills stopped.
func TestRestartTakesOverIndexJobs(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Fold = &core.Policy{K: 100, B: 100} // no fold unless one is asked
	emb := &gatedEmbedder{HashEmbedder: retrieval.HashEmbedder{}, open: make(chan struct{})}
	cfg.Embedder = emb
	r := openRuntime(t, cfg)
	defer r.Close()
	var once sync.Once
	open := func() { once.Do(func() { close(emb.open) }) }
	defer open()
	_, b, err := r.CreateSession(bg, "take over")
	if err != nil {
		t.Fatal(err)
	}
	const turns = 3
	for i := range turns {
		runTurn(t, r, b.ID, fmt.Sprint("turn ", i))
	}
	emb.closed.Store(true) // the indexers block at their first job
	if err := r.CommitPending(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, "the fold", 1, isStateCommitted)
	if err := r.kill(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Inspect(bg, b.ID); err != nil { // the new instance has recovered
		t.Fatal(err)
	}
	held := 0
	r.jobs.all.Range(func(k, _ any) bool {
		if ix, ok := k.(*indexReq); ok && ix.branch == b.ID {
			held++
		}
		return true
	})
	if held != turns {
		t.Errorf("%d index jobs held by the indexers for %d turns", held, turns)
	}
	open() // the jobs taken over are answered to the new instance
	ev.waitFor(t, "every turn indexed", turns, isTurnIndexed)
}
