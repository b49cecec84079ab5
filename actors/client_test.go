package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

var weatherDef = messages.Tool{Name: "weather", Description: "the weather in a city",
	InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}

func weatherCall(id string) messages.ToolCall {
	return messages.ToolCall{CallID: id, Name: "weather", Arguments: json.RawMessage(`"{\"city\":\"Paris\"}"`)}
}

func clientOutput(id, text string) messages.ToolOutput {
	out, _ := json.Marshal(text)
	return messages.ToolOutput{CallID: id, Output: out}
}

// clientTurn is a proxy client's turn: its system prompt, the weather
// tool and a tool choice.
func clientTurn(content ...messages.ContentBlock) *ClientTurn {
	return &ClientTurn{System: "You are terse.", Tools: []messages.Tool{weatherDef},
		ToolChoice: messages.ToolChoice{Mode: messages.ToolChoiceAuto}, Content: content}
}

// drain reads s to its end: the text, the last update, and every update.
func drain(t *testing.T, s *TurnStream) (string, Update, []Update) {
	t.Helper()
	var all []Update
	var text strings.Builder
	var last Update
	for us := s.Next(nil); us != nil; us = s.Next(nil) {
		for _, u := range us {
			all = append(all, u)
			text.WriteString(u.Delta)
			if u.Done {
				last = u
			}
		}
	}
	if !last.Done {
		t.Fatalf("stream ended without Done: %+v", all)
	}
	return text.String(), last, all
}

// callIDs are the call ids of calls.
func callIDs(calls []messages.ToolCall) string {
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.CallID)
	}
	return strings.Join(ids, ",")
}

// wantAwaiting fails unless u ends a stream awaiting the calls ids.
func wantAwaiting(t *testing.T, u Update, ids string) {
	t.Helper()
	if !u.Done || !u.Awaiting || u.Phase != messages.PhaseResponding || u.Outcome != pausedForTools || callIDs(u.Calls) != ids {
		t.Fatalf("stream ended %+v, want awaiting the results of %s", u, ids)
	}
}

// stepUsage sums the usage the provider reported for steps, and names
// the model of the last.
func stepUsage(steps []persistence.StepRow) (providers.Usage, string) {
	var u providers.Usage
	for _, s := range steps {
		u.InputTokens += s.InputTokens
		u.OutputTokens += s.OutputTokens
	}
	return u, steps[len(steps)-1].Model
}

// A client's turn runs a tool loop of three steps through the client:
// each step's request carries the client's system prompt first, its
// tools and tool choice, and the loop so far; each call ends a stream
// awaiting its result; and the whole loop stays one turn, one user
// message (the client's content blocks) and one reply.
func TestClientToolLoop(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := fake.New(
		fake.Step{Reply: "Checking.", Items: messages.Items{weatherCall("c1")}, Outcome: pausedForTools},
		fake.Step{Reply: "And tomorrow.", Items: messages.Items{weatherCall("c2")}, Outcome: pausedForTools},
		fake.Step{Reply: "Rain, then sun."},
	)
	cfg := testConfig(t, t.TempDir(), newEvents())
	reg, _ := NewToolRegistry(grepTool(&calls, nil))
	cfg.Provider, cfg.ToolMode, cfg.Tools, cfg.SystemInstructions = f, messages.ToolsEnabled, reg, "RUNTIME RULES"
	r, b := branchOn(t, cfg)

	image := messages.Image{MediaType: "image/png", Source: json.RawMessage(`{"type":"base64","data":"iVBORw0KGgo="}`)}
	s, err := r.SubmitWith(bg, b, "", SubmitOptions{Client: clientTurn(messages.Text{Text: "Weather in Paris? "}, image)})
	if err != nil {
		t.Fatal(err)
	}
	turn := s.Turn
	text, last, all := drain(t, s)
	wantAwaiting(t, last, "c1")
	if text != "Checking." || len(all) < 2 || all[len(all)-2].Item == nil {
		t.Fatalf("first stream: %q, updates %+v", text, all)
	}
	steps, _ := r.Steps(bg, turn)
	if u, model := stepUsage(steps); last.Usage != u || last.Usage.OutputTokens == 0 || last.Model != model || model == "" {
		t.Fatalf("awaiting Done usage %+v model %q, want %+v %q", last.Usage, last.Model, u, model)
	}
	info, err := r.Inspect(bg, b)
	if err != nil || info.InFlight == nil || !info.InFlight.Awaiting() || info.TurnSeq != 1 {
		t.Fatalf("awaiting branch: %+v, %v", info, err)
	}

	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "rain")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, last, _ = drain(t, s)
	wantAwaiting(t, last, "c2")
	steps, _ = r.Steps(bg, turn)
	if u, _ := stepUsage(steps[1:]); s.Turn != turn || text != "And tomorrow." || last.Usage != u {
		t.Fatalf("second stream of turn %s: %q, usage %+v want %+v", s.Turn, text, last.Usage, u)
	}

	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c2", "sun")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, last, _ = drain(t, s)
	steps, _ = r.Steps(bg, turn)
	if u, model := stepUsage(steps[2:]); text != "Rain, then sun." || last.Phase != messages.PhaseResponseFinalized ||
		last.Outcome.Kind != messages.OutcomeCompleted || last.Awaiting || last.Usage != u || last.Model != model || len(steps) != 3 {
		t.Fatalf("last stream: %q, %+v; %d steps", text, last, len(steps))
	}

	reqs := f.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d provider requests, want 3", len(reqs))
	}
	for i, req := range reqs {
		c := req.Context
		var names []string
		for _, tool := range c.Tools {
			names = append(names, tool.Name)
		}
		if !strings.HasPrefix(c.SystemInstructions, "You are terse.\n\n") || !strings.Contains(c.SystemInstructions, "RUNTIME RULES") ||
			strings.Join(names, ",") != "grep,weather" || c.ToolMode != messages.ToolsEnabled || c.ToolChoice.Mode != messages.ToolChoiceAuto ||
			!providers.SendsTools(c) || len(c.Continuation) != 3*i {
			t.Errorf("request %d: system %q, tools %v, mode %q, choice %+v, continuation %d items", i, c.SystemInstructions, names,
				c.ToolMode, c.ToolChoice, len(c.Continuation))
		}
		if got := c.User.Blocks; !reflect.DeepEqual(got, messages.Blocks{messages.Text{Text: "Weather in Paris? "}, image}) {
			t.Errorf("request %d: user blocks %+v", i, got)
		}
	}
	if segs := providers.Conversation(reqs[2].Context); len(segs) != 5 || segs[2].Kind != providers.SegmentToolResults {
		t.Errorf("last request's conversation: %+v", segs)
	}

	// One turn: one user message (the client's blocks), one reply with
	// the whole loop.
	h, _, err := r.History(bg, b, messages.TurnID{}, 10)
	if err != nil || len(h) != 2 {
		t.Fatalf("history = %+v, %v", h, err)
	}
	if h[0].Node != turn || !reflect.DeepEqual(h[0].Message.Blocks, messages.Blocks{messages.Text{Text: "Weather in Paris? "}, image}) {
		t.Fatalf("user message %+v", h[0])
	}
	want := "text:Checking. use:c1 result:c1=rain text:And tomorrow. use:c2 result:c2=sun text:Rain, then sun."
	if got := strings.Join(blockKinds(h[1].Message), " "); got != want {
		t.Fatalf("reply blocks = %s\nwant %s", got, want)
	}
	rows, _ := r.DB().TurnRows(bg, b, 0, 10)
	if info, _ := r.Inspect(bg, b); len(rows) != 1 || info.TurnSeq != 1 || info.InFlight != nil || calls.Load() != 0 {
		t.Fatalf("turn rows %+v, info %+v, runtime tool calls %d", rows, info, calls.Load())
	}
	// The context debug view rebuilds the first step's context, the
	// client's system prompt included, with the tools it offered (the
	// runtime's and the client's), the tool mode and the choice.
	d, err := r.DebugContext(bg, b, turn)
	if err != nil || !d.Matches || !strings.HasPrefix(d.Context.SystemInstructions, "You are terse.\n\n") || d.ClientSystem != "You are terse." {
		t.Fatalf("DebugContext: matches %v, system %q, client system %q, %v", d.Matches, d.Context.SystemInstructions, d.ClientSystem, err)
	}
	if c := d.Context; !reflect.DeepEqual(c.Tools, reqs[0].Context.Tools) || c.ToolMode != messages.ToolsEnabled ||
		c.ToolChoice != (messages.ToolChoice{Mode: messages.ToolChoiceAuto}) {
		t.Fatalf("DebugContext: tools %+v, mode %q, choice %+v; want the first request's %+v", c.Tools, c.ToolMode, c.ToolChoice,
			reqs[0].Context.Tools)
	}
	// The next turn's view offers the runtime's tools.
	if next, err := r.DebugNextContext(bg, b, "and tomorrow?"); err != nil || len(next.Context.Tools) != 1 ||
		next.Context.Tools[0].Name != "grep" || next.Context.ToolMode != messages.ToolsEnabled || next.ClientSystem != "" {
		t.Fatalf("DebugNextContext: tools %+v, mode %q, client system %q, %v", next.Context.Tools, next.Context.ToolMode, next.ClientSystem, err)
	}
	// The next turn is an ordinary one: the runtime's system only.
	runTurn(t, r, b, "thanks")
	if c := f.Requests()[3].Context; c.SystemInstructions != "RUNTIME RULES" || len(c.Tools) != 1 || c.ToolChoice.Mode != "" {
		t.Fatalf("next turn's request: system %q, tools %+v, choice %+v", c.SystemInstructions, c.Tools, c.ToolChoice)
	}
}

// A turn awaiting its client's results waits through a crash of its
// branch actor, a passivation and a restart of the runtime, and goes on
// with its client's system and tools.
func TestClientToolLoopSurvivesRestarts(t *testing.T) {
	t.Parallel()
	f := fake.New(
		fake.Step{Items: messages.Items{weatherCall("c1")}, Outcome: pausedForTools},
		fake.Step{Items: messages.Items{weatherCall("c2")}, Outcome: pausedForTools},
		fake.Step{Reply: "Done."},
	)
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider, cfg.SnapshotEvery = f, 3 // snapshots taken while awaiting
	r := openRuntime(t, cfg)
	_, br, _ := r.CreateSession(bg, "restarts")
	b := br.ID
	client := clientTurn()
	client.Params = messages.GenParams{Temperature: new(0.2), MaxOutputTokens: new(77), ParallelToolCalls: new(false),
		ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONSchema, Name: "w", Schema: json.RawMessage(`{"type":"object"}`)}}
	s, err := r.SubmitWith(bg, b, "weather?", SubmitOptions{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	_, last, _ := drain(t, s)
	wantAwaiting(t, last, "c1")

	if err := r.kill(bg, b); err != nil {
		t.Fatal(err)
	}
	if info, err := r.Inspect(bg, b); err != nil || info.InFlight == nil || !info.InFlight.Awaiting() {
		t.Fatalf("after a crash: %+v, %v", info, err)
	}
	pid, _ := r.pid(bg, b)
	if err := r.Stop(bg, b); err != nil {
		t.Fatal(err)
	}
	<-r.goneChan(pid)
	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "rain")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, last, _ = drain(t, s)
	wantAwaiting(t, last, "c2")

	r.Close()
	r = openRuntime(t, cfg)
	defer r.Close()
	if info, err := r.Inspect(bg, b); err != nil || info.InFlight == nil || !info.InFlight.Awaiting() {
		t.Fatalf("after a restart: %+v, %v", info, err)
	}
	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c2", "sun")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, last, _ := drain(t, s)
	if text != "Done." || last.Phase != messages.PhaseResponseFinalized || last.Outcome.Kind != messages.OutcomeCompleted {
		t.Fatalf("after the restart the loop ended %q, %+v", text, last)
	}
	for i, req := range f.Requests() {
		if c := req.Context; !strings.HasPrefix(c.SystemInstructions, "You are terse.") || len(c.Tools) != 1 || c.Tools[0].Name != "weather" ||
			string(c.Tools[0].InputSchema) != string(weatherDef.InputSchema) || c.ToolMode != messages.ToolsEnabled {
			t.Errorf("request %d: system %q, tools %+v, mode %q", i, c.SystemInstructions, c.Tools, c.ToolMode)
		}
		// The client's settings, through a crash, a passivation and a
		// restart.
		if !reflect.DeepEqual(req.Params, client.Params) || req.MaxOutputTokens != 77 || req.ParallelToolCalls {
			t.Errorf("request %d: params %+v, max output %d, parallel %v; want %+v, 77, false", i, req.Params,
				req.MaxOutputTokens, req.ParallelToolCalls, client.Params)
		}
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "use:c1 result:c1=rain use:c2 result:c2=sun text:Done." {
		t.Fatalf("reply = %s", got)
	}
	// The step's record keeps the settings: the debug view shows them,
	// and the context left room for the client's output bound.
	if d, err := r.DebugContext(bg, b, s.Turn); err != nil || !reflect.DeepEqual(d.Params, client.Params) ||
		d.Report.Budget.ResponseReserve != 77 {
		t.Fatalf("DebugContext params %+v, reserve %d, %v; want %+v, 77", d.Params, d.Report.Budget.ResponseReserve, err, client.Params)
	}
}

func TestClientReserve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		want, reserve, limit, got int
	}{
		{77, 4096, 32768, 77},          // a small bound: more room for the context
		{8000, 4096, 32768, 8000},      // a larger one: room for it
		{32000, 4096, 32768, 16384},    // not below half the window
		{32000, 20000, 32768, 20000},   // nor below the configured reserve
		{32000, 4096, 200000, 32000},   // a large window takes it
		{300000, 4096, 200000, 100000}, // more than the window
	} {
		if got := clientReserve(tc.want, core.Budget{ContextLimit: tc.limit, ResponseReserve: tc.reserve}); got != tc.got {
			t.Errorf("clientReserve(%d, reserve %d, limit %d) = %d, want %d", tc.want, tc.reserve, tc.limit, got, tc.got)
		}
	}
}

// awaitingBranch opens a runtime whose first step calls the client's
// weather tool twice, and leaves a turn awaiting the results.
func awaitingBranch(t *testing.T, steps ...fake.Step) (*Runtime, messages.BranchID, *events, *fake.Provider) {
	t.Helper()
	f := fake.New(append([]fake.Step{{Reply: "Checking.", Items: messages.Items{weatherCall("c1"), weatherCall("c2")},
		Outcome: pausedForTools}}, steps...)...)
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Provider = f
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "weather?", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	_, last, _ := drain(t, s)
	wantAwaiting(t, last, "c1,c2")
	return r, b, ev, f
}

// A user turn sent while a turn awaits its client's results ends that
// turn (its calls answered with an error, incomplete) and is accepted.
func TestNewTurnAbandonsAwaitingTurn(t *testing.T) {
	t.Parallel()
	r, b, _, _ := awaitingBranch(t, fake.Step{Reply: "Never mind then."})
	first, _ := r.Inspect(bg, b)
	s, err := r.SubmitWith(bg, b, "forget it", SubmitOptions{})
	if err != nil {
		t.Fatalf("SubmitWith while awaiting = %v, want the turn accepted", err)
	}
	text, last, _ := drain(t, s)
	if text != "Never mind then." || last.Phase != messages.PhaseResponseFinalized || s.Seq != 2 {
		t.Fatalf("new turn %d: %q, %+v", s.Seq, text, last)
	}
	row, err := r.DB().TurnRow(bg, b, first.InFlight.ID)
	if err != nil || row.Phase < messages.PhaseResponseFinalized || row.Outcome != "incomplete" {
		t.Fatalf("abandoned turn's row %+v, %v", row, err)
	}
	steps, _ := r.Steps(bg, first.InFlight.ID)
	if len(steps) != 1 {
		t.Fatalf("abandoned turn has %d steps", len(steps))
	}
	h, _, _ := r.History(bg, b, messages.TurnID{}, 4)
	if got := strings.Join(blockKinds(h[1].Message), " "); got != "text:Checking. use:c1 use:c2 result:c1! result:c2!" {
		t.Fatalf("abandoned turn's reply = %s", got)
	}
	res := h[1].Message.Blocks[3].(messages.ToolResult)
	if res.Content.RenderedText() != missingClientResultText {
		t.Fatalf("abandoned call's output %q", res.Content.RenderedText())
	}
	info, _ := r.Inspect(bg, b)
	var outcome messages.StepOutcome
	for _, tr := range info.Turns {
		if tr.ID == first.InFlight.ID {
			outcome = tr.Outcome
		}
	}
	if outcome.Kind != messages.OutcomeIncomplete || outcome.Reason != ReasonToolResultsMissing {
		t.Fatalf("abandoned turn's outcome %+v (turns %+v)", outcome, info.Turns)
	}
	if _, err := r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "x"), clientOutput("c2", "y")}, SubmitOptions{}); !errors.Is(err, ErrNoToolCallsOpen) {
		t.Fatalf("results for the abandoned turn = %v, want ErrNoToolCallsOpen", err)
	}
}

// Cancel ends a turn awaiting its client's results at once.
func TestCancelAwaitingTurn(t *testing.T) {
	t.Parallel()
	r, b, _, _ := awaitingBranch(t)
	info, _ := r.Inspect(bg, b)
	if err := r.Cancel(bg, b); err != nil {
		t.Fatal(err)
	}
	row, err := r.DB().TurnRow(bg, b, info.InFlight.ID)
	if err != nil || row.Phase != messages.PhaseResponseFinalized || row.Outcome != "incomplete" {
		t.Fatalf("cancelled turn's row %+v, %v", row, err)
	}
	after, _ := r.Inspect(bg, b)
	if after.InFlight != nil || len(after.Turns) != 1 || after.Turns[0].Outcome.Reason != "cancelled" {
		t.Fatalf("after cancel: %+v", after)
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "text:Checking. use:c1 use:c2 result:c1! result:c2!" {
		t.Fatalf("cancelled reply = %s", got)
	}
	if err := r.Cancel(bg, b); !errors.Is(err, ErrNoTurnInFlight) {
		t.Fatalf("Cancel again = %v", err)
	}
}

// Results that do not answer the open calls exactly are refused, naming
// the call, and nothing is recorded.
func TestSubmitToolResultsRefusesBadOutputs(t *testing.T) {
	t.Parallel()
	r0, b0 := fakeBranch(t)
	if _, err := r0.SubmitToolResults(bg, b0, messages.Items{clientOutput("c1", "x")}, SubmitOptions{}); !errors.Is(err, ErrNoToolCallsOpen) ||
		!strings.Contains(err.Error(), b0.String()) {
		t.Fatalf("results on an idle branch = %v, want ErrNoToolCallsOpen naming the branch", err)
	}

	hold := make(chan struct{})
	r, b, ev, f := awaitingBranch(t, fake.Step{Reply: "Thanks.", Block: hold})
	before, _ := r.Inspect(bg, b)
	for _, tc := range []struct {
		outputs messages.Items
		text    string
	}{
		{nil, "outputs: required"},
		{messages.Items{clientOutput("c1", "x"), clientOutput("zz", "y")}, `outputs[1].call_id: "zz" answers no open tool call (open: c1, c2)`},
		{messages.Items{clientOutput("c1", "x"), clientOutput("c1", "y")}, `outputs[1].call_id: "c1" is answered by outputs[0] already`},
		{messages.Items{clientOutput("c1", "x")}, `tool call "c2" (weather) has no output`},
		{messages.Items{clientOutput("c1", "x"), weatherCall("c2")}, "outputs[1]: messages.ToolCall, want a tool output"},
		{messages.Items{clientOutput("c1", "x"), messages.ToolOutput{CallID: "c2", Output: json.RawMessage(`not json`)}}, `outputs[1].output (call "c2"): not JSON`},
		{messages.Items{clientOutput("c1", "x"), messages.ToolOutput{Output: json.RawMessage(`"y"`)}}, "outputs[1].call_id: required"},
	} {
		if s, err := r.SubmitToolResults(bg, b, tc.outputs, SubmitOptions{}); !errors.Is(err, persistence.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), tc.text) || s != nil {
			t.Errorf("SubmitToolResults(%+v) = %v, want ErrInvalidArgument containing %q", tc.outputs, err, tc.text)
		}
	}
	if n := ev.count(isType[messages.ToolResultsRecorded]); n != 0 {
		t.Fatalf("%d results recorded by refused requests", n)
	}
	if after, _ := r.Inspect(bg, b); !reflect.DeepEqual(after, before) || f.Calls() != 1 {
		t.Fatalf("refused results changed the branch:\n%+v\nwant %+v (provider calls %d)", after, before, f.Calls())
	}
	// In any order: recorded in the calls' order.
	s, err := r.SubmitToolResults(bg, b, messages.Items{clientOutput("c2", "y"), clientOutput("c1", "x")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// While the next step runs, more results are refused as busy: the
	// turn may await its client again later.
	if _, err := r.SubmitToolResults(bg, b, messages.Items{clientOutput("c3", "z")}, SubmitOptions{}); !errors.Is(err, core.ErrBusy) {
		t.Fatalf("results while the step runs = %v, want ErrBusy", err)
	}
	close(hold)
	if _, last, _ := drain(t, s); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("ended %+v", last)
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "text:Checking. use:c1 use:c2 result:c1=x result:c2=y text:Thanks." {
		t.Fatalf("reply = %s", got)
	}
}

// Results sent again under their idempotency key are not recorded twice:
// the repeat gets the stream they started, or, once the turn ended, its
// end; other results under the key are ErrKeyReused.
func TestSubmitToolResultsIdempotent(t *testing.T) {
	t.Parallel()
	r, b, ev, f := awaitingBranch(t,
		fake.Step{Reply: "More.", Items: messages.Items{weatherCall("c3")}, Outcome: pausedForTools},
		fake.Step{Reply: "Sunny."})
	outs := messages.Items{clientOutput("c1", "x"), clientOutput("c2", "y")}
	s, err := r.SubmitToolResults(bg, b, outs, SubmitOptions{Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	_, first, _ := drain(t, s)
	wantAwaiting(t, first, "c3")
	// The same results again, in another order: the same stream.
	again, err := r.SubmitToolResults(bg, b, messages.Items{outs[1], outs[0]}, SubmitOptions{Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	text, last, _ := drain(t, again)
	if text != "More." || !reflect.DeepEqual(last, first) || f.Calls() != 2 {
		t.Fatalf("repeat: %q, %+v; want %+v (provider calls %d)", text, last, first, f.Calls())
	}
	if _, err := r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "z"), clientOutput("c2", "y")}, SubmitOptions{Key: "k1"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("other results under the key = %v, want ErrKeyReused", err)
	}
	if _, err := r.SubmitWith(bg, b, "hello", SubmitOptions{Key: "k1"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("a turn under the results' key = %v, want ErrKeyReused", err)
	}
	// After a crash the repeat gets how the turn stands: awaiting c3.
	if err := r.kill(bg, b); err != nil {
		t.Fatal(err)
	}
	again, err = r.SubmitToolResults(bg, b, outs, SubmitOptions{Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	text, last, _ = drain(t, again)
	wantAwaiting(t, last, "c3")
	if text != "More." {
		t.Fatalf("repeat after a crash: %q", text)
	}
	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c3", "z")}, SubmitOptions{Key: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, last, _ := drain(t, s); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("ended %+v", last)
	}
	again, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c3", "z")}, SubmitOptions{Key: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	if text, last, _ := drain(t, again); last.Phase != messages.PhaseResponseFinalized || !strings.HasSuffix(text, "Sunny.") {
		t.Fatalf("repeat after the end: %q, %+v", text, last)
	}
	if n := ev.count(isType[messages.ToolResultsRecorded]); n != 2 || f.Calls() != 3 {
		t.Fatalf("%d results recorded, %d provider calls; want 2 and 3", n, f.Calls())
	}
}

// A step that calls a tool of the runtime's and one of the client's runs
// the runtime's, records its output, then awaits the client's.
func TestClientToolLoopMixedCalls(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := fake.New(
		fake.Step{Reply: "Both.", Items: messages.Items{grepCall("g1", "x"), weatherCall("w1")}, Outcome: pausedForTools},
		fake.Step{Reply: "Done."},
	)
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	reg, _ := NewToolRegistry(grepTool(&calls, nil))
	cfg.Provider, cfg.ToolMode, cfg.Tools = f, messages.ToolsEnabled, reg
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "grep and weather", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	_, last, all := drain(t, s)
	wantAwaiting(t, last, "w1")
	var items []string
	for _, u := range all {
		switch it := u.Item.(type) {
		case messages.ToolCall:
			items = append(items, "call:"+it.CallID)
		case messages.ToolOutput:
			items = append(items, "output:"+it.CallID)
		}
	}
	if got := strings.Join(items, " "); got != "call:g1 output:g1 call:w1" || calls.Load() != 1 {
		t.Fatalf("stream items %s, grep ran %d times", got, calls.Load())
	}
	// The runtime's output is durable: a crash keeps it, and the turn
	// still awaits the client's.
	if err := r.kill(bg, b); err != nil {
		t.Fatal(err)
	}
	if info, err := r.Inspect(bg, b); err != nil || info.InFlight == nil || !info.InFlight.Awaiting() || len(info.InFlight.Loop) != 4 {
		t.Fatalf("after a crash: %+v, %v", info.InFlight, err)
	}
	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("w1", "sunny")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, last, _ := drain(t, s); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("ended %+v", last)
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "text:Both. use:g1 use:w1 result:g1=match:x result:w1=sunny text:Done." {
		t.Fatalf("reply = %s", got)
	}
	if calls.Load() != 1 || ev.count(isType[messages.ToolResultsRecorded]) != 2 {
		t.Fatalf("grep ran %d times", calls.Load())
	}
}

// With the runtime's tools off, a client's turn is still offered the
// client's tools, and a call of a tool nobody offered is answered with an
// error rather than failing the turn.
func TestClientToolsWithRuntimeToolsDisabled(t *testing.T) {
	t.Parallel()
	f := fake.New(
		fake.Step{Items: messages.Items{grepCall("g1", "x"), weatherCall("w1")}, Outcome: pausedForTools},
		fake.Step{Reply: "ok"},
	)
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = f
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "go", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	_, last, _ := drain(t, s)
	wantAwaiting(t, last, "w1")
	if c := f.Requests()[0].Context; c.ToolMode != messages.ToolsEnabled || len(c.Tools) != 1 || c.Tools[0].Name != "weather" {
		t.Fatalf("request: mode %q, tools %+v", c.ToolMode, c.Tools)
	}
	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("w1", "sunny")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s)
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "use:g1 use:w1 result:g1! result:w1=sunny text:ok" {
		t.Fatalf("reply = %s", got)
	}
}

// A client's turn is checked before anything is stored: its tools' names
// and schemas, its tool choice, its content; and its idempotency key
// covers what the client sent.
func TestClientTurnChecked(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	cfg := testConfig(t, t.TempDir(), newEvents())
	reg, _ := NewToolRegistry(grepTool(&calls, nil))
	cfg.Provider, cfg.ToolMode, cfg.Tools = fake.New(fake.Step{Reply: "ok"}).WithRefused("top_k"), messages.ToolsEnabled, reg
	r, b := branchOn(t, cfg)
	with := func(f func(c *ClientTurn)) *ClientTurn {
		c := clientTurn()
		f(c)
		return c
	}
	for _, tc := range []struct {
		c    *ClientTurn
		text string
	}{
		{with(func(c *ClientTurn) { c.Tools = append(c.Tools, grepDef) }), `client.tools[1].name: "grep" is the name of one of the runtime's tools`},
		{with(func(c *ClientTurn) { c.Tools[0].Name = "the weather" }), `client.tools[0].name: "the weather": must be 1 to 64`},
		{with(func(c *ClientTurn) { c.Tools = append(c.Tools, weatherDef) }), `client.tools[1].name: "weather" is client.tools[0]'s already`},
		{with(func(c *ClientTurn) { c.Tools[0].InputSchema = []byte(`"string"`) }), "client.tools[0].input_schema: must be a JSON object"},
		{with(func(c *ClientTurn) { c.ToolChoice = messages.ToolChoice{Mode: "any"} }), `client.tool_choice.mode: "any"`},
		{with(func(c *ClientTurn) { c.ToolChoice = messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: "nope"} }), `client.tool_choice.name: "nope" names no tool`},
		{with(func(c *ClientTurn) { c.Content = messages.Blocks{messages.ToolUse{ToolUseID: "x", Name: "y"}} }), "client.content[0]: a messages.ToolUse block"},
		{with(func(c *ClientTurn) { c.Tools = make([]messages.Tool, MaxClientTools+1) }), "client.tools: 129 tools, limit 128"},
		{with(func(c *ClientTurn) { c.System = strings.Repeat("x", int(r.DB().MaxPayloadBytes())) }), "client.system and client.tools"},
		{with(func(c *ClientTurn) { c.Params.MaxOutputTokens = new(0) }), "client.params.max_output_tokens: 0, want at least 1"},
		{with(func(c *ClientTurn) { c.Params.ResponseFormat = &messages.ResponseFormat{Type: "xml"} }), `client.params.response_format.type: "xml"`},
		{with(func(c *ClientTurn) { c.Params.TopK = new(40) }), "cannot take params.top_k: the fake provider was told to refuse it"},
	} {
		if s, err := r.SubmitWith(bg, b, "hi", SubmitOptions{Client: tc.c}); !errors.Is(err, persistence.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), tc.text) || s != nil {
			t.Errorf("SubmitWith(%+v) = %v, want ErrInvalidArgument containing %q", tc.c, err, tc.text)
		}
	}
	var pe *providers.ParamsError
	if _, err := r.SubmitWith(bg, b, "hi", SubmitOptions{Client: with(func(c *ClientTurn) { c.Params.TopK = new(1) })}); !errors.As(err, &pe) ||
		len(pe.Refused) != 1 || pe.Refused[0].Field != "top_k" {
		t.Errorf("a setting the model cannot take = %v, want a *providers.ParamsError naming top_k", err)
	}
	if _, err := r.SubmitWith(bg, b, "", SubmitOptions{Client: clientTurn()}); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("no text and no content = %v", err)
	}
	if info, _ := r.Inspect(bg, b); info.TurnSeq != 0 || info.Events != 1 {
		t.Fatalf("refused turns stored something: %+v", info)
	}
	// The tool choice may name the runtime's tool.
	s, err := r.SubmitWith(bg, b, "hi", SubmitOptions{Key: "t1", Client: with(func(c *ClientTurn) {
		c.ToolChoice = messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: "grep"}
	})})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s)
	if _, err := r.SubmitWith(bg, b, "hi", SubmitOptions{Key: "t1", Client: clientTurn()}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("the key with another client part = %v, want ErrKeyReused", err)
	}
	if _, err := r.SubmitWith(bg, b, "hi", SubmitOptions{Key: "t1"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("the key without the client part = %v, want ErrKeyReused", err)
	}
}

// Every last update says what the stream's steps used and which model
// ran the last one: a plain turn, a failed one, and one that failed
// before any step ran.
func TestDoneCarriesUsageAndModel(t *testing.T) {
	t.Parallel()
	var redactFails atomic.Bool
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = fake.New(fake.Step{Reply: "four words of reply"}, fake.Step{Err: &providers.Error{Provider: "fake", StatusCode: 400, Message: "bad"}})
	cfg.Redact = func(ac messages.AssembledContext) (messages.AssembledContext, error) {
		if redactFails.Load() {
			return ac, errors.New("no")
		}
		return ac, nil
	}
	r, b := branchOn(t, cfg)
	turnSteps := func(seq uint64) []persistence.StepRow {
		t.Helper()
		rows, err := r.DB().TurnRows(bg, b, seq, 1)
		if err != nil || len(rows) != 1 {
			t.Fatalf("turn row %d: %+v, %v", seq, rows, err)
		}
		steps, _ := r.Steps(bg, rows[0].ID)
		return steps
	}
	_, last, _ := runTurn(t, r, b, "hello")
	if u, model := stepUsage(turnSteps(1)); last.Usage != u || u.OutputTokens == 0 || u.InputTokens == 0 || last.Model != model || model == "" {
		t.Fatalf("Done usage %+v model %q, want %+v %q", last.Usage, last.Model, u, model)
	}
	_, last, _ = runTurn(t, r, b, "again")
	if u, model := stepUsage(turnSteps(2)); last.Phase != messages.PhaseFailed || last.Usage != u || last.Model != model {
		t.Fatalf("failed turn's Done %+v, want usage %+v model %q", last, u, model)
	}
	redactFails.Store(true)
	_, last, _ = runTurn(t, r, b, "once more")
	if last.Phase != messages.PhaseFailed || last.Usage != (providers.Usage{}) || last.Model != "" {
		t.Fatalf("Done of a turn failed before its step %+v, want no usage and no model", last)
	}
}

// A turn awaiting its client's results runs nothing: its branch actor
// passivates when idle, and the results activate it again.
func TestAwaitingBranchPassivates(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.IdleAfter = 50 * time.Millisecond
	cfg.Provider = fake.New(fake.Step{Items: messages.Items{weatherCall("c1")}, Outcome: pausedForTools}, fake.Step{Reply: "ok"})
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "weather?", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	_, last, _ := drain(t, s)
	wantAwaiting(t, last, "c1")
	pid, err := r.pid(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.goneChan(pid):
	case <-time.After(10 * time.Second):
		t.Fatal("the branch did not passivate while its turn awaited the client")
	}
	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "rain")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if text, last, _ := drain(t, s); text != "ok" || last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("after passivation the loop ended %q, %+v", text, last)
	}
}

// tools.max_steps bounds the steps running the runtime's tools, not a
// client's tool loop: with tools.mode disabled and the default limit, a
// 12-call client loop goes on as long as the client sends results, and
// each call reaches the client.
func TestClientToolLoopHasNoStepLimit(t *testing.T) {
	t.Parallel()
	const loops = 12
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.MaxToolSteps, cfg.ToolMode = 8, messages.ToolsDisabled
	var steps []fake.Step
	for i := range loops {
		steps = append(steps, fake.Step{Items: messages.Items{weatherCall(fmt.Sprintf("c%d", i+1))}, Outcome: pausedForTools})
	}
	f := fake.New(append(steps, fake.Step{Reply: "all twelve done"})...)
	cfg.Provider = f
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "weather?", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range loops {
		_, last, _ := drain(t, s)
		id := fmt.Sprintf("c%d", i+1)
		wantAwaiting(t, last, id)
		if last.StepLimit != 0 {
			t.Fatalf("call %s: StepLimit %d, want 0 (no runtime tool ran)", id, last.StepLimit)
		}
		if s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput(id, "rain")}, SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	text, last, _ := drain(t, s)
	if text != "all twelve done" || last.Phase != messages.PhaseResponseFinalized || last.Outcome.Kind != messages.OutcomeCompleted ||
		f.Calls() != loops+1 {
		t.Fatalf("loop ended %q %+v after %d provider calls, want completed after %d", text, last, f.Calls(), loops+1)
	}
}

// A step past tools.max_steps that calls the client's tools beside the
// runtime's hands the client's calls out (never swallowed) and says the
// limit was reached; the runtime's calls are answered "not executed".
// The client's results go on with the loop.
func TestStepLimitKeepsClientCalls(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	cfg := testConfig(t, t.TempDir(), newEvents())
	reg, _ := NewToolRegistry(grepTool(&calls, nil))
	f := fake.New(
		fake.Step{Items: messages.Items{grepCall("g1", "1")}, Outcome: pausedForTools},
		fake.Step{Items: messages.Items{grepCall("g2", "2"), weatherCall("c1")}, Outcome: pausedForTools},
		fake.Step{Reply: "done"},
	)
	cfg.Provider, cfg.ToolMode, cfg.Tools, cfg.MaxToolSteps = f, messages.ToolsEnabled, reg, 2
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "weather?", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	_, last, _ := drain(t, s)
	wantAwaiting(t, last, "c1")
	if last.StepLimit != 2 || calls.Load() != 1 {
		t.Fatalf("StepLimit %d, grep ran %d times; want 2 and 1", last.StepLimit, calls.Load())
	}
	if s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "rain")}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	text, last, _ := drain(t, s)
	if text != "done" || last.Phase != messages.PhaseResponseFinalized || last.StepLimit != 0 || f.Calls() != 3 {
		t.Fatalf("loop ended %q %+v after %d provider calls", text, last, f.Calls())
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "use:g1 result:g1=match:1 use:g2 use:c1 result:g2! result:c1=rain text:done" {
		t.Fatalf("reply = %s", got)
	}
}

// A step that fails right after the client's tool results ends the
// request with the failure (its code, the provider's Retry-After), and
// the turn waits for the client's retry of the same results, which runs
// the step again: an SDK retries a 429 with the same request.
func TestClientLoopFailedStepIsRetried(t *testing.T) {
	t.Parallel()
	limited := &providers.Error{Provider: "fake", StatusCode: 429, Message: "slow down", Retryable: true, RetryAfter: 7 * time.Second}
	cfg := testConfig(t, t.TempDir(), newEvents())
	f := fake.New(fake.Step{Items: messages.Items{weatherCall("c1")}, Outcome: pausedForTools}, fake.Step{Err: limited},
		fake.Step{Reply: "sunny"})
	cfg.Provider = f
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "weather?", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	_, last, _ := drain(t, s)
	wantAwaiting(t, last, "c1")
	if s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "rain")}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	_, last, _ = drain(t, s)
	if last.Phase != messages.PhaseFailed || last.Outcome.Code != messages.FailProviderRateLimited || last.RetryAfter != 7*time.Second {
		t.Fatalf("the failed step's stream ended %+v, want failed provider_rate_limited, retry after 7s", last)
	}
	if _, err := r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "snow")}, SubmitOptions{}); !errors.Is(err, persistence.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "send the same results again") {
		t.Fatalf("other results = %v, want ErrInvalidArgument saying to send the same", err)
	}
	if s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "rain")}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	text, last, _ := drain(t, s)
	if text != "sunny" || last.Phase != messages.PhaseResponseFinalized || f.Calls() != 3 {
		t.Fatalf("the retry ended %q %+v after %d provider calls", text, last, f.Calls())
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "use:c1 result:c1=rain text:sunny" {
		t.Fatalf("reply = %s", got)
	}
}

// A client that goes on with a new user message instead of retrying
// ends the stalled loop as a failed step in a loop ends: finalized
// incomplete with the error, keeping the loop.
func TestClientLoopFailedStepThenNewTurn(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	f := fake.New(fake.Step{Items: messages.Items{weatherCall("c1")}, Outcome: pausedForTools},
		fake.Step{Err: &providers.Error{Provider: "fake", StatusCode: 400, Message: "bad tool result"}}, fake.Step{Reply: "hello"})
	cfg.Provider = f
	r, b := branchOn(t, cfg)
	s, err := r.SubmitWith(bg, b, "weather?", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s)
	if s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "rain")}, SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, last, _ := drain(t, s); last.Phase != messages.PhaseFailed || last.Outcome.Code != messages.FailProviderRejected {
		t.Fatalf("the failed step's stream ended %+v, want failed provider_rejected", last)
	}
	s, err = r.SubmitWith(bg, b, "hi again", SubmitOptions{Client: clientTurn()})
	if err != nil {
		t.Fatal(err)
	}
	if text, last, _ := drain(t, s); text != "hello" || last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("the next turn ended %q %+v", text, last)
	}
	rows, err := r.DB().TurnRows(bg, b, 1, 1)
	if err != nil || len(rows) != 1 || rows[0].Outcome != "incomplete" {
		t.Fatalf("the stalled turn's row %+v, %v; want incomplete", rows, err)
	}
	// The failed step has its row, written when the loop ended.
	steps, _ := r.Steps(bg, rows[0].ID)
	if len(steps) != 2 || steps[1].Outcome.Kind != messages.OutcomeFailed || !strings.Contains(steps[1].Outcome.Message, "bad tool result") {
		t.Fatalf("the stalled turn's steps %+v, want the failed one last", steps)
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "text:hello" {
		t.Fatalf("last reply = %s", got)
	}
}
