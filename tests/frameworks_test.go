package tests

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
)

// Agent frameworks run unchanged through `ctxinf serve`: each scenario
// runs a Node script of tests/frameworks (npm packages pinned in its
// package-lock.json, installed by `make frameworks`) against the real
// binary, whose model is the scripted model of frameworks_model_test.go,
// and checks the framework's own result objects, what the upstream
// received and the sessions the server holds.

// knownBroken names the scenarios that fail on the server as it is, with
// why. They are skipped, unless CTXINF_TEST_KNOWN_BROKEN=1 runs them.
// A scenario leaves the list with the fix that makes it pass.
var knownBroken = map[string]string{}

// frameworksDir holds the scripts and their node_modules.
const frameworksDir = "frameworks"

// frameworkScenario is one scenario: the API the server's model is
// called by (chat by default; responses, the default on api.openai.com),
// the server's extra configuration and the body, which runs its script
// and checks.
type frameworkScenario struct {
	name     string
	upstream string
	config   []string
	run      func(t *testing.T, f *frameworkRun)
}

// frameworkRun is a scenario's server and its upstream.
type frameworkRun struct {
	node string // the node binary
	url  string // the server's root
	up   *fakeapi.Server
}

// TestFrameworks runs every scenario, each on its own server and
// scripted model, in parallel.
func TestFrameworks(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the framework tests need Node.js 20 or later and `make frameworks`")
	}
	if _, err := os.Stat(filepath.Join(frameworksDir, "node_modules", ".installed")); err != nil {
		t.Skip("tests/frameworks/node_modules is not installed: `make frameworks` installs it (npm ci)")
	}
	runBroken := os.Getenv("CTXINF_TEST_KNOWN_BROKEN") == "1"
	for _, sc := range frameworkScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			if why, ok := knownBroken[sc.name]; ok && !runBroken {
				t.Skipf("known broken (CTXINF_TEST_KNOWN_BROKEN=1 runs it): %s", why)
			}
			up := newScriptedModel()
			defer up.Close()
			cfg := []string{"CTX_DEFAULT_MODEL=gpt", "CTX_MODELS_GPT_PROVIDER=openai", "CTX_MODELS_GPT_API=" + cmp.Or(sc.upstream, "chat"),
				"CTX_MODELS_GPT_MODEL_ID=upstream-gpt", "CTX_MODELS_GPT_BASE_URL=" + up.URL + "/v1",
				"CTX_MODELS_GPT_API_KEY_ENV=" + upstreamKeyEnv, upstreamKeyEnv + "=" + upstreamKey,
				"CTX_STORE_DURABILITY=relaxed", "CTX_STORE_BLOCK_CACHE_BYTES=1048576"}
			s := startServe(t, t.TempDir(), append(cfg, sc.config...)...)
			defer s.stop(t)
			sc.run(t, &frameworkRun{node: node, url: s.url, up: up})
		})
	}
}

// script runs tests/frameworks/name.mjs with args against the server
// and decodes the result it prints into out; it fails the test when the
// script fails.
func (f *frameworkRun) script(t *testing.T, out any, name string, args []string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.node, append([]string{name + ".mjs"}, args...)...)
	cmd.Dir = frameworksDir
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "OPENAI_") && !strings.HasPrefix(k, "LANGCHAIN_") && !strings.HasPrefix(k, "LANGSMITH_") &&
			!strings.HasPrefix(k, "AI_GATEWAY_") && k != "NODE_OPTIONS" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append([]string{"CTXINF_URL=" + f.url, "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false"}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	runErr := cmd.Run()
	t.Logf("node %s.mjs %s: %v", name, strings.Join(args, " "), time.Since(t0).Round(time.Millisecond))
	var result []byte
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if r, ok := bytes.CutPrefix(sc.Bytes(), []byte("RESULT ")); ok {
			result = append([]byte(nil), r...)
		}
	}
	var failed struct {
		Error *struct{ Class, Message, Stack string }
	}
	_ = json.Unmarshal(result, &failed)
	switch {
	case failed.Error != nil:
		t.Fatalf("node %s.mjs: %s: %s\n%s\nstderr: %s", name, failed.Error.Class, failed.Error.Message, failed.Error.Stack, tail(stderr.String()))
	case runErr != nil || result == nil:
		t.Fatalf("node %s.mjs: %v, no result\nstdout: %s\nstderr: %s", name, runErr, tail(stdout.String()), tail(stderr.String()))
	}
	if err := json.Unmarshal(result, out); err != nil {
		t.Fatalf("node %s.mjs: result %s: %v", name, result, err)
	}
}

// tail is the end of a script's output.
func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// upstream returns the requests the scripted model received, read.
func (f *frameworkRun) upstream(t *testing.T) []modelRequest {
	t.Helper()
	var out []modelRequest
	for i, r := range f.up.Requests() {
		req, err := parseModelRequest(r)
		if err != nil {
			t.Fatalf("upstream request %d: %v: %s", i, err, r.Body)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
			t.Errorf("upstream request %d: Authorization %q, want the server's key", i, got)
		}
		out = append(out, req)
	}
	return out
}

// upstreamTurns is each upstream request's newest user message, for
// messages.
func upstreamTurns(reqs []modelRequest) []string {
	var out []string
	for _, r := range reqs {
		u, _ := r.Turn()
		out = append(out, u)
	}
	return out
}

// oneSession checks that the server holds one session, whose active
// branch has turns turns.
func (f *frameworkRun) oneSession(t *testing.T, turns uint64) {
	t.Helper()
	var list struct {
		Sessions []struct {
			ID, Title    string
			ActiveBranch string `json:"active_branch"`
		}
	}
	getJSON(t, f.url+"/v1/sessions", &list)
	if len(list.Sessions) != 1 {
		t.Errorf("%d sessions, want one: %+v", len(list.Sessions), list.Sessions)
		return
	}
	var b struct {
		TurnSeq uint64 `json:"turn_seq"`
	}
	getJSON(t, f.url+"/v1/branches/"+list.Sessions[0].ActiveBranch, &b)
	if b.TurnSeq != turns {
		t.Errorf("the session's branch has %d turns, want %d (one per user message)", b.TurnSeq, turns)
	}
}

// want fails the test with what when got is not want.
func want[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

// lgMessage is a message of a LangGraph state, as langgraph.mjs prints it.
type lgMessage struct {
	Type, ID, Text string
	ToolCalls      []struct {
		ID, Name string
		Args     map[string]any
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// String is the message in short: type, then text or calls.
func (m lgMessage) String() string {
	s := m.Type + ": " + m.Text
	for _, c := range m.ToolCalls {
		s += fmt.Sprintf("[%s %v]", c.Name, c.Args)
	}
	return s
}

// langGraph runs createReactAgent over two invokes on one thread, on
// Chat Completions or (api "responses") the Responses API.
func langGraph(api string) func(t *testing.T, f *frameworkRun) {
	return func(t *testing.T, f *frameworkRun) {
		var out struct{ Invokes [][]lgMessage }
		f.script(t, &out, "langgraph", []string{api})
		exchange := func(city, weather string) []string {
			return []string{"human: What is the weather in " + city + "?", "ai: [get_weather map[city:" + city + "]]",
				"tool: " + weather, "ai: The weather in " + city + ": " + weather + "."}
		}
		paris, rome := exchange("Paris", "18C, sunny"), exchange("Rome", "12C, rain")
		wants := [][]string{paris, append(append([]string(nil), paris...), rome...)}
		if len(out.Invokes) != 2 {
			t.Fatalf("%d invokes, want 2", len(out.Invokes))
		}
		for i, state := range out.Invokes {
			var got []string
			for _, m := range state {
				got = append(got, m.String())
			}
			// The final state ends with the AI's answer; add_messages
			// merges messages by id, so each step needs its own.
			want(t, fmt.Sprintf("invoke %d: the final state's messages", i+1), got, wants[i])
		}
		ids := map[string]int{}
		for i, m := range out.Invokes[1] {
			if m.Type == "ai" {
				if j, dup := ids[m.ID]; dup {
					t.Errorf("AI messages %d and %d have the same id %q", j, i, m.ID)
				}
				ids[m.ID] = i
			}
		}
		reqs := f.upstream(t)
		want(t, "upstream requests' user messages", upstreamTurns(reqs), []string{"What is the weather in Paris?",
			"What is the weather in Paris?", "What is the weather in Rome?", "What is the weather in Rome?"})
		for i, r := range reqs {
			_, results := r.Turn()
			wantResults := []string(nil)
			if i%2 == 1 {
				wantResults = []string{[]string{"18C, sunny", "12C, rain"}[i/2]}
			}
			want(t, fmt.Sprintf("upstream request %d: its turn's tool results", i), results, wantResults)
			if !strings.Contains(r.System, "You are a weather agent.") || !r.Offers("get_weather") {
				t.Errorf("upstream request %d: system %q, tools %v: want the agent's prompt and get_weather", i, r.System, r.Tools)
			}
		}
		// The second invoke continues the first's conversation.
		f.oneSession(t, 2)
	}
}

// vercelTurn is a turn of vercel.mjs.
type vercelTurn struct {
	Text, Streamed, FinishReason string
	Errors                       []string
	Steps                        []struct {
		FinishReason, Text string
		ToolCalls          []struct {
			ID, Name string
			Input    map[string]any
		}
		ToolResults []struct {
			ID     string
			Output any
		}
	}
}

// vercel runs vercel.mjs in mode ("generate" or "stream") and checks that
// its turns answer questions, each a weather question with its tool
// step or a plain message.
func vercel(mode string, questions []string, weathers map[string]string) func(t *testing.T, f *frameworkRun) {
	return func(t *testing.T, f *frameworkRun) {
		var out struct {
			Turns    []vercelTurn
			Requests []struct {
				URL   string
				Store *bool
				Input []string
			}
		}
		f.script(t, &out, "vercel", []string{mode})
		if len(out.Turns) != len(questions) {
			t.Fatalf("%d turns, want %d", len(out.Turns), len(questions))
		}
		var wantUpstream []string
		for i, q := range questions {
			turn := out.Turns[i]
			city := modelWeather.FindStringSubmatch(q)
			if city == nil {
				want(t, fmt.Sprintf("turn %d: text", i+1), turn.Text, "Noted: "+q)
				want(t, fmt.Sprintf("turn %d: steps", i+1), len(turn.Steps), 1)
				wantUpstream = append(wantUpstream, q)
				continue
			}
			w := weathers[city[1]]
			want(t, fmt.Sprintf("turn %d: text", i+1), turn.Text, "The weather in "+city[1]+": "+w+".")
			if len(turn.Steps) != 2 || len(turn.Steps[0].ToolCalls) != 1 || len(turn.Steps[0].ToolResults) != 1 {
				t.Errorf("turn %d: steps %+v, want a call of get_weather, then the answer", i+1, turn.Steps)
			} else {
				c := turn.Steps[0].ToolCalls[0]
				want(t, fmt.Sprintf("turn %d: the call", i+1), [2]any{c.Name, c.Input}, [2]any{"get_weather", map[string]any{"city": city[1]}})
				want(t, fmt.Sprintf("turn %d: the result", i+1), turn.Steps[0].ToolResults[0].Output, any(w))
			}
			wantUpstream = append(wantUpstream, q, q)
		}
		for i, turn := range out.Turns {
			want(t, fmt.Sprintf("turn %d: finish reason", i+1), turn.FinishReason, "stop")
			if mode == "stream" {
				want(t, fmt.Sprintf("turn %d: streamed text", i+1), turn.Streamed, turn.Text)
				if len(turn.Errors) > 0 {
					t.Errorf("turn %d: stream errors %q, want none", i+1, turn.Errors)
				}
			}
		}
		// The SDK's default: the Responses API, stored, later turns
		// referring to earlier output by item id.
		refs := 0
		for _, r := range out.Requests {
			if !strings.HasSuffix(r.URL, "/v1/responses") || r.Store != nil && !*r.Store {
				t.Errorf("the SDK sent %s (store %v): want the Responses API, stored", r.URL, r.Store)
			}
			for _, it := range r.Input {
				if it == "item_reference" {
					refs++
				}
			}
		}
		if refs == 0 {
			t.Errorf("no request sent an item_reference (the SDK's default with store on): %+v", out.Requests)
		}
		reqs := f.upstream(t)
		want(t, "upstream requests' user messages", upstreamTurns(reqs), wantUpstream)
		if last := reqs[len(reqs)-1]; !strings.Contains(fmt.Sprint(last.Messages), "The weather in") {
			t.Errorf("the last upstream request has no earlier answer: %+v", last.Messages)
		}
		f.oneSession(t, uint64(len(questions)))
	}
}

// structured runs structured.mjs's variant, whose prompt gives city and
// celsius, and checks the parsed object and that the upstream got the
// schema.
func structured(variant, city string, celsius int) func(t *testing.T, f *frameworkRun) {
	return func(t *testing.T, f *frameworkRun) {
		var out struct {
			Result map[string]any
			Parsed bool
		}
		prompt := fmt.Sprintf("Extract the weather report: %s, %d degrees.", city, celsius)
		f.script(t, &out, "structured", []string{variant}, "CTXINF_PROMPT="+prompt)
		want(t, "result", out.Result, map[string]any{"city": city, "celsius": float64(celsius)})
		if !out.Parsed {
			t.Errorf("the result does not parse with the schema")
		}
		reqs := f.upstream(t)
		if len(reqs) != 1 {
			t.Fatalf("%d upstream requests, want 1", len(reqs))
		}
		r := reqs[0]
		var schema struct {
			Type       string
			Properties map[string]struct{ Type string }
		}
		switch variant {
		case "functionCalling":
			if r.ForcedTool != "weather_report" || !r.Offers("weather_report") {
				t.Errorf("upstream: tool_choice %s, tools %v: want weather_report offered and forced", r.ToolChoice, r.Tools)
			}
			var params struct {
				Tools []struct {
					Parameters json.RawMessage
					Function   struct{ Parameters json.RawMessage }
				}
			}
			_ = json.Unmarshal(f.up.Requests()[0].Body, &params)
			for _, tl := range params.Tools {
				_ = json.Unmarshal(append(tl.Parameters, tl.Function.Parameters...), &schema)
			}
		default:
			if r.SchemaName != "weather_report" {
				t.Errorf("upstream: json_schema format named %q, want weather_report: %s", r.SchemaName, f.up.Requests()[0].Body)
			}
			_ = json.Unmarshal(r.Schema, &schema)
		}
		if schema.Type != "object" || schema.Properties["city"].Type != "string" || schema.Properties["celsius"].Type != "number" {
			t.Errorf("upstream: the schema %+v is not the client's", schema)
		}
	}
}

// sdkError is what errors.mjs reports of a call.
type sdkError struct {
	OK                              bool
	Class, Message, RetryAfter      string
	Status                          int
	RateLimitError, BadRequestError bool
	Attempts                        int
	Ms                              int
}

// openAIErrors checks the OpenAI JS SDK's error classes for an upstream
// 429 and 400, and counts the upstream requests of each SDK call.
func openAIErrors(t *testing.T, f *frameworkRun) {
	var out map[string]sdkError
	f.script(t, &out, "errors", nil)
	reqs := f.upstream(t)
	for _, name := range []string{"chat-429", "chat-400", "chat-stream-429", "responses-429", "responses-400"} {
		e := out[name]
		n := 0
		for _, r := range reqs {
			if u, _ := r.Turn(); strings.Contains(u, "Call "+name+":") {
				n++
			}
		}
		t.Logf("%s: %s %d after %d SDK attempts in %d ms, %d upstream requests", name, e.Class, e.Status, e.Attempts, e.Ms, n)
		if strings.HasSuffix(name, "429") {
			if !e.RateLimitError || e.Status != 429 || e.RetryAfter != modelRetryAfter {
				t.Errorf("%s: %+v: want RateLimitError, 429, Retry-After %s", name, e, modelRetryAfter)
			}
			// The SDK retries a 429 after its Retry-After; the runtime
			// leaves that to it rather than multiply the retries.
			if n != e.Attempts || e.Attempts != 2 {
				t.Errorf("%s: %d upstream requests for %d SDK attempts, want 2 for 2 (maxRetries 1)", name, n, e.Attempts)
			}
		} else {
			if !e.BadRequestError || e.Status != 400 || !strings.Contains(e.Message, modelBadRequest) {
				t.Errorf("%s: %+v: want BadRequestError, 400, the upstream's message %q", name, e, modelBadRequest)
			}
			if n != 1 || e.Attempts != 1 {
				t.Errorf("%s: %d upstream requests for %d SDK attempts, want one (a 400 is not retried)", name, n, e.Attempts)
			}
		}
	}
	// Every call failed: the conversations made for them were dropped.
	var list struct{ Sessions []struct{ ID, Title string } }
	getJSON(t, f.url+"/v1/sessions", &list)
	if len(list.Sessions) != 0 {
		t.Errorf("%d sessions after calls that all failed, want none: %+v", len(list.Sessions), list.Sessions)
	}
}

// clientToolLoop checks a 12-call client tool loop with the server's
// tools disabled: every call reaches the client.
func clientToolLoop(t *testing.T, f *frameworkRun) {
	var out struct {
		Steps []struct {
			ID, Finish string
			Content    *string
			Calls      []struct{ ID, Name, Args string }
		}
	}
	f.script(t, &out, "toolloop", nil)
	const calls = 12
	var got, wantSteps []string
	for _, st := range out.Steps {
		s := st.Finish
		for _, c := range st.Calls {
			s += " " + c.Name + c.Args
		}
		if st.Content != nil && *st.Content != "" {
			s += " " + *st.Content
		}
		got = append(got, s)
	}
	for i := 1; i <= calls; i++ {
		wantSteps = append(wantSteps, fmt.Sprintf(`tool_calls tick{"n":%d}`, i))
	}
	wantSteps = append(wantSteps, fmt.Sprintf("stop Ticked %d times.", calls))
	want(t, "steps", got, wantSteps)
	reqs := f.upstream(t)
	if len(reqs) != calls+1 {
		t.Errorf("%d upstream requests, want %d", len(reqs), calls+1)
	}
	for i, r := range reqs {
		if _, results := r.Turn(); len(results) != i {
			t.Errorf("upstream request %d: %d tool results, want %d", i, len(results), i)
		}
	}
	f.oneSession(t, 1)
}

// memoryToolsConfig offers the server's model (gpt) the memory tools,
// per model, and folds (then indexes) every turn at once.
var memoryToolsConfig = []string{"CTX_MEMORY_TOOLS_MODELS=gpt", "CTX_CONTEXT_WINDOW_MESSAGES=0", "CTX_CONTEXT_OVERFLOW_MESSAGES=0"}

// memoryTools runs memory.mjs's mode (the OpenAI SDK's Chat Completions
// or the Anthropic SDK's Messages, streamed or not): the model searches
// its memory for a fact the user stated a turn before, then calls the
// client's get_weather, then answers with both. The client gets the
// get_weather call and the answer, and nothing of search_memory in any
// byte it receives; the upstream is offered both tools and gets the
// search's hits, the fact among them.
func memoryTools(mode string) func(t *testing.T, f *frameworkRun) {
	return func(t *testing.T, f *frameworkRun) {
		var out struct {
			Answers []struct {
				Finish, Text string
				Calls        []struct{ ID, Name, Args string }
			}
			Received []string
		}
		f.script(t, &out, "memory", []string{mode})
		toolsFinish, stop := "tool_calls", "stop"
		if strings.HasPrefix(mode, "messages") {
			toolsFinish, stop = "tool_use", "end_turn"
		}
		var got []string
		for _, a := range out.Answers {
			s := a.Finish
			for _, c := range a.Calls {
				s += " " + c.Name + c.Args
			}
			if a.Text != "" {
				s += " " + a.Text
			}
			got = append(got, s)
		}
		want(t, "answers", got, []string{stop + " Noted: Note: the deploy target is eu-west-1.",
			toolsFinish + ` get_weather{"city":"Paris"}`,
			stop + " The deploy target is eu-west-1. The weather in Paris: 18C, sunny."})
		if len(out.Received) != 3 {
			t.Errorf("%d answer bodies received, want 3", len(out.Received))
		}
		for i, body := range out.Received {
			for _, hidden := range []string{"search_memory", "pin_fact", "memory_artifact"} {
				if strings.Contains(body, hidden) {
					t.Errorf("answer %d shows the client %q:\n%s", i, hidden, body)
				}
			}
		}
		reqs := f.upstream(t)
		if len(reqs) != 4 {
			t.Fatalf("%d upstream requests, want 4 (the note; the search, get_weather and the answer)", len(reqs))
		}
		if !reqs[1].Offers("search_memory") || !reqs[1].Offers("get_weather") {
			t.Errorf("the question's first upstream request offers %v, want search_memory and get_weather", reqs[1].Tools)
		}
		if _, results := reqs[2].Turn(); len(results) != 1 || !strings.Contains(results[0], "<memory_artifact") ||
			!strings.Contains(results[0], "eu-west-1") {
			t.Errorf("the step after the search got %q, want the hits with the note", results)
		}
		f.oneSession(t, 2)
	}
}

// identity runs identity.mjs's mode (an agent whose system prompt
// changes each request, or one that trims its history to a window) and
// checks that it stays one conversation with every system prompt sent.
func identity(mode string, requests int) func(t *testing.T, f *frameworkRun) {
	return func(t *testing.T, f *frameworkRun) {
		var out struct {
			Exchanges []struct{ System, User, Reply string }
		}
		f.script(t, &out, "identity", []string{mode})
		if len(out.Exchanges) != requests {
			t.Fatalf("%d exchanges, want %d", len(out.Exchanges), requests)
		}
		reqs := f.upstream(t)
		if len(reqs) != requests {
			t.Fatalf("%d upstream requests, want %d", len(reqs), requests)
		}
		for i, x := range out.Exchanges {
			want(t, fmt.Sprintf("request %d: reply", i+1), x.Reply, "Noted: "+x.User)
			u, _ := reqs[i].Turn()
			want(t, fmt.Sprintf("upstream request %d: user message", i+1), u, x.User)
			// The new system prompt still goes to the model.
			if !strings.Contains(reqs[i].System, x.System) {
				t.Errorf("upstream request %d: system %q lacks the client's %q", i+1, reqs[i].System, x.System)
			}
		}
		f.oneSession(t, uint64(requests))
	}
}

var frameworkScenarios = []frameworkScenario{
	{name: "langgraph-react-agent/chat", run: langGraph("chat")},
	{name: "langgraph-react-agent/responses", upstream: "responses", run: langGraph("responses")},
	{name: "vercel-ai/generate-text", upstream: "responses", run: vercel("generate",
		[]string{"What is the weather in Paris?", "What is the weather in Rome?", "Thank you."},
		map[string]string{"Paris": "18C, sunny", "Rome": "12C, rain"})},
	{name: "vercel-ai/stream-text", run: vercel("stream", []string{"What is the weather in Oslo?", "Thank you."},
		map[string]string{"Oslo": "-3C, snow"})},
	{name: "langchain-structured-output/json-schema", run: structured("jsonSchema", "Lisbon", 21)},
	{name: "langchain-structured-output/function-calling", run: structured("functionCalling", "Oslo", -3)},
	{name: "langchain-structured-output/responses", upstream: "responses", run: structured("responses", "Vienna", 9)},
	{name: "openai-sdk/error-classes", run: openAIErrors},
	{name: "openai-sdk/client-tool-loop", config: []string{"CTX_TOOLS_MODE=disabled"}, run: clientToolLoop},
	{name: "agent/changing-system-prompt", run: identity("timestamp", 4)},
	{name: "agent/trimmed-history", run: identity("window", 8)},
	{name: "memory-tools/openai-chat", config: memoryToolsConfig, run: memoryTools("chat")},
	{name: "memory-tools/openai-chat-stream", config: memoryToolsConfig, run: memoryTools("chat-stream")},
	{name: "memory-tools/anthropic-messages", config: memoryToolsConfig, run: memoryTools("messages")},
	{name: "memory-tools/anthropic-messages-stream", config: memoryToolsConfig, run: memoryTools("messages-stream")},
}
