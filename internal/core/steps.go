package core

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/contextinfinity/ctxinf/messages"
)

// MaxSizeRetries is how many times a turn's step is run again on a
// smaller context after the provider rejected one for its size (SRD
// §7.2).
const MaxSizeRetries = 2

// StepEnd is how a provider step ended, as the shell saw it: what it
// produced, or why it failed.
type StepEnd struct {
	Turn    messages.TurnID
	Step    messages.StepID
	Items   messages.Items
	Outcome messages.StepOutcome
	// Failed is set when the step failed: with an error, or with an
	// outcome that finalizes no response. Code (one of messages' Fail*
	// codes) and Reason say why.
	Failed       bool
	Code, Reason string
	// TooLarge is set when the provider rejected the step's context for
	// its size; SizeRetries counts the steps of the turn run again for
	// that already.
	TooLarge    bool
	SizeRetries int
}

// EndStep decides what the end of turn e.Turn's running step calls for
// in tools mode mode (SRD §7.2, §12.2), as one effect:
//
//   - a step the provider rejected for its size runs again on a smaller
//     context (RetryForSize), at most MaxSizeRetries times a turn;
//   - a failed step after the client's tool results leaves the turn
//     waiting for the client to retry them (StallForClient);
//   - any other failed step ends the turn (EndLoop);
//   - a step with no tool call, or cut short, finalizes the response
//     (FinalizeStep);
//   - a step that called tools issues the calls (IssueCalls) when tools
//     run: in mode enabled, or when a call is one of the client's
//     tools, or the client sent tools in mode disabled (the client runs
//     its calls whatever the mode; the shell answers the runtime's with
//     an error in a mode that runs none);
//   - in mode parse_only the calls are recorded and shown, nothing runs
//     and the loop does not go on: the response is finalized, paused
//     for tool_use, its calls unanswered (FinalizeStep);
//   - in mode disabled a tool call ends the turn (EndLoop).
//
// It reads the branch and changes nothing; e.Turn must be tracked (a
// turn that is not ends with nothing to do: nil).
func (b *Branch) EndStep(e StepEnd, mode messages.ToolMode) Effect {
	t, ok := b.Turn(e.Turn)
	if !ok {
		return nil
	}
	if e.Failed {
		switch {
		case e.TooLarge && e.SizeRetries < MaxSizeRetries && retriable(t, e.Step):
			return RetryForSize{Turn: e.Turn, Step: e.Step, Reason: e.Reason}
		case stalls(t, e.Code):
			return StallForClient{Turn: e.Turn, Step: e.Step, Code: e.Code, Reason: e.Reason}
		}
		return EndLoop{Turn: e.Turn, Step: e.Step, Code: e.Code, Reason: e.Reason}
	}
	calls := toolCallsOf(e.Items)
	if len(calls) == 0 || e.Outcome.Kind == messages.OutcomeIncomplete {
		return FinalizeStep{Turn: e.Turn, Step: e.Step, Outcome: e.Outcome}
	}
	if slices.ContainsFunc(calls, func(c messages.ToolCall) bool { return t.ClientTool(c.Name) }) ||
		mode == messages.ToolsDisabled && len(t.Tools) > 0 {
		mode = messages.ToolsEnabled
	}
	switch mode {
	case messages.ToolsEnabled:
		return IssueCalls{Turn: e.Turn, Step: e.Step}
	case messages.ToolsParseOnly:
		return FinalizeStep{Turn: e.Turn, Step: e.Step, Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}}
	}
	return EndLoop{Turn: e.Turn, Step: e.Step, Code: messages.FailTurn,
		Reason: fmt.Sprintf("the model called tool %q but tools are disabled (tools.mode)", calls[0].Name)}
}

// retriable reports whether step, t's, can run again (StepRetried): it
// is the running step of a responding turn with no tool call open.
func retriable(t Turn, step messages.StepID) bool {
	return t.Phase == messages.PhaseResponding && t.Step == step && len(t.OpenCalls()) == 0
}

// stalls reports whether a step of t that failed with code leaves t
// waiting for its client to retry the tool results the step ran on: it
// failed for its provider's sake (not cancelled, interrupted or refused
// by the runtime) right after the client's results.
func stalls(t Turn, code string) bool {
	switch code {
	case messages.FailCancelled, messages.FailInterrupted, messages.FailTurn:
		return false
	}
	return t.AfterClientResults()
}

// AfterClientResults reports whether the last item of t's tool loop is
// the client's result of a call of its tools: the step that follows runs
// on what the client sent.
func (t Turn) AfterClientResults() bool {
	return len(t.Loop) > 0 && t.ClientAnswered(t.Loop[len(t.Loop)-1])
}

// ClientAnswered reports whether it is the output of a call of t's loop
// to one of the client's tools.
func (t Turn) ClientAnswered(it messages.TranscriptItem) bool {
	out, ok := it.(messages.ToolOutput)
	if !ok {
		return false
	}
	for _, it := range t.Loop {
		if c, ok := it.(messages.ToolCall); ok && c.CallID == out.CallID {
			return t.ClientTool(c.Name)
		}
	}
	return false
}

// toolCallsOf returns the tool calls among items.
func toolCallsOf(items messages.Items) []messages.ToolCall {
	var calls []messages.ToolCall
	for _, it := range items {
		if c, ok := it.(messages.ToolCall); ok {
			calls = append(calls, c)
		}
	}
	return calls
}

// ReasonToolStepLimit is the reason of the incomplete outcome of a turn
// whose model called the runtime's tools in more than tools.max_steps
// steps: the calls of the step past the limit are answered "not
// executed" and the response is finalized with what the loop did.
const ReasonToolStepLimit = "tool_step_limit"

// The texts of the error outputs that answer the runtime's tool calls
// that do not run.
const (
	stepLimitToolText = "error: not executed: the turn reached its limit of %d steps running the runtime's tools (tools.max_steps)"
	notRunToolText    = "error: not executed: the runtime's tools are %s (tools.mode)"
	unknownToolText   = "error: no tool is named %q"
)

// RunCalls decides how the runtime answers the calls of e, its calls a
// step of e.Turn made (SRD §12.2), in tools mode mode with at most
// maxSteps steps of a turn running its tools (tools.max_steps; see
// Turn.RuntimeToolSteps):
//
//   - past the limit, a turn with no call of the client's tools open is
//     abandoned: its open calls answered "not executed", the response
//     finalized incomplete for ReasonToolStepLimit (Abandon);
//   - past the limit with the client's calls open, the runtime's calls
//     are answered "not executed" and the client's handed out; the
//     answer says the limit was reached (AnswerCalls, StepLimit set);
//   - in a mode that runs no tool of the runtime's (calls beside the
//     client's), each call is answered with an error (AnswerCalls);
//   - else they run: e itself.
//
// It changes nothing; a turn not tracked gives nil.
func (b *Branch) RunCalls(e RunTools, mode messages.ToolMode, maxSteps int) Effect {
	t, ok := b.Turn(e.Turn)
	if !ok {
		return nil
	}
	answer := func(text func(messages.ToolCall) string) messages.Items {
		outs := make(messages.Items, len(e.Calls))
		for i, c := range e.Calls {
			out, _ := json.Marshal(text(c))
			outs[i] = messages.ToolOutput{CallID: c.CallID, Output: out, IsError: true}
		}
		return outs
	}
	if t.RuntimeToolSteps() >= maxSteps {
		text := fmt.Sprintf(stepLimitToolText, maxSteps)
		if !slices.ContainsFunc(t.OpenCalls(), func(c messages.ToolCall) bool { return t.ClientTool(c.Name) }) {
			return Abandon{Turn: e.Turn, Reason: ReasonToolStepLimit, Text: text}
		}
		return AnswerCalls{Turn: e.Turn, Step: e.Step, Outputs: answer(func(messages.ToolCall) string { return text }), StepLimit: true}
	}
	if mode != messages.ToolsEnabled {
		return AnswerCalls{Turn: e.Turn, Step: e.Step, Outputs: answer(func(c messages.ToolCall) string {
			if mode == messages.ToolsDisabled {
				return fmt.Sprintf(unknownToolText, c.Name)
			}
			return fmt.Sprintf(notRunToolText, mode)
		})}
	}
	return e
}
