package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// A proxied request of OpenAI's APIs, in the API-neutral form the proxy
// runs: the conversation's messages as the client holds them (each with
// the content blocks of a user message, or the output of a tool result),
// and what the client sends with its turn (system prompt, tools, tool
// choice). Each API's handler parses its request into one
// (parseChatRequest, parseResponsesRequest); proxyStart then finds the
// conversation and submits the request's new messages.

// proxyCall is a parsed proxied request.
type proxyCall struct {
	field    string // the request's field of messages: "messages" or "input", for errors
	model    string // as requested
	key      string // the conversation key the body names ("" if none)
	label    string // the end user the body names (user; "" if none): convQuery
	previous messages.TurnID
	msgs     []convMessage
	where    []string          // msgs[i]'s place in the request ("messages[3]"), for errors
	content  []messages.Blocks // msgs[i]'s blocks, for a user message that is more than one text
	system   string            // the system and developer messages' texts, in order
	tools    []messages.Tool
	choice   messages.ToolChoice
	params   messages.GenParams // the generation settings
	paramSrc paramSource        // the request's field each of params came from

	// previousStep is the step of the previous response (its turn is
	// previous), when the request names one.
	previousStep int
}

// add appends a message found at where.
func (pc *proxyCall) add(m convMessage, where string, content messages.Blocks) {
	pc.msgs = append(pc.msgs, m)
	pc.where = append(pc.where, where)
	pc.content = append(pc.content, content)
}

// addSystem appends a system (or developer) message's text.
func (pc *proxyCall) addSystem(text, where string) {
	if pc.system != "" && text != "" {
		pc.system += "\n\n"
	}
	pc.system += text
	pc.add(convMessage{Role: "system", Text: text}, where, nil)
}

// step is which step of its turn the answer to the request is
// (stepID): the number of assistant messages after the request's last
// user message (each round of tool results the client sends back after
// the answer that called the tools adds one); for a request that holds
// no user message and names a previous response, one more than that
// response's step plus those.
func (pc *proxyCall) step() int {
	n, user := convStep(pc.msgs)
	if !user && !pc.previous.IsZero() {
		n += pc.previousStep + 1
	}
	return n
}

// convStep is the number of assistant messages after the last user
// message of msgs, and whether there is one.
func convStep(msgs []convMessage) (int, bool) {
	n := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case "user":
			return n, true
		case "assistant":
			n++
		}
	}
	return n, false
}

// stepID is the id of the answer to step n of turn (the model's n-th
// answer in the turn, counting from 0: each round of the client's tool
// results makes another): prefix and the turn for its first step,
// "chatcmpl-<turn>", then "chatcmpl-<turn>_<n>". Each step of a client's
// tool loop gets an id of its own (frameworks that merge messages by id
// would otherwise replace the answer that called the tools by the next),
// and every id names the turn.
func stepID(prefix string, turn messages.TurnID, n int) string {
	if n == 0 {
		return prefix + turn.String()
	}
	return prefix + turn.String() + "_" + strconv.Itoa(n)
}

// parseStepID reads an id of stepID's made with prefix; ok is false for
// anything else.
func parseStepID(prefix, id string) (turn messages.TurnID, n int, ok bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return turn, 0, false
	}
	t, step, stepped := strings.Cut(rest, "_")
	turn, err := messages.ParseID[messages.TurnID](t)
	if err != nil || turn.IsZero() || turn.String() != t { // as stepID writes it
		return messages.TurnID{}, 0, false
	}
	if stepped {
		// Digits only, no sign nor leading zero: one id per step.
		n, err = strconv.Atoi(step)
		if err != nil || n < 1 || step[0] == '+' || step[0] == '0' {
			return messages.TurnID{}, 0, false
		}
	}
	return turn, n, true
}

// client is what the request sends with a new user turn: nil when it is
// nothing but the text (the cheapest turn).
func (pc *proxyCall) client(content messages.Blocks) *actors.ClientTurn {
	if pc.system == "" && len(pc.tools) == 0 && pc.choice == (messages.ToolChoice{}) && len(content) == 0 && pc.params.IsZero() {
		return nil
	}
	return &actors.ClientTurn{System: pc.system, Tools: pc.tools, ToolChoice: pc.choice, Content: content, Params: pc.params}
}

// contentParts is a message's content as sent: a string, null, or an
// array of parts. text is its text parts concatenated; other its other
// parts, as sent; blocks all its parts as content blocks (nil for a
// string). provider names the API for the parts kept as
// messages.Unknown.
type contentParts struct {
	text   string
	other  []json.RawMessage
	blocks messages.Blocks
}

// rich reports whether the content is more than one text: its blocks, not
// its text, are the message.
func (c contentParts) rich() bool {
	return len(c.other) > 0 || len(c.blocks) > 1
}

// contentPart is a content part of either API.
type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"` // chat: {"url", "detail"}; responses: the URL
	FileID   string          `json:"file_id"`
}

// parseContent reads the content raw of the message at where.
func parseContent(raw json.RawMessage, where, provider string) (contentParts, error) {
	var c contentParts
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &c.text); err != nil {
			return c, invalid("%s.content: %v", where, err)
		}
		return c, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return c, invalid("%s.content: want a string or an array of content parts", where)
	}
	var text strings.Builder
	for j, rp := range parts {
		var p contentPart
		if err := json.Unmarshal(rp, &p); err != nil {
			return c, invalid("%s.content[%d]: want a content part object", where, j)
		}
		switch p.Type {
		case "text", "input_text", "output_text":
			text.WriteString(p.Text)
			c.blocks = append(c.blocks, messages.Text{Text: p.Text})
		case "refusal":
			text.WriteString(p.Refusal)
			c.blocks = append(c.blocks, messages.Text{Text: p.Refusal})
		case "image_url", "input_image":
			url := ""
			var o struct {
				URL string `json:"url"`
			}
			switch {
			case len(p.ImageURL) > 0 && p.ImageURL[0] == '"':
				_ = json.Unmarshal(p.ImageURL, &url)
			case len(p.ImageURL) > 0 && p.ImageURL[0] == '{':
				_ = json.Unmarshal(p.ImageURL, &o)
				url = o.URL
			}
			img, err := imageBlock(url)
			switch {
			case url == "" && p.FileID != "": // a file of OpenAI's, which only OpenAI has
				c.blocks = append(c.blocks, messages.Unknown{Provider: provider, Raw: rp})
			case url == "":
				return c, invalid("%s.content[%d].image_url: want an image URL (https: or a data: URL)", where, j)
			case err != nil:
				return c, invalid("%s.content[%d].image_url: %v", where, j, err)
			default:
				c.blocks = append(c.blocks, img)
			}
			c.other = append(c.other, rp)
		case "":
			return c, invalid("%s.content[%d].type: required", where, j)
		default: // audio, files…: kept as sent
			c.blocks = append(c.blocks, messages.Unknown{Provider: provider, Raw: rp})
			c.other = append(c.other, rp)
		}
	}
	c.text = text.String()
	return c, nil
}

// imageExt is the media type of an image URL's file extension.
var imageExt = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif": "image/gif", ".webp": "image/webp"}

// imageBlock is the image at url: a base64 data URL's bytes with its
// media type, or a URL with the media type of its extension (image/*
// when it has none the proxy knows).
func imageBlock(url string) (messages.Image, error) {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mt, b64 := strings.CutSuffix(meta, ";base64")
		if !ok || !b64 || data == "" {
			return messages.Image{}, errors.New("want a base64 data URL (data:image/png;base64,…)")
		}
		if mt == "" {
			mt = "image/*"
		}
		src, _ := json.Marshal(map[string]string{"type": "base64", "data": data})
		return messages.Image{MediaType: mt, Source: src}, nil
	}
	mt := "image/*"
	p := url
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if t, ok := imageExt[strings.ToLower(path.Ext(p))]; ok {
		mt = t
	}
	src, _ := json.Marshal(map[string]string{"type": "url", "url": url})
	return messages.Image{MediaType: mt, Source: src}, nil
}

// toolOutput is the ToolOutput of the tool message m.
func toolOutput(m convMessage) messages.ToolOutput {
	out, _ := json.Marshal(m.Text)
	return messages.ToolOutput{CallID: m.CallID, Output: out}
}

// proxyStart runs pc: it finds the conversation, then submits the
// request's new messages, after the conversation's turns before it
// (proxyRun): the results of the tool calls its turn awaits (the same
// turn goes on), or a new user message (a new turn). It returns the
// turn's stream and the function to call once the request is done with
// it.
func (s *Server) proxyStart(r *http.Request, pc *proxyCall) (*actors.TurnStream, func(), conversation, error) {
	// Before the conversation is found (or made): a setting the
	// upstream cannot take, or messages that cannot run, refuse the
	// request, naming them.
	if err := s.checkParams(pc.model, pc.params, pc.paramSrc); err != nil {
		return nil, nil, conversation{}, err
	}
	if _, err := proxyMemoryTools(r); err != nil {
		return nil, nil, conversation{}, err
	}
	if err := s.checkProxyCall(pc); err != nil {
		return nil, nil, conversation{}, err
	}
	q := pc.query()
	for i := len(pc.msgs) - 1; i >= 0 && q.orphan == nil; i-- {
		if m := pc.msgs[i]; m.Role == "tool" {
			q.orphan = invalid("%s: the request ends with tool results (%s answers %q), but no tool call of this conversation awaits a result",
				pc.field, pc.where[i], m.CallID)
		}
	}
	return s.startProxyTurn(r, q, func(conv conversation) (*actors.TurnStream, func(), error) {
		return s.proxySubmitCall(r, pc, conv)
	})
}

// checkProxyCall refuses a request whose messages cannot run whatever
// conversation they continue: none but system messages, an assistant
// message last, a user message after tool results, an empty user
// message, or what the client sends with it (its tools, tool choice and
// content) refused by the runtime.
func (s *Server) checkProxyCall(pc *proxyCall) error {
	last := -1
	for i := len(pc.msgs) - 1; i >= 0; i-- {
		if pc.msgs[i].Role != "system" {
			last = i
			break
		}
	}
	if last < 0 {
		return invalid("%s: no new user message or tool result (only system messages)", pc.field)
	}
	switch m := pc.msgs[last]; m.Role {
	case "tool":
		return nil
	case "user":
		for i := last - 1; i >= 0 && pc.msgs[i].Role != "assistant"; i-- {
			if pc.msgs[i].Role == "tool" {
				return invalid("%s: a user message (%s) after tool results (%s): send the tool results first, then the user message",
					pc.field, pc.where[last], pc.where[i])
			}
		}
		if m.Text == "" && len(pc.content[last]) == 0 {
			return invalid("%s.content: empty", pc.where[last])
		}
		return s.rt.CheckClient(pc.client(pc.content[last]))
	default:
		return invalid("%s: ends with an %s message (%s); want a user message or tool results last",
			pc.field, m.Role, pc.where[last])
	}
}

// proxySubmitCall submits pc's new messages on conv (see proxyStart).
func (s *Server) proxySubmitCall(r *http.Request, pc *proxyCall, conv conversation) (*actors.TurnStream, func(), error) {
	from := min(max(conv.From, 0), len(pc.msgs))
	// The last message that is not a system one decides: tool results
	// (the tool messages before it, back to the assistant's) or a user
	// message.
	last := -1
	for i := len(pc.msgs) - 1; i >= from; i-- {
		if pc.msgs[i].Role != "system" {
			last = i
			break
		}
	}
	if last < 0 {
		return nil, nil, invalid("%s: no new user message or tool result (the conversation holds the request's %d messages already)",
			pc.field, from)
	}
	b := conv.Branch
	switch m := pc.msgs[last]; m.Role {
	case "tool":
		first := last
		for first > from && (pc.msgs[first-1].Role == "tool" || pc.msgs[first-1].Role == "system") {
			first--
		}
		var outs messages.Items
		for i := first; i <= last; i++ {
			if pc.msgs[i].Role == "tool" {
				outs = append(outs, toolOutput(pc.msgs[i]))
			}
		}
		st, leave, err := s.proxyRun(r, b, func(ctx context.Context) (*actors.TurnStream, error) {
			return s.rt.SubmitToolResults(ctx, b, outs, actors.SubmitOptions{Key: conv.Key})
		})
		if errors.Is(err, actors.ErrNoToolCallsOpen) {
			err = invalid("%s: the request ends with tool results (%s answers %q), but no tool call of this conversation awaits a result",
				pc.field, pc.where[last], m.CallID)
		}
		return st, leave, err
	default: // a user message (checkProxyCall)
		mt, err := proxyMemoryTools(r)
		if err != nil {
			return nil, nil, err
		}
		o := actors.SubmitOptions{Within: s.opts.ProxyCommitWithin, Model: s.proxyModel(pc.model), MemoryTools: mt, Key: conv.Key,
			Client: pc.client(pc.content[last])}
		st, leave, err := s.proxyRun(r, b, func(ctx context.Context) (*actors.TurnStream, error) {
			return s.rt.SubmitWith(ctx, b, m.Text, o)
		})
		if pe := (*providers.ParamsError)(nil); errors.As(err, &pe) {
			// The conversation runs on another model than the one
			// checked first.
			err = pc.paramSrc.paramsError(err)
		}
		return st, leave, err
	}
}

// proxyRemember records that the request's messages and the reply are
// the conversation's transcript up to the turn's reply (or its tool
// calls), before the answer ends: the client's next request, which may
// come at once, finds the conversation. A failure to record is logged:
// the turn is answered all the same, and the next request starts a new
// conversation unless it names this one.
func (s *Server) proxyRemember(r *http.Request, conv conversation, st *actors.TurnStream, pc *proxyCall, reply string, last actors.Update) {
	if !last.Done || last.Phase == messages.PhaseFailed || conv.Named {
		return
	}
	m := convMessage{Role: "assistant", Text: reply}
	for _, c := range last.Calls {
		m.Calls = append(m.Calls, c.CallID)
	}
	if err := s.rememberConversation(context.WithoutCancel(r.Context()), conv, st.Turn, pc.label, pc.msgs, m); err != nil {
		s.opts.Log.Warn().Err(err).Str("branch", conv.Branch.String()).Str("turn", st.Turn.String()).
			Msg("proxy: record the conversation")
	}
}

// parseToolChoice reads a tool_choice: "none", "auto" or "required", or
// the object naming a function: {"type":"function","name"} (responses)
// or {"type":"function","function":{"name"}} (chat).
func parseToolChoice(raw json.RawMessage, tools []messages.Tool) (messages.ToolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return messages.ToolChoice{}, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case messages.ToolChoiceAuto, messages.ToolChoiceNone, messages.ToolChoiceRequired:
			return messages.ToolChoice{Mode: mode}, nil
		}
		return messages.ToolChoice{}, invalid("tool_choice: %q, want none, auto, required or an object naming a function", mode)
	}
	var o struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return messages.ToolChoice{}, invalid("tool_choice: want a string or an object")
	}
	if o.Type != "function" {
		return messages.ToolChoice{}, invalid("tool_choice.type: %q is not supported, only function (the proxy passes function tools only)", o.Type)
	}
	name := o.Name
	if name == "" {
		name = o.Function.Name
	}
	if name == "" {
		return messages.ToolChoice{}, invalid("tool_choice: names no function")
	}
	for _, t := range tools {
		if t.Name == name {
			return messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: name}, nil
		}
	}
	return messages.ToolChoice{}, invalid("tool_choice: names function %q, which is not in tools", name)
}

// functionTool is the messages.Tool of a function tool at where.
func functionTool(where, name, description string, parameters json.RawMessage) (messages.Tool, error) {
	if name == "" {
		return messages.Tool{}, invalid("%s.name: required", where)
	}
	var schema []byte
	if len(parameters) > 0 && string(parameters) != "null" {
		if parameters[0] != '{' {
			return messages.Tool{}, invalid("%s.parameters: want a JSON schema object", where)
		}
		schema = []byte(parameters)
	}
	return messages.Tool{Name: name, Description: description, InputSchema: schema}, nil
}

// conversationKey is the first key of keys that is not empty.
func conversationKey(keys ...string) string {
	for _, k := range keys {
		if k != "" {
			return k
		}
	}
	return ""
}
