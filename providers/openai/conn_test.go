package openai_test

import (
	"context"
	"fmt"
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
// The drain may wait a second here, so that a busy machine's scheduling
// does not count.
func TestStreamsReuseTheirConnection(t *testing.T) {
	openai.SetDrainFor(t, time.Second)
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

// TestSlowBodyEndDoesNotHang runs streams whose bodies end after the
// provider has stopped waiting for their end (drainFor, 20 ms) but
// within the time the transport drains a body closed early (50 ms since
// Go 1.27): each must still
// return, whatever happens to its connection. Closing the body while
// the drain read it left that read waiting for good.
func TestSlowBodyEndDoesNotHang(t *testing.T) {
	openai.SetDrainFor(t, 20*time.Millisecond)
	for api, reply := range map[string]fakeapi.Reply{
		openai.APIChat:      fakeapi.ChatText("stop", "Hello", ", ", "world!"),
		openai.APIResponses: fakeapi.NewResponsesStream().Text("Hello", ", ", "world!").Completed(),
	} {
		t.Run(api, func(t *testing.T) {
			reply.Linger = 35 * time.Millisecond
			srv := newServer(t, reply)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			p := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "test-key", API: api,
				HTTPClient: &http.Client{Transport: tr}})
			done := make(chan error, 1)
			go func() {
				for i := range 4 {
					if _, resp, err := run(t, p, basicRequest()); err != nil || assistantText(resp.Items) != "Hello, world!" {
						done <- fmt.Errorf("stream %d: %q, %v", i, assistantText(resp.Items), err)
						return
					}
				}
				done <- nil
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("4 streams whose bodies end 35 ms after their last event did not return in 30 s")
			}
		})
	}
}
