package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/supervision"
)

func isStateCommitted(ev messages.BranchEvent) bool {
	e, ok := ev.(messages.StateCommitted)
	return ok && !e.Shrunk
}

func isTurnIndexed(ev messages.BranchEvent) bool {
	_, ok := ev.(messages.TurnIndexed)
	return ok
}

// A job lost or failed, more times in a row than maxLostJobs, is still
// asked again (after retrier.wait) with nobody asking: its worker killed
// (workLost), its answer an error, or the job dropped without a word
// (found by checkJob). The branch has a fold or an index job due and
// nothing in flight, and makes progress without another turn, commit or
// activation.
func TestLostJobsAreAskedAgain(t *testing.T) {
	t.Parallel()
	const times = maxLostJobs + 3
	for _, tc := range []struct {
		name string
		kill supervision.Kind // armed times: the worker fails at each job
		fail bool             // the summarizer answers an error times
		drop func(*Runtime)   // a worker drops the job without a word
		want func(messages.BranchEvent) bool
	}{
		{name: "librarian killed", kill: supervision.KindLibrarian, want: isStateCommitted},
		{name: "summarizer fails", fail: true, want: isStateCommitted},
		{name: "indexer killed", kill: supervision.KindIndexer, want: isTurnIndexed},
		{name: "summary dropped", drop: func(r *Runtime) { r.dropSummaries.Store(times) }, want: isStateCommitted},
		{name: "index job dropped", drop: func(r *Runtime) { r.dropIndexes.Store(times) }, want: isTurnIndexed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := newEvents()
			cfg := testConfig(t, t.TempDir(), ev)
			cfg.Fold = &core.Policy{} // a fold is due after each turn
			var failed atomic.Int32
			cfg.Summarize = func(_ context.Context, prev string, ex []core.Exchange) (string, error) {
				if tc.fail && failed.Add(1) <= times {
					return "", errors.New("summarizer down")
				}
				return core.FallbackSummary(prev, ex), nil
			}
			r := openRuntime(t, cfg)
			defer r.Close()
			r.retryBase, r.jobCheck = time.Millisecond, time.Millisecond
			_, b, err := r.CreateSession(bg, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			for range times {
				if tc.kill != "" {
					r.kills.Arm(tc.kill)
				}
			}
			if tc.drop != nil {
				tc.drop(r)
			}
			runTurn(t, r, b.ID, "one")
			ev.waitFor(t, tc.name, 1, tc.want)
			if tc.kill != "" && r.kills.Killed(tc.kill) != times {
				t.Errorf("%d %s kills taken, want %d", r.kills.Killed(tc.kill), tc.kill, times)
			}
			if tc.fail && failed.Load() <= times {
				t.Errorf("the summarizer was asked %d times, want more than %d", failed.Load(), times)
			}
			if n := r.dropSummaries.Load() + r.dropIndexes.Load(); n > 0 {
				t.Errorf("%d jobs not dropped", n)
			}
		})
	}
}

// A commit (CommitPending) asked of a branch goes on in the instance that
// replaces it when it fails or stops before the fold is done, though the
// fold policy would not fold its pending turns.
func TestCommitOutlivesItsInstance(t *testing.T) {
	t.Parallel()
	for _, stop := range []bool{false, true} {
		t.Run(map[bool]string{false: "killed", true: "stopped"}[stop], func(t *testing.T) {
			t.Parallel()
			ev := newEvents()
			cfg := testConfig(t, t.TempDir(), ev)
			cfg.Fold = &core.Policy{K: 100, B: 100} // no fold unless one is asked
			r := openRuntime(t, cfg)
			defer r.Close()
			r.jobCheck = time.Hour // the lost summary is not what asks again
			_, b, err := r.CreateSession(bg, "commit")
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range []string{"one", "two"} {
				runTurn(t, r, b.ID, text)
			}
			r.dropSummaries.Store(1) // the commit's summary is never answered
			if err := r.CommitPending(bg, b.ID); err != nil {
				t.Fatal(err)
			}
			pid, err := r.pid(bg, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !stop {
				err = r.kill(bg, b.ID)
			} else if err = r.Stop(bg, b.ID); err == nil {
				<-r.goneChan(pid)
				// Activated again by the next request, which is no commit.
				_, err = r.Inspect(bg, b.ID)
			}
			if err != nil {
				t.Fatal(err)
			}
			ev.waitFor(t, "the commit's fold", 1, isStateCommitted)
			if info, err := r.Inspect(bg, b.ID); err != nil || info.Pending != 0 {
				t.Fatalf("%d turns pending after the commit (%v)", info.Pending, err)
			}
		})
	}
}
