package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	anthropicprovider "github.com/contextinfinity/ctxinf/providers/anthropic"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// The prompt tokens the upstream read from its prompt cache reach the
// client in each API's own field (Chat Completions'
// prompt_tokens_details.cached_tokens, Responses'
// input_tokens_details.cached_tokens, the Messages API's
// cache_read_input_tokens and cache_creation_input_tokens, which its
// input_tokens leaves out), streamed or not, and are kept in the step's
// row (GET .../turns/{turn}).
func TestProxyReportsCachedTokens(t *testing.T) {
	t.Parallel()
	oaiClient := func(url string) oai.Client {
		return oai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	}
	// stepCache is what the step row of the proxy answer id (made with
	// prefix) on branch says of the prompt cache.
	stepCache := func(t *testing.T, ts *testServer, branch, prefix, id string) (read, write int) {
		t.Helper()
		turn, _, ok := parseStepID(prefix, id)
		if !ok {
			t.Fatalf("answer id %q", id)
		}
		var info struct {
			Steps []struct {
				Input int `json:"input_tokens"`
				Read  int `json:"cache_read_input_tokens"`
				Write int `json:"cache_creation_input_tokens"`
			} `json:"steps"`
		}
		if code := ts.call(t, http.MethodGet, "/v1/branches/"+branch+"/turns/"+turn.String(), nil, &info); code != http.StatusOK || len(info.Steps) != 1 {
			t.Fatalf("GET turn: %d, %+v", code, info)
		}
		return info.Steps[0].Read, info.Steps[0].Write
	}

	t.Run("chat", func(t *testing.T) {
		t.Parallel()
		up := fakeapi.New(fakeapi.NewChatStream().Text("Hi").Usage(3000, 5).CachedTokens(2048).Finish("stop"))
		ts := upstreamServer(t, openai.APIChat, Options{}, up)
		cl := oaiClient(ts.URL)
		var res *http.Response
		msgs := []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hello")}
		c, err := cl.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs},
			option.WithResponseInto(&res))
		if err != nil {
			t.Fatal(err)
		}
		if c.Usage.PromptTokens != 3000 || c.Usage.PromptTokensDetails.CachedTokens != 2048 {
			t.Errorf("usage %d prompt tokens, %d cached; want 3000, 2048", c.Usage.PromptTokens, c.Usage.PromptTokensDetails.CachedTokens)
		}
		if read, write := stepCache(t, ts, res.Header.Get(ProxyBranchHeader), "chatcmpl-", c.ID); read != 2048 || write != 0 {
			t.Errorf("step row: %d read from the cache, %d written; want 2048, 0", read, write)
		}

		// Streamed, with usage asked for.
		msgs = append(msgs, oai.AssistantMessage(c.Choices[0].Message.Content), oai.UserMessage("again"))
		stream := cl.Chat.Completions.NewStreaming(context.Background(), oai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs,
			StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}}, option.WithHeader(ProxyBranchHeader, res.Header.Get(ProxyBranchHeader)))
		var acc oai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Usage.PromptTokensDetails.CachedTokens != 2048 {
			t.Errorf("streamed: %d cached tokens, want 2048", acc.Usage.PromptTokensDetails.CachedTokens)
		}
	})

	t.Run("responses", func(t *testing.T) {
		t.Parallel()
		up := fakeapi.New(fakeapi.NewResponsesStream().Text("Hi").Usage(2345, 7).CachedTokens(1152).Completed())
		ts := upstreamServer(t, openai.APIResponses, Options{}, up)
		var res *http.Response
		cl := oaiClient(ts.URL)
		r, err := cl.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini",
			Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hello")}}, option.WithResponseInto(&res))
		if err != nil {
			t.Fatal(err)
		}
		if r.Usage.InputTokens != 2345 || r.Usage.InputTokensDetails.CachedTokens != 1152 {
			t.Errorf("usage %d input tokens, %d cached; want 2345, 1152", r.Usage.InputTokens, r.Usage.InputTokensDetails.CachedTokens)
		}
		if read, _ := stepCache(t, ts, res.Header.Get(ProxyBranchHeader), "resp_", r.ID); read != 1152 {
			t.Errorf("step row: %d read from the cache, want 1152", read)
		}
	})

	t.Run("messages", func(t *testing.T) {
		t.Parallel()
		reply := fakeapi.NewAnthropicStream().Text("Hi").Usage(20, 9).CacheUsage(1500, 3000).Stop("end_turn")
		ts, _ := anthropicUpstream(t, reply)
		cl := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
		var res *http.Response
		params := anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}
		m, err := cl.Messages.New(context.Background(), params, aoption.WithResponseInto(&res))
		if err != nil {
			t.Fatal(err)
		}
		if u := m.Usage; u.InputTokens != 20 || u.CacheReadInputTokens != 3000 || u.CacheCreationInputTokens != 1500 || u.OutputTokens != 9 {
			t.Errorf("usage %d in, %d read from the cache, %d written, %d out; want 20, 3000, 1500, 9",
				u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
		}
		branch := res.Header.Get(ProxyBranchHeader)
		if read, write := stepCache(t, ts, branch, "msg_", m.ID); read != 3000 || write != 1500 {
			t.Errorf("step row: %d read from the cache, %d written; want 3000, 1500", read, write)
		}

		// Streamed: message_delta carries the usage.
		params.Messages = append(params.Messages, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("again")))
		stream := cl.Messages.NewStreaming(context.Background(), params, aoption.WithHeader(ProxyBranchHeader, branch))
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if u := acc.Usage; u.CacheReadInputTokens != 3000 || u.CacheCreationInputTokens != 1500 || u.InputTokens != 20 {
			t.Errorf("streamed usage %d in, %d read from the cache, %d written; want 20, 3000, 1500",
				u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens)
		}
	})

	// A Messages client of an OpenAI upstream: the cached tokens are
	// taken out of input_tokens.
	t.Run("messages over chat", func(t *testing.T) {
		t.Parallel()
		up := fakeapi.New(fakeapi.NewChatStream().Text("Hi").Usage(3000, 5).CachedTokens(2048).Finish("stop"))
		ts := upstreamServer(t, openai.APIChat, Options{}, up)
		cl := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
		m, err := cl.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}})
		if err != nil {
			t.Fatal(err)
		}
		if u := m.Usage; u.InputTokens != 952 || u.CacheReadInputTokens != 2048 || u.CacheCreationInputTokens != 0 {
			t.Errorf("usage %d in, %d read from the cache, %d written; want 952, 2048, 0",
				u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens)
		}
	})
}

// An Anthropic upstream gets the runtime's cache breakpoints: the end of
// the system prompt's stable part and, from the second turn, the end of
// the history; the new user message (the retrieved memory and the
// user's words) carries none.
func TestProxyAnthropicBreakpoints(t *testing.T) {
	t.Parallel()
	up := fakeapi.New(fakeapi.AnthropicText([]string{"Hi"}, "end_turn"))
	t.Cleanup(up.Close)
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider = anthropicprovider.New(anthropicprovider.Options{BaseURL: up.URL, APIKey: "upstream-key"})
		c.Model = "claude-upstream"
		c.Fold = &core.Policy{K: 6, B: 4} // the first turn stays in the prompt verbatim
	})
	cl := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 100,
		System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}
	var res *http.Response
	m, err := cl.Messages.New(context.Background(), params, aoption.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	params.Messages = append(params.Messages, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("again")))
	if _, err := cl.Messages.New(context.Background(), params, aoption.WithHeader(ProxyBranchHeader, res.Header.Get(ProxyBranchHeader))); err != nil {
		t.Fatal(err)
	}
	reqs := up.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream requests, want 2", len(reqs))
	}
	var second map[string]any
	if err := json.Unmarshal(reqs[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	var marks []string
	for i, s := range second["system"].([]any) {
		if s.(map[string]any)["cache_control"] != nil {
			marks = append(marks, "system "+string(rune('0'+i)))
		}
	}
	msgs := second["messages"].([]any)
	for i, msg := range msgs {
		for j, b := range msg.(map[string]any)["content"].([]any) {
			if b.(map[string]any)["cache_control"] != nil {
				marks = append(marks, "msg "+string(rune('0'+i))+"."+string(rune('0'+j)))
			}
		}
	}
	if got := len(msgs); got != 3 {
		t.Fatalf("%d messages upstream, want 3", got)
	}
	if want := []string{"system 0", "msg 1.0"}; !slices.Equal(marks, want) {
		t.Errorf("breakpoints %v, want %v", marks, want)
	}
}
