package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
)

// The agent loop through the real binary: `ctxinf serve` whose model is
// a remote provider played by internal/fakeapi, driven by the official
// Go SDKs as an agent framework drives it: no conversation key, the
// whole history resent with each request, tool results answering the
// model's calls. Between the first call and its result the server is
// SIGKILLed and restarted on the same data dir; the result must still
// continue the same turn, on the same conversation, and reach the
// upstream with the client's system prompt and tools.

// upstreamKeyEnv names the variable holding the key the server sends
// upstream; the fake checks nothing, the test checks it was sent.
const (
	upstreamKeyEnv = "CTXINF_TEST_UPSTREAM_KEY"
	upstreamKey    = "sk-upstream-e2e"
	agentSystem    = "You are a weather agent. Use the tools, answer in one line."
)

// agentCity is the JSON schema of the tools' one argument.
var agentCity = map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
	"required": []any{"city"}}

// restart SIGKILLs s and starts the binary again on dir with extra.
func (s *server) restart(t *testing.T, dir string, extra ...string) *server {
	t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.done
	return startServe(t, dir, extra...)
}

// oneConversation checks that the server holds one session, whose
// active branch is branch, with turns turns.
func oneConversation(t *testing.T, url, branch string, turns uint64) {
	t.Helper()
	var list struct {
		Sessions []struct {
			ID           string
			ActiveBranch string `json:"active_branch"`
		}
	}
	getJSON(t, url+"/v1/sessions", &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ActiveBranch != branch {
		t.Fatalf("sessions %+v: want one, on branch %s", list.Sessions, branch)
	}
	var b struct {
		TurnSeq uint64 `json:"turn_seq"`
	}
	getJSON(t, url+"/v1/branches/"+branch, &b)
	if b.TurnSeq != turns {
		t.Errorf("branch %s: turn_seq %d, want %d (tool results are no user turn)", branch, b.TurnSeq, turns)
	}
}

// oneTurn checks turn on branch: its response final and completed, with
// one provider step per request of the loop, each on the configured
// model with the tokens the upstream reported (in, out), the steps that
// called the client's tools paused for their results.
func oneTurn(t *testing.T, url, branch, turn, model string, tokens [][2]int) {
	t.Helper()
	var row struct {
		Phase, Outcome string
		Steps          []struct {
			Model        string
			Outcome      struct{ Kind string }
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	getJSON(t, url+"/v1/branches/"+branch+"/turns/"+turn, &row)
	var got [][2]int
	var kinds, wantKinds []string
	for i, st := range row.Steps {
		got = append(got, [2]int{st.InputTokens, st.OutputTokens})
		kinds = append(kinds, st.Outcome.Kind)
		if st.Model != model {
			t.Errorf("turn %s step %d: model %q, want the configured %q", turn, i, st.Model, model)
		}
	}
	for range len(tokens) - 1 {
		wantKinds = append(wantKinds, "paused")
	}
	wantKinds = append(wantKinds, "completed")
	// The phase goes on past response_finalized as the turn is folded
	// and indexed, in the background.
	final := map[string]bool{"response_finalized": true, "state_committed": true, "done": true}
	if !final[row.Phase] || row.Outcome != "completed" || !reflect.DeepEqual(got, tokens) || !reflect.DeepEqual(kinds, wantKinds) {
		t.Errorf("turn %s: phase %q, outcome %q, steps' tokens %v, outcomes %v; want a final phase, completed, %v, %v",
			turn, row.Phase, row.Outcome, got, kinds, tokens, wantKinds)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b any) bool {
	norm := func(v any) any {
		data, _ := json.Marshal(v)
		var out any
		_ = json.Unmarshal(data, &out)
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// chatUpstream is the part of a Chat Completions request the test reads.
type chatUpstream struct {
	Model    string
	Messages []struct {
		Role       string
		Content    json.RawMessage
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct{ ID string }
	}
	Tools []struct {
		Type     string
		Function struct {
			Name        string
			Description string
			Parameters  json.RawMessage
		}
	}
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// contentText is a message content's text: a string, or its parts'.
func contentText(raw json.RawMessage) string {
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

// checkChatUpstream checks upstream request i: the server's key, the
// client's system prompt, tool and tool choice as sent, and the output
// of each call in results (call id → text).
func checkChatUpstream(t *testing.T, i int, r fakeapi.Request, results map[string]string) {
	t.Helper()
	if got := r.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
		t.Errorf("upstream request %d: Authorization %q, want the configured key", i, got)
	}
	var u chatUpstream
	if err := json.Unmarshal(r.Body, &u); err != nil {
		t.Fatalf("upstream request %d: %v: %s", i, err, r.Body)
	}
	if u.Model != "upstream-gpt" {
		t.Errorf("upstream request %d: model %q, want the configured upstream-gpt", i, u.Model)
	}
	system := false
	outputs := map[string]string{}
	for _, m := range u.Messages {
		switch m.Role {
		case "system", "developer":
			system = system || strings.Contains(contentText(m.Content), agentSystem)
		case "tool":
			outputs[m.ToolCallID] = contentText(m.Content)
		}
	}
	if !system {
		t.Errorf("upstream request %d has not the client's system prompt: %s", i, r.Body)
	}
	tool := false
	for _, tl := range u.Tools {
		if tl.Type == "function" && tl.Function.Name == "get_weather" && tl.Function.Description == "The weather in a city" &&
			sameJSON(tl.Function.Parameters, agentCity) {
			tool = true
		}
	}
	if !tool {
		t.Errorf("upstream request %d has not the client's tool get_weather as sent: %s", i, r.Body)
	}
	if !sameJSON(u.ToolChoice, "auto") {
		t.Errorf("upstream request %d: tool_choice %s, want the client's \"auto\"", i, u.ToolChoice)
	}
	for id, text := range results {
		if !strings.Contains(outputs[id], text) {
			t.Errorf("upstream request %d: output of %s %q, want the client's %q: %s", i, id, outputs[id], text, r.Body)
		}
	}
}

// TestAgentLoopThroughServeOpenAI runs a three-step tool loop through
// /v1/chat/completions with openai-go, the server's model being OpenAI's
// Chat Completions played by a fake, and the server SIGKILLed and
// restarted between the first call and its result.
func TestAgentLoopThroughServeOpenAI(t *testing.T) {
	up := fakeapi.New(
		fakeapi.NewChatStream().ToolCalls(fakeapi.OpenAIToolCall{ID: "call_1", Name: "get_weather", Args: []string{`{"city":`, `"Paris"}`}}).
			Usage(41, 7).Finish("tool_calls"),
		fakeapi.NewChatStream().ToolCalls(fakeapi.OpenAIToolCall{ID: "call_2", Name: "get_weather", Args: []string{`{"city":"Rome"}`}}).
			Usage(58, 5).Finish("tool_calls"),
		fakeapi.NewChatStream().Text("Paris: sunny. ", "Rome: rain.").Usage(73, 9).Finish("stop"),
	)
	defer up.Close()
	dir := t.TempDir()
	cfg := []string{"CTX_DEFAULT_MODEL=gpt", "CTX_MODELS_GPT_PROVIDER=openai", "CTX_MODELS_GPT_API=chat", "CTX_MODELS_GPT_MODEL_ID=upstream-gpt",
		"CTX_MODELS_GPT_BASE_URL=" + up.URL + "/v1", "CTX_MODELS_GPT_API_KEY_ENV=" + upstreamKeyEnv,
		upstreamKeyEnv + "=" + upstreamKey, "OPENAI_API_KEY=", "OPENAI_BASE_URL="}
	s := startServe(t, dir, cfg...)
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_ORG_ID", "")
	t.Setenv("OPENAI_PROJECT_ID", "")
	client := func(s *server) openai.Client {
		return openai.NewClient(option.WithBaseURL(s.url+"/v1"), option.WithAPIKey("unused-by-the-proxy"), option.WithMaxRetries(0))
	}
	cl := client(s)
	ctx := context.Background()

	params := openai.ChatCompletionNewParams{
		Model: "gpt-4o",
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Description: openai.String("The weather in a city"), Parameters: agentCity})},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")},
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(agentSystem), openai.UserMessage("Weather in Paris, then Rome?")},
	}
	type answer struct {
		id, branch, model string
		msg               openai.ChatCompletionMessage
		finish            string
		usage             openai.CompletionUsage
	}
	// ask sends the history, streamed or not.
	ask := func(step int, stream bool) answer {
		t.Helper()
		var hr *http.Response
		var c openai.ChatCompletion
		if stream {
			p := params
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			st := cl.Chat.Completions.NewStreaming(ctx, p, option.WithResponseInto(&hr))
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				if !acc.AddChunk(st.Current()) {
					t.Fatalf("step %d: the accumulator refused chunk %s", step, st.Current().RawJSON())
				}
			}
			if err := st.Err(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			c = acc.ChatCompletion
		} else {
			got, err := cl.Chat.Completions.New(ctx, params, option.WithResponseInto(&hr))
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			c = *got
		}
		if len(c.Choices) != 1 {
			t.Fatalf("step %d: %d choices", step, len(c.Choices))
		}
		return answer{id: c.ID, branch: hr.Header.Get("X-Ctx-Branch"), model: c.Model, msg: c.Choices[0].Message,
			finish: c.Choices[0].FinishReason, usage: c.Usage}
	}
	expect := func(step int, a answer, call [3]string, text string, in, out int64) {
		t.Helper()
		var calls [][3]string
		for _, tc := range a.msg.ToolCalls {
			calls = append(calls, [3]string{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
		finish, want := "stop", [][3]string(nil)
		if call[0] != "" {
			finish, want = "tool_calls", [][3]string{call}
		}
		if !reflect.DeepEqual(calls, want) || a.msg.Content != text || a.finish != finish {
			t.Fatalf("step %d: calls %v, text %q, finish %q; want %v, %q, %q", step, calls, a.msg.Content, a.finish, want, text, finish)
		}
		if a.usage.PromptTokens != in || a.usage.CompletionTokens != out || a.usage.TotalTokens != in+out {
			t.Errorf("step %d: usage %d in, %d out, %d total; want the upstream's %d, %d", step, a.usage.PromptTokens,
				a.usage.CompletionTokens, a.usage.TotalTokens, in, out)
		}
		// The model that answered, not the one asked for.
		if !strings.HasPrefix(a.id, "chatcmpl-") || a.branch == "" || (a.model != "upstream-gpt" && a.model != fakeapi.OpenAIModel) {
			t.Errorf("step %d: id %q, branch %q, model %q", step, a.id, a.branch, a.model)
		}
	}

	// Step 1, streamed: the model calls get_weather for Paris.
	a1 := ask(1, true)
	expect(1, a1, [3]string{"call_1", "get_weather", `{"city":"Paris"}`}, "", 41, 7)
	oneConversation(t, s.url, a1.branch, 1)
	params.Messages = append(params.Messages, a1.msg.ToParam())

	// The server dies before the client sends the result.
	s = s.restart(t, dir, cfg...)
	cl = client(s)

	// Step 2: the result of call_1 continues the same turn after the
	// restart; the model calls get_weather for Rome.
	params.Messages = append(params.Messages, openai.ToolMessage("18C, sunny", "call_1"))
	a2 := ask(2, false)
	expect(2, a2, [3]string{"call_2", "get_weather", `{"city":"Rome"}`}, "", 58, 5)
	// A step's id is its turn's completion id and the step's number.
	if a2.branch != a1.branch || a2.id != a1.id+"_1" {
		t.Fatalf("after the restart, step 2 on branch %s as %s; want step 1's %s, %s_1 (the same turn)", a2.branch, a2.id, a1.branch, a1.id)
	}
	params.Messages = append(params.Messages, a2.msg.ToParam(), openai.ToolMessage("12C, rain", "call_2"))

	// Step 3, streamed: the answer.
	a3 := ask(3, true)
	expect(3, a3, [3]string{}, "Paris: sunny. Rome: rain.", 73, 9)
	if a3.branch != a1.branch || a3.id != a1.id+"_2" {
		t.Errorf("step 3 on branch %s as %s; want step 1's %s, %s_2 (the same turn)", a3.branch, a3.id, a1.branch, a1.id)
	}

	reqs := up.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d upstream requests, want 3 (one per step)", len(reqs))
	}
	checkChatUpstream(t, 0, reqs[0], nil)
	checkChatUpstream(t, 1, reqs[1], map[string]string{"call_1": "18C, sunny"})
	checkChatUpstream(t, 2, reqs[2], map[string]string{"call_1": "18C, sunny", "call_2": "12C, rain"})
	oneConversation(t, s.url, a1.branch, 1)
	oneTurn(t, s.url, a1.branch, strings.TrimPrefix(a1.id, "chatcmpl-"), "upstream-gpt", [][2]int{{41, 7}, {58, 5}, {73, 9}})
	s.stop(t)
}

// anthropicUpstream is the part of a Messages request the test reads.
type anthropicUpstream struct {
	Model    string
	System   json.RawMessage
	Tools    []map[string]any
	Messages []struct {
		Role    string
		Content json.RawMessage
	}
	ToolChoice map[string]any `json:"tool_choice"`
}

// checkAnthropicUpstream checks upstream request i as
// checkChatUpstream does, in the Messages API's shapes.
func checkAnthropicUpstream(t *testing.T, i int, r fakeapi.Request, results map[string]string) {
	t.Helper()
	if got := r.Header.Get("X-Api-Key"); got != upstreamKey {
		t.Errorf("upstream request %d: x-api-key %q, want the configured key", i, got)
	}
	var u anthropicUpstream
	if err := json.Unmarshal(r.Body, &u); err != nil {
		t.Fatalf("upstream request %d: %v: %s", i, err, r.Body)
	}
	if u.Model != "upstream-claude" {
		t.Errorf("upstream request %d: model %q, want the configured upstream-claude", i, u.Model)
	}
	if !strings.Contains(contentText(u.System), agentSystem) {
		t.Errorf("upstream request %d: system %s lacks the client's %q", i, u.System, agentSystem)
	}
	tool := false
	for _, tl := range u.Tools {
		if tl["name"] == "get_weather" && tl["description"] == "The weather in a city" && sameJSON(tl["input_schema"], agentCity) {
			tool = true
		}
	}
	if !tool {
		t.Errorf("upstream request %d has not the client's tool get_weather as sent: tools %v", i, u.Tools)
	}
	if u.ToolChoice["type"] != "auto" {
		t.Errorf("upstream request %d: tool_choice %v, want the client's auto", i, u.ToolChoice)
	}
	outputs := map[string]string{}
	for _, m := range u.Messages {
		var blocks []struct {
			Type      string
			ToolUseID string `json:"tool_use_id"`
			Content   json.RawMessage
		}
		_ = json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "tool_result" && m.Role == "user" {
				outputs[b.ToolUseID] = contentText(b.Content)
			}
		}
	}
	for id, text := range results {
		if !strings.Contains(outputs[id], text) {
			t.Errorf("upstream request %d: result of %s %q, want the client's %q: %s", i, id, outputs[id], text, r.Body)
		}
	}
}

// TestAgentLoopThroughServeAnthropic is TestAgentLoopThroughServeOpenAI
// through /v1/messages with anthropic-sdk-go, the server's model being
// Anthropic's Messages API played by a fake; steps 1 and 3 are
// streamed and read with the SDK's accumulator.
func TestAgentLoopThroughServeAnthropic(t *testing.T) {
	up := fakeapi.New(
		fakeapi.NewAnthropicStream().Text("Let me look.").
			ToolUse(fakeapi.AnthropicCall{ID: "toolu_1", Name: "get_weather", Input: `{"city":"Paris"}`}, 3).
			Usage(61, 11).Stop("tool_use"),
		fakeapi.NewAnthropicStream().
			ToolUse(fakeapi.AnthropicCall{ID: "toolu_2", Name: "get_weather", Input: `{"city":"Rome"}`}, 1).
			Usage(80, 6).Stop("tool_use"),
		fakeapi.NewAnthropicStream().Text("Paris: sunny. ", "Rome: rain.").Usage(97, 8).Stop("end_turn"),
	)
	defer up.Close()
	dir := t.TempDir()
	cfg := []string{"CTX_DEFAULT_MODEL=claude", "CTX_MODELS_CLAUDE_PROVIDER=anthropic", "CTX_MODELS_CLAUDE_MODEL_ID=upstream-claude", "CTX_MODELS_CLAUDE_BASE_URL=" + up.URL,
		"CTX_MODELS_CLAUDE_API_KEY_ENV=" + upstreamKeyEnv, upstreamKeyEnv + "=" + upstreamKey}
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "")
	s := startServe(t, dir, cfg...)
	type answer struct {
		msg    *anthropic.Message
		branch string
	}
	client := func(s *server) anthropic.Client {
		return anthropic.NewClient(aoption.WithBaseURL(s.url), aoption.WithAPIKey("unused-by-the-proxy"), aoption.WithMaxRetries(0))
	}
	cl := client(s)
	ctx := context.Background()
	history := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris, then Rome?"))}
	const requested = "claude-opus-4-1" // no model of the config: the conversation's runs
	ask := func(step int, stream bool) answer {
		t.Helper()
		var hr *http.Response
		params := anthropic.MessageNewParams{Model: requested, MaxTokens: 1024, Messages: history,
			System: []anthropic.TextBlockParam{{Text: agentSystem}},
			Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
				Description: anthropic.String("The weather in a city"),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: agentCity["properties"], Required: []string{"city"}}}}},
			ToolChoice: anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}}
		if !stream {
			msg, err := cl.Messages.New(ctx, params, aoption.WithResponseInto(&hr))
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			return answer{msg, hr.Header.Get("X-Ctx-Branch")}
		}
		st := cl.Messages.NewStreaming(ctx, params, aoption.WithResponseInto(&hr))
		defer st.Close()
		acc := &anthropic.Message{}
		for st.Next() {
			if err := acc.Accumulate(st.Current()); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		return answer{acc, hr.Header.Get("X-Ctx-Branch")}
	}
	expect := func(step int, stream bool, a answer, text string, stop anthropic.StopReason, call [3]string, in, out int64) {
		t.Helper()
		var gotText string
		var calls [][3]string
		for _, b := range a.msg.Content {
			switch b.Type {
			case "text":
				gotText += b.Text
			case "tool_use":
				calls = append(calls, [3]string{b.ID, b.Name, string(b.Input)})
			}
		}
		var want [][3]string
		if call[0] != "" {
			want = [][3]string{call}
		}
		if gotText != text || a.msg.StopReason != stop || !reflect.DeepEqual(calls, want) {
			t.Fatalf("step %d: text %q, stop %s, calls %v; want %q, %s, %v", step, gotText, a.msg.StopReason, calls, text, stop, want)
		}
		if a.msg.Usage.InputTokens != in || a.msg.Usage.OutputTokens != out {
			t.Errorf("step %d: usage %d in, %d out; want the upstream's %d, %d", step, a.msg.Usage.InputTokens,
				a.msg.Usage.OutputTokens, in, out)
		}
		// The model that answered; a stream names its model in
		// message_start, before the upstream has answered: the
		// configured id of the model the step runs on, never the
		// requested name the runtime has no model of.
		m := string(a.msg.Model)
		answered := m == fakeapi.AnthropicModel || (stream && m == "upstream-claude")
		if !strings.HasPrefix(a.msg.ID, "msg_") || a.branch == "" || !answered {
			t.Errorf("step %d: id %q, branch %q, model %q", step, a.msg.ID, a.branch, m)
		}
	}

	// Step 1, streamed: some text, then a call of get_weather for Paris.
	a1 := ask(1, true)
	expect(1, true, a1, "Let me look.", anthropic.StopReasonToolUse, [3]string{"toolu_1", "get_weather", `{"city":"Paris"}`}, 61, 11)
	oneConversation(t, s.url, a1.branch, 1)
	history = append(history, a1.msg.ToParam())

	s = s.restart(t, dir, cfg...)
	cl = client(s)

	// Step 2, after the restart: the result continues the same turn.
	history = append(history, anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "18C, sunny", false)))
	a2 := ask(2, false)
	expect(2, false, a2, "", anthropic.StopReasonToolUse, [3]string{"toolu_2", "get_weather", `{"city":"Rome"}`}, 80, 6)
	// A step's id is its turn's message id and the step's number.
	if a2.branch != a1.branch || !strings.HasPrefix(a2.msg.ID, a1.msg.ID+"_") {
		t.Fatalf("after the restart, step 2 on branch %s as %s; want step 1's %s, %s_<step> (the same turn)", a2.branch, a2.msg.ID,
			a1.branch, a1.msg.ID)
	}
	history = append(history, a2.msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_2", "12C, rain", false)))

	// Step 3, streamed: the answer.
	a3 := ask(3, true)
	expect(3, true, a3, "Paris: sunny. Rome: rain.", anthropic.StopReasonEndTurn, [3]string{}, 97, 8)
	if a3.branch != a1.branch || !strings.HasPrefix(a3.msg.ID, a1.msg.ID+"_") || a3.msg.ID == a2.msg.ID {
		t.Errorf("step 3 on branch %s as %s; want step 1's %s, a later step of %s", a3.branch, a3.msg.ID, a1.branch, a1.msg.ID)
	}

	reqs := up.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d upstream requests, want 3 (one per step)", len(reqs))
	}
	checkAnthropicUpstream(t, 0, reqs[0], nil)
	checkAnthropicUpstream(t, 1, reqs[1], map[string]string{"toolu_1": "18C, sunny"})
	checkAnthropicUpstream(t, 2, reqs[2], map[string]string{"toolu_1": "18C, sunny", "toolu_2": "12C, rain"})
	oneConversation(t, s.url, a1.branch, 1)
	oneTurn(t, s.url, a1.branch, strings.TrimPrefix(a1.msg.ID, "msg_"), "upstream-claude", [][2]int{{61, 11}, {80, 6}, {97, 8}})
	s.stop(t)
}

// An Anthropic stream's message_stop ends the answer: a client may act
// on it at once, without waiting for the end of the body. The server
// SIGKILLed right then must still know the conversation: the tool
// result of a client that resends its history continues the same turn.
// (The Messages handler stores the conversation's transcript hash after
// writing message_stop, which reaches the client only with the end of
// the body, once the handler has returned; flushed before, the kill
// comes first now and then and the tool result is refused.)
func TestAgentLoopThroughServeAnthropicKilledAtMessageStop(t *testing.T) {
	t.Parallel()
	up := fakeapi.New(
		fakeapi.NewAnthropicStream().ToolUse(fakeapi.AnthropicCall{ID: "toolu_1", Name: "get_weather", Input: `{"city":"Paris"}`}, 2).
			Usage(61, 11).Stop("tool_use"),
		fakeapi.NewAnthropicStream().Text("Paris: sunny.").Usage(80, 3).Stop("end_turn"),
	)
	defer up.Close()
	dir := t.TempDir()
	cfg := []string{"CTX_DEFAULT_MODEL=claude", "CTX_MODELS_CLAUDE_PROVIDER=anthropic", "CTX_MODELS_CLAUDE_MODEL_ID=upstream-claude",
		"CTX_MODELS_CLAUDE_BASE_URL=" + up.URL, "CTX_MODELS_CLAUDE_API_KEY_ENV=" + upstreamKeyEnv, upstreamKeyEnv + "=" + upstreamKey}
	s := startServe(t, dir, cfg...)
	const head = `"model":"claude-opus-4-1","max_tokens":1024,"system":"` + agentSystem + `",` +
		`"tools":[{"name":"get_weather","description":"The weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	const question = `{"role":"user","content":"Weather in Paris?"}`

	req, _ := http.NewRequest("POST", s.url+"/v1/messages", strings.NewReader(`{`+head+`,"stream":true,"messages":[`+question+`]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	branch := resp.Header.Get("X-Ctx-Branch")
	var id string
	sc := bufio.NewScanner(resp.Body)
	for event := ""; sc.Scan(); {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "message_start" {
			var start struct{ Message struct{ ID string } }
			_ = json.Unmarshal([]byte(d), &start)
			id = start.Message.ID
		}
		if strings.HasPrefix(line, "data: ") && event == "message_stop" {
			break
		}
	}
	if err := sc.Err(); err != nil || id == "" {
		t.Fatalf("stream: id %q, %v", id, err)
	}
	// The answer has ended: the server dies at once.
	s = s.restart(t, dir, cfg...)
	resp.Body.Close()

	body := `{` + head + `,"messages":[` + question +
		`,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]}` +
		`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C, sunny"}]}]}`
	st, hdr, data := post(t, s.url+"/v1/messages", body, "Anthropic-Version", "2023-06-01")
	var msg struct {
		ID         string
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal(data, &msg); err != nil || st != http.StatusOK {
		t.Fatalf("tool result after the restart: %d %s", st, data)
	}
	if hdr.Get("X-Ctx-Branch") != branch || !strings.HasPrefix(msg.ID, id+"_") || msg.StopReason != "end_turn" {
		t.Fatalf("tool result after the restart: branch %s, %s, stop %s; want the turn of %s on %s going on", hdr.Get("X-Ctx-Branch"),
			msg.ID, msg.StopReason, id, branch)
	}
	reqs := up.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream requests, want 2", len(reqs))
	}
	checkAnthropicUpstream(t, 1, reqs[1], map[string]string{"toolu_1": "18C, sunny"})
	oneConversation(t, s.url, branch, 1)
	s.stop(t)
}
