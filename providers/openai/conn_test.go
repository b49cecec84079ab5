package openai_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// TestStreamsReuseTheirConnection runs streams one after another against
// one upstream whose bodies end two milliseconds after their last event
// and counts the connections the provider dials: one, when each stream's
// body is read to its end. A body closed at the stream's last event,
// before the end of its chunked encoding, takes its connection with it.
func TestStreamsReuseTheirConnection(t *testing.T) {
	for api, reply := range map[string]fakeapi.Reply{
		openai.APIChat:      fakeapi.ChatText("stop", "Hello", ", ", "world!"),
		openai.APIResponses: fakeapi.NewResponsesStream().Text("Hello", ", ", "world!").Completed(),
	} {
		t.Run(api, func(t *testing.T) {
			reply.Linger = 2 * time.Millisecond
			srv := newServer(t, reply)
			var dials atomic.Int32
			d := &net.Dialer{}
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return d.DialContext(ctx, network, addr)
			}}
			t.Cleanup(tr.CloseIdleConnections)
			p := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "test-key", API: api,
				HTTPClient: &http.Client{Transport: tr}})
			for i := range 5 {
				if _, resp, err := run(t, p, basicRequest()); err != nil || assistantText(resp.Items) != "Hello, world!" {
					t.Fatalf("stream %d: %q, %v", i, assistantText(resp.Items), err)
				}
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("5 streams dialled %d connections, want 1", n)
			}
		})
	}
}
