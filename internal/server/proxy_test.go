package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// The official client keeps its connection to the proxy from one
// streamed request to the next: it closes a chat completion's body at
// its [DONE] line, which closes the connection unless the end of the
// body has come with it. The server's writes reach the client apart, as
// they do over a network.
func TestProxyStreamsKeepTheClientsConnection(t *testing.T) {
	ts := httptest.NewUnstartedServer(newTestServer(t, Options{}, 0).Config.Handler)
	ts.Listener = spacedWrites{ts.Listener}
	ts.Start()
	defer ts.Close()
	t.Setenv("OPENAI_API_KEY", "unused")
	t.Setenv("OPENAI_BASE_URL", "")
	var dials atomic.Int32
	d := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	cl := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithHTTPClient(&http.Client{Transport: tr}),
		option.WithMaxRetries(0), option.WithHeader("X-Ctx-Conversation", "keep-alive"))
	ctx := context.Background()
	for i := range 3 {
		s := cl.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "local",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
		n := 0
		for s.Next() {
			n++
		}
		if err := s.Err(); err != nil || n == 0 {
			t.Fatalf("chat stream %d: %d chunks, %v", i, n, err)
		}
		rs := cl.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "local",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
		completed := false
		for rs.Next() {
			completed = completed || rs.Current().Type == "response.completed"
		}
		if err := rs.Err(); err != nil || !completed {
			t.Fatalf("responses stream %d: completed %v, %v", i, completed, err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("6 streamed requests dialled %d connections, want 1", n)
	}
}

// spacedWrites is a listener whose connections pause after each write.
type spacedWrites struct{ net.Listener }

func (l spacedWrites) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return spacedConn{c}, err
}

type spacedConn struct{ net.Conn }

func (c spacedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	time.Sleep(10 * time.Millisecond)
	return n, err
}
