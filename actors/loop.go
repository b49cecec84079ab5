package actors

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
)

// turnLoop runs the branch's turns: it accepts a turn (submit), prepares
// its context and runs its provider steps and tools (the step loop, with
// the client's tools and their results), ends it, and streams it to its
// caller. It works on the branch's core directly (embedded); the context
// is assembled by assemble and checked by fitContext, and a context over
// budget may wait for the folder's shrink.
type turnLoop struct {
	*branchCore
	msgs       *messageCache
	folds      *folder
	queries    branchQueries
	assemble   func(turn messages.TurnID, continuation messages.Items) (messages.AssembledContext, core.AssemblyReport, error)
	fitContext func(ctx actor.Context, rep core.AssemblyReport) error

	streams     map[messages.TurnID]*TurnStream
	step        messages.StepID            // the step streaming now
	tools       messages.StepID            // the step whose tool calls run now
	cancelStep  context.CancelFunc         // cancels the step or the tools running
	cancelled   bool                       // the user cancelled the turn in flight
	recipe      *persistence.ContextRecipe // of the turn in flight's first step
	sizeRetries int                        // steps of the turn in flight the provider rejected for size
	// deferring is set while a deferred submit runs its effects, so that
	// prepare leaves the turn's acceptance held; unacked while it is
	// held after (SubmitDeferred), until this actor's next write.
	deferring, unacked bool
	// journalWaits is the finished step's stepDone.committed while
	// finishStep runs: closed by the first write of the branch (the one
	// the step leads to), before that write's effects run, else when
	// finishStep returns.
	journalWaits chan struct{}
	counters     streamCounters // of the turn's finished steps
	// usage and lastModel are the tokens used by the provider steps run
	// for the turn's current stream (since its acceptance, or since
	// SubmitToolResults) and the model id of the last one (Update.Usage,
	// Update.Model).
	usage     providers.Usage
	lastModel string
	// retryAfter is the wait the provider asked for when it failed the
	// turn's last step (Update.RetryAfter), 0 when it asked none.
	retryAfter time.Duration
	// stepLimited is the turn whose step past tools.max_steps called the
	// client's tools too: it awaits them, and its answer says the limit
	// was reached (Update.StepLimit).
	stepLimited messages.TurnID
	// stall is the step of a client's tool loop that failed after the
	// client's results, if one did: its turn waits for the client to
	// retry them (stalledStep).
	stall *stalledStep
	// results are the streams started by tool results sent under an
	// idempotency key (SubmitToolResults), by key, while their turn is in
	// flight: a repeat follows them.
	results map[string]*TurnStream
	// hasher hashes the contexts of this branch's steps, keeping the
	// JSON of the last one's messages for the next.
	hasher contextHasher
	// keys are the idempotency keys of the turns this instance accepted
	// that are not committed yet (a deferred acceptance), by key; the
	// store holds the others.
	keys map[string]persistence.IdempotencyRow
}

// recovering reports whether the branch is replaying its log: nothing
// runs then.
func (l *turnLoop) recovering() bool { return l.mixin.Recovering() }

// turnDone ends the stream of e's turn and what waited for the turn.
func (l *turnLoop) turnDone(e core.TurnDone) {
	if l.stall != nil && l.stall.turn == e.Turn {
		l.stall = nil
	}
	for k, s := range l.results {
		if s.Turn == e.Turn {
			delete(l.results, k) // a repeat reads the turn's end from the store
		}
	}
	if s := l.streams[e.Turn]; s != nil {
		u := l.doneUpdate(Update{Done: true, Phase: e.Phase})
		if t, ok := l.b.Turn(e.Turn); ok {
			u.Outcome, u.Err = t.Outcome, t.Reason
		}
		if u.Outcome.Kind == messages.OutcomeIncomplete && u.Outcome.Reason == ReasonToolStepLimit {
			u.StepLimit = l.rt.cfg.MaxToolSteps
		}
		if e.Phase == messages.PhaseFailed {
			u.Outcome = l.failOutcome(e.Turn)
			u.Err, u.RetryAfter = u.Outcome.Message, l.retryAfter
		}
		s.push(u)
		delete(l.streams, e.Turn)
	}
}

// stop stops the step or the tools running: the branch's instance ends.
func (l *turnLoop) stop() {
	if l.cancelStep != nil {
		l.cancelStep()
	}
}

// interrupt tells whoever reads a stream that its turn was interrupted,
// as recovery records: the branch's instance ended.
func (l *turnLoop) interrupt() {
	for id, s := range l.streams {
		s.push(l.doneUpdate(Update{Done: true, Phase: messages.PhaseFailed, Err: core.InterruptedReason,
			Outcome: messages.FailedOutcome(messages.FailInterrupted, core.InterruptedReason)}))
		delete(l.streams, id)
	}
}

// committed is called after every write of the branch, which commits a
// deferred acceptance and its idempotency key, and what a finished step
// led to: its journal's fsync may go. That is let go here, before the
// write's effects run, not once they have: the goroutine that writes the
// journal is woken before the reader of the turn's stream, which the
// effects (the turn's end) wake, rather than after it, which would put
// the journal's write ahead of the stream's reader on this CPU (the Go
// scheduler runs the goroutine woken last first).
func (l *turnLoop) committed() {
	l.unacked = false
	clear(l.keys)
	l.releaseJournal()
}

// releaseJournal lets the journal of the finished step go to its fsync,
// if it waits.
func (l *turnLoop) releaseJournal() {
	if l.journalWaits != nil {
		close(l.journalWaits)
		l.journalWaits = nil
	}
}

// The texts of the error outputs that answer tool calls that did not run.
const (
	interruptedToolText = "error: the runtime stopped while this tool call was open; it may or may not have taken effect"
	cancelledToolText   = "error: the turn was cancelled; this tool call did not run"
	failedStepToolText  = "error: not executed: the turn ended early (%s)"
)

// ErrUnknownModel is returned by SelectModel for a name no model is
// configured under, as an *UnknownModelError.
var ErrUnknownModel = errors.New("actors: unknown model")

// UnknownModelError is the ErrUnknownModel of SelectModel: Name is not
// among the Configured models, or it is but cannot be used (Why).
type UnknownModelError struct {
	Name       string
	Configured []string // the models a branch can select, sorted
	Why        string   // why a configured model cannot be used, if it is one
}

func (e *UnknownModelError) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("%v: model %q cannot be used: %s", ErrUnknownModel, e.Name, e.Why)
	}
	return fmt.Sprintf("%v: model %q is not configured (models.<name> in config); known: %q", ErrUnknownModel, e.Name, e.Configured)
}

// Unwrap returns ErrUnknownModel.
func (e *UnknownModelError) Unwrap() error { return ErrUnknownModel }

// ErrNoTurnInFlight is returned by Cancel when the branch has no turn in
// flight to cancel.
var ErrNoTurnInFlight = errors.New("actors: no turn in flight")

// finishStep ends a provider step (SRD §12.2): it tells the core how
// the step ended, and runs what core.Branch.EndStep decides it calls for
// (endStep). The step's row is written with whatever the step leads to.
func (l *turnLoop) finishStep(ctx actor.Context, m *stepDone) {
	if m.committed != nil {
		// Whatever the step leads to is committed below (or it is
		// stale): its journal's fsync may go once that is written
		// (committed), or once this returns.
		l.releaseJournal()
		l.journalWaits = m.committed
		defer l.releaseJournal()
	}
	if m.step != l.step {
		return
	}
	l.releaseStep()
	l.step = messages.StepID{}
	l.counters = l.counters.plus(m.counters)
	l.usage = l.usage.Add(m.resp.Usage)
	l.lastModel = m.model
	if m.resp.Model != "" {
		l.lastModel = m.resp.Model // the model the upstream says answered
	}
	t, ok := l.b.Turn(m.turn)
	if !ok {
		return
	}
	row := l.stepRow(t, m)
	if obs := l.rt.cfg.ObserveStep; obs != nil {
		obs(l.id, row)
	}
	end := core.StepEnd{Turn: m.turn, Step: m.step, Items: m.resp.Items, Outcome: m.resp.Outcome,
		Failed: m.err != nil || !finalizable(m.resp.Outcome.Kind), SizeRetries: l.sizeRetries}
	var pe *providers.Error
	if end.Failed {
		end.Code, end.Reason = stepFailure(m, l.cancelled, l.rt.cfg.StepTimeout)
		end.TooLarge = errors.As(m.err, &pe) && pe.ContextTooLarge
	}
	l.endStep(ctx, end, m.resp.Items, pe, row)
}

// endStep runs what the end of a step calls for (core.Branch.EndStep):
// end is how it ended, items what it produced, pe the provider's error
// it failed with, if any, and row its record, written with what it leads
// to.
func (l *turnLoop) endStep(ctx actor.Context, end core.StepEnd, items messages.Items, pe *providers.Error, row persistence.StepRow) {
	switch e := l.b.EndStep(end, l.rt.toolMode(l.b.Model, l.memoryTools(end.Turn))).(type) {
	case core.RetryForSize:
		if !l.retryForSize(ctx, e, pe, row) {
			end.SizeRetries = core.MaxSizeRetries // fail it as it failed
			l.endStep(ctx, end, items, pe, row)
		}
	case core.StallForClient:
		l.setRetryAfter(pe)
		l.stallForClient(e, row)
	case core.EndLoop:
		if end.Failed {
			l.setRetryAfter(pe)
		}
		l.endLoop(ctx, e.Turn, e.Code, e.Reason, &row)
	case core.FinalizeStep:
		l.finalize(ctx, e.Turn, e.Step, items, e.Outcome, &row)
	case core.IssueCalls:
		evs, err := l.b.IssueToolCalls(e.Turn, e.Step, items, l.now())
		if err != nil {
			l.endLoop(ctx, e.Turn, messages.FailTurn, "tool calls: "+err.Error(), &row)
			return
		}
		tx := l.txFor(evs[0])
		tx.Steps = append(tx.Steps, row)
		l.persist(ctx, evs[0], tx) // gives RunTools
	}
}

// setRetryAfter keeps the wait the provider asked for when it failed
// the turn's last step with pe (nil: none), told the client
// (Update.RetryAfter).
func (l *turnLoop) setRetryAfter(pe *providers.Error) {
	l.retryAfter = 0
	if pe != nil {
		l.retryAfter = pe.RetryAfter
	}
}

// stepFailure says why the step m ended failed the turn: its code (one
// of messages' Fail* codes) and reason. cancelled is whether the user
// cancelled the turn; timeout is runtime.provider_timeout.
func stepFailure(m *stepDone, cancelled bool, timeout time.Duration) (code, reason string) {
	out := m.resp.Outcome
	var pe *providers.Error
	switch {
	case errors.Is(m.err, errStepCrashed):
		return messages.FailInterrupted, m.err.Error()
	case cancelled && (out.Kind == messages.OutcomeCancelled || errors.Is(m.err, context.Canceled)):
		return messages.FailCancelled, "cancelled"
	case errors.Is(m.err, context.DeadlineExceeded):
		return messages.FailProviderTimeout, fmt.Sprintf("the provider step timed out after %s (runtime.provider_timeout)", timeout)
	case errors.As(m.err, &pe) && pe.ContextTooLarge:
		return messages.FailContextTooLarge, m.err.Error()
	case pe != nil:
		return providerFailure(pe)
	case m.err != nil:
		return messages.FailProvider, m.err.Error()
	}
	reason = "provider step ended with outcome " + out.Kind.String()
	for _, s := range []string{out.Code, out.Message, out.Reason} {
		if s != "" {
			reason += ": " + s
		}
	}
	return messages.FailProvider, reason
}

// providerFailure is the code and reason of a turn whose step failed
// with pe, by its kind: what the runtime's client can do about it.
func providerFailure(pe *providers.Error) (code, reason string) {
	switch providers.KindOf(pe) {
	case providers.KindRateLimited:
		return messages.FailProviderRateLimited, fmt.Sprintf("the model's provider (%s) is rate limiting this server: %s", pe.Provider, upstreamText(pe))
	case providers.KindRejected:
		return messages.FailProviderRejected, fmt.Sprintf("the model's provider (%s) rejected the request: %s", pe.Provider, upstreamText(pe))
	case providers.KindModelNotFound:
		return messages.FailProviderModelNotFound, fmt.Sprintf("the model's provider (%s) does not know the model: %s", pe.Provider, upstreamText(pe))
	case providers.KindAuth:
		return messages.FailProviderAuth, fmt.Sprintf("the model's provider (%s) refused this server's own API key for it (%s); "+
			"the client's key is not at fault: the server's operator must fix the key (models.<name>.api_key_env)", pe.Provider, upstreamText(pe))
	case providers.KindOverloaded:
		return messages.FailProviderOverloaded, fmt.Sprintf("the model's provider (%s) is overloaded: %s", pe.Provider, upstreamText(pe))
	}
	return messages.FailProvider, pe.Error()
}

// upstreamText is what the provider said of pe: its message, with its
// status and code ("status 400: max_tokens: too large (invalid_request_error)").
func upstreamText(pe *providers.Error) string {
	s := pe.Message
	if pe.StatusCode != 0 {
		s = fmt.Sprintf("status %d: %s", pe.StatusCode, s)
	}
	if pe.Code != "" {
		s += " (" + pe.Code + ")"
	}
	return s
}

// stepRow is the record of the step m ended; a turn's first step keeps
// the recipe of its context.
func (l *turnLoop) stepRow(t core.Turn, m *stepDone) persistence.StepRow {
	var recipe *persistence.ContextRecipe
	if t.Steps <= 1 && l.recipe != nil && l.recipe.User == m.turn {
		recipe = l.recipe
		if m.hash != "" {
			recipe.Hash = m.hash
		}
	}
	return persistence.StepRow{ID: m.step, Branch: l.id, Turn: m.turn, Index: max(t.Steps, 1) - 1, Context: recipe,
		Provider: m.provider, Model: m.model, Request: m.resp.RawRequest, Response: m.resp.RawResponse,
		Items: m.resp.Items, Outcome: m.resp.Outcome, StreamPath: filepath.Join("streams", m.step.String()+".jsonl"),
		Displayed: m.counters.displayed, Durable: m.counters.durable, Started: m.started, Ended: l.now(),
		InputTokens: m.resp.Usage.InputTokens, OutputTokens: m.resp.Usage.OutputTokens,
		CacheReadTokens: m.resp.Usage.CacheReadTokens, CacheWriteTokens: m.resp.Usage.CacheWriteTokens}
}

// finalize records the response of turn (TX-A): the reply holds the
// turn's tool loop, then items, the last step's output. row, if not nil,
// is written with it. If the reply cannot be recorded the turn fails.
func (l *turnLoop) finalize(ctx actor.Context, turn messages.TurnID, step messages.StepID, items messages.Items,
	outcome messages.StepOutcome, row *persistence.StepRow) {
	t, _ := l.b.Turn(turn)
	reply := replyMessage(append(slices.Clone(t.Loop), items...))
	payload, err := reply.MarshalJSON()
	if err == nil {
		now := l.now()
		node := messages.NewID[messages.NodeID](now)
		var evs []messages.BranchEvent
		if evs, err = l.b.Finalize(turn, step, node, outcome, l.counters.displayed, l.counters.durable, now); err == nil {
			tx := l.txFor(evs[0])
			parent := turn
			tx.Appends = []persistence.TxAppend{{Branch: l.id, ID: node, Req: persistence.AppendRequest{
				Payload: payload, TypeTag: TypeAssistantMessage, Codec: CodecJSON, ExpectParent: &parent}}}
			if row != nil {
				// The commit that writes the row holds the step's output:
				// all it displayed is durable with it.
				r := *row
				r.Durable = r.Displayed
				tx.Steps = append(tx.Steps, r)
			}
			l.msgs.put(node, reply)
			// Once the response is committed everything streamed is
			// durable, whatever the journal's fsync at completion has got
			// to: the turn's end (run by persist, after the commit) says
			// so. A failed commit restarts the actor, counters and all.
			l.counters = l.counters.allDurable()
			l.persist(ctx, evs[0], tx)
			return
		}
	}
	l.failStep(ctx, turn, messages.FailTurn, "record the response: "+err.Error(), row)
}

// replyMessage is the assistant message recording items: text, tool uses
// and their results, reasoning, in order.
func replyMessage(items messages.Items) messages.Message {
	blocks := messages.ItemBlocks(items)
	if len(blocks) == 0 {
		blocks = messages.Blocks{messages.Text{Text: ""}}
	}
	return messages.NewMessage(messages.RoleAssistant, blocks...)
}

// endLoop ends a turn that cannot go on for reason: a turn without tool
// loop fails; one inside a loop is abandoned, so that what its tools did
// stays in the conversation.
func (l *turnLoop) endLoop(ctx actor.Context, turn messages.TurnID, code, reason string, row *persistence.StepRow) {
	reason = l.rt.cfg.Scrub.String(reason) // it may quote an error: stored, and in a tool loop sent on
	if t, ok := l.b.Turn(turn); ok && len(t.Loop) > 0 {
		l.abandon(ctx, turn, reason, fmt.Sprintf(failedStepToolText, reason), row)
		return
	}
	l.failStep(ctx, turn, code, reason, row)
}

// abandon ends turn's tool loop early (a crash, a cancellation, a step
// limit, a failed step): its open calls get error outputs holding text,
// then the response is finalized with what the loop recorded, outcome
// incomplete for reason. The next request is valid for any provider.
func (l *turnLoop) abandon(ctx actor.Context, turn messages.TurnID, reason, text string, row *persistence.StepRow) {
	if l.recovering() {
		return
	}
	if t, ok := l.b.Turn(turn); !ok || t.Phase != messages.PhaseResponding {
		return // ended already (a cancellation that came while its tools ran)
	}
	if outs := l.b.AbandonOutputs(turn, text); len(outs) > 0 {
		evs, err := l.b.RecordToolResults(turn, outs, messages.StepID{}, l.now())
		if err != nil {
			l.failStep(ctx, turn, messages.FailTurn, reason, row)
			return
		}
		tx := l.txFor(evs[0])
		if row != nil {
			tx.Steps, row = append(tx.Steps, *row), nil
		}
		l.persist(ctx, evs[0], tx)
	}
	t, ok := l.b.Turn(turn)
	if !ok {
		return
	}
	l.finalize(ctx, turn, t.Step, nil, messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: reason}, row)
}

// failStep fails turn with code for reason, writing row with it.
func (l *turnLoop) failStep(ctx actor.Context, turn messages.TurnID, code, reason string, row *persistence.StepRow) {
	reason = l.rt.cfg.Scrub.String(reason)
	evs, err := l.b.Fail(turn, code, reason, l.now())
	if err != nil {
		l.rt.log.Warn().Err(err).Str("branch", l.id.String()).Msg("fail turn")
		return
	}
	tx := l.txFor(evs[0])
	if row != nil {
		tx.Steps = append(tx.Steps, *row)
	}
	l.persist(ctx, evs[0], tx)
}

// ReasonToolStepLimit is the reason of the incomplete outcome of a turn
// whose model called the runtime's tools in more than tools.max_steps
// steps (core.ReasonToolStepLimit).
const ReasonToolStepLimit = core.ReasonToolStepLimit

// runTools runs the calls of e, off the actor, unless the core answers
// them otherwise (core.Branch.RunCalls: past the turn's limit of tool
// steps, or in a tools mode that runs none). The outputs come back as
// toolsDone.
func (l *turnLoop) runTools(ctx actor.Context, e core.RunTools) {
	if l.recovering() {
		return
	}
	if _, ok := l.b.Turn(e.Turn); !ok {
		return
	}
	if s := l.streams[e.Turn]; s != nil {
		for _, c := range e.Calls {
			s.push(Update{Item: c}.withCounters(l.counters))
		}
	}
	switch d := l.b.RunCalls(e, l.rt.toolMode(l.b.Model, l.memoryTools(e.Turn)), l.rt.cfg.MaxToolSteps).(type) {
	case core.Abandon:
		l.abandon(ctx, d.Turn, d.Reason, d.Text, nil)
		return
	case core.AnswerCalls:
		l.tools = d.Step
		if d.StepLimit {
			l.stepLimited = d.Turn // its answer says the limit was reached (Update.StepLimit)
		}
		l.toolsDone(ctx, &toolsDone{turn: d.Turn, step: d.Step, outputs: d.Outputs})
		return
	case core.RunTools:
	default:
		return
	}
	tctx, cancel := context.WithCancel(withBranch(context.Background(), l.id))
	l.tools, l.cancelStep = e.Step, cancel
	self, root := ctx.Self(), ctx.ActorSystem().Root
	rt, model, memory := l.rt, l.b.Model, l.memoryTools(e.Turn)
	reg := func(name string) (Tool, bool) { return rt.lookupTool(model, memory, name) }
	calls, parallel, timeout := e.Calls, l.rt.cfg.ParallelToolCalls, l.rt.cfg.ToolTimeout
	go func() {
		outs := runTools(tctx, reg, calls, parallel, timeout)
		// A restarted actor ignores this: its step does not match.
		root.Send(self, &toolsDone{turn: e.Turn, step: e.Step, outputs: outs, cancelled: tctx.Err() != nil})
	}()
}

// releaseStep releases the context of the step or tools that ended: its
// timer would otherwise live until the step timeout.
func (l *turnLoop) releaseStep() {
	if l.cancelStep != nil {
		l.cancelStep()
		l.cancelStep = nil
	}
}

// toolsDone records the outputs of the tools run for a step and starts
// the next step, or ends the loop if the turn was cancelled meanwhile.
func (l *turnLoop) toolsDone(ctx actor.Context, m *toolsDone) {
	if m.step != l.tools {
		return
	}
	l.releaseStep()
	l.tools = messages.StepID{}
	if s := l.streams[m.turn]; s != nil {
		for _, o := range m.outputs {
			s.push(Update{Item: o}.withCounters(l.counters))
		}
	}
	var next messages.StepID
	if !m.cancelled && !leavesOpen(l.b, m.turn, m.outputs) {
		next = messages.NewID[messages.StepID](l.now())
	} // else the loop ends, or awaits the client's calls (AwaitResults)
	evs, err := l.b.RecordToolResults(m.turn, m.outputs, next, l.now())
	if err != nil {
		l.abandon(ctx, m.turn, "tool results: "+err.Error(), interruptedToolText, nil)
		return
	}
	l.persist(ctx, evs[0], l.txFor(evs[0])) // gives ContinueLoop unless cancelled
	if m.cancelled {
		l.abandon(ctx, m.turn, "cancelled", cancelledToolText, nil)
	}
}

// leavesOpen reports whether outputs leave calls of turn open: the
// client's, which the turn awaits next.
func leavesOpen(b core.Branch, turn messages.TurnID, outputs messages.Items) bool {
	t, _ := b.Turn(turn)
	answered := map[string]bool{}
	for _, it := range outputs {
		if o, ok := it.(messages.ToolOutput); ok {
			answered[o.CallID] = true
		}
	}
	return slices.ContainsFunc(t.OpenCalls(), func(c messages.ToolCall) bool { return !answered[c.CallID] })
}

// continueLoop runs step of turn (the next step of a tool loop, or a
// retry) on a freshly assembled context whose continuation is the loop so
// far.
func (l *turnLoop) continueLoop(ctx actor.Context, turn messages.TurnID, step messages.StepID) {
	if l.recovering() {
		return
	}
	t, ok := l.b.Turn(turn)
	if !ok {
		return
	}
	ac, rep, err := l.assemble(turn, slices.Clone(t.Loop))
	if err == nil {
		err = l.fitContext(ctx, rep)
	}
	if err != nil {
		l.endLoop(ctx, turn, messages.FailTurn, "assemble context: "+err.Error(), nil)
		return
	}
	l.spawnStep(ctx, turn, step, ac)
}

// retryForSize records that the step e names runs again on a smaller
// context (SRD §7.2), the provider having rejected it for its size (pe),
// with the step's row: the RetryStep effect runs it. It reports whether
// it did.
func (l *turnLoop) retryForSize(ctx actor.Context, e core.RetryForSize, pe *providers.Error, row persistence.StepRow) bool {
	next := messages.NewID[messages.StepID](l.now())
	evs, err := l.b.RetryStep(e.Turn, e.Step, next, "context too large: "+pe.Message, l.now())
	if err != nil {
		return false
	}
	l.sizeRetries++
	l.rt.log.Warn().Str("branch", l.id.String()).Str("turn", e.Turn.String()).Int("retry", l.sizeRetries).
		Msg("the provider rejected the context for its size; shrinking it and trying again")
	tx := l.txFor(evs[0])
	tx.Steps = append(tx.Steps, row)
	l.persist(ctx, evs[0], tx) // gives RetryStep
	return true
}

// cancel cancels the turn in flight: its streaming step or running tools
// stop, and the turn fails (or, inside a tool loop, is finalized as
// incomplete with what its tools did). A turn awaiting its client's tool
// results is finalized so at once.
func (l *turnLoop) cancel(ctx actor.Context) error {
	if st := l.stall; st != nil {
		l.stall = nil
		l.abandon(ctx, st.turn, "cancelled", cancelledClientToolText, &st.row)
		return nil
	}
	if t, ok := l.b.Awaiting(); ok {
		l.abandon(ctx, t.ID, "cancelled", cancelledClientToolText, nil)
		return nil
	}
	if t, ok := l.b.InFlight(); ok && l.folds.shrinking(t.ID) {
		l.cancelled = true // failed when the librarian answers
		return nil
	}
	if _, ok := l.b.InFlight(); !ok || l.cancelStep == nil {
		return fmt.Errorf("%w on branch %s", ErrNoTurnInFlight, l.id)
	}
	l.cancelled = true
	l.cancelStep()
	return nil
}

// selectModel records the model the branch's next turns use.
func (l *turnLoop) selectModel(ctx actor.Context, name string) error {
	evs, err := l.modelEvents(name)
	if err == nil {
		l.persistAll(ctx, evs)
	}
	return err
}

// memoryTools is the memory tools setting of turn: the one it was
// accepted with (core.Turn.MemoryTools), so that each of its steps, one
// resumed after a restart too, is offered the same tools; the branch's
// for a turn it no longer tracks.
func (l *turnLoop) memoryTools(turn messages.TurnID) messages.MemoryTools {
	if t, ok := l.b.Turn(turn); ok {
		return t.MemoryTools
	}
	return l.b.MemoryTools
}

// selectMemoryTools records the memory tools setting of the branch's
// next turns.
func (l *turnLoop) selectMemoryTools(ctx actor.Context, m messages.MemoryTools) error {
	evs, err := l.b.SelectMemoryTools(m, l.now())
	if err == nil {
		l.persistAll(ctx, evs)
	}
	return err
}

// modelEvents returns the events that select model name on the branch:
// none if it is selected already, an error if it is not configured.
func (l *turnLoop) modelEvents(name string) ([]messages.BranchEvent, error) {
	if _, ok := l.rt.cfg.Models[name]; !ok && name != "" {
		return nil, &UnknownModelError{Name: name, Configured: l.rt.ModelNames(), Why: l.rt.cfg.Unavailable[name]}
	}
	return l.b.SelectModel(name, l.now())
}

// doneUpdate is u, a stream's last update, with the turn's journal
// counters, and the usage and model of the steps run for the stream.
func (l *turnLoop) doneUpdate(u Update) Update {
	u.setCounters(l.counters)
	u.Usage, u.Model = l.usage, l.lastModel
	return u
}

// idleTurn reports whether t, the turn in flight, runs nothing: it
// awaits its client's tool results, or its client's retry of them
// (stall).
func (l *turnLoop) idleTurn(t core.Turn) bool {
	return t.Awaiting() || l.stall != nil && l.stall.turn == t.ID
}

// prepare assembles the context of turn and starts its provider step; if
// the context cannot be assembled the turn fails.
func (l *turnLoop) prepare(ctx actor.Context, turn messages.TurnID) {
	if l.recovering() {
		return
	}
	l.counters, l.cancelled, l.sizeRetries = streamCounters{}, false, 0
	l.usage, l.lastModel, l.retryAfter = providers.Usage{}, "", 0
	t0 := markNow()
	ac, rep, err := l.assemble(turn, nil)
	if err != nil {
		l.fail(ctx, turn, messages.FailTurn, "assemble context: "+err.Error())
		return
	}
	if obs := l.rt.cfg.ObserveAssembly; obs != nil {
		obs(l.id, t0.elapsed(), rep)
	}
	if l.folds.askShrink(ctx, turn, rep) {
		return // prepared again when the librarian answers
	}
	if err := l.fitContext(ctx, rep); err != nil {
		l.fail(ctx, turn, messages.FailContextTooLarge, err.Error())
		return
	}
	now := l.now()
	step := messages.NewID[messages.StepID](now)
	evs, err := l.b.Start(turn, step, now)
	if err != nil {
		l.fail(ctx, turn, messages.FailTurn, err.Error())
		return
	}
	// The step starts while its ResponseStarted (with a submitted
	// turn's TX-0, held since submit) is synced: the provider's time to
	// its first token overlaps the commit. Nothing the step does is
	// acknowledged before the flush: Submit answers (and hands out the
	// turn's stream) after it, the step's result reaches this actor
	// after this message, and tools run only then. A crash before the
	// flush leaves a provider call and, at most, a journal file that no
	// step of the store names. A deferred submit (SubmitDeferred) holds
	// the two on past the step's start.
	for _, ev := range evs {
		l.persistHeld(ctx, ev, l.txFor(ev))
	}
	l.spawnStep(ctx, turn, step, ac)
	if !l.deferring {
		l.flush()
	}
}

// spawnStep starts provider step step of turn on context ac, with the
// branch's model, the tools policy and the redaction (patterns, then
// hook) applied.
func (l *turnLoop) spawnStep(ctx actor.Context, turn messages.TurnID, step messages.StepID, ac messages.AssembledContext) {
	var hashed *messages.AssembledContext // as assembled: what the recipe rebuilds
	t, _ := l.b.Turn(turn)
	if t.Steps <= 1 && l.recipe != nil && l.recipe.User == turn && l.recipe.Hash == "" {
		orig := ac
		hashed = &orig
	}
	ac.Tools, ac.ToolMode, ac.ToolChoice = l.rt.offeredTools(t, l.b.Model)
	ac, err := l.rt.outbound().context(ac)
	if err != nil {
		l.endLoop(ctx, turn, messages.FailTurn, "redact: "+err.Error(), nil)
		return
	}
	if t.Steps <= 1 && l.recipe != nil && l.recipe.User == turn {
		// What the model is given beside the context, as sent.
		l.recipe.Tools, l.recipe.ToolMode, l.recipe.ToolChoice = ac.Tools, ac.ToolMode, ac.ToolChoice
		l.recipe.Params = t.Params
	}
	m := l.rt.model(l.b.Model)
	maxOut := l.rt.cfg.MaxOutputTokens
	if m.MaxOutputTokens > 0 {
		maxOut = m.MaxOutputTokens
	}
	parallel := l.rt.cfg.ParallelToolCalls
	// The client's settings: its output bound and parallel_tool_calls
	// win over the configured ones.
	if p := t.Params; p.MaxOutputTokens != nil {
		maxOut = *p.MaxOutputTokens
	}
	if p := t.Params; p.ParallelToolCalls != nil {
		parallel = *p.ParallelToolCalls
	}
	sctx, cancel := context.WithTimeout(context.Background(), l.rt.cfg.StepTimeout)
	l.step, l.cancelStep = step, cancel
	stream := l.streams[turn]
	req := providers.Request{Model: m.ID, Context: ac, MaxOutputTokens: maxOut, ParallelToolCalls: parallel, Params: t.Params}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &stepActor{rt: l.rt, ctx: sctx, branch: ctx.Self(), turn: turn, step: step, req: req, provider: m.Provider,
			stream: stream, base: l.counters, count: l.rt.counter(m), hashed: hashed, hasher: &l.hasher}
	}, actor.WithSupervisor(l.rt.journalSup))
	if _, err := ctx.SpawnNamed(props, "step-"+step.String()); err != nil {
		cancel()
		l.step, l.cancelStep = messages.StepID{}, nil
		l.endLoop(ctx, turn, messages.FailTurn, "start step: "+err.Error(), nil)
	}
}

// fail fails turn with code (one of messages' Fail* codes) for reason.
func (l *turnLoop) fail(ctx actor.Context, turn messages.TurnID, code, reason string) {
	reason = l.rt.cfg.Scrub.String(reason)
	evs, err := l.b.Fail(turn, code, reason, l.now())
	if err != nil {
		l.rt.log.Warn().Err(err).Str("branch", l.id.String()).Msg("fail turn")
		return
	}
	l.persistAll(ctx, evs)
}

// resumeShrunk goes on with turn, accepted, once the librarian's shrink
// it waited for is in: its context is prepared again, or it fails if it
// was cancelled meanwhile.
func (l *turnLoop) resumeShrunk(ctx actor.Context, turn messages.TurnID) {
	if l.cancelled {
		l.fail(ctx, turn, messages.FailCancelled, "cancelled while the context was being shrunk")
		return
	}
	l.prepare(ctx, turn)
}

// failOutcome finds why a failed turn failed (failed turns leave Turns).
func (l *turnLoop) failOutcome(turn messages.TurnID) messages.StepOutcome {
	rows, err := l.rows.TurnRows(context.Background(), l.id, l.b.TurnSeq, 1)
	if err == nil && len(rows) == 1 && rows[0].ID == turn {
		return messages.FailedOutcome(rows[0].Code, rows[0].Reason)
	}
	return messages.FailedOutcome(messages.FailTurn, "the turn failed")
}
