package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
)

// Client turns (SubmitOptions.Client): a turn sent by an API client (the
// proxy) with its system prompt, its own tools and tool choice, which
// the turn's acceptance records (core.Turn) for every step of the turn.
// A step that calls the client's tools ends the request with the calls
// (Update.Awaiting); the turn stays in flight, nothing running, across
// restarts and passivation, until SubmitToolResults answers the calls and
// the loop goes on, or a new user turn or a cancellation abandons it.
//
// A step that calls both the runtime's tools and the client's runs the
// runtime's first (tools.mode enabled; otherwise they are answered with
// an error), records their outputs durably, and then awaits the client's.

// The texts of the error outputs that answer client tool calls that got
// no result.
const (
	missingClientResultText = "error: the client sent no result for this tool call"
	cancelledClientToolText = "error: the turn was cancelled before the client sent this tool call's result"
)

// ReasonToolResultsMissing is the reason of the incomplete outcome of a
// turn that awaited its client's tool results when a new user turn came:
// the turn is finalized with what its loop did, each open call answered
// with an error.
const ReasonToolResultsMissing = "tool_results_missing"

// MaxClientTools is the most tools a client sends with a turn.
const MaxClientTools = 128

// pausedForClient is the outcome of a stream that ends awaiting the
// client's tool results.
var pausedForClient = messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}

// clientOf returns c as the core records it; an empty ClientTurn is none.
func clientOf(c *ClientTurn) (core.Client, bool) {
	if c == nil || c.System == "" && len(c.Tools) == 0 && c.ToolChoice == (messages.ToolChoice{}) && len(c.Content) == 0 &&
		c.Params.IsZero() {
		return core.Client{}, false
	}
	return core.Client{System: c.System, Tools: c.Tools, ToolChoice: c.ToolChoice, Params: c.Params}, true
}

// CheckClient checks what a client sent with a turn as SubmitWith does
// (checkClient), so that a caller can refuse it before it makes
// anything: persistence.ErrInvalidArgument naming the field at fault.
func (r *Runtime) CheckClient(c *ClientTurn) error {
	if c == nil {
		return nil
	}
	return r.checkClient(c)
}

// checkClient checks what a client sent with a turn, naming the field at
// fault: its tools (names as both OpenAI and Anthropic accept them, each
// once, none a tool of the runtime's when those are offered, schemas JSON
// objects), its tool choice, and its content's block kinds.
func (r *Runtime) checkClient(c *ClientTurn) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: client."+format, append([]any{persistence.ErrInvalidArgument}, args...)...)
	}
	offersOwn := r.cfg.ToolMode != messages.ToolsDisabled
	if len(c.Tools) > MaxClientTools {
		return bad("tools: %d tools, limit %d", len(c.Tools), MaxClientTools)
	}
	for i, t := range c.Tools {
		if !toolName.MatchString(t.Name) {
			return bad("tools[%d].name: %q: must be 1 to 64 letters, digits, '_' or '-'", i, t.Name)
		}
		if j := slices.IndexFunc(c.Tools[:i], func(u messages.Tool) bool { return u.Name == t.Name }); j >= 0 {
			return bad("tools[%d].name: %q is client.tools[%d]'s already", i, t.Name, j)
		}
		if _, ok := r.cfg.Tools.Lookup(t.Name); ok && offersOwn {
			return bad("tools[%d].name: %q is the name of one of the runtime's tools (tools.mode %s); rename the client's", i, t.Name, r.cfg.ToolMode)
		}
		if len(t.InputSchema) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(t.InputSchema, &obj); err != nil || obj == nil {
				return bad("tools[%d].input_schema: must be a JSON object (tool %q)", i, t.Name)
			}
		}
	}
	switch ch := c.ToolChoice; ch.Mode {
	case "", messages.ToolChoiceAuto, messages.ToolChoiceNone, messages.ToolChoiceRequired:
		if ch.Name != "" {
			return bad("tool_choice.name: %q: a name goes only with mode %q", ch.Name, messages.ToolChoiceTool)
		}
	case messages.ToolChoiceTool:
		_, own := r.cfg.Tools.Lookup(ch.Name)
		if !slices.ContainsFunc(c.Tools, func(t messages.Tool) bool { return t.Name == ch.Name }) && !(own && offersOwn) {
			return bad("tool_choice.name: %q names no tool offered", ch.Name)
		}
	default:
		return bad("tool_choice.mode: %q, want auto, none, required or tool", ch.Mode)
	}
	if err := c.Params.Check(); err != nil {
		return bad("params.%v", err)
	}
	for i, b := range c.Content {
		switch b.(type) {
		case messages.Text, messages.Image, messages.Unknown:
		default:
			return bad("content[%d]: a %T block; a user message holds text, images and parts kept as sent", i, b)
		}
	}
	// The system prompt and the tools are kept in the branch's log with
	// the turn's acceptance: bounded as a stored payload is.
	tools, _ := json.Marshal(c.Tools)
	return r.db.CheckPayload("client.system and client.tools (kept with the turn)", len(c.System)+len(tools))
}

// clientHash is what the idempotency hash of a turn holds of c.
func clientHash(c *ClientTurn) string {
	content, _ := c.Content.MarshalJSON()
	tools, _ := json.Marshal(c.Tools)
	choice, _ := json.Marshal(c.ToolChoice)
	if c.Params.IsZero() { // as before params were sent
		return keyHash(c.System, string(tools), string(choice), string(content))
	}
	params, _ := json.Marshal(c.Params)
	return keyHash(c.System, string(tools), string(choice), string(content), string(params))
}

// offeredTools are the tools a step of turn t of a branch on model
// offers the model, with the tool mode and choice: the runtime's tools
// when its tools mode is not disabled, the memory tools when they are
// on for t (its setting, t.MemoryTools: memory_tools.go; the mode is
// then enabled), then the client's,
// which are offered whatever that mode (enabled when it is disabled);
// and the client's tool choice.
func (r *Runtime) offeredTools(t core.Turn, model string) ([]messages.Tool, messages.ToolMode, messages.ToolChoice) {
	var tools []messages.Tool
	mode := r.toolMode(model, t.MemoryTools)
	if r.cfg.ToolMode != messages.ToolsDisabled {
		tools = r.cfg.Tools.Definitions()
	}
	tools = append(tools, r.offeredMemoryTools(model, t.MemoryTools, t.Tools)...)
	if len(t.Tools) > 0 {
		tools = append(slices.Clone(tools), t.Tools...)
		if mode == messages.ToolsDisabled {
			mode = messages.ToolsEnabled
		}
	}
	return tools, mode, t.ToolChoice
}

// joinSystem is the system instructions of a client's turn: the
// client's, then the runtime's.
func joinSystem(client, runtime string) string {
	switch {
	case client == "":
		return runtime
	case runtime == "":
		return client
	}
	return client + "\n\n" + runtime
}

// resultsReq answers the open client tool calls of the turn awaiting
// them (Runtime.SubmitToolResults).
type resultsReq struct {
	claim
	outputs   messages.Items
	key, hash string // the idempotency key ("": none) and the hash of the outputs
}

// submitToolResults is Runtime.SubmitToolResults.
func (r *Runtime) submitToolResults(ctx context.Context, branch messages.BranchID, outputs messages.Items, o SubmitOptions) (*TurnStream, error) {
	if len(outputs) == 0 {
		return nil, fmt.Errorf("%w: outputs: required, one tool output per open call", persistence.ErrInvalidArgument)
	}
	first := map[string]int{}
	size := 0
	for i, it := range outputs {
		out, ok := it.(messages.ToolOutput)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: outputs[%d]: %T, want a tool output", persistence.ErrInvalidArgument, i, it)
		case out.CallID == "":
			return nil, fmt.Errorf("%w: outputs[%d].call_id: required", persistence.ErrInvalidArgument, i)
		case !json.Valid(out.Output):
			return nil, fmt.Errorf("%w: outputs[%d].output (call %q): not JSON; want a JSON string holding the output text",
				persistence.ErrInvalidArgument, i, out.CallID)
		}
		if j, ok := first[out.CallID]; ok {
			return nil, fmt.Errorf("%w: outputs[%d].call_id: %q is answered by outputs[%d] already", persistence.ErrInvalidArgument, i, out.CallID, j)
		}
		first[out.CallID] = i
		size += len(out.Output)
	}
	if err := r.db.CheckPayload("outputs (the tool results, kept in the turn's reply)", size); err != nil {
		return nil, err
	}
	var hash string
	if o.Key != "" {
		if err := checkKey(o.Key); err != nil {
			return nil, err
		}
		hash = resultsHash(outputs)
	}
	if err := r.db.CheckSpace(); err != nil {
		// A repeat of results recorded already is not new work.
		if _, kerr := r.db.IdempotencyKey(ctx, persistence.ScopeTurn, branch, o.Key); o.Key == "" || kerr != nil {
			return nil, err
		}
	}
	req := &resultsReq{outputs: outputs, key: o.Key, hash: hash}
	res, err := r.ask(ctx, branch, req)
	var te *TimeoutError
	if errors.As(err, &te) {
		if te.Accepted == AcceptedUnknown && o.Key != "" {
			if row, kerr := r.db.IdempotencyKey(context.Background(), persistence.ScopeTurn, branch, o.Key); kerr == nil {
				te.Accepted, te.Turn = AcceptedYes, row.Turn
			}
		}
		return nil, te
	}
	if err != nil {
		return nil, fmt.Errorf("tool results for branch %s: %w", branch, err)
	}
	return res.(*TurnStream), nil
}

// resultsHash is the idempotency hash of outputs, in any order.
func resultsHash(outputs messages.Items) string {
	parts := []string{"tool_results"}
	var outs []string
	for _, it := range outputs {
		data, _ := messages.MarshalItem(it)
		outs = append(outs, string(data))
	}
	slices.Sort(outs)
	return keyHash(append(parts, outs...)...)
}

// submitResults records m's outputs, answering every open call of the
// turn awaiting its client's results, and starts the loop's next step;
// the stream returned delivers the turn from there on.
func (l *turnLoop) submitResults(ctx actor.Context, m *resultsReq) (*TurnStream, error) {
	if st := l.stall; st != nil {
		return l.retryStalled(ctx, st, m)
	}
	if m.key != "" {
		if s, ok, err := l.resultsKeyed(m.key, m.hash); err != nil || ok {
			return s, err
		}
	}
	t, ok := l.b.InFlight()
	if !ok {
		return nil, fmt.Errorf("%w: branch %s has no turn in flight", ErrNoToolCallsOpen, l.id)
	}
	if !t.Awaiting() {
		// Its step or the runtime's tools run: the turn may await the
		// client later.
		return nil, &core.BusyError{Turn: t.ID, Phase: t.Phase}
	}
	outs, err := matchOutputs(t.OpenCalls(), m.outputs)
	if err != nil {
		return nil, err
	}
	now := l.now()
	evs, err := l.b.RecordToolResults(t.ID, outs, messages.NewID[messages.StepID](now), now)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", persistence.ErrInvalidArgument, err)
	}
	tx := l.txFor(evs[0])
	s := newTurnStream(l.id, t.ID, t.Seq)
	if m.key != "" {
		// The key is committed with the results: a repeat finds them.
		tx.Keys = []persistence.IdempotencyRow{{Scope: persistence.ScopeTurn, Owner: l.id, Key: m.key, Hash: m.hash,
			Turn: t.ID, Created: now.UTC()}}
		if l.results == nil {
			l.results = map[string]*TurnStream{}
		}
		l.results[m.key] = s
	}
	l.streams[t.ID] = s
	l.usage, l.lastModel, l.cancelled = providers.Usage{}, "", false
	l.persist(ctx, evs[0], tx) // gives ContinueLoop: the next step runs
	return s, nil
}

// matchOutputs checks outputs against the open calls and returns them in
// the calls' order: each answers an open call, once, and every open call
// is answered.
func matchOutputs(open []messages.ToolCall, outputs messages.Items) (messages.Items, error) {
	byID := make(map[string]messages.ToolOutput, len(outputs))
	ids := make([]string, len(open))
	for i, c := range open {
		ids[i] = c.CallID
	}
	for i, it := range outputs {
		o, ok := it.(messages.ToolOutput)
		if !ok {
			return nil, fmt.Errorf("%w: outputs[%d]: %T, want a tool output", persistence.ErrInvalidArgument, i, it)
		}
		if !slices.Contains(ids, o.CallID) {
			return nil, fmt.Errorf("%w: outputs[%d].call_id: %q answers no open tool call (open: %s)", persistence.ErrInvalidArgument,
				i, o.CallID, strings.Join(ids, ", "))
		}
		if _, dup := byID[o.CallID]; dup {
			return nil, fmt.Errorf("%w: outputs[%d].call_id: %q is answered twice", persistence.ErrInvalidArgument, i, o.CallID)
		}
		byID[o.CallID] = o
	}
	out := make(messages.Items, 0, len(open))
	for _, c := range open {
		o, ok := byID[c.CallID]
		if !ok {
			return nil, fmt.Errorf("%w: outputs: tool call %q (%s) has no output; every open call needs one", persistence.ErrInvalidArgument,
				c.CallID, c.Name)
		}
		out = append(out, o)
	}
	return out, nil
}

// resultsKeyed returns the stream of the results sent on this branch
// under idempotency key key, if there are: the stream they started while
// this instance keeps it, else how their turn stands (awaiting, running,
// or how it ended). A key of another request is ErrKeyReused.
func (l *turnLoop) resultsKeyed(key, hash string) (*TurnStream, bool, error) {
	row, ok := l.keys[key]
	if !ok {
		var err error
		row, err = l.rows.IdempotencyKey(context.Background(), persistence.ScopeTurn, l.id, key)
		if errors.Is(err, persistence.ErrKeyNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	if row.Hash != hash {
		return nil, false, fmt.Errorf("%w: key %q was first sent for turn %s with another request; use a new key",
			ErrKeyReused, key, row.Turn)
	}
	if s := l.results[key]; s != nil {
		return s.follow(), true, nil
	}
	s, err := l.answerOf(row.Turn)
	return s, true, err
}

// awaitResults hands the calls of e to the turn's reader and ends its
// stream awaiting them (Update.Awaiting); the turn stays in flight. At
// the step limit, or once cancelled, the turn is abandoned instead.
func (l *turnLoop) awaitResults(ctx actor.Context, e core.AwaitResults) {
	if l.recovering() {
		return
	}
	t, ok := l.b.Turn(e.Turn)
	if !ok {
		return
	}
	s := l.streams[e.Turn]
	if s != nil {
		for _, c := range e.Calls {
			s.push(Update{Item: c}.withCounters(l.counters))
		}
	}
	if l.cancelled {
		l.abandon(ctx, e.Turn, "cancelled", cancelledClientToolText, nil)
		return
	}
	// No limit here: a client's tool loop goes on as long as the client
	// sends results (tools.max_steps bounds the runtime's tools).
	limited := l.stepLimited == t.ID
	l.stepLimited = messages.TurnID{}
	if s != nil {
		u := Update{Done: true, Phase: messages.PhaseResponding, Awaiting: true, Calls: slices.Clone(e.Calls), Outcome: pausedForClient}
		if limited {
			u.StepLimit = l.rt.cfg.MaxToolSteps
		}
		s.push(l.doneUpdate(u))
		delete(l.streams, e.Turn)
	}
}

// awaitingStream is a stream of turn t, which awaits its client's
// results, for a repeat of the request that led there: the text and
// calls of its last step, then the end awaiting the open calls.
func (l *turnLoop) awaitingStream(t core.Turn) *TurnStream {
	s := newTurnStream(l.id, t.ID, t.Seq)
	last := 0
	for i, it := range t.Loop {
		if _, ok := it.(messages.ToolOutput); ok {
			last = i + 1
		}
	}
	open := t.OpenCalls()
	var shown uint64 // text bytes, committed with the loop: durable
	for _, it := range t.Loop[last:] {
		switch it := it.(type) {
		case messages.AssistantMessage:
			if text := it.Blocks.RenderedText(); text != "" {
				shown += uint64(len(text))
				s.push(Update{Delta: text, TextDisplayed: shown, TextDurable: shown})
			}
		case messages.ToolCall:
			if slices.ContainsFunc(open, func(c messages.ToolCall) bool { return c.CallID == it.CallID }) {
				s.push(Update{Item: it})
			}
		}
	}
	s.push(Update{Done: true, Phase: messages.PhaseResponding, Awaiting: true, Calls: open, Outcome: pausedForClient,
		TextDisplayed: shown, TextDurable: shown})
	return s
}

// stalledStep is the step of a client's tool loop that failed right
// after the client's results (its upstream's 429, say): the turn stays
// in flight, running nothing, and its client was answered with the
// error, so that the client's retry of the same results runs the step
// again (an SDK retries a 429 or a 5xx with the same request; ending the
// loop would refuse that retry, no call awaiting its result). A new user
// turn or a cancellation ends the loop as a failed step in a loop ends
// (finalized Incomplete with the error, row written then); a stop or
// passivation loses the stall and recovery does the same (interrupted).
type stalledStep struct {
	turn   messages.TurnID
	step   messages.StepID
	reason string
	row    persistence.StepRow
}

// stallForClient stalls turn, whose step failed with code for reason
// (row its record) right after its client's results
// (core.StallForClient). The turn's stream ends with the failure (Phase
// failed, the code, the provider's Retry-After), as a failed turn's
// does.
func (l *turnLoop) stallForClient(e core.StallForClient, row persistence.StepRow) {
	turn, code := e.Turn, e.Code
	reason := l.rt.cfg.Scrub.String(e.Reason)
	l.stall = &stalledStep{turn: turn, step: e.Step, reason: reason, row: row}
	for k, s := range l.results {
		if s.Turn == turn {
			delete(l.results, k) // a repeat of those results is the retry
		}
	}
	if s := l.streams[turn]; s != nil {
		s.push(l.doneUpdate(Update{Done: true, Phase: messages.PhaseFailed, Outcome: messages.FailedOutcome(code, reason),
			Err: reason, RetryAfter: l.retryAfter}))
		delete(l.streams, turn)
	}
	l.rt.log.Warn().Str("branch", l.id.String()).Str("turn", turn.String()).Str("code", code).
		Msg("a step after the client's tool results failed; the turn waits for the client to retry them")
}

// retryStalled runs the stalled step st again for m, the client's retry
// of the results it ran on, which must be those recorded (the same
// calls, the same outputs); the stream returned delivers the turn from
// there on.
func (l *turnLoop) retryStalled(ctx actor.Context, st *stalledStep, m *resultsReq) (*TurnStream, error) {
	t, ok := l.b.Turn(st.turn)
	if !ok {
		return nil, fmt.Errorf("%w: branch %s has no turn in flight", ErrNoToolCallsOpen, l.id)
	}
	recorded := map[string]messages.ToolOutput{}
	for i := len(t.Loop) - 1; i >= 0 && t.ClientAnswered(t.Loop[i]); i-- {
		o := t.Loop[i].(messages.ToolOutput)
		recorded[o.CallID] = o
	}
	for i, it := range m.outputs {
		o, _ := it.(messages.ToolOutput)
		if r, ok := recorded[o.CallID]; !ok || !bytes.Equal(r.Output, o.Output) || r.IsError != o.IsError || len(m.outputs) != len(recorded) {
			return nil, fmt.Errorf("%w: outputs[%d] (call %q): the results of this turn's last tool calls were recorded already, "+
				"and the step after them failed (%s): send the same results again to retry it, or a new user message",
				persistence.ErrInvalidArgument, i, o.CallID, st.reason)
		}
	}
	known := false // the key came with the results the step ran on
	if m.key != "" {
		var err error
		if _, known, err = l.resultsKeyed(m.key, m.hash); err != nil {
			return nil, err
		}
	}
	now := l.now()
	evs, err := l.b.RetryStep(t.ID, st.step, messages.NewID[messages.StepID](now), "the client retried: "+st.reason, now)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", persistence.ErrInvalidArgument, err)
	}
	tx := l.txFor(evs[0])
	tx.Steps = append(tx.Steps, st.row)
	s := newTurnStream(l.id, t.ID, t.Seq)
	if m.key != "" {
		if !known {
			tx.Keys = []persistence.IdempotencyRow{{Scope: persistence.ScopeTurn, Owner: l.id, Key: m.key, Hash: m.hash,
				Turn: t.ID, Created: now.UTC()}}
		}
		if l.results == nil {
			l.results = map[string]*TurnStream{}
		}
		l.results[m.key] = s
	}
	l.stall = nil
	l.streams[t.ID] = s
	l.usage, l.lastModel, l.cancelled, l.retryAfter = providers.Usage{}, "", false, 0
	l.persist(ctx, evs[0], tx) // gives RetryStep: the step runs again
	return s, nil
}

// abandonAwaiting ends the turn that awaits its client's results, if
// one does, before a new user turn: its open calls are answered with an
// error and the response finalized incomplete (ReasonToolResultsMissing).
func (l *turnLoop) abandonAwaiting(ctx actor.Context) {
	if st := l.stall; st != nil {
		// Its client went on without retrying the failed step: the
		// loop ends as a failed step in a loop ends.
		l.stall = nil
		l.abandon(ctx, st.turn, st.reason, missingClientResultText, &st.row)
		return
	}
	if t, ok := l.b.Awaiting(); ok {
		l.abandon(ctx, t.ID, ReasonToolResultsMissing, missingClientResultText, nil)
	}
}
