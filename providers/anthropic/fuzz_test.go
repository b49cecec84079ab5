package anthropic_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/anthropic"
)

// sseBytes is reply's events in the SSE wire format.
func sseBytes(reply fakeapi.Reply) []byte {
	var b bytes.Buffer
	for _, ev := range reply.Events {
		b.WriteString("event: " + ev.Name + "\ndata: " + ev.Data + "\n\n")
	}
	return b.Bytes()
}

// FuzzStreamBody serves arbitrary bytes as the SSE body of a streaming
// Messages response: the normalizer must not panic, and every error it
// returns is a *providers.Error or the context's (the server always
// answers 200, so there is no other kind of failure).
func FuzzStreamBody(f *testing.F) {
	f.Add(sseBytes(fakeapi.AnthropicText([]string{"Hel", "lo"}, "end_turn")))
	f.Add(sseBytes(fakeapi.AnthropicToolUse("x", []fakeapi.AnthropicCall{{Name: "grep", Input: `{"q":"x"}`}, {Name: "ls"}}, 3)))
	f.Add(sseBytes(fakeapi.NewAnthropicStream().Thinking("sig", "hm").
		Block(`{"type":"server_tool_use","id":"s","name":"web_search","input":{}}`, `{"type":"input_json_delta","partial_json":"{"}`).
		Error("overloaded_error", "Overloaded")))
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-7,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"x\"}}\n\n"))
	f.Add([]byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":5}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"))
	f.Add([]byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":7},\"usage\":\"lots\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	f.Add([]byte("event: error\ndata: {not json\n\n"))
	f.Add([]byte("event: message_start\ndata: {not json\n\n"))
	f.Add([]byte(": comment\nevent: ping\ndata: {}\n\ndata: {\"type\":\"message_stop\"}\n\n"))
	f.Add([]byte{0xff, 0xfe, '\n', '\n'})
	f.Add([]byte{})

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
	p := anthropic.New(anthropic.Options{BaseURL: srv.URL, APIKey: testKey, HTTPClient: srv.Client()})

	f.Fuzz(func(t *testing.T, b []byte) {
		mu.Lock()
		body = b
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := p.Stream(ctx, basicRequest(), func(providers.Event) error { return nil })
		var pe *providers.Error
		if err != nil && !errors.As(err, &pe) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stream on %q: error %T %v is neither a *providers.Error nor the context's", b, err, err)
		}
		if _, merr := resp.Items.MarshalJSON(); merr != nil {
			t.Fatalf("Stream on %q: items do not encode: %v", b, merr)
		}
	})
}
