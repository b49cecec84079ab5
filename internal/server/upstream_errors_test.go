package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	anthropicprovider "github.com/contextinfinity/ctxinf/providers/anthropic"
	openaiprovider "github.com/contextinfinity/ctxinf/providers/openai"
)

// The errors of the model's provider (the upstream) keep their meaning
// on every route: an upstream 429 is a 429 with its Retry-After, a 400 a
// 400 with its message, and so on (turnStatus), each in the route's
// API's own error shape, so that every SDK raises its matching error and
// retries only what is worth retrying.

// fastRetry is the runtime's retry policy in these tests: config.yaml's
// number of retries, without its waits.
var fastRetry = providers.RetryPolicy{MaxRetries: config.Default().Runtime.ProviderMaxRetries,
	BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}

// upstreamAPI is a model API in front of which the runtime runs: its
// adapter, and its error replies.
type upstreamAPI struct {
	name     string
	provider func(url string) providers.Provider
	errors   map[int]fakeapi.Reply // by status
}

var upstreamAPIs = []upstreamAPI{
	{
		name: "openai",
		provider: func(url string) providers.Provider {
			return openaiprovider.New(openaiprovider.Options{BaseURL: url + "/v1", APIKey: "sk-test", API: openaiprovider.APIChat})
		},
		errors: map[int]fakeapi.Reply{
			429: fakeapi.OpenAIRateLimited("7"),
			400: fakeapi.OpenAIError(400, "invalid_request_error", "invalid_value", "Invalid value for 'temperature': must be at most 2."),
			401: fakeapi.OpenAIError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-test."),
			404: fakeapi.OpenAIError(404, "invalid_request_error", "model_not_found", "The model `model-e2e` does not exist."),
			500: fakeapi.OpenAIServerError(),
			529: fakeapi.OpenAIError(529, "server_error", "", "The engine is currently overloaded."),
		},
	},
	{
		name: "anthropic",
		provider: func(url string) providers.Provider {
			return anthropicprovider.New(anthropicprovider.Options{BaseURL: url, APIKey: "sk-test"})
		},
		errors: map[int]fakeapi.Reply{
			429: fakeapi.AnthropicError(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
				http.Header{"Retry-After": {"7"}}),
			400: fakeapi.AnthropicError(400, "invalid_request_error", "max_tokens: 100000 > 64000, the maximum for this model", nil),
			401: fakeapi.AnthropicError(401, "authentication_error", "invalid x-api-key", nil),
			404: fakeapi.AnthropicError(404, "not_found_error", "model: model-e2e", nil),
			500: fakeapi.AnthropicError(500, "api_error", "Internal server error", nil),
			529: fakeapi.AnthropicError(529, "overloaded_error", "Overloaded", nil),
		},
	},
}

// upstreamWant is how a route answers an upstream error: its status
// and code, words its message holds, its Retry-After ("" for none) and
// whether it tells SDKs not to retry.
type upstreamWant struct {
	status     int
	code       string
	words      string
	retryAfter string
	noRetry    bool
}

var upstreamWants = map[int]upstreamWant{
	429: {429, api.CodeProviderRateLimited, "rate limiting this server", "7", false},
	400: {400, api.CodeProviderRejected, "rejected the request", "", true},
	401: {502, api.CodeProviderAuth, "refused this server's own API key", "", true},
	404: {404, api.CodeProviderModelNotFound, "does not know the model", "", true},
	500: {502, api.CodeProvider, "status 500", "", true},
	529: {503, api.CodeProviderOverloaded, "overloaded", "", true},
}

// routeAnswer is what a client saw of a failed request: the status and
// headers of the answer, and its error's type (OpenAI's or Anthropic's
// error type, "" for the native API's), code (when the shape has one)
// and message.
type routeAnswer struct {
	status          int
	header          http.Header
	typ, code, text string
}

// upstreamRoute sends one request that fails upstream and reports what
// its client saw; key names a conversation of its own.
type upstreamRoute struct {
	name string
	send func(t *testing.T, ts *testServer, key string) routeAnswer
}

func openAIAnswer(t *testing.T, err error) routeAnswer {
	t.Helper()
	var ae *openai.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want an *openai.Error", err, err)
	}
	return routeAnswer{status: ae.StatusCode, header: ae.Response.Header, typ: ae.Type, code: ae.Code, text: ae.Message}
}

func anthropicAnswer(t *testing.T, err error) routeAnswer {
	t.Helper()
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want an *anthropic.Error", err, err)
	}
	var body struct {
		Error struct{ Message string }
	}
	_ = json.Unmarshal([]byte(ae.RawJSON()), &body)
	return routeAnswer{status: ae.StatusCode, header: ae.Response.Header, typ: string(ae.Type()), text: body.Error.Message}
}

func upstreamOpenAI(ts *testServer, key string, retries int) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(retries),
		option.WithHeader(ProxyConversationHeader, key))
	return &c
}

func upstreamAnthropic(ts *testServer, key string, retries int) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(retries),
		aoption.WithHeader(ProxyConversationHeader, key))
	return &c
}

var chatParams = openai.ChatCompletionNewParams{Model: "model-e2e",
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}

var responsesParams = responses.ResponseNewParams{Model: "model-e2e",
	Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}

var messagesParams = anthropic.MessageNewParams{Model: "model-e2e", MaxTokens: 100,
	Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}

var upstreamRoutes = []upstreamRoute{
	{"chat", func(t *testing.T, ts *testServer, key string) routeAnswer {
		oc := upstreamOpenAI(ts, key, 0)
		_, err := oc.Chat.Completions.New(context.Background(), chatParams)
		return openAIAnswer(t, err)
	}},
	{"chat stream", func(t *testing.T, ts *testServer, key string) routeAnswer {
		oc := upstreamOpenAI(ts, key, 0)
		s := oc.Chat.Completions.NewStreaming(context.Background(), chatParams)
		defer s.Close()
		for s.Next() {
		}
		return openAIAnswer(t, s.Err())
	}},
	{"responses", func(t *testing.T, ts *testServer, key string) routeAnswer {
		oc := upstreamOpenAI(ts, key, 0)
		_, err := oc.Responses.New(context.Background(), responsesParams)
		return openAIAnswer(t, err)
	}},
	{"responses stream", func(t *testing.T, ts *testServer, key string) routeAnswer {
		oc := upstreamOpenAI(ts, key, 0)
		s := oc.Responses.NewStreaming(context.Background(), responsesParams)
		defer s.Close()
		for s.Next() {
		}
		return openAIAnswer(t, s.Err())
	}},
	{"messages", func(t *testing.T, ts *testServer, key string) routeAnswer {
		ac := upstreamAnthropic(ts, key, 0)
		_, err := ac.Messages.New(context.Background(), messagesParams)
		return anthropicAnswer(t, err)
	}},
	{"messages stream", func(t *testing.T, ts *testServer, key string) routeAnswer {
		ac := upstreamAnthropic(ts, key, 0)
		s := ac.Messages.NewStreaming(context.Background(), messagesParams)
		defer s.Close()
		for s.Next() {
		}
		return anthropicAnswer(t, s.Err())
	}},
	{"turns", func(t *testing.T, ts *testServer, key string) routeAnswer {
		req, _ := http.NewRequest("POST", ts.URL+upstreamBranch(t, ts, key)+"/turns", strings.NewReader(`{"text":"hello"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error struct{ Code, Message, Turn string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error.Turn == "" {
			t.Fatalf("POST turns: %d %+v (%v), want the error of a turn", resp.StatusCode, body, err)
		}
		return routeAnswer{status: resp.StatusCode, header: resp.Header, code: body.Error.Code, text: body.Error.Message}
	}},
	{"turns stream", func(t *testing.T, ts *testServer, key string) routeAnswer {
		// The native stream begins at once (200, its "turn" event): a
		// failure is told by its "done" event, whose code's status and
		// the provider's wait it carries.
		req, _ := http.NewRequest("POST", ts.URL+upstreamBranch(t, ts, key)+"/turns", strings.NewReader(`{"text":"hello","stream":true}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var done struct {
			Code, Error  string
			RetryAfterMS int64 `json:"retry_after_ms"`
		}
		for sc, event := bufio.NewScanner(resp.Body), ""; sc.Scan(); {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				event = name
			} else if data, ok := strings.CutPrefix(line, "data: "); ok && event == "done" {
				_ = json.Unmarshal([]byte(data), &done)
			}
		}
		h := http.Header{}
		if done.RetryAfterMS > 0 {
			setRetryAfter(h, time.Duration(done.RetryAfterMS)*time.Millisecond)
		}
		if noRetry[done.Code] {
			h.Set("X-Should-Retry", "false")
		}
		return routeAnswer{status: turnStatus[done.Code], header: h, code: done.Code, text: done.Error}
	}},
}

// upstreamBranch creates a session for key and returns its branch's path.
func upstreamBranch(t *testing.T, ts *testServer, key string) string {
	t.Helper()
	var created struct{ Branch persistence.BranchRow }
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": key}, &created); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	return "/v1/branches/" + created.Branch.ID.String()
}

// upstreamErrorServer is a test server whose runtime's model
// ("model-e2e") is api, played by up.
func upstreamErrorServer(t *testing.T, api upstreamAPI, up *fakeapi.Server) *testServer {
	t.Helper()
	t.Cleanup(up.Close)
	return newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider, c.Model, c.Retry = api.provider(up.URL), "model-e2e", &fastRetry
	})
}

func TestUpstreamErrorsKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	for _, api := range upstreamAPIs {
		for _, status := range []int{429, 400, 401, 404, 500, 529} {
			t.Run(api.name+"/"+strconv.Itoa(status), func(t *testing.T) {
				t.Parallel()
				want := upstreamWants[status]
				reply := api.errors[status]
				up := fakeapi.New(reply)
				ts := upstreamErrorServer(t, api, up)
				for _, route := range upstreamRoutes {
					before := up.Count()
					got := route.send(t, ts, api.name+"-"+route.name)
					where := route.name
					if strings.HasPrefix(route.name, "messages") {
						got.code = want.code // Anthropic's shape has its type only
					}
					if got.status != want.status || got.code != want.code {
						t.Errorf("%s: %d %s, want %d %s", where, got.status, got.code, want.status, want.code)
					}
					if !strings.Contains(got.text, want.words) || !strings.Contains(got.text, upstreamMessage(t, reply)) {
						t.Errorf("%s: message %q, want one saying %q and quoting the upstream's", where, got.text, want.words)
					}
					switch {
					case strings.HasPrefix(route.name, "messages"):
						if got.typ != anthropicErrorType(want.status) {
							t.Errorf("%s: type %q, want %q", where, got.typ, anthropicErrorType(want.status))
						}
					case !strings.HasPrefix(route.name, "turns"):
						if got.typ != openAIErrorType(want.status) {
							t.Errorf("%s: type %q, want %q", where, got.typ, openAIErrorType(want.status))
						}
					}
					if ra := got.header.Get("Retry-After"); ra != want.retryAfter {
						t.Errorf("%s: Retry-After %q, want %q", where, ra, want.retryAfter)
					}
					if no := got.header.Get("X-Should-Retry") == "false"; no != want.noRetry {
						t.Errorf("%s: x-should-retry: false is %v, want %v", where, no, want.noRetry)
					}
					// The runtime retried what was worth retrying, at
					// most as its policy says, and a rate limit that said
					// when to come back not at all.
					n, wantN := up.Count()-before, 1
					if status >= 500 {
						wantN = 1 + fastRetry.MaxRetries
					}
					if n != wantN {
						t.Errorf("%s: %d upstream requests, want %d", where, n, wantN)
					}
				}
			})
		}
	}
}

// upstreamMessage is the message of an upstream error reply, in either
// API's shape.
func upstreamMessage(t *testing.T, r fakeapi.Reply) string {
	t.Helper()
	var body struct {
		Error struct{ Message string }
	}
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil || body.Error.Message == "" {
		t.Fatalf("reply body %q: %v", r.Body, err)
	}
	return body.Error.Message
}

// The runtime's retries and an SDK's do not multiply: against an
// upstream that always answers 429 with Retry-After, an SDK call with
// its default retries makes 3 upstream requests (the SDK's 3 attempts,
// each passed straight back), against one that always answers 429
// without, 6 (each attempt retried once by the runtime), and against
// one that always answers 500, 4 (the runtime's 1 + 3, then an answer
// saying x-should-retry: false).
func TestUpstreamRetriesDoNotMultiply(t *testing.T) {
	t.Parallel()
	ms := fakeapi.OpenAIRateLimited("")
	ms.Header.Set("Retry-After-Ms", "20") // as api.openai.com sends it: the SDKs read it first
	noWait := fakeapi.OpenAIRateLimited("")
	a429 := fakeapi.AnthropicError(429, "rate_limit_error", "slow down", http.Header{"Retry-After-Ms": {"20"}})
	for _, tc := range []struct {
		name  string
		api   upstreamAPI
		reply fakeapi.Reply
		sdk   string
		want  int
	}{
		{"openai-go/429 retry-after", upstreamAPIs[0], ms, "openai", 3},
		{"openai-go/429", upstreamAPIs[0], noWait, "openai", 6},
		{"openai-go/500", upstreamAPIs[0], fakeapi.OpenAIServerError(), "openai", 4},
		{"anthropic-sdk-go/429 retry-after", upstreamAPIs[1], a429, "anthropic", 3},
		{"anthropic-sdk-go/500", upstreamAPIs[1], fakeapi.AnthropicError(500, "api_error", "Internal server error", nil), "anthropic", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := fakeapi.New(tc.reply)
			ts := upstreamErrorServer(t, tc.api, up)
			var err error
			switch tc.sdk {
			case "openai": // the SDK's default retries: 2
				oc := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"),
					option.WithHeader(ProxyConversationHeader, tc.name))
				_, err = oc.Chat.Completions.New(context.Background(), chatParams)
			default:
				ac := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("unused"),
					aoption.WithHeader(ProxyConversationHeader, tc.name))
				_, err = ac.Messages.New(context.Background(), messagesParams)
			}
			if err == nil {
				t.Fatal("the call succeeded against an upstream that always fails")
			}
			if n := up.Count(); n != tc.want {
				t.Errorf("%d upstream requests, want %d (%v)", n, tc.want, err)
			}
			t.Logf("%s: %d upstream requests for one SDK call", tc.name, up.Count())
		})
	}
}

// An upstream error in the step after a client's tool results keeps its
// meaning too, and the SDK's own retry of the request (the same tool
// results) runs that step again: against an upstream that answers 429
// once there, the SDK call succeeds after one retry, and the loop is
// one turn.
func TestUpstreamErrorInClientToolLoop(t *testing.T) {
	t.Parallel()
	limited := fakeapi.OpenAIRateLimited("")
	limited.Header.Set("Retry-After-Ms", "20")
	for _, keyed := range []bool{true, false} {
		t.Run(map[bool]string{true: "key", false: "keyless"}[keyed], func(t *testing.T) {
			t.Parallel()
			up := fakeapi.New(fakeapi.ChatToolCalls(fakeapi.OpenAIToolCall{ID: "call_1", Name: "get_weather", Args: []string{`{"city":"Paris"}`}}),
				limited, fakeapi.ChatText("stop", "Sunny."))
			ts := upstreamErrorServer(t, upstreamAPIs[0], up)
			opts := []option.RequestOption{option.WithBaseURL(ts.URL + "/v1"), option.WithAPIKey("unused")} // the SDK's retries: 2
			if keyed {
				opts = append(opts, option.WithHeader(ProxyConversationHeader, "loop-429"))
			}
			oc := openai.NewClient(opts...)
			p := openai.ChatCompletionNewParams{Model: "model-e2e", Tools: chatLoopTools(),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}}
			c, err := oc.Chat.Completions.New(context.Background(), p)
			if err != nil || len(c.Choices[0].Message.ToolCalls) != 1 {
				t.Fatalf("first answer %+v, %v; want the tool call", c, err)
			}
			p.Messages = append(p.Messages, c.Choices[0].Message.ToParam(), openai.ToolMessage("sunny", "call_1"))
			var seen []int
			c, err = oc.Chat.Completions.New(context.Background(), p, option.WithMiddleware(
				func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
					resp, err := next(r)
					if resp != nil {
						seen = append(seen, resp.StatusCode)
					}
					return resp, err
				}))
			if err != nil || c.Choices[0].Message.Content != "Sunny." {
				t.Fatalf("answer after the results %+v, %v; want the SDK's retry to succeed", c, err)
			}
			if len(seen) != 2 || seen[0] != 429 || seen[1] != 200 || up.Count() != 3 {
				t.Errorf("statuses %v after %d upstream requests, want 429 then 200 after 3", seen, up.Count())
			}
		})
	}
}
