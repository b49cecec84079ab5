package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// OpenAI's Chat Completions (POST /v1/chat/completions) and Responses
// (POST /v1/responses) APIs, for agent frameworks: the request's system
// prompt, tools and tool choice go to the model with the turn, the
// model's calls of the client's tools come back unchanged, and the
// client's tool results continue the same turn. The generation settings
// (temperature, max_tokens, stop, response_format…) go to the upstream
// with the turn, or the request is refused naming those it cannot take;
// every other field is read, accepted or refused as proxy_fields.go's
// tables say.

// chatRequest is the part of a Chat Completions request the proxy reads.
type chatRequest struct {
	Model         string            `json:"model"`
	Messages      []chatMessage     `json:"messages"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage   `json:"tool_choice"`
	Stream        bool              `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User     string            `json:"user"`
	Metadata map[string]string `json:"metadata"`
	chatParamFields
}

// chatMessage is a message of a Chat Completions request.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// chatToolCall is a call of a function tool, in a request's assistant
// message or an answer's.
type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // the arguments' JSON, as a string
}

// parseChatRequest reads a Chat Completions request.
func parseChatRequest(req *chatRequest) (*proxyCall, error) {
	pc := &proxyCall{field: "messages", model: req.Model, key: req.Metadata["conversation"], label: req.User}
	if err := pc.query().check("user"); err != nil {
		return nil, err
	}
	for i, raw := range req.Tools {
		where := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, invalid("%s: want a tool object", where)
		}
		if t.Type != "function" {
			return nil, invalid("%s.type: %q is not supported, only function", where, t.Type)
		}
		tool, err := functionTool(where+".function", t.Function.Name, t.Function.Description, t.Function.Parameters)
		if err != nil {
			return nil, err
		}
		pc.tools = append(pc.tools, tool)
	}
	choice, err := parseToolChoice(req.ToolChoice, pc.tools)
	if err != nil {
		return nil, err
	}
	pc.choice = choice
	if pc.params, pc.paramSrc, err = req.params(); err != nil {
		return nil, err
	}
	for i, m := range req.Messages {
		where := fmt.Sprintf("messages[%d]", i)
		c, err := parseContent(m.Content, where, "openai.chat")
		if err != nil {
			return nil, err
		}
		switch m.Role {
		case "system", "developer":
			pc.addSystem(c.text, where)
		case "user":
			var blocks messages.Blocks
			if c.rich() {
				blocks = c.blocks
			}
			pc.add(convMessage{Role: "user", Text: c.text, Other: c.other}, where, blocks)
		case "assistant":
			cm := convMessage{Role: "assistant", Text: c.text, Other: c.other}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" {
					return nil, invalid("%s.tool_calls[%d].id: required", where, j)
				}
				cm.Calls = append(cm.Calls, tc.ID)
			}
			pc.add(cm, where, nil)
		case "tool":
			if m.ToolCallID == "" {
				return nil, invalid("%s.tool_call_id: required", where)
			}
			pc.add(convMessage{Role: "tool", Text: c.text, CallID: m.ToolCallID}, where, nil)
		case "":
			return nil, invalid("%s.role: required", where)
		default:
			return nil, invalid("%s.role: %q, want system, developer, user, assistant or tool", where, m.Role)
		}
	}
	if len(pc.msgs) == 0 {
		return nil, invalid("messages: empty, want at least a user message")
	}
	return pc, nil
}

// chatCompletion is a Chat Completions answer (not streamed).
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   chatUsage    `json:"usage"`
}

type chatChoice struct {
	Index        int       `json:"index"`
	Message      chatReply `json:"message"`
	FinishReason string    `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

// chatReply is an answer's message: its text (null when it has none but
// tool calls) and its tool calls.
type chatReply struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

// chatUsage is the tokens a Chat Completions answer used.
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func newChatUsage(u actors.Update) chatUsage {
	out := chatUsage{PromptTokens: u.Usage.InputTokens, CompletionTokens: u.Usage.OutputTokens,
		TotalTokens: u.Usage.InputTokens + u.Usage.OutputTokens}
	out.PromptTokensDetails.CachedTokens = u.Usage.CacheReadTokens
	return out
}

// chatToolCalls are the calls of last (Awaiting) as the API writes them.
func chatToolCalls(last actors.Update) []chatToolCall {
	var out []chatToolCall
	for _, c := range last.Calls {
		out = append(out, chatToolCall{ID: c.CallID, Type: "function", Function: chatFunction{Name: c.Name, Arguments: callArguments(c)}})
	}
	return out
}

// callArguments is a call's arguments as the model wrote them ({} when
// it wrote none): the adapters keep them as a JSON string holding that
// text, or as a JSON object.
func callArguments(c messages.ToolCall) string {
	return providers.ArgumentsText(c.Arguments)
}

// answerModel is the model an answer names: the one that answered, else
// the one requested.
func answerModel(u actors.Update, requested string) string {
	if u.Model != "" {
		return u.Model
	}
	return requested
}

// streamModel is the model a stream's chunks name before its end tells
// which answered: the model id of the configured model requested, else
// the name requested.
func (s *Server) streamModel(requested string) string {
	if _, id, ok := s.rt.ModelInfo(requested); ok && id != "" {
		return id
	}
	return requested
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	var req chatRequest
	if err := decodeProxyRequest(r, &req, "Chat Completions", chatFields); err != nil {
		return err
	}
	pc, err := parseChatRequest(&req)
	if err != nil {
		return err
	}
	st, leave, conv, err := s.proxyStart(r, pc)
	if err != nil {
		return err
	}
	defer leave()
	id := stepID("chatcmpl-", st.Turn, pc.step())
	created := time.Now().Unix()
	w.Header().Set(ProxyBranchHeader, conv.Branch.String())
	if !req.Stream {
		reply, last := st.Wait(r.Context().Done())
		if err := turnFailed(st.Turn, last); err != nil {
			return err
		}
		reply += stepLimitNote(last, reply != "")
		s.proxyRemember(r, conv, st, pc, reply, last)
		msg := chatReply{Role: "assistant", Content: &reply, ToolCalls: chatToolCalls(last)}
		if reply == "" && len(msg.ToolCalls) > 0 {
			msg.Content = nil
		}
		writeJSON(w, http.StatusOK, chatCompletion{ID: id, Object: "chat.completion", Created: created,
			Model: answerModel(last, req.Model), Usage: newChatUsage(last),
			Choices: []chatChoice{{Index: 0, FinishReason: finishReason(last), Message: msg}}})
		return nil
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	// Chunks are encoded by hand (one per token): everything but the
	// delta and the finish reason is the same in each. A chunk is
	// begun with its delta's opening (head, then open), the delta's
	// content appended to buf, and ended with its finish reason.
	chunkHead := func(model string) []byte {
		head := fmt.Appendf(nil, `{"id":%s,"object":"chat.completion.chunk","created":%d,"model":`,
			messages.AppendJSONString(nil, id), created)
		return messages.AppendJSONString(head, model)
	}
	head := append(chunkHead(s.streamModel(req.Model)), `,"choices":[{"index":0,"delta":`...)
	var buf, text []byte
	begin := func(open string) { buf = append(append(buf[:0], head...), open...) }
	end := func(send func(string, any), finish string) {
		buf = append(buf, `,"finish_reason":`...)
		if finish == "" {
			buf = append(buf, "null"...)
		} else {
			buf = messages.AppendJSONString(buf, finish)
		}
		send("", json.RawMessage(append(buf, "}]}"...)))
	}
	return proxyStream(w, r, st, func(send func(string, any), u actors.Update, first bool) {
		if first {
			if u.Model != "" { // the model the step runs on
				head = append(chunkHead(u.Model), `,"choices":[{"index":0,"delta":`...)
			}
			begin(`{"role":"assistant","content":""}`)
			end(send, "")
		}
		switch {
		case u.Done:
			if ae := turnFailed(st.Turn, u); ae != nil {
				// openai-go and the other SDKs end a stream with an
				// error at a chunk that holds one.
				send("", map[string]any{"error": map[string]any{"message": ae.Message, "type": openAIErrorType(ae.Status),
					"param": nil, "code": ae.Code}})
				return
			}
			s.proxyRemember(r, conv, st, pc, string(text), u)
			// The last chunks name the model that answered.
			model := answerModel(u, req.Model)
			head = append(chunkHead(model), `,"choices":[{"index":0,"delta":`...)
			for i, c := range chatToolCalls(u) {
				call, _ := json.Marshal(struct {
					Index int `json:"index"`
					chatToolCall
				}{i, c})
				begin(`{"tool_calls":[`)
				buf = append(append(buf, call...), "]}"...)
				end(send, "")
			}
			begin("{}")
			end(send, finishReason(u))
			if includeUsage {
				usage, _ := json.Marshal(newChatUsage(u))
				buf = append(append(chunkHead(model), `,"choices":[],"usage":`...), usage...)
				send("", json.RawMessage(append(buf, '}')))
			}
		case u.Delta != "":
			text = append(text, u.Delta...)
			begin(`{"content":`)
			buf = append(messages.AppendJSONString(buf, u.Delta), '}')
			end(send, "")
		}
	}, "[DONE]")
}

func finishReason(u actors.Update) string {
	switch {
	case u.Awaiting:
		return "tool_calls"
	case u.Outcome.Kind == messages.OutcomeIncomplete:
		return "length"
	}
	return "stop"
}

// responsesRequest is the part of a Responses request the proxy reads.
type responsesRequest struct {
	Model              string            `json:"model"`
	Instructions       json.RawMessage   `json:"instructions"`
	Input              json.RawMessage   `json:"input"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Stream             bool              `json:"stream"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Metadata           map[string]string `json:"metadata"`
	User               string            `json:"user"`
	Store              *bool             `json:"store"` // false: the response is not kept (proxy_responses.go)
	responsesParamFields
}

// responsesItem is an item of a Responses request's input.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
}

// parseResponsesRequest reads a Responses request.
func parseResponsesRequest(req *responsesRequest) (*proxyCall, error) {
	pc := &proxyCall{field: "input", model: req.Model}
	if len(req.Conversation) > 0 && string(req.Conversation) != "null" {
		var c string
		var co struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(req.Conversation, &c) == nil {
			pc.key = c
		} else if json.Unmarshal(req.Conversation, &co) == nil {
			pc.key = co.ID
		} else {
			return nil, invalid("conversation: want a string or an object with an id")
		}
	}
	pc.key, pc.label = conversationKey(pc.key, req.Metadata["conversation"]), req.User
	if err := pc.query().check("user"); err != nil {
		return nil, err
	}
	if req.PreviousResponseID != "" {
		t, n, ok := parseStepID("resp_", req.PreviousResponseID)
		if !ok {
			return nil, invalid("previous_response_id: %q is not a response of this proxy (resp_<turn id>, or resp_<turn id>_<step>)",
				req.PreviousResponseID)
		}
		pc.previous, pc.previousStep = t, n
	}
	for i, raw := range req.Tools {
		where := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, invalid("%s: want a tool object", where)
		}
		if t.Type != "function" {
			return nil, invalid("%s.type: %q is not supported, only function (OpenAI's hosted tools run at OpenAI only)", where, t.Type)
		}
		tool, err := functionTool(where, t.Name, t.Description, t.Parameters)
		if err != nil {
			return nil, err
		}
		pc.tools = append(pc.tools, tool)
	}
	choice, err := parseToolChoice(req.ToolChoice, pc.tools)
	if err != nil {
		return nil, err
	}
	pc.choice = choice
	if pc.params, pc.paramSrc, err = req.params(); err != nil {
		return nil, err
	}
	if len(req.Instructions) > 0 && string(req.Instructions) != "null" {
		var s string
		if err := json.Unmarshal(req.Instructions, &s); err != nil {
			return nil, invalid("instructions: want a string")
		}
		pc.addSystem(s, "instructions")
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		return nil, invalid("input: required")
	}
	if req.Input[0] == '"' {
		var s string
		if err := json.Unmarshal(req.Input, &s); err != nil {
			return nil, invalid("input: %v", err)
		}
		pc.add(convMessage{Role: "user", Text: s}, "input", nil)
		return pc, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil, invalid("input: want a string or an array of input items")
	}
	for i, raw := range items {
		where := fmt.Sprintf("input[%d]", i)
		var it responsesItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, invalid("%s: want an input item object", where)
		}
		switch it.Type {
		case "", "message":
			c, err := parseContent(it.Content, where, "openai")
			if err != nil {
				return nil, err
			}
			switch it.Role {
			case "system", "developer":
				pc.addSystem(c.text, where)
			case "user":
				var blocks messages.Blocks
				if c.rich() {
					blocks = c.blocks
				}
				pc.add(convMessage{Role: "user", Text: c.text, Other: c.other}, where, blocks)
			case "assistant":
				pc.add(convMessage{Role: "assistant", Text: c.text, Other: c.other}, where, nil)
			case "":
				return nil, invalid("%s.role: required", where)
			default:
				return nil, invalid("%s.role: %q, want user, system, developer or assistant", where, it.Role)
			}
		case "function_call":
			if it.CallID == "" {
				return nil, invalid("%s.call_id: required", where)
			}
			// The calls of one answer, and its text before them, are
			// one assistant message.
			if n := len(pc.msgs); n > 0 && pc.msgs[n-1].Role == "assistant" {
				pc.msgs[n-1].Calls = append(pc.msgs[n-1].Calls, it.CallID)
			} else {
				pc.add(convMessage{Role: "assistant", Calls: []string{it.CallID}}, where, nil)
			}
		case "function_call_output":
			if it.CallID == "" {
				return nil, invalid("%s.call_id: required", where)
			}
			c, err := parseContent(it.Output, where+".output", "openai")
			if err != nil {
				return nil, err
			}
			if len(c.other) > 0 {
				return nil, invalid("%s.output: only text parts are supported in a tool's output", where)
			}
			pc.add(convMessage{Role: "tool", Text: c.text, CallID: it.CallID}, where, nil)
		case "reasoning":
			// The proxy answers none; one from elsewhere is left out.
		default:
			return nil, invalid("%s.type: %q is not supported, want message, function_call or function_call_output", where, it.Type)
		}
	}
	if len(pc.msgs) == 0 {
		return nil, invalid("input: empty, want a user message or function_call_output items")
	}
	return pc, nil
}

// response is a Responses answer: the response object, as answered and
// as the stream's response.* events carry it.
type response struct {
	ID                 string              `json:"id"`
	Object             string              `json:"object"`
	CreatedAt          int64               `json:"created_at"`
	Model              string              `json:"model"`
	Status             string              `json:"status"`
	Output             []any               `json:"output"` // responseMessage and responseFunctionCall items
	Usage              *responseUsage      `json:"usage"`
	Error              *responseError      `json:"error"`
	IncompleteDetails  *responseIncomplete `json:"incomplete_details"`
	PreviousResponseID *string             `json:"previous_response_id"`
}

// responseMessage is an output message item.
type responseMessage struct {
	Type    string               `json:"type"` // "message"
	ID      string               `json:"id"`
	Role    string               `json:"role"`
	Status  string               `json:"status"`
	Content []responseOutputText `json:"content"`
}

type responseOutputText struct {
	Type        string `json:"type"` // "output_text"
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

// responseFunctionCall is an output function_call item: a call of one of
// the client's tools.
type responseFunctionCall struct {
	Type      string `json:"type"` // "function_call"
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// responseUsage is the tokens a response used.
type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type responseIncomplete struct {
	Reason string `json:"reason"`
}

func responseStatus(u actors.Update) string {
	if u.Outcome.Kind == messages.OutcomeIncomplete {
		return "incomplete"
	}
	return "completed"
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) error {
	var req responsesRequest
	if err := decodeProxyRequest(r, &req, "Responses", responsesFields); err != nil {
		return err
	}
	if err := s.resolveItemReferences(r.Context(), &req); err != nil {
		return err
	}
	pc, err := parseResponsesRequest(&req)
	if err != nil {
		return err
	}
	st, leave, conv, err := s.proxyStart(r, pc)
	if err != nil {
		return err
	}
	defer leave()
	w.Header().Set(ProxyBranchHeader, conv.Branch.String())
	step := pc.step()
	respID, msgID, fcID := stepID("resp_", st.Turn, step), stepID("msg_", st.Turn, step), stepID("fc_", st.Turn, step)
	var previous *string
	if req.PreviousResponseID != "" {
		previous = &req.PreviousResponseID
	}
	created := time.Now().Unix()
	message := func(text, status string) responseMessage {
		return responseMessage{Type: "message", ID: msgID, Role: "assistant", Status: status,
			Content: []responseOutputText{{Type: "output_text", Text: text, Annotations: []any{}}}}
	}
	calls := func(u actors.Update) []responseFunctionCall {
		var out []responseFunctionCall
		for i, c := range u.Calls {
			out = append(out, responseFunctionCall{Type: "function_call", ID: fcID + "_" + strconv.Itoa(i),
				CallID: c.CallID, Name: c.Name, Arguments: callArguments(c), Status: "completed"})
		}
		return out
	}
	// answer is the response in status; text is its message's (the
	// message is left out when it has no text and there are calls, or
	// in progress).
	answer := func(status, text string, u actors.Update) response {
		out := response{ID: respID, Object: "response", CreatedAt: created, Model: answerModel(u, req.Model), Status: status,
			Output: []any{}, PreviousResponseID: previous}
		if status == "in_progress" {
			out.Model = s.streamModel(req.Model)
			if u.Model != "" { // the model the step runs on
				out.Model = u.Model
			}
			return out
		}
		fcs := calls(u)
		if text != "" || len(fcs) == 0 {
			m := message(text, "completed")
			if status == "failed" {
				m.Status = "incomplete"
			}
			out.Output = append(out.Output, m)
		}
		for _, fc := range fcs {
			out.Output = append(out.Output, fc)
		}
		out.Usage = &responseUsage{InputTokens: u.Usage.InputTokens, OutputTokens: u.Usage.OutputTokens,
			TotalTokens: u.Usage.InputTokens + u.Usage.OutputTokens}
		out.Usage.InputTokensDetails.CachedTokens = u.Usage.CacheReadTokens
		switch status {
		case "incomplete":
			out.IncompleteDetails = &responseIncomplete{Reason: u.Outcome.Reason}
		case "failed":
			ae := turnFailed(st.Turn, u)
			out.Error = &responseError{Code: ae.Code, Message: ae.Message}
		}
		return out
	}
	// keep keeps the response, before it is answered: the client's next
	// request may name its items at once.
	keep := func(resp response) {
		if req.Store == nil || *req.Store {
			s.storeResponse(r.Context(), conv.Branch, st.Turn, step, resp)
		}
	}
	if !req.Stream {
		reply, last := st.Wait(r.Context().Done())
		if err := turnFailed(st.Turn, last); err != nil {
			return err
		}
		reply += stepLimitNote(last, reply != "")
		s.proxyRemember(r, conv, st, pc, reply, last)
		resp := answer(responseStatus(last), reply, last)
		keep(resp)
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	var text strings.Builder
	var buf []byte
	seq := 0
	opened := false // the message item was added
	return proxyStream(w, r, st, func(send func(string, any), u actors.Update, first bool) {
		ev := func(typ string, v map[string]any) {
			v["type"], v["sequence_number"] = typ, seq
			seq++
			send(typ, v)
		}
		open := func() {
			opened = true
			ev("response.output_item.added", map[string]any{"output_index": 0, "item": responseMessage{Type: "message", ID: msgID,
				Role: "assistant", Status: "in_progress", Content: []responseOutputText{}}})
			ev("response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
				"part": responseOutputText{Type: "output_text", Annotations: []any{}}})
		}
		if first {
			ev("response.created", map[string]any{"response": answer("in_progress", "", u)})
			ev("response.in_progress", map[string]any{"response": answer("in_progress", "", u)})
		}
		switch {
		case u.Done && u.Phase == messages.PhaseFailed:
			// As the Responses API ends a response that failed: an
			// error event, then response.failed saying why.
			ae := turnFailed(st.Turn, u)
			ev("error", map[string]any{"code": ae.Code, "message": ae.Message, "param": nil})
			ev("response.failed", map[string]any{"response": answer("failed", text.String(), u)})
		case u.Done:
			all := text.String()
			s.proxyRemember(r, conv, st, pc, all, u)
			status := responseStatus(u)
			final := answer(status, all, u)
			keep(final)
			fcs := calls(u)
			if !opened && len(fcs) == 0 {
				open()
			}
			index := 0
			if opened {
				ev("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "text": all})
				ev("response.content_part.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
					"part": responseOutputText{Type: "output_text", Text: all, Annotations: []any{}}})
				ev("response.output_item.done", map[string]any{"output_index": 0, "item": message(all, "completed")})
				index++
			}
			for _, fc := range fcs {
				added := fc
				added.Arguments, added.Status = "", "in_progress"
				ev("response.output_item.added", map[string]any{"output_index": index, "item": added})
				ev("response.function_call_arguments.delta", map[string]any{"item_id": fc.ID, "output_index": index, "delta": fc.Arguments})
				ev("response.function_call_arguments.done", map[string]any{"item_id": fc.ID, "output_index": index,
					"name": fc.Name, "arguments": fc.Arguments})
				ev("response.output_item.done", map[string]any{"output_index": index, "item": fc})
				index++
			}
			ev("response."+status, map[string]any{"response": final})
		case u.Delta != "":
			if !opened {
				open()
			}
			// By hand: one per token.
			text.WriteString(u.Delta)
			buf = append(buf[:0], `{"type":"response.output_text.delta","sequence_number":`...)
			buf = strconv.AppendInt(buf, int64(seq), 10)
			seq++
			buf = append(buf, `,"item_id":`...)
			buf = messages.AppendJSONString(buf, msgID)
			buf = append(buf, `,"output_index":0,"content_index":0,"delta":`...)
			buf = messages.AppendJSONString(buf, u.Delta)
			send("response.output_text.delta", json.RawMessage(append(buf, '}')))
		}
	}, "")
}
