package server

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// Anthropic's Messages API: POST /v1/messages takes a request as
// Anthropic's API does and answers in its format, streamed or not, so
// that the Anthropic SDKs work against the runtime by changing their base
// URL (to the server's root: the SDKs add /v1/messages). The request's
// messages are the conversation as the client holds it; the proxy finds
// the runtime's branch they continue (findConversation: the X-Ctx-Branch
// header, the X-Ctx-Conversation header or metadata.conversation, else
// the transcript they continue, for the end user metadata.user_id). Its new messages are either a user message,
// run as a new turn with the request's system prompt, tools and tool
// choice (actors.ClientTurn), or the results of the tool calls the turn
// in flight awaits, which go on with that turn
// (Runtime.SubmitToolResults). A reply that calls the client's tools ends
// with stop_reason tool_use and the calls as tool_use blocks.

// anthropicMessagesPath is the route of the Messages API; errors on it
// (and under it) are in Anthropic's shape.
const anthropicMessagesPath = "/v1/messages"

// The limits of a Messages request the proxy checks beside the body's
// size (server.max_body_bytes).
const (
	MaxAnthropicTools    = 512 // tools in one request
	MaxAnthropicToolName = 128 // bytes of a tool's name
)

// isAnthropicPath reports whether path is the Messages API's or under it
// (count_tokens; batches, which is not served), whose errors are in
// Anthropic's shape.
func isAnthropicPath(p string) bool {
	return p == anthropicMessagesPath || strings.HasPrefix(p, anthropicMessagesPath+"/")
}

// anthropicError is an error body in Anthropic's shape:
// {"type":"error","error":{"type","message"}}.
func anthropicError(status int, message string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]string{"type": anthropicErrorType(status), "message": message}}
}

// anthropicErrorType is Anthropic's error type for status.
func anthropicErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusServiceUnavailable || status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// anthropicRequest is the part of a Messages request the proxy reads:
// what it answers itself, and the generation settings it sends upstream
// (anthropicParamFields); proxy_fields.go's table says what it does with
// every other field.
type anthropicRequest struct {
	Model      string               `json:"model"`
	MaxTokens  *int64               `json:"max_tokens"`
	System     json.RawMessage      `json:"system"`
	Messages   []anthropicMessageIn `json:"messages"`
	Tools      []anthropicTool      `json:"tools"`
	ToolChoice *anthropicToolChoice `json:"tool_choice"`
	Stream     bool                 `json:"stream"`
	Metadata   struct {
		UserID       string `json:"user_id"`      // the end user (convQuery.label)
		Conversation string `json:"conversation"` // the conversation key
	} `json:"metadata"`
	anthropicParamFields
}

type anthropicMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control"` // see anthropicCacheControl
}

type anthropicToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
}

// anthropicBlock is the part of a content block the proxy reads; Raw is
// the block as sent.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    json.RawMessage `json:"source"`
	Raw       json.RawMessage `json:"-"`
}

// anthropicTurn is a Messages request mapped to what the runtime takes:
// its messages in the API-neutral form the conversation index compares,
// and for each the blocks of a user message or the output of a tool
// result; the client's system prompt, tools and tool choice.
type anthropicTurn struct {
	msgs    []convMessage
	content []messages.Blocks     // msgs[i]'s blocks, for a user message
	outputs []messages.ToolOutput // msgs[i]'s output, for a tool result
	client  actors.ClientTurn     // System, Tools, ToolChoice, Params (Content is the new message's)
	// paramSrc names the request's field each of client.Params came
	// from.
	paramSrc paramSource
}

var anthropicToolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// parseAnthropic checks req and maps it; every refusal names the field.
func parseAnthropic(req *anthropicRequest) (*anthropicTurn, error) {
	switch {
	case req.Model == "":
		return nil, invalid("model: required")
	case req.MaxTokens == nil:
		return nil, invalid("max_tokens: required: an integer of at least 1")
	case *req.MaxTokens < 1:
		return nil, invalid("max_tokens: %d, want at least 1", *req.MaxTokens)
	case len(req.Messages) == 0:
		return nil, invalid("messages: required: at least one message")
	case len(req.Metadata.UserID) > MaxEndUser:
		return nil, invalid("metadata.user_id: %d bytes, limit %d", len(req.Metadata.UserID), MaxEndUser)
	case len(req.Metadata.Conversation) > MaxConversationKey:
		return nil, invalid("metadata.conversation: %d bytes, limit %d", len(req.Metadata.Conversation), MaxConversationKey)
	case len(req.Tools) > MaxAnthropicTools:
		return nil, invalid("tools: %d tools, limit %d", len(req.Tools), MaxAnthropicTools)
	}
	t := &anthropicTurn{}
	system, err := anthropicSystem(req.System)
	if err != nil {
		return nil, err
	}
	t.client.System = system
	for i, tool := range req.Tools {
		switch {
		case tool.Type != "" && tool.Type != "custom":
			return nil, invalid("tools[%d].type: %q: only client tools (name, description, input_schema) are supported, not Anthropic's server or versioned tools", i, tool.Type)
		case tool.Name == "":
			return nil, invalid("tools[%d].name: required", i)
		case len(tool.Name) > MaxAnthropicToolName || !anthropicToolNameRE.MatchString(tool.Name):
			return nil, invalid("tools[%d].name: %q, want 1 to %d letters, digits, _ or -", i, tool.Name, MaxAnthropicToolName)
		case !isJSONObject(tool.InputSchema):
			return nil, invalid("tools[%d].input_schema: required: a JSON Schema object", i)
		}
		t.client.Tools = append(t.client.Tools, messages.Tool{Name: tool.Name, Description: tool.Description, InputSchema: tool.InputSchema})
	}
	if tc := req.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			t.client.ToolChoice = messages.ToolChoice{Mode: messages.ToolChoiceAuto}
		case "any":
			t.client.ToolChoice = messages.ToolChoice{Mode: messages.ToolChoiceRequired}
		case "none":
			t.client.ToolChoice = messages.ToolChoice{Mode: messages.ToolChoiceNone}
		case "tool":
			if tc.Name == "" {
				return nil, invalid("tool_choice.name: required with type \"tool\"")
			}
			t.client.ToolChoice = messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: tc.Name}
		default:
			return nil, invalid("tool_choice.type: %q, want auto, any, tool or none", tc.Type)
		}
	}
	if t.client.Params, t.paramSrc, err = req.params(req.MaxTokens); err != nil {
		return nil, err
	}
	cc, where, err := anthropicCacheControl(req)
	if err != nil {
		return nil, err
	}
	if cc != nil {
		t.client.Params.CacheControl, t.paramSrc["cache_control"] = cc, where
	}
	if tc := req.ToolChoice; tc != nil && tc.DisableParallelToolUse != nil {
		t.client.Params.ParallelToolCalls = new(!*tc.DisableParallelToolUse)
		t.paramSrc["parallel_tool_calls"] = "tool_choice.disable_parallel_tool_use"
	}
	if system != "" {
		t.add(convMessage{Role: "system", Text: system}, nil, messages.ToolOutput{})
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, invalid("messages[%d].role: %q, want user or assistant (the system prompt is the request's system)", i, m.Role)
		}
		if err := t.addMessage(i, m); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *anthropicTurn) add(m convMessage, content messages.Blocks, out messages.ToolOutput) {
	t.msgs = append(t.msgs, m)
	t.content = append(t.content, content)
	t.outputs = append(t.outputs, out)
}

// addMessage maps request message i: an assistant message to one
// convMessage (its text, other blocks, and the ids of its tool calls); a
// user message to one tool message per tool_result block, then one user
// message of its other blocks, if any.
func (t *anthropicTurn) addMessage(i int, m anthropicMessageIn) error {
	blocks, err := anthropicBlocks(m.Content, "messages["+strconv.Itoa(i)+"].content")
	if err != nil {
		return err
	}
	out := convMessage{Role: m.Role}
	var text strings.Builder
	var content messages.Blocks
	for j, b := range blocks {
		where := "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
		switch {
		case b.Type == "text":
			text.WriteString(b.Text)
			content = append(content, messages.Text{Text: b.Text})
		case b.Type == "tool_use" && m.Role == "assistant":
			if b.ID == "" {
				return invalid("%s.id: required", where)
			}
			out.Calls = append(out.Calls, b.ID)
		case b.Type == "tool_result" && m.Role == "user":
			tm, output, err := anthropicToolResult(b, where)
			if err != nil {
				return err
			}
			t.add(tm, nil, output)
		case b.Type == "image" && m.Role == "user":
			img, ok, err := anthropicImage(b, where)
			if err != nil {
				return err
			}
			if ok {
				content = append(content, img)
			} else {
				content = append(content, messages.Unknown{Provider: "anthropic", Raw: b.Raw})
			}
			out.Other = append(out.Other, b.Raw)
		case b.Type == "tool_use" || b.Type == "tool_result":
			return invalid("%s: a %s block in a %s message", where, b.Type, m.Role)
		default:
			content = append(content, messages.Unknown{Provider: "anthropic", Raw: b.Raw})
			out.Other = append(out.Other, b.Raw)
		}
	}
	out.Text = text.String()
	if m.Role == "user" && len(content) == 0 && len(blocks) > 0 {
		return nil // tool results only
	}
	if m.Role == "assistant" {
		content = nil // the runtime holds its own replies
	}
	t.add(out, content, messages.ToolOutput{})
	return nil
}

// anthropicBlocks reads a message's content: a string (one text block)
// or an array of blocks, each with its type.
func anthropicBlocks(raw json.RawMessage, where string) ([]anthropicBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("%s: required: a string or an array of content blocks", where)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, invalid("%s: want a string or an array of content blocks", where)
	}
	out := make([]anthropicBlock, len(raws))
	for j, r := range raws {
		if err := json.Unmarshal(r, &out[j]); err != nil || !isJSONObject(r) {
			return nil, invalid("%s[%d]: want a content block (an object with its type)", where, j)
		}
		if out[j].Type == "" {
			return nil, invalid("%s[%d].type: required", where, j)
		}
		out[j].Raw = r
	}
	return out, nil
}

// anthropicToolResult maps a tool_result block to a tool message and the
// runtime's output: its content's text blocks joined, as a JSON string.
func anthropicToolResult(b anthropicBlock, where string) (convMessage, messages.ToolOutput, error) {
	if b.ToolUseID == "" {
		return convMessage{}, messages.ToolOutput{}, invalid("%s.tool_use_id: required", where)
	}
	m := convMessage{Role: "tool", CallID: b.ToolUseID}
	if len(b.Content) > 0 && string(b.Content) != "null" {
		parts, err := anthropicBlocks(b.Content, where+".content")
		if err != nil {
			return convMessage{}, messages.ToolOutput{}, err
		}
		var text strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				text.WriteString(p.Text)
			} else {
				m.Other = append(m.Other, p.Raw)
			}
		}
		m.Text = text.String()
	}
	output, _ := json.Marshal(m.Text) // a string always encodes
	return m, messages.ToolOutput{CallID: b.ToolUseID, Output: output, IsError: b.IsError}, nil
}

// anthropicImage maps an image block with a base64 or URL source to an
// image block; ok is false for another source (a file id), which is kept
// as an unknown block.
func anthropicImage(b anthropicBlock, where string) (img messages.Image, ok bool, err error) {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if !isJSONObject(b.Source) || json.Unmarshal(b.Source, &src) != nil {
		return img, false, invalid("%s.source: required: an object with its type (base64 or url)", where)
	}
	switch src.Type {
	case "base64":
		switch {
		case src.MediaType == "":
			return img, false, invalid("%s.source.media_type: required with a base64 source", where)
		case src.Data == "":
			return img, false, invalid("%s.source.data: required with a base64 source", where)
		}
		source, _ := json.Marshal(map[string]string{"type": "base64", "data": src.Data})
		return messages.Image{MediaType: src.MediaType, Source: source}, true, nil
	case "url":
		if src.URL == "" {
			return img, false, invalid("%s.source.url: required with a url source", where)
		}
		source, _ := json.Marshal(map[string]string{"type": "url", "url": src.URL})
		return messages.Image{MediaType: imageMediaType(src.URL), Source: source}, true, nil
	}
	return img, false, nil
}

// imageMediaType is an image URL's media type: a data URL's, else its
// file extension's, else "image/*".
func imageMediaType(u string) string {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if mt, _, _ := strings.Cut(rest, ";"); strings.HasPrefix(mt, "image/") {
			return mt
		}
		return "image/*"
	}
	p, _, _ := strings.Cut(u, "?")
	if mt := mime.TypeByExtension(strings.ToLower(path.Ext(p))); strings.HasPrefix(mt, "image/") {
		mt, _, _ = strings.Cut(mt, ";")
		return mt
	}
	return "image/*"
}

// anthropicSystem is a request's system prompt: a string, or text
// blocks joined by new lines.
func anthropicSystem(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return "", invalid("system: want a string or an array of text blocks")
	}
	parts := make([]string, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", invalid("system[%d].type: %q, want text", i, b.Type)
		}
		parts[i] = b.Text
	}
	return strings.Join(parts, "\n"), nil
}

func isJSONObject(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// anthropicResponse is a Messages API response: the assistant's message.
type anthropicResponse struct {
	ID           string             `json:"id"`
	Type         string             `json:"type"` // "message"
	Role         string             `json:"role"` // "assistant"
	Model        string             `json:"model"`
	Content      []anthropicContent `json:"content"`
	StopReason   *string            `json:"stop_reason"`   // null in message_start
	StopSequence *string            `json:"stop_sequence"` // always null
	Usage        anthropicUsage     `json:"usage"`
}

// anthropicContent is a block of a response: text, or a tool_use.
type anthropicContent struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// anthropicUsage is the tokens an answer used, as the Messages API
// counts them: input_tokens leaves out the prompt tokens read from the
// prompt cache and written to it, which it counts apart.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// newAnthropicUsage is the usage u reports (providers.Usage counts the
// cached tokens within its input tokens).
func newAnthropicUsage(u providers.Usage) anthropicUsage {
	return anthropicUsage{InputTokens: max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0),
		CacheCreationInputTokens: u.CacheWriteTokens, CacheReadInputTokens: u.CacheReadTokens, OutputTokens: u.OutputTokens}
}

// anthropicStopReason is the stop_reason of a turn's (or step's) end.
func anthropicStopReason(u actors.Update) string {
	if u.Awaiting {
		return "tool_use"
	}
	if u.Outcome.Kind == messages.OutcomeIncomplete || u.Outcome.Kind == messages.OutcomePaused {
		switch u.Outcome.Reason {
		case "max_output_tokens":
			return "max_tokens"
		case "refusal", "content_filter":
			return "refusal"
		case "context_window":
			return "model_context_window_exceeded"
		case "pause_turn":
			return "pause_turn"
		}
	}
	return "end_turn"
}

// anthropicCallBlock is the tool_use block of call.
func anthropicCallBlock(c messages.ToolCall) anthropicContent {
	return anthropicContent{Type: "tool_use", ID: c.CallID, Name: c.Name, Input: providers.ArgumentsObject(c.Arguments)}
}

// newMessages returns the request's messages the conversation does not
// hold yet (from), leaving out the system prompt.
func (t *anthropicTurn) newMessages(from int) []int {
	var idx []int
	for i := from; i < len(t.msgs); i++ {
		if t.msgs[i].Role != "system" {
			idx = append(idx, i)
		}
	}
	return idx
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) error {
	var req anthropicRequest
	if err := decodeProxyRequest(r, &req, "Messages", anthropicFields); err != nil {
		return err
	}
	t, err := parseAnthropic(&req)
	if err != nil {
		return err
	}
	// Before the conversation is found (or made): a setting the
	// upstream cannot take, or messages that cannot run, refuse the
	// request, naming them.
	if err := s.checkParams(req.Model, t.client.Params, t.paramSrc); err != nil {
		return err
	}
	if _, err := proxyMemoryTools(r); err != nil {
		return err
	}
	if err := s.checkAnthropicTurn(t, len(req.Messages)); err != nil {
		return err
	}
	q := convQuery{key: req.Metadata.Conversation, label: req.Metadata.UserID, msgs: t.msgs,
		orphan: invalid("messages: tool results, but no conversation of this proxy holds the tool_use blocks they answer: " +
			"name the conversation (metadata.conversation or the X-Ctx-Conversation header), or resend the history as the proxy answered it")}
	st, leave, conv, err := s.startProxyTurn(r, q, func(conv conversation) (*actors.TurnStream, func(), error) {
		return s.anthropicSubmit(r, &req, t, conv)
	})
	if err != nil {
		return err
	}
	defer leave()
	w.Header().Set(ProxyBranchHeader, conv.Branch.String())
	// Which of its turn's steps the reply is: 0 for the one that
	// answers a user message, n for the one after the n-th round of
	// tool results.
	step, _ := convStep(t.msgs)
	id := stepID("msg_", st.Turn, step)
	remember := func(reply string, end actors.Update) {
		if conv.Named {
			return // found by its name again
		}
		rm := convMessage{Role: "assistant", Text: reply}
		for _, c := range end.Calls {
			rm.Calls = append(rm.Calls, c.CallID)
		}
		if err := s.rememberConversation(context.WithoutCancel(r.Context()), conv, st.Turn, q.label, t.msgs, rm); err != nil {
			// The answer stands; the client's next request may start
			// a new conversation.
			s.opts.Log.Error().Err(err).Str("branch", conv.Branch.String()).Msg("server: remember a proxied conversation")
		}
	}
	if !req.Stream {
		reply, end := st.Wait(r.Context().Done())
		if err := turnFailed(st.Turn, end); err != nil {
			return err
		}
		reply += stepLimitNote(end, reply != "")
		remember(reply, end)
		writeJSON(w, http.StatusOK, anthropicMessage(id, req.Model, reply, end))
		return nil
	}
	as := &anthropicStream{id: id, model: req.Model, turn: st.Turn, ended: remember}
	return proxyStream(w, r, st, as.update, "")
}

// anthropicMessage is the answer to a request whose turn (or step) ended
// as end, having written reply; requested is the model the request
// named, the answer's model when end names none.
func anthropicMessage(id, requested, reply string, end actors.Update) anthropicResponse {
	out := anthropicResponse{ID: id, Type: "message", Role: "assistant", Model: end.Model, Content: []anthropicContent{},
		StopReason: new(anthropicStopReason(end)), Usage: newAnthropicUsage(end.Usage)}
	if out.Model == "" {
		out.Model = requested
	}
	if reply != "" {
		out.Content = append(out.Content, anthropicContent{Type: "text", Text: &reply})
	}
	for _, c := range end.Calls {
		out.Content = append(out.Content, anthropicCallBlock(c))
	}
	return out
}

// anthropicStream writes a turn's updates as the Messages API's stream:
// message_start; the text as one text block (content_block_start, a
// content_block_delta per update, content_block_stop); each tool call as
// a tool_use block whose input comes in one input_json_delta;
// message_delta with the stop reason and usage; message_stop. A turn
// that fails after message_start ends with an error event.
type anthropicStream struct {
	id, model string // model: the requested one, named when the first update names no model
	// ended, if not nil, is called with the reply and the Done update
	// of a turn that did not fail, before the stream's last events.
	ended    func(reply string, end actors.Update)
	turn     messages.TurnID
	reply    strings.Builder
	end      actors.Update // the Done update, if the turn did not fail
	textOpen bool
	buf      []byte
}

func (as *anthropicStream) update(send func(string, any), u actors.Update, first bool) {
	if first {
		model := as.model
		if u.Model != "" { // the model the step runs on
			model = u.Model
		}
		send("message_start", map[string]any{"type": "message_start", "message": anthropicResponse{ID: as.id, Type: "message",
			Role: "assistant", Model: model, Content: []anthropicContent{}}})
	}
	switch {
	case u.Done:
		if ae := turnFailed(as.turn, u); ae != nil {
			// As the API reports a failure after its response has
			// begun; the SDKs raise it as the stream's error.
			send("error", anthropicError(ae.Status, ae.Message))
			return
		}
		as.end = u
		if as.ended != nil {
			// Before the last events: a client may send its next
			// request as soon as it reads message_stop.
			as.ended(as.reply.String(), u)
		}
		idx := 0
		if as.textOpen {
			send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			idx = 1
		}
		for _, c := range u.Calls {
			block := anthropicCallBlock(c)
			input := block.Input
			block.Input = json.RawMessage(`{}`)
			send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": block})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
			send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
			idx++
		}
		send("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": anthropicStopReason(u), "stop_sequence": nil},
			"usage": newAnthropicUsage(u.Usage)})
		send("message_stop", map[string]string{"type": "message_stop"})
	case u.Delta != "":
		if !as.textOpen {
			as.textOpen = true
			send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]string{"type": "text", "text": ""}})
		}
		as.reply.WriteString(u.Delta)
		// By hand: one per token.
		as.buf = append(as.buf[:0], `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
		as.buf = messages.AppendJSONString(as.buf, u.Delta)
		send("content_block_delta", json.RawMessage(append(as.buf, "}}"...)))
	}
}

// anthropicPlaceholder is the text of a user message that has none: the
// kinds of its blocks, "[image]" say.
func anthropicPlaceholder(content messages.Blocks) string {
	kinds := make([]string, 0, len(content))
	for _, b := range content {
		switch b := b.(type) {
		case messages.Image:
			kinds = append(kinds, "image")
		case messages.Unknown:
			var head struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(b.Raw, &head)
			kinds = append(kinds, head.Type)
		}
	}
	return "[" + strings.Join(kinds, ", ") + "]"
}

// checkAnthropicTurn refuses a request whose messages cannot run
// whatever conversation they continue (n is the request's number of
// messages): tool results with a new user message, an assistant message
// last, a user message with no content, or what the client sends with
// it refused by the runtime.
func (s *Server) checkAnthropicTurn(t *anthropicTurn, n int) error {
	last := -1
	for i := len(t.msgs) - 1; i >= 0; i-- {
		if t.msgs[i].Role != "system" {
			last = i
			break
		}
	}
	if last < 0 {
		return invalid("messages: nothing new for the conversation: the last message must be a user message or the results of the tool calls of the reply before it")
	}
	tools := false
	for i := last; i >= 0 && t.msgs[i].Role != "assistant"; i-- {
		tools = tools || t.msgs[i].Role == "tool"
	}
	switch t.msgs[last].Role {
	case "tool":
		return nil
	case "user":
		if tools {
			return invalid("messages: tool results and a new user message together: send the tool_result blocks alone, then the user's text once the reply to them has come")
		}
		client := anthropicClientTurn(t, last)
		if strings.TrimSpace(t.msgs[last].Text) == "" && client.Content == nil {
			return invalid("messages[%d].content: no text", n-1)
		}
		return s.rt.CheckClient(&client)
	default:
		return invalid("messages[%d]: the last message must be a user message (an assistant prefill is not supported)", n-1)
	}
}

// anthropicClientTurn is what the request t sends with its user message
// at last: its system prompt, tools and tool choice, and the message's
// blocks when it holds more than text.
func anthropicClientTurn(t *anthropicTurn, last int) actors.ClientTurn {
	client := t.client
	for _, b := range t.content[last] {
		if _, ok := b.(messages.Text); !ok {
			client.Content = t.content[last]
			break
		}
	}
	return client
}

// anthropicSubmit submits the new messages of the request t (req) on
// conv: the results of the tool calls the conversation's turn awaits, or
// a user message as a new turn (checkAnthropicTurn checked the rest).
func (s *Server) anthropicSubmit(r *http.Request, req *anthropicRequest, t *anthropicTurn, conv conversation) (*actors.TurnStream, func(), error) {
	fresh := t.newMessages(conv.From)
	tools := 0
	for _, i := range fresh {
		if t.msgs[i].Role == "tool" {
			tools++
		}
	}
	last := -1
	if len(fresh) > 0 {
		last = fresh[len(fresh)-1]
	}
	var submit func(ctx context.Context) (*actors.TurnStream, error)
	switch {
	case last < 0:
		return nil, nil, invalid("messages: nothing new for the conversation: the last message must be a user message or the results of the tool calls of the reply before it")
	case tools == len(fresh):
		outputs := make(messages.Items, 0, tools)
		for _, i := range fresh {
			outputs = append(outputs, t.outputs[i])
		}
		submit = func(ctx context.Context) (*actors.TurnStream, error) {
			return s.rt.SubmitToolResults(ctx, conv.Branch, outputs, actors.SubmitOptions{Key: conv.Key})
		}
	case t.msgs[last].Role == "tool":
		// The conversation found holds no reply with these calls.
		return nil, nil, invalid("messages: tool results, but no conversation of this proxy holds the tool_use blocks they answer: " +
			"name the conversation (metadata.conversation or the X-Ctx-Conversation header), or resend the history as the proxy answered it")
	case tools > 0:
		return nil, nil, invalid("messages: tool results and a new user message together: send the tool_result blocks alone, then the user's text once the reply to them has come")
	default: // a user message (checkAnthropicTurn)
		text := t.msgs[last].Text
		client := anthropicClientTurn(t, last)
		if strings.TrimSpace(text) == "" {
			text = anthropicPlaceholder(client.Content)
		}
		mt, err := proxyMemoryTools(r)
		if err != nil {
			return nil, nil, err
		}
		o := actors.SubmitOptions{Within: s.opts.ProxyCommitWithin, Model: s.proxyModel(req.Model), MemoryTools: mt, Key: conv.Key, Client: &client}
		submit = func(ctx context.Context) (*actors.TurnStream, error) {
			return s.rt.SubmitWith(ctx, conv.Branch, text, o)
		}
	}
	st, leave, err := s.proxyRun(r, conv.Branch, submit)
	if errors.Is(err, actors.ErrNoToolCallsOpen) {
		return nil, nil, invalid("messages: tool results, but no reply of this conversation awaits them (its turn ended, or the tool_use blocks are not the proxy's)")
	}
	if pe := (*providers.ParamsError)(nil); errors.As(err, &pe) {
		return nil, nil, t.paramSrc.paramsError(err) // the conversation runs on another model than the one checked first
	}
	return st, leave, err
}
