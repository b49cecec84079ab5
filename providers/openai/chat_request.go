package openai

import (
	"encoding/json"
	"fmt"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// chatRequest is a streamed Chat Completions request. It is encoded with
// encoding/json from these plain types rather than from the SDK's params,
// whose encoder takes seven times as long (107 µs against 14 for a
// context of 21 messages, BenchmarkChatRequestEncode on the dev VM), once
// per provider step.
type chatRequest struct {
	Model               string            `json:"model"`
	Messages            []chatMessage     `json:"messages"`
	MaxCompletionTokens int               `json:"max_completion_tokens"`
	Stream              bool              `json:"stream"`
	StreamOptions       chatStreamOptions `json:"stream_options"`
	Store               bool              `json:"store,omitempty"`
	Tools               []chatTool        `json:"tools,omitempty"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls,omitempty"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is one message of the request. An assistant message with
// tool calls only has no content.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"` // "function"
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"` // "function"
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

// buildChatRequest maps req to the chat completion request. It fails,
// naming the field, when the model is missing, the output bound is not
// positive or the context cannot be mapped.
func (p *Provider) buildChatRequest(req providers.Request) (chatRequest, error) {
	var r chatRequest
	if err := checkRequest(req); err != nil {
		return r, err
	}
	msgs, err := chatMessages(req.Context)
	if err != nil {
		return r, err
	}
	tools, err := chatTools(req.Context)
	if err != nil {
		return r, err
	}
	r.Model, r.Messages, r.MaxCompletionTokens = req.Model, msgs, req.MaxOutputTokens
	r.Stream, r.StreamOptions.IncludeUsage = true, true
	r.Store = p.store
	if len(tools) > 0 {
		r.Tools = tools
		r.ParallelToolCalls = &req.ParallelToolCalls
	}
	return r, nil
}

// estimateChat counts with tc the tokens of the JSON of c's chat
// messages and tools.
func estimateChat(c messages.AssembledContext, tc tokens.Counter) (int, error) {
	msgs, err := chatMessages(c)
	if err != nil {
		return 0, err
	}
	tools, err := chatTools(c)
	if err != nil {
		return 0, err
	}
	data, err := json.Marshal(struct {
		Messages []chatMessage `json:"messages"`
		Tools    []chatTool    `json:"tools,omitempty"`
	}{msgs, tools})
	if err != nil {
		return 0, fmt.Errorf("encode: %w", err)
	}
	return tc.Count(string(data)), nil
}

// chatMessages lays c out as chat messages: the system message
// (providers.SystemText), then the conversation (providers.Conversation).
// A user segment is a user message with its text; an assistant segment
// an assistant message with its text and its tool uses as tool_calls;
// a results segment one tool message per result, in order. What Chat
// Completions has no place for (images, reasoning, unknown blocks) is
// left out.
func chatMessages(c messages.AssembledContext) ([]chatMessage, error) {
	segs, err := conversation(c)
	if err != nil {
		return nil, err
	}
	msgs := make([]chatMessage, 0, len(segs)+1)
	text := func(role, s string) chatMessage { return chatMessage{Role: role, Content: &s} }
	if sys := providers.SystemText(c); sys != "" {
		msgs = append(msgs, text("system", sys))
	}
	for _, s := range segs {
		switch s.Kind {
		case providers.SegmentUser:
			msgs = append(msgs, text("user", s.Blocks.RenderedText()))
		case providers.SegmentAssistant:
			if m := chatAssistantMessage(s.Blocks); m.Content != nil || len(m.ToolCalls) > 0 {
				msgs = append(msgs, m) // one with reasoning only has nothing to send
			}
		case providers.SegmentToolResults:
			for _, b := range s.Blocks {
				if r, ok := b.(messages.ToolResult); ok {
					m := text("tool", toolOutputText(r))
					m.ToolCallID = r.ToolUseID
					msgs = append(msgs, m)
				}
			}
		}
	}
	return msgs, nil
}

// chatAssistantMessage maps an assistant segment: its text as content
// (left out when empty) and its tool uses as tool_calls.
func chatAssistantMessage(bs messages.Blocks) chatMessage {
	m := chatMessage{Role: "assistant"}
	if text := bs.RenderedText(); text != "" {
		m.Content = &text
	}
	for _, b := range bs {
		if u, ok := b.(messages.ToolUse); ok {
			m.ToolCalls = append(m.ToolCalls, chatToolCall{ID: u.ToolUseID, Type: "function",
				Function: chatFunctionCall{Name: u.Name, Arguments: providers.ArgumentsText(u.Input)}})
		}
	}
	return m
}

// chatTools maps c's tools to function tools when the tool mode is
// enabled or parse_only, and to none otherwise.
func chatTools(c messages.AssembledContext) ([]chatTool, error) {
	defs, err := toolDefs(c)
	if err != nil || len(defs) == 0 {
		return nil, err
	}
	tools := make([]chatTool, 0, len(defs))
	for _, d := range defs {
		tools = append(tools, chatTool{Type: "function",
			Function: chatFunction{Name: d.name, Description: d.description, Parameters: d.parameters}})
	}
	return tools, nil
}
