package actors

import (
	"context"
	"fmt"
	"sync"

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
