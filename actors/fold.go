package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// askShrink starts step 4 of the shrinker with a librarian model
// (Config.Shrink) when the context of turn needs it
// (core.Branch.ShrinkDue, core.AskShrink): the librarian is
// asked to shrink the head summary and turn waits (still accepted) until
// the answer is committed as a new state (shrunk). It reports whether
// turn now waits. Each head summary is asked for once; without
// Config.Shrink, or when the answer cannot be used, the deterministic
// core.ShrinkSummary of assembleShrinking stands.
func (a *branchActor) askShrink(ctx actor.Context, turn messages.TurnID, rep core.AssemblyReport) bool {
	if a.rt.cfg.Shrink == nil {
		return false
	}
	e, ok := a.b.ShrinkDue(turn, rep, a.shrinkAsked)
	if !ok {
		return false
	}
	a.shrinkAsked, a.shrinkTurn = e.Epoch+1, e.Turn
	a.rt.log.Info().Str("branch", a.id.String()).Str("turn", turn.String()).Int("target_tokens", e.Target).
		Msg("context over budget: the librarian shrinks the head summary")
	req := &shrinkReq{from: ctx.Self(), epoch: e.Epoch, summary: e.Summary, target: e.Target, count: a.rt.counter(a.rt.model(a.b.Model))}
	a.ask(ctx, a.rt.librarian(a.id), req, &jobCheck{to: a, shrink: req})
	return true
}

// shrunk commits the librarian's shrunk head summary as a new state, if
// it is shorter and the branch is still at the epoch it was read at, and
// prepares the waiting turn again (or fails it, if cancelled meanwhile).
func (a *branchActor) shrunk(ctx actor.Context, m *shrinkDone) {
	turn := a.shrinkTurn
	a.shrinkTurn = messages.TurnID{}
	log := a.rt.log.With().Str("branch", a.id.String()).Logger()
	switch {
	case m.err != nil:
		log.Warn().Err(m.err).Msg("shrink summary failed; the deterministic shrink is used")
	case len(m.summary) >= len(a.b.State.Summary) || m.epoch != a.b.Epoch:
		log.Info().Uint64("epoch", m.epoch).Uint64("head_epoch", a.b.Epoch).Msg("shrunk summary not used: stale or not shorter")
	default:
		now := a.now()
		state := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now), Seq: a.b.State.Seq + 1,
			Summary: m.summary, Pinned: a.b.State.Pinned}
		evs, err := a.b.CommitShrunk(state, m.epoch, now)
		if err != nil {
			log.Warn().Err(err).Msg("commit shrunk summary")
			break
		}
		a.persistAll(ctx, evs)
		a.shrinkAsked = a.b.Epoch + 1 // this summary is the shrunk one: do not shrink it again
	}
	t, ok := a.b.Turn(turn)
	if !ok || t.Phase != messages.PhaseAccepted {
		return
	}
	if a.cancelled {
		a.fail(ctx, turn, messages.FailCancelled, "cancelled while the context was being shrunk")
		return
	}
	a.prepare(ctx, turn)
}

func (a *branchActor) commit(ctx actor.Context, m *summaryDone) {
	if a.summarizing != m.epoch+1 {
		return // superseded
	}
	a.summarizing, a.summaryReq = 0, nil
	if obs := a.rt.cfg.ObserveSummary; obs != nil {
		defer func() { obs(a.id, m.epoch+1 == a.b.Epoch, m.err) }()
	}
	if m.err != nil {
		a.lost++
		a.rt.log.Warn().Err(m.err).Str("branch", a.id.String()).Dur("asked_again_in", a.retryWait()).Msg("summarize failed")
		a.foldSoon(ctx)
		return
	}
	a.lost = 0
	defer a.retryNow(ctx)
	now := a.now()
	state := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now), Seq: a.b.State.Seq + 1,
		Summary: m.summary, Pinned: a.b.State.Pinned}
	evs, err := a.b.Commit(state, m.turns, m.epoch, now)
	if errors.Is(err, core.ErrStaleEpoch) {
		a.foldAgain(ctx) // the state moved on: fold again if still due
		return
	}
	if err != nil {
		a.lost++
		a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Dur("asked_again_in", a.retryWait()).Msg("commit state")
		a.foldSoon(ctx)
		return
	}
	a.persistAll(ctx, evs)
	if a.manualFold && a.summarizing == 0 {
		a.foldAgain(ctx) // a manual fold goes on until nothing is pending
	}
}

// foldAgain asks for the fold due now: every pending turn while a manual
// fold (/commit) is unfinished, else what the policy calls for.
func (a *branchActor) foldAgain(ctx actor.Context) {
	reason := core.FoldAuto
	if a.manualFold {
		reason = core.FoldManual
	}
	if fold, ok := a.b.FoldDue(reason); ok {
		a.run(ctx, []core.Effect{fold})
	} else if a.manualFold {
		a.manualFold = false
		a.rt.manualFolds.Delete(a.id)
	}
}

// commitPending starts a manual fold (CommitPending), which folds every
// pending turn, here or in the instance that replaces this one.
func (a *branchActor) commitPending(ctx actor.Context) {
	a.manualFold = true
	a.rt.manualFolds.Store(a.id, struct{}{})
	if a.summarizing != 0 {
		if !a.rt.jobs.holds(a.summaryReq) {
			a.summaryLost("no worker holds it when a commit was asked")
		} else if a.summaryAsked.elapsed() > a.rt.commitReask {
			a.summaryLost("no answer in " + a.rt.commitReask.String() + " when a commit was asked")
		}
	}
	if a.summarizing == 0 {
		a.foldAgain(ctx)
	}
	// else the summary under way is committed, then the manual fold
	// goes on (commit); a summary its worker lost is asked for again
	// (workLost). Asking again now would queue one more summary of the
	// same turns behind it per request: a client asking in a loop
	// filled the librarians' mailboxes faster than they wrote
	// summaries.
}
