package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	openaiprovider "github.com/contextinfinity/ctxinf/providers/openai"
)

// tools.max_steps bounds the steps in which the model calls the
// runtime's own tools; a client's tool loop is the client's.

// stepLimitServer is a test server on the upstream up whose runtime has
// one tool of its own, "grep", in mode, within maxSteps.
func stepLimitServer(t *testing.T, up *fakeapi.Server, mode messages.ToolMode, maxSteps int) *testServer {
	t.Helper()
	t.Cleanup(up.Close)
	grep := actors.ToolFunc(messages.Tool{Name: "grep", Description: "Search the code.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (string, error) { return "no match", nil })
	reg, err := actors.NewToolRegistry(grep)
	if err != nil {
		t.Fatal(err)
	}
	return newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider = openaiprovider.New(openaiprovider.Options{BaseURL: up.URL + "/v1", APIKey: "sk-test", API: openaiprovider.APIChat})
		c.Model, c.Retry = "model-e2e", &fastRetry
		c.ToolMode, c.Tools, c.MaxToolSteps = mode, reg, maxSteps
	})
}

func chatClient(ts *testServer, key string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHeader(ProxyConversationHeader, key))
	return &c
}

// A client's 12-call tool loop runs to its end through Chat Completions
// with tools.mode disabled and the default limit of 8: every call
// reaches the client, and the answer after the last result is the
// model's.
func TestProxyClientToolLoopHasNoStepLimit(t *testing.T) {
	t.Parallel()
	const loops = 12
	var replies []fakeapi.Reply
	for i := range loops {
		replies = append(replies, fakeapi.ChatToolCalls(fakeapi.OpenAIToolCall{ID: fmt.Sprintf("call_%d", i+1), Name: "get_weather",
			Args: []string{`{"city":"Paris"}`}}))
	}
	up := fakeapi.New(append(replies, fakeapi.ChatText("stop", "Twelve times sunny."))...)
	ts := stepLimitServer(t, up, messages.ToolsDisabled, 8)
	oc := chatClient(ts, "twelve")
	params := openai.ChatCompletionNewParams{Model: "model-e2e", Tools: chatLoopTools(),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather, twelve times?")}}
	for i := range loops + 1 {
		c, err := oc.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		m, finish := c.Choices[0].Message, c.Choices[0].FinishReason
		if i == loops {
			if finish != "stop" || m.Content != "Twelve times sunny." {
				t.Fatalf("last answer %q %q, want the model's answer", finish, m.Content)
			}
			break
		}
		if want := fmt.Sprintf("call_%d", i+1); finish != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != want || m.Content != "" {
			t.Fatalf("answer %d: %s %+v %q, want the call %s", i, finish, m.ToolCalls, m.Content, want)
		}
		params.Messages = append(params.Messages, m.ToParam(), openai.ToolMessage("sunny", m.ToolCalls[0].ID))
	}
	if n := up.Count(); n != loops+1 {
		t.Errorf("%d upstream requests, want %d", n, loops+1)
	}
}

// At tools.max_steps a step's calls of the runtime's tools are not run,
// and the answer says so in its text; the client's calls of that step
// are handed out all the same and the loop goes on with their results.
func TestProxyStepLimitSaysSo(t *testing.T) {
	t.Parallel()
	grep := fakeapi.OpenAIToolCall{ID: "call_g", Name: "grep", Args: []string{`{}`}}
	weather := fakeapi.OpenAIToolCall{ID: "call_w", Name: "get_weather", Args: []string{`{"city":"Paris"}`}}
	note := "reached tools.max_steps (1)"
	params := func(text string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "model-e2e", Tools: chatLoopTools(),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}
	}
	t.Run("client calls handed out", func(t *testing.T) {
		t.Parallel()
		up := fakeapi.New(fakeapi.ChatToolCalls(grep, weather), fakeapi.ChatText("stop", "Sunny."))
		ts := stepLimitServer(t, up, messages.ToolsEnabled, 1)
		oc := chatClient(ts, "mixed")
		p := params("Grep, and the weather?")
		c, err := oc.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		m := c.Choices[0].Message
		if c.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_w" || !strings.Contains(m.Content, note) {
			t.Fatalf("answer %s %+v %q, want the client's call and a text saying the limit was reached", c.Choices[0].FinishReason,
				m.ToolCalls, m.Content)
		}
		p.Messages = append(p.Messages, m.ToParam(), openai.ToolMessage("sunny", "call_w"))
		c, err = oc.Chat.Completions.New(context.Background(), p)
		if err != nil || c.Choices[0].Message.Content != "Sunny." || up.Count() != 2 {
			t.Fatalf("after the results: %+v, %v (%d upstream requests)", c, err, up.Count())
		}
		// The model was told its own tool did not run.
		if body := string(up.Requests()[1].Body); !strings.Contains(body, "not executed") || !strings.Contains(body, "sunny") {
			t.Errorf("second upstream request %s, want grep's output saying it did not run and the client's result", body)
		}
	})
	t.Run("chat", func(t *testing.T) {
		t.Parallel()
		ts := stepLimitServer(t, fakeapi.New(fakeapi.ChatToolCalls(grep)), messages.ToolsEnabled, 1)
		oc := chatClient(ts, "chat")
		c, err := oc.Chat.Completions.New(context.Background(), params("Grep?"))
		if err != nil || c.Choices[0].FinishReason != "length" || !strings.Contains(c.Choices[0].Message.Content, note) {
			t.Fatalf("answer %+v, %v; want finish_reason length and a text saying the limit was reached", c, err)
		}
	})
	t.Run("chat stream", func(t *testing.T) {
		t.Parallel()
		ts := stepLimitServer(t, fakeapi.New(fakeapi.ChatToolCalls(grep)), messages.ToolsEnabled, 1)
		oc := chatClient(ts, "chat-stream")
		s := oc.Chat.Completions.NewStreaming(context.Background(), params("Grep?"))
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil || acc.Choices[0].FinishReason != "length" || !strings.Contains(acc.Choices[0].Message.Content, note) {
			t.Fatalf("answer %+v, %v; want finish_reason length and a text saying the limit was reached", acc.ChatCompletion, err)
		}
	})
	t.Run("messages stream", func(t *testing.T) {
		t.Parallel()
		ts := stepLimitServer(t, fakeapi.New(fakeapi.ChatToolCalls(grep)), messages.ToolsEnabled, 1)
		ac := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0),
			aoption.WithHeader(ProxyConversationHeader, "messages-stream"))
		s := ac.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "model-e2e", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Grep?"))}})
		var acc anthropic.Message
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil || len(acc.Content) != 1 || !strings.Contains(acc.Content[0].Text, note) {
			t.Fatalf("answer %+v, %v; want a text saying the limit was reached", acc.Content, err)
		}
	})
}
