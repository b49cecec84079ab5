package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	anthropicprovider "github.com/contextinfinity/ctxinf/providers/anthropic"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// anthropicClient is the official SDK's client against ts, configured by
// its base URL alone (and no retries); branches collects the X-Ctx-Branch
// header of each answer.
func anthropicClient(t *testing.T, url string, opts ...option.RequestOption) (anthropic.Client, *branchHeaders) {
	t.Helper()
	t.Setenv("ANTHROPIC_API_KEY", "unused")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "")
	bh := &branchHeaders{}
	opts = append([]option.RequestOption{option.WithBaseURL(url), option.WithMaxRetries(0),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if resp != nil {
				bh.add(resp.Header.Get(ProxyBranchHeader))
			}
			return resp, err
		})}, opts...)
	return anthropic.NewClient(opts...), bh
}

type branchHeaders struct {
	mu sync.Mutex
	hs []string
}

func (b *branchHeaders) add(h string) {
	b.mu.Lock()
	b.hs = append(b.hs, h)
	b.mu.Unlock()
}

func (b *branchHeaders) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.hs...)
}

// The plain text path with the SDK against the local provider: a turn
// answered whole, then one streamed on the same conversation (its
// metadata.user_id), in Anthropic's format with its usage fields.
func TestAnthropicMessagesSDK(t *testing.T) {
	ts := newTestServer(t, Options{}, 0)
	cl, branches := anthropicClient(t, ts.URL)
	ctx := context.Background()
	history := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("The deploy target is eu-west-1."))}
	params := anthropic.MessageNewParams{Model: "local", MaxTokens: 1024, Messages: history,
		System:   []anthropic.TextBlockParam{{Text: "Answer briefly."}},
		Metadata: anthropic.MetadataParam{UserID: anthropic.String("sdk-user")}}
	msg, err := cl.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.ID, "msg_") || msg.Type != "message" || msg.Role != "assistant" || msg.StopReason != anthropic.StopReasonEndTurn ||
		msg.Model != "local" || len(msg.Content) != 1 || msg.Content[0].Type != "text" ||
		!strings.Contains(msg.Content[0].Text, "[local]") || !strings.Contains(msg.Content[0].Text, "eu-west-1") {
		t.Fatalf("message %+v", msg)
	}
	if !msg.Usage.JSON.InputTokens.Valid() || !msg.Usage.JSON.OutputTokens.Valid() || msg.JSON.StopSequence.Raw() != "null" {
		t.Errorf("usage or stop_sequence missing: %s", msg.RawJSON())
	}
	b, err := messages.ParseID[messages.BranchID](branches.all()[0])
	if err != nil {
		t.Fatalf("X-Ctx-Branch %q: %v", branches.all()[0], err)
	}
	turns, err := ts.rt.DB().TurnRows(ctx, b, 0, 10)
	if err != nil || len(turns) != 1 || msg.ID != "msg_"+turns[0].ID.String() {
		t.Fatalf("turns %+v, %v; message id %s", turns, err, msg.ID)
	}

	// Streamed, the conversation's history resent with a new question.
	params.Messages = append(history, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Where do we deploy?")))
	s := cl.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	var events []string
	for s.Next() {
		ev := s.Current()
		events = append(events, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	n := len(events)
	if n < 6 || events[0] != "message_start" || events[1] != "content_block_start" || events[2] != "content_block_delta" ||
		events[n-3] != "content_block_stop" || events[n-2] != "message_delta" || events[n-1] != "message_stop" {
		t.Fatalf("events %v", events)
	}
	if acc.StopReason != anthropic.StopReasonEndTurn || len(acc.Content) != 1 || !strings.Contains(acc.Content[0].Text, "Where do we deploy?") ||
		!strings.HasPrefix(acc.ID, "msg_") || acc.ID == msg.ID || acc.Model != "local" || !acc.Usage.JSON.OutputTokens.Valid() {
		t.Fatalf("streamed message %+v", acc)
	}
	if hs := branches.all(); len(hs) != 2 || hs[1] != hs[0] {
		t.Fatalf("branches %v, want the same one twice", hs)
	}
	turns, _ = ts.rt.DB().TurnRows(ctx, b, 0, 10)
	if len(turns) != 2 || acc.ID != "msg_"+turns[1].ID.String() {
		t.Fatalf("turns %+v; streamed id %s", turns, acc.ID)
	}
	entries, _, err := ts.rt.History(ctx, b, messages.TurnID{}, 10)
	if err != nil || len(entries) != 4 || entries[2].Message.RenderedText != "Where do we deploy?" {
		t.Fatalf("history %+v, %v", entries, err)
	}
}

// A request is mapped as the runtime takes it: the system prompt (a
// string or text blocks), the client's tools and tool choice, a user
// message's blocks (images as images, other parts kept as sent), tool
// results as tool messages with their outputs, assistant tool calls by
// id.
func TestAnthropicMessagesRequestMapping(t *testing.T) {
	t.Parallel()
	body := `{"model":"claude-x","max_tokens":1000,"temperature":0.2,"stop_sequences":["END"],
	"system":[{"type":"text","text":"You are terse."},{"type":"text","text":"Use tools.","cache_control":{"type":"ephemeral"}}],
	"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
	         {"type":"custom","name":"get_time","input_schema":{"type":"object"}}],
	"tool_choice":{"type":"any","disable_parallel_tool_use":true},
	"metadata":{"user_id":"u-1"},
	"messages":[
	 {"role":"user","content":[{"type":"text","text":"Look at "},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0"}},
	   {"type":"text","text":"this."},{"type":"image","source":{"type":"url","url":"https://example.com/a/cat.JPG?x=1"}},
	   {"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"}}]},
	 {"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},
	   {"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18°C"},
	   {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"no "},{"type":"text","text":"clock"}],"is_error":true}]}
	]}`
	var req anthropicRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	tr, err := parseAnthropic(&req)
	if err != nil {
		t.Fatal(err)
	}
	if tr.client.System != "You are terse.\nUse tools." {
		t.Errorf("system %q", tr.client.System)
	}
	if len(tr.client.Tools) != 2 || tr.client.Tools[0].Name != "get_weather" || tr.client.Tools[0].Description != "Weather of a city" ||
		string(tr.client.Tools[0].InputSchema) != `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}` ||
		tr.client.Tools[1].Name != "get_time" || string(tr.client.Tools[1].InputSchema) != `{"type":"object"}` {
		t.Errorf("tools %+v", tr.client.Tools)
	}
	if tr.client.ToolChoice != (messages.ToolChoice{Mode: messages.ToolChoiceRequired}) {
		t.Errorf("tool choice %+v", tr.client.ToolChoice)
	}
	type conv struct {
		Role, Text, CallID string
		Calls              []string
		Others             int
	}
	var got []conv
	for _, m := range tr.msgs {
		got = append(got, conv{m.Role, m.Text, m.CallID, m.Calls, len(m.Other)})
	}
	want := []conv{
		{"system", "You are terse.\nUse tools.", "", nil, 0},
		{"user", "Look at this.", "", nil, 3},
		{"assistant", "Checking.", "", []string{"toolu_1", "toolu_2"}, 0},
		{"tool", "18°C", "toolu_1", nil, 0},
		{"tool", "no clock", "toolu_2", nil, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages\n got %+v\nwant %+v", got, want)
	}
	wantBlocks := messages.Blocks{
		messages.Text{Text: "Look at "},
		messages.Image{MediaType: "image/png", Source: json.RawMessage(`{"data":"iVBORw0","type":"base64"}`)},
		messages.Text{Text: "this."},
		messages.Image{MediaType: "image/jpeg", Source: json.RawMessage(`{"type":"url","url":"https://example.com/a/cat.JPG?x=1"}`)},
		messages.Unknown{Provider: "anthropic", Raw: json.RawMessage(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"}}`)},
	}
	if !reflect.DeepEqual(tr.content[1], wantBlocks) {
		t.Errorf("user blocks\n got %#v\nwant %#v", tr.content[1], wantBlocks)
	}
	if o := tr.outputs[3]; o.CallID != "toolu_1" || string(o.Output) != `"18°C"` || o.IsError {
		t.Errorf("output 1 %+v (%s)", o, o.Output)
	}
	if o := tr.outputs[4]; o.CallID != "toolu_2" || string(o.Output) != `"no clock"` || !o.IsError {
		t.Errorf("output 2 %+v (%s)", o, o.Output)
	}
	if fresh := tr.newMessages(3); !reflect.DeepEqual(fresh, []int{3, 4}) {
		t.Errorf("new messages from 3: %v", fresh)
	} else if n, _ := convStep(tr.msgs); n != 1 {
		t.Errorf("step %d, want 1", n)
	}

	for _, c := range []struct{ url, want string }{
		{"https://x.test/a.png", "image/png"}, {"https://x.test/a.webp?s=1", "image/webp"},
		{"data:image/gif;base64,R0lG", "image/gif"}, {"https://x.test/image", "image/*"}, {"https://x.test/a.txt", "image/*"},
	} {
		if got := imageMediaType(c.url); got != c.want {
			t.Errorf("imageMediaType(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

// anthropicErrorBody is an error in Anthropic's shape.
type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// postAnthropic posts body to /v1/messages with headers and returns the
// status, the decoded error (if any) and the response's headers.
func postAnthropic(t *testing.T, url, body string, headers ...string) (int, anthropicErrorBody, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e anthropicErrorBody
	if resp.StatusCode != 200 {
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("error body %q: %v", data, err)
		}
	}
	return resp.StatusCode, e, resp.Header
}

// Every refusal on /v1/messages is in Anthropic's error shape, with the
// status and type the SDKs act on and a message naming the field or the
// limit.
func TestAnthropicMessagesErrors(t *testing.T) {
	ts := newTestServer(t, Options{MaxBodyBytes: 64 << 10}, 0)
	user := `"messages":[{"role":"user","content":"hi"}]`
	ok := `{"model":"local","max_tokens":100,` + user + `}`
	key := []string{ProxyConversationHeader, "errors"}
	for _, tc := range []struct {
		name, body string
		headers    []string
		status     int
		typ, msg   string
	}{
		{"bad JSON", `{"model":`, key, 400, "invalid_request_error", "body"},
		{"not an object", `[1]`, key, 400, "invalid_request_error", "body: want a JSON object"},
		{"wrong type", `{"model":"local","max_tokens":"ten",` + user + `}`, key, 400, "invalid_request_error", "max_tokens: want an integer, got a string"},
		{"no model", `{"max_tokens":100,` + user + `}`, key, 400, "invalid_request_error", "model: required"},
		{"no max_tokens", `{"model":"local",` + user + `}`, key, 400, "invalid_request_error", "max_tokens: required"},
		{"max_tokens 0", `{"model":"local","max_tokens":0,` + user + `}`, key, 400, "invalid_request_error", "max_tokens: 0, want at least 1"},
		{"no messages", `{"model":"local","max_tokens":100}`, key, 400, "invalid_request_error", "messages: required"},
		{"system role", `{"model":"local","max_tokens":100,"messages":[{"role":"system","content":"x"}]}`, key, 400,
			"invalid_request_error", `messages[0].role: "system", want user or assistant`},
		{"no content", `{"model":"local","max_tokens":100,"messages":[{"role":"user"}]}`, key, 400,
			"invalid_request_error", "messages[0].content: required"},
		{"block without type", `{"model":"local","max_tokens":100,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, key, 400,
			"invalid_request_error", "messages[0].content[0].type: required"},
		{"empty text", `{"model":"local","max_tokens":100,"messages":[{"role":"user","content":"  "}]}`, key, 400,
			"invalid_request_error", "messages[0].content: no text"},
		{"image without media type", `{"model":"local","max_tokens":100,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AA"}}]}]}`,
			key, 400, "invalid_request_error", "messages[0].content[0].source.media_type: required"},
		{"user_id too long", `{"model":"local","max_tokens":100,"metadata":{"user_id":"` + strings.Repeat("u", MaxEndUser+1) + `"},` + user + `}`,
			nil, 400, "invalid_request_error", fmt.Sprintf("metadata.user_id: %d bytes, limit %d", MaxEndUser+1, MaxEndUser)},
		{"conversation too long", `{"model":"local","max_tokens":100,"metadata":{"conversation":"` + strings.Repeat("c", MaxConversationKey+1) + `"},` + user + `}`,
			nil, 400, "invalid_request_error", fmt.Sprintf("metadata.conversation: %d bytes, limit %d", MaxConversationKey+1, MaxConversationKey)},
		{"server tool", `{"model":"local","max_tokens":100,"tools":[{"type":"web_search_20250305","name":"web_search"}],` + user + `}`, key, 400,
			"invalid_request_error", `tools[0].type: "web_search_20250305"`},
		{"tool without schema", `{"model":"local","max_tokens":100,"tools":[{"name":"f"}],` + user + `}`, key, 400,
			"invalid_request_error", "tools[0].input_schema: required"},
		{"tool name", `{"model":"local","max_tokens":100,"tools":[{"name":"a b","input_schema":{}}],` + user + `}`, key, 400,
			"invalid_request_error", `tools[0].name: "a b", want 1 to 128 letters`},
		{"tool choice", `{"model":"local","max_tokens":100,"tool_choice":{"type":"some"},` + user + `}`, key, 400,
			"invalid_request_error", `tool_choice.type: "some", want auto, any, tool or none`},
		{"tool choice name", `{"model":"local","max_tokens":100,"tool_choice":{"type":"tool"},` + user + `}`, key, 400,
			"invalid_request_error", "tool_choice.name: required"},
		{"assistant last", `{"model":"local","max_tokens":100,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, key, 400,
			"invalid_request_error", "messages[1]: the last message must be a user message (an assistant prefill is not supported)"},
		{"results and text", `{"model":"local","max_tokens":100,"messages":[{"role":"user","content":"a"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"},{"type":"text","text":"and?"}]}]}`, key, 400,
			"invalid_request_error", "tool results and a new user message together"},
		{"results the proxy never asked for", `{"model":"local","max_tokens":100,"messages":[{"role":"user","content":"a"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`, nil, 400,
			"invalid_request_error", "no conversation of this proxy holds the tool_use blocks they answer"},
		{"tool_use from the user", `{"model":"local","max_tokens":100,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`,
			key, 400, "invalid_request_error", "messages[0].content[0]: a tool_use block in a user message"},
		{"body over the limit", `{"model":"local","max_tokens":100,"messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`,
			key, 413, "request_too_large", fmt.Sprintf("%d bytes", 64<<10)},
		{"unknown branch", ok, []string{ProxyBranchHeader, "01M7ZZZZZZZZZZZZZZZZZZZZZZ"}, 404, "not_found_error", "branch"},
		{"bad idempotency key", ok, append([]string{"Idempotency-Key", strings.Repeat("k", persistence.MaxIdempotencyKey+1)}, key...), 400,
			"invalid_request_error", "Idempotency-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, e, _ := postAnthropic(t, ts.URL, tc.body, tc.headers...)
			if st != tc.status || e.Type != "error" || e.Error.Type != tc.typ || !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("%d %+v, want %d %s %q", st, e, tc.status, tc.typ, tc.msg)
			}
		})
	}
	// Refused before anything was made.
	if ss, err := ts.rt.DB().Sessions(context.Background()); err != nil || len(ss) != 0 {
		t.Errorf("sessions after the refusals: %d, %v; want none", len(ss), err)
	}
	// Not served: in Anthropic's shape too.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/messages/batches", strings.NewReader(ok))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e anthropicErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 404 || e.Type != "error" || e.Error.Type != "not_found_error" {
		t.Errorf("batches: %d %+v", resp.StatusCode, e)
	}
	// The SDK reports them as its API error, with the status and type.
	cl, _ := anthropicClient(t, ts.URL)
	_, err = cl.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "local", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}},
		option.WithHeader(ProxyBranchHeader, "01M7ZZZZZZZZZZZZZZZZZZZZZZ"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type() != "not_found_error" {
		t.Errorf("SDK: %v, want a 404 not_found_error", err)
	}
}

// With tokens configured, /v1/messages takes the token as the Anthropic
// SDKs send their key (x-api-key) as well as a bearer token; without
// one it is 401 authentication_error.
func TestAnthropicMessagesAuth(t *testing.T) {
	ts := newTestServer(t, Options{Tokens: []string{"s3cret"}}, 0)
	body := `{"model":"local","max_tokens":100,"metadata":{"user_id":"auth"},"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"none", nil, 401},
		{"wrong x-api-key", []string{"X-Api-Key", "nope"}, 401},
		{"wrong bearer, no key", []string{"Authorization", "Bearer nope"}, 401},
		{"x-api-key", []string{"X-Api-Key", "s3cret"}, 200},
		{"bearer", []string{"Authorization", "Bearer s3cret"}, 200},
	} {
		st, e, h := postAnthropic(t, ts.URL, body, tc.headers...)
		if st != tc.status || (st == 401 && (e.Error.Type != "authentication_error" || h.Get("WWW-Authenticate") == "")) {
			t.Errorf("%s: %d %+v, want %d", tc.name, st, e, tc.status)
		}
	}
	// x-api-key opens the rest of the API too.
	if st := ts.call(t, "GET", "/v1/sessions", nil, nil, "X-Api-Key", "s3cret"); st != 200 {
		t.Errorf("GET /v1/sessions with x-api-key: %d", st)
	}
	cl, _ := anthropicClient(t, ts.URL, option.WithAPIKey("s3cret"))
	msg, err := cl.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "local", MaxTokens: 100,
		Metadata: anthropic.MetadataParam{UserID: anthropic.String("auth")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if err != nil || len(msg.Content) != 1 {
		t.Fatalf("SDK with its API key set to the token: %+v, %v", msg, err)
	}
	cl, _ = anthropicClient(t, ts.URL, option.WithAPIKey("wrong"))
	_, err = cl.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "local", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Type() != "authentication_error" {
		t.Errorf("SDK with a wrong key: %v", err)
	}
}

// A conversation busy with a turn answers 409 with Retry-After when the
// proxy does not queue, and past its queue 429 rate_limit_error.
func TestAnthropicMessagesBusy(t *testing.T) {
	t.Parallel()
	for _, queue := range []int{0, 1} {
		t.Run(fmt.Sprintf("queue=%d", queue), func(t *testing.T) {
			block := make(chan struct{})
			opts := testOptions(Options{})
			opts.ProxyQueue = queue
			ts := newTestServerOpts(t, opts, 0, func(c *actors.Config) {
				c.Provider = fake.New(fake.Step{Reply: "first", Block: block}, fake.Step{Reply: "next"})
			})
			srv := ts.Config.Handler.(*Server)
			body := `{"model":"local","max_tokens":100,"metadata":{"conversation":"busy"},"messages":[{"role":"user","content":"hi"}]}`
			first := make(chan int, 2)
			go func() { first <- statusOf(ts.URL+"/v1/messages", body) }()
			var branch messages.BranchID
			pollUntil(t, "the first turn to run", func() bool {
				tgt, err := ts.rt.DB().ProxyLookup(context.Background(), "", persistence.ProxyByKey, []byte("busy"))
				if err != nil {
					return false
				}
				branch = tgt.Branch
				info, err := ts.rt.Inspect(context.Background(), branch)
				return err == nil && info.InFlight != nil
			})
			wantStatus, wantType := http.StatusConflict, "invalid_request_error"
			if queue > 0 {
				go func() {
					first <- statusOf(ts.URL+"/v1/messages", body)
				}()
				pollUntil(t, "a request to wait", func() bool { return srv.proxy.queues.waiting(branch) == 1 })
				wantStatus, wantType = http.StatusTooManyRequests, "rate_limit_error"
			}
			st, e, h := postAnthropic(t, ts.URL, body)
			if st != wantStatus || e.Error.Type != wantType || h.Get("Retry-After") == "" {
				t.Errorf("a request while the conversation is busy: %d %+v, Retry-After %q; want %d %s", st, e, h.Get("Retry-After"), wantStatus, wantType)
			}
			close(block)
			for range max(queue, 0) + 1 {
				if st := <-first; st != 200 {
					t.Errorf("a request let through: %d", st)
				}
			}
		})
	}
}

// statusOf posts body to url and returns the answer's status (0 if
// none came); safe to call from any goroutine.
func statusOf(url, body string) int {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// pollUntil polls cond until it holds, failing after a deadline.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A turn that fails answers as Anthropic's API does, so that its SDK
// reports an API error: before any text, an error status (streamed or
// not); after some text, an error event ending the stream.
func TestAnthropicMessagesFailedTurns(t *testing.T) {
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
		midway  bool
		typ     string
		message string
	}{
		{"context too large", fake.New(), huge, 422, false, "invalid_request_error", "context too large"},
		{"provider 401", fake.New(fake.Step{Err: unauthorized}), "hello", 502, false, "api_error", "status 401"},
		{"midway", fake.New(midway), "hello", 502, true, "api_error", "the model crashed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, _ := failingServer(t, tc.f)
			cl, _ := anthropicClient(t, ts.URL, option.WithHeader(ProxyConversationHeader, "failing"))
			params := anthropic.MessageNewParams{Model: "local", MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(tc.text))}}
			isAPIError := func(where string, err error) {
				t.Helper()
				var ae *anthropic.Error
				if !errors.As(err, &ae) || ae.StatusCode != tc.status || string(ae.Type()) != tc.typ || !strings.Contains(ae.Error(), tc.message) {
					t.Errorf("%s: %v, want an API error %d %s %q", where, err, tc.status, tc.typ, tc.message)
				}
			}
			_, err := cl.Messages.New(ctx, params)
			isAPIError("message", err)
			s := cl.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.midway {
				isAPIError("stream", s.Err())
			} else {
				var ae *anthropic.Error
				if err := s.Err(); !errors.As(err, &ae) || string(ae.Type()) != tc.typ || !strings.Contains(ae.Error(), tc.message) ||
					len(acc.Content) != 1 || acc.Content[0].Text != "half an answer" {
					t.Errorf("stream: %v after %+v, want an error event saying %q after the text", err, acc.Content, tc.message)
				}
			}
			s.Close()
		})
	}
}

// The streamed answer is Anthropic's event stream exactly: each event's
// name is its data's type, text deltas in one text block at index 0.
func TestAnthropicMessagesStreamWire(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	req, _ := http.NewRequest("POST", ts.URL+"/v1/messages", strings.NewReader(
		`{"model":"local","max_tokens":100,"stream":true,"metadata":{"user_id":"wire"},"messages":[{"role":"user","content":"say \"quoted\" things"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get(ProxyBranchHeader) == "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	sc := bufio.NewScanner(resp.Body)
	var names []string
	var text strings.Builder
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Index *int   `json:"index"`
			Delta struct {
				Type       string  `json:"type"`
				Text       string  `json:"text"`
				StopReason *string `json:"stop_reason"`
			} `json:"delta"`
			Usage *anthropicUsage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type != name {
			t.Fatalf("event %q data %q: %v", name, data, err)
		}
		names = append(names, name)
		switch name {
		case "content_block_delta":
			if *ev.Index != 0 || ev.Delta.Type != "text_delta" {
				t.Errorf("delta %s", data)
			}
			text.WriteString(ev.Delta.Text)
		case "message_delta":
			if ev.Delta.StopReason == nil || *ev.Delta.StopReason != "end_turn" || ev.Usage == nil {
				t.Errorf("message_delta %s", data)
			}
		}
	}
	if !strings.Contains(text.String(), `say \"quoted\" things`) { // the local provider quotes the message
		t.Errorf("text %q", text.String())
	}
	if got := strings.Join(names, ","); !strings.HasPrefix(got, "message_start,content_block_start,content_block_delta,") ||
		!strings.HasSuffix(got, ",content_block_delta,content_block_stop,message_delta,message_stop") {
		t.Errorf("events %s", got)
	}
}

// anthropicUpstream is a server whose runtime's model is the Anthropic
// provider against a fake Anthropic API playing replies.
func anthropicUpstream(t *testing.T, replies ...fakeapi.Reply) (*testServer, *fakeapi.Server) {
	t.Helper()
	up := fakeapi.New(replies...)
	t.Cleanup(up.Close)
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider = anthropicprovider.New(anthropicprovider.Options{BaseURL: up.URL, APIKey: "upstream-key"})
		c.Model = "claude-upstream"
	})
	return ts, up
}

// anthropicUpstreamRequest is the part of a request to the fake Anthropic API
// the tests look at.
type anthropicUpstreamRequest struct {
	System   json.RawMessage `json:"system"`
	Tools    []map[string]any
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func (u anthropicUpstreamRequest) systemText() string {
	var s string
	if json.Unmarshal(u.System, &s) == nil {
		return s
	}
	var blocks []struct{ Text string }
	_ = json.Unmarshal(u.System, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text + "\n")
	}
	return b.String()
}

// blocks returns the upstream messages' blocks as "role:type:text-or-id"
// strings (a tool_result's text is its content's).
func (u anthropicUpstreamRequest) blocks() []string {
	var out []string
	for _, m := range u.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			out = append(out, m.Role+":text:"+s)
			continue
		}
		var bs []struct {
			Type, Text, ID string
			ToolUseID      string `json:"tool_use_id"`
			Content        json.RawMessage
		}
		_ = json.Unmarshal(m.Content, &bs)
		for _, b := range bs {
			switch b.Type {
			case "text":
				out = append(out, m.Role+":text:"+b.Text)
			case "tool_use":
				out = append(out, m.Role+":tool_use:"+b.ID)
			case "tool_result":
				var text string
				if json.Unmarshal(b.Content, &text) != nil {
					var parts []struct{ Text string }
					_ = json.Unmarshal(b.Content, &parts)
					for _, p := range parts {
						text += p.Text
					}
				}
				out = append(out, m.Role+":tool_result:"+b.ToolUseID+":"+text)
			default:
				out = append(out, m.Role+":"+b.Type)
			}
		}
	}
	return out
}

func upstreamRequests(t *testing.T, up *fakeapi.Server) []anthropicUpstreamRequest {
	t.Helper()
	var out []anthropicUpstreamRequest
	for i, r := range up.Requests() {
		var u anthropicUpstreamRequest
		if err := json.Unmarshal(r.Body, &u); err != nil {
			t.Fatalf("upstream request %d: %v", i, err)
		}
		out = append(out, u)
	}
	return out
}

const anthropicLoopSystem = "You are a weather assistant. Use the tools."

var loopSchemas = map[string]map[string]any{
	"get_weather": {"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}},
	"get_time":    {"type": "object", "properties": map[string]any{"tz": map[string]any{"type": "string"}}, "required": []any{"tz"}},
}

func loopTools() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("The weather of a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}},
		{OfTool: &anthropic.ToolParam{Name: "get_time", Description: anthropic.String("The time in a time zone"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"tz": map[string]any{"type": "string"}}, Required: []string{"tz"}}}},
	}
}

// checkUpstream checks that an upstream request carries the client's
// system prompt and tools as sent.
func checkUpstream(t *testing.T, step int, u anthropicUpstreamRequest) {
	t.Helper()
	if !strings.Contains(u.systemText(), anthropicLoopSystem) {
		t.Errorf("step %d: upstream system %s lacks the client's %q", step, u.System, anthropicLoopSystem)
	}
	names := map[string]bool{}
	for _, tool := range u.Tools {
		name, _ := tool["name"].(string)
		want, ok := loopSchemas[name]
		if !ok {
			continue // one of the runtime's own
		}
		names[name] = true
		if !reflect.DeepEqual(tool["input_schema"], any(want)) {
			t.Errorf("step %d: upstream tool %s schema %v, want %v", step, name, tool["input_schema"], want)
		}
		if d, _ := tool["description"].(string); !strings.HasPrefix(d, "The ") {
			t.Errorf("step %d: upstream tool %s description %q", step, name, d)
		}
	}
	if len(names) != 2 {
		t.Errorf("step %d: upstream tools %v, want get_weather and get_time", step, u.Tools)
	}
}

// The scripted upstream of the tool loop: a tool call with some text, a
// second tool call, the final text; then the answer to a follow-up.
func loopUpstream() []fakeapi.Reply {
	return []fakeapi.Reply{
		fakeapi.AnthropicToolUse("Let me look.", []fakeapi.AnthropicCall{{ID: "toolu_w", Name: "get_weather", Input: `{"city":"Paris"}`}}, 2),
		fakeapi.AnthropicToolUse("", []fakeapi.AnthropicCall{{ID: "toolu_t", Name: "get_time", Input: `{"tz":"Europe/Paris"}`}}, 1),
		fakeapi.AnthropicText([]string{"It is sunny ", "at noon."}, "end_turn"),
		fakeapi.AnthropicText([]string{"You're welcome."}, "end_turn"),
	}
}

// A tool-calling agent loop through /v1/messages with the official SDK,
// the client resending its whole history each time and naming no
// conversation: the model calls a tool, the client sends its result,
// the model calls another, the client sends that result, the model
// answers; each request after the first continues the same turn (one
// branch, one turn), and the system prompt and tools reach the upstream
// as sent at every step; usage is the upstream's; a follow-up question
// is a new turn of the same conversation.
//
// It needs the runtime's client turns (actors.ClientTurn, Update.Awaiting
// and Calls, SubmitToolResults, Update.Usage and Model) and the proxy's
// conversation index (a request without a key finds the conversation it
// continues).
func TestAnthropicMessagesToolLoop(t *testing.T) {
	testAnthropicToolLoop(t, false)
}

// TestAnthropicMessagesToolLoopStreamed is TestAnthropicMessagesToolLoop
// streamed, each answer read with the SDK's accumulator.
func TestAnthropicMessagesToolLoopStreamed(t *testing.T) {
	testAnthropicToolLoop(t, true)
}

func testAnthropicToolLoop(t *testing.T, stream bool) {
	ts, up := anthropicUpstream(t, loopUpstream()...)
	cl, branches := anthropicClient(t, ts.URL)
	ctx := context.Background()
	history := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What's the weather in Paris, and the time there?"))}
	step := 0
	ask := func() *anthropic.Message {
		t.Helper()
		step++
		params := anthropic.MessageNewParams{Model: "claude-upstream", MaxTokens: 1024, Messages: history,
			System: []anthropic.TextBlockParam{{Text: anthropicLoopSystem}}, Tools: loopTools(),
			ToolChoice: anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}}
		if !stream {
			msg, err := cl.Messages.New(ctx, params)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			return msg
		}
		s := cl.Messages.NewStreaming(ctx, params)
		defer s.Close()
		acc := &anthropic.Message{}
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		return acc
	}
	type call struct{ id, name, input string }
	expect := func(step int, msg *anthropic.Message, text string, stop anthropic.StopReason, calls []call, out int64) {
		t.Helper()
		var gotText string
		var gotCalls []call
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				gotText += b.Text
			case "tool_use":
				gotCalls = append(gotCalls, call{b.ID, b.Name, string(b.Input)})
			}
		}
		if gotText != text || msg.StopReason != stop || !reflect.DeepEqual(gotCalls, calls) {
			t.Fatalf("step %d: text %q, stop %s, calls %v; want %q, %s, %v", step, gotText, msg.StopReason, gotCalls, text, stop, calls)
		}
		// The upstream's usage and model, not the proxy's guesses.
		if msg.Usage.InputTokens != fakeapi.AnthropicInputTokens || msg.Usage.OutputTokens != out {
			t.Errorf("step %d: usage %d in / %d out, want %d / %d", step, msg.Usage.InputTokens, msg.Usage.OutputTokens,
				fakeapi.AnthropicInputTokens, out)
		}
		if !stream && msg.Model != fakeapi.AnthropicModel {
			t.Errorf("step %d: model %q, want the upstream's %q", step, msg.Model, fakeapi.AnthropicModel)
		}
	}

	msg := ask()
	// Output tokens: fakeapi counts one per delta (text 1, input 2).
	expect(1, msg, "Let me look.", anthropic.StopReasonToolUse, []call{{"toolu_w", "get_weather", `{"city":"Paris"}`}}, 3)
	first := msg.ID
	ids := []string{msg.ID}
	history = append(history, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_w", "18°C, sunny", false)))
	msg = ask()
	expect(2, msg, "", anthropic.StopReasonToolUse, []call{{"toolu_t", "get_time", `{"tz":"Europe/Paris"}`}}, 1)
	ids = append(ids, msg.ID)
	history = append(history, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_t", "12:00", false)))
	msg = ask()
	expect(3, msg, "It is sunny at noon.", anthropic.StopReasonEndTurn, nil, 2)
	ids = append(ids, msg.ID)
	// One id per step, each naming the turn.
	if want := []string{first, first + "_1", first + "_2"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("the steps' ids %q, want %q", ids, want)
	}

	ups := upstreamRequests(t, up)
	if len(ups) != 3 {
		t.Fatalf("%d upstream requests, want 3", len(ups))
	}
	for i, u := range ups {
		checkUpstream(t, i+1, u)
	}
	// Each step's upstream request holds the calls and results so far,
	// after the user's question.
	question := "user:text:What's the weather in Paris, and the time there?"
	wants := [][]string{
		{question},
		{question, "assistant:text:Let me look.", "assistant:tool_use:toolu_w", "user:tool_result:toolu_w:18°C, sunny"},
		{question, "assistant:text:Let me look.", "assistant:tool_use:toolu_w", "user:tool_result:toolu_w:18°C, sunny",
			"assistant:tool_use:toolu_t", "user:tool_result:toolu_t:12:00"},
	}
	for i, u := range ups {
		got := u.blocks()
		if len(got) < len(wants[i]) || !reflect.DeepEqual(got[len(got)-len(wants[i]):], wants[i]) {
			t.Errorf("step %d: upstream messages end %q, want %q", i+1, got, wants[i])
		}
	}

	// One conversation, one turn.
	hs := branches.all()
	for _, h := range hs {
		if h != hs[0] {
			t.Fatalf("branches %v, want one", hs)
		}
	}
	b, err := messages.ParseID[messages.BranchID](hs[0])
	if err != nil {
		t.Fatal(err)
	}
	turns, err := ts.rt.DB().TurnRows(ctx, b, 0, 10)
	if err != nil || len(turns) != 1 || first != "msg_"+turns[0].ID.String() {
		t.Fatalf("turns %+v, %v; want the one turn of %s", turns, err, first)
	}

	// A follow-up question, the whole history resent: a new turn of the
	// same conversation.
	history = append(history, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Thanks!")))
	msg = ask()
	expect(4, msg, "You're welcome.", anthropic.StopReasonEndTurn, nil, 1)
	if hs := branches.all(); hs[len(hs)-1] != hs[0] {
		t.Errorf("the follow-up went to branch %s, want %s", hs[len(hs)-1], hs[0])
	}
	if turns, _ := ts.rt.DB().TurnRows(ctx, b, 0, 10); len(turns) != 2 {
		t.Errorf("%d turns after the follow-up, want 2", len(turns))
	}
	if ups := upstreamRequests(t, up); len(ups) != 4 {
		t.Errorf("%d upstream requests, want 4", len(ups))
	} else {
		checkUpstream(t, 4, ups[3])
		// The turn before is pending (its messages are sent) or folded:
		// the test server folds every turn, into a summary that keeps no
		// dialogue, so its answer is then in the transcript only.
		got := ups[3].blocks()
		if got[len(got)-1] != "user:text:Thanks!" {
			t.Errorf("follow-up upstream messages %q: the last is not the new question", got)
		}
		if !strings.Contains(strings.Join(got, "|"), "It is sunny at noon.") {
			if row, err := ts.rt.DB().TurnRow(ctx, b, turns[0].ID); err != nil ||
				row.Phase != messages.PhaseStateCommitted && row.Phase != messages.PhaseDone {
				t.Errorf("follow-up upstream messages %q: the turn before is not among them, and not folded (%+v, %v)", got, row, err)
			}
		}
	}
}

// sseBuffer collects events as sseStream writes them.
type sseBuffer struct{ bytes.Buffer }

func (b *sseBuffer) send(event string, v any) {
	data, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			panic(err)
		}
	}
	fmt.Fprintf(b, "event: %s\ndata: %s\n\n", event, data)
}

// readAnthropicStream reads events with the SDK's stream decoder and
// accumulator.
func readAnthropicStream(t *testing.T, wire []byte) (*anthropic.Message, []string, error) {
	t.Helper()
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(wire))}
	s := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(resp), nil)
	acc := &anthropic.Message{}
	var types []string
	for s.Next() {
		types = append(types, s.Current().Type)
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatalf("accumulate after %v: %v", types, err)
		}
	}
	return acc, types, s.Err()
}

// The answer of a step that calls the client's tools, streamed and not,
// as the SDK reads it: the text, then a tool_use block per call with its
// input, stop_reason tool_use, the usage and model the runtime reports.
// (Updates made here as the runtime sends them: its part is tested in
// TestAnthropicMessagesToolLoop.)
func TestAnthropicMessagesToolUseAnswer(t *testing.T) {
	t.Parallel()
	calls := []messages.ToolCall{
		{CallID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\": \"Paris\"}"`)},
		{CallID: "toolu_2", Name: "get_time", Arguments: nil},
	}
	end := actors.Update{Done: true, Phase: messages.PhaseResponding, Awaiting: true, Calls: calls,
		Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"},
		Usage:   providers.Usage{InputTokens: 25, OutputTokens: 7}, Model: "claude-fake-1"}
	check := func(where string, m *anthropic.Message) {
		t.Helper()
		if m.ID != "msg_x" || m.Model != "claude-fake-1" || m.StopReason != anthropic.StopReasonToolUse ||
			m.Usage.InputTokens != 25 || m.Usage.OutputTokens != 7 || len(m.Content) != 3 ||
			m.Content[0].Type != "text" || m.Content[0].Text != "Let me look." ||
			m.Content[1].Type != "tool_use" || m.Content[1].ID != "toolu_1" || m.Content[1].Name != "get_weather" ||
			string(m.Content[1].Input) != `{"city":"Paris"}` ||
			m.Content[2].Type != "tool_use" || m.Content[2].ID != "toolu_2" || string(m.Content[2].Input) != `{}` {
			t.Errorf("%s: %+v", where, m)
		}
		// Sent back as the next request's assistant message, it maps to
		// the reply the conversation remembers.
		var req anthropicRequest
		data, _ := json.Marshal(anthropic.MessageNewParams{Model: "m", MaxTokens: 1, Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("q")), m.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "18", false), anthropic.NewToolResultBlock("toolu_2", "12:00", false))}})
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatal(err)
		}
		tr, err := parseAnthropic(&req)
		if err != nil {
			t.Fatal(err)
		}
		if a := tr.msgs[1]; a.Role != "assistant" || a.Text != "Let me look." || !reflect.DeepEqual(a.Calls, []string{"toolu_1", "toolu_2"}) {
			t.Errorf("%s: sent back as %+v", where, a)
		}
		if fresh := tr.newMessages(2); len(fresh) != 2 || tr.msgs[fresh[0]].CallID != "toolu_1" || tr.msgs[fresh[1]].CallID != "toolu_2" {
			t.Errorf("%s: the results map to %+v", where, tr.msgs[2:])
		}
	}

	data, _ := json.Marshal(anthropicMessage("msg_x", "asked", "Let me look.", end))
	var m anthropic.Message
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	check("message", &m)

	var wire sseBuffer
	as := &anthropicStream{id: "msg_x", model: "asked"}
	as.update(wire.send, actors.Update{Delta: "Let me "}, true)
	as.update(wire.send, actors.Update{Delta: "look."}, false)
	as.update(wire.send, end, false)
	acc, types, err := readAnthropicStream(t, wire.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	acc.Model = "claude-fake-1" // these updates name no model, so message_start names the requested one
	check("stream", acc)
	want := "message_start,content_block_start,content_block_delta,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_stop,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"
	if got := strings.Join(types, ","); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	if as.reply.String() != "Let me look." || !as.end.Awaiting {
		t.Errorf("kept reply %q, end %+v", as.reply.String(), as.end)
	}

	// Only calls, and the other stop reasons.
	only := end
	only.Calls = calls[:1]
	data, _ = json.Marshal(anthropicMessage("msg_x", "asked", "", only))
	if !strings.Contains(string(data), `"content":[{"type":"tool_use","id":"toolu_1"`) {
		t.Errorf("calls only: %s", data)
	}
	for _, c := range []struct {
		u    actors.Update
		want string
	}{
		{actors.Update{Done: true, Phase: messages.PhaseResponseFinalized, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}}, "end_turn"},
		{actors.Update{Done: true, Outcome: messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}}, "max_tokens"},
		{actors.Update{Done: true, Outcome: messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "refusal"}}, "refusal"},
		{actors.Update{Done: true, Outcome: messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "content_filter"}}, "refusal"},
		{actors.Update{Done: true, Outcome: messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "context_window"}}, "model_context_window_exceeded"},
	} {
		if got := anthropicStopReason(c.u); got != c.want {
			t.Errorf("anthropicStopReason(%+v) = %s, want %s", c.u.Outcome, got, c.want)
		}
	}
}

// Concurrent requests on one conversation (LangChain's batch() through
// the Anthropic SDK) are served one at a time, in the order they came,
// each as its own turn with the client's system prompt and tools.
func TestAnthropicMessagesConcurrent(t *testing.T) {
	block := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(block) })
	up := fakeapi.NewFunc(func(n int, r fakeapi.Request) fakeapi.Reply {
		var u anthropicUpstreamRequest
		_ = json.Unmarshal(r.Body, &u)
		if n == 1 {
			<-block
		}
		bs := u.blocks()
		return fakeapi.AnthropicText([]string{"answer to " + strings.TrimPrefix(bs[len(bs)-1], "user:text:")}, "end_turn")
	})
	t.Cleanup(up.Close)
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider = anthropicprovider.New(anthropicprovider.Options{BaseURL: up.URL, APIKey: "upstream-key"})
		c.Model = "claude-upstream"
	})
	srv := ts.Config.Handler.(*Server)
	cl, branches := anthropicClient(t, ts.URL, option.WithHeader(ProxyConversationHeader, "concurrent"))
	ctx := context.Background()
	params := func(q string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "claude-upstream", MaxTokens: 256, Tools: loopTools(),
			System:   []anthropic.TextBlockParam{{Text: anthropicLoopSystem}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))}}
	}
	if _, err := cl.Messages.New(ctx, params("warm up")); err != nil {
		t.Fatal(err)
	}
	branch, err := messages.ParseID[messages.BranchID](branches.all()[0])
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	type answer struct {
		text string
		err  error
	}
	answers := make([]chan answer, n)
	for i := range n {
		answers[i] = make(chan answer, 1)
		go func() {
			m, err := cl.Messages.New(ctx, params(fmt.Sprintf("question %d", i)))
			if err != nil {
				answers[i] <- answer{err: err}
				return
			}
			answers[i] <- answer{text: m.Content[0].Text}
		}()
		if i == 0 {
			pollUntil(t, "the first request to reach the upstream", func() bool { return up.Count() == 2 })
			continue
		}
		// One at a time, so that the order they came in is known.
		pollUntil(t, fmt.Sprintf("request %d to wait", i), func() bool { return srv.proxy.queues.waiting(branch) == i })
	}
	once.Do(func() { close(block) })
	for i := range n {
		a := <-answers[i]
		if want := fmt.Sprintf("answer to question %d", i); a.err != nil || a.text != want {
			t.Errorf("request %d: %q, %v; want %q", i, a.text, a.err, want)
		}
	}
	var order []string
	for i, u := range upstreamRequests(t, up) {
		bs := u.blocks()
		order = append(order, strings.TrimPrefix(bs[len(bs)-1], "user:text:"))
		if !strings.Contains(u.systemText(), anthropicLoopSystem) || len(u.Tools) != len(loopTools()) {
			t.Errorf("upstream request %d: system %q, %d tools; want the client's", i, u.systemText(), len(u.Tools))
		}
	}
	if want := "warm up,question 0,question 1,question 2,question 3,question 4"; strings.Join(order, ",") != want {
		t.Errorf("the upstream got %q, want %q", order, want)
	}
	if turns, _ := ts.rt.DB().TurnRows(ctx, branch, 0, 10); len(turns) != n+1 {
		t.Errorf("%d turns on the conversation, want %d", len(turns), n+1)
	}
}
