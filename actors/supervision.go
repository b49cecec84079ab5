package actors

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/supervision"
)

// decide classifies a branch actor's failure: corrupt or duplicate data
// and bad input stop the branch; anything else is transient.
func decide(reason any) supervision.Directive {
	err, ok := reason.(error)
	if !ok {
		return supervision.Restart
	}
	switch {
	case errors.Is(err, persistence.ErrCorrupt), errors.Is(err, persistence.ErrDuplicate),
		errors.Is(err, persistence.ErrInvalidArgument), errors.Is(err, errFatal):
		return supervision.Stop
	}
	return supervision.Restart
}

// errFatal marks failures no restart can fix (a corrupt event log).
var errFatal = errors.New("actors: fatal")

// stoppedBranches are the branches whose actor supervision stopped: a
// request to one fails with its error until its backoff passes, and the
// next one activates it again from its durable state. The zero value
// holds none.
type stoppedBranches struct {
	mu sync.Mutex
	m  map[messages.BranchID]*stoppedBranch
}

// stoppedBranch is a branch whose actor supervision stopped: requests
// fail with err until retry.
type stoppedBranch struct {
	err   error
	at    time.Time // when it stopped
	retry time.Time
	times int // stops in a row, each no longer than stopForgetAfter after the last
}

// The backoff of a stopped branch's reactivation: stopBackoff after its
// first stop, doubling with each stop in a row up to stopBackoffMax; a
// stop more than stopForgetAfter after the one before starts again. A
// stop needs more than runtime.max_restarts failures within
// runtime.restart_window already, so the backoff stays short: a branch
// whose failures were transient is back within seconds.
const (
	stopBackoff     = time.Second
	stopBackoffMax  = 10 * time.Second
	stopForgetAfter = 2 * time.Minute
)

// stop records that branch id's actor was stopped at now for err.
func (s *stoppedBranches) stop(id messages.BranchID, err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	times := 1
	if prev := s.m[id]; prev != nil && now.Sub(prev.at) < stopForgetAfter {
		times = prev.times + 1
	}
	wait := stopBackoff
	for i := 1; i < times && wait < stopBackoffMax; i++ {
		wait *= 2
	}
	wait = min(wait, stopBackoffMax)
	if s.m == nil {
		s.m = map[messages.BranchID]*stoppedBranch{}
	}
	s.m[id] = &stoppedBranch{at: now, retry: now.Add(wait), times: times,
		err: fmt.Errorf("%w (it is activated again from its durable state by a request after %s): %v",
			ErrBranchStopped, now.Add(wait).UTC().Format(time.RFC3339), err)}
}

// err returns why branch id cannot be activated at now: its actor was
// stopped and its backoff has not passed; nil once it has.
func (s *stoppedBranches) err(id messages.BranchID, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.m[id]; f != nil && now.Before(f.retry) {
		return f.err
	}
	return nil
}

// forget forgets branches, deleted for good.
func (s *stoppedBranches) forget(branches []messages.BranchID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range branches {
		delete(s.m, b)
	}
}

// branchStopped is the branch actors' strategy's OnStop: the branch of
// child stays stopped for a backoff.
func (r *Runtime) branchStopped(child *actor.PID, reason any) {
	id, ok := branchOfPID(child)
	if !ok {
		return
	}
	err, _ := reason.(error)
	if err == nil {
		err = fmt.Errorf("%v", reason)
	}
	r.stopped.stop(id, err, r.cfg.Now())
}

// stoppedErr returns why branch id cannot be activated now
// (stoppedBranches.err).
func (r *Runtime) stoppedErr(id messages.BranchID) error { return r.stopped.err(id, r.cfg.Now()) }

// Restarts counts actor restarts ordered by supervision, of every kind.
func (r *Runtime) Restarts() int64 {
	return r.sup.Restarts() + r.journalSup.Restarts() + r.librarianSup.Restarts() + r.indexerSup.Restarts()
}

// Failures counts the actor failures supervision handled, by actor kind:
// a branch, journal, librarian or indexer actor is restarted (a branch
// stopped after too many restarts comes back on a later request); a step
// actor is stopped and its turn ends as interrupted.
func (r *Runtime) Failures() map[supervision.Kind]int64 {
	return map[supervision.Kind]int64{
		supervision.KindBranch: r.sup.Failures(), supervision.KindStep: r.stepSup.Failures(),
		supervision.KindJournal: r.journalSup.Failures(), supervision.KindLibrarian: r.librarianSup.Failures(),
		supervision.KindIndexer: r.indexerSup.Failures(),
	}
}

// supervise sets the supervision strategy of each kind of actor: a
// branch actor restarts with backoff until it fails too often (then it
// is stopped: branchStopped); a step actor is stopped, never restarted
// (that would call its provider again), and its turn ends as
// interrupted; a journal, librarian or indexer actor restarts. stopping
// reports whether root asked a branch actor to stop.
func (r *Runtime) supervise(stopping func(child *actor.PID) bool) {
	r.sup = &supervision.Strategy{
		Decide:      decide,
		MaxRestarts: r.cfg.MaxRestarts,
		Window:      r.cfg.RestartWindow,
		Backoff:     10 * time.Millisecond,
		MaxBackoff:  2 * time.Second,
		Log:         r.log,
		OnStop:      r.branchStopped,
		Stopping:    stopping,
		Defer: func(d time.Duration, f func()) {
			time.AfterFunc(d, func() { r.sys.Root.Send(r.root, &deferred{f: f}) })
		},
	}
	r.stepSup = &supervision.Strategy{
		Decide:         func(any) supervision.Directive { return supervision.Stop },
		StopIsRecovery: true,
		Log:            r.log,
	}
	// A worker holds no state, and the message it failed on is not
	// handled again (its branch asks for the job again, workLost): its
	// restarts back off briefly, so that work queued behind a failure
	// goes on.
	worker := func(kind supervision.Kind) *supervision.Strategy {
		return &supervision.Strategy{Decide: func(any) supervision.Directive { return supervision.Restart },
			Backoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond, Window: time.Minute, Log: r.log.With().Str("kind", string(kind)).Logger(),
			OnFailure: func(_ *actor.PID, reason, message any) { r.workLost(kind, reason, message) }}
	}
	r.journalSup, r.librarianSup, r.indexerSup = worker(supervision.KindJournal), worker(supervision.KindLibrarian), worker(supervision.KindIndexer)
}
