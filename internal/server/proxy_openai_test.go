package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/messages"
)

// A Chat Completions request is read whole: the system and developer
// messages are the system prompt, in order; user parts are text, images
// (messages.Image) and other parts kept as sent; assistant tool calls
// and tool results keep their ids; tools and tool choice are read; the
// messages map to the conversation's API-neutral form.
func TestProxyParsesChatRequests(t *testing.T) {
	t.Parallel()
	body := `{"model":"gpt-4o","user":"alice","temperature":0.2,"parallel_tool_calls":false,
	"messages":[
	 {"role":"system","content":"You are terse."},
	 {"role":"developer","content":[{"type":"text","text":"Use metric units."}]},
	 {"role":"user","content":[{"type":"text","text":"What is in "},{"type":"text","text":"this picture?"},
	   {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0K","detail":"low"}},
	   {"type":"image_url","image_url":{"url":"https://example.com/cat.JPG?size=2"}},
	   {"type":"input_audio","input_audio":{"data":"AAA","format":"wav"}}]},
	 {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"look","arguments":"{}"}}]},
	 {"role":"tool","tool_call_id":"call_1","content":"a cat"}],
	"tools":[{"type":"function","function":{"name":"look","description":"Look closer","parameters":{"type":"object","properties":{}}}}],
	"tool_choice":{"type":"function","function":{"name":"look"}}}`
	var req chatRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	pc, err := parseChatRequest(&req)
	if err != nil {
		t.Fatal(err)
	}
	if pc.key != "" || pc.label != "alice" || pc.model != "gpt-4o" || pc.system != "You are terse.\n\nUse metric units." {
		t.Errorf("key %q, end user %q, model %q, system %q", pc.key, pc.label, pc.model, pc.system)
	}
	wantTools := []messages.Tool{{Name: "look", Description: "Look closer", InputSchema: []byte(`{"type":"object","properties":{}}`)}}
	if !reflect.DeepEqual(pc.tools, wantTools) || pc.choice != (messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: "look"}) {
		t.Errorf("tools %+v, choice %+v", pc.tools, pc.choice)
	}
	var roles []string
	for _, m := range pc.msgs {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,system,user,assistant,tool" {
		t.Fatalf("roles %s", got)
	}
	user := pc.msgs[2]
	if user.Text != "What is in this picture?" || len(user.Other) != 3 {
		t.Errorf("user message %q with %d other parts", user.Text, len(user.Other))
	}
	blocks := pc.content[2]
	if len(blocks) != 5 {
		t.Fatalf("user blocks %d, want 5: %+v", len(blocks), blocks)
	}
	if img, ok := blocks[2].(messages.Image); !ok || img.MediaType != "image/png" || string(img.Source) != `{"data":"iVBORw0K","type":"base64"}` {
		t.Errorf("data URL image: %+v", blocks[2])
	}
	if img, ok := blocks[3].(messages.Image); !ok || img.MediaType != "image/jpeg" ||
		string(img.Source) != `{"type":"url","url":"https://example.com/cat.JPG?size=2"}` {
		t.Errorf("URL image: %+v", blocks[3])
	}
	if u, ok := blocks[4].(messages.Unknown); !ok || u.Provider != "openai.chat" || !strings.Contains(string(u.Raw), "input_audio") {
		t.Errorf("audio part: %+v", blocks[4])
	}
	if a := pc.msgs[3]; a.Text != "" || !reflect.DeepEqual(a.Calls, []string{"call_1"}) {
		t.Errorf("assistant %+v", a)
	}
	if tm := pc.msgs[4]; tm.CallID != "call_1" || tm.Text != "a cat" || string(toolOutput(tm).Output) != `"a cat"` {
		t.Errorf("tool %+v, output %s", tm, toolOutput(tm).Output)
	}
	if pc.where[4] != "messages[4]" || pc.content[4] != nil {
		t.Errorf("where %q, content %v", pc.where[4], pc.content[4])
	}

	// A plain text message is its text: no blocks, no client turn.
	req = chatRequest{Messages: []chatMessage{{Role: "user", Content: json.RawMessage(`"hi"`)}}}
	pc, err = parseChatRequest(&req)
	if err != nil || pc.content[0] != nil || pc.client(nil) != nil {
		t.Errorf("plain message: %v, content %v, client %+v", err, pc.content[0], pc.client(nil))
	}
}

// Bad Chat Completions requests are 400 naming the field.
func TestProxyRefusesBadChatRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, `tools[0].type: "custom" is not supported`},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"description":"no name"}}]}`, `tools[0].function.name: required`},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`, `tools[0].function.parameters`},
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"}`, `tool_choice: "sometimes"`},
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function","function":{"name":"nope"}}}`, `tool_choice: names function "nope", which is not in tools`},
		{`{"messages":[{"role":"user","content":"x"},{"role":"critic","content":"y"}]}`, `messages[1].role: "critic"`},
		{`{"messages":[{"role":"tool","content":"y"}]}`, `messages[0].tool_call_id: required`},
		{`{"messages":[{"role":"assistant","tool_calls":[{"type":"function"}]}]}`, `messages[0].tool_calls[0].id: required`},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,raw"}}]}]}`, `messages[0].content[0].image_url: want a base64 data URL`},
		{`{"messages":[{"role":"user","content":[{"text":"no type"}]}]}`, `messages[0].content[0].type: required`},
		{`{"messages":[{"role":"user","content":7}]}`, `messages[0].content: want a string or an array`},
		{`{"messages":[]}`, `messages: empty`},
	} {
		var req chatRequest
		if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
			t.Fatal(err)
		}
		_, err := parseChatRequest(&req)
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("parseChatRequest(%s) = %v, want 400 saying %q", tc.body, err, tc.want)
		}
	}
}

// A Responses request is read whole: instructions and system/developer
// items are the system prompt; an assistant message and the
// function_call items after it are one assistant message with the
// calls; function_call_output items are tool results; previous_response_id
// names a turn; the conversation key comes from conversation or
// metadata.conversation, the end user from user.
func TestProxyParsesResponsesRequests(t *testing.T) {
	t.Parallel()
	turn := messages.NewID[messages.TurnID](time.Now())
	body := fmt.Sprintf(`{"model":"gpt-4.1","instructions":"Be brief.","previous_response_id":"resp_%s",
	"metadata":{"conversation":"bob"},"user":"carol","store":false,"reasoning":{"effort":"low"},
	"input":[
	 {"role":"developer","content":"Metric units."},
	 {"type":"message","role":"user","content":[{"type":"input_text","text":"Look: "},{"type":"input_image","image_url":"https://x.test/a.webp"},
	   {"type":"input_file","file_id":"file-1"}]},
	 {"type":"reasoning","id":"rs_1","summary":[]},
	 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},
	 {"type":"function_call","call_id":"call_1","name":"look","arguments":"{}"},
	 {"type":"function_call","call_id":"call_2","name":"look","arguments":"{}"},
	 {"type":"function_call_output","call_id":"call_1","output":"a cat"},
	 {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"a "},{"type":"input_text","text":"dog"}]}],
	"tools":[{"type":"function","name":"look","description":"Look closer","parameters":{"type":"object"},"strict":true}],
	"tool_choice":"required"}`, turn)
	var req responsesRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	pc, err := parseResponsesRequest(&req)
	if err != nil {
		t.Fatal(err)
	}
	if pc.key != "bob" || pc.label != "carol" || pc.previous != turn || pc.system != "Be brief.\n\nMetric units." ||
		pc.choice != (messages.ToolChoice{Mode: "required"}) || len(pc.tools) != 1 || string(pc.tools[0].InputSchema) != `{"type":"object"}` {
		t.Errorf("key %q, previous %v, system %q, choice %+v, tools %+v", pc.key, pc.previous, pc.system, pc.choice, pc.tools)
	}
	want := []convMessage{
		{Role: "system", Text: "Be brief."},
		{Role: "system", Text: "Metric units."},
		{Role: "user", Text: "Look: ", Other: []json.RawMessage{
			json.RawMessage(`{"type":"input_image","image_url":"https://x.test/a.webp"}`), json.RawMessage(`{"type":"input_file","file_id":"file-1"}`)}},
		{Role: "assistant", Text: "Checking.", Calls: []string{"call_1", "call_2"}},
		{Role: "tool", Text: "a cat", CallID: "call_1"},
		{Role: "tool", Text: "a dog", CallID: "call_2"},
	}
	if !reflect.DeepEqual(pc.msgs, want) {
		t.Errorf("messages\n%+v\nwant\n%+v", pc.msgs, want)
	}
	if b := pc.content[2]; len(b) != 3 || b[1].(messages.Image).MediaType != "image/webp" || b[2].(messages.Unknown).Provider != "openai" {
		t.Errorf("user blocks %+v", b)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"input":"x","tools":[{"type":"web_search"}]}`, `tools[0].type: "web_search" is not supported`},
		{`{"input":"x","previous_response_id":"chatcmpl-1"}`, `previous_response_id: "chatcmpl-1" is not a response of this proxy`},
		{`{"input":[{"type":"item_reference","id":"msg_1"}]}`, `input[0].type: "item_reference" is not supported`},
		{`{"input":[{"type":"function_call_output","output":"x"}]}`, `input[0].call_id: required`},
		{`{"input":[{"type":"message","role":"critic","content":"x"}]}`, `input[0].role: "critic"`},
		{`{"input":"x","tool_choice":{"type":"file_search"}}`, `tool_choice.type: "file_search" is not supported`},
		{`{"input":"x","instructions":7}`, `instructions: want a string`},
		{`{"model":"m"}`, `input: required`},
	} {
		var req responsesRequest
		if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
			t.Fatal(err)
		}
		_, err := parseResponsesRequest(&req)
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("parseResponsesRequest(%s) = %v, want 400 saying %q", tc.body, err, tc.want)
		}
	}
}

// openAIClient is an openai-go client of the proxy at url, with opts.
func openAIClient(t *testing.T, url string, opts ...option.RequestOption) openai.Client {
	t.Setenv("OPENAI_API_KEY", "unused")
	t.Setenv("OPENAI_BASE_URL", url+"/v1")
	return openai.NewClient(append([]option.RequestOption{option.WithMaxRetries(0)}, opts...)...)
}

// The official Go SDK runs text turns with a system prompt and tools
// through both APIs, streamed and not, on the local model: the answers
// parse, name the model (the name requested when the runtime does not
// say which answered), and carry usage; a chat stream sends its usage
// chunk (no choices) before [DONE] only when stream_options.include_usage
// asks for it.
func TestProxyOpenAISDKText(t *testing.T) {
	ts := newTestServer(t, Options{}, 0)
	cl := openAIClient(t, ts.URL, option.WithHeader(ProxyConversationHeader, "sdk-text"))
	ctx := context.Background()
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "lookup", Description: openai.String("Look a word up"),
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"word": map[string]any{"type": "string"}}}})}
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Tools: tools,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("hello there")}}
	var hr *http.Response
	c, err := cl.Chat.Completions.New(ctx, chat, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Model == "" || len(c.Choices) != 1 || c.Choices[0].FinishReason != "stop" ||
		c.Choices[0].Message.Content == "" || len(c.Choices[0].Message.ToolCalls) != 0 || hr.Header.Get(ProxyBranchHeader) == "" {
		t.Fatalf("chat completion %+v, branch %q", c, hr.Header.Get(ProxyBranchHeader))
	}
	if u := c.Usage; u.TotalTokens != u.PromptTokens+u.CompletionTokens || !c.JSON.Usage.Valid() {
		t.Errorf("usage %+v", u)
	}
	branch := hr.Header.Get(ProxyBranchHeader)

	for _, include := range []bool{false, true} {
		params := chat
		params.Messages = append(append([]openai.ChatCompletionMessageParamUnion{}, chat.Messages...),
			c.Choices[0].Message.ToParam(), openai.UserMessage(fmt.Sprintf("and again (usage %v)", include)))
		if include {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		s := cl.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&hr))
		var acc openai.ChatCompletionAccumulator
		usageChunks := 0
		for s.Next() {
			ch := s.Current()
			acc.AddChunk(ch)
			if len(ch.Choices) == 0 {
				usageChunks++
				if !ch.JSON.Usage.Valid() {
					t.Errorf("a chunk with no choices and no usage: %s", ch.RawJSON())
				}
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		want := 0
		if include {
			want = 1
		}
		if usageChunks != want || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "stop" ||
			hr.Header.Get(ProxyBranchHeader) != branch {
			t.Errorf("stream (include_usage %v): %d usage chunks, want %d; %+v; branch %s, want %s", include, usageChunks, want,
				acc.Choices, hr.Header.Get(ProxyBranchHeader), branch)
		}
	}

	rparams := responses.ResponseNewParams{Model: "gpt-4o-mini", Instructions: openai.String("You are terse."),
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("lookup", map[string]any{"type": "object"}, false)},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello again")}}
	r, err := cl.Responses.New(ctx, rparams, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.ID, "resp_") || r.Status != "completed" || r.OutputText() == "" || r.Model == "" ||
		hr.Header.Get(ProxyBranchHeader) != branch || !r.JSON.Usage.Valid() || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
		t.Fatalf("response %s", r.RawJSON())
	}
	rs := cl.Responses.NewStreaming(ctx, rparams)
	var types []string
	var deltas string
	var done responses.Response
	for rs.Next() {
		ev := rs.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas += ev.Delta
		case "response.completed":
			done = ev.AsResponseCompleted().Response
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 8 || types[0] != "response.created" || types[1] != "response.in_progress" || types[2] != "response.output_item.added" ||
		done.OutputText() != deltas || deltas == "" || !done.JSON.Usage.Valid() {
		t.Errorf("responses stream: %v; deltas %q, completed %s", types, deltas, done.RawJSON())
	}
}

// A request with nothing new to run, or one whose tool results come
// before a user message, is 400 naming the messages; nothing runs.
func TestProxyRefusesRequestsWithNothingToRun(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"messages":[{"role":"system","content":"only a system prompt"}]}`, "messages: no new user message or tool result"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"prefill"}]}`, "messages: "}, // ends with an assistant message, or nothing new
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":""}]}`, "messages[0].content: empty"},
		{"/v1/chat/completions", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"user","content":"and?"}]}`, "messages: a user message (messages[2]) after tool results (messages[1])"},
		{"/v1/responses", `{"instructions":"x","input":[]}`, "input: no new user message or tool result"},
	} {
		var out struct {
			Error struct{ Message, Code string }
		}
		if st := ts.call(t, "POST", tc.path, tc.body, &out, ProxyConversationHeader, "nothing"); st != 400 ||
			!strings.Contains(out.Error.Message, tc.want) {
			t.Errorf("%s %s: %d %q, want 400 saying %q", tc.path, tc.body, st, out.Error.Message, tc.want)
		}
	}
	// Refused before anything was made.
	if ss, err := ts.rt.DB().Sessions(context.Background()); err != nil || len(ss) != 0 {
		t.Errorf("sessions after the refusals: %d, %v; want none", len(ss), err)
	}
}
