package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// fuzzBody serves arbitrary bytes as the SSE body of a streaming request
// to api: the normalizer must not panic, and every error it returns is a
// *providers.Error (the server always answers 200, so there is no other
// kind of failure).
func fuzzBody(f *testing.F, api string) {
	var mu sync.Mutex
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		b := body
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	f.Setenv("OPENAI_API_KEY", "")
	f.Setenv("OPENAI_BASE_URL", "")
	p := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "test-key", HTTPClient: srv.Client(), API: api})

	f.Fuzz(func(t *testing.T, b []byte) {
		mu.Lock()
		body = b
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := basicRequest()
		resp, err := p.Stream(ctx, req, func(providers.Event) error { return nil })
		var pe *providers.Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("Stream on %q: error %T %v is not a *providers.Error", b, err, err)
		}
		if _, merr := resp.Items.MarshalJSON(); merr != nil {
			t.Fatalf("Stream on %q: items %#v do not encode: %v", b, resp.Items, merr)
		}
	})
}

// FuzzStreamBody fuzzes the Chat Completions stream normalizer.
func FuzzStreamBody(f *testing.F) {
	f.Add(wire(fakeapi.ChatText("stop", "hi").Events))
	f.Add(wire(fakeapi.ChatToolCalls(fakeapi.OpenAIToolCall{ID: "c", Name: "f", Args: []string{`{"a"`, `:1}`}}).Events))
	f.Add([]byte("data: {\"choices\":[{\"index\":7,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\n"))
	f.Add([]byte("data: {not json\n\n"))
	f.Add([]byte(": keep-alive\nevent: ping\ndata: {}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":-1,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"weird\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\",\"code\":503}}\n\n"))
	f.Add([]byte{0xff, 0xfe, '\n', '\n'})
	f.Add([]byte{})
	fuzzBody(f, openai.APIChat)
}

// FuzzResponsesStreamBody fuzzes the Responses stream normalizer.
func FuzzResponsesStreamBody(f *testing.F) {
	f.Add(wire(fakeapi.ResponsesText("Hel", "lo").Events))
	f.Add(wire(fakeapi.NewResponsesStream().
		Reasoning("s", "gAAA").
		Message(fakeapi.OpenAIPart{Deltas: []string{"a"}}, fakeapi.OpenAIPart{Refusal: true, Deltas: []string{"no"}}).
		FunctionCalls(fakeapi.OpenAIToolCall{ID: "c", Name: "f", Args: []string{`{"a"`, `:1}`}}).
		Item(`{"type":"web_search_call","id":"ws_1"}`).
		Incomplete("max_output_tokens").Events))
	f.Add(wire(fakeapi.NewResponsesStream().Text("x").Failed("server_error", "boom").Events))
	f.Add(wire(fakeapi.NewResponsesStream().ErrorEvent("rate_limit_exceeded", "slow down").Events))
	f.Add([]byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":-3,\"content_index\":99999,\"delta\":\"x\"}\n\n"))
	f.Add([]byte("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"arguments\":{\"a\":1},\"name\":7}}\n\n"))
	f.Add([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[1,\"x\",null,{\"type\":\"message\",\"content\":[1]}]}}\n\n"))
	f.Add([]byte("data: {\"type\":\"response.in_progress\",\"response\":[]}\n\ndata: {not json\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"bad\",\"code\":\"context_length_exceeded\"}}\n\n"))
	f.Add([]byte{0xff, 0xfe, '\n', '\n'})
	f.Add([]byte{})
	fuzzBody(f, openai.APIResponses)
}
