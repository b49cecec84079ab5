package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

var (
	pausedForTools = messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}
	grepDef        = messages.Tool{Name: "grep", Description: "search", InputSchema: []byte(`{"type":"object"}`)}
)

func grepCall(id, q string) messages.ToolCall {
	args, _ := json.Marshal(`{"q":"` + q + `"}`)
	return messages.ToolCall{CallID: id, Name: "grep", Arguments: args}
}

// grepTool answers "match:<q>" and counts its calls; it waits on gate
// when gate is not nil, after saying so on running.
func grepTool(calls *atomic.Int32, gate chan struct{}) Tool {
	return gatedGrep(calls, gate, nil)
}

func gatedGrep(calls *atomic.Int32, gate, running chan struct{}) Tool {
	return ToolFunc(grepDef, func(ctx context.Context, args json.RawMessage) (string, error) {
		calls.Add(1)
		if running != nil {
			running <- struct{}{}
		}
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		var in struct{ Q string }
		if err := json.Unmarshal(args, &in); err != nil {
			return "", err
		}
		return "match:" + in.Q, nil
	})
}

// toolRuntime opens a runtime on provider f with the grep tool in mode.
func toolRuntime(t *testing.T, f providers.Provider, mode messages.ToolMode, tool Tool) (*Runtime, Config, messages.BranchID) {
	t.Helper()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider, cfg.ToolMode, cfg.ParallelToolCalls = f, mode, true
	reg, err := NewToolRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools = reg
	r := openRuntime(t, cfg)
	_, b, err := r.CreateSession(bg, "tools")
	if err != nil {
		t.Fatal(err)
	}
	return r, cfg, b.ID
}

// runTurn submits text and reads its stream to the end.
func runTurn(t *testing.T, r *Runtime, b messages.BranchID, text string) (string, Update, []Update) {
	t.Helper()
	s, err := r.Submit(bg, b, text)
	if err != nil {
		t.Fatal(err)
	}
	var all []Update
	var out strings.Builder
	var last Update
	for us := s.Next(nil); us != nil; us = s.Next(nil) {
		for _, u := range us {
			all = append(all, u)
			out.WriteString(u.Delta)
			if u.Done {
				last = u
			}
		}
	}
	return out.String(), last, all
}

// lastReply returns the newest message of the branch's history.
func lastReply(t *testing.T, r *Runtime, b messages.BranchID) messages.Message {
	t.Helper()
	h, _, err := r.History(bg, b, messages.TurnID{}, 1)
	if err != nil || len(h) != 1 {
		t.Fatalf("History = %v, %v", h, err)
	}
	return h[0].Message
}

// blockKinds describes a message's blocks: "text:…", "use:id", "result:id[!]".
func blockKinds(m messages.Message) []string {
	var out []string
	for _, b := range m.Blocks {
		switch b := b.(type) {
		case messages.Text:
			out = append(out, "text:"+b.Text)
		case messages.ToolUse:
			out = append(out, "use:"+b.ToolUseID)
		case messages.ToolResult:
			s := "result:" + b.ToolUseID + "=" + b.Content.RenderedText()
			if b.IsError {
				s = "result:" + b.ToolUseID + "!"
			}
			out = append(out, s)
		}
	}
	return out
}

func TestToolLoopRunsToolsAndContinues(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := fake.New(
		fake.Step{Reply: "Looking.", Items: messages.Items{grepCall("a", "x"), grepCall("b", "y")}, Outcome: pausedForTools},
		fake.Step{Reply: "Found both."},
		fake.Step{Reply: "Sure."},
	)
	r, _, b := toolRuntime(t, f, messages.ToolsEnabled, grepTool(&calls, nil))
	defer r.Close()
	text, last, updates := runTurn(t, r, b, "find x and y")
	if last.Phase != messages.PhaseResponseFinalized || last.Outcome.Kind != messages.OutcomeCompleted {
		t.Fatalf("turn ended %+v", last)
	}
	if text != "Looking.Found both." || calls.Load() != 2 {
		t.Fatalf("streamed %q with %d tool calls", text, calls.Load())
	}
	var items []string
	for _, u := range updates {
		switch it := u.Item.(type) {
		case messages.ToolCall:
			items = append(items, "call:"+it.CallID)
		case messages.ToolOutput:
			items = append(items, "output:"+it.CallID+"="+string(it.Output))
		}
	}
	if got := strings.Join(items, " "); got != `call:a call:b output:a="match:x" output:b="match:y"` {
		t.Errorf("stream items = %s", got)
	}
	// The second step saw the calls and their outputs as continuation, in
	// order, with the tools offered.
	reqs := f.Requests()
	if len(reqs) != 2 || len(reqs[1].Context.Continuation) != 5 || reqs[1].Context.ToolMode != messages.ToolsEnabled ||
		len(reqs[1].Context.Tools) != 1 || !reqs[1].ParallelToolCalls {
		t.Fatalf("requests = %d, second continuation %+v", len(reqs), reqs[len(reqs)-1].Context.Continuation)
	}
	reply := lastReply(t, r, b)
	want := "text:Looking. use:a use:b result:a=match:x result:b=match:y text:Found both."
	if got := strings.Join(blockKinds(reply), " "); got != want {
		t.Fatalf("reply blocks = %s\nwant %s", got, want)
	}
	// Each step has its row, in order, with what it produced.
	rows, _ := r.DB().TurnRows(bg, b, 0, 10)
	steps, err := r.Steps(bg, rows[0].ID)
	if err != nil || len(steps) != 2 || steps[0].Index != 0 || steps[1].Index != 1 ||
		steps[0].Outcome.Reason != "tool_use" || steps[1].Outcome.Kind != messages.OutcomeCompleted ||
		steps[0].Provider != "fake" || len(steps[0].Request) == 0 || steps[0].StreamPath == "" {
		t.Fatalf("steps = %+v, %v", steps, err)
	}
	// The next turn's request carries the loop in its history, every use
	// answered by its real result.
	runTurn(t, r, b, "thanks")
	reqs = f.Requests()
	segs := providers.Conversation(reqs[len(reqs)-1].Context)
	var results []string
	for _, s := range segs {
		if s.Kind == providers.SegmentToolResults {
			for _, blk := range s.Blocks {
				res := blk.(messages.ToolResult)
				results = append(results, res.ToolUseID+"="+res.Content.RenderedText())
			}
		}
	}
	if strings.Join(results, ",") != "a=match:x,b=match:y" {
		t.Fatalf("history results = %q", results)
	}
}

func TestToolLoopStepLimit(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := fake.New(
		fake.Step{Items: messages.Items{grepCall("a", "1")}, Outcome: pausedForTools},
		fake.Step{Items: messages.Items{grepCall("b", "2")}, Outcome: pausedForTools},
	)
	cfg := testConfig(t, t.TempDir(), newEvents())
	reg, _ := NewToolRegistry(grepTool(&calls, nil))
	cfg.Provider, cfg.ToolMode, cfg.Tools, cfg.MaxToolSteps = f, messages.ToolsEnabled, reg, 2
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "limit")
	_, last, _ := runTurn(t, r, b.ID, "loop forever")
	if last.Phase != messages.PhaseResponseFinalized || last.Outcome.Kind != messages.OutcomeIncomplete ||
		last.Outcome.Reason != ReasonToolStepLimit || last.StepLimit != 2 {
		t.Fatalf("turn ended %+v, want incomplete for the step limit", last)
	}
	if calls.Load() != 1 || f.Calls() != 2 {
		t.Fatalf("tool calls %d, provider calls %d; want 1 and 2", calls.Load(), f.Calls())
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b.ID)), " "); got != "use:a result:a=match:1 use:b result:b!" {
		t.Fatalf("reply blocks = %s", got)
	}
}

func TestToolModesParseOnlyAndDisabled(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := fake.New(fake.Step{Reply: "I would grep.", Items: messages.Items{grepCall("a", "x")}, Outcome: pausedForTools},
		fake.Step{Reply: "ok"})
	r, _, b := toolRuntime(t, f, messages.ToolsParseOnly, grepTool(&calls, nil))
	_, last, _ := runTurn(t, r, b, "grep x")
	if last.Phase != messages.PhaseResponseFinalized || last.Outcome != pausedForTools || calls.Load() != 0 || f.Calls() != 1 {
		t.Fatalf("parse_only: turn ended %+v, tool calls %d, provider calls %d", last, calls.Load(), f.Calls())
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "text:I would grep. use:a" {
		t.Fatalf("parse_only reply = %s", got)
	}
	// The next request answers the recorded call with an error result.
	runTurn(t, r, b, "never mind")
	reqs := f.Requests()
	segs := providers.Conversation(reqs[len(reqs)-1].Context)
	found := false
	for _, s := range segs {
		for _, blk := range s.Blocks {
			if res, ok := blk.(messages.ToolResult); ok && res.ToolUseID == "a" && res.IsError {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("parse_only call left unanswered in the next request: %+v", segs)
	}
	r.Close()

	f = fake.New(fake.Step{Items: messages.Items{grepCall("a", "x")}, Outcome: pausedForTools})
	r, _, b = toolRuntime(t, f, messages.ToolsDisabled, grepTool(&calls, nil))
	defer r.Close()
	_, last, _ = runTurn(t, r, b, "grep x")
	if last.Phase != messages.PhaseFailed || !strings.Contains(last.Err, `tool "grep" but tools are disabled`) || calls.Load() != 0 {
		t.Fatalf("disabled: turn ended %+v", last)
	}
	if len(f.Requests()[0].Context.Tools) != 0 {
		t.Errorf("disabled mode offered tools")
	}
}

// A crash while a tool runs: on recovery the open call is answered with
// an error and the turn finalized with what the loop did; the tool is not
// run again.
func TestToolLoopCrashMidToolIsAnswered(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	gate, running := make(chan struct{}), make(chan struct{}, 1)
	defer close(gate)
	f := fake.New(fake.Step{Reply: "Checking.", Items: messages.Items{grepCall("a", "x")}, Outcome: pausedForTools},
		fake.Step{Reply: "next"})
	r, _, b := toolRuntime(t, f, messages.ToolsEnabled, gatedGrep(&calls, gate, running))
	defer r.Close()
	s, err := r.Submit(bg, b, "grep x")
	if err != nil {
		t.Fatal(err)
	}
	<-running
	if err := r.kill(bg, b); err != nil {
		t.Fatal(err)
	}
	if _, last := s.Wait(nil); last.Phase != messages.PhaseFailed {
		t.Fatalf("stream of the killed actor ended %+v, want interrupted", last)
	}
	info, err := r.Inspect(bg, b)
	if err != nil || info.InFlight != nil || info.Pending != 1 {
		t.Fatalf("after the crash: %+v, %v", info, err)
	}
	want := "text:Checking. use:a result:a!"
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != want {
		t.Fatalf("recovered reply = %s, want %s", got, want)
	}
	rows, _ := r.DB().TurnRows(bg, b, 0, 10)
	if rows[0].Outcome != "incomplete" || calls.Load() != 1 {
		t.Fatalf("turn row %+v, tool calls %d", rows[0], calls.Load())
	}
	// The branch goes on.
	if _, last, _ := runTurn(t, r, b, "again"); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("next turn ended %+v", last)
	}
}

func TestCancelToolLoop(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	gate, running := make(chan struct{}), make(chan struct{}, 1)
	defer close(gate)
	f := fake.New(fake.Step{Items: messages.Items{grepCall("a", "x")}, Outcome: pausedForTools})
	r, _, b := toolRuntime(t, f, messages.ToolsEnabled, gatedGrep(&calls, gate, running))
	defer r.Close()
	if err := r.Cancel(bg, b); !errors.Is(err, ErrNoTurnInFlight) {
		t.Fatalf("Cancel with nothing in flight = %v", err)
	}
	s, err := r.Submit(bg, b, "grep x")
	if err != nil {
		t.Fatal(err)
	}
	<-running
	if err := r.Cancel(bg, b); err != nil {
		t.Fatal(err)
	}
	_, last := s.Wait(nil)
	if last.Phase != messages.PhaseResponseFinalized || last.Outcome.Reason != "cancelled" {
		t.Fatalf("cancelled turn ended %+v", last)
	}
	if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != "use:a result:a!" {
		t.Fatalf("reply = %s", got)
	}
}

func TestCancelPlainTurn(t *testing.T) {
	t.Parallel()
	f := fake.New(fake.Step{Reply: "partial and then", Hang: true})
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = f
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "cancel")
	s, err := r.Submit(bg, b.ID, "talk")
	if err != nil {
		t.Fatal(err)
	}
	s.Next(nil)
	if err := r.Cancel(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	_, last := s.Wait(nil)
	if want := messages.FailedOutcome(messages.FailCancelled, "cancelled"); last.Phase != messages.PhaseFailed ||
		last.Err != "cancelled" || last.Outcome != want {
		t.Fatalf("cancelled turn ended %+v, want outcome %+v", last, want)
	}
	if row, err := r.DB().TurnRow(bg, b.ID, s.Turn); err != nil || row.Outcome != "cancelled" || row.Code != messages.FailCancelled {
		t.Fatalf("cancelled turn's row %+v, %v", row, err)
	}
}

func TestSelectModelSwitchesProvider(t *testing.T) {
	t.Parallel()
	def := fake.New(fake.Step{Reply: "from default"})
	other := fake.New(fake.Step{Reply: "from other"}).WithName("other")
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = def
	cfg.Models = map[string]Model{"other": {Provider: other, ID: "other-1", MaxOutputTokens: 77}}
	r := openRuntime(t, cfg)
	_, b, _ := r.CreateSession(bg, "models")
	if text, _, _ := runTurn(t, r, b.ID, "one"); text != "from default" {
		t.Fatalf("first turn: %q", text)
	}
	if err := r.SelectModel(bg, b.ID, "nope"); !errors.Is(err, ErrUnknownModel) || !strings.Contains(err.Error(), `["other"]`) {
		t.Fatalf("unknown model: %v", err)
	}
	if err := r.SelectModel(bg, b.ID, "other"); err != nil {
		t.Fatal(err)
	}
	if text, _, _ := runTurn(t, r, b.ID, "two"); text != "from other" {
		t.Fatalf("second turn: %q", text)
	}
	req := other.Requests()[0]
	if req.Model != "other-1" || req.MaxOutputTokens != 77 || len(req.Context.Window)+len(req.Context.Pending) != 2 {
		t.Fatalf("other model's request: model %q, max %d, history %d+%d", req.Model, req.MaxOutputTokens,
			len(req.Context.Window), len(req.Context.Pending))
	}
	// The choice is durable.
	r.Close()
	r = openRuntime(t, cfg)
	defer r.Close()
	if info, err := r.Inspect(bg, b.ID); err != nil || info.Model != "other" {
		t.Fatalf("after reopen: model %q, %v", info.Model, err)
	}
	if err := r.SelectModel(bg, b.ID, ""); err != nil {
		t.Fatal(err)
	}
	if text, _, _ := runTurn(t, r, b.ID, "three"); text != "from default" {
		t.Fatalf("back to default: %q", text)
	}
}

func TestRedactRewritesOutboundOnly(t *testing.T) {
	t.Parallel()
	f := fake.New(fake.Step{Reply: "ok"})
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = f
	cfg.Redact = func(c messages.AssembledContext) (messages.AssembledContext, error) {
		text := strings.ReplaceAll(c.User.RenderedText, "hunter2", "[redacted]")
		c.User = messages.NewMessage(messages.RoleUser, messages.Text{Text: text})
		return c, nil
	}
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "redact")
	runTurn(t, r, b.ID, "my password is hunter2")
	if got := f.Requests()[0].Context.User.RenderedText; got != "my password is [redacted]" {
		t.Fatalf("sent %q", got)
	}
	h, _, _ := r.History(bg, b.ID, messages.TurnID{}, 2)
	if h[0].Message.RenderedText != "my password is hunter2" {
		t.Fatalf("stored %q, want the original", h[0].Message.RenderedText)
	}
}

func TestToolRegistryRejectsBadTools(t *testing.T) {
	t.Parallel()
	ok := ToolFunc(grepDef, nil)
	for _, tc := range []struct {
		tool Tool
		want string
	}{
		{ToolFunc(messages.Tool{Name: "bad name"}, nil), `name "bad name"`},
		{ToolFunc(messages.Tool{Name: "x", InputSchema: []byte(`[1]`)}, nil), "input_schema: must be a JSON object"},
		{nil, "tool is nil"},
	} {
		if _, err := NewToolRegistry(tc.tool); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewToolRegistry: %v, want an error containing %q", err, tc.want)
		}
	}
	reg, err := NewToolRegistry(ok)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(ok); err == nil || !strings.Contains(err.Error(), "taken already") {
		t.Errorf("duplicate name: %v", err)
	}
}

func TestRunToolErrors(t *testing.T) {
	t.Parallel()
	panicky := ToolFunc(messages.Tool{Name: "boom"}, func(context.Context, json.RawMessage) (string, error) { panic("bang") })
	failing := ToolFunc(messages.Tool{Name: "fail"}, func(context.Context, json.RawMessage) (string, error) {
		return "", errors.New("disk full")
	})
	slow := ToolFunc(messages.Tool{Name: "slow"}, func(ctx context.Context, _ json.RawMessage) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	reg, _ := NewToolRegistry(panicky, failing, slow)
	outs := runTools(bg, reg.Lookup, []messages.ToolCall{{CallID: "1", Name: "boom"}, {CallID: "2", Name: "fail"},
		{CallID: "3", Name: "slow"}, {CallID: "4", Name: "missing"}}, true, 20_000_000)
	want := []string{"panicked: bang", "error: disk full", "did not return within 20ms", "no tool is named"}
	for i, o := range outs {
		out := o.(messages.ToolOutput)
		if !out.IsError || !strings.Contains(string(out.Output), want[i]) || out.CallID == "" {
			t.Errorf("output %d = %+v, want an error containing %q", i, out, want[i])
		}
	}
}

// A turn whose branch actor fails mid-step ends interrupted: its stream
// says so at once, and the restarted actor records it with that code.
func TestKilledTurnSaysInterrupted(t *testing.T) {
	t.Parallel()
	r, b := fakeBranch(t, fake.Step{Reply: "so far", Hang: true})
	s, err := r.Submit(bg, b, "talk")
	if err != nil {
		t.Fatal(err)
	}
	s.Next(nil)
	if err := r.kill(bg, b); err != nil {
		t.Fatal(err)
	}
	_, last := s.Wait(nil)
	if want := messages.FailedOutcome(messages.FailInterrupted, core.InterruptedReason); last.Phase != messages.PhaseFailed ||
		last.Outcome != want || last.Err != core.InterruptedReason {
		t.Fatalf("killed turn ended %+v, want outcome %+v", last, want)
	}
	if _, err := r.Inspect(bg, b); err != nil { // answered after the restarted actor recovered
		t.Fatal(err)
	}
	if row, err := r.DB().TurnRow(bg, b, s.Turn); err != nil || row.Phase != messages.PhaseFailed || row.Outcome != "failed" ||
		row.Code != messages.FailInterrupted || row.Reason != core.InterruptedReason {
		t.Fatalf("killed turn's row %+v, %v", row, err)
	}
}

func TestStepTimeout(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = fake.New(fake.Step{Reply: "so far", Hang: true})
	cfg.StepTimeout = 100_000_000 // 100 ms
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "timeout")
	text, last, _ := runTurn(t, r, b.ID, "talk")
	if last.Phase != messages.PhaseFailed || !strings.Contains(last.Err, "timed out after 100ms (runtime.provider_timeout)") || text != "so far" ||
		last.Outcome != messages.FailedOutcome(messages.FailProviderTimeout, last.Err) {
		t.Fatalf("turn ended %+v with %q", last, text)
	}
}

// With K=2, B=2 a fold is due once three turns are pending, and it
// leaves the newest turn pending: every turn stays in the prompt until
// the summary that folds it is committed.
func TestFoldPolicyInRuntime(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	f := fake.New()
	cfg.Provider, cfg.Fold = f, &core.Policy{K: 2, B: 2}
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "fold")
	for i := range 3 { // each says something the summary keeps
		runTurn(t, r, b.ID, fmt.Sprintf("message %d: we keep the notes in notes-%d.md", i+1, i+1))
	}
	ev.waitFor(t, "StateCommitted", 1, isType[messages.StateCommitted])
	info, err := r.Inspect(bg, b.ID)
	if err != nil || info.Committed != 2 || info.Pending != 1 {
		t.Fatalf("after 3 turns: committed %d, pending %d (%v); want the oldest 2 folded, the newest pending", info.Committed, info.Pending, err)
	}
	runTurn(t, r, b.ID, "message 4")
	reqs := f.Requests()
	last := reqs[len(reqs)-1].Context
	if len(last.Pending) != 2 || !strings.HasPrefix(last.Pending[0].RenderedText, "message 3:") || last.Summary == "" {
		t.Fatalf("4th prompt: pending %d messages (first %q), summary %q", len(last.Pending), last.Pending[0].RenderedText, last.Summary)
	}
}

// SRD §22 test 4: a context over its model's limit is shrunk in the
// defined order, each step logged, and what cannot fit fails the turn
// with the sections' sizes and the keys to change.
func TestContextShrinker(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	f := fake.New().WithContextLimit(600) // echoes the user message
	cfg.Provider, cfg.MaxOutputTokens, cfg.SafetyMargin = f, 100, 10
	cfg.Logger = zerolog.New(&logs).Level(zerolog.InfoLevel)
	cfg.Fold = &core.Policy{K: 6, B: 4}
	var long strings.Builder
	for range 40 {
		long.WriteString("- the user likes concise answers with examples\n")
	}
	cfg.Summarize = func(context.Context, string, []core.Exchange) (string, error) { return long.String(), nil }
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "shrink")
	input := 600 - 100 - 10
	para := strings.Repeat("word ", 80) // about 100 tokens
	// Pending turns pile up until the oldest no longer fit.
	for i := range 3 {
		if _, last, _ := runTurn(t, r, b.ID, fmt.Sprint(i, " ", para)); last.Phase != messages.PhaseResponseFinalized {
			t.Fatalf("turn %d ended %+v", i, last)
		}
	}
	if !strings.Contains(logs.String(), `"step":"drop_pending_turn"`) {
		t.Fatalf("no pending turn was dropped from an over-budget prompt:\n%s", logs.String())
	}
	last := f.Requests()[len(f.Requests())-1].Context
	if len(last.Pending) >= 4 {
		t.Errorf("the third prompt kept %d pending messages", len(last.Pending))
	}
	// Fold everything: the long summary is then shrunk for the prompt,
	// never in the state.
	if err := r.CommitPending(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, "StateCommitted", 1, isType[messages.StateCommitted])
	logs.Reset()
	if _, last, _ := runTurn(t, r, b.ID, "and now?"); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn after the fold ended %+v", last)
	}
	sent := f.Requests()[len(f.Requests())-1].Context
	info, _ := r.Inspect(bg, b.ID)
	if !strings.Contains(logs.String(), `"step":"shrink_summary"`) || len(sent.Summary) >= len(info.State.Summary) ||
		info.State.Summary != long.String() {
		t.Fatalf("summary sent %d bytes, state %d; logs:\n%s", len(sent.Summary), len(info.State.Summary), logs.String())
	}
	if n := tokens.Estimate.Count(sent.SystemInstructions) + tokens.Estimate.Count(sent.Summary); n > input {
		t.Errorf("the shrunk prompt is still %d tokens over a budget of %d", n, input)
	}
	// A user message that cannot fit fails the turn, saying why.
	_, failed, _ := runTurn(t, r, b.ID, strings.Repeat("huge ", 3000))
	if failed.Phase != messages.PhaseFailed || !strings.Contains(failed.Err, "context too large") ||
		!strings.Contains(failed.Err, "user ") || !strings.Contains(failed.Err, "context_limit") ||
		failed.Outcome != messages.FailedOutcome(messages.FailContextTooLarge, failed.Err) {
		t.Fatalf("oversized turn ended %+v", failed)
	}
}

// With a librarian model, step 4 of the shrinker asks it to shrink the
// head summary (the shrink prompt) while the turn waits; the shorter
// summary becomes the head state, the turn goes on with it, and what was
// sent is what context debug rebuilds. A librarian model that fails
// falls back to the deterministic shrink, which then becomes the head.
func TestContextShrinkerAsksTheLibrarian(t *testing.T) {
	t.Parallel()
	var long strings.Builder
	for range 40 {
		long.WriteString("- the user likes concise answers with examples, see /srv/app/config.yaml\n")
	}
	short := "## Goals and preferences\n- concise answers with examples; config in /srv/app/config.yaml"
	for _, fails := range []bool{false, true} {
		t.Run(fmt.Sprint("fails=", fails), func(t *testing.T) {
			var logs bytes.Buffer
			ev := newEvents()
			cfg := testConfig(t, t.TempDir(), ev)
			f := fake.New().WithContextLimit(600)
			cfg.Provider, cfg.MaxOutputTokens, cfg.SafetyMargin = f, 100, 10
			cfg.Logger = zerolog.New(&logs).Level(zerolog.InfoLevel)
			cfg.Fold = &core.Policy{K: 6, B: 4}
			// The first fold writes a long summary; later ones keep it.
			cfg.Summarize = func(_ context.Context, prev string, _ []core.Exchange) (string, error) {
				if prev != "" {
					return prev, nil
				}
				return long.String(), nil
			}
			librarian := fake.New(fake.Step{Reply: short})
			if fails {
				librarian = fake.New(fake.Step{Err: errors.New("librarian down")})
			}
			cfg.Shrink = LLMShrinker(librarian, "lib", 0, cfg.Logger)
			r := openRuntime(t, cfg)
			defer r.Close()
			_, b, _ := r.CreateSession(bg, "shrink")
			runTurn(t, r, b.ID, "first")
			if err := r.CommitPending(bg, b.ID); err != nil {
				t.Fatal(err)
			}
			ev.waitFor(t, "StateCommitted", 1, isType[messages.StateCommitted])
			for i := range 2 {
				if _, last, _ := runTurn(t, r, b.ID, fmt.Sprint("and now? ", i)); last.Phase != messages.PhaseResponseFinalized {
					t.Fatalf("turn %d after the fold ended %+v", i, last)
				}
			}
			reqs := f.Requests()
			info, _ := r.Inspect(bg, b.ID)
			shrunkStates := ev.count(func(e messages.BranchEvent) bool {
				c, ok := e.(messages.StateCommitted)
				return ok && c.Shrunk
			})
			want := short
			if fails {
				// The librarian falls back to the deterministic shrink,
				// which keeps every entity; that is the new head.
				if !strings.Contains(logs.String(), "shrinking the summary deterministically") {
					t.Errorf("no fallback logged:\n%s", logs.String())
				}
				want = info.State.Summary
				if len(want) >= long.Len() || !strings.Contains(want, "/srv/app/config.yaml") {
					t.Fatalf("head summary after a failing librarian: %d bytes; logs:\n%s", len(want), logs.String())
				}
			} else if len(librarian.Requests()) != 1 ||
				!strings.Contains(librarian.Requests()[0].Context.User.RenderedText, "/srv/app/config.yaml") {
				t.Errorf("the librarian got %d requests", len(librarian.Requests()))
			}
			if shrunkStates != 1 || info.State.Summary != want {
				t.Fatalf("%d shrunk states; head summary %q", shrunkStates, info.State.Summary)
			}
			for i, req := range reqs[1:] {
				if req.Context.Summary != want {
					t.Errorf("turn %d after the fold was sent the summary %q", i, req.Context.Summary)
				}
			}
			rows, _ := r.DB().TurnRows(bg, b.ID, 0, 10)
			for _, row := range rows {
				if d, err := r.DebugContext(bg, b.ID, row.ID); err != nil || !d.Matches {
					t.Errorf("turn %d: context debug %v, matches %v", row.Seq, err, d.Matches)
				}
			}
		})
	}
}

// A provider that rejects a context for its size gets the step again on a
// smaller context (SRD §7.2), at most twice.
func TestRetryWhenContextTooLarge(t *testing.T) {
	t.Parallel()
	tooLarge := &providers.Error{Provider: "fake", StatusCode: 400, Message: "prompt is too long", ContextTooLarge: true}
	f := fake.New(fake.Step{Err: tooLarge}, fake.Step{Reply: "fits now"})
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = f
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "too-large")
	text, last, _ := runTurn(t, r, b.ID, "hello")
	if last.Phase != messages.PhaseResponseFinalized || text != "fits now" || f.Calls() != 2 {
		t.Fatalf("turn ended %+v with %q after %d calls", last, text, f.Calls())
	}
	rows, _ := r.DB().TurnRows(bg, b.ID, 0, 1)
	steps, err := r.Steps(bg, rows[0].ID)
	if err != nil || len(steps) != 2 || steps[0].Outcome.Kind != messages.OutcomeFailed || steps[1].Outcome.Kind != messages.OutcomeCompleted {
		t.Fatalf("steps %+v, %v", steps, err)
	}
	// Always too large: two retries, then the turn fails saying why.
	f2 := fake.New(fake.Step{Err: tooLarge})
	cfg2 := testConfig(t, t.TempDir(), newEvents())
	cfg2.Provider = f2
	r2 := openRuntime(t, cfg2)
	defer r2.Close()
	_, b2, _ := r2.CreateSession(bg, "too-large")
	if _, last, _ := runTurn(t, r2, b2.ID, "hello"); last.Phase != messages.PhaseFailed ||
		!strings.Contains(last.Err, "prompt is too long") || f2.Calls() != 3 ||
		last.Outcome != messages.FailedOutcome(messages.FailContextTooLarge, last.Err) {
		t.Fatalf("turn ended %+v after %d calls, want failed after 1 + 2 retries", last, f2.Calls())
	}
}

// A finalized step's journal is written and fsynced once the branch has
// committed what the step leads to (its TX-A), so that the file system's
// work does not compete with the commit; a branch that never says so (it
// crashed first) holds the work back for journalSyncWait at most, and
// Close for no time.
func TestJournalFsyncWaitsForTheCommit(t *testing.T) {
	r := &Runtime{closing: make(chan struct{}), log: zerolog.Nop()}
	finish := func(synced chan<- time.Time) func() error {
		return func() error {
			synced <- time.Now()
			return nil
		}
	}
	committed, synced := make(chan struct{}), make(chan time.Time, 1)
	r.finishJournal(messages.StepID{}, finish(synced), committed)
	select {
	case <-synced:
		t.Fatal("the journal was fsynced before the commit")
	case <-time.After(journalSyncWait / 5):
	}
	close(committed)
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("the journal was not fsynced after the commit")
	}

	start := time.Now()
	r.finishJournal(messages.StepID{}, finish(synced), make(chan struct{})) // never committed
	select {
	case at := <-synced:
		if waited := at.Sub(start); waited < journalSyncWait {
			t.Errorf("uncommitted: fsynced after %v, want journalSyncWait (%v)", waited, journalSyncWait)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("uncommitted: the journal was never fsynced")
	}

	close(r.closing)
	start = time.Now()
	r.finishJournal(messages.StepID{}, finish(synced), make(chan struct{}))
	r.journalSyncs.Wait()
	if waited := time.Since(start); waited >= journalSyncWait {
		t.Errorf("closing: the fsync waited %v", waited)
	}
	<-synced
}
