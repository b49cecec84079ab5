package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/messages"
)

// indexJobs indexes the branch's committed turns for retrieval: it asks
// the indexers for each turn's index job (core.Index), records what they
// give (TurnIndexed with the turn's chunks, held until the branch's next
// write or Config.IndexFlushDelay), and counts the branch's turns not
// indexed yet in Runtime.indexBacklog. The jobs it asks again are paced
// by retries.
type indexJobs struct {
	c       *branchCore
	retries *retrier
	msgs    *messageCache // the messages of the turns, given with a job's request
	// turnRuns says the turn in flight runs (it does not await its
	// client): its write takes the held results with it.
	turnRuns func() bool

	asked       map[messages.TurnID]*indexReq // the index jobs asked for, by turn
	held        []*indexDone                  // written held, until the next write commits them
	flushQueued bool                          // a flushIndexedReq is in the mailbox
	// backlog is what this instance counts in Runtime.indexBacklog: its
	// turns folded and not yet indexed.
	backlog int64
}

// ask asks an indexer for the index job of turn, unless one is asked
// already; an instance that replaced a failed one takes over the job its
// predecessor asked for if a worker still holds it.
func (x *indexJobs) ask(ctx actor.Context, turn messages.TurnID) {
	c := x.c
	if x.asked[turn] != nil {
		return
	}
	t, ok := c.b.Turn(turn)
	if !ok {
		return
	}
	if req, ok := c.rt.jobs.indexJob(c.id, t.ID); ok && req.from.Equal(ctx.Self()) {
		// Asked by the instance this one replaced, and still held by a
		// worker, which answers this actor: taken over.
		x.asked[turn] = req
		after(ctx, c.rt.jobCheck, &jobCheck{to: c, index: req})
		return
	}
	known := map[messages.TurnID]messages.Message{}
	x.msgs.knownInto(known, t.ID, t.Reply)
	req := &indexReq{known: known, from: ctx.Self(), branch: c.id, session: c.b.Session, turn: t.ID, seq: t.Seq, reply: t.Reply}
	x.asked[turn] = req
	c.ask(ctx, c.rt.indexer(c.id), req, &jobCheck{to: c, index: req})
}

// awaits reports whether req is the index job of its turn asked for.
func (x *indexJobs) awaits(req *indexReq) bool { return x.asked[req.turn] == req }

// end forgets the index job of turn: answered, failed or lost.
func (x *indexJobs) end(turn messages.TurnID) { delete(x.asked, turn) }

// lost asks again for the index job of turn, lost (why is logged by
// the caller): at once, or after the retries' wait.
func (x *indexJobs) lost(ctx actor.Context, turn messages.TurnID) {
	x.end(turn)
	x.retries.indexLater(ctx, turn, 0)
}

// workLost asks again for the index job m's worker failed on, if it is
// the one awaited (else it was answered, or is an earlier instance's:
// this one's recovery asked).
func (x *indexJobs) workLost(ctx actor.Context, m *workLost) {
	if !x.awaits(m.index) {
		return
	}
	x.retries.lost++
	x.retries.lostLog(m).Str("turn", m.index.turn.String()).Msg("an index job's worker failed")
	x.lost(ctx, m.index.turn)
}

// unanswered asks again for the index job req, which no worker holds and
// nobody answered.
func (x *indexJobs) unanswered(ctx actor.Context, req *indexReq) {
	x.retries.lost++
	x.c.rt.log.Warn().Str("branch", x.c.id.String()).Str("turn", req.turn.String()).Dur("asked_again_in", x.retries.wait()).
		Msg("an index job was asked for and never answered")
	x.lost(ctx, req.turn)
}

// finished records what an index job gave (TurnIndexed, with its
// chunks, held), or asks for it again after a wait if it failed.
func (x *indexJobs) finished(ctx actor.Context, m *indexDone) {
	c := x.c
	x.end(m.turn)
	if m.err != nil {
		x.retries.lost++
		wait := max(indexRetry, x.retries.wait())
		c.rt.log.Warn().Err(m.err).Str("branch", c.id.String()).Str("turn", m.turn.String()).Dur("asked_again_in", wait).
			Msg("index failed")
		x.retries.indexLater(ctx, m.turn, wait)
		return
	}
	x.retries.lost = 0
	defer x.retries.retryNow(ctx)
	evs, err := c.b.MarkIndexed(m.turn, len(m.rows), c.now())
	if err != nil {
		c.rt.log.Warn().Err(err).Str("branch", c.id.String()).Msg("mark indexed")
		return
	}
	for i, ev := range evs {
		tx := c.txFor(ev)
		for j := range tx.Turns {
			if tx.Turns[j].ID == m.turn {
				tx.Turns[j].IndexMicros = micros(m.took)
			}
		}
		if i == 0 {
			tx.Chunks = m.rows // inserted unless present: indexing twice adds nothing
			tx.Vectors = m.vecs
			tx.TermUpdates = m.ups
			x.hold(m)
		}
		// Held: committed with the branch's next write (the next
		// turn's, if it comes soon) or else by flushIndexedReq after
		// IndexFlushDelay, with any other index results by then: a
		// synced write saved, off the path of any turn. Nobody is
		// told a turn is indexed before (Inspect flushes first); a
		// crash before the commit loses nothing, as the index jobs
		// run again.
		c.persistHeld(ctx, ev, tx)
	}
	if !x.flushQueued {
		x.flushQueued = true
		after(ctx, c.rt.cfg.IndexFlushDelay, &flushIndexedReq{})
	}
}

// hold keeps m, written held, until the write that commits it.
func (x *indexJobs) hold(m *indexDone) { x.held = append(x.held, m) }

// holding reports whether index results wait for a commit.
func (x *indexJobs) holding() bool { return len(x.held) > 0 }

// committed adds the committed index results' chunks to the retrieval
// index.
func (x *indexJobs) committed() {
	for _, m := range x.held {
		x.c.rt.mem.added(m.rows, m.vecs, m.ups)
	}
	x.held = nil
}

// flush commits the held index results, if a write has not taken them
// already, and so makes their chunks searchable.
func (x *indexJobs) flush() {
	x.flushQueued = false
	if len(x.held) == 0 {
		return
	}
	x.c.flush()
}

// flushDue commits the held index results once their delay is over,
// unless the turn in flight is to take them.
func (x *indexJobs) flushDue() {
	if x.turnRuns() {
		// The turn in flight ends with a write of its own (its response
		// or its failure; a stop flushes first), which takes the index
		// results with it. Committing them now would stall the turn
		// behind a synced write, and commit a deferred acceptance
		// before its response.
		x.flushQueued = false
		return
	}
	x.flush()
}

// countBacklog brings this instance's count in Runtime.indexBacklog up to
// date: its turns folded and not indexed yet.
func (x *indexJobs) countBacklog() {
	n := int64(0)
	if b := &x.c.b; b.Committed > b.Indexed {
		n = int64(b.Committed - b.Indexed)
	}
	x.c.rt.indexBacklog.Add(n - x.backlog)
	x.backlog = n
}

// release takes this instance's count out of Runtime.indexBacklog, as it
// ends: the next instance, if any, counts it.
func (x *indexJobs) release() {
	x.c.rt.indexBacklog.Add(-x.backlog)
	x.backlog = 0
}
