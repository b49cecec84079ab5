package openai

import (
	"encoding/json"
	"fmt"
	"strings"

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
	ToolChoice          any               `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls,omitempty"`
	// The client's generation settings (chatParams).
	Temperature      *float64            `json:"temperature,omitempty"`
	TopP             *float64            `json:"top_p,omitempty"`
	FrequencyPenalty *float64            `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64            `json:"presence_penalty,omitempty"`
	Seed             *int64              `json:"seed,omitempty"`
	LogitBias        map[string]float64  `json:"logit_bias,omitempty"`
	Stop             []string            `json:"stop,omitempty"`
	ResponseFormat   *chatResponseFormat `json:"response_format,omitempty"`
	ReasoningEffort  string              `json:"reasoning_effort,omitempty"`
	Verbosity        string              `json:"verbosity,omitempty"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is one message of the request. Content is a string, or
// for a user message with images or parts sent as they came a list of
// content parts ([]json.RawMessage); an assistant message with tool
// calls only has none (nil).
type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content,omitempty"`
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
	choice, err := chatToolChoice(req.Context)
	if err != nil {
		return r, err
	}
	r.Model, r.Messages, r.MaxCompletionTokens = req.Model, msgs, req.MaxOutputTokens
	r.Stream, r.StreamOptions.IncludeUsage = true, true
	r.Store = p.store
	chatParams(&r, req.Params)
	if len(tools) > 0 {
		r.Tools = tools
		r.ToolChoice = choice
		r.ParallelToolCalls = &req.ParallelToolCalls
	}
	return r, nil
}

// chatToolChoice is the tool_choice of a request for c
// (providers.ToolChoice): "auto", "none", "required", or
// {"type":"function","function":{"name":N}}; nil when none is sent.
func chatToolChoice(c messages.AssembledContext) (any, error) {
	tc, err := providers.ToolChoice(c)
	switch {
	case err != nil:
		return nil, fmt.Errorf("context: %w", err)
	case tc.Mode == "":
		return nil, nil
	case tc.Mode == messages.ToolChoiceTool:
		return chatNamedToolChoice{Type: "function", Function: chatToolName{Name: tc.Name}}, nil
	}
	return tc.Mode, nil
}

type chatNamedToolChoice struct {
	Type     string       `json:"type"` // "function"
	Function chatToolName `json:"function"`
}

type chatToolName struct {
	Name string `json:"name"`
}

// estimateChat counts with tc the tokens of the JSON of c's chat
// messages, tools and tool choice, images counting
// providers.ImageTokens rather than their data.
func estimateChat(c messages.AssembledContext, tc tokens.Counter) (int, error) {
	c, images := providers.WithoutImageData(c)
	msgs, err := chatMessages(c)
	if err != nil {
		return 0, err
	}
	tools, err := chatTools(c)
	if err != nil {
		return 0, err
	}
	choice, err := chatToolChoice(c)
	if err != nil {
		return 0, err
	}
	data, err := json.Marshal(struct {
		Messages   []chatMessage `json:"messages"`
		Tools      []chatTool    `json:"tools,omitempty"`
		ToolChoice any           `json:"tool_choice,omitempty"`
	}{msgs, tools, choice})
	if err != nil {
		return 0, fmt.Errorf("encode: %w", err)
	}
	return tc.Count(string(data)) + images, nil
}

// chatMessages lays c out as chat messages: the system message
// (providers.SystemText), then the conversation (providers.Conversation).
// A user segment is a user message (see chatUserContent); an assistant
// segment an assistant message with its text and its tool uses as
// tool_calls; a results segment one tool message per result, in order.
// What an assistant message has no place for here (reasoning, unknown
// blocks) is left out.
func chatMessages(c messages.AssembledContext) ([]chatMessage, error) {
	segs, err := conversation(c)
	if err != nil {
		return nil, err
	}
	msgs := make([]chatMessage, 0, len(segs)+1)
	text := func(role, s string) chatMessage { return chatMessage{Role: role, Content: s} }
	if sys := providers.SystemText(c); sys != "" {
		msgs = append(msgs, text("system", sys))
	}
	for _, s := range segs {
		switch s.Kind {
		case providers.SegmentUser:
			msgs = append(msgs, chatMessage{Role: "user", Content: chatUserContent(s.Blocks)})
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
		m.Content = text
	}
	for _, b := range bs {
		if u, ok := b.(messages.ToolUse); ok {
			m.ToolCalls = append(m.ToolCalls, chatToolCall{ID: u.ToolUseID, Type: "function",
				Function: chatFunctionCall{Name: u.Name, Arguments: providers.ArgumentsText(u.Input)}})
		}
	}
	return m
}

// chatUserProvider is the Provider of the unknown blocks that are Chat
// Completions content parts a client sent (the proxy's), sent back as
// they came.
const chatUserProvider = "openai.chat"

// chatUserContent is the content of a user message of blocks bs: its
// text as a string when it holds text only, as before; otherwise a list
// of content parts, in order: a text part per text block, an image_url
// part per image (providers.ImageURL: its URL, or a data URL), and
// unknown blocks from a Chat Completions client (Provider "openai.chat")
// as they came. A part this API cannot take (an image from a file, a
// part another API's client sent) becomes a text part saying so
// (providers.UnsupportedPart); when that leaves text parts only, they
// are sent as one string, a line apart (and a message of text and blocks
// this API has no place for at all, such as reasoning, as its text).
func chatUserContent(bs messages.Blocks) any {
	plain := true
	for _, b := range bs {
		if _, ok := b.(messages.Text); !ok {
			plain = false
			break
		}
	}
	if plain {
		return bs.RenderedText()
	}
	var parts []json.RawMessage
	var texts []string
	textOnly, notes := true, false
	addText := func(s string) {
		texts = append(texts, s)
		parts = append(parts, mustJSON(chatTextPart{Type: "text", Text: s}))
	}
	addNote := func(s string) {
		notes = true
		addText(s)
	}
	for _, b := range bs {
		switch b := b.(type) {
		case messages.Text:
			if b.Text != "" {
				addText(b.Text)
			}
		case messages.Image:
			u, ok := providers.ImageURL(b)
			if !ok {
				addNote(providers.UnsupportedImage(b))
				continue
			}
			textOnly = false
			parts = append(parts, mustJSON(chatImagePart{Type: "image_url", ImageURL: chatImageURL{URL: u}}))
		case messages.Unknown:
			if raw, ok := ownPart(b, chatUserProvider); ok {
				textOnly = false
				parts = append(parts, raw)
				continue
			}
			addNote(providers.UnsupportedPart(providers.UnknownType(b)))
		}
	}
	switch {
	case textOnly && !notes:
		return bs.RenderedText()
	case textOnly:
		return strings.Join(texts, "\n")
	}
	return parts
}

type chatTextPart struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type chatImagePart struct {
	Type     string       `json:"type"` // "image_url"
	ImageURL chatImageURL `json:"image_url"`
}

type chatImageURL struct {
	URL string `json:"url"`
}

// ownPart is an unknown block's raw JSON, compacted, when it came from a
// client of the API named provider and is a JSON object with a type.
func ownPart(b messages.Unknown, provider string) (json.RawMessage, bool) {
	if b.Provider != provider {
		return nil, false
	}
	if f, ok := fields(b.Raw); !ok || str(f, "type") == "" {
		return nil, false
	}
	return providers.CompactJSON(b.Raw), true
}

// mustJSON is v's JSON; v is one of this file's plain types, which
// always encode.
func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic("openai: encode " + fmt.Sprintf("%T", v) + ": " + err.Error())
	}
	return data
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
