package openai

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// sdkParams is chatRequest r as the SDK's own params: what the provider
// sent before it encoded its requests itself.
func sdkParams(r chatRequest) oai.ChatCompletionNewParams {
	var p oai.ChatCompletionNewParams
	p.Model = r.Model
	p.MaxCompletionTokens = oai.Int(int64(r.MaxCompletionTokens))
	p.StreamOptions.IncludeUsage = oai.Bool(r.StreamOptions.IncludeUsage)
	if r.Store {
		p.Store = oai.Bool(true)
	}
	if r.ParallelToolCalls != nil {
		p.ParallelToolCalls = oai.Bool(*r.ParallelToolCalls)
	}
	switch tc := r.ToolChoice.(type) {
	case nil:
	case string:
		p.ToolChoice.OfAuto = oai.String(tc)
	case chatNamedToolChoice:
		p.ToolChoice = oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: tc.Function.Name})
	default:
		panic(fmt.Sprintf("tool_choice %T", tc))
	}
	for _, m := range r.Messages {
		switch m.Role {
		case "system":
			p.Messages = append(p.Messages, oai.SystemMessage(m.Content.(string)))
		case "user":
			switch c := m.Content.(type) {
			case string:
				p.Messages = append(p.Messages, oai.UserMessage(c))
			case []json.RawMessage:
				var parts []oai.ChatCompletionContentPartUnionParam
				for _, raw := range c {
					var part struct {
						Type     string
						Text     string
						ImageURL struct{ URL string } `json:"image_url"`
					}
					if err := json.Unmarshal(raw, &part); err != nil {
						panic(err)
					}
					switch part.Type {
					case "text":
						parts = append(parts, oai.TextContentPart(part.Text))
					case "image_url":
						parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: part.ImageURL.URL}))
					default:
						parts = append(parts, param.Override[oai.ChatCompletionContentPartUnionParam](raw))
					}
				}
				p.Messages = append(p.Messages, oai.UserMessage(parts))
			}
		case "tool":
			p.Messages = append(p.Messages, oai.ToolMessage(m.Content.(string), m.ToolCallID))
		case "assistant":
			a := &oai.ChatCompletionAssistantMessageParam{}
			if m.Content != nil {
				a.Content.OfString = oai.String(m.Content.(string))
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{ID: c.ID,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Function.Name, Arguments: c.Function.Arguments}}})
			}
			p.Messages = append(p.Messages, oai.ChatCompletionMessageParamUnion{OfAssistant: a})
		}
	}
	for _, t := range r.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Function.Name, Parameters: t.Function.Parameters}
		if t.Function.Description != "" {
			fn.Description = oai.String(t.Function.Description)
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	return p
}

// The request body the provider encodes is, value for value, what the
// SDK encodes from the same request (with the "stream": true the SDK
// adds), for every kind of message and tool.
func TestChatRequestEncodesAsTheSDK(t *testing.T) {
	c := messages.AssembledContext{
		SystemInstructions: "You are helpful.",
		PinnedFacts:        []string{"The repo is Go."},
		Summary:            "We talked about tests.",
		Retrieved:          []messages.RetrievedChunk{{Text: "an old note", Score: 0.5}},
		Window: []messages.Message{
			messages.NewMessage(messages.RoleUser, messages.Text{Text: "w1 \"quoted\" <b>&</b> é"}),
			messages.NewMessage(messages.RoleAssistant,
				messages.ToolUse{ToolUseID: "call_w", Name: "ls", Input: json.RawMessage(`{"dir":"."}`)},
				messages.ToolResult{ToolUseID: "call_w", Content: messages.Blocks{messages.Text{Text: "a.go"}}},
				messages.Text{Text: "w3"}),
		},
		Pending: []messages.Message{messages.NewMessage(messages.RoleUser, messages.Text{Text: "what is this?"},
			messages.Image{MediaType: "image/png", Source: json.RawMessage(`{"type":"base64","data":"iVBORw0K"}`)},
			messages.Image{MediaType: "image/jpeg", Source: json.RawMessage(`{"type":"url","url":"https://example.com/a.jpg"}`)},
			messages.Unknown{Provider: "openai.chat", Raw: json.RawMessage(`{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}}`)})},
		User:       messages.NewMessage(messages.RoleUser, messages.Text{Text: "Hi there"}),
		ToolMode:   messages.ToolsEnabled,
		ToolChoice: messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: "grep"},
		Tools: []messages.Tool{{Name: "grep", Description: "search files",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}, {Name: "ls"}},
	}
	for _, store := range []bool{false, true} {
		p := &Provider{store: store}
		r, err := p.buildChatRequest(providers.Request{Model: "gpt-test", MaxOutputTokens: 256, Context: c, ParallelToolCalls: true})
		if err != nil {
			t.Fatal(err)
		}
		ours, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		sdk, err := json.Marshal(sdkParams(r))
		if err != nil {
			t.Fatal(err)
		}
		var a, b map[string]any
		if err := json.Unmarshal(ours, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(sdk, &b); err != nil {
			t.Fatal(err)
		}
		b["stream"] = true
		if !reflect.DeepEqual(a, b) {
			t.Errorf("store %v: body\n%s\nthe SDK's\n%s", store, ours, sdk)
		}
		if len(r.Messages) < 6 || len(r.Tools) != 2 {
			t.Errorf("store %v: %d messages, %d tools: the request lost some", store, len(r.Messages), len(r.Tools))
		}
	}
}

// BenchmarkChatRequestEncode encodes the request of a context of 21
// messages and two tools as the provider does, and as the SDK's params
// (`go test -run X -bench ChatRequestEncode ./providers/openai`).
func BenchmarkChatRequestEncode(b *testing.B) {
	c := messages.AssembledContext{SystemInstructions: "You are helpful.", Summary: "We talked about tests.",
		User: messages.NewMessage(messages.RoleUser, messages.Text{Text: "And now?"}), ToolMode: messages.ToolsEnabled,
		Tools: []messages.Tool{{Name: "grep", Description: "search files"}, {Name: "ls"}}}
	for i := range 10 {
		c.Window = append(c.Window,
			messages.NewMessage(messages.RoleUser, messages.Text{Text: fmt.Sprintf("question %d about the staging database", i)}),
			messages.NewMessage(messages.RoleAssistant, messages.Text{Text: "The answer is forty-two, with a few more words."}))
	}
	r, err := (&Provider{}).buildChatRequest(providers.Request{Model: "gpt-test", MaxOutputTokens: 256, Context: c})
	if err != nil {
		b.Fatal(err)
	}
	for name, v := range map[string]any{"ctxinf": r, "sdk": sdkParams(r)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChatChunkDecode decodes one streamed text chunk as the stream
// does (chatChunk) and as the SDK's ChatCompletionChunk.
func BenchmarkChatChunkDecode(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini",` +
		`"system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"answer "},"logprobs":null,"finish_reason":null}]}`)
	b.Run("ctxinf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c chatChunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c oai.ChatCompletionChunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
