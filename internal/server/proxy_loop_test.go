package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// The end-to-end tests of the OpenAI proxy as agent frameworks use it:
// the official Go SDK drives a tool-calling agent loop through the proxy,
// whose runtime's model is OpenAI's API played by internal/fakeapi.
//
// What each part of the work they check depends on:
//   - the proxy (this branch): parsing the requests, answering tool
//     calls, usage and model in the APIs' shapes, finding tool results
//     among the new messages;
//   - the runtime (actors: ClientTurn, Awaiting, SubmitToolResults,
//     Update.Usage/Model): the system prompt, tools and tool choice
//     reaching the upstream, the upstream's tool calls coming back as
//     Awaiting, tool results continuing the same turn, real usage;
//   - the conversation index (proxy_conv.go): the keyless variants
//     (found by the hash of the message prefix) and previous_response_id
//     without a key.

const loopSystem = "You are a weather agent. Answer in one line."

// loopTool is the client's tool, as the tests send it.
var loopToolParams = map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
	"required": []any{"city"}}

// upstreamServer is a test server whose runtime's model ("model-e2e")
// is OpenAI's api (openai.APIChat or APIResponses) played by up.
func upstreamServer(t *testing.T, api string, opts Options, up *fakeapi.Server) *testServer {
	t.Helper()
	t.Cleanup(up.Close)
	return newTestServerWith(t, opts, 0, func(c *actors.Config) {
		c.Provider = openai.New(openai.Options{BaseURL: up.URL + "/v1", APIKey: "sk-test", API: api})
		c.Model = "model-e2e"
	})
}

// upstreamRequest is the part of a request to the upstream the tests
// read, of either API.
type upstreamRequest struct {
	Instructions string            `json:"instructions"`
	Messages     []upstreamItem    `json:"messages"` // chat
	Input        []upstreamItem    `json:"input"`    // responses
	Tools        []json.RawMessage `json:"tools"`
	ToolChoice   json.RawMessage   `json:"tool_choice"`
}

type upstreamItem struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"` // chat
	CallID     string          `json:"call_id"`      // responses
	Output     json.RawMessage `json:"output"`       // responses
}

func parseUpstream(t *testing.T, r fakeapi.Request) upstreamRequest {
	t.Helper()
	var u upstreamRequest
	if err := json.Unmarshal(r.Body, &u); err != nil {
		t.Fatalf("upstream request %s: %v", r.Body, err)
	}
	return u
}

// textOf is the text of a content: a string, or the text of its parts.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (u upstreamRequest) items() []upstreamItem {
	return append(append([]upstreamItem{}, u.Messages...), u.Input...)
}

// lastUser is the text of the request's last user message, without the
// retrieved memory it may start with.
func (u upstreamRequest) lastUser() string {
	its := u.items()
	for i := len(its) - 1; i >= 0; i-- {
		if its[i].Role == "user" {
			text := textOf(its[i].Content)
			if _, after, ok := strings.Cut(text, providers.MemoryEnd+"\n\n"); ok {
				return after
			}
			return text
		}
	}
	return ""
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b any) bool {
	norm := func(v any) any {
		data, _ := json.Marshal(v)
		var out any
		_ = json.Unmarshal(data, &out)
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// checkClientTurn checks that upstream request r carries the client's
// system prompt, its tool (in api's shape) and its tool choice.
func checkClientTurn(t *testing.T, where string, r fakeapi.Request, api string, choice any) {
	t.Helper()
	u := parseUpstream(t, r)
	system := strings.Contains(u.Instructions, loopSystem)
	for _, it := range u.items() {
		if (it.Role == "system" || it.Role == "developer") && strings.Contains(textOf(it.Content), loopSystem) {
			system = true
		}
	}
	if !system {
		t.Errorf("%s: the upstream request has no system prompt %q: %s", where, loopSystem, r.Body)
	}
	found := false
	for _, raw := range u.Tools {
		var tool struct {
			Type        string
			Name        string
			Description string
			Parameters  json.RawMessage
			Function    struct {
				Name        string
				Description string
				Parameters  json.RawMessage
			}
		}
		_ = json.Unmarshal(raw, &tool)
		if api == openai.APIChat {
			tool.Name, tool.Description, tool.Parameters = tool.Function.Name, tool.Function.Description, tool.Function.Parameters
		}
		if tool.Type == "function" && tool.Name == "get_weather" && tool.Description == "The weather in a city" &&
			jsonEqual(tool.Parameters, loopToolParams) {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: the upstream request has not the client's tool get_weather as sent: tools %s", where, u.Tools)
	}
	if !jsonEqual(u.ToolChoice, choice) {
		t.Errorf("%s: upstream tool_choice %s, want %v", where, u.ToolChoice, choice)
	}
}

// checkToolOutput checks that upstream request r carries the output of
// call id, saying text.
func checkToolOutput(t *testing.T, where string, r fakeapi.Request, id, text string) {
	t.Helper()
	for _, it := range parseUpstream(t, r).items() {
		if (it.Role == "tool" && it.ToolCallID == id && strings.Contains(textOf(it.Content), text)) ||
			(it.Type == "function_call_output" && it.CallID == id && strings.Contains(textOf(it.Output), text)) {
			return
		}
	}
	t.Errorf("%s: the upstream request has no output of %s saying %q: %s", where, id, text, r.Body)
}

// loopStep is what one request of the loop must answer: the calls (id,
// city), or the text; and the output tokens the upstream reports.
type loopStep struct {
	calls  [][2]string
	text   string
	output int
}

// The loop, as the upstream plays it: two steps that call get_weather,
// then the answer; then, for the user's next message, another answer.
var loopSteps = []loopStep{
	{calls: [][2]string{{"call_1", "Paris"}}, output: 2},
	{calls: [][2]string{{"call_2", "Rome"}}, output: 1},
	{text: "Paris: sunny. Rome: rain.", output: 2},
	{text: "You're welcome.", output: 1},
}

var loopOutputs = map[string]string{"call_1": "18C, sunny", "call_2": "12C, rain"}

func chatLoopReplies() []fakeapi.Reply {
	return []fakeapi.Reply{
		fakeapi.ChatToolCalls(fakeapi.OpenAIToolCall{ID: "call_1", Name: "get_weather", Args: []string{`{"city":`, `"Paris"}`}}),
		fakeapi.ChatToolCalls(fakeapi.OpenAIToolCall{ID: "call_2", Name: "get_weather", Args: []string{`{"city":"Rome"}`}}),
		fakeapi.ChatText("stop", "Paris: sunny. ", "Rome: rain."),
		fakeapi.ChatText("stop", "You're welcome."),
	}
}

func responsesLoopReplies() []fakeapi.Reply {
	return []fakeapi.Reply{
		fakeapi.ResponsesFunctionCalls(fakeapi.OpenAIToolCall{ID: "call_1", Name: "get_weather", Args: []string{`{"city":`, `"Paris"}`}}),
		fakeapi.ResponsesFunctionCalls(fakeapi.OpenAIToolCall{ID: "call_2", Name: "get_weather", Args: []string{`{"city":"Rome"}`}}),
		fakeapi.ResponsesText("Paris: sunny. ", "Rome: rain."),
		fakeapi.ResponsesText("You're welcome."),
	}
}

// answerOf is one answer of the loop in an API-neutral form.
type answerOf struct {
	id, branch, text, finish, model string
	calls                           [][3]string // id, name, arguments
	input, output, total            int
}

// checkAnswer checks answer a to step i of the loop.
func checkAnswer(t *testing.T, i int, a answerOf) {
	t.Helper()
	s := loopSteps[i]
	var want [][3]string
	for _, c := range s.calls {
		want = append(want, [3]string{c[0], "get_weather", fmt.Sprintf(`{"city":"%s"}`, c[1])})
	}
	wantFinish := "stop"
	if len(want) > 0 {
		wantFinish = "tool_calls"
	}
	if !reflect.DeepEqual(a.calls, want) || a.text != s.text || a.finish != wantFinish {
		t.Errorf("step %d: calls %v, text %q, finish %q; want calls %v, text %q, finish %q", i, a.calls, a.text, a.finish, want, s.text, wantFinish)
	}
	checkUsageModel(t, fmt.Sprintf("step %d", i), a.model, a.input, a.output, a.total, s.output)
}

// checkUsageModel checks an answer's model and usage: the model that
// answered, and the upstream's usage of one step that output output
// tokens.
func checkUsageModel(t *testing.T, where, model string, input, output, total, wantOutput int) {
	t.Helper()
	if input != fakeapi.OpenAIInputTokens || output != wantOutput || total != input+output {
		t.Errorf("%s: usage in %d, out %d, total %d; want the upstream's %d, %d", where, input, output, total,
			fakeapi.OpenAIInputTokens, wantOutput)
	}
	if model != "model-e2e" && model != fakeapi.OpenAIModel {
		t.Errorf("%s: model %q, want the model that answered (model-e2e, upstream %s)", where, model, fakeapi.OpenAIModel)
	}
}

// checkLoop checks what the loop left: one conversation, the tool steps
// one turn, two user turns on the branch, and each upstream request
// carrying the client's turn and the tool results.
func checkLoop(t *testing.T, ts *testServer, up *fakeapi.Server, api string, choice any, answers []answerOf) {
	t.Helper()
	for i, a := range answers {
		if a.branch == "" || a.branch != answers[0].branch {
			t.Errorf("answer %d on branch %q, answer 0 on %q: want one conversation", i, a.branch, answers[0].branch)
		}
	}
	checkStepIDs(t, map[string]string{openai.APIChat: "chatcmpl-", openai.APIResponses: "resp_"}[api], answers)
	reqs := up.Requests()
	if len(reqs) != len(loopSteps) {
		t.Fatalf("%d upstream requests, want %d", len(reqs), len(loopSteps))
	}
	for i, r := range reqs {
		checkClientTurn(t, fmt.Sprintf("upstream request %d", i), r, api, choice)
	}
	checkToolOutput(t, "upstream request 1", reqs[1], "call_1", loopOutputs["call_1"])
	checkToolOutput(t, "upstream request 2", reqs[2], "call_2", loopOutputs["call_2"])
	b, err := messages.ParseID[messages.BranchID](answers[0].branch)
	if err != nil {
		t.Fatal(err)
	}
	entries, _, err := ts.rt.History(context.Background(), b, messages.TurnID{}, 50)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, e := range entries {
		if e.Message.Role == messages.RoleUser {
			users = append(users, e.Message.RenderedText)
		}
	}
	if want := []string{"Weather in Paris, then Rome?", "Thanks!"}; !reflect.DeepEqual(users, want) {
		t.Errorf("the branch's user turns %q, want %q (tool results are no user turn)", users, want)
	}
}

// checkStepIDs checks the ids of the loop's answers: one id per step
// (prefix and the turn, then _1, _2 for the steps after tool results),
// the tool loop's three of one turn, the next answer of another.
func checkStepIDs(t *testing.T, prefix string, answers []answerOf) {
	t.Helper()
	var turns []messages.TurnID
	for i, a := range answers {
		turn, n, ok := parseStepID(prefix, a.id)
		want := []int{0, 1, 2, 0}[i]
		if !ok || n != want || a.id != stepID(prefix, turn, n) {
			t.Errorf("answer %d: id %q (turn %s, step %d, %v), want %s<turn> step %d", i, a.id, turn, n, ok, prefix, want)
		}
		turns = append(turns, turn)
	}
	if turns[1] != turns[0] || turns[2] != turns[0] || turns[3] == turns[0] {
		t.Errorf("answer ids %q %q %q %q: want the tool loop's three of one turn, the next of another", answers[0].id, answers[1].id,
			answers[2].id, answers[3].id)
	}
}

func chatLoopTools() []oai.ChatCompletionToolUnionParam {
	return []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(oai.FunctionDefinitionParam{
		Name: "get_weather", Description: oai.String("The weather in a city"), Parameters: loopToolParams})}
}

func TestOpenAIProxyToolLoopChat(t *testing.T)       { chatToolLoop(t, false) }
func TestOpenAIProxyToolLoopChatStream(t *testing.T) { chatToolLoop(t, true) }

// chatToolLoop runs the loop through Chat Completions, the client
// resending its full history each time, with a conversation key
// (metadata.conversation) and without.
func chatToolLoop(t *testing.T, stream bool) {
	for _, keyed := range []bool{true, false} {
		t.Run(map[bool]string{true: "key", false: "keyless"}[keyed], func(t *testing.T) {
			up := fakeapi.New(chatLoopReplies()...)
			ts := upstreamServer(t, openai.APIChat, Options{}, up)
			cl := openAIClient(t, ts.URL)
			ctx := context.Background()
			params := oai.ChatCompletionNewParams{Model: "gpt-4o-mini", Tools: chatLoopTools(),
				ToolChoice: oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("auto")},
				Messages:   []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(loopSystem), oai.UserMessage("Weather in Paris, then Rome?")}}
			if keyed {
				params.Metadata = map[string]string{"conversation": "loop-user"}
			}
			if stream {
				params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			}
			send := func(i int) (oai.ChatCompletionMessage, answerOf) {
				t.Helper()
				var hr *http.Response
				var c oai.ChatCompletion
				if stream {
					s := cl.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&hr))
					var acc oai.ChatCompletionAccumulator
					for s.Next() {
						if !acc.AddChunk(s.Current()) {
							t.Fatalf("step %d: the accumulator refused chunk %s", i, s.Current().RawJSON())
						}
					}
					if err := s.Err(); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					c = acc.ChatCompletion
				} else {
					var err error
					if c2, err2 := cl.Chat.Completions.New(ctx, params, option.WithResponseInto(&hr)); err2 != nil {
						err = err2
					} else {
						c = *c2
					}
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				if len(c.Choices) != 1 {
					t.Fatalf("step %d: %d choices", i, len(c.Choices))
				}
				m := c.Choices[0].Message
				a := answerOf{id: c.ID, branch: hr.Header.Get(ProxyBranchHeader), text: m.Content, finish: c.Choices[0].FinishReason,
					model: c.Model, input: int(c.Usage.PromptTokens), output: int(c.Usage.CompletionTokens), total: int(c.Usage.TotalTokens)}
				for _, tc := range m.ToolCalls {
					if tc.Type != "function" {
						t.Errorf("step %d: tool call type %q", i, tc.Type)
					}
					a.calls = append(a.calls, [3]string{tc.ID, tc.Function.Name, tc.Function.Arguments})
				}
				checkAnswer(t, i, a)
				return m, a
			}
			var answers []answerOf
			for i := range loopSteps {
				m, a := send(i)
				answers = append(answers, a)
				params.Messages = append(params.Messages, m.ToParam())
				for _, tc := range m.ToolCalls {
					params.Messages = append(params.Messages, oai.ToolMessage(loopOutputs[tc.ID], tc.ID))
				}
				if i == 2 {
					params.Messages = append(params.Messages, oai.UserMessage("Thanks!"))
				}
				if t.Failed() {
					t.FailNow()
				}
			}
			checkLoop(t, ts, up, openai.APIChat, "auto", answers)
		})
	}
}

func responsesLoopTools() []responses.ToolUnionParam {
	tool := responses.ToolParamOfFunction("get_weather", loopToolParams, false)
	tool.OfFunction.Description = oai.String("The weather in a city")
	return []responses.ToolUnionParam{tool}
}

func TestOpenAIProxyToolLoopResponses(t *testing.T)       { responsesToolLoop(t, false, resendItems) }
func TestOpenAIProxyToolLoopResponsesStream(t *testing.T) { responsesToolLoop(t, true, resendItems) }

// The Responses loop with previous_response_id and no key: each request
// sends its new items only.
func TestOpenAIProxyToolLoopResponsesPrevious(t *testing.T) {
	responsesToolLoop(t, false, resendPrevious)
}

// The Responses loop as the Vercel AI SDK runs it with store on: the
// answers' items are sent back as references to them; each response
// reads back as it was answered.
func TestOpenAIProxyToolLoopResponsesItemReferences(t *testing.T) {
	responsesToolLoop(t, false, resendReferences)
}

func TestOpenAIProxyToolLoopResponsesItemReferencesStream(t *testing.T) {
	responsesToolLoop(t, true, resendReferences)
}

// How a Responses client sends an answer back with its next request.
const (
	resendItems      = iota // the answer's items, as input items
	resendPrevious          // previous_response_id, and the new items alone
	resendReferences        // item references to the answer's items
)

// responsesToolLoop runs the loop through Responses: the client
// resending its full history each time (its items, or references to
// them), with a conversation key (metadata.conversation) and without;
// or sending its new items with previous_response_id.
func responsesToolLoop(t *testing.T, stream bool, resend int) {
	previous := resend == resendPrevious
	variants := []bool{true, false}
	if previous {
		variants = []bool{false}
	}
	for _, keyed := range variants {
		t.Run(map[bool]string{true: "key", false: "keyless"}[keyed], func(t *testing.T) {
			up := fakeapi.New(responsesLoopReplies()...)
			ts := upstreamServer(t, openai.APIResponses, Options{}, up)
			cl := openAIClient(t, ts.URL)
			ctx := context.Background()
			history := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Weather in Paris, then Rome?", responses.EasyInputMessageRoleUser)}
			params := responses.ResponseNewParams{Model: "gpt-4o-mini", Instructions: oai.String(loopSystem), Tools: responsesLoopTools(),
				ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsAuto)}}
			if keyed {
				params.Metadata = map[string]string{"conversation": "loop-user"}
			}
			send := func(i int, input responses.ResponseInputParam) (responses.Response, answerOf) {
				t.Helper()
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
				var hr *http.Response
				var r responses.Response
				if stream {
					s := cl.Responses.NewStreaming(ctx, params, option.WithResponseInto(&hr))
					var text, args strings.Builder
					completed := false
					for s.Next() {
						ev := s.Current()
						switch ev.Type {
						case "response.output_text.delta":
							text.WriteString(ev.Delta)
						case "response.function_call_arguments.delta":
							args.WriteString(ev.Delta)
						case "response.completed":
							r, completed = ev.AsResponseCompleted().Response, true
						}
					}
					if err := s.Err(); err != nil || !completed {
						t.Fatalf("step %d: %v, completed %v", i, err, completed)
					}
					var wantArgs strings.Builder
					for _, o := range r.Output {
						if o.Type == "function_call" {
							wantArgs.WriteString(o.Arguments.OfString)
						}
					}
					if text.String() != r.OutputText() || args.String() != wantArgs.String() {
						t.Errorf("step %d: streamed text %q, arguments %q; the completed response has %q, %q", i, text.String(), args.String(),
							r.OutputText(), wantArgs.String())
					}
				} else {
					rp, err := cl.Responses.New(ctx, params, option.WithResponseInto(&hr))
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					r = *rp
				}
				a := answerOf{id: r.ID, branch: hr.Header.Get(ProxyBranchHeader), text: r.OutputText(), finish: "stop", model: r.Model,
					input: int(r.Usage.InputTokens), output: int(r.Usage.OutputTokens), total: int(r.Usage.TotalTokens)}
				if r.Status != "completed" {
					t.Errorf("step %d: status %q", i, r.Status)
				}
				turn, step, _ := parseStepID("resp_", r.ID)
				calls := 0
				for _, o := range r.Output {
					switch o.Type {
					case "function_call":
						a.finish = "tool_calls"
						a.calls = append(a.calls, [3]string{o.CallID, o.Name, o.Arguments.OfString})
						if want := stepID("fc_", turn, step) + "_" + strconv.Itoa(calls); o.Status != "completed" || o.ID != want {
							t.Errorf("step %d: function_call item %s, want id %s", i, o.RawJSON(), want)
						}
						calls++
					case "message":
						if want := stepID("msg_", turn, step); o.ID != want {
							t.Errorf("step %d: message item id %s, want %s", i, o.ID, want)
						}
					}
				}
				checkAnswer(t, i, a)
				if resend == resendReferences {
					// The response reads back as answered (streamed:
					// as response.completed carried it).
					held, err := cl.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
					if err != nil || !jsonEqual(json.RawMessage(held.RawJSON()), json.RawMessage(r.RawJSON())) {
						t.Errorf("step %d: GET /v1/responses/%s = %v\n%s\nwant\n%s", i, r.ID, err, held.RawJSON(), r.RawJSON())
					}
				}
				return r, a
			}
			var answers []answerOf
			input := history
			for i := range loopSteps {
				r, a := send(i, input)
				answers = append(answers, a)
				// The answer's items as the client sends them back, then
				// its tool results (or the user's next message).
				var next responses.ResponseInputParam
				for _, o := range r.Output {
					switch {
					case resend == resendReferences:
						next = append(next, responses.ResponseInputItemParamOfItemReference(o.ID))
					case o.Type == "message":
						next = append(next, responses.ResponseInputItemParamOfMessage(o.Content[0].Text, responses.EasyInputMessageRoleAssistant))
					case o.Type == "function_call":
						next = append(next, responses.ResponseInputItemParamOfFunctionCall(o.Arguments.OfString, o.CallID, o.Name))
					}
				}
				var results responses.ResponseInputParam
				for _, o := range r.Output {
					if o.Type == "function_call" {
						results = append(results, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
							CallID: oai.String(o.CallID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String(loopOutputs[o.CallID])}}})
					}
				}
				if i == 2 {
					results = append(results, responses.ResponseInputItemParamOfMessage("Thanks!", responses.EasyInputMessageRoleUser))
				}
				if previous {
					params.PreviousResponseID = oai.String(r.ID)
					input = results
				} else {
					input = append(append(input, next...), results...)
				}
				if t.Failed() {
					t.FailNow()
				}
			}
			checkLoop(t, ts, up, openai.APIResponses, "auto", answers)
		})
	}
}

// Five concurrent requests on one conversation, each with the client's
// system prompt and tools, are served one after the other in the order
// they came: the upstream sees them in that order, and each client gets
// the answer to its own question.
func TestOpenAIProxyToolLoopConcurrent(t *testing.T) {
	block := make(chan struct{})
	var once sync.Once
	up := fakeapi.NewFunc(func(n int, r fakeapi.Request) fakeapi.Reply {
		var u upstreamRequest
		_ = json.Unmarshal(r.Body, &u)
		if n == 1 {
			<-block
		}
		return fakeapi.ChatText("stop", "answer to "+u.lastUser())
	})
	defer once.Do(func() { close(block) })
	ts := upstreamServer(t, openai.APIChat, Options{}, up)
	srv := ts.Config.Handler.(*Server)
	cl := openAIClient(t, ts.URL, option.WithHeader(ProxyConversationHeader, "concurrent"))
	ctx := context.Background()
	params := func(q string) oai.ChatCompletionNewParams {
		return oai.ChatCompletionNewParams{Model: "gpt-4o-mini", Tools: chatLoopTools(),
			ToolChoice: oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("auto")},
			Messages:   []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(loopSystem), oai.UserMessage(q)}}
	}
	var hr *http.Response
	if _, err := cl.Chat.Completions.New(ctx, params("warm up"), option.WithResponseInto(&hr)); err != nil {
		t.Fatal(err)
	}
	branch, err := messages.ParseID[messages.BranchID](hr.Header.Get(ProxyBranchHeader))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	type answer struct {
		text string
		err  error
	}
	answers := make([]chan answer, n)
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	for i := range n {
		answers[i] = make(chan answer, 1)
		go func() {
			c, err := cl.Chat.Completions.New(ctx, params(fmt.Sprintf("question %d", i)))
			if err != nil {
				answers[i] <- answer{err: err}
				return
			}
			answers[i] <- answer{text: c.Choices[0].Message.Content}
		}()
		if i == 0 {
			until("the first request to reach the upstream", func() bool { return up.Count() == 2 })
			continue
		}
		// One at a time, so that the order they came in is known.
		until(fmt.Sprintf("request %d to wait", i), func() bool { return srv.proxy.queues.waiting(branch) == i })
	}
	once.Do(func() { close(block) })
	for i := range n {
		a := <-answers[i]
		if want := fmt.Sprintf("answer to question %d", i); a.err != nil || a.text != want {
			t.Errorf("request %d: %q, %v; want %q", i, a.text, a.err, want)
		}
	}
	reqs := up.Requests()
	var order []string
	for i, r := range reqs {
		order = append(order, parseUpstream(t, r).lastUser())
		checkClientTurn(t, fmt.Sprintf("upstream request %d", i), r, openai.APIChat, "auto")
	}
	if want := "warm up,question 0,question 1,question 2,question 3,question 4"; strings.Join(order, ",") != want {
		t.Errorf("the upstream got %q, want %q", order, want)
	}
}

// A request ending in tool results when no tool call of the
// conversation awaits one is 400 naming the messages; nothing runs.
func TestOpenAIProxyToolLoopResultsWithoutCalls(t *testing.T) {
	t.Parallel()
	up := fakeapi.New(fakeapi.ChatText("stop", "hello"))
	ts := upstreamServer(t, openai.APIChat, Options{}, up)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"},
	 {"role":"assistant","tool_calls":[{"id":"call_9","type":"function","function":{"name":"f","arguments":"{}"}}]},
	 {"role":"tool","tool_call_id":"call_9","content":"done"}]}`
	var out struct {
		Error struct{ Message, Code string }
	}
	if st := ts.call(t, "POST", "/v1/chat/completions", body, &out, ProxyConversationHeader, "no-calls"); st != 400 ||
		!strings.Contains(out.Error.Message, "messages: the request ends with tool results") || !strings.Contains(out.Error.Message, "call_9") {
		t.Errorf("tool results with no call open: %d %+v, want 400 naming messages and call_9", st, out.Error)
	}
	if up.Count() != 0 {
		t.Errorf("%d upstream requests, want none", up.Count())
	}
}

// One request's system prompt, tools, named tool choice and image reach
// the upstream as sent, through either API; the answer names the model
// that answered and the upstream's usage.
func TestOpenAIProxyToolLoopClientTurnReachesUpstream(t *testing.T) {
	const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
	t.Run("chat", func(t *testing.T) {
		up := fakeapi.New(fakeapi.ChatText("stop", "A ", "cat."))
		ts := upstreamServer(t, openai.APIChat, Options{}, up)
		cl := openAIClient(t, ts.URL, option.WithHeader(ProxyConversationHeader, "upstream"))
		c, err := cl.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "gpt-4o-mini", Tools: chatLoopTools(),
			ToolChoice: oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
			Messages: []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(loopSystem), oai.UserMessage([]oai.ChatCompletionContentPartUnionParam{
				oai.TextContentPart("What is this?"),
				oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + pixel})})}})
		if err != nil {
			t.Fatal(err)
		}
		checkUsageModel(t, "chat", c.Model, int(c.Usage.PromptTokens), int(c.Usage.CompletionTokens), int(c.Usage.TotalTokens), 2)
		if c.Choices[0].Message.Content != "A cat." || c.Choices[0].FinishReason != "stop" {
			t.Errorf("reply %q, finish %q", c.Choices[0].Message.Content, c.Choices[0].FinishReason)
		}
		reqs := up.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d upstream requests", len(reqs))
		}
		checkClientTurn(t, "upstream", reqs[0], openai.APIChat, map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}})
		if !strings.Contains(string(reqs[0].Body), pixel) || !strings.Contains(string(reqs[0].Body), "What is this?") {
			t.Errorf("the upstream request lacks the user's text or image: %s", reqs[0].Body)
		}
	})
	t.Run("responses", func(t *testing.T) {
		up := fakeapi.New(fakeapi.ResponsesText("A ", "cat."))
		ts := upstreamServer(t, openai.APIResponses, Options{}, up)
		cl := openAIClient(t, ts.URL, option.WithHeader(ProxyConversationHeader, "upstream"))
		r, err := cl.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini", Tools: responsesLoopTools(),
			Instructions: oai.String(loopSystem),
			ToolChoice:   responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}},
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(
				responses.ResponseInputMessageContentListParam{
					responses.ResponseInputContentParamOfInputText("What is this?"),
					{OfInputImage: &responses.ResponseInputImageParam{ImageURL: oai.String("data:image/png;base64," + pixel)}}},
				responses.EasyInputMessageRoleUser)}}})
		if err != nil {
			t.Fatal(err)
		}
		checkUsageModel(t, "responses", r.Model, int(r.Usage.InputTokens), int(r.Usage.OutputTokens), int(r.Usage.TotalTokens), 2)
		if r.OutputText() != "A cat." || r.Status != "completed" {
			t.Errorf("reply %q", r.OutputText())
		}
		reqs := up.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d upstream requests", len(reqs))
		}
		checkClientTurn(t, "upstream", reqs[0], openai.APIResponses, map[string]any{"type": "function", "name": "get_weather"})
		if !strings.Contains(string(reqs[0].Body), pixel) || !strings.Contains(string(reqs[0].Body), "What is this?") {
			t.Errorf("the upstream request lacks the user's text or image: %s", reqs[0].Body)
		}
	})
}
