package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// FuzzStreamBody serves arbitrary bytes as the SSE body of a streaming
// chat completion: the normalizer must not panic, and every error it
// returns is a *providers.Error (the server always answers 200, so there
// is no other kind of failure).
func FuzzStreamBody(f *testing.F) {
	f.Add([]byte("data: " + chunk(`{"content":"hi"}`, "stop") + "\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":7,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\n"))
	f.Add([]byte("data: {not json\n\n"))
	f.Add([]byte(": keep-alive\nevent: ping\ndata: {}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":-1,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"weird\"}]}\n\ndata: [DONE]\n\n"))
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
	f.Setenv("OPENAI_API_KEY", "")
	f.Setenv("OPENAI_BASE_URL", "")
	p := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "test-key", HTTPClient: srv.Client()})

	f.Fuzz(func(t *testing.T, b []byte) {
		mu.Lock()
		body = b
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := p.Stream(ctx, basicRequest(), func(providers.Event) error { return nil })
		var pe *providers.Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("Stream on %q: error %T %v is not a *providers.Error", b, err, err)
		}
	})
}
