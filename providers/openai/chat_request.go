package openai

import (
	"encoding/json"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// buildChatParams maps req to the chat completion request. It fails,
// naming the field, when the model is missing, the output bound is not
// positive or the context cannot be mapped.
func (p *Provider) buildChatParams(req providers.Request) (oai.ChatCompletionNewParams, error) {
	var params oai.ChatCompletionNewParams
	if err := checkRequest(req); err != nil {
		return params, err
	}
	msgs, err := chatMessages(req.Context)
	if err != nil {
		return params, err
	}
	tools, err := chatTools(req.Context)
	if err != nil {
		return params, err
	}
	params.Model = req.Model
	params.Messages = msgs
	params.MaxCompletionTokens = oai.Int(int64(req.MaxOutputTokens))
	params.StreamOptions.IncludeUsage = oai.Bool(true)
	if p.store {
		params.Store = oai.Bool(true)
	}
	if len(tools) > 0 {
		params.Tools = tools
		params.ParallelToolCalls = oai.Bool(req.ParallelToolCalls)
	}
	return params, nil
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
		Messages []oai.ChatCompletionMessageParamUnion `json:"messages"`
		Tools    []oai.ChatCompletionToolUnionParam    `json:"tools,omitempty"`
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
func chatMessages(c messages.AssembledContext) ([]oai.ChatCompletionMessageParamUnion, error) {
	segs, err := conversation(c)
	if err != nil {
		return nil, err
	}
	msgs := make([]oai.ChatCompletionMessageParamUnion, 0, len(segs)+1)
	if sys := providers.SystemText(c); sys != "" {
		msgs = append(msgs, oai.SystemMessage(sys))
	}
	for _, s := range segs {
		switch s.Kind {
		case providers.SegmentUser:
			msgs = append(msgs, oai.UserMessage(s.Blocks.RenderedText()))
		case providers.SegmentAssistant:
			if m := chatAssistantMessage(s.Blocks); m.OfAssistant.Content.OfString.Valid() || len(m.OfAssistant.ToolCalls) > 0 {
				msgs = append(msgs, m) // one with reasoning only has nothing to send
			}
		case providers.SegmentToolResults:
			for _, b := range s.Blocks {
				if r, ok := b.(messages.ToolResult); ok {
					msgs = append(msgs, oai.ToolMessage(toolOutputText(r), r.ToolUseID))
				}
			}
		}
	}
	return msgs, nil
}

// chatAssistantMessage maps an assistant segment: its text as content
// (left out when empty) and its tool uses as tool_calls.
func chatAssistantMessage(bs messages.Blocks) oai.ChatCompletionMessageParamUnion {
	m := &oai.ChatCompletionAssistantMessageParam{}
	if text := bs.RenderedText(); text != "" {
		m.Content.OfString = oai.String(text)
	}
	for _, b := range bs {
		if u, ok := b.(messages.ToolUse); ok {
			m.ToolCalls = append(m.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID: u.ToolUseID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      u.Name,
						Arguments: providers.ArgumentsText(u.Input),
					},
				},
			})
		}
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: m}
}

// chatTools maps c's tools to function tools when the tool mode is
// enabled or parse_only, and to none otherwise.
func chatTools(c messages.AssembledContext) ([]oai.ChatCompletionToolUnionParam, error) {
	defs, err := toolDefs(c)
	if err != nil || len(defs) == 0 {
		return nil, err
	}
	tools := make([]oai.ChatCompletionToolUnionParam, 0, len(defs))
	for _, d := range defs {
		fn := shared.FunctionDefinitionParam{Name: d.name, Parameters: d.parameters}
		if d.description != "" {
			fn.Description = oai.String(d.description)
		}
		tools = append(tools, oai.ChatCompletionFunctionTool(fn))
	}
	return tools, nil
}
