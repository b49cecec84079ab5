package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Hard delete (SRD §14.4): DeleteSession and DeleteBranch remove what a
// session or a branch stored, for good, from every file of the data dir:
// see persistence.Purge for the store, and docs/SECURITY.md.
//
// The rule for forks: a fork shares its parent's transcript up to its
// fork point (content addressing, no copy). A branch with forks is not
// deleted (ErrHasForks, nothing is): delete its forks first, or the whole
// session. A session's first branch goes only with its session
// (ErrFirstBranch).

// Errors of DeleteBranch.
var (
	// ErrHasForks: the branch has forks, which share its transcript.
	ErrHasForks = errors.New("actors: the branch has forks")
	// ErrFirstBranch: the branch is its session's first (the root of
	// every other); it is deleted with the session.
	ErrFirstBranch = errors.New("actors: the branch is its session's first branch")
)

// DeleteResult says what a delete removed and how long it took.
type DeleteResult struct {
	persistence.PurgeResult
	Session  messages.SessionID
	Journals int // stream journal files removed
}

// DeleteSession deletes a session and every branch of it, for good: once
// it returns, no file under the data dir holds a byte of their content
// (but see persistence.PurgeResult.ValueLogPending).
func (r *Runtime) DeleteSession(ctx context.Context, id messages.SessionID) (DeleteResult, error) {
	if _, err := r.purger.Session(ctx, id); err != nil {
		return DeleteResult{}, fmt.Errorf("delete session %s: %w", id, err)
	}
	if err := r.sessionPlaced(id); err != nil {
		return DeleteResult{}, err // its branch actors run on its owner
	}
	bs, err := r.purger.Branches(ctx, id)
	if err != nil {
		return DeleteResult{}, fmt.Errorf("delete session %s: %w", id, err)
	}
	ids := make([]messages.BranchID, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	res, err := r.purge(ctx, persistence.PurgeSpec{Session: id, DeleteSession: true}, ids)
	if err != nil {
		return res, fmt.Errorf("delete session %s: %w", id, err)
	}
	return res, nil
}

// DeleteBranch deletes a branch that has no forks and is not its
// session's first branch, for good (see DeleteSession). If it was the
// session's active branch, its parent becomes the active one.
func (r *Runtime) DeleteBranch(ctx context.Context, id messages.BranchID) (DeleteResult, error) {
	row, err := r.purger.BranchRow(ctx, id)
	if err != nil {
		return DeleteResult{}, fmt.Errorf("delete branch %s: %w", id, err)
	}
	if err := r.placed(ctx, id, row.Session); err != nil {
		return DeleteResult{}, err
	}
	if row.Parent.IsZero() {
		return DeleteResult{}, fmt.Errorf("%w: delete branch %s: it is the first branch of session %s: delete the session",
			ErrFirstBranch, id, row.Session)
	}
	bs, err := r.purger.Branches(ctx, row.Session)
	if err != nil {
		return DeleteResult{}, fmt.Errorf("delete branch %s: %w", id, err)
	}
	var forks []string
	for _, b := range bs {
		if b.Parent == id {
			forks = append(forks, b.ID.String())
		}
	}
	if len(forks) > 0 {
		return DeleteResult{}, fmt.Errorf("%w: delete branch %s: it has forks (%s), which share its turns: delete them first",
			ErrHasForks, id, strings.Join(forks, ", "))
	}
	res, err := r.purge(ctx, persistence.PurgeSpec{Session: row.Session, Branches: []messages.BranchID{id}}, []messages.BranchID{id})
	if err != nil {
		return res, fmt.Errorf("delete branch %s: %w", id, err)
	}
	return res, nil
}

// purge stops the actors of branches (which are never activated again),
// deletes what the store holds of them, their stream journals and what
// the retrieval memory holds of them.
func (r *Runtime) purge(ctx context.Context, spec persistence.PurgeSpec, branches []messages.BranchID) (DeleteResult, error) {
	undo := r.markDeleted(branches)
	for _, b := range branches {
		if err := r.stopBranch(ctx, b); err != nil {
			undo()
			return DeleteResult{}, err
		}
		spec.Actors = append(spec.Actors, r.actorName(b))
	}
	pr, err := r.purger.Purge(ctx, spec)
	if err != nil {
		undo() // nothing was deleted (or the store failed: a reopen finishes it)
		return DeleteResult{}, err
	}
	return r.purged(pr, spec.Session, branches)
}

// markDeleted marks branches deleted (never activated again) and returns
// the func that unmarks them, for a delete that did not happen.
func (r *Runtime) markDeleted(branches []messages.BranchID) (undo func()) {
	r.deletedMu.Lock()
	for _, b := range branches {
		r.deleted[b] = true
	}
	r.deletedMu.Unlock()
	return func() {
		r.deletedMu.Lock()
		for _, b := range branches {
			delete(r.deleted, b)
		}
		r.deletedMu.Unlock()
	}
}

// purged finishes the delete of branches of session once the store has
// dropped them (pr): their stream journals, what the retrieval memory
// holds of them, their failure records.
func (r *Runtime) purged(pr persistence.PurgeResult, session messages.SessionID, branches []messages.BranchID) (DeleteResult, error) {
	res := DeleteResult{PurgeResult: pr, Session: session}
	// Journals are closed by their steps, some after the commit that
	// finalized them (finishJournal): wait for those first.
	for _, s := range pr.Steps {
		r.finishing.wait(s)
	}
	n, err := r.journals.Remove(context.Background(), pr.Steps)
	res.Journals = n
	if err != nil {
		return res, err
	}
	r.mem.forget(branches)
	r.stopped.forget(branches)
	r.log.Info().Str("session", session.String()).Int("branches", len(branches)).Int("nodes", pr.Nodes).
		Int("keys", pr.Keys).Dur("took", pr.Took).Dur("scrub", pr.Scrub).Msg("deleted for good")
	return res, nil
}

// actorName is the persistence name (event log, snapshots) of branch b's
// actor: its PID's id under the root.
func (r *Runtime) actorName(b messages.BranchID) string { return r.root.Id + "/" + branchName(b) }

// isDeleted reports whether branch id was deleted (or is being deleted).
func (r *Runtime) isDeleted(id messages.BranchID) bool {
	r.deletedMu.Lock()
	defer r.deletedMu.Unlock()
	return r.deleted[id]
}

// stopBranchReq asks root to stop branch id's actor, if one is live or
// stopping; it answers a stopBranchReply.
type stopBranchReq struct{ id messages.BranchID }

type stopBranchReply struct{ pid *actor.PID } // nil: none

// stop stops branch id's actor and returns it (or the one stopping), to
// wait for.
func (ro *root) stop(ctx actor.Context, id messages.BranchID) stopBranchReply {
	if pid, ok := ro.live[id]; ok {
		delete(ro.live, id)
		ro.waiting[id] = nil
		ro.stopping[pid.Id] = true
		ctx.Stop(pid)
		return stopBranchReply{pid: ro.spawned[pid.Id]}
	}
	for pidID, b := range ro.byPID {
		if b == id {
			if pid := ro.spawned[pidID]; pid != nil && ro.asked[pidID] {
				ro.hardStop(ctx, pid) // it might take work and stay otherwise
			}
			return stopBranchReply{pid: ro.spawned[pidID]}
		}
	}
	return stopBranchReply{}
}

// hardStop stops pid, an idle branch actor asked to passivate (it is no
// longer routed to): it stops whether or not it took work since.
func (ro *root) hardStop(ctx actor.Context, pid *actor.PID) {
	delete(ro.asked, pid.Id)
	ro.stopping[pid.Id] = true
	ctx.Stop(pid)
}

// stopBranch stops branch id's actor and waits until it has terminated:
// it finishes the message in hand, and its children (a step streaming)
// stop with it.
func (r *Runtime) stopBranch(ctx context.Context, id messages.BranchID) error {
	res, err := r.sys.Root.RequestFuture(r.root, &stopBranchReq{id: id}, r.cfg.RequestTimeout).Result()
	if err != nil {
		return fmt.Errorf("stop branch %s: %w", id, err)
	}
	rep, _ := res.(stopBranchReply)
	if rep.pid == nil {
		return nil
	}
	select {
	case <-r.goneChan(rep.pid):
		r.pids.CompareAndDelete(id, rep.pid)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop branch %s: %w", id, ctx.Err())
	}
}

// stepWaits tracks work under way by step, for a delete to wait for.
type stepWaits struct {
	mu sync.Mutex
	m  map[messages.StepID]chan struct{}
}

// start records work on step and returns the func that ends it.
func (w *stepWaits) start(step messages.StepID) func() {
	c := make(chan struct{})
	w.mu.Lock()
	if w.m == nil {
		w.m = map[messages.StepID]chan struct{}{}
	}
	w.m[step] = c
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if w.m[step] == c {
			delete(w.m, step)
		}
		w.mu.Unlock()
		close(c)
	}
}

// wait waits for the work on step, if any is under way.
func (w *stepWaits) wait(step messages.StepID) {
	w.mu.Lock()
	c := w.m[step]
	w.mu.Unlock()
	if c != nil {
		<-c
	}
}

// forget drops what the memory holds of branches: their loaded indexes,
// and the cached chunk rows and turn chunks (all of them: they are a
// cache, read again from the store as needed).
func (m *memory) forget(branches []messages.BranchID) {
	m.mu.Lock()
	for _, b := range branches {
		delete(m.parts, b)
	}
	for _, pt := range m.parts {
		pt.rows.clear()
	}
	m.mu.Unlock()
	m.turnChunks.clear()
	m.parents.clear()
}
