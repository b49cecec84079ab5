package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/anthropic"
)

// breakpoints is where a request body's cache_control marks are: "tool
// N", "system N" and "msg M.B", in prompt order.
func breakpoints(t *testing.T, b map[string]any) []string {
	t.Helper()
	var out []string
	has := func(v any) bool {
		cc, _ := v.(map[string]any)["cache_control"].(map[string]any)
		if cc != nil && cc["type"] != "ephemeral" {
			t.Errorf("cache_control %v, want ephemeral", cc)
		}
		return cc != nil
	}
	for i, tool := range asList(b["tools"]) {
		if has(tool) {
			out = append(out, "tool "+itoa(i))
		}
	}
	for i, s := range asList(b["system"]) {
		if has(s) {
			out = append(out, "system "+itoa(i))
		}
	}
	for m, msg := range asList(b["messages"]) {
		for i, blk := range asList(msg.(map[string]any)["content"]) {
			if has(blk) {
				out = append(out, "msg "+itoa(m)+"."+itoa(i))
			}
		}
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

func itoa(i int) string { return string(rune('0' + i)) }

// The breakpoints follow the stable parts of the request: the history's
// end (skipping a thinking block, which cannot carry one), the system
// prompt's stable part, the summary; never the new user message. With
// the model's cache off there are none and the system prompt is one
// block.
func TestCacheBreakpoints(t *testing.T) {
	t.Parallel()
	req := basicRequest()
	c := &req.Context
	c.PinnedFacts = []string{"The repo is Go."}
	c.Summary = "We talked about tests."
	c.Retrieved = []messages.RetrievedChunk{{Text: "an old note", Score: 0.5}}
	c.Pending = []messages.Message{user(text("earlier")), assistant(text("answer"),
		messages.Reasoning{Raw: json.RawMessage(`{"type":"thinking","thinking":"hm","signature":"c2ln"}`)})}

	s := newServer(t, fakeapi.AnthropicText([]string{"ok"}, "end_turn"))
	if _, _, err := run(t, s, req); err != nil {
		t.Fatal(err)
	}
	b := body(t, s)
	if got, want := strings.Join(breakpoints(t, b), ", "), "system 0, system 1, msg 1.0"; got != want {
		t.Errorf("breakpoints %s, want %s", got, want)
	}

	off := newServer(t, fakeapi.AnthropicText([]string{"ok"}, "end_turn"))
	p := anthropic.New(anthropic.Options{BaseURL: off.URL, APIKey: testKey, NoCache: true})
	if _, err := p.Stream(context.Background(), req, func(providers.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b = body(t, off)
	if got := breakpoints(t, b); len(got) != 0 {
		t.Errorf("cache off: breakpoints %v, want none", got)
	}
	if sys := asList(b["system"]); len(sys) != 1 || sys[0].(map[string]any)["text"] != providers.SystemText(req.Context) {
		t.Errorf("cache off: system %v, want providers.SystemText in one block", sys)
	}
}

// Without a system prompt the last tool carries the stable part's
// breakpoint, its members kept in order; blocks sent as they came that
// carry their own cache_control count toward the API's limit of four.
func TestCacheBreakpointsToolsAndLimit(t *testing.T) {
	t.Parallel()
	req := basicRequest()
	c := &req.Context
	c.SystemInstructions = ""
	c.Summary = "We talked about tests."
	c.ToolMode = messages.ToolsEnabled
	c.Tools = []messages.Tool{{Name: "grep"}, {Name: "ls", Description: "List.", InputSchema: []byte(`{"type":"object","properties":{"z":{},"a":{}}}`)}}
	doc := func(n string) messages.Unknown {
		return messages.Unknown{Provider: "anthropic", Raw: json.RawMessage(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"` +
			n + `"},"cache_control":{"type":"ephemeral"}}`)}
	}
	c.Window = []messages.Message{user(doc("a"), doc("b"), text("read these")), assistant(text("done"))}
	s := newServer(t, fakeapi.AnthropicText([]string{"ok"}, "end_turn"))
	if _, _, err := run(t, s, req); err != nil {
		t.Fatal(err)
	}
	b := body(t, s)
	// Two of the client's, then the history's end and the last tool.
	if got, want := strings.Join(breakpoints(t, b), ", "), "tool 1, msg 0.0, msg 0.1, msg 1.0"; got != want {
		t.Errorf("breakpoints %s, want %s", got, want)
	}
	raw, _ := json.Marshal(asList(b["tools"])[1])
	if !strings.Contains(string(raw), `"cache_control":{"type":"ephemeral"}`) {
		t.Errorf("last tool %s", raw)
	}
	sent := string(s.Requests()[0].Body)
	if !strings.Contains(sent, `{"name":"ls","description":"List.","input_schema":{"type":"object","properties":{"z":{},"a":{}}},"cache_control":{"type":"ephemeral"}}`) {
		t.Errorf("the last tool was not sent as written with cache_control last:\n%s", sent)
	}
}

// A client's cache_control (GenParams.CacheControl) is honoured even
// with the model's cache option off: the runtime's breakpoints carry
// its TTL.
func TestCacheClientTTL(t *testing.T) {
	t.Parallel()
	req := basicRequest()
	req.Context.Pending = []messages.Message{user(text("earlier")), assistant(text("answer"))}
	req.Params.CacheControl = &messages.CacheControl{Type: messages.CacheEphemeral, TTL: "1h"}
	s := newServer(t, fakeapi.AnthropicText([]string{"ok"}, "end_turn"))
	p := anthropic.New(anthropic.Options{BaseURL: s.URL, APIKey: testKey, NoCache: true})
	if refused := p.RefusedParams("m", req.Params); len(refused) > 0 {
		t.Fatalf("RefusedParams = %v", refused)
	}
	if _, err := p.Stream(context.Background(), req, func(providers.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b := body(t, s)
	if got, want := strings.Join(breakpoints(t, b), ", "), "system 0, msg 1.0"; got != want {
		t.Errorf("breakpoints %s, want %s", got, want)
	}
	sent := string(s.Requests()[0].Body)
	if n := strings.Count(sent, `"cache_control":{"ttl":"1h","type":"ephemeral"}`); n != 2 {
		t.Errorf("%d breakpoints with the client's TTL, want 2:\n%s", n, sent)
	}
}
