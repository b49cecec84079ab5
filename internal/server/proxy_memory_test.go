package server

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// Through the proxy the memory tools are the runtime's: offered to the
// model beside the client's tools, run inside the runtime, and neither
// their calls nor their results reach the client, which gets the answer.
func TestProxyHidesMemoryTools(t *testing.T) {
	t.Parallel()
	args, _ := json.Marshal(map[string]string{"query": "deploy target"})
	f := fake.New(
		fake.Step{Items: messages.Items{messages.ToolCall{CallID: "m1", Name: actors.SearchMemoryTool, Arguments: args}},
			Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}},
		fake.Step{Reply: "eu-west-1"},
	)
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider, c.MemoryTools = f, true
	})
	body := map[string]any{"model": "local", "messages": []any{map[string]any{"role": "user", "content": "where do we deploy?"}},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "weather",
			"parameters": map[string]any{"type": "object"}}}}}
	var out struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string           `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if code := ts.call(t, "POST", "/v1/chat/completions", body, &out); code != 200 {
		t.Fatalf("status %d", code)
	}
	if len(out.Choices) != 1 || out.Choices[0].Message.Content == nil || *out.Choices[0].Message.Content != "eu-west-1" ||
		len(out.Choices[0].Message.ToolCalls) != 0 || out.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer %+v, want the final answer and no tool call", out)
	}
	reqs := f.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream requests, want 2 (the search, the answer)", len(reqs))
	}
	var names []string
	for _, tool := range reqs[0].Context.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "weather") || !slices.Contains(names, actors.SearchMemoryTool) {
		t.Fatalf("upstream offered %v, want the client's tool and the memory tools", names)
	}
	cont := reqs[1].Context.Continuation
	if out, ok := cont[len(cont)-1].(messages.ToolOutput); !ok || out.CallID != "m1" || out.IsError {
		t.Fatalf("the answer step did not get the search's result: %+v", cont)
	}
}
