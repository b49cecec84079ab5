package openai_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// responses runs basicRequest, changed by mutate, against a Responses
// server scripted with reply.
func responses(t *testing.T, reply fakeapi.Reply, mutate func(*providers.Request)) (*fakeapi.Server, []providers.Event, providers.Response, error) {
	t.Helper()
	srv := newServer(t, reply)
	req := basicRequest()
	if mutate != nil {
		mutate(&req)
	}
	events, resp, err := run(t, provider(srv, openai.APIResponses), req)
	return srv, events, resp, err
}

func withTools(r *providers.Request) {
	r.Context.ToolMode = messages.ToolsEnabled
	r.Context.Tools = []messages.Tool{{Name: "get_weather", Description: "Weather for a city",
		InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}
}

var (
	completed = messages.StepOutcome{Kind: messages.OutcomeCompleted}
	paused    = messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}
)

// deltas returns the text deltas of events as "index:text".
func deltas(events []providers.Event) []string {
	var out []string
	for _, ev := range events {
		if ev.Kind == providers.EventTextDelta {
			out = append(out, strings.Join([]string{itoa(ev.Index), ev.Text}, ":"))
		}
	}
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestResponsesText(t *testing.T) {
	reply := fakeapi.ResponsesText("Hello", ", ", "world!")
	srv, events, resp, err := responses(t, reply, nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if len(events) != len(reply.Events) {
		t.Errorf("got %d events, want %d (one per SSE event)", len(events), len(reply.Events))
	}
	for i, ev := range events {
		if ev.Type != reply.Events[i].Name {
			t.Errorf("event %d type %q, want %q", i, ev.Type, reply.Events[i].Name)
		}
		if !json.Valid(ev.Raw) || !bytes.Contains(ev.Raw, []byte(`"type":"`+ev.Type+`"`)) {
			t.Errorf("event %d raw %s", i, ev.Raw)
		}
		if ev.Kind != providers.EventTextDelta && ev.Kind != providers.EventOther {
			t.Errorf("event %d kind %v", i, ev.Kind)
		}
	}
	if got := strings.Join(deltas(events), "|"); got != "0:Hello|0:, |0:world!" {
		t.Errorf("deltas %q", got)
	}
	want := messages.Items{
		messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "Hello, world!"}}},
		messages.Metadata{Key: "response_id", Value: fakeapi.OpenAIResponseID},
	}
	if !reflect.DeepEqual(resp.Items, want) {
		t.Errorf("items %#v, want %#v", resp.Items, want)
	}
	if resp.Outcome != completed {
		t.Errorf("outcome %+v, want completed", resp.Outcome)
	}
	if resp.Usage != (providers.Usage{InputTokens: fakeapi.OpenAIInputTokens, OutputTokens: 3}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	sent, _ := onlyRequest(t, srv)
	if sent.Path != "/v1/responses" || sent.Header.Get("Authorization") != "Bearer test-key" {
		t.Errorf("request %s with Authorization %q", sent.Path, sent.Header.Get("Authorization"))
	}
	if !bytes.Equal(resp.RawRequest, sent.Body) {
		t.Errorf("RawRequest\n%s\nwant the body sent\n%s", resp.RawRequest, sent.Body)
	}
	var final struct {
		ID     string            `json:"id"`
		Status string            `json:"status"`
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(resp.RawResponse, &final); err != nil || final.Status != "completed" || final.ID != fakeapi.OpenAIResponseID || len(final.Output) != 1 {
		t.Errorf("RawResponse %s (%v), want the completed response", resp.RawResponse, err)
	}
	if _, err := resp.Items.MarshalJSON(); err != nil {
		t.Errorf("items do not encode: %v", err)
	}
}

func TestResponsesLongOutput(t *testing.T) {
	const n = 3000
	_, events, resp, err := responses(t, fakeapi.ResponsesTextN(n, "ab "), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got := len(deltas(events)); got != n {
		t.Errorf("got %d deltas, want %d", got, n)
	}
	if got := assistantText(resp.Items); got != strings.Repeat("ab ", n) {
		t.Errorf("text of %d bytes, want %d", len(got), 3*n)
	}
}

// Text of different content parts and output items is kept apart: in
// the delta indexes and in the items.
func TestResponsesPartsKeptApart(t *testing.T) {
	reply := fakeapi.NewResponsesStream().
		Message(fakeapi.OpenAIPart{Deltas: []string{"first ", "part"}}, fakeapi.OpenAIPart{Deltas: []string{"second part"}}).
		Text("second ", "item").
		Completed()
	_, events, resp, err := responses(t, reply, nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got := strings.Join(deltas(events), "|"); got != "0:first |0:part|1:second part|1000:second |1000:item" {
		t.Errorf("deltas %q", got)
	}
	want := messages.Items{
		messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "first part"}, messages.Text{Text: "second part"}}},
		messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "second item"}}},
		messages.Metadata{Key: "response_id", Value: fakeapi.OpenAIResponseID},
	}
	if !reflect.DeepEqual(resp.Items, want) {
		t.Errorf("items %#v\nwant %#v", resp.Items, want)
	}
}

func TestResponsesToolCall(t *testing.T) {
	reply := fakeapi.NewResponsesStream().
		Text("Let me check.").
		FunctionCalls(fakeapi.OpenAIToolCall{ID: "call_abc", Name: "get_weather", Args: []string{`{"ci`, `ty":"Pa`, `ris"}`}}).
		Completed()
	_, events, resp, err := responses(t, reply, withTools)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Outcome != paused {
		t.Errorf("outcome %+v, want paused for tool use", resp.Outcome)
	}
	call := messages.ToolCall{CallID: "call_abc", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Paris\"}"`)}
	want := messages.Items{
		messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "Let me check."}}},
		call,
		messages.Metadata{Key: "response_id", Value: fakeapi.OpenAIResponseID},
	}
	if !reflect.DeepEqual(resp.Items, want) {
		t.Errorf("items %#v\nwant %#v", resp.Items, want)
	}
	var items []providers.Event
	for _, ev := range events {
		if ev.Kind == providers.EventItem {
			items = append(items, ev)
		}
	}
	if len(items) != 1 || !reflect.DeepEqual(items[0].Item, call) || items[0].Type != "response.output_item.done" || items[0].Index != 1 {
		t.Errorf("item events %+v, want the call once", items)
	}
	if got := providers.ArgumentsText(call.Arguments); got != `{"city":"Paris"}` {
		t.Errorf("ArgumentsText = %q", got)
	}
}

// The arguments are accumulated across deltas, and the done event's text
// wins over them.
func TestResponsesToolCallArguments(t *testing.T) {
	added := `{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"grep"}`
	start := func() *fakeapi.ResponsesStream {
		return fakeapi.NewResponsesStream().
			Event("response.output_item.added", "output_index", 0, "item", json.RawMessage(added)).
			Event("response.function_call_arguments.delta", "item_id", "fc_1", "output_index", 0, "delta", `{"q":`).
			Event("response.function_call_arguments.delta", "item_id", "fc_1", "output_index", 0, "delta", `"x"`)
	}
	cases := []struct {
		name  string
		reply fakeapi.Reply
		args  string
	}{
		{"cut after deltas", start().Cut(), `{"q":"x"`},
		{"cut after done", start().Event("response.function_call_arguments.done", "item_id", "fc_1", "output_index", 0, "arguments", `{"q":"x"}`).Cut(), `{"q":"x"}`},
		{"item done wins", start().
			Event("response.function_call_arguments.done", "item_id", "fc_1", "output_index", 0, "arguments", `{"q":"x"}`).
			Event("response.output_item.done", "output_index", 0, "item", json.RawMessage(`{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"q\":\"final\"}","call_id":"call_1","name":"grep"}`)).
			Cut(), `{"q":"final"}`},
		{"completed response fills in", start().Event("response.completed", "response", json.RawMessage(
			`{"id":"resp_2","status":"completed","output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"q\":\"z\"}","call_id":"call_1","name":"grep"}]}`)).Reply(),
			`{"q":"z"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, resp, _ := responses(t, c.reply, withTools)
			if len(resp.Items) < 1 {
				t.Fatalf("items %#v", resp.Items)
			}
			call, ok := resp.Items[0].(messages.ToolCall)
			if !ok || call.CallID != "call_1" || call.Name != "grep" || providers.ArgumentsText(call.Arguments) != c.args {
				t.Errorf("item %#v, want grep with arguments %s", resp.Items[0], c.args)
			}
		})
	}
}

func TestResponsesParallelToolCalls(t *testing.T) {
	reply := fakeapi.ResponsesFunctionCalls(
		fakeapi.OpenAIToolCall{ID: "call_a", Name: "get_weather", Args: []string{`{"city":`, `"Paris"}`}},
		fakeapi.OpenAIToolCall{ID: "call_b", Name: "get_weather", Args: []string{`{"city":"Oslo"}`}},
	)
	srv, _, resp, err := responses(t, reply, func(r *providers.Request) { withTools(r); r.ParallelToolCalls = true })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := messages.Items{
		messages.ToolCall{CallID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Paris\"}"`)},
		messages.ToolCall{CallID: "call_b", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Oslo\"}"`)},
		messages.Metadata{Key: "response_id", Value: fakeapi.OpenAIResponseID},
	}
	if !reflect.DeepEqual(resp.Items, want) || resp.Outcome != paused {
		t.Errorf("items %#v, outcome %+v", resp.Items, resp.Outcome)
	}
	if _, body := onlyRequest(t, srv); body["parallel_tool_calls"] != true {
		t.Errorf("parallel_tool_calls = %v, want true", body["parallel_tool_calls"])
	}
}

func TestResponsesIncomplete(t *testing.T) {
	for _, reason := range []string{"max_output_tokens", "content_filter", "max_messages", ""} {
		t.Run("reason="+reason, func(t *testing.T) {
			_, _, resp, err := responses(t, fakeapi.ResponsesIncomplete(reason, "Once upon", " a"), nil)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			want := reason
			if want == "" {
				want = "unknown"
			}
			if resp.Outcome != (messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: want}) {
				t.Errorf("outcome %+v, want incomplete for %q", resp.Outcome, want)
			}
			if got := assistantText(resp.Items); got != "Once upon a" {
				t.Errorf("text %q", got)
			}
		})
	}
	// A response cut short while calling a tool is incomplete, not paused.
	reply := fakeapi.NewResponsesStream().FunctionCalls(fakeapi.OpenAIToolCall{ID: "c", Name: "f", Args: []string{`{"a":`}}).Incomplete("max_output_tokens")
	_, _, resp, _ := responses(t, reply, withTools)
	if resp.Outcome.Kind != messages.OutcomeIncomplete {
		t.Errorf("outcome %+v, want incomplete", resp.Outcome)
	}
}

// A refusal is kept as the assistant's text; the outcome stays
// Completed.
func TestResponsesRefusal(t *testing.T) {
	_, events, resp, err := responses(t, fakeapi.ResponsesRefusal("I can't help", " with that."), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got := strings.Join(deltas(events), "|"); got != "0:I can't help|0: with that." {
		t.Errorf("deltas %q", got)
	}
	if got := assistantText(resp.Items); got != "I can't help with that." || resp.Outcome != completed {
		t.Errorf("text %q, outcome %+v", got, resp.Outcome)
	}
}

// Events and items of kinds the normalizer does not know are emitted and
// kept, never failing the step.
func TestResponsesUnknownEventsAndItems(t *testing.T) {
	webSearch := `{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go"}}`
	reply := fakeapi.NewResponsesStream().
		Raw("response.future_event", `{"type":"response.future_event","sequence_number":2,"payload":{"x":[1]}}`).
		Raw("", `{"sequence_number":3}`).
		Reasoning("thinking about it", "gAAAAenc").
		Reasoning("no encrypted content", "").
		Item(webSearch).
		Item(`{"id":"msg_9","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"see","annotations":[{"type":"url_citation","url":"https://go.dev"}]},{"type":"output_audio","data":"AAA"}]}`).
		Event("response.output_text.annotation.added", "item_id", "msg_9", "output_index", 3, "content_index", 0, "annotation_index", 0, "annotation", json.RawMessage(`{"type":"url_citation"}`)).
		Completed()
	_, events, resp, err := responses(t, reply, nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if events[2].Type != "response.future_event" || events[2].Kind != providers.EventOther || !events[2].Unhandled ||
		events[3].Type != "unknown" || !events[3].Unhandled || events[0].Unhandled {
		t.Errorf("unknown events %+v / %+v", events[2], events[3])
	}
	if len(resp.Items) != 5 {
		t.Fatalf("items %#v, want 5", resp.Items)
	}
	r0, ok := resp.Items[0].(messages.ReasoningItem)
	if !ok || r0.EncryptedContent == nil || *r0.EncryptedContent != "gAAAAenc" || !bytes.Contains(r0.Raw, []byte(`"thinking about it"`)) {
		t.Errorf("item 0 %#v, want the reasoning with its encrypted content", resp.Items[0])
	}
	if r1, ok := resp.Items[1].(messages.ReasoningItem); !ok || r1.EncryptedContent != nil {
		t.Errorf("item 1 %#v, want reasoning without encrypted content", resp.Items[1])
	}
	if u, ok := resp.Items[2].(messages.UnknownItem); !ok || u.Provider != "openai" || string(u.Raw) != webSearch {
		t.Errorf("item 2 %#v, want the web search call kept", resp.Items[2])
	}
	msg, ok := resp.Items[3].(messages.AssistantMessage)
	if !ok || len(msg.Blocks) != 2 {
		t.Fatalf("item 3 %#v", resp.Items[3])
	}
	if text, ok := msg.Blocks[0].(messages.Text); !ok || text.Text != "see" || len(text.Annotations) != 1 {
		t.Errorf("block 0 %#v, want text with its annotation", msg.Blocks[0])
	}
	if u, ok := msg.Blocks[1].(messages.Unknown); !ok || u.Provider != "openai" {
		t.Errorf("block 1 %#v, want an unknown part kept", msg.Blocks[1])
	}
	var itemEvents int
	for _, ev := range events {
		if ev.Kind == providers.EventItem {
			itemEvents++
		}
	}
	if itemEvents != 3 { // two reasoning items, the web search; not the message
		t.Errorf("got %d item events, want 3", itemEvents)
	}
	if resp.Outcome != completed {
		t.Errorf("outcome %+v", resp.Outcome)
	}
	if _, err := resp.Items.MarshalJSON(); err != nil {
		t.Errorf("items do not encode: %v", err)
	}
}

func TestResponsesCutOff(t *testing.T) {
	partial := fakeapi.NewResponsesStream().Text("Partial ", "answer")
	evs := partial.Events()
	for name, r := range map[string]fakeapi.Reply{
		"abort":         fakeapi.Reply{Events: evs[:6], Cut: true}, // the connection drops mid-body
		"clean end":     fakeapi.Reply{Events: evs[:6]},            // the body ends without a terminal event
		"after item":    partial.Reply(),                           // every item done, no terminal event
		"after garbage": fakeapi.Reply{Events: append(evs[:6:6], fakeapi.Event{Name: "response.output_text.delta", Data: "{oops"})},
	} {
		t.Run(name, func(t *testing.T) {
			_, events, resp, err := responses(t, r, nil)
			pe := providerError(t, err)
			if name == "after garbage" {
				if pe.Code != "bad_stream" || pe.Retryable {
					t.Errorf("error %+v, want a bad stream", pe)
				}
			} else if !pe.Retryable || pe.Code != "stream_incomplete" && pe.Code != "connection" {
				t.Errorf("error %+v, want retryable", pe)
			}
			if got := assistantText(resp.Items); got != "Partial answer" {
				t.Errorf("partial text %q", got)
			}
			if resp.Outcome.Kind != messages.OutcomeFailed {
				t.Errorf("outcome %+v, want failed", resp.Outcome)
			}
			if len(events) < 6 {
				t.Errorf("got %d events, want at least 6", len(events))
			}
			if !bytes.Contains(resp.RawResponse, []byte(`"status":"in_progress"`)) {
				t.Errorf("RawResponse %s, want the last response seen", resp.RawResponse)
			}
		})
	}
}

// A failed response and an error event fail the step with a typed error.
func TestResponsesFailed(t *testing.T) {
	cases := []struct {
		name      string
		reply     fakeapi.Reply
		code      string
		retryable bool
		tooLarge  bool
	}{
		{"server error", fakeapi.NewResponsesStream().Text("x").Failed("server_error", "The model failed."), "server_error", true, false},
		{"rate limit", fakeapi.NewResponsesStream().Failed("rate_limit_exceeded", "Slow down."), "rate_limit_exceeded", true, false},
		{"invalid prompt", fakeapi.NewResponsesStream().Failed("invalid_prompt", "Nope."), "invalid_prompt", false, false},
		{"context", fakeapi.NewResponsesStream().Failed("context_length_exceeded", "Too long."), "context_length_exceeded", false, true},
		{"error event", fakeapi.NewResponsesStream().Text("x").ErrorEvent("server_error", "Something went wrong."), "server_error", true, false},
		{"error event without code", fakeapi.NewResponsesStream().ErrorEvent("", "Bad."), "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, events, resp, err := responses(t, c.reply, nil)
			pe := providerError(t, err)
			if pe.Code != c.code || pe.Retryable != c.retryable || pe.ContextTooLarge != c.tooLarge || pe.Message == "" || pe.Provider != "openai" {
				t.Errorf("error %+v", pe)
			}
			wantCode := c.code
			if wantCode == "" {
				wantCode = "provider_error"
			}
			if resp.Outcome.Kind != messages.OutcomeFailed || resp.Outcome.Code != wantCode || !strings.Contains(resp.Outcome.Message, pe.Message) {
				t.Errorf("outcome %+v", resp.Outcome)
			}
			if len(events) != len(c.reply.Events) {
				t.Errorf("got %d events, want %d: the terminal one too", len(events), len(c.reply.Events))
			}
		})
	}
}

func TestResponsesRequestLayout(t *testing.T) {
	srv := newServer(t, fakeapi.ResponsesText("ok"))
	req := toolLoopRequest()
	if _, _, err := run(t, provider(srv, openai.APIResponses), req); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	_, body := onlyRequest(t, srv)
	if body["instructions"] != providers.SystemText(req.Context) {
		t.Errorf("instructions %q, want providers.SystemText", body["instructions"])
	}
	for key, want := range map[string]any{
		"model": "gpt-test", "stream": true, "store": false, "truncation": "disabled",
		"max_output_tokens": float64(256), "parallel_tool_calls": false,
	} {
		if body[key] != want {
			t.Errorf("%s = %v, want %v", key, body[key], want)
		}
	}
	if _, ok := body["include"]; ok {
		t.Errorf("include = %v, want none by default", body["include"])
	}
	tools := body["tools"].([]any)
	tool := tools[0].(map[string]any)
	if len(tools) != 1 || tool["type"] != "function" || tool["name"] != "grep" || tool["strict"] != false ||
		!reflect.DeepEqual(tool["parameters"], map[string]any{"type": "object", "properties": map[string]any{}}) {
		t.Errorf("tools %v", tools)
	}

	var layout []string
	for _, it := range body["input"].([]any) {
		it := it.(map[string]any)
		if _, ok := it["id"]; ok {
			t.Errorf("input item %v sent with an id", it)
		}
		switch typ, _ := it["type"].(string); typ {
		case "message":
			var text []string
			for _, c := range it["content"].([]any) {
				c := c.(map[string]any)
				text = append(text, c["type"].(string)+"="+c["text"].(string))
			}
			layout = append(layout, it["role"].(string)+":"+strings.Join(text, ","))
		case "function_call":
			layout = append(layout, "call:"+it["call_id"].(string)+":"+it["name"].(string)+":"+it["arguments"].(string))
		case "function_call_output":
			layout = append(layout, "output:"+it["call_id"].(string)+":"+it["output"].(string))
		case "reasoning":
			layout = append(layout, "reasoning:"+it["encrypted_content"].(string))
			if s, _ := it["summary"].([]any); len(s) != 1 {
				t.Errorf("reasoning summary %v", it["summary"])
			}
		default:
			raw, _ := json.Marshal(it)
			layout = append(layout, "raw:"+string(raw))
		}
	}
	want := []string{
		"user:input_text=w1",
		"assistant:output_text=w2",
		`call:call_w:ls:{"dir":"."}`,
		"output:call_w:a.go",
		"assistant:output_text=w3",
		"user:input_text=p1",
		"user:input_text=" + providers.MemoryText(req.Context) + "\n\nHi there",
		"reasoning:gAAAAenc",
		"assistant:output_text=Let me look.",
		`call:call_1:grep:{"q":"x"}`,
		`call:call_2:grep:{"q":"y"}`,
		`raw:{"status":"completed","type":"web_search_call"}`,
		"call:call_3:grep:{}",
		"output:call_1:3 matches",
		"output:call_2:error: timeout",
		"output:call_3:" + providers.MissingResultText,
	}
	if got := strings.Join(layout, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("input\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

// Store, truncation and include follow the options.
func TestResponsesRequestOptions(t *testing.T) {
	cases := []struct {
		opts    openai.Options
		store   bool
		trunc   string
		include bool
	}{
		{openai.Options{}, false, "disabled", false},
		{openai.Options{Store: true, Truncation: openai.TruncationAuto}, true, "auto", false},
		{openai.Options{EncryptedReasoning: true}, false, "disabled", true},
		{openai.Options{EncryptedReasoning: true, Store: true}, true, "disabled", false},
	}
	for _, c := range cases {
		srv := newServer(t, fakeapi.ResponsesText("ok"))
		opts := c.opts
		opts.BaseURL, opts.APIKey, opts.API = srv.URL+"/v1", "k", openai.APIResponses
		if _, _, err := run(t, openai.New(opts), basicRequest()); err != nil {
			t.Fatalf("%+v: Stream: %v", c.opts, err)
		}
		_, body := onlyRequest(t, srv)
		inc, hasInclude := body["include"]
		if body["store"] != c.store || body["truncation"] != c.trunc || hasInclude != c.include {
			t.Errorf("%+v: store %v, truncation %v, include %v", c.opts, body["store"], body["truncation"], inc)
		}
		if c.include && !reflect.DeepEqual(inc, []any{"reasoning.encrypted_content"}) {
			t.Errorf("include = %v", inc)
		}
	}
}

// Tools, and parallel_tool_calls with them, are sent only when the tool
// mode is enabled or parse_only.
func TestResponsesToolsOnlyWhenEnabled(t *testing.T) {
	for _, mode := range []messages.ToolMode{messages.ToolsDisabled, messages.ToolsParseOnly, messages.ToolsEnabled} {
		srv := newServer(t, fakeapi.ResponsesText("ok"))
		req := basicRequest()
		withTools(&req)
		req.Context.ToolMode = mode
		if _, _, err := run(t, provider(srv, openai.APIResponses), req); err != nil {
			t.Fatalf("%q: Stream: %v", mode, err)
		}
		_, body := onlyRequest(t, srv)
		_, hasTools := body["tools"]
		_, hasParallel := body["parallel_tool_calls"]
		want := mode != messages.ToolsDisabled
		if hasTools != want || hasParallel != want {
			t.Errorf("mode %q: tools sent %v, parallel_tool_calls sent %v; want %v", mode, hasTools, hasParallel, want)
		}
	}
}

// Items a response gives go back in the next step's request as the
// API gave them: the tool loop round trip.
func TestResponsesToolLoopRoundTrip(t *testing.T) {
	first := fakeapi.NewResponsesStream().
		Reasoning("plan", "gAAAAenc").
		Text("Checking.").
		FunctionCalls(fakeapi.OpenAIToolCall{ID: "call_a", Name: "get_weather", Args: []string{`{"city":`, `"Paris"}`}}).
		Completed()
	srv := newServer(t, first, fakeapi.ResponsesText("Sunny."))
	p := provider(srv, openai.APIResponses)
	req := basicRequest()
	withTools(&req)
	_, resp, err := run(t, p, req)
	if err != nil || resp.Outcome != paused {
		t.Fatalf("first step: %+v, %v", resp.Outcome, err)
	}
	req.Context.Continuation = append(resp.Items, messages.ToolOutput{CallID: "call_a", Output: json.RawMessage(`"18C, sunny"`)})
	if _, resp, err = run(t, p, req); err != nil || resp.Outcome != completed {
		t.Fatalf("second step: %+v, %v", resp.Outcome, err)
	}
	var body struct {
		Input []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(srv.Requests()[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range body.Input {
		types = append(types, it["type"].(string))
	}
	if got := strings.Join(types, ","); got != "message,reasoning,message,function_call,function_call_output" {
		t.Errorf("second request input types %s", got)
	}
	if call := body.Input[3]; call["arguments"] != `{"city":"Paris"}` || call["call_id"] != "call_a" {
		t.Errorf("function call %v", call)
	}
	if out := body.Input[4]; out["output"] != "18C, sunny" || out["call_id"] != "call_a" {
		t.Errorf("function call output %v", out)
	}
}
