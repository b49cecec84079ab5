package actors

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/supervision"
)

// waitTurn waits for a turn's last update (failing the test after 10 s).
func waitTurn(t *testing.T, s *TurnStream) (string, Update) {
	t.Helper()
	stop := make(chan struct{})
	tm := time.AfterFunc(10*time.Second, func() { close(stop) })
	defer tm.Stop()
	text, last := s.Wait(stop)
	if !last.Done {
		t.Fatalf("turn %s: no end within 10 s", s.Turn)
	}
	return text, last
}

// A user message the store could not take is refused when submitted,
// naming the limit, and the branch goes on: before, its commit failed
// and stopped the branch for good.
func TestOversizedTurnIsRefusedAtAcceptance(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Store.Limits.MaxPayloadBytes = 64 << 10
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, err := r.CreateSession(bg, "big")
	if err != nil {
		t.Fatal(err)
	}
	// 40 KB of text is stored twice (text and rendered text): over 64 KiB.
	_, err = r.Submit(bg, b.ID, strings.Repeat("x", 40<<10))
	if !errors.Is(err, persistence.ErrTooLarge) || !strings.Contains(err.Error(), "store.max_payload_bytes") {
		t.Fatalf("Submit(40 KB) = %v, want ErrTooLarge naming store.max_payload_bytes", err)
	}
	s, err := r.Submit(bg, b.ID, "a small one")
	if err != nil {
		t.Fatalf("Submit after a refused one: %v", err)
	}
	if _, last := waitTurn(t, s); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn after a refused one ended %v (%s)", last.Phase, last.Err)
	}
	if info, err := r.Inspect(bg, b.ID); err != nil || info.TurnSeq != 1 {
		t.Fatalf("Inspect = %+v, %v; want one turn", info, err)
	}
}

// A branch that supervision stopped (restarted too often) answers
// ErrBranchStopped for a while, then comes back on a request, from its
// durable state.
func TestStoppedBranchIsActivatedAgain(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.MaxRestarts = 1
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, err := r.CreateSession(bg, "stopped")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Submit(bg, b.ID, "before the stop")
	if err != nil {
		t.Fatal(err)
	}
	waitTurn(t, s)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_ = r.kill(bg, b.ID)
		_, err := r.Inspect(bg, b.ID)
		if errors.Is(err, ErrBranchStopped) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the branch was never stopped: %v", err)
		}
	}
	for {
		info, err := r.Inspect(bg, b.ID)
		if err == nil {
			if info.TurnSeq != 1 {
				t.Fatalf("reactivated with turn seq %d, want 1", info.TurnSeq)
			}
			break
		}
		if !errors.Is(err, ErrBranchStopped) {
			t.Fatalf("Inspect of a stopped branch: %v", err)
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("the stopped branch never came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling: the backoff is the runtime's
	}
	s, err = r.Submit(bg, b.ID, "after the stop")
	if err != nil {
		t.Fatal(err)
	}
	if _, last := waitTurn(t, s); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn after reactivation ended %v (%s)", last.Phase, last.Err)
	}
}

// A librarian or indexer killed in the middle of a job is restarted and
// the branch asks again: the turn is folded and indexed without a branch
// or process restart.
func TestWorkerKillsResumeTheirJobs(t *testing.T) {
	t.Parallel()
	for _, kind := range []supervision.Kind{supervision.KindLibrarian, supervision.KindIndexer} {
		t.Run(string(kind), func(t *testing.T) {
			ev := newEvents()
			cfg := testConfig(t, t.TempDir(), ev)
			cfg.Fold = &core.Policy{} // fold every turn as soon as it is finalized
			r := openRuntime(t, cfg)
			defer r.Close()
			_, b, err := r.CreateSession(bg, "workers")
			if err != nil {
				t.Fatal(err)
			}
			r.kills.Arm(kind)
			s, err := r.Submit(bg, b.ID, "remember the deploy target is eu-west-1")
			if err != nil {
				t.Fatal(err)
			}
			waitTurn(t, s)
			ev.waitFor(t, "StateCommitted", 1, isType[messages.StateCommitted])
			ev.waitFor(t, "TurnIndexed", 1, isType[messages.TurnIndexed])
			if n := r.Failures()[kind]; n != 1 {
				t.Errorf("Failures()[%s] = %d, want 1", kind, n)
			}
			if n := r.kills.Killed(kind); n != 1 {
				t.Errorf("killed %d %s actors, want 1", n, kind)
			}
		})
	}
}

// A step actor killed mid-stream is not restarted: the provider is called
// once, the turn ends interrupted with what was streamed kept in its
// journal, and the next turn runs.
func TestStepKillCallsTheProviderOnce(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	p := fake.New(fake.Step{Reply: "one two three four five six"}, fake.Step{Reply: "after"})
	cfg.Provider = p
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, err := r.CreateSession(bg, "steps")
	if err != nil {
		t.Fatal(err)
	}
	r.kills.Arm(supervision.KindStep)
	s, err := r.Submit(bg, b.ID, "hello")
	if err != nil {
		t.Fatal(err)
	}
	_, last := waitTurn(t, s)
	if last.Phase != messages.PhaseFailed || !strings.Contains(last.Err, "actor failed") || last.Outcome.Code != messages.FailInterrupted {
		t.Fatalf("killed step's turn ended %v (%q), want failed naming the step actor's failure", last.Phase, last.Err)
	}
	if n := p.Calls(); n != 1 {
		t.Fatalf("provider called %d times for the killed step, want 1", n)
	}
	steps, err := r.Steps(bg, s.Turn)
	if err != nil || len(steps) != 1 || steps[0].Outcome.Kind != messages.OutcomeFailed {
		t.Fatalf("Steps = %+v, %v; want one failed step", steps, err)
	}
	if !hasJournal(t, filepath.Join(cfg.DataDir, "streams"), steps[0].ID) {
		t.Fatalf("the killed step's journal is missing")
	}
	s, err = r.Submit(bg, b.ID, "again")
	if err != nil {
		t.Fatal(err)
	}
	if text, last := waitTurn(t, s); last.Phase != messages.PhaseResponseFinalized || text != "after" {
		t.Fatalf("next turn = %q, %v (%s)", text, last.Phase, last.Err)
	}
	// The step reports its end before its failure reaches the
	// supervisor (it panics after): the count follows.
	deadline := time.Now().Add(10 * time.Second)
	for r.Failures()[supervision.KindStep] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Failures()[step] = %d, want 1", r.Failures()[supervision.KindStep])
		}
		time.Sleep(5 * time.Millisecond) // polling: the supervisor's count
	}
}

// A journal actor killed is restarted; its step's journal and turn are
// whole.
func TestJournalKillLosesNothing(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = fake.New(fake.Step{Reply: "one two three four", Delay: 2 * time.Millisecond})
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, err := r.CreateSession(bg, "journal")
	if err != nil {
		t.Fatal(err)
	}
	r.kills.Arm(supervision.KindJournal)
	s, err := r.Submit(bg, b.ID, "hello")
	if err != nil {
		t.Fatal(err)
	}
	text, last := waitTurn(t, s)
	if last.Phase != messages.PhaseResponseFinalized || text != "one two three four" {
		t.Fatalf("turn = %q, %v (%s)", text, last.Phase, last.Err)
	}
	if r.kills.Killed(supervision.KindJournal) != 1 {
		t.Fatalf("no journal actor was killed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.Failures()[supervision.KindJournal] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Failures()[journal] = %d, want 1", r.Failures()[supervision.KindJournal])
		}
		time.Sleep(5 * time.Millisecond) // polling: the step handles its child's failure when its stream ends
	}
}

// A stopped branch waits stopBackoff, doubling with each stop in a row up
// to stopBackoffMax; a stop long after the last starts again, and a
// deleted branch is forgotten.
func TestStoppedBranchesBackoff(t *testing.T) {
	t.Parallel()
	var s stoppedBranches
	id := messages.NewID[messages.BranchID](time.Now())
	at := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.err(id, at); err != nil {
		t.Fatalf("err before any stop = %v", err)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		s.stop(id, errors.New("failed"), at)
		if err := s.err(id, at.Add(want-time.Millisecond)); !errors.Is(err, ErrBranchStopped) {
			t.Fatalf("stop %d: err just before %s = %v, want ErrBranchStopped", i+1, want, err)
		}
		if err := s.err(id, at.Add(want)); err != nil {
			t.Fatalf("stop %d: err after %s = %v, want nil", i+1, want, err)
		}
		at = at.Add(want)
	}
	at = at.Add(stopForgetAfter)
	s.stop(id, errors.New("failed"), at)
	if err := s.err(id, at.Add(stopBackoff)); err != nil {
		t.Fatalf("a stop long after the last waits %s again; err = %v", stopBackoff, err)
	}
	s.stop(id, errors.New("failed"), at)
	s.forget([]messages.BranchID{id})
	if err := s.err(id, at); err != nil {
		t.Fatalf("err of a forgotten branch = %v", err)
	}
}
