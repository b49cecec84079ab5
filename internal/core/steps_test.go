package core

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

var (
	grep     = messages.ToolCall{CallID: "c1", Name: "grep", Arguments: []byte("{}")}
	clientFn = messages.Tool{Name: "client_fn"}
	callC    = messages.ToolCall{CallID: "c2", Name: "client_fn", Arguments: []byte("{}")}
)

// respondingWith returns a branch whose turn T1 responds in step S1,
// sent with the client's tools; after, if set, is the client's call its
// first step made and the client's answer, and S2 the step running on it.
func respondingWith(t *testing.T, tools []messages.Tool, after bool) *Branch {
	t.Helper()
	b := &Branch{}
	step := func(evs []messages.BranchEvent, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if _, err := b.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	step(b.Create(messages.BranchCreated{Branch: B1, Session: Se1, At: now}))
	step(b.SubmitFor(T1, Client{Tools: tools}, now))
	step(b.Start(T1, S1, now))
	if after {
		step(b.IssueToolCalls(T1, S1, messages.Items{callC}, now))
		step(b.RecordToolResults(T1, messages.Items{messages.ToolOutput{CallID: callC.CallID, Output: []byte(`"ok"`)}}, S2, now))
	}
	return b
}

func TestEndStep(t *testing.T) {
	t.Parallel()
	text := messages.Items{messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "hi"}}}}
	withCall := messages.Items{messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "let me look"}}}, grep}
	useTool := messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}
	incomplete := messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}
	tests := []struct {
		name  string
		tools []messages.Tool
		after bool // the step runs on the client's results (S2)
		end   StepEnd
		mode  messages.ToolMode
		want  Effect
	}{
		{"a reply", nil, false, StepEnd{Turn: T1, Step: S1, Items: text, Outcome: completed}, messages.ToolsEnabled,
			FinalizeStep{Turn: T1, Step: S1, Outcome: completed}},
		{"calls cut short", nil, false, StepEnd{Turn: T1, Step: S1, Items: withCall, Outcome: incomplete}, messages.ToolsEnabled,
			FinalizeStep{Turn: T1, Step: S1, Outcome: incomplete}},
		{"calls, enabled", nil, false, StepEnd{Turn: T1, Step: S1, Items: withCall, Outcome: useTool}, messages.ToolsEnabled,
			IssueCalls{Turn: T1, Step: S1}},
		{"calls, parse_only", nil, false, StepEnd{Turn: T1, Step: S1, Items: withCall, Outcome: useTool}, messages.ToolsParseOnly,
			FinalizeStep{Turn: T1, Step: S1, Outcome: useTool}},
		{"calls, disabled", nil, false, StepEnd{Turn: T1, Step: S1, Items: withCall, Outcome: useTool}, messages.ToolsDisabled,
			EndLoop{Turn: T1, Step: S1, Code: messages.FailTurn, Reason: `the model called tool "grep" but tools are disabled (tools.mode)`}},
		{"a client's call, disabled", []messages.Tool{clientFn}, false,
			StepEnd{Turn: T1, Step: S1, Items: messages.Items{callC}, Outcome: useTool}, messages.ToolsDisabled, IssueCalls{Turn: T1, Step: S1}},
		{"a client's call, parse_only", []messages.Tool{clientFn}, false,
			StepEnd{Turn: T1, Step: S1, Items: messages.Items{callC}, Outcome: useTool}, messages.ToolsParseOnly, IssueCalls{Turn: T1, Step: S1}},
		{"the runtime's call, disabled, the client sent tools", []messages.Tool{clientFn}, false,
			StepEnd{Turn: T1, Step: S1, Items: withCall, Outcome: useTool}, messages.ToolsDisabled, IssueCalls{Turn: T1, Step: S1}},
		{"too large", nil, false, StepEnd{Turn: T1, Step: S1, Failed: true, Code: messages.FailContextTooLarge, Reason: "big", TooLarge: true},
			messages.ToolsEnabled, RetryForSize{Turn: T1, Step: S1, Reason: "big"}},
		{"too large again", nil, false, StepEnd{Turn: T1, Step: S1, Failed: true, Code: messages.FailContextTooLarge, Reason: "big",
			TooLarge: true, SizeRetries: 1}, messages.ToolsEnabled, RetryForSize{Turn: T1, Step: S1, Reason: "big"}},
		{"too large past the retries", nil, false, StepEnd{Turn: T1, Step: S1, Failed: true, Code: messages.FailContextTooLarge,
			Reason: "big", TooLarge: true, SizeRetries: MaxSizeRetries}, messages.ToolsEnabled,
			EndLoop{Turn: T1, Step: S1, Code: messages.FailContextTooLarge, Reason: "big"}},
		{"too large, not the running step", nil, false, StepEnd{Turn: T1, Step: S2, Failed: true, Code: messages.FailContextTooLarge,
			Reason: "big", TooLarge: true}, messages.ToolsEnabled, EndLoop{Turn: T1, Step: S2, Code: messages.FailContextTooLarge, Reason: "big"}},
		{"a provider's failure", nil, false, StepEnd{Turn: T1, Step: S1, Failed: true, Code: messages.FailProvider, Reason: "502"},
			messages.ToolsEnabled, EndLoop{Turn: T1, Step: S1, Code: messages.FailProvider, Reason: "502"}},
		{"a provider's failure after the client's results", []messages.Tool{clientFn}, true,
			StepEnd{Turn: T1, Step: S2, Failed: true, Code: messages.FailProviderRateLimited, Reason: "429"}, messages.ToolsEnabled,
			StallForClient{Turn: T1, Step: S2, Code: messages.FailProviderRateLimited, Reason: "429"}},
		{"too large after the client's results, past the retries", []messages.Tool{clientFn}, true,
			StepEnd{Turn: T1, Step: S2, Failed: true, Code: messages.FailContextTooLarge, Reason: "big", TooLarge: true, SizeRetries: 2},
			messages.ToolsEnabled, StallForClient{Turn: T1, Step: S2, Code: messages.FailContextTooLarge, Reason: "big"}},
		{"cancelled after the client's results", []messages.Tool{clientFn}, true,
			StepEnd{Turn: T1, Step: S2, Failed: true, Code: messages.FailCancelled, Reason: "cancelled"}, messages.ToolsEnabled,
			EndLoop{Turn: T1, Step: S2, Code: messages.FailCancelled, Reason: "cancelled"}},
		{"interrupted after the client's results", []messages.Tool{clientFn}, true,
			StepEnd{Turn: T1, Step: S2, Failed: true, Code: messages.FailInterrupted, Reason: "crashed"}, messages.ToolsEnabled,
			EndLoop{Turn: T1, Step: S2, Code: messages.FailInterrupted, Reason: "crashed"}},
		{"a turn not tracked", nil, false, StepEnd{Turn: T2, Step: S1, Items: text, Outcome: completed}, messages.ToolsEnabled, nil},
	}
	for _, tc := range tests {
		b := respondingWith(t, tc.tools, tc.after)
		before, _ := json.Marshal(b)
		got := b.EndStep(tc.end, tc.mode)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: EndStep(%+v, %q) = %#v, want %#v", tc.name, tc.end, tc.mode, got, tc.want)
		}
		if after, _ := json.Marshal(b); string(after) != string(before) {
			t.Errorf("%s: EndStep changed the branch", tc.name)
		}
	}
}

// TestEndStepProperty checks, over random step ends, that what EndStep
// decides can be done: the command each effect calls for succeeds on the
// branch (so the shell never meets a refusal it has no answer for), a
// size retry is never asked past MaxSizeRetries, the calls of a step
// run only when it called a tool, and the branch is left as it was.
func TestEndStepProperty(t *testing.T) {
	t.Parallel()
	modes := []messages.ToolMode{messages.ToolsDisabled, messages.ToolsParseOnly, messages.ToolsEnabled}
	codes := []string{messages.FailProvider, messages.FailProviderRateLimited, messages.FailContextTooLarge,
		messages.FailCancelled, messages.FailInterrupted, messages.FailTurn, messages.FailProviderTimeout}
	kinds := []messages.OutcomeKind{messages.OutcomeCompleted, messages.OutcomeIncomplete, messages.OutcomePaused}
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 2000 {
		var tools []messages.Tool
		if r.IntN(2) == 0 {
			tools = []messages.Tool{clientFn}
		}
		after := tools != nil && r.IntN(2) == 0
		b := respondingWith(t, tools, after)
		running, _ := b.Turn(T1)
		e := StepEnd{Turn: T1, Step: running.Step, SizeRetries: r.IntN(MaxSizeRetries + 2)}
		if r.IntN(10) == 0 {
			e.Step = id[messages.StepID]("S3") // a step that is not the running one
		}
		if r.IntN(2) == 0 {
			e.Failed, e.Code, e.Reason = true, codes[r.IntN(len(codes))], fmt.Sprintf("failure %d", i)
			e.TooLarge = e.Code == messages.FailContextTooLarge && r.IntN(3) > 0
		} else {
			e.Outcome = messages.StepOutcome{Kind: kinds[r.IntN(len(kinds))]}
			e.Items = messages.Items{messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "text"}}}}
			for _, c := range []messages.ToolCall{grep, {CallID: "c3", Name: clientFn.Name, Arguments: []byte("{}")}} {
				if r.IntN(2) == 0 {
					e.Items = append(e.Items, c)
				}
			}
		}
		mode := modes[r.IntN(len(modes))]
		before, _ := json.Marshal(b)
		eff := b.EndStep(e, mode)
		if after, _ := json.Marshal(b); string(after) != string(before) {
			t.Fatalf("seed %d, case %d: EndStep(%+v, %q) changed the branch", seed, i, e, mode)
		}
		var err error
		switch eff := eff.(type) {
		case RetryForSize:
			if !e.TooLarge || e.SizeRetries >= MaxSizeRetries {
				t.Fatalf("seed %d, case %d: EndStep(%+v) = %#v: no retry is due", seed, i, e, eff)
			}
			_, err = b.RetryStep(T1, eff.Step, id[messages.StepID]("S9"), eff.Reason, now)
		case FinalizeStep:
			_, err = b.Finalize(T1, eff.Step, R1, eff.Outcome, 0, 0, now)
		case IssueCalls:
			if len(toolCallsOf(e.Items)) == 0 {
				t.Fatalf("seed %d, case %d: EndStep(%+v) = %#v with no call", seed, i, e, eff)
			}
			_, err = b.IssueToolCalls(T1, eff.Step, e.Items, now)
		case StallForClient:
			if !after {
				t.Fatalf("seed %d, case %d: EndStep(%+v) = %#v before any client result", seed, i, e, eff)
			}
		case EndLoop:
			if eff.Reason == "" {
				t.Fatalf("seed %d, case %d: EndStep(%+v) = %#v with no reason", seed, i, e, eff)
			}
			_, err = b.Fail(T1, eff.Code, eff.Reason, now)
		default:
			t.Fatalf("seed %d, case %d: EndStep(%+v) = %#v", seed, i, e, eff)
		}
		if err != nil && e.Step == running.Step {
			t.Fatalf("seed %d, case %d: EndStep(%+v, %q) = %#v, which the branch refuses: %v", seed, i, e, mode, eff, err)
		}
	}
}

func TestRunCalls(t *testing.T) {
	t.Parallel()
	// issued returns a branch whose step S1 called grep, and callC too
	// if client, with the RunTools effect that gave.
	issued := func(client bool) (*Branch, RunTools) {
		var tools []messages.Tool
		items := messages.Items{grep}
		if client {
			tools, items = []messages.Tool{clientFn}, messages.Items{grep, callC}
		}
		b := respondingWith(t, tools, false)
		evs, err := b.IssueToolCalls(T1, S1, items, now)
		if err != nil {
			t.Fatal(err)
		}
		effs, err := b.Apply(evs[0])
		if err != nil {
			t.Fatal(err)
		}
		return b, effs[0].(RunTools)
	}
	errOut := func(text string) messages.ToolOutput {
		out, _ := json.Marshal(text)
		return messages.ToolOutput{CallID: grep.CallID, Output: out, IsError: true}
	}
	tests := []struct {
		name   string
		client bool
		mode   messages.ToolMode
		max    int
		want   func(e RunTools) Effect
	}{
		{"enabled", false, messages.ToolsEnabled, 8, func(e RunTools) Effect { return e }},
		{"beside the client's, disabled", true, messages.ToolsDisabled, 8, func(RunTools) Effect {
			return AnswerCalls{Turn: T1, Step: S1, Outputs: messages.Items{errOut(`error: no tool is named "grep"`)}}
		}},
		{"beside the client's, parse_only", true, messages.ToolsParseOnly, 8, func(RunTools) Effect {
			return AnswerCalls{Turn: T1, Step: S1, Outputs: messages.Items{errOut("error: not executed: the runtime's tools are parse_only (tools.mode)")}}
		}},
		{"past the limit", false, messages.ToolsEnabled, 1, func(RunTools) Effect {
			return Abandon{Turn: T1, Reason: ReasonToolStepLimit,
				Text: "error: not executed: the turn reached its limit of 1 steps running the runtime's tools (tools.max_steps)"}
		}},
		{"past the limit, the client's calls open", true, messages.ToolsEnabled, 1, func(RunTools) Effect {
			return AnswerCalls{Turn: T1, Step: S1, StepLimit: true, Outputs: messages.Items{
				errOut("error: not executed: the turn reached its limit of 1 steps running the runtime's tools (tools.max_steps)")}}
		}},
	}
	for _, tc := range tests {
		b, e := issued(tc.client)
		before, _ := json.Marshal(b)
		got, want := b.RunCalls(e, tc.mode, tc.max), tc.want(e)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: RunCalls(%+v, %q, %d) = %#v, want %#v", tc.name, e, tc.mode, tc.max, got, want)
		}
		if after, _ := json.Marshal(b); string(after) != string(before) {
			t.Errorf("%s: RunCalls changed the branch", tc.name)
		}
	}
	if got := (&Branch{}).RunCalls(RunTools{Turn: T1, Step: S1}, messages.ToolsEnabled, 8); got != nil {
		t.Errorf("RunCalls on a turn not tracked = %#v, want nil", got)
	}
}
