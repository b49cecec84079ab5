package actors

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/anthropic"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// e2eKey is the API key of the end-to-end tests: it must never reach the
// data dir or the logs.
const e2eKey = "sk-e2e-SECRET-7f3a9c"

// call is a tool call a scripted model makes, its arguments in pieces.
type call struct {
	id, name string
	args     []string
}

// dialect scripts one provider API on the fake server.
type dialect struct {
	name     string
	provider func(url string) providers.Provider
	text     func(deltas ...string) fakeapi.Reply
	tools    func(text string, calls ...call) fakeapi.Reply
	length   func(deltas ...string) fakeapi.Reply // stopped by the output bound
	refusal  func(text string) fakeapi.Reply
	unknown  func(deltas ...string) fakeapi.Reply // text with events of unknown types around it
	cut      func(deltas ...string) fakeapi.Reply // the connection drops after the deltas
	limited  fakeapi.Reply                        // 429, Retry-After 0.05 s
	broken   fakeapi.Reply                        // 500
	// maxOutcome is the outcome of length.
	maxOutcome messages.StepOutcome
}

func oaiCalls(calls []call) []fakeapi.OpenAIToolCall {
	var out []fakeapi.OpenAIToolCall
	for _, c := range calls {
		out = append(out, fakeapi.OpenAIToolCall{ID: c.id, Name: c.name, Args: c.args})
	}
	return out
}

func rateLimited(r fakeapi.Reply) fakeapi.Reply {
	r.Header = r.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set("Retry-After", "0.05")
	return r
}

var maxTokens = messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}

var dialects = []dialect{
	{
		name: "openai-responses",
		provider: func(url string) providers.Provider {
			return openai.New(openai.Options{BaseURL: url + "/v1", APIKey: e2eKey, API: openai.APIResponses})
		},
		text: fakeapi.ResponsesText,
		tools: func(text string, calls ...call) fakeapi.Reply {
			return fakeapi.NewResponsesStream().Text(text).FunctionCalls(oaiCalls(calls)...).Completed()
		},
		length:  func(d ...string) fakeapi.Reply { return fakeapi.ResponsesIncomplete("max_output_tokens", d...) },
		refusal: func(t string) fakeapi.Reply { return fakeapi.ResponsesRefusal(t) },
		unknown: func(d ...string) fakeapi.Reply {
			return fakeapi.NewResponsesStream().Raw("response.future_thing", `{"type":"response.future_thing","x":1}`).
				Text(d...).Raw("response.other_future", `{"type":"response.other_future"}`).Completed()
		},
		cut:        func(d ...string) fakeapi.Reply { return fakeapi.NewResponsesStream().Text(d...).Cut() },
		limited:    fakeapi.OpenAIRateLimited("0.05"),
		broken:     fakeapi.OpenAIServerError(),
		maxOutcome: maxTokens,
	},
	{
		name: "openai-chat",
		provider: func(url string) providers.Provider {
			return openai.New(openai.Options{BaseURL: url + "/v1", APIKey: e2eKey, API: openai.APIChat})
		},
		text: func(d ...string) fakeapi.Reply { return fakeapi.ChatText("stop", d...) },
		tools: func(text string, calls ...call) fakeapi.Reply {
			return fakeapi.NewChatStream().Text(text).ToolCalls(oaiCalls(calls)...).Finish("tool_calls")
		},
		length:  func(d ...string) fakeapi.Reply { return fakeapi.ChatText("length", d...) },
		refusal: func(t string) fakeapi.Reply { return fakeapi.NewChatStream().Refusal(t).Finish("stop") },
		unknown: func(d ...string) fakeapi.Reply {
			return fakeapi.NewChatStream().Data(`{"object":"future.thing","x":1}`).Text(d...).Finish("stop")
		},
		cut:        func(d ...string) fakeapi.Reply { return fakeapi.NewChatStream().Text(d...).Cut() },
		limited:    fakeapi.OpenAIRateLimited("0.05"),
		broken:     fakeapi.OpenAIServerError(),
		maxOutcome: maxTokens,
	},
	{
		name: "anthropic",
		provider: func(url string) providers.Provider {
			return anthropic.New(anthropic.Options{BaseURL: url, APIKey: e2eKey})
		},
		text: func(d ...string) fakeapi.Reply { return fakeapi.AnthropicText(d, "end_turn") },
		tools: func(text string, calls ...call) fakeapi.Reply {
			s := fakeapi.NewAnthropicStream().Text(text)
			for _, c := range calls {
				s = s.ToolUse(fakeapi.AnthropicCall{ID: c.id, Name: c.name, Input: strings.Join(c.args, "")}, len(c.args))
			}
			return s.Stop("tool_use")
		},
		length:  func(d ...string) fakeapi.Reply { return fakeapi.AnthropicText(d, "max_tokens") },
		refusal: func(t string) fakeapi.Reply { return fakeapi.AnthropicText([]string{t}, "refusal") },
		unknown: func(d ...string) fakeapi.Reply {
			return fakeapi.NewAnthropicStream().Event("future_event", `{"type":"future_event","x":1}`).Text(d...).
				Block(`{"type":"future_block","data":"?"}`).Stop("end_turn")
		},
		cut:        func(d ...string) fakeapi.Reply { return fakeapi.NewAnthropicStream().Text(d...).Cut() },
		limited:    rateLimited(fakeapi.AnthropicError(http.StatusTooManyRequests, "rate_limit_error", "slow down", nil)),
		broken:     fakeapi.AnthropicError(http.StatusInternalServerError, "api_error", "Internal server error", nil),
		maxOutcome: maxTokens,
	},
}

// e2eRuntime opens a runtime on a fake server playing replies, with its
// logs in logs.
func e2eRuntime(t *testing.T, d dialect, logs *bytes.Buffer, tools *ToolRegistry, replies ...fakeapi.Reply) (*Runtime, *fakeapi.Server, messages.BranchID, string) {
	t.Helper()
	srv := fakeapi.New(replies...)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := testConfig(t, dir, newEvents())
	cfg.Provider, cfg.Model = d.provider(srv.URL), "model-e2e"
	cfg.Logger = zerolog.New(logs).Level(zerolog.DebugLevel)
	cfg.Retry = &providers.RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: time.Second}
	if tools != nil {
		cfg.Tools, cfg.ToolMode, cfg.ParallelToolCalls = tools, messages.ToolsEnabled, true
	}
	r := openRuntime(t, cfg)
	t.Cleanup(func() { r.Close() })
	_, b, err := r.CreateSession(bg, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	return r, srv, b.ID, dir
}

// noKeyIn fails if the API key is in any file under dir or in logs.
func noKeyIn(t *testing.T, dir string, logs *bytes.Buffer) {
	t.Helper()
	if bytes.Contains(logs.Bytes(), []byte(e2eKey)) {
		t.Errorf("the API key is in the logs")
	}
	filepath.WalkDir(dir, func(path string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && bytes.Contains(data, []byte(e2eKey)) {
			t.Errorf("the API key is in %s", path)
		}
		return nil
	})
}

func TestEndToEndProviders(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Run("text", func(t *testing.T) {
				var logs bytes.Buffer
				r, srv, b, dir := e2eRuntime(t, d, &logs, nil, d.text("Hel", "lo, ", "world", "!"))
				text, last, updates := runTurn(t, r, b, "say hello")
				if last.Phase != messages.PhaseResponseFinalized || last.Outcome.Kind != messages.OutcomeCompleted || text != "Hello, world!" {
					t.Fatalf("turn ended %+v with %q", last, text)
				}
				if last.Durable != last.Displayed || last.Displayed == 0 || len(updates) < 5 {
					t.Errorf("counters durable/displayed %d/%d over %d updates", last.Durable, last.Displayed, len(updates))
				}
				if got := lastReply(t, r, b).RenderedText; got != "Hello, world!" {
					t.Errorf("stored reply %q", got)
				}
				rows, _ := r.DB().TurnRows(bg, b, 0, 1)
				steps, err := r.Steps(bg, rows[0].ID)
				if err != nil || len(steps) != 1 || !strings.Contains(string(steps[0].Request), `"model-e2e"`) || len(steps[0].Response) == 0 {
					t.Fatalf("step rows %+v, %v", steps, err)
				}
				// The provider's usage is kept beside the assembler's estimate.
				if steps[0].InputTokens <= 0 || steps[0].Context == nil || steps[0].Context.Estimated <= 0 {
					t.Errorf("step usage %d, estimate %+v", steps[0].InputTokens, steps[0].Context)
				}
				if reqs := srv.Requests(); len(reqs) != 1 || bytes.Contains(reqs[0].Body, []byte(e2eKey)) {
					t.Errorf("requests: %d (the key belongs in a header only)", len(reqs))
				}
				noKeyIn(t, dir, &logs)
			})
			t.Run("tool loop with split and parallel calls", func(t *testing.T) {
				var calls atomic.Int32
				reg, _ := NewToolRegistry(grepTool(&calls, nil))
				var logs bytes.Buffer
				r, srv, b, dir := e2eRuntime(t, d, &logs, reg,
					d.tools("Checking.", call{"call_a", "grep", []string{`{"q"`, `: "x`, `"}`}}, call{"call_b", "grep", []string{`{"q": "y"}`}}),
					d.text("Both ", "found."))
				text, last, _ := runTurn(t, r, b, "find x and y")
				if last.Phase != messages.PhaseResponseFinalized || last.Outcome.Kind != messages.OutcomeCompleted {
					t.Fatalf("turn ended %+v", last)
				}
				if text != "Checking.Both found." || calls.Load() != 2 {
					t.Fatalf("text %q, tool calls %d", text, calls.Load())
				}
				want := "text:Checking. use:call_a use:call_b result:call_a=match:x result:call_b=match:y text:Both found."
				if got := strings.Join(blockKinds(lastReply(t, r, b)), " "); got != want {
					t.Fatalf("reply = %s\nwant %s", got, want)
				}
				reqs := srv.Requests()
				if len(reqs) != 2 {
					t.Fatalf("%d requests, want 2", len(reqs))
				}
				checkToolResultsSent(t, d.name, reqs[1].Body)
				noKeyIn(t, dir, &logs)
			})
			t.Run("max tokens", func(t *testing.T) {
				r, _, b, _ := e2eRuntime(t, d, &bytes.Buffer{}, nil, d.length("cut ", "sh"))
				text, last, _ := runTurn(t, r, b, "write a lot")
				if last.Phase != messages.PhaseResponseFinalized || last.Outcome != d.maxOutcome || text != "cut sh" {
					t.Fatalf("turn ended %+v with %q", last, text)
				}
			})
			t.Run("refusal", func(t *testing.T) {
				r, _, b, _ := e2eRuntime(t, d, &bytes.Buffer{}, nil, d.refusal("I can't help with that."))
				text, last, _ := runTurn(t, r, b, "do something bad")
				if last.Phase != messages.PhaseResponseFinalized || text != "I can't help with that." {
					t.Fatalf("turn ended %+v with %q", last, text)
				}
			})
			t.Run("unknown events", func(t *testing.T) {
				var logs bytes.Buffer
				r, _, b, _ := e2eRuntime(t, d, &logs, nil, d.unknown("still ", "fine"))
				text, last, _ := runTurn(t, r, b, "hi")
				if last.Phase != messages.PhaseResponseFinalized || text != "still fine" {
					t.Fatalf("turn ended %+v with %q", last, text)
				}
				// Chat Completions chunks have no type: nothing is unknown.
				if d.name != "openai-chat" && !strings.Contains(logs.String(), "stream event not handled") {
					t.Errorf("unknown events were not logged:\n%s", logs.String())
				}
			})
			t.Run("disconnect mid-stream", func(t *testing.T) {
				r, srv, b, _ := e2eRuntime(t, d, &bytes.Buffer{}, nil, d.cut("half ", "an an"), d.text("never sent"))
				text, last, _ := runTurn(t, r, b, "talk")
				if last.Phase != messages.PhaseFailed || text != "half an an" || srv.Count() != 1 {
					t.Fatalf("turn ended %+v with %q after %d requests; want failed, not retried after streaming", last, text, srv.Count())
				}
				// The journal holds the partial output; the head did not
				// advance past the user message.
				rows, _ := r.DB().TurnRows(bg, b, 0, 1)
				partial, _, err := r.PartialOutput(rows[0].Step)
				if err != nil || partial != "half an an" {
					t.Fatalf("partial output %q, %v", partial, err)
				}
				if m := lastReply(t, r, b); m.Role != messages.RoleUser {
					t.Fatalf("head advanced to %s %q", m.Role, m.RenderedText)
				}
			})
			t.Run("429 with Retry-After goes back", func(t *testing.T) {
				// The caller is told when to come back; the runtime does
				// not wait on its behalf (and its SDK's retries do not
				// multiply with the runtime's).
				r, srv, b, _ := e2eRuntime(t, d, &bytes.Buffer{}, nil, d.limited, d.text("never sent"))
				_, last, _ := runTurn(t, r, b, "hi")
				if last.Phase != messages.PhaseFailed || last.Outcome.Code != messages.FailProviderRateLimited ||
					last.RetryAfter != 50*time.Millisecond || srv.Count() != 1 {
					t.Fatalf("turn ended %+v after %d requests; want failed rate limited, retry after 50ms, 1 request", last, srv.Count())
				}
			})
			t.Run("429 without Retry-After then success", func(t *testing.T) {
				limited := d.limited
				limited.Header = limited.Header.Clone()
				limited.Header.Del("Retry-After")
				r, srv, b, _ := e2eRuntime(t, d, &bytes.Buffer{}, nil, limited, d.text("after ", "waiting"))
				text, last, _ := runTurn(t, r, b, "hi")
				if last.Phase != messages.PhaseResponseFinalized || text != "after waiting" || srv.Count() != 2 {
					t.Fatalf("turn ended %+v with %q after %d requests", last, text, srv.Count())
				}
			})
			t.Run("500 then failure", func(t *testing.T) {
				r, srv, b, _ := e2eRuntime(t, d, &bytes.Buffer{}, nil, d.broken)
				_, last, _ := runTurn(t, r, b, "hi")
				if last.Phase != messages.PhaseFailed || !strings.Contains(last.Err, "500") || srv.Count() != 3 {
					t.Fatalf("turn ended %+v after %d requests; want failed with the 500 after 1 + 2 retries", last, srv.Count())
				}
			})
		})
	}
}

// checkToolResultsSent checks that the request continuing a tool loop
// answers both calls in the provider's required shape and order.
func checkToolResultsSent(t *testing.T, api string, body []byte) {
	t.Helper()
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v", err)
	}
	type item struct {
		Type       string          `json:"type"`
		Role       string          `json:"role"`
		CallID     string          `json:"call_id"`
		ToolCallID string          `json:"tool_call_id"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	}
	var got []string
	switch api {
	case "openai-responses":
		var input []item
		json.Unmarshal(req["input"], &input)
		for _, it := range input {
			switch it.Type {
			case "function_call":
				got = append(got, "call:"+it.CallID)
			case "function_call_output":
				got = append(got, "output:"+it.CallID)
			}
		}
	case "openai-chat":
		var msgs []item
		json.Unmarshal(req["messages"], &msgs)
		for _, m := range msgs {
			for _, c := range m.ToolCalls {
				got = append(got, "call:"+c.ID)
			}
			if m.Role == "tool" {
				got = append(got, "output:"+m.ToolCallID)
			}
		}
	case "anthropic":
		var msgs []item
		json.Unmarshal(req["messages"], &msgs)
		for i, m := range msgs {
			var blocks []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			}
			json.Unmarshal(m.Content, &blocks)
			for j, bl := range blocks {
				switch bl.Type {
				case "tool_use":
					got = append(got, "call:"+bl.ID)
				case "tool_result":
					// tool_result blocks come first in the user message
					// right after the tool_use.
					if m.Role != "user" || j > 1 || i == 0 || msgs[i-1].Role != "assistant" {
						t.Errorf("tool_result at message %d block %d (role %s)", i, j, m.Role)
					}
					got = append(got, "output:"+bl.ToolUseID)
				}
			}
		}
		if strings.Contains(string(req["messages"]), `"role":"system"`) {
			t.Errorf("a system-role message was sent to Anthropic")
		}
	}
	if s := strings.Join(got, " "); s != "call:call_a call:call_b output:call_a output:call_b" {
		t.Errorf("%s: tool items sent %q", api, s)
	}
}
