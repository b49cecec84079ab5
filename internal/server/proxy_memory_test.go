package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	oai "github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	anthropicprovider "github.com/contextinfinity/ctxinf/providers/anthropic"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// Through the proxy the memory tools are the runtime's: offered to the
// model beside the client's tools, run inside the runtime, and neither
// their calls nor their results reach the client, which gets the answer.
func TestProxyHidesMemoryTools(t *testing.T) {
	t.Parallel()
	args, _ := json.Marshal(map[string]string{"query": "deploy target"})
	f := fake.New(
		fake.Step{Items: messages.Items{messages.ToolCall{CallID: "m1", Name: actors.SearchMemoryTool, Arguments: args}},
			Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}},
		fake.Step{Reply: "eu-west-1"},
	)
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider, c.MemoryTools = f, true
	})
	body := map[string]any{"model": "local", "messages": []any{map[string]any{"role": "user", "content": "where do we deploy?"}},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "weather",
			"parameters": map[string]any{"type": "object"}}}}}
	var out struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string           `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if code := ts.call(t, "POST", "/v1/chat/completions", body, &out); code != 200 {
		t.Fatalf("status %d", code)
	}
	if len(out.Choices) != 1 || out.Choices[0].Message.Content == nil || *out.Choices[0].Message.Content != "eu-west-1" ||
		len(out.Choices[0].Message.ToolCalls) != 0 || out.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer %+v, want the final answer and no tool call", out)
	}
	reqs := f.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream requests, want 2 (the search, the answer)", len(reqs))
	}
	var names []string
	for _, tool := range reqs[0].Context.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "weather") || !slices.Contains(names, actors.SearchMemoryTool) {
		t.Fatalf("upstream offered %v, want the client's tool and the memory tools", names)
	}
	cont := reqs[1].Context.Continuation
	if out, ok := cont[len(cont)-1].(messages.ToolOutput); !ok || out.CallID != "m1" || out.IsError {
		t.Fatalf("the answer step did not get the search's result: %+v", cont)
	}
}

// The memory tools through the proxy's three APIs with the official
// SDKs, streamed and not, the model being an upstream API played by
// internal/fakeapi through the runtime's adapters. The conversation:
// the user states a fact (answered "Noted."), the runtime indexes it;
// then the user asks a question, and the upstream calls search_memory
// (with some text first), then the client's get_weather; the client
// gets the text and the get_weather call only (finish reason
// tool_calls), sends its result, and the upstream calls pin_fact, then
// answers. A follow-up is a new turn of the same conversation.
//
// The client sees neither the memory tools' calls nor their results, in
// any byte of any answer; each answer's usage is the sum of the
// upstream steps that ran for it (the memory steps included: the client
// pays for them), its id the step of the client's tool loop (0, then 1
// after its tool results) and its finish reason the one of the last
// step the client sees. The upstream is offered the memory tools beside
// the client's, and each step gets the results of the calls before it:
// the search's hits as untrusted memory artifacts holding the fact, the
// client's result, the pin's id. The question's turn has its four
// provider steps, and the pin is on the branch.

const (
	memSeed     = "The deploy target is eu-west-1."
	memQuestion = "Where do we deploy, and what is the weather there?"
	memSearch   = `{"query":"deploy target"}`
	memPin      = `{"fact":"The deploy target is eu-west-1."}`
	memWeather  = `{"city":"Dublin"}`
	memResult   = "12C, rain"
)

// memAnswers are the answers the client must get, in order: text,
// finish reason, calls, and how many upstream steps (whose usage it sums)
// and output tokens (fakeapi counts one per delta) they stand for.
var memAnswers = []struct {
	text, finish  string
	calls         [][3]string
	steps, output int
}{
	{text: "Noted.", finish: "stop", steps: 1, output: 1},
	{text: "Let me recall. ", finish: "tool_calls", calls: [][3]string{{"call_w", "get_weather", memWeather}}, steps: 2, output: 3},
	{text: "eu-west-1; 12C, rain.", finish: "stop", steps: 2, output: 3},
	{text: "You're welcome.", finish: "stop", steps: 1, output: 1},
}

// The upstream's script, per API.
func memChatReplies() []fakeapi.Reply {
	return []fakeapi.Reply{
		fakeapi.ChatText("stop", "Noted."),
		fakeapi.NewChatStream().Text("Let me recall. ").
			ToolCalls(fakeapi.OpenAIToolCall{ID: "call_m1", Name: actors.SearchMemoryTool, Args: []string{memSearch}}).Finish("tool_calls"),
		fakeapi.ChatToolCalls(fakeapi.OpenAIToolCall{ID: "call_w", Name: "get_weather", Args: []string{memWeather}}),
		fakeapi.ChatToolCalls(fakeapi.OpenAIToolCall{ID: "call_p", Name: actors.PinFactTool, Args: []string{memPin}}),
		fakeapi.ChatText("stop", "eu-west-1; ", "12C, rain."),
		fakeapi.ChatText("stop", "You're welcome."),
	}
}

func memResponsesReplies() []fakeapi.Reply {
	return []fakeapi.Reply{
		fakeapi.ResponsesText("Noted."),
		fakeapi.NewResponsesStream().Text("Let me recall. ").
			FunctionCalls(fakeapi.OpenAIToolCall{ID: "call_m1", Name: actors.SearchMemoryTool, Args: []string{memSearch}}).Completed(),
		fakeapi.ResponsesFunctionCalls(fakeapi.OpenAIToolCall{ID: "call_w", Name: "get_weather", Args: []string{memWeather}}),
		fakeapi.ResponsesFunctionCalls(fakeapi.OpenAIToolCall{ID: "call_p", Name: actors.PinFactTool, Args: []string{memPin}}),
		fakeapi.ResponsesText("eu-west-1; ", "12C, rain."),
		fakeapi.ResponsesText("You're welcome."),
	}
}

func memAnthropicReplies() []fakeapi.Reply {
	return []fakeapi.Reply{
		fakeapi.AnthropicText([]string{"Noted."}, "end_turn"),
		fakeapi.AnthropicToolUse("Let me recall. ", []fakeapi.AnthropicCall{{ID: "call_m1", Name: actors.SearchMemoryTool, Input: memSearch}}, 1),
		fakeapi.AnthropicToolUse("", []fakeapi.AnthropicCall{{ID: "call_w", Name: "get_weather", Input: memWeather}}, 1),
		fakeapi.AnthropicToolUse("", []fakeapi.AnthropicCall{{ID: "call_p", Name: actors.PinFactTool, Input: memPin}}, 1),
		fakeapi.AnthropicText([]string{"eu-west-1; ", "12C, rain."}, "end_turn"),
		fakeapi.AnthropicText([]string{"You're welcome."}, "end_turn"),
	}
}

// memUpstreamServer is a test server with the memory tools on whose
// model is provider against up.
func memUpstreamServer(t *testing.T, up *fakeapi.Server, provider providers.Provider) *testServer {
	t.Helper()
	t.Cleanup(up.Close)
	return newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider, c.Model, c.MemoryTools = provider, "model-e2e", true
	})
}

// answerRecorder is an http.RoundTripper that keeps every answer's body,
// whole, as the client received it.
type answerRecorder struct {
	mu     sync.Mutex
	bodies []string
}

func (b *answerRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.bodies = append(b.bodies, string(data))
	b.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

func (b *answerRecorder) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.bodies)
}

// settleBranch waits until what the branch named by header holds is
// indexed (the fact the search must find).
func settleBranch(t *testing.T, ts *testServer, header string) {
	t.Helper()
	b, err := messages.ParseID[messages.BranchID](header)
	if err != nil {
		t.Fatalf("branch header %q: %v", header, err)
	}
	if err := ts.rt.Settle(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// upstreamOutputs are the tool outputs an upstream request carries, by
// call id, in the API's shape (openai.APIChat, APIResponses, or
// "anthropic").
func upstreamOutputs(t *testing.T, api string, r fakeapi.Request) map[string]string {
	t.Helper()
	out := map[string]string{}
	if api == "anthropic" {
		var u anthropicUpstreamRequest
		if err := json.Unmarshal(r.Body, &u); err != nil {
			t.Fatalf("upstream request %s: %v", r.Body, err)
		}
		for _, b := range u.blocks() {
			if rest, ok := strings.CutPrefix(b, "user:tool_result:"); ok {
				id, text, _ := strings.Cut(rest, ":")
				out[id] = text
			}
		}
		return out
	}
	for _, it := range parseUpstream(t, r).items() {
		switch {
		case it.Role == "tool":
			out[it.ToolCallID] = textOf(it.Content)
		case it.Type == "function_call_output":
			out[it.CallID] = textOf(it.Output)
		}
	}
	return out
}

// checkMemoryRun checks the answers a client got (ids made with prefix),
// the bodies it read, and what the upstream and the runtime saw.
func checkMemoryRun(t *testing.T, api, prefix string, ts *testServer, up *fakeapi.Server, inputTokens int, answers []answerOf, bodies []string) {
	t.Helper()
	if len(answers) != len(memAnswers) {
		t.Fatalf("%d answers, want %d", len(answers), len(memAnswers))
	}
	for i, a := range answers {
		w := memAnswers[i]
		if a.text != w.text || a.finish != w.finish || !reflect.DeepEqual(a.calls, w.calls) {
			t.Errorf("answer %d: text %q, finish %q, calls %v; want %q, %q, %v", i, a.text, a.finish, a.calls, w.text, w.finish, w.calls)
		}
		if a.input != w.steps*inputTokens || a.output != w.output || (a.total != 0 && a.total != a.input+a.output) {
			t.Errorf("answer %d: usage in %d, out %d, total %d; want the %d upstream steps' %d, %d", i, a.input, a.output, a.total,
				w.steps, w.steps*inputTokens, w.output)
		}
		if a.branch == "" || a.branch != answers[0].branch {
			t.Errorf("answer %d on branch %q, answer 0 on %q: want one conversation", i, a.branch, answers[0].branch)
		}
	}
	// Ids: the question's two answers are steps 0 and 1 of one turn, as
	// the client counts them (the memory steps between are not its).
	var turns []messages.TurnID
	for i, a := range answers {
		turn, n, ok := parseStepID(prefix, a.id)
		if want := []int{0, 0, 1, 0}[i]; !ok || n != want {
			t.Errorf("answer %d: id %q, want %s<turn> step %d", i, a.id, prefix, want)
		}
		turns = append(turns, turn)
	}
	if turns[1] != turns[2] || turns[0] == turns[1] || turns[3] == turns[1] {
		t.Errorf("answer ids %v: want the question's two answers of one turn, the others of their own", turns)
	}
	for i, body := range bodies {
		for _, hidden := range []string{actors.SearchMemoryTool, actors.PinFactTool, actors.UnpinFactTool, "call_m1", "call_p", "memory_artifact", "pinned as id"} {
			if strings.Contains(body, hidden) {
				t.Errorf("answer body %d shows the client %q:\n%s", i, hidden, body)
			}
		}
	}

	reqs := up.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d upstream requests, want 6", len(reqs))
	}
	for _, name := range []string{"get_weather", actors.SearchMemoryTool, actors.PinFactTool, actors.UnpinFactTool} {
		if !strings.Contains(string(reqs[1].Body), `"`+name+`"`) {
			t.Errorf("the question's first upstream request does not offer %s: %s", name, reqs[1].Body)
		}
	}
	outs := []map[string]string{upstreamOutputs(t, api, reqs[2]), upstreamOutputs(t, api, reqs[3]), upstreamOutputs(t, api, reqs[4])}
	if o := outs[0]["call_m1"]; !strings.Contains(o, "<memory_artifact") || !strings.Contains(o, `trust="untrusted"`) || !strings.Contains(o, "eu-west-1") {
		t.Errorf("the step after search_memory got %q for it, want the fact as an untrusted memory artifact", o)
	}
	if o := outs[1]["call_w"]; o != memResult {
		t.Errorf("the step after the client's results got %q for get_weather, want %q", o, memResult)
	}
	if o := outs[2]["call_p"]; !strings.HasPrefix(o, "pinned as id ") {
		t.Errorf("the step after pin_fact got %q for it, want the pin's id", o)
	}
	b, _ := messages.ParseID[messages.BranchID](answers[0].branch)
	pins, err := ts.rt.Pins(context.Background(), b)
	if err != nil || len(pins) != 1 || pins[0].Fact != "The deploy target is eu-west-1." {
		t.Errorf("pins %+v, %v; want the fact pin_fact pinned", pins, err)
	}
	steps, err := ts.rt.Steps(context.Background(), turns[1])
	if err != nil || len(steps) != 4 {
		t.Errorf("the question's turn has %d steps (%v), want 4: the search, the client's call, the pin, the answer", len(steps), err)
	}
}

func TestProxyMemoryToolsChat(t *testing.T)       { memoryToolsChat(t, false) }
func TestProxyMemoryToolsChatStream(t *testing.T) { memoryToolsChat(t, true) }

func memoryToolsChat(t *testing.T, stream bool) {
	up := fakeapi.New(memChatReplies()...)
	ts := memUpstreamServer(t, up, openai.New(openai.Options{BaseURL: up.URL + "/v1", APIKey: "sk-test", API: openai.APIChat}))
	rec := &answerRecorder{}
	cl := openAIClient(t, ts.URL, oaioption.WithHTTPClient(&http.Client{Transport: rec}))
	ctx := context.Background()
	params := oai.ChatCompletionNewParams{Model: "gpt-4o-mini", Tools: chatLoopTools(),
		Messages: []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(loopSystem), oai.UserMessage(memSeed)}}
	if stream {
		params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	}
	var answers []answerOf
	send := func() oai.ChatCompletionMessage {
		t.Helper()
		var hr *http.Response
		var c oai.ChatCompletion
		if stream {
			s := cl.Chat.Completions.NewStreaming(ctx, params, oaioption.WithResponseInto(&hr))
			var acc oai.ChatCompletionAccumulator
			for s.Next() {
				if !acc.AddChunk(s.Current()) {
					t.Fatalf("answer %d: the accumulator refused chunk %s", len(answers), s.Current().RawJSON())
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("answer %d: %v", len(answers), err)
			}
			c = acc.ChatCompletion
		} else {
			c2, err := cl.Chat.Completions.New(ctx, params, oaioption.WithResponseInto(&hr))
			if err != nil {
				t.Fatalf("answer %d: %v", len(answers), err)
			}
			c = *c2
		}
		if len(c.Choices) != 1 {
			t.Fatalf("answer %d: %d choices", len(answers), len(c.Choices))
		}
		m := c.Choices[0].Message
		a := answerOf{id: c.ID, branch: hr.Header.Get(ProxyBranchHeader), text: m.Content, finish: c.Choices[0].FinishReason,
			model: c.Model, input: int(c.Usage.PromptTokens), output: int(c.Usage.CompletionTokens), total: int(c.Usage.TotalTokens)}
		for _, tc := range m.ToolCalls {
			a.calls = append(a.calls, [3]string{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
		answers = append(answers, a)
		params.Messages = append(params.Messages, m.ToParam())
		return m
	}
	send()
	settleBranch(t, ts, answers[0].branch)
	params.Messages = append(params.Messages, oai.UserMessage(memQuestion))
	for _, tc := range send().ToolCalls {
		params.Messages = append(params.Messages, oai.ToolMessage(memResult, tc.ID))
	}
	send()
	params.Messages = append(params.Messages, oai.UserMessage("Thanks!"))
	send()
	checkMemoryRun(t, openai.APIChat, "chatcmpl-", ts, up, fakeapi.OpenAIInputTokens, answers, rec.all())
}

func TestProxyMemoryToolsResponses(t *testing.T)       { memoryToolsResponses(t, false) }
func TestProxyMemoryToolsResponsesStream(t *testing.T) { memoryToolsResponses(t, true) }

func memoryToolsResponses(t *testing.T, stream bool) {
	up := fakeapi.New(memResponsesReplies()...)
	ts := memUpstreamServer(t, up, openai.New(openai.Options{BaseURL: up.URL + "/v1", APIKey: "sk-test", API: openai.APIResponses}))
	rec := &answerRecorder{}
	cl := openAIClient(t, ts.URL, oaioption.WithHTTPClient(&http.Client{Transport: rec}))
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "gpt-4o-mini", Instructions: oai.String(loopSystem), Tools: responsesLoopTools()}
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(memSeed, responses.EasyInputMessageRoleUser)}
	var answers []answerOf
	send := func() []responses.ResponseOutputItemUnion {
		t.Helper()
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
		var hr *http.Response
		var r responses.Response
		if stream {
			s := cl.Responses.NewStreaming(ctx, params, oaioption.WithResponseInto(&hr))
			completed := false
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.completed" {
					r, completed = ev.AsResponseCompleted().Response, true
				}
			}
			if err := s.Err(); err != nil || !completed {
				t.Fatalf("answer %d: %v, completed %v", len(answers), err, completed)
			}
		} else {
			rp, err := cl.Responses.New(ctx, params, oaioption.WithResponseInto(&hr))
			if err != nil {
				t.Fatalf("answer %d: %v", len(answers), err)
			}
			r = *rp
		}
		a := answerOf{id: r.ID, branch: hr.Header.Get(ProxyBranchHeader), text: r.OutputText(), finish: "stop", model: r.Model,
			input: int(r.Usage.InputTokens), output: int(r.Usage.OutputTokens), total: int(r.Usage.TotalTokens)}
		if r.Status != "completed" {
			t.Errorf("answer %d: status %q", len(answers), r.Status)
		}
		for _, o := range r.Output {
			switch o.Type {
			case "message":
				input = append(input, responses.ResponseInputItemParamOfMessage(o.Content[0].Text, responses.EasyInputMessageRoleAssistant))
			case "function_call":
				a.finish = "tool_calls"
				a.calls = append(a.calls, [3]string{o.CallID, o.Name, o.Arguments.OfString})
				input = append(input, responses.ResponseInputItemParamOfFunctionCall(o.Arguments.OfString, o.CallID, o.Name))
			}
		}
		answers = append(answers, a)
		return r.Output
	}
	send()
	settleBranch(t, ts, answers[0].branch)
	input = append(input, responses.ResponseInputItemParamOfMessage(memQuestion, responses.EasyInputMessageRoleUser))
	for _, o := range send() {
		if o.Type == "function_call" {
			input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: oai.String(o.CallID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String(memResult)}}})
		}
	}
	send()
	input = append(input, responses.ResponseInputItemParamOfMessage("Thanks!", responses.EasyInputMessageRoleUser))
	send()
	checkMemoryRun(t, openai.APIResponses, "resp_", ts, up, fakeapi.OpenAIInputTokens, answers, rec.all())
}

func TestProxyMemoryToolsAnthropic(t *testing.T)       { memoryToolsAnthropic(t, false) }
func TestProxyMemoryToolsAnthropicStream(t *testing.T) { memoryToolsAnthropic(t, true) }

func memoryToolsAnthropic(t *testing.T, stream bool) {
	up := fakeapi.New(memAnthropicReplies()...)
	ts := memUpstreamServer(t, up, anthropicprovider.New(anthropicprovider.Options{BaseURL: up.URL, APIKey: "upstream-key"}))
	rec := &answerRecorder{}
	cl, _ := anthropicClient(t, ts.URL, anthropicoption.WithHTTPClient(&http.Client{Transport: rec}))
	ctx := context.Background()
	history := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(memSeed))}
	var answers []answerOf
	send := func() *anthropic.Message {
		t.Helper()
		var hr *http.Response
		params := anthropic.MessageNewParams{Model: "claude-upstream", MaxTokens: 1024, Messages: history,
			System: []anthropic.TextBlockParam{{Text: anthropicLoopSystem}}, Tools: loopTools()}
		msg := &anthropic.Message{}
		if stream {
			s := cl.Messages.NewStreaming(ctx, params, anthropicoption.WithResponseInto(&hr))
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("answer %d: %v", len(answers), err)
			}
			s.Close()
		} else {
			var err error
			if msg, err = cl.Messages.New(ctx, params, anthropicoption.WithResponseInto(&hr)); err != nil {
				t.Fatalf("answer %d: %v", len(answers), err)
			}
		}
		a := answerOf{id: msg.ID, branch: hr.Header.Get(ProxyBranchHeader), model: msg.Model,
			input: int(msg.Usage.InputTokens), output: int(msg.Usage.OutputTokens)}
		switch msg.StopReason {
		case anthropic.StopReasonToolUse:
			a.finish = "tool_calls"
		case anthropic.StopReasonEndTurn:
			a.finish = "stop"
		default:
			a.finish = string(msg.StopReason)
		}
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				a.text += b.Text
			case "tool_use":
				a.calls = append(a.calls, [3]string{b.ID, b.Name, string(b.Input)})
			}
		}
		answers = append(answers, a)
		history = append(history, msg.ToParam())
		return msg
	}
	send()
	settleBranch(t, ts, answers[0].branch)
	history = append(history, anthropic.NewUserMessage(anthropic.NewTextBlock(memQuestion)))
	var results []anthropic.ContentBlockParamUnion
	for _, b := range send().Content {
		if b.Type == "tool_use" {
			results = append(results, anthropic.NewToolResultBlock(b.ID, memResult, false))
		}
	}
	history = append(history, anthropic.NewUserMessage(results...))
	send()
	history = append(history, anthropic.NewUserMessage(anthropic.NewTextBlock("Thanks!")))
	send()
	checkMemoryRun(t, "anthropic", "msg_", ts, up, fakeapi.AnthropicInputTokens, answers, rec.all())
}
