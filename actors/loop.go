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
func (a *branchActor) finishStep(ctx actor.Context, m *stepDone) {
	if m.committed != nil {
		// Whatever the step leads to is committed below (or it is
		// stale): its journal's fsync may go now.
		defer close(m.committed)
	}
	if m.step != a.step {
		return
	}
	a.releaseStep()
	a.step = messages.StepID{}
	a.counters = a.counters.plus(m.counters)
	a.usage = a.usage.Add(m.resp.Usage)
	a.lastModel = m.model
	if m.resp.Model != "" {
		a.lastModel = m.resp.Model // the model the upstream says answered
	}
	t, ok := a.b.Turn(m.turn)
	if !ok {
		return
	}
	row := a.stepRow(t, m)
	if obs := a.rt.cfg.ObserveStep; obs != nil {
		obs(a.id, row)
	}
	end := core.StepEnd{Turn: m.turn, Step: m.step, Items: m.resp.Items, Outcome: m.resp.Outcome,
		Failed: m.err != nil || !finalizable(m.resp.Outcome.Kind), SizeRetries: a.sizeRetries}
	var pe *providers.Error
	if end.Failed {
		end.Code, end.Reason = stepFailure(m, a.cancelled, a.rt.cfg.StepTimeout)
		end.TooLarge = errors.As(m.err, &pe) && pe.ContextTooLarge
	}
	a.endStep(ctx, end, m.resp.Items, pe, row)
}

// endStep runs what the end of a step calls for (core.Branch.EndStep):
// end is how it ended, items what it produced, pe the provider's error
// it failed with, if any, and row its record, written with what it leads
// to.
func (a *branchActor) endStep(ctx actor.Context, end core.StepEnd, items messages.Items, pe *providers.Error, row persistence.StepRow) {
	switch e := a.b.EndStep(end, a.rt.cfg.ToolMode).(type) {
	case core.RetryForSize:
		if !a.retryForSize(ctx, e, pe, row) {
			end.SizeRetries = core.MaxSizeRetries // fail it as it failed
			a.endStep(ctx, end, items, pe, row)
		}
	case core.StallForClient:
		a.setRetryAfter(pe)
		a.stallForClient(e, row)
	case core.EndLoop:
		if end.Failed {
			a.setRetryAfter(pe)
		}
		a.endLoop(ctx, e.Turn, e.Code, e.Reason, &row)
	case core.FinalizeStep:
		a.finalize(ctx, e.Turn, e.Step, items, e.Outcome, &row)
	case core.IssueCalls:
		evs, err := a.b.IssueToolCalls(e.Turn, e.Step, items, a.now())
		if err != nil {
			a.endLoop(ctx, e.Turn, messages.FailTurn, "tool calls: "+err.Error(), &row)
			return
		}
		tx := a.txFor(evs[0])
		tx.Steps = append(tx.Steps, row)
		a.persist(ctx, evs[0], tx) // gives RunTools
	}
}

// setRetryAfter keeps the wait the provider asked for when it failed
// the turn's last step with pe (nil: none), told the client
// (Update.RetryAfter).
func (a *branchActor) setRetryAfter(pe *providers.Error) {
	a.retryAfter = 0
	if pe != nil {
		a.retryAfter = pe.RetryAfter
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
func (a *branchActor) stepRow(t core.Turn, m *stepDone) persistence.StepRow {
	var recipe *persistence.ContextRecipe
	if t.Steps <= 1 && a.recipe != nil && a.recipe.User == m.turn {
		recipe = a.recipe
		if m.hash != "" {
			recipe.Hash = m.hash
		}
	}
	return persistence.StepRow{ID: m.step, Branch: a.id, Turn: m.turn, Index: max(t.Steps, 1) - 1, Context: recipe,
		Provider: m.provider, Model: m.model, Request: m.resp.RawRequest, Response: m.resp.RawResponse,
		Items: m.resp.Items, Outcome: m.resp.Outcome, StreamPath: filepath.Join("streams", m.step.String()+".jsonl"),
		Displayed: m.counters.displayed, Durable: m.counters.durable, Started: m.started, Ended: a.now(),
		InputTokens: m.resp.Usage.InputTokens, OutputTokens: m.resp.Usage.OutputTokens,
		CacheReadTokens: m.resp.Usage.CacheReadTokens, CacheWriteTokens: m.resp.Usage.CacheWriteTokens}
}

// finalize records the response of turn (TX-A): the reply holds the
// turn's tool loop, then items, the last step's output. row, if not nil,
// is written with it. If the reply cannot be recorded the turn fails.
func (a *branchActor) finalize(ctx actor.Context, turn messages.TurnID, step messages.StepID, items messages.Items,
	outcome messages.StepOutcome, row *persistence.StepRow) {
	t, _ := a.b.Turn(turn)
	reply := replyMessage(append(slices.Clone(t.Loop), items...))
	payload, err := reply.MarshalJSON()
	if err == nil {
		now := a.now()
		node := messages.NewID[messages.NodeID](now)
		var evs []messages.BranchEvent
		if evs, err = a.b.Finalize(turn, step, node, outcome, a.counters.displayed, a.counters.durable, now); err == nil {
			tx := a.txFor(evs[0])
			parent := turn
			tx.Appends = []persistence.TxAppend{{Branch: a.id, ID: node, Req: persistence.AppendRequest{
				Payload: payload, TypeTag: TypeAssistantMessage, Codec: CodecJSON, ExpectParent: &parent}}}
			if row != nil {
				// The commit that writes the row holds the step's output:
				// all it displayed is durable with it.
				r := *row
				r.Durable = r.Displayed
				tx.Steps = append(tx.Steps, r)
			}
			a.msgs.put(node, reply)
			// Once the response is committed everything streamed is
			// durable, whatever the journal's fsync at completion has got
			// to: the turn's end (run by persist, after the commit) says
			// so. A failed commit restarts the actor, counters and all.
			a.counters = a.counters.allDurable()
			a.persist(ctx, evs[0], tx)
			return
		}
	}
	a.failStep(ctx, turn, messages.FailTurn, "record the response: "+err.Error(), row)
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
func (a *branchActor) endLoop(ctx actor.Context, turn messages.TurnID, code, reason string, row *persistence.StepRow) {
	reason = a.rt.cfg.Scrub.String(reason) // it may quote an error: stored, and in a tool loop sent on
	if t, ok := a.b.Turn(turn); ok && len(t.Loop) > 0 {
		a.abandon(ctx, turn, reason, fmt.Sprintf(failedStepToolText, reason), row)
		return
	}
	a.failStep(ctx, turn, code, reason, row)
}

// abandon ends turn's tool loop early (a crash, a cancellation, a step
// limit, a failed step): its open calls get error outputs holding text,
// then the response is finalized with what the loop recorded, outcome
// incomplete for reason. The next request is valid for any provider.
func (a *branchActor) abandon(ctx actor.Context, turn messages.TurnID, reason, text string, row *persistence.StepRow) {
	if a.Recovering() {
		return
	}
	if t, ok := a.b.Turn(turn); !ok || t.Phase != messages.PhaseResponding {
		return // ended already (a cancellation that came while its tools ran)
	}
	if outs := a.b.AbandonOutputs(turn, text); len(outs) > 0 {
		evs, err := a.b.RecordToolResults(turn, outs, messages.StepID{}, a.now())
		if err != nil {
			a.failStep(ctx, turn, messages.FailTurn, reason, row)
			return
		}
		tx := a.txFor(evs[0])
		if row != nil {
			tx.Steps, row = append(tx.Steps, *row), nil
		}
		a.persist(ctx, evs[0], tx)
	}
	t, ok := a.b.Turn(turn)
	if !ok {
		return
	}
	a.finalize(ctx, turn, t.Step, nil, messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: reason}, row)
}

// failStep fails turn with code for reason, writing row with it.
func (a *branchActor) failStep(ctx actor.Context, turn messages.TurnID, code, reason string, row *persistence.StepRow) {
	reason = a.rt.cfg.Scrub.String(reason)
	evs, err := a.b.Fail(turn, code, reason, a.now())
	if err != nil {
		a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("fail turn")
		return
	}
	tx := a.txFor(evs[0])
	if row != nil {
		tx.Steps = append(tx.Steps, *row)
	}
	a.persist(ctx, evs[0], tx)
}

// ReasonToolStepLimit is the reason of the incomplete outcome of a turn
// whose model called the runtime's tools in more than tools.max_steps
// steps (core.ReasonToolStepLimit).
const ReasonToolStepLimit = core.ReasonToolStepLimit

// runTools runs the calls of e, off the actor, unless the core answers
// them otherwise (core.Branch.RunCalls: past the turn's limit of tool
// steps, or in a tools mode that runs none). The outputs come back as
// toolsDone.
func (a *branchActor) runTools(ctx actor.Context, e core.RunTools) {
	if a.Recovering() {
		return
	}
	if _, ok := a.b.Turn(e.Turn); !ok {
		return
	}
	if s := a.streams[e.Turn]; s != nil {
		for _, c := range e.Calls {
			s.push(Update{Item: c}.withCounters(a.counters))
		}
	}
	switch d := a.b.RunCalls(e, a.rt.cfg.ToolMode, a.rt.cfg.MaxToolSteps).(type) {
	case core.Abandon:
		a.abandon(ctx, d.Turn, d.Reason, d.Text, nil)
		return
	case core.AnswerCalls:
		a.tools = d.Step
		if d.StepLimit {
			a.stepLimited = d.Turn // its answer says the limit was reached (Update.StepLimit)
		}
		a.toolsDone(ctx, &toolsDone{turn: d.Turn, step: d.Step, outputs: d.Outputs})
		return
	case core.RunTools:
	default:
		return
	}
	tctx, cancel := context.WithCancel(context.Background())
	a.tools, a.cancelStep = e.Step, cancel
	self, root := ctx.Self(), ctx.ActorSystem().Root
	reg, calls, parallel, timeout := a.rt.cfg.Tools, e.Calls, a.rt.cfg.ParallelToolCalls, a.rt.cfg.ToolTimeout
	go func() {
		outs := runTools(tctx, reg, calls, parallel, timeout)
		// A restarted actor ignores this: its step does not match.
		root.Send(self, &toolsDone{turn: e.Turn, step: e.Step, outputs: outs, cancelled: tctx.Err() != nil})
	}()
}

// releaseStep releases the context of the step or tools that ended: its
// timer would otherwise live until the step timeout.
func (a *branchActor) releaseStep() {
	if a.cancelStep != nil {
		a.cancelStep()
		a.cancelStep = nil
	}
}

// toolsDone records the outputs of the tools run for a step and starts
// the next step, or ends the loop if the turn was cancelled meanwhile.
func (a *branchActor) toolsDone(ctx actor.Context, m *toolsDone) {
	if m.step != a.tools {
		return
	}
	a.releaseStep()
	a.tools = messages.StepID{}
	if s := a.streams[m.turn]; s != nil {
		for _, o := range m.outputs {
			s.push(Update{Item: o}.withCounters(a.counters))
		}
	}
	var next messages.StepID
	if !m.cancelled && !leavesOpen(a.b, m.turn, m.outputs) {
		next = messages.NewID[messages.StepID](a.now())
	} // else the loop ends, or awaits the client's calls (AwaitResults)
	evs, err := a.b.RecordToolResults(m.turn, m.outputs, next, a.now())
	if err != nil {
		a.abandon(ctx, m.turn, "tool results: "+err.Error(), interruptedToolText, nil)
		return
	}
	a.persist(ctx, evs[0], a.txFor(evs[0])) // gives ContinueLoop unless cancelled
	if m.cancelled {
		a.abandon(ctx, m.turn, "cancelled", cancelledToolText, nil)
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
func (a *branchActor) continueLoop(ctx actor.Context, turn messages.TurnID, step messages.StepID) {
	if a.Recovering() {
		return
	}
	t, ok := a.b.Turn(turn)
	if !ok {
		return
	}
	ac, rep, err := a.assemble(turn, slices.Clone(t.Loop))
	if err == nil {
		err = a.fitContext(ctx, rep)
	}
	if err != nil {
		a.endLoop(ctx, turn, messages.FailTurn, "assemble context: "+err.Error(), nil)
		return
	}
	a.spawnStep(ctx, turn, step, ac)
}

// retryForSize records that the step e names runs again on a smaller
// context (SRD §7.2), the provider having rejected it for its size (pe),
// with the step's row: the RetryStep effect runs it. It reports whether
// it did.
func (a *branchActor) retryForSize(ctx actor.Context, e core.RetryForSize, pe *providers.Error, row persistence.StepRow) bool {
	next := messages.NewID[messages.StepID](a.now())
	evs, err := a.b.RetryStep(e.Turn, e.Step, next, "context too large: "+pe.Message, a.now())
	if err != nil {
		return false
	}
	a.sizeRetries++
	a.rt.log.Warn().Str("branch", a.id.String()).Str("turn", e.Turn.String()).Int("retry", a.sizeRetries).
		Msg("the provider rejected the context for its size; shrinking it and trying again")
	tx := a.txFor(evs[0])
	tx.Steps = append(tx.Steps, row)
	a.persist(ctx, evs[0], tx) // gives RetryStep
	return true
}

// cancel cancels the turn in flight: its streaming step or running tools
// stop, and the turn fails (or, inside a tool loop, is finalized as
// incomplete with what its tools did). A turn awaiting its client's tool
// results is finalized so at once.
func (a *branchActor) cancel(ctx actor.Context) error {
	if st := a.stall; st != nil {
		a.stall = nil
		a.abandon(ctx, st.turn, "cancelled", cancelledClientToolText, &st.row)
		return nil
	}
	if t, ok := a.b.Awaiting(); ok {
		a.abandon(ctx, t.ID, "cancelled", cancelledClientToolText, nil)
		return nil
	}
	if t, ok := a.b.InFlight(); ok && a.folds.shrinking(t.ID) {
		a.cancelled = true // failed when the librarian answers
		return nil
	}
	if _, ok := a.b.InFlight(); !ok || a.cancelStep == nil {
		return fmt.Errorf("%w on branch %s", ErrNoTurnInFlight, a.id)
	}
	a.cancelled = true
	a.cancelStep()
	return nil
}

// selectModel records the model the branch's next turns use.
func (a *branchActor) selectModel(ctx actor.Context, name string) error {
	evs, err := a.modelEvents(name)
	if err == nil {
		a.persistAll(ctx, evs)
	}
	return err
}

// modelEvents returns the events that select model name on the branch:
// none if it is selected already, an error if it is not configured.
func (a *branchActor) modelEvents(name string) ([]messages.BranchEvent, error) {
	if _, ok := a.rt.cfg.Models[name]; !ok && name != "" {
		return nil, &UnknownModelError{Name: name, Configured: a.rt.ModelNames(), Why: a.rt.cfg.Unavailable[name]}
	}
	return a.b.SelectModel(name, a.now())
}
