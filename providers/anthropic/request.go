package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// buildParams maps req to the Messages request, its stable prefix marked
// for the prompt cache when cache is true (see markCache). It fails,
// naming the field, when the model is missing, the output bound is not
// positive or the context cannot be mapped.
func buildParams(req providers.Request, cache bool) (sdk.MessageNewParams, error) {
	var params sdk.MessageNewParams
	if req.Model == "" {
		return params, errors.New("Request.Model: required")
	}
	if req.MaxOutputTokens <= 0 {
		return params, fmt.Errorf("Request.MaxOutputTokens = %d: must be positive (it is sent as max_tokens)", req.MaxOutputTokens)
	}
	tools, err := buildTools(req.Context)
	if err != nil {
		return params, err
	}
	msgs, start, err := layoutMessages(req.Context)
	if err != nil {
		return params, err
	}
	choice, err := buildToolChoice(req.Context, req.ParallelToolCalls)
	if err != nil {
		return params, err
	}
	params.Model = sdk.Model(req.Model)
	params.MaxTokens = int64(req.MaxOutputTokens)
	if sys := providers.SystemText(req.Context); sys != "" {
		params.System = []sdk.TextBlockParam{{Text: sys}}
	}
	params.Messages = msgs
	setParams(&params, req.Params)
	if len(tools) > 0 {
		params.Tools = tools
		params.ToolChoice = choice
	}
	if cc, ok := cacheControl(cache, req); ok {
		markCache(&params, req.Context, start, cc)
	}
	return params, nil
}

// buildToolChoice is the tool_choice of a request for c
// (providers.ToolChoice) that defines tools: {"type":"auto"} (also for
// no choice, the API's default), {"type":"none"}, {"type":"any"} for
// "required", or {"type":"tool","name":N}; all but none carry
// disable_parallel_tool_use, the negation of parallel.
func buildToolChoice(c messages.AssembledContext, parallel bool) (sdk.ToolChoiceUnionParam, error) {
	var u sdk.ToolChoiceUnionParam
	tc, err := providers.ToolChoice(c)
	if err != nil {
		return u, err
	}
	disable := sdk.Bool(!parallel)
	switch tc.Mode {
	case messages.ToolChoiceNone:
		u.OfNone = &sdk.ToolChoiceNoneParam{}
	case messages.ToolChoiceRequired:
		u.OfAny = &sdk.ToolChoiceAnyParam{DisableParallelToolUse: disable}
	case messages.ToolChoiceTool:
		u.OfTool = &sdk.ToolChoiceToolParam{Name: tc.Name, DisableParallelToolUse: disable}
	default:
		u.OfAuto = &sdk.ToolChoiceAutoParam{DisableParallelToolUse: disable}
	}
	return u, nil
}

// buildMessages lays c out as Messages API messages, from
// providers.Conversation: user segments are user messages, assistant
// segments assistant messages, and tool results a user message whose
// content starts with them. Messages of the same role in a row are merged
// (so the user's text follows the tool results it comes after), and
// messages left without content are dropped, so roles alternate.
//
// The API rejects tool_use and tool_result blocks in a request that
// defines no tools: providers.Conversation then writes them as text.
//
// It fails when a tool use lacks its id or name, or when nothing is left
// to send.
func buildMessages(c messages.AssembledContext) ([]sdk.MessageParam, error) {
	msgs, _, err := layoutMessages(c)
	return msgs, err
}

// layoutMessages is buildMessages, and where the request's new part
// starts (providers.Segment.New): the message and block of its first
// block; {-1, -1} when it has none.
func layoutMessages(c messages.AssembledContext) ([]sdk.MessageParam, blockAt, error) {
	var msgs []sdk.MessageParam
	start := blockAt{-1, -1}
	for i, seg := range providers.Conversation(c) {
		role := sdk.MessageParamRoleUser
		var content []sdk.ContentBlockParamUnion
		var err error
		switch seg.Kind {
		case providers.SegmentUser:
			content = userContent(seg.Blocks)
		case providers.SegmentAssistant:
			role = sdk.MessageParamRoleAssistant
			content, err = assistantContent(seg.Blocks)
		case providers.SegmentToolResults:
			content = resultContent(seg.Blocks)
		}
		if err != nil {
			return nil, start, fmt.Errorf("conversation segment %d: %w", i, err)
		}
		if len(content) == 0 {
			continue
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			if seg.New && start.msg < 0 {
				start = blockAt{n - 1, len(msgs[n-1].Content)}
			}
			msgs[n-1].Content = append(msgs[n-1].Content, content...)
			continue
		}
		if seg.New && start.msg < 0 {
			start = blockAt{len(msgs), 0}
		}
		msgs = append(msgs, sdk.MessageParam{Role: role, Content: content})
	}
	if len(msgs) == 0 {
		return nil, start, errors.New("Context.User: the user message is empty and there is no other message to send")
	}
	trimFinalAssistant(msgs)
	return msgs, start, nil
}

// blockAt is where a content block is in a request's messages.
type blockAt struct{ msg, block int }

// userContent maps the blocks of a user message: text, images (see
// imageBlock), and unknown blocks that came from this API (a part an
// Anthropic client sent, Provider "anthropic"). An image or unknown
// block this API cannot take becomes a text block saying so
// (providers.UnsupportedPart); anything else has no place in a user
// message and is left out.
func userContent(bs messages.Blocks) []sdk.ContentBlockParamUnion {
	var out []sdk.ContentBlockParamUnion
	for _, b := range bs {
		switch b := b.(type) {
		case messages.Text:
			if hasText(b.Text) {
				out = append(out, sdk.NewTextBlock(b.Text))
			}
		case messages.Image:
			if raw, ok := imageBlock(b); ok {
				out = append(out, rawBlock(raw))
				continue
			}
			out = append(out, sdk.NewTextBlock(providers.UnsupportedImage(b)))
		case messages.Unknown:
			if raw, ok := ownUnknown(b); ok {
				out = append(out, rawBlock(raw))
				continue
			}
			out = append(out, sdk.NewTextBlock(providers.UnsupportedPart(providers.UnknownType(b))))
		}
	}
	return out
}

// assistantContent maps the blocks of an assistant message: text, tool
// uses (their input as a JSON object), thinking blocks from this API that
// can be replayed, and unknown blocks from this API, in order.
func assistantContent(bs messages.Blocks) ([]sdk.ContentBlockParamUnion, error) {
	var out []sdk.ContentBlockParamUnion
	for i, b := range bs {
		switch b := b.(type) {
		case messages.Text:
			if hasText(b.Text) {
				out = append(out, sdk.NewTextBlock(b.Text))
			}
		case messages.ToolUse:
			if b.ToolUseID == "" || b.Name == "" {
				return nil, fmt.Errorf("block %d: tool use needs a ToolUseID and a Name", i)
			}
			out = append(out, sdk.NewToolUseBlock(b.ToolUseID, providers.ArgumentsObject(b.Input), b.Name))
		case messages.Reasoning:
			if replayableThinking(b.Raw) {
				out = append(out, rawBlock(b.Raw))
			}
		case messages.Unknown:
			if raw, ok := ownUnknown(b); ok {
				out = append(out, rawBlock(raw))
			}
		}
	}
	return out, nil
}

// resultContent maps tool results to tool_result blocks, their content
// the results' text.
func resultContent(bs messages.Blocks) []sdk.ContentBlockParamUnion {
	var out []sdk.ContentBlockParamUnion
	for _, b := range bs {
		r, ok := b.(messages.ToolResult)
		if !ok {
			continue
		}
		text := providers.ResultText(r)
		res := sdk.ToolResultBlockParam{ToolUseID: r.ToolUseID}
		if hasText(text) {
			res.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: text}}}
		}
		if r.IsError {
			res.IsError = sdk.Bool(true)
		}
		out = append(out, sdk.ContentBlockParamUnion{OfToolResult: &res})
	}
	return out
}

// trimFinalAssistant removes trailing white space from the text a final
// assistant message ends with (a prefill), which the API rejects. Text
// blocks are never white space alone, so some text is left.
func trimFinalAssistant(msgs []sdk.MessageParam) {
	last := msgs[len(msgs)-1]
	if last.Role != sdk.MessageParamRoleAssistant {
		return
	}
	if t := last.Content[len(last.Content)-1].OfText; t != nil {
		t.Text = strings.TrimRightFunc(t.Text, unicode.IsSpace)
	}
}

// hasText reports whether s holds more than white space: the API rejects
// empty text blocks and blocks of white space alone.
func hasText(s string) bool {
	return strings.TrimSpace(s) != ""
}

// rawBlock is a content block sent as the JSON raw.
func rawBlock(raw json.RawMessage) sdk.ContentBlockParamUnion {
	return param.Override[sdk.ContentBlockParamUnion](providers.CompactJSON(raw))
}

// ownUnknown returns an unknown block's JSON when it came from this API
// (Provider "anthropic") and can be sent back.
func ownUnknown(u messages.Unknown) (json.RawMessage, bool) {
	if u.Provider != DefaultName || !isObject(u.Raw) {
		return nil, false
	}
	return u.Raw, true
}

// replayableThinking reports whether raw is a thinking block of this API
// that can be sent back as it is: a thinking block with its signature, or
// a redacted_thinking block with its data.
func replayableThinking(raw json.RawMessage) bool {
	var b struct {
		Type      string `json:"type"`
		Signature string `json:"signature"`
		Data      string `json:"data"`
	}
	if json.Unmarshal(raw, &b) != nil {
		return false
	}
	return (b.Type == "thinking" && b.Signature != "") || (b.Type == "redacted_thinking" && b.Data != "")
}

// imageMediaTypes are the media types of the images this API takes
// inline (base64).
var imageMediaTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// imageBlock maps an image whose source is one of this API's image
// sources to an image block: base64 data of a media type it takes
// (imageMediaTypes; a data URL is sent as base64 too, as the API fetches
// only http URLs), a url, or a file id. ok is false for any other.
func imageBlock(img messages.Image) (json.RawMessage, bool) {
	s := providers.ReadImageSource(img)
	var src any
	switch {
	case s.Type == "base64" && s.Data != "" && slices.Contains(imageMediaTypes, s.MediaType):
		src = struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		}{"base64", s.MediaType, s.Data}
	case s.Type == "url" && s.URL != "":
		src = struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		}{"url", s.URL}
	case s.Type == "file" && s.FileID != "":
		src = struct {
			Type   string `json:"type"`
			FileID string `json:"file_id"`
		}{"file", s.FileID}
	default:
		return nil, false
	}
	data, err := json.Marshal(struct {
		Type   string `json:"type"`
		Source any    `json:"source"`
	}{"image", src})
	return data, err == nil
}

// toolDef is a custom tool definition of the Messages API.
type toolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// buildTools maps c's tools to custom tool definitions when the tool mode
// is enabled or parse_only, and to none otherwise. A tool without a
// schema takes any object.
func buildTools(c messages.AssembledContext) ([]sdk.ToolUnionParam, error) {
	if c.ToolMode != messages.ToolsEnabled && c.ToolMode != messages.ToolsParseOnly {
		return nil, nil
	}
	var tools []sdk.ToolUnionParam
	for i, t := range c.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("Context.Tools[%d].Name: required", i)
		}
		schema := json.RawMessage(`{"type":"object"}`)
		if len(t.InputSchema) > 0 {
			if !isObject(t.InputSchema) {
				return nil, fmt.Errorf("Context.Tools[%d].InputSchema (tool %q): not a JSON object", i, t.Name)
			}
			schema = providers.CompactJSON(t.InputSchema)
		}
		data, err := json.Marshal(toolDef{Name: t.Name, Description: t.Description, InputSchema: schema})
		if err != nil {
			return nil, fmt.Errorf("Context.Tools[%d] (tool %q): %w", i, t.Name, err)
		}
		tools = append(tools, param.Override[sdk.ToolUnionParam](json.RawMessage(data)))
	}
	return tools, nil
}
