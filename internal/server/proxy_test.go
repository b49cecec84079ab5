package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/local"
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

// A proxied request naming a configured model selects it on its branch
// with its turn; a request the branch refuses (its turn is in flight)
// leaves the model as it was; a name not configured runs on the
// branch's model.
func TestProxySelectsTheNamedModel(t *testing.T) {
	t.Parallel()
	// No queue: a request while a turn runs is refused (409), not queued.
	noQueue := testOptions(Options{})
	noQueue.ProxyQueue = 0
	ts := newTestServerOpts(t, noQueue, 0, func(c *actors.Config) {
		c.Models = map[string]actors.Model{
			"quick": {Provider: c.Provider, ID: "local"},
			"slow":  {Provider: local.New(local.Options{Delay: 20 * time.Millisecond}), ID: "local"},
		}
	})
	chat := func(model string, stream bool) *http.Response {
		t.Helper()
		body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hello"}]}`, model, stream)
		req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Ctx-Conversation", "models")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	modelOf := func(b string) string {
		t.Helper()
		id, err := messages.ParseID[messages.BranchID](b)
		if err != nil {
			t.Fatal(err)
		}
		info, err := ts.rt.Inspect(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return info.Model
	}
	resp := chat("quick", false)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	b := resp.Header.Get(ProxyBranchHeader)
	if resp.StatusCode != 200 || modelOf(b) != "quick" {
		t.Fatalf("naming a configured model: %d, branch model %q", resp.StatusCode, modelOf(b))
	}

	// A slow turn in flight: the next request is refused, its model not
	// selected.
	slow := chat("slow", true)
	defer slow.Body.Close()
	if _, err := bufio.NewReader(slow.Body).ReadString('\n'); err != nil || slow.StatusCode != 200 {
		t.Fatalf("slow stream: %d %v", slow.StatusCode, err)
	}
	refused := chat("quick", false)
	data, _ := io.ReadAll(refused.Body)
	refused.Body.Close()
	if refused.StatusCode != http.StatusConflict {
		t.Fatalf("a request while a turn is in flight: %d %s, want 409", refused.StatusCode, data)
	}
	io.Copy(io.Discard, slow.Body)
	if m := modelOf(b); m != "slow" {
		t.Fatalf("after a refused request naming quick: branch model %q, want slow", m)
	}

	resp = chat("gpt-not-configured", false)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || modelOf(b) != "slow" {
		t.Fatalf("naming a model not configured: %d, branch model %q, want slow kept", resp.StatusCode, modelOf(b))
	}
}

// A proxied turn that fails answers as OpenAI's API does, so that its
// SDKs report an error, not an empty success: before any text, an error
// status with {"error": {"message", "type", "code"}} (streamed or not);
// after some text, a chat chunk holding the error, or the Responses
// API's error and response.failed events.
func TestProxyFailedTurnsAreErrors(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("huge ", 3000)
	midway := fake.Step{Reply: "half an answer",
		Outcome: messages.StepOutcome{Kind: messages.OutcomeFailed, Code: "server_error", Message: "the model crashed"}}
	unauthorized := &providers.Error{Provider: "fake", StatusCode: 401, Message: "invalid api key"}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		f       *fake.Provider
		text    string
		status  int
		midway  bool // the failure comes after some text
		code    string
		typ     string
		message string
	}{
		{"context too large", fake.New(), huge, 422, false, api.CodeContextTooLarge, "invalid_request_error", "context too large"},
		{"provider 401", fake.New(fake.Step{Err: unauthorized}), "hello", 502, false, api.CodeProviderAuth, "server_error", "status 401"},
		{"midway", fake.New(midway), "hello", 502, true, api.CodeProvider, "server_error", "the model crashed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, _ := failingServer(t, tc.f)
			oc := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
				option.WithHeader(ProxyConversationHeader, "failing"))
			isAPIError := func(where string, err error) {
				t.Helper()
				var ae *openai.Error
				if !errors.As(err, &ae) || ae.StatusCode != tc.status || ae.Code != tc.code || ae.Type != tc.typ ||
					!strings.Contains(ae.Message, tc.message) {
					t.Errorf("%s: %v (%+v), want an API error %d %s %s %q", where, err, ae, tc.status, tc.typ, tc.code, tc.message)
				}
			}
			chat := openai.ChatCompletionNewParams{Model: "local", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(tc.text)}}
			_, err := oc.Chat.Completions.New(ctx, chat)
			isAPIError("chat", err)
			s := oc.Chat.Completions.NewStreaming(ctx, chat)
			text := ""
			for s.Next() {
				if c := s.Current(); len(c.Choices) > 0 {
					text += c.Choices[0].Delta.Content
				}
			}
			if !tc.midway {
				isAPIError("chat stream", s.Err())
			} else if err := s.Err(); err == nil || !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), tc.code) ||
				text != "half an answer" {
				t.Errorf("chat stream: %v after %q, want an error saying %q after the text", err, text, tc.message)
			}
			s.Close()

			params := responses.ResponseNewParams{Model: "local", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(tc.text)}}
			_, err = oc.Responses.New(ctx, params)
			isAPIError("responses", err)
			rs := oc.Responses.NewStreaming(ctx, params)
			var types []string
			var failed responses.ResponseFailedEvent
			for rs.Next() {
				ev := rs.Current()
				types = append(types, ev.Type)
				if ev.Type == "response.failed" {
					failed = ev.AsResponseFailed()
				}
			}
			if !tc.midway {
				isAPIError("responses stream", rs.Err())
			} else if rs.Err() != nil || len(types) < 2 || types[len(types)-2] != "error" || types[len(types)-1] != "response.failed" ||
				failed.Response.Status != "failed" || string(failed.Response.Error.Code) != tc.code ||
				!strings.Contains(failed.Response.Error.Message, tc.message) {
				t.Errorf("responses stream: %v, events %v, failed %+v; want error, response.failed saying %q", rs.Err(), types,
					failed.Response.Error, tc.message)
			}
			rs.Close()
		})
	}
}
