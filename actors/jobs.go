package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/core"
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

// maxLostJobs bounds the jobs lost or failed in a row that a branch
// asks for again at once (an index job that failed waits indexRetry);
// past it each waits retryWait.
const maxLostJobs = 5

// retryBase is the first wait of retryWait, maxRetryWait its longest
// (Runtime.retryBase and Runtime.retryMax start as them).
const (
	retryBase    = time.Second
	maxRetryWait = 10 * time.Second
)

// retryWait is the wait before a job is asked again after a.lost jobs
// were lost or failed in a row: none up to maxLostJobs, then
// Runtime.retryBase doubling up to Runtime.retryMax. A job is never given
// up: its work is durable, and a branch with work due and nothing asked
// must make progress.
func (a *branchActor) retryWait() time.Duration {
	n := a.lost - maxLostJobs
	if n <= 0 {
		return 0
	}
	d := a.rt.retryBase
	for i := 1; i < n && d < a.rt.retryMax; i++ {
		d *= 2
	}
	return min(d, a.rt.retryMax)
}

// foldRetry makes a branch ask for the fold due, after retryWait.
type foldRetry struct{ to *branchActor }

// foldSoon asks for the fold due now (foldAgain), or after retryWait when
// jobs were lost in a row; a fold asked in the meantime (a turn's, a
// commit's) goes first, and the timer then finds a summary on its way.
func (a *branchActor) foldSoon(ctx actor.Context) {
	wait := a.retryWait()
	if wait <= 0 {
		a.foldAgain(ctx)
		return
	}
	if a.foldRetrying {
		return
	}
	a.foldRetrying = true
	a.retrying++
	after(ctx, wait, &foldRetry{to: a})
}

// indexLater asks for the index job of turn again after wait, or after
// retryWait if longer.
func (a *branchActor) indexLater(ctx actor.Context, turn messages.TurnID, wait time.Duration) {
	if wait = max(wait, a.retryWait()); wait <= 0 {
		a.run(ctx, []core.Effect{core.Index{Turn: turn}})
		return
	}
	if _, ok := a.indexWaiting[turn]; ok {
		return // its timer is set
	}
	a.indexWaiting[turn] = struct{}{}
	a.retrying++
	after(ctx, wait, &indexAgain{to: a, turn: turn})
}

// indexCommitted asks for the index job of turn if it is committed and
// not indexed yet.
func (a *branchActor) indexCommitted(ctx actor.Context, turn messages.TurnID) {
	if t, ok := a.b.Turn(turn); ok && t.Phase == messages.PhaseStateCommitted {
		a.run(ctx, []core.Effect{core.Index{Turn: turn}})
	}
}

// retryNow asks at once for the jobs waiting for a retry timer, once a
// job succeeded: the timers still fire, and find nothing left to ask.
func (a *branchActor) retryNow(ctx actor.Context) {
	if a.foldRetrying {
		a.foldRetrying = false
		if a.summarizing == 0 {
			a.foldAgain(ctx)
		}
	}
	for turn := range a.indexWaiting {
		delete(a.indexWaiting, turn)
		a.indexCommitted(ctx, turn)
	}
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

// endIndexJob forgets the index job of turn: answered, failed or lost.
func (a *branchActor) endIndexJob(turn messages.TurnID) { delete(a.indexing, turn) }

// indexRetry is the wait before an index job that failed is asked again.
const indexRetry = time.Second

// jobCheck makes a branch look at a job it asked for (one of the three
// is set) jobCheck after asking (checkJob).
type jobCheck struct {
	to      *branchActor
	summary *summarizeReq
	shrink  *shrinkReq
	index   *indexReq
}

// ask sends a job to a worker, holding it in Runtime.jobs until the
// worker is done with it, and looks at it after Runtime.jobCheck.
func (a *branchActor) ask(ctx actor.Context, worker *actor.PID, req any, check *jobCheck) {
	a.rt.jobs.hold(req)
	ctx.Send(worker, req)
	after(ctx, a.rt.jobCheck, check)
}

// checkJob looks at a job the branch asked for: answered or superseded,
// there is nothing to do; held by a worker (queued or running, however
// long a backlog), it is looked at again later; held by none and not
// answered, it was lost without a word (no answer, no workLost) and is
// asked again, as a job a worker lost is (a shrink falls back to the
// deterministic one). An answer on its way when the check runs makes the
// job asked twice, which only repeats work.
func (a *branchActor) checkJob(ctx actor.Context, m *jobCheck) {
	if m.to != a {
		return // an earlier instance's
	}
	var req any
	switch {
	case m.summary != nil && m.summary == a.summaryReq:
		req = m.summary
	case m.shrink != nil && !a.shrinkTurn.IsZero() && a.shrinkAsked == m.shrink.epoch+1:
		req = m.shrink
	case m.index != nil && a.indexing[m.index.turn] == m.index:
		req = m.index
	default:
		return
	}
	if a.rt.jobs.holds(req) {
		after(ctx, a.rt.jobCheck, m)
		return
	}
	switch {
	case m.summary != nil:
		a.summaryLost("no worker holds it")
		a.foldSoon(ctx)
	case m.shrink != nil:
		a.shrunk(ctx, &shrinkDone{epoch: m.shrink.epoch, err: errors.New("the shrink was lost: no worker holds it")})
	default:
		a.lost++
		a.rt.log.Warn().Str("branch", a.id.String()).Str("turn", m.index.turn.String()).Dur("asked_again_in", a.retryWait()).
			Msg("an index job was asked for and never answered")
		a.endIndexJob(m.index.turn)
		a.indexLater(ctx, m.index.turn, 0)
	}
}

// indexAgain asks for the index job of turn again.
type indexAgain struct {
	to   *branchActor
	turn messages.TurnID
}

// summaryCheck is the deadline of the summary of epoch asked at asked.
type summaryCheck struct {
	to    *branchActor
	epoch uint64
	asked mark
}

// summaryLost forgets the summary the branch waits for, which got no
// answer (why); the caller asks again (foldAgain, foldSoon). Its answer,
// if it comes after all, is used if the branch still waits for a
// summary of the same epoch.
func (a *branchActor) summaryLost(why string) {
	a.lost++
	a.rt.log.Warn().Str("branch", a.id.String()).Uint64("epoch", a.summarizing-1).Str("reason", why).Dur("asked_again_in", a.retryWait()).
		Msg("a summary was asked for and never answered")
	a.summarizing, a.summaryReq = 0, nil
}

// workLost asks again for a job whose worker failed while doing it (the
// job is durable: it is derived again from the branch's state), at once
// or after retryWait; a shrink falls back to the deterministic one,
// which needs no worker.
func (a *branchActor) workLost(ctx actor.Context, m *workLost) {
	switch {
	case m.summary != nil:
		if a.summarizing == 0 || m.summary != a.summaryReq {
			// Answered, superseded, asked again already, or an earlier
			// instance's request: the one this instance waits for, if
			// any, is on its way.
			return
		}
		a.lost++
		a.lostLog(m).Uint64("epoch", m.summary.epoch).Msg("a summary's worker failed")
		a.summarizing, a.summaryReq = 0, nil
		a.foldSoon(ctx)
	case m.shrink != nil:
		a.lostLog(m).Uint64("epoch", m.shrink.epoch).Msg("a shrink's worker failed; the deterministic shrink is used")
		a.shrunk(ctx, &shrinkDone{epoch: m.shrink.epoch, err: errors.New(m.reason)})
	case m.index != nil:
		if a.indexing[m.index.turn] != m.index {
			return // answered, or an earlier instance's: this one's recovery asked
		}
		a.lost++
		a.lostLog(m).Str("turn", m.index.turn.String()).Msg("an index job's worker failed")
		a.endIndexJob(m.index.turn)
		a.indexLater(ctx, m.index.turn, 0)
	}
}

// lostLog starts the warning that m's job was lost.
func (a *branchActor) lostLog(m *workLost) *zerolog.Event {
	return a.rt.log.Warn().Str("branch", a.id.String()).Str("kind", string(m.kind)).Str("reason", m.reason).Dur("asked_again_in", a.retryWait())
}

// retryIndex asks again for the index job m names, whose wait is over,
// if it still waits.
func (a *branchActor) retryIndex(ctx actor.Context, m *indexAgain) {
	if m.to != a {
		return // an earlier instance's: this one's recovery asked
	}
	a.retrying--
	if _, ok := a.indexWaiting[m.turn]; ok {
		delete(a.indexWaiting, m.turn)
		a.indexCommitted(ctx, m.turn)
	}
}

// retryFold asks for the fold due, its wait over, if it still waits.
func (a *branchActor) retryFold(ctx actor.Context, m *foldRetry) {
	if m.to != a {
		return
	}
	a.retrying--
	if a.foldRetrying {
		a.foldRetrying = false
		if a.summarizing == 0 {
			a.foldAgain(ctx)
		}
	}
}

// summaryDue takes the summary m names for lost if it is still awaited
// at its deadline, and asks again.
func (a *branchActor) summaryDue(ctx actor.Context, m *summaryCheck) {
	if m.to == a && a.summarizing == m.epoch+1 && a.summaryAsked.same(m.asked) {
		a.summaryLost("no answer in " + a.rt.summaryDeadline.String())
		a.foldSoon(ctx)
	}
}

// indexFinished records what an index job gave (TurnIndexed, with its
// chunks, held), or asks for it again after a wait if it failed.
func (a *branchActor) indexFinished(ctx actor.Context, m *indexDone) {
	a.endIndexJob(m.turn)
	if m.err != nil {
		a.lost++
		wait := max(indexRetry, a.retryWait())
		a.rt.log.Warn().Err(m.err).Str("branch", a.id.String()).Str("turn", m.turn.String()).Dur("asked_again_in", wait).
			Msg("index failed")
		a.indexLater(ctx, m.turn, wait)
		return
	}
	a.lost = 0
	defer a.retryNow(ctx)
	evs, err := a.b.MarkIndexed(m.turn, len(m.rows), a.now())
	if err != nil {
		a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("mark indexed")
		return
	}
	for i, ev := range evs {
		tx := a.txFor(ev)
		if i == 0 {
			tx.Chunks = m.rows // inserted unless present: indexing twice adds nothing
			tx.Vectors = m.vecs
			tx.TermUpdates = m.ups
			a.indexed = append(a.indexed, m)
		}
		// Held: committed with the branch's next write (the next
		// turn's, if it comes soon) or else by flushIndexedReq after
		// IndexFlushDelay, with any other index results by then: a
		// synced write saved, off the path of any turn. Nobody is
		// told a turn is indexed before (Inspect flushes first); a
		// crash before the commit loses nothing, as the index jobs
		// run again.
		a.persistHeld(ctx, ev, tx)
	}
	if !a.flushQueued {
		a.flushQueued = true
		after(ctx, a.rt.cfg.IndexFlushDelay, &flushIndexedReq{})
	}
}
