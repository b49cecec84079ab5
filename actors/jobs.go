package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/supervision"
)

// indexKey names the index job of a branch's turn.
type indexKey struct {
	branch messages.BranchID
	turn   messages.TurnID
}

// heldJobs are the summary, shrink and index requests sent to a worker
// that it has not finished (answered, or failed: workLost): a job its
// branch still waits for and no worker holds was lost without a word
// (checkJob).
type heldJobs struct {
	all sync.Map // *summarizeReq, *shrinkReq or *indexReq → struct{}
	// index holds the index requests of all by branch and turn, so
	// that an instance replacing a failed one takes over the index jobs
	// its predecessor asked for and a worker still holds, rather than
	// asking for each again: under many kills, asking again multiplied
	// the indexers' backlog.
	index sync.Map // indexKey → *indexReq
}

// hold records a job sent to a worker.
func (h *heldJobs) hold(req any) {
	h.all.Store(req, struct{}{})
	if ix, ok := req.(*indexReq); ok {
		h.index.Store(indexKey{ix.branch, ix.turn}, ix)
	}
}

// done forgets a job a worker is done with: answered, dropped or lost.
func (h *heldJobs) done(req any) {
	h.all.Delete(req)
	if ix, ok := req.(*indexReq); ok {
		h.index.CompareAndDelete(indexKey{ix.branch, ix.turn}, ix)
	}
}

// holds reports whether a worker holds req.
func (h *heldJobs) holds(req any) bool {
	_, ok := h.all.Load(req)
	return ok
}

// indexJob returns the index job of branch's turn a worker holds, if
// any.
func (h *heldJobs) indexJob(branch messages.BranchID, turn messages.TurnID) (*indexReq, bool) {
	v, ok := h.index.Load(indexKey{branch, turn})
	if !ok {
		return nil, false
	}
	return v.(*indexReq), true
}

// workLost is called when a worker (librarian, indexer) failed while
// handling message: the branch that asked for the work is told, and
// asks again from its state (the job is durable); a journal actor's
// failure loses nothing, as its step writes the journal itself.
func (r *Runtime) workLost(kind supervision.Kind, reason, message any) {
	var to *actor.PID
	lost := &workLost{kind: kind, reason: fmt.Sprint(reason)}
	r.jobs.done(message)
	switch m := message.(type) {
	case *summarizeReq:
		to, lost.summary = m.from, m
	case *shrinkReq:
		to, lost.shrink = m.from, m
	case *indexReq:
		to, lost.index = m.from, m
	}
	if to != nil {
		r.sys.Root.Send(to, lost)
	}
}

// reconcile applies SRD §6.5 at start: every branch with a pending job
// (a turn without final response, a turn to summarize or to index) is
// activated in branch order; its actor replays and resumes the work.
func (r *Runtime) reconcile(ctx context.Context) error {
	_, err := r.wakeJobs(ctx)
	return err
}

// librarian and indexer return the workers of branch id: the same ones
// every time, so that a branch's jobs run in the order it sent them.
func (r *Runtime) librarian(id messages.BranchID) *actor.PID {
	return r.librarians[int(id[15])%len(r.librarians)]
}

func (r *Runtime) indexer(id messages.BranchID) *actor.PID {
	return r.indexers[int(id[15])%len(r.indexers)]
}

// summaryDeadline is how long a branch waits for a summary it asked for
// before it takes the request for lost and asks again, even if a worker
// holds it (a summarizer call is bounded by 2 minutes); commitReask is
// that wait when a commit (CommitPending) is asked. jobCheckEvery is how
// often a branch looks whether a job it waits for is still held by a
// worker (checkJob). Runtime.summaryDeadline, Runtime.commitReask and
// Runtime.jobCheck start as these.
const (
	summaryDeadline = 3 * time.Minute
	commitReask     = 10 * time.Second
	jobCheckEvery   = 5 * time.Second
)

// indexRetry is the wait before an index job that failed is asked again.
const indexRetry = time.Second

// jobCheck makes a branch look at a job it asked for (one of the three
// is set) jobCheck after asking (checkJob).
type jobCheck struct {
	to      *branchCore // the instance that asked
	summary *summarizeReq
	shrink  *shrinkReq
	index   *indexReq
}

// ask sends a job to a worker, holding it in Runtime.jobs until the
// worker is done with it, and looks at it after Runtime.jobCheck.
func (c *branchCore) ask(ctx actor.Context, worker *actor.PID, req any, check *jobCheck) {
	c.rt.jobs.hold(req)
	ctx.Send(worker, req)
	after(ctx, c.rt.jobCheck, check)
}

// checkJob looks at a job the branch asked for: answered or superseded,
// there is nothing to do; held by a worker (queued or running, however
// long a backlog), it is looked at again later; held by none and not
// answered, it was lost without a word (no answer, no workLost) and is
// asked again, as a job a worker lost is (a shrink falls back to the
// deterministic one). An answer on its way when the check runs makes the
// job asked twice, which only repeats work.
func (a *branchActor) checkJob(ctx actor.Context, m *jobCheck) {
	if m.to != a.branchCore {
		return // an earlier instance's
	}
	req := a.folds.awaited(m)
	if m.index != nil && a.index.awaits(m.index) {
		req = m.index
	}
	if req == nil {
		return
	}
	if a.rt.jobs.holds(req) {
		after(ctx, a.rt.jobCheck, m)
		return
	}
	switch {
	case m.summary != nil:
		a.folds.summaryLost("no worker holds it")
		a.retries.foldSoon(ctx)
	case m.shrink != nil:
		a.folds.shrunk(ctx, &shrinkDone{epoch: m.shrink.epoch, err: errors.New("the shrink was lost: no worker holds it")})
	default:
		a.index.unanswered(ctx, m.index)
	}
}

// workLost asks again for a job whose worker failed while doing it (the
// job is durable: it is derived again from the branch's state), at once
// or after a wait (retrier.wait); a shrink falls back to the deterministic one,
// which needs no worker.
func (a *branchActor) workLost(ctx actor.Context, m *workLost) {
	switch {
	case m.summary != nil:
		a.folds.summaryWorkLost(ctx, m)
	case m.shrink != nil:
		a.retries.lostLog(m).Uint64("epoch", m.shrink.epoch).Msg("a shrink's worker failed; the deterministic shrink is used")
		a.folds.shrunk(ctx, &shrinkDone{epoch: m.shrink.epoch, err: errors.New(m.reason)})
	case m.index != nil:
		a.index.workLost(ctx, m)
	}
}
