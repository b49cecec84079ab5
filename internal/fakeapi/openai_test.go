package fakeapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
)

// openaiChunk is the part of a chat.completion.chunk the tests look at.
type openaiChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			Refusal   string `json:"refusal"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// openaiChat decodes a chat stream: every event but the last is a
// data-only chunk, the last is [DONE]. It returns the content, the
// arguments by tool call index, the finish reason and the usage chunk's
// completion tokens.
func openaiChat(t *testing.T, events []fakeapi.Event) (text string, args map[int]string, finish string, completion int) {
	t.Helper()
	if n := len(events); n == 0 || events[n-1].Data != "[DONE]" {
		t.Fatalf("chat stream does not end with [DONE]: %v", events)
	}
	args = map[int]string{}
	for i, ev := range events[:len(events)-1] {
		if ev.Name != "" {
			t.Errorf("chat event %d is named %q", i, ev.Name)
		}
		var c openaiChunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("chat event %d %q: %v", i, ev.Data, err)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content + ch.Delta.Refusal
			for _, tc := range ch.Delta.ToolCalls {
				args[tc.Index] += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			completion = c.Usage.CompletionTokens
		}
	}
	return text, args, finish, completion
}

func TestOpenAIChatText(t *testing.T) {
	for _, reason := range []string{"stop", "length", "content_filter"} {
		text, _, finish, completion := openaiChat(t, fakeapi.ChatText(reason, "Hel", "lo <&>").Events)
		if text != "Hello <&>" || finish != reason || completion != 2 {
			t.Errorf("ChatText(%q) = text %q, finish %q, completion %d", reason, text, finish, completion)
		}
	}
	text, _, finish, _ := openaiChat(t, fakeapi.NewChatStream().Refusal("I can't", " help").Finish("content_filter").Events)
	if text != "I can't help" || finish != "content_filter" {
		t.Errorf("refusal stream: text %q, finish %q", text, finish)
	}
	if got := fakeapi.ChatTextN(50, "ab"); len(got.Events) != 50+4 {
		t.Errorf("ChatTextN(50) has %d events, want 54", len(got.Events))
	}
}

func TestOpenAIChatUsage(t *testing.T) {
	events := fakeapi.NewChatStream().Text("Hi").Usage(1234, 56).Finish("stop").Events
	var last openaiChunk
	if err := json.Unmarshal([]byte(events[len(events)-2].Data), &last); err != nil {
		t.Fatal(err)
	}
	if last.Usage == nil || last.Usage.PromptTokens != 1234 || last.Usage.CompletionTokens != 56 || len(last.Choices) != 0 {
		t.Errorf("usage chunk %s", events[len(events)-2].Data)
	}
	if _, _, _, completion := openaiChat(t, events); completion != 56 {
		t.Errorf("completion tokens %d, want 56", completion)
	}
}

func TestOpenAIChatToolCalls(t *testing.T) {
	r := fakeapi.ChatToolCalls(
		fakeapi.OpenAIToolCall{ID: "call_a", Name: "get_weather", Args: []string{`{"ci`, `ty":"Pa`, `ris"}`}},
		fakeapi.OpenAIToolCall{ID: "call_b", Name: "get_time", Args: []string{`{}`}},
	)
	_, args, finish, _ := openaiChat(t, r.Events)
	if args[0] != `{"city":"Paris"}` || args[1] != `{}` || finish != "tool_calls" {
		t.Errorf("ChatToolCalls: args %v, finish %q", args, finish)
	}
}

// openaiEvent is the part of a Responses event the tests look at.
type openaiEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int            `json:"sequence_number"`
	OutputIndex    int             `json:"output_index"`
	ContentIndex   int             `json:"content_index"`
	Delta          string          `json:"delta"`
	Text           string          `json:"text"`
	Arguments      string          `json:"arguments"`
	Item           json.RawMessage `json:"item"`
	Response       *struct {
		Status            string            `json:"status"`
		Output            []json.RawMessage `json:"output"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
		Usage *struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	} `json:"response"`
}

// openaiResponses checks that every event's data is JSON whose type is
// the event name, with sequence numbers counting from 0, and returns
// them decoded.
func openaiResponses(t *testing.T, events []fakeapi.Event) []openaiEvent {
	t.Helper()
	var out []openaiEvent
	for i, ev := range events {
		var e openaiEvent
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatalf("event %d (%s) data %q: %v", i, ev.Name, ev.Data, err)
		}
		if e.Type != ev.Name {
			t.Errorf("event %d named %q has type %q", i, ev.Name, e.Type)
		}
		if e.SequenceNumber == nil || *e.SequenceNumber != i {
			t.Errorf("event %d (%s) has sequence number %v", i, ev.Name, e.SequenceNumber)
		}
		out = append(out, e)
	}
	return out
}

func openaiNames(events []fakeapi.Event) string {
	var ns []string
	for _, ev := range events {
		ns = append(ns, strings.TrimPrefix(ev.Name, "response."))
	}
	return strings.Join(ns, ",")
}

func TestOpenAIResponsesText(t *testing.T) {
	r := fakeapi.ResponsesText("Hel", "lo")
	want := "created,in_progress,output_item.added,content_part.added,output_text.delta,output_text.delta," +
		"output_text.done,content_part.done,output_item.done,completed"
	if got := openaiNames(r.Events); got != want {
		t.Errorf("ResponsesText events\n%s, want\n%s", got, want)
	}
	evs := openaiResponses(t, r.Events)
	if evs[6].Text != "Hello" {
		t.Errorf("output_text.done text %q", evs[6].Text)
	}
	last := evs[len(evs)-1].Response
	if last == nil || last.Status != "completed" || len(last.Output) != 1 || last.Usage == nil ||
		last.Usage.InputTokens != fakeapi.OpenAIInputTokens || last.Usage.OutputTokens != 2 {
		t.Fatalf("completed response %+v", last)
	}
	if string(last.Output[0]) != string(evs[8].Item) {
		t.Errorf("completed output %s, want the done item %s", last.Output[0], evs[8].Item)
	}
	if first := evs[0].Response; first == nil || first.Status != "in_progress" || first.Usage != nil {
		t.Errorf("created response %+v", first)
	}
	if n := len(fakeapi.ResponsesTextN(100, "x").Events); n != 100+8 {
		t.Errorf("ResponsesTextN(100) has %d events, want 108", n)
	}
}

func TestOpenAIResponsesItems(t *testing.T) {
	r := fakeapi.NewResponsesStream().
		Reasoning("thought", "gAAAAenc").
		Message(fakeapi.OpenAIPart{Deltas: []string{"a", "b"}}, fakeapi.OpenAIPart{Refusal: true, Deltas: []string{"no"}}).
		FunctionCalls(
			fakeapi.OpenAIToolCall{ID: "call_a", Name: "f", Args: []string{`{"x"`, `:1}`}},
			fakeapi.OpenAIToolCall{ID: "call_b", Name: "g", Args: []string{`{}`}}).
		Item(`{"type":"web_search_call","id":"ws_1","status":"completed"}`).
		Raw("response.future_event", `{"type":"response.future_event","sequence_number":99}`).
		Usage(7, 9).
		Incomplete("max_output_tokens")
	var evs []openaiEvent
	for _, ev := range r.Events {
		var e openaiEvent
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil || e.Type != ev.Name {
			t.Fatalf("event %s data %q: %v", ev.Name, ev.Data, err)
		}
		evs = append(evs, e)
	}
	args := map[int]string{}
	var refusal bool
	for i, ev := range evs {
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args[ev.OutputIndex] += ev.Delta
		case "response.function_call_arguments.done":
			if args[ev.OutputIndex] != ev.Arguments {
				t.Errorf("arguments done %q, deltas %q", ev.Arguments, args[ev.OutputIndex])
			}
		case "response.refusal.delta":
			refusal = ev.OutputIndex == 1 && ev.ContentIndex == 1 && r.Events[i].Name == ev.Type
		}
	}
	if args[2] != `{"x":1}` || args[3] != `{}` || !refusal {
		t.Errorf("arguments %v, refusal delta seen %v", args, refusal)
	}
	last := evs[len(evs)-1].Response
	if last == nil || last.Status != "incomplete" || last.IncompleteDetails == nil || last.IncompleteDetails.Reason != "max_output_tokens" ||
		len(last.Output) != 5 || last.Usage.InputTokens != 7 || last.Usage.OutputTokens != 9 {
		t.Errorf("incomplete response %+v", last)
	}

	failed := openaiResponses(t, fakeapi.NewResponsesStream().Failed("server_error", "boom").Events)
	if f := failed[len(failed)-1].Response; f == nil || f.Status != "failed" || f.Error == nil || f.Error.Code != "server_error" {
		t.Errorf("failed response %+v", f)
	}
	errEvents := fakeapi.NewResponsesStream().ErrorEvent("server_error", "boom").Events
	if got := openaiNames(errEvents); got != "created,in_progress,error" {
		t.Errorf("error stream %s", got)
	}
	if cut := fakeapi.NewResponsesStream().Text("a").Cut(); !cut.Cut || strings.Contains(openaiNames(cut.Events), "completed") {
		t.Errorf("Cut reply %+v", cut)
	}
}

func TestOpenAIErrors(t *testing.T) {
	cases := []struct {
		r          fakeapi.Reply
		status     int
		code       any
		retryAfter string
	}{
		{fakeapi.OpenAIRateLimited("3"), 429, "rate_limit_exceeded", "3"},
		{fakeapi.OpenAIServerError(), 500, nil, ""},
		{fakeapi.OpenAIContextTooLarge(), 400, "context_length_exceeded", ""},
	}
	for _, c := range cases {
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(c.r.Body), &body); err != nil || body.Error.Message == "" || body.Error.Type == "" {
			t.Errorf("body %q: %v", c.r.Body, err)
		}
		if c.r.Status != c.status || body.Error.Code != c.code || c.r.Header.Get("Retry-After") != c.retryAfter {
			t.Errorf("reply %+v, code %v; want status %d code %v Retry-After %q", c.r, body.Error.Code, c.status, c.code, c.retryAfter)
		}
	}
}

// A Responses stream goes out in the SSE wire format: each event an
// event line, a data line and a blank line.
func TestOpenAIResponsesWire(t *testing.T) {
	srv := fakeapi.New(fakeapi.ResponsesText("Hi"))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3*9 || lines[0] != "event: response.created" || !strings.HasPrefix(lines[1], `data: {"type":"response.created","sequence_number":0,`) || lines[2] != "" {
		t.Errorf("wire lines %d, starting %q", len(lines), lines[:min(3, len(lines))])
	}
	_, _ = io.Copy(io.Discard, resp.Body)
}
