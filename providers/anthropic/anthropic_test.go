package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/anthropic"
)

const testKey = "sk-ant-test-key"

// newServer starts a fake Messages API scripted with replies.
func newServer(t testing.TB, replies ...fakeapi.Reply) *fakeapi.Server {
	t.Helper()
	s := fakeapi.New(replies...)
	t.Cleanup(s.Close)
	return s
}

func newProvider(url string) *anthropic.Provider {
	return anthropic.New(anthropic.Options{BaseURL: url, APIKey: testKey})
}

func basicRequest() providers.Request {
	return providers.Request{
		Model:           "claude-test",
		MaxOutputTokens: 256,
		Context: messages.AssembledContext{
			SystemInstructions: "You are helpful.",
			User:               messages.NewMessage(messages.RoleUser, messages.Text{Text: "Hi there"}),
		},
	}
}

// run streams req from the server and returns the events, response and
// error.
func run(t *testing.T, s *fakeapi.Server, req providers.Request) ([]providers.Event, providers.Response, error) {
	t.Helper()
	var events []providers.Event
	resp, err := newProvider(s.URL).Stream(context.Background(), req, func(ev providers.Event) error {
		events = append(events, ev)
		return nil
	})
	return events, resp, err
}

// body returns the JSON body of the only request the server received.
func body(t *testing.T, s *fakeapi.Server) map[string]any {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	var m map[string]any
	if err := json.Unmarshal(reqs[0].Body, &m); err != nil {
		t.Fatalf("request body %q: %v", reqs[0].Body, err)
	}
	return m
}

func assistantText(items messages.Items) string {
	var b strings.Builder
	for _, it := range items {
		if m, ok := it.(messages.AssistantMessage); ok {
			b.WriteString(m.Blocks.RenderedText())
		}
	}
	return b.String()
}

func deltas(events []providers.Event) []string {
	var out []string
	for _, ev := range events {
		if ev.Kind == providers.EventTextDelta {
			out = append(out, ev.Text)
		}
	}
	return out
}

func providerError(t *testing.T, err error) *providers.Error {
	t.Helper()
	var pe *providers.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err %v (%T), want a *providers.Error", err, err)
	}
	return pe
}

// The usage is the upstream's: input tokens from message_start (with the
// prompt cache's writes and reads, which the API counts apart), output
// tokens from the final message_delta; for a text reply and a tool use
// alike. The model is the one that answered.
func TestStreamUsage(t *testing.T) {
	tests := []struct {
		name  string
		reply fakeapi.Reply
		want  providers.Usage
	}{
		{"text", fakeapi.NewAnthropicStream().Text("Hi").Usage(1234, 56).Stop("end_turn"), providers.Usage{InputTokens: 1234, OutputTokens: 56}},
		{"cached prompt", fakeapi.NewAnthropicStream().Text("Hi").Usage(20, 9).CacheUsage(1500, 3000).Stop("end_turn"), providers.Usage{InputTokens: 4520, OutputTokens: 9, CacheReadTokens: 3000, CacheWriteTokens: 1500}},
		{"tool use", fakeapi.NewAnthropicStream().ToolUse(fakeapi.AnthropicCall{Name: "get_weather", Input: `{"city":"Paris"}`}, 2).Usage(800, 40).Stop("tool_use"),
			providers.Usage{InputTokens: 800, OutputTokens: 40}},
		{"max tokens", fakeapi.NewAnthropicStream().Text("Hi").Usage(70, 256).Stop("max_tokens"), providers.Usage{InputTokens: 70, OutputTokens: 256}},
	}
	for _, tt := range tests {
		s := newServer(t, tt.reply)
		req := basicRequest()
		req.Context.ToolMode = messages.ToolsEnabled
		req.Context.Tools = []messages.Tool{{Name: "get_weather"}}
		_, resp, err := run(t, s, req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if resp.Usage != tt.want || resp.Model != fakeapi.AnthropicModel {
			t.Errorf("%s: usage %+v, model %q; want %+v, %q", tt.name, resp.Usage, resp.Model, tt.want, fakeapi.AnthropicModel)
		}
	}
}

func TestStreamText(t *testing.T) {
	s := newServer(t, fakeapi.AnthropicText([]string{"Hello", ", ", "world!"}, "end_turn"))
	events, resp, err := run(t, s, basicRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	wantTypes := "message_start,content_block_start,content_block_delta,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
		if !json.Valid(ev.Raw) {
			t.Errorf("event %s raw %q is not JSON", ev.Type, ev.Raw)
		}
		if ev.Kind == providers.EventTextDelta && ev.Index != 0 {
			t.Errorf("delta index %d, want 0", ev.Index)
		}
	}
	if got := strings.Join(types, ","); got != wantTypes {
		t.Errorf("event types %s, want %s (pings are dropped)", got, wantTypes)
	}
	if got := strings.Join(deltas(events), "|"); got != "Hello|, |world!" {
		t.Errorf("deltas %q", got)
	}
	if got := assistantText(resp.Items); got != "Hello, world!" {
		t.Errorf("text %q", got)
	}
	if last := resp.Items[len(resp.Items)-1]; last != (messages.Metadata{Key: "response_id", Value: fakeapi.AnthropicMessageID}) {
		t.Errorf("last item %#v, want the response id", last)
	}
	if resp.Outcome != (messages.StepOutcome{Kind: messages.OutcomeCompleted}) {
		t.Errorf("outcome %+v, want completed", resp.Outcome)
	}
	if resp.Usage != (providers.Usage{InputTokens: fakeapi.AnthropicInputTokens, OutputTokens: 3}) {
		t.Errorf("usage %+v", resp.Usage)
	}

	r := s.Requests()[0]
	if r.Path != "/v1/messages" || r.Method != http.MethodPost {
		t.Errorf("request %s %s, want POST /v1/messages", r.Method, r.Path)
	}
	if r.Header.Get("X-Api-Key") != testKey || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("headers %v", r.Header)
	}
	b := body(t, s)
	if b["model"] != "claude-test" || b["max_tokens"] != float64(256) || b["stream"] != true {
		t.Errorf("model %v, max_tokens %v, stream %v", b["model"], b["max_tokens"], b["stream"])
	}
	for _, k := range []string{"tools", "tool_choice"} {
		if _, ok := b[k]; ok {
			t.Errorf("%s sent with tools disabled", k)
		}
	}
	sys, _ := b["system"].([]any)
	if len(sys) != 1 || sys[0].(map[string]any)["text"] != "You are helpful." {
		t.Errorf("system %v, want the instructions top-level", b["system"])
	}
	msgs := b["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("messages %v", msgs)
	}
	m := msgs[0].(map[string]any)
	content := m["content"].([]any)
	if m["role"] != "user" || len(content) != 1 || content[0].(map[string]any)["text"] != "Hi there" {
		t.Errorf("message %v", m)
	}

	if string(resp.RawRequest) != string(compact(t, r.Body)) {
		t.Errorf("RawRequest %s\nwant the body sent %s", resp.RawRequest, r.Body)
	}
	if strings.Contains(string(resp.RawRequest), testKey) {
		t.Errorf("RawRequest holds the key")
	}
	var sum struct {
		ID         string `json:"id"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal(resp.RawResponse, &sum); err != nil {
		t.Fatalf("RawResponse %s: %v", resp.RawResponse, err)
	}
	if sum.ID != fakeapi.AnthropicMessageID || sum.Model != fakeapi.AnthropicModel || sum.StopReason != "end_turn" ||
		len(sum.Content) != 1 || sum.Content[0].Text != "Hello, world!" || sum.Usage.InputTokens != 25 || sum.Usage.OutputTokens != 3 {
		t.Errorf("RawResponse %s", resp.RawResponse)
	}
}

func compact(t *testing.T, data []byte) []byte {
	t.Helper()
	var m json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(m)
	return out
}

func TestStreamLongOutput(t *testing.T) {
	s := newServer(t, fakeapi.AnthropicTextN(2000, "ab"))
	events, resp, err := run(t, s, basicRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if n := len(deltas(events)); n != 2000 {
		t.Errorf("got %d text deltas, want 2000", n)
	}
	if got := assistantText(resp.Items); got != strings.Repeat("ab", 2000) {
		t.Errorf("text has %d bytes, want 4000", len(got))
	}
	if resp.Usage.OutputTokens != 2000 {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func toolRequest(parallel bool) providers.Request {
	req := basicRequest()
	req.ParallelToolCalls = parallel
	req.Context.ToolMode = messages.ToolsEnabled
	req.Context.Tools = []messages.Tool{
		{Name: "get_weather", Description: "Weather for a city",
			InputSchema: []byte(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`)},
		{Name: "get_time"},
	}
	return req
}

// toolCalls returns the tool calls among items, with their arguments
// text.
func toolCalls(t *testing.T, items messages.Items) (calls []messages.ToolCall, args []string) {
	t.Helper()
	for _, it := range items {
		c, ok := it.(messages.ToolCall)
		if !ok {
			continue
		}
		var a string
		if err := json.Unmarshal(c.Arguments, &a); err != nil {
			t.Fatalf("arguments %s: want a JSON string: %v", c.Arguments, err)
		}
		calls, args = append(calls, c), append(args, a)
	}
	return calls, args
}

func TestStreamToolUse(t *testing.T) {
	input := `{"city": "Paris, Île-de-France"}`
	s := newServer(t, fakeapi.AnthropicToolUse("Let me check.", []fakeapi.AnthropicCall{
		{ID: "toolu_01A", Name: "get_weather", Input: input},
	}, 5))
	events, resp, err := run(t, s, toolRequest(false))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Outcome != (messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}) {
		t.Errorf("outcome %+v, want paused for tool use", resp.Outcome)
	}
	if len(resp.Items) != 3 {
		t.Fatalf("items %#v, want text, tool call, metadata", resp.Items)
	}
	if got := assistantText(resp.Items[:1]); got != "Let me check." {
		t.Errorf("first item %#v, want the text", resp.Items[0])
	}
	calls, args := toolCalls(t, resp.Items)
	if len(calls) != 1 || calls[0].CallID != "toolu_01A" || calls[0].Name != "get_weather" || args[0] != input {
		t.Fatalf("tool calls %+v (arguments %q)", calls, args)
	}
	if _, ok := resp.Items[1].(messages.ToolCall); !ok {
		t.Errorf("item 1 %#v, want the tool call", resp.Items[1])
	}
	// One item event, right after the block's stop event.
	var items []int
	for i, ev := range events {
		if ev.Kind == providers.EventItem {
			items = append(items, i)
			if ev.Type != anthropic.EventBlockDone || ev.Index != 1 || ev.Item == nil {
				t.Errorf("item event %+v", ev)
			}
			if events[i-1].Type != "content_block_stop" || events[i-1].Index != 1 {
				t.Errorf("item event follows %s %d, want content_block_stop 1", events[i-1].Type, events[i-1].Index)
			}
			if it, err := messages.UnmarshalItem(ev.Raw); err != nil || it.(messages.ToolCall).CallID != "toolu_01A" {
				t.Errorf("item event raw %s: %v", ev.Raw, err)
			}
		}
	}
	if len(items) != 1 {
		t.Errorf("got %d item events, want 1", len(items))
	}

	b := body(t, s)
	choice, _ := b["tool_choice"].(map[string]any)
	if choice["type"] != "auto" || choice["disable_parallel_tool_use"] != true {
		t.Errorf("tool_choice %v, want auto with parallel use disabled", b["tool_choice"])
	}
	tools, _ := b["tools"].([]any)
	if len(tools) != 2 {
		t.Fatalf("tools %v", b["tools"])
	}
	weather, timeTool := tools[0].(map[string]any), tools[1].(map[string]any)
	schema, _ := weather["input_schema"].(map[string]any)
	if weather["name"] != "get_weather" || weather["description"] != "Weather for a city" || schema["required"] == nil {
		t.Errorf("tool %v", weather)
	}
	if s, _ := timeTool["input_schema"].(map[string]any); timeTool["name"] != "get_time" || len(s) != 1 || s["type"] != "object" {
		t.Errorf("tool without a schema %v, want input_schema {\"type\":\"object\"}", timeTool)
	}
	if _, ok := timeTool["description"]; ok {
		t.Errorf("empty description sent: %v", timeTool)
	}
}

func TestStreamParallelToolUse(t *testing.T) {
	s := newServer(t, fakeapi.AnthropicToolUse("", []fakeapi.AnthropicCall{
		{ID: "toolu_1", Name: "get_weather", Input: `{"city":"Oslo"}`},
		{ID: "toolu_2", Name: "get_time", Input: ""},
	}, 3))
	events, resp, err := run(t, s, toolRequest(true))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	calls, args := toolCalls(t, resp.Items)
	if len(calls) != 2 || calls[0].CallID != "toolu_1" || calls[1].CallID != "toolu_2" ||
		args[0] != `{"city":"Oslo"}` || args[1] != "{}" {
		t.Errorf("tool calls %+v, arguments %q", calls, args)
	}
	var itemIdx []int
	for _, ev := range events {
		if ev.Kind == providers.EventItem {
			itemIdx = append(itemIdx, ev.Index)
		}
	}
	if fmt.Sprint(itemIdx) != "[0 1]" {
		t.Errorf("item events at blocks %v, want [0 1]", itemIdx)
	}
	if d := deltas(events); len(d) != 0 {
		t.Errorf("text deltas %q from tool input", d)
	}
	if choice, _ := body(t, s)["tool_choice"].(map[string]any); choice["disable_parallel_tool_use"] != false {
		t.Errorf("tool_choice %v, want parallel use allowed", choice)
	}
}

// Every stop reason maps to its outcome; the text is kept whatever the
// outcome.
func TestStreamStopReasons(t *testing.T) {
	cases := []struct {
		stop string
		want messages.StepOutcome
	}{
		{"end_turn", messages.StepOutcome{Kind: messages.OutcomeCompleted}},
		{"stop_sequence", messages.StepOutcome{Kind: messages.OutcomeCompleted}},
		{"max_tokens", messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}},
		{"tool_use", messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}},
		{"pause_turn", messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "pause_turn"}},
		{"refusal", messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "refusal"}},
		{"model_context_window_exceeded", messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "context_window"}},
		{"brand_new_reason", messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "brand_new_reason"}},
	}
	for _, c := range cases {
		t.Run(c.stop, func(t *testing.T) {
			s := newServer(t, fakeapi.AnthropicText([]string{"Once upon", " a time"}, c.stop))
			_, resp, err := run(t, s, basicRequest())
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if resp.Outcome != c.want {
				t.Errorf("stop reason %s: outcome %+v, want %+v", c.stop, resp.Outcome, c.want)
			}
			if got := assistantText(resp.Items); got != "Once upon a time" {
				t.Errorf("text %q", got)
			}
		})
	}
}

// Unknown event types are passed on and ignored; thinking blocks become
// reasoning items holding the whole block; blocks of other types become
// unknown items, server tool input filled in.
func TestStreamUnknownShapes(t *testing.T) {
	reply := fakeapi.NewAnthropicStream().
		Thinking("EqQBCgIYAhIM", "Let me ", "think <fast> & well.").
		Block(`{"type":"redacted_thinking","data":"EmwKAhgBEgwbs"}`).
		Event("content_block_stop", `{"type":"content_block_stop","index":1}`). // again: no second item
		Event("content_block_shimmer", `{"type":"content_block_shimmer","index":1,"glow":true}`).
		Block(`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}`,
			`{"type":"input_json_delta","partial_json":"{\"query\":"}`, `{"type":"input_json_delta","partial_json":"\"go\"}"}`).
		Block(`{"type":"hologram","id":"h_1","payload":{"x":[1,2]}}`, `{"type":"hologram_delta","beam":1}`).
		Event("ping", `{"type":"ping"}`).
		Text("Done", ".").
		Event("future_event", `{"type":"future_event","data":{"n":1}}`).
		Stop("end_turn")
	s := newServer(t, reply)
	events, resp, err := run(t, s, basicRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Outcome.Kind != messages.OutcomeCompleted {
		t.Errorf("outcome %+v", resp.Outcome)
	}
	if len(resp.Items) != 6 {
		t.Fatalf("items %#v, want 2 reasoning, 2 unknown, text, metadata", resp.Items)
	}
	var thinking struct{ Type, Thinking, Signature string }
	r, ok := resp.Items[0].(messages.ReasoningItem)
	if !ok || json.Unmarshal(r.Raw, &thinking) != nil ||
		thinking != (struct{ Type, Thinking, Signature string }{"thinking", "Let me think <fast> & well.", "EqQBCgIYAhIM"}) ||
		!strings.Contains(string(r.Raw), "<fast> &") {
		t.Errorf("item 0 %#v, want the thinking block", resp.Items[0])
	}
	if r, ok := resp.Items[1].(messages.ReasoningItem); !ok || string(r.Raw) != `{"data":"EmwKAhgBEgwbs","type":"redacted_thinking"}` {
		t.Errorf("item 1 %#v, want the redacted thinking block as it came", resp.Items[1])
	}
	srv, ok := resp.Items[2].(messages.UnknownItem)
	var st struct {
		Type  string
		Input struct{ Query string }
	}
	if !ok || srv.Provider != "anthropic" || json.Unmarshal(srv.Raw, &st) != nil || st.Type != "server_tool_use" || st.Input.Query != "go" {
		t.Errorf("item 2 %#v, want the server tool use with its input", resp.Items[2])
	}
	if u, ok := resp.Items[3].(messages.UnknownItem); !ok || !strings.Contains(string(u.Raw), `"payload":{"x":[1,2]}`) {
		t.Errorf("item 3 %#v, want the hologram block", resp.Items[3])
	}
	if got := assistantText(resp.Items); got != "Done." {
		t.Errorf("text %q", got)
	}
	if _, err := resp.Items.MarshalJSON(); err != nil {
		t.Errorf("items do not encode: %v", err)
	}
	seen := map[string]int{}
	var itemEvents int
	for _, ev := range events {
		seen[ev.Type]++
		if known := ev.Type != "content_block_shimmer" && ev.Type != "future_event"; ev.Unhandled == known {
			t.Errorf("event %s: Unhandled %v", ev.Type, ev.Unhandled)
		}
		if ev.Kind == providers.EventItem {
			itemEvents++
		}
	}
	if seen["content_block_shimmer"] != 1 || seen["future_event"] != 1 {
		t.Errorf("event types %v: unknown events must be passed on", seen)
	}
	if itemEvents != 4 {
		t.Errorf("got %d item events, want 4 (the thinking and the unknown blocks, once each)", itemEvents)
	}
	if d := strings.Join(deltas(events), ""); d != "Done." {
		t.Errorf("text deltas %q: thinking or unknown blocks shown", d)
	}
}

// A stream cut off before message_stop fails retryably, keeping the text
// that arrived.
func TestStreamCutOff(t *testing.T) {
	partial := func() *fakeapi.AnthropicStream {
		return fakeapi.NewAnthropicStream().Text("Partial ", "answer")
	}
	withoutStop := partial().Events()
	withoutStop = withoutStop[:len(withoutStop)-1] // no content_block_stop either
	cases := map[string]fakeapi.Reply{
		"dropped connection":   partial().Cut(),
		"clean end":            {Events: withoutStop},
		"stop without reason":  {Events: append(partial().Events(), fakeapi.Event{Name: "message_stop", Data: `{"type":"message_stop"}`})},
		"tool input cut short": fakeapi.NewAnthropicStream().Text("Partial answer").Block(`{"type":"tool_use","id":"toolu_9","name":"grep","input":{}}`, `{"type":"input_json_delta","partial_json":"{\"q\":\"x"}`).Cut(),
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, reply)
			_, resp, err := run(t, s, basicRequest())
			pe := providerError(t, err)
			if !pe.Retryable || pe.Provider != "anthropic" {
				t.Errorf("error %+v, want retryable", pe)
			}
			if got := assistantText(resp.Items); got != "Partial answer" {
				t.Errorf("partial text %q", got)
			}
			if resp.Outcome.Kind != messages.OutcomeFailed || resp.Outcome.Code == "" {
				t.Errorf("outcome %+v, want failed with a code", resp.Outcome)
			}
			if len(resp.RawRequest) == 0 || !json.Valid(resp.RawResponse) {
				t.Errorf("raw request %q, raw response %q", resp.RawRequest, resp.RawResponse)
			}
		})
	}
}

func TestStreamErrorEvent(t *testing.T) {
	cases := []struct {
		errType   string
		retryable bool
	}{
		{"overloaded_error", true},
		{"api_error", true},
		{"invalid_request_error", false},
	}
	for _, c := range cases {
		t.Run(c.errType, func(t *testing.T) {
			s := newServer(t, fakeapi.NewAnthropicStream().Text("Half").Error(c.errType, "Something happened"))
			_, resp, err := run(t, s, basicRequest())
			pe := providerError(t, err)
			if pe.Retryable != c.retryable || pe.Code != c.errType || pe.Message != "Something happened" || pe.ContextTooLarge {
				t.Errorf("error %+v, want %s retryable=%v", pe, c.errType, c.retryable)
			}
			if got := assistantText(resp.Items); got != "Half" {
				t.Errorf("partial text %q", got)
			}
			if resp.Outcome.Kind != messages.OutcomeFailed || resp.Outcome.Code != c.errType {
				t.Errorf("outcome %+v", resp.Outcome)
			}
		})
	}
}

func TestStreamRateLimited(t *testing.T) {
	s := newServer(t, fakeapi.AnthropicError(429, "rate_limit_error",
		"Number of request tokens has exceeded your per-minute rate limit", http.Header{"Retry-After": {"7"}}))
	events, resp, err := run(t, s, basicRequest())
	pe := providerError(t, err)
	if pe.StatusCode != 429 || !pe.Retryable || pe.RetryAfter != 7*time.Second || pe.Code != "rate_limit_error" || pe.Provider != "anthropic" {
		t.Errorf("error %+v", pe)
	}
	if !strings.Contains(pe.Message, "per-minute rate limit") {
		t.Errorf("message %q", pe.Message)
	}
	if len(events) != 0 {
		t.Errorf("got %d events before the error", len(events))
	}
	if resp.Outcome.Kind != messages.OutcomeFailed || resp.Outcome.Code != "rate_limit_error" {
		t.Errorf("outcome %+v", resp.Outcome)
	}
	for _, leak := range []string{err.Error(), string(resp.RawRequest), resp.Outcome.Message, fmt.Sprint(pe.Err)} {
		if strings.Contains(leak, testKey) {
			t.Errorf("the key leaked: %s", leak)
		}
	}
	if n := s.Count(); n != 1 {
		t.Errorf("server got %d requests, want 1 (no SDK retries)", n)
	}
}

func TestStreamRetryAfter(t *testing.T) {
	cases := []struct {
		name     string
		header   http.Header
		min, max time.Duration
	}{
		{"milliseconds", http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"date", http.Header{"Retry-After": {time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)}}, 5 * time.Second, 11 * time.Second},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, fakeapi.AnthropicError(529, "overloaded_error", "Overloaded", c.header))
			_, _, err := run(t, s, basicRequest())
			pe := providerError(t, err)
			if pe.StatusCode != 529 || !pe.Retryable || pe.RetryAfter < c.min || pe.RetryAfter > c.max {
				t.Errorf("error %+v, want retry after %v..%v", pe, c.min, c.max)
			}
		})
	}
}

func TestStreamServerError(t *testing.T) {
	cases := map[string]fakeapi.Reply{
		"api_error":     fakeapi.AnthropicError(500, "api_error", "Internal server error", nil),
		"plain body":    {Status: 502, Body: "Bad Gateway"},
		"overloaded":    fakeapi.AnthropicError(529, "overloaded_error", "Overloaded", nil),
		"should retry":  fakeapi.AnthropicError(409, "conflict_error", "x", http.Header{"X-Should-Retry": {"true"}}),
		"told no retry": fakeapi.AnthropicError(503, "api_error", "x", http.Header{"X-Should-Retry": {"false"}}),
	}
	want := map[string]bool{"api_error": true, "plain body": true, "overloaded": true, "should retry": true, "told no retry": false}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, reply)
			_, resp, err := run(t, s, basicRequest())
			pe := providerError(t, err)
			if pe.StatusCode != reply.Status || pe.Retryable != want[name] || pe.ContextTooLarge || pe.Message == "" {
				t.Errorf("error %+v, want status %d retryable=%v", pe, reply.Status, want[name])
			}
			if providers.IsRetryable(err) != want[name] {
				t.Errorf("IsRetryable(%v) = %v", err, !want[name])
			}
			if resp.Outcome.Kind != messages.OutcomeFailed || resp.Outcome.Code == "" {
				t.Errorf("outcome %+v", resp.Outcome)
			}
		})
	}
}

func TestStreamContextTooLarge(t *testing.T) {
	cases := []struct {
		name  string
		reply fakeapi.Reply
		large bool
	}{
		{"prompt too long", fakeapi.AnthropicError(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", nil), true},
		{"exceeds context limit", fakeapi.AnthropicError(400, "invalid_request_error",
			"input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, decrease input length or `max_tokens` and try again", nil), true},
		{"request too large", fakeapi.AnthropicError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", nil), true},
		{"other invalid request", fakeapi.AnthropicError(400, "invalid_request_error", "messages.1.content: Field required", nil), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.reply)
			_, _, err := run(t, s, basicRequest())
			pe := providerError(t, err)
			if pe.StatusCode != c.reply.Status || pe.Retryable || pe.ContextTooLarge != c.large {
				t.Errorf("error %+v, want context too large = %v", pe, c.large)
			}
		})
	}
}

// Cancelling while events are arriving stops the stream at once.
func TestStreamCancelled(t *testing.T) {
	s := newServer(t, fakeapi.AnthropicText([]string{"Hel", "lo", " there"}, "end_turn"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := newProvider(s.URL).Stream(ctx, basicRequest(), func(ev providers.Event) error {
		if ev.Kind == providers.EventTextDelta {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if resp.Outcome.Kind != messages.OutcomeCancelled {
		t.Errorf("outcome %+v, want cancelled", resp.Outcome)
	}
	if got := assistantText(resp.Items); got != "Hel" {
		t.Errorf("text %q, want what arrived before the cancel", got)
	}
}

// Cancelling while the server is silent ends the wait.
func TestStreamCancelledWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range fakeapi.NewAnthropicStream().Text("Hel").Events()[:4] {
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Name, ev.Data)
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events int
	resp, err := newProvider(srv.URL).Stream(ctx, basicRequest(), func(ev providers.Event) error {
		events++
		if ev.Kind == providers.EventTextDelta {
			go cancel() // the stream is then blocked reading
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || resp.Outcome.Kind != messages.OutcomeCancelled {
		t.Fatalf("err %v, outcome %+v: want cancelled", err, resp.Outcome)
	}
	if got := assistantText(resp.Items); got != "Hel" {
		t.Errorf("text %q", got)
	}
}

func TestStreamCancelledBeforeStart(t *testing.T) {
	s := newServer(t, fakeapi.AnthropicText([]string{"x"}, "end_turn"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err := newProvider(s.URL).Stream(ctx, basicRequest(), func(providers.Event) error { return nil })
	if !errors.Is(err, context.Canceled) || resp.Outcome.Kind != messages.OutcomeCancelled {
		t.Errorf("err %v, outcome %+v", err, resp.Outcome)
	}
	if s.Count() != 0 {
		t.Errorf("a request was sent after the cancel")
	}
}

func TestStreamEmitError(t *testing.T) {
	s := newServer(t, fakeapi.AnthropicText([]string{"Hi"}, "end_turn"))
	boom := errors.New("boom")
	resp, err := newProvider(s.URL).Stream(context.Background(), basicRequest(), func(providers.Event) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if resp.Outcome.Kind != messages.OutcomeFailed || resp.Outcome.Code != "emit" {
		t.Errorf("outcome %+v", resp.Outcome)
	}
}

func TestProviderBasics(t *testing.T) {
	p := anthropic.New(anthropic.Options{APIKey: testKey})
	if p.Name() != "anthropic" || p.ContextLimit("claude-test") != anthropic.DefaultContextLimit || anthropic.DefaultContextLimit != 200000 {
		t.Errorf("name %q, limit %d", p.Name(), p.ContextLimit("x"))
	}
	p = anthropic.New(anthropic.Options{Name: "claude", ContextLimit: 1000})
	if p.Name() != "claude" || p.ContextLimit("m") != 1000 {
		t.Errorf("name %q, limit %d", p.Name(), p.ContextLimit("m"))
	}
	small, err := p.EstimatePromptTokens(basicRequest())
	if err != nil || small <= 0 {
		t.Fatalf("estimate %d, %v", small, err)
	}
	req := basicRequest()
	req.Context.Summary = strings.Repeat("word ", 400)
	big, err := p.EstimatePromptTokens(req)
	if err != nil || big < small+400 {
		t.Errorf("estimate %d (small %d), %v", big, small, err)
	}
	withTools, err := p.EstimatePromptTokens(toolRequest(false))
	if err != nil || withTools <= small {
		t.Errorf("estimate with tools %d (without %d), %v", withTools, small, err)
	}
	req.Context.ToolMode = messages.ToolsEnabled
	req.Context.Tools = []messages.Tool{{Name: "x", InputSchema: []byte("[")}}
	if _, err := p.EstimatePromptTokens(req); err == nil {
		t.Errorf("estimate of a request with a bad schema did not fail")
	}
}

// The environment's ANTHROPIC_* settings are not read: Options is the
// only configuration.
func TestIgnoresEnvironment(t *testing.T) {
	s := newServer(t, fakeapi.AnthropicText([]string{"ok"}, "end_turn"))
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "env-token")
	if _, _, err := run(t, s, basicRequest()); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if h := s.Requests()[0].Header; h.Get("Authorization") != "" || h.Get("X-Api-Key") != testKey {
		t.Errorf("headers %v", h)
	}
}

func BenchmarkStream(b *testing.B) {
	for _, n := range []int{100, 2000} {
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			s := newServer(b, fakeapi.AnthropicTextN(n, "token "))
			p := newProvider(s.URL)
			req := basicRequest()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Stream(context.Background(), req, func(providers.Event) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
		})
	}
}

// A citations_delta (decoded by the SDK's union) and the text deltas
// around it (decoded on their own) make one text block with its
// citation, in order.
func TestStreamCitations(t *testing.T) {
	citation := `{"type":"char_location","cited_text":"Go 1.27","document_index":0,"document_title":"notes","start_char_index":0,"end_char_index":7}`
	reply := fakeapi.NewAnthropicStream().
		Block(`{"type":"text","text":""}`,
			`{"type":"text_delta","text":"Per the notes, "}`,
			`{"type":"citations_delta","citation":`+citation+`}`,
			`{"type":"text_delta","text":"it is Go 1.27."}`).
		Stop("end_turn")
	_, resp, err := run(t, newServer(t, reply), basicRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var text []messages.Text
	for _, it := range resp.Items {
		if m, ok := it.(messages.AssistantMessage); ok {
			for _, b := range m.Blocks {
				if tb, ok := b.(messages.Text); ok {
					text = append(text, tb)
				}
			}
		}
	}
	if len(text) != 1 || text[0].Text != "Per the notes, it is Go 1.27." || len(text[0].Annotations) != 1 ||
		!strings.Contains(string(text[0].Annotations[0]), `"cited_text":"Go 1.27"`) {
		t.Fatalf("text blocks %+v, want one with the text and its citation", text)
	}
}

// Each upstream error is classified by what it means to the runtime's
// client (providers.ErrorKind), in a status or in a stream's error event.
func TestStreamErrorKinds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		reply fakeapi.Reply
		want  providers.ErrorKind
	}{
		{"429", fakeapi.AnthropicError(429, "rate_limit_error", "slow down", http.Header{"Retry-After": {"7"}}), providers.KindRateLimited},
		{"400", fakeapi.AnthropicError(400, "invalid_request_error", "max_tokens: too large", nil), providers.KindRejected},
		{"401", fakeapi.AnthropicError(401, "authentication_error", "invalid x-api-key", nil), providers.KindAuth},
		{"403", fakeapi.AnthropicError(403, "permission_error", "no access", nil), providers.KindAuth},
		{"404", fakeapi.AnthropicError(404, "not_found_error", "model: claude-9", nil), providers.KindModelNotFound},
		{"500", fakeapi.AnthropicError(500, "api_error", "Internal server error", nil), providers.KindServer},
		{"529", fakeapi.AnthropicError(529, "overloaded_error", "Overloaded", nil), providers.KindOverloaded},
		{"event overloaded", fakeapi.NewAnthropicStream().Text("Half").Error("overloaded_error", "Overloaded"), providers.KindOverloaded},
		{"event rate limit", fakeapi.NewAnthropicStream().Error("rate_limit_error", "slow down"), providers.KindRateLimited},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := run(t, newServer(t, c.reply), basicRequest())
			if pe := providerError(t, err); pe.Kind != c.want {
				t.Errorf("Kind = %v, want %v (%+v)", pe.Kind, c.want, pe)
			}
		})
	}
}
