package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// folder folds the branch's pending turns into states with the
// librarian: it asks for the summary of the fold due (core.Summarize),
// commits it (summaryDone), drives a manual fold (/commit) until nothing
// is pending, and has the head summary shrunk when a context needs it
// (askShrink, shrunk). The summaries it waits for are paced by retries.
type folder struct {
	c       *branchCore
	retries *retrier
	msgs    *messageCache // the messages of the pending turns, given with a summary's request
	// run runs the effects of the fold due (the actor's effects); resume
	// goes on with the turn that waited for a shrink.
	run    func(ctx actor.Context, effects []core.Effect)
	resume func(ctx actor.Context, turn messages.TurnID)

	manual      bool   // a /commit is folding every pending turn
	summarizing uint64 // epoch+1 of the summary asked for; 0 none
	// summaryAsked is when the summary summarizing waits for was asked:
	// one with no answer by summaryDeadline (a summaryCheck), or
	// commitReask when a commit is asked, is taken for lost and asked
	// again, so that a request lost without a workLost never leaves the
	// branch's pending turns unfolded.
	summaryAsked mark
	summaryReq   *summarizeReq // the request summarizing waits for
	// shrinkAsked is epoch+1 of the last head summary the librarian was
	// asked to shrink (Config.Shrink), so that each summary is asked
	// once; shrinkTurn is the turn waiting for it, zero when none.
	shrinkAsked uint64
	shrinkTurn  messages.TurnID
}

// summaryCheck is the deadline of the summary of epoch asked at asked.
type summaryCheck struct {
	to    *branchCore
	epoch uint64
	asked mark
}

// summarize asks the librarian for the summary e calls for, unless this
// epoch's is on its way.
func (f *folder) summarize(ctx actor.Context, e core.Summarize) {
	if f.summarizing == e.Epoch+1 {
		return // this epoch's summary is on its way
	}
	c := f.c
	f.summarizing = e.Epoch + 1
	turns := make([]messages.PendingTurn, 0, len(e.Turns))
	known := map[messages.TurnID]messages.Message{}
	for _, id := range e.Turns {
		if t, ok := c.b.Turn(id); ok {
			turns = append(turns, messages.PendingTurn{Turn: t.ID, Seq: t.Seq, Reply: t.Reply})
			f.msgs.knownInto(known, t.ID, t.Reply)
		}
	}
	f.summaryReq = &summarizeReq{known: known, from: ctx.Self(), branch: c.id, epoch: e.Epoch, pinned: e.State.Pinned,
		count:    c.rt.counter(c.rt.model(c.b.Model)),
		previous: e.State.Summary, turns: turns}
	c.ask(ctx, c.rt.librarian(c.id), f.summaryReq, &jobCheck{to: c, summary: f.summaryReq})
	f.summaryAsked = markNow()
	after(ctx, c.rt.summaryDeadline, &summaryCheck{to: c, epoch: e.Epoch, asked: f.summaryAsked})
}

// askShrink starts step 4 of the shrinker with a librarian model
// (Config.Shrink) when the context of turn needs it
// (core.Branch.ShrinkDue, core.AskShrink): the librarian is
// asked to shrink the head summary and turn waits (still accepted) until
// the answer is committed as a new state (shrunk). It reports whether
// turn now waits. Each head summary is asked for once; without
// Config.Shrink, or when the answer cannot be used, the deterministic
// core.ShrinkSummary of assembleShrinking stands.
func (f *folder) askShrink(ctx actor.Context, turn messages.TurnID, rep core.AssemblyReport) bool {
	c := f.c
	if c.rt.cfg.Shrink == nil {
		return false
	}
	e, ok := c.b.ShrinkDue(turn, rep, f.shrinkAsked)
	if !ok {
		return false
	}
	f.shrinkAsked, f.shrinkTurn = e.Epoch+1, e.Turn
	c.rt.log.Info().Str("branch", c.id.String()).Str("turn", turn.String()).Int("target_tokens", e.Target).
		Msg("context over budget: the librarian shrinks the head summary")
	req := &shrinkReq{from: ctx.Self(), epoch: e.Epoch, summary: e.Summary, target: e.Target, count: c.rt.counter(c.rt.model(c.b.Model))}
	c.ask(ctx, c.rt.librarian(c.id), req, &jobCheck{to: c, shrink: req})
	return true
}

// shrinking reports whether turn waits for the librarian's shrink.
func (f *folder) shrinking(turn messages.TurnID) bool {
	return !f.shrinkTurn.IsZero() && turn == f.shrinkTurn
}

// shrunk commits the librarian's shrunk head summary as a new state, if
// it is shorter and the branch is still at the epoch it was read at, and
// goes on with the waiting turn (resume), if it is still accepted.
func (f *folder) shrunk(ctx actor.Context, m *shrinkDone) {
	c := f.c
	turn := f.shrinkTurn
	f.shrinkTurn = messages.TurnID{}
	log := c.rt.log.With().Str("branch", c.id.String()).Logger()
	switch {
	case m.err != nil:
		log.Warn().Err(m.err).Msg("shrink summary failed; the deterministic shrink is used")
	case len(m.summary) >= len(c.b.State.Summary) || m.epoch != c.b.Epoch:
		log.Info().Uint64("epoch", m.epoch).Uint64("head_epoch", c.b.Epoch).Msg("shrunk summary not used: stale or not shorter")
	default:
		now := c.now()
		state := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now), Seq: c.b.State.Seq + 1,
			Summary: m.summary, Pinned: c.b.State.Pinned}
		evs, err := c.b.CommitShrunk(state, m.epoch, now)
		if err != nil {
			log.Warn().Err(err).Msg("commit shrunk summary")
			break
		}
		c.persistAll(ctx, evs)
		f.shrinkAsked = c.b.Epoch + 1 // this summary is the shrunk one: do not shrink it again
	}
	if t, ok := c.b.Turn(turn); ok && t.Phase == messages.PhaseAccepted {
		f.resume(ctx, turn)
	}
}

// commit commits the summary m as the branch's next state, if it is the
// one awaited; a failure asks for the fold again (retries.foldSoon).
func (f *folder) commit(ctx actor.Context, m *summaryDone) {
	c := f.c
	if f.summarizing != m.epoch+1 {
		return // superseded
	}
	f.summarizing, f.summaryReq = 0, nil
	if obs := c.rt.cfg.ObserveSummary; obs != nil {
		defer func() { obs(c.id, m.epoch+1 == c.b.Epoch, m.err) }()
	}
	if m.err != nil {
		f.retries.lost++
		c.rt.log.Warn().Err(m.err).Str("branch", c.id.String()).Dur("asked_again_in", f.retries.wait()).Msg("summarize failed")
		f.retries.foldSoon(ctx)
		return
	}
	f.retries.lost = 0
	defer f.retries.retryNow(ctx)
	now := c.now()
	state := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now), Seq: c.b.State.Seq + 1,
		Summary: m.summary, Pinned: c.b.State.Pinned}
	evs, err := c.b.Commit(state, m.turns, m.epoch, now)
	if errors.Is(err, core.ErrStaleEpoch) {
		f.again(ctx) // the state moved on: fold again if still due
		return
	}
	if err != nil {
		f.retries.lost++
		c.rt.log.Warn().Err(err).Str("branch", c.id.String()).Dur("asked_again_in", f.retries.wait()).Msg("commit state")
		f.retries.foldSoon(ctx)
		return
	}
	for _, ev := range evs {
		tx := c.txFor(ev)
		for i := range tx.Turns { // the folded turns' rows: the call's time is theirs
			tx.Turns[i].SummarizeMicros = micros(m.took)
		}
		c.persist(ctx, ev, tx)
	}
	if f.manual && f.summarizing == 0 {
		f.again(ctx) // a manual fold goes on until nothing is pending
	}
}

// again asks for the fold due now: every pending turn while a manual
// fold (/commit) is unfinished, else what the policy calls for.
func (f *folder) again(ctx actor.Context) {
	reason := core.FoldAuto
	if f.manual {
		reason = core.FoldManual
	}
	if fold, ok := f.c.b.FoldDue(reason); ok {
		f.run(ctx, []core.Effect{fold})
	} else if f.manual {
		f.manual = false
		f.c.rt.manualFolds.Delete(f.c.id)
	}
}

// budgetFold asks for a budget fold (a context over the policy's
// fraction of its budget), unless a summary is on its way.
func (f *folder) budgetFold(ctx actor.Context) {
	if fold, ok := f.c.b.FoldDue(core.FoldBudget); ok && f.summarizing == 0 {
		f.run(ctx, []core.Effect{fold})
	}
}

// resumeManual goes on with a commit asked of the instance before this
// one, if one was.
func (f *folder) resumeManual(ctx actor.Context) {
	if _, ok := f.c.rt.manualFolds.Load(f.c.id); ok {
		f.manual = true
		if f.summarizing == 0 {
			f.again(ctx)
		}
	}
}

// commitPending starts a manual fold (CommitPending), which folds every
// pending turn, here or in the instance that replaces this one.
func (f *folder) commitPending(ctx actor.Context) {
	c := f.c
	f.manual = true
	c.rt.manualFolds.Store(c.id, struct{}{})
	if f.summarizing != 0 {
		if !c.rt.jobs.holds(f.summaryReq) {
			f.summaryLost("no worker holds it when a commit was asked")
		} else if f.summaryAsked.elapsed() > c.rt.commitReask {
			f.summaryLost("no answer in " + c.rt.commitReask.String() + " when a commit was asked")
		}
	}
	if f.summarizing == 0 {
		f.again(ctx)
	}
	// else the summary under way is committed, then the manual fold
	// goes on (commit); a summary its worker lost is asked for again
	// (workLost). Asking again now would queue one more summary of the
	// same turns behind it per request: a client asking in a loop
	// filled the librarians' mailboxes faster than they wrote
	// summaries.
}

// summaryLost forgets the summary the branch waits for, which got no
// answer (why); the caller asks again (again, foldSoon). Its answer,
// if it comes after all, is used if the branch still waits for a
// summary of the same epoch.
func (f *folder) summaryLost(why string) {
	f.retries.lost++
	f.c.rt.log.Warn().Str("branch", f.c.id.String()).Uint64("epoch", f.summarizing-1).Str("reason", why).Dur("asked_again_in", f.retries.wait()).
		Msg("a summary was asked for and never answered")
	f.summarizing, f.summaryReq = 0, nil
}

// summaryDue takes the summary m names for lost if it is still awaited
// at its deadline, and asks again.
func (f *folder) summaryDue(ctx actor.Context, m *summaryCheck) {
	if m.to == f.c && f.summarizing == m.epoch+1 && f.summaryAsked.same(m.asked) {
		f.summaryLost("no answer in " + f.c.rt.summaryDeadline.String())
		f.retries.foldSoon(ctx)
	}
}

// summaryWorkLost asks again for the summary m's worker failed on, if
// it is the one awaited (else it was answered, superseded, asked again
// already, or an earlier instance's).
func (f *folder) summaryWorkLost(ctx actor.Context, m *workLost) {
	if f.summarizing == 0 || m.summary != f.summaryReq {
		return
	}
	f.retries.lost++
	f.retries.lostLog(m).Uint64("epoch", m.summary.epoch).Msg("a summary's worker failed")
	f.summarizing, f.summaryReq = 0, nil
	f.retries.foldSoon(ctx)
}

// awaited returns the summary or shrink of check this folder still
// waits for, nil if it is answered or superseded.
func (f *folder) awaited(check *jobCheck) any {
	switch {
	case check.summary != nil && check.summary == f.summaryReq:
		return check.summary
	case check.shrink != nil && !f.shrinkTurn.IsZero() && f.shrinkAsked == check.shrink.epoch+1:
		return check.shrink
	}
	return nil
}
