package fakeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The OpenAI streams here follow OpenAI's API reference: Chat Completions
// streams are data-only chat.completion.chunk events ending in
// "data: [DONE]"; Responses streams are named events (response.created,
// response.output_item.added, response.output_text.delta…) whose data
// repeats the name as "type" and carries a sequence_number, ending in
// response.completed, response.incomplete or response.failed.

// Defaults of the scripted OpenAI streams.
const (
	OpenAIModel       = "gpt-fake"
	OpenAIChatID      = "chatcmpl-fake"
	OpenAIResponseID  = "resp_fake"
	OpenAIInputTokens = 12 // the input tokens usage reports
	openAICreated     = 1741290958
	openAIFingerprint = "fp_fake"
)

// OpenAIToolCall is a function call a scripted model makes: its call id,
// its name, and its arguments text in the pieces it is streamed in.
type OpenAIToolCall struct {
	ID   string
	Name string
	Args []string
}

// args is the whole arguments text.
func (c OpenAIToolCall) args() string { return strings.Join(c.Args, "") }

// OpenAIError is an OpenAI error reply: status, and the error body
// {"error":{"message","type","param","code"}}; code "" is sent as null.
func OpenAIError(status int, typ, code, message string) Reply {
	var c any
	if code != "" {
		c = code
	}
	body := oaiObject("error", oaiObject("message", message, "type", typ, "param", nil, "code", c))
	h := http.Header{}
	h.Set("X-Request-Id", "req_fake")
	return Reply{Status: status, Header: h, Body: string(body)}
}

// OpenAIRateLimited is a 429 reply with a Retry-After header (in
// seconds, or an HTTP date) and the rate_limit_exceeded error body.
func OpenAIRateLimited(retryAfter string) Reply {
	r := OpenAIError(http.StatusTooManyRequests, "requests", "rate_limit_exceeded",
		"Rate limit reached for gpt-fake in organization org-fake on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.")
	if retryAfter != "" {
		r.Header.Set("Retry-After", retryAfter)
	}
	return r
}

// OpenAIServerError is a 500 reply with a server_error body.
func OpenAIServerError() Reply {
	return OpenAIError(http.StatusInternalServerError, "server_error", "",
		"The server had an error while processing your request. Sorry about that!")
}

// OpenAIContextTooLarge is the 400 reply to a request over the model's
// context window (code context_length_exceeded).
func OpenAIContextTooLarge() Reply {
	return OpenAIError(http.StatusBadRequest, "invalid_request_error", "context_length_exceeded",
		"Your input exceeds the context window of this model. Please adjust your input and try again.")
}

// ChatStream builds a Chat Completions stream: chunks on choice 0, the
// first one giving the assistant role. Its methods append and return the
// builder; Finish, Cut and Reply end it.
type ChatStream struct {
	events []Event
	calls  int     // tool calls so far, the index of the next
	deltas int     // content deltas, the completion tokens reported
	usage  *[2]int // set by Usage
	cached int     // set by CachedTokens
}

// NewChatStream starts a stream with the role chunk.
func NewChatStream() *ChatStream {
	c := &ChatStream{}
	return c.Delta(`{"role":"assistant","content":"","refusal":null}`)
}

// ChatChunk is the JSON of a chat.completion.chunk of choice 0 with
// delta (a JSON object) and finish reason finish ("" for null).
func ChatChunk(delta, finish string) string {
	var fr any
	if finish != "" {
		fr = finish
	}
	choice := oaiObject("index", 0, "delta", json.RawMessage(delta), "logprobs", nil, "finish_reason", fr)
	return string(oaiObject("id", OpenAIChatID, "object", "chat.completion.chunk", "created", openAICreated,
		"model", OpenAIModel, "service_tier", "default", "system_fingerprint", openAIFingerprint,
		"choices", []json.RawMessage{choice}, "usage", nil))
}

// ChatUsageChunk is the JSON of the last chunk when usage is asked for:
// no choices, and the usage.
func ChatUsageChunk(prompt, completion int) string {
	return chatUsageChunk(prompt, completion, 0)
}

// chatUsageChunk is ChatUsageChunk with cached of the prompt tokens
// served by the prompt cache.
func chatUsageChunk(prompt, completion, cached int) string {
	usage := oaiObject("prompt_tokens", prompt, "completion_tokens", completion, "total_tokens", prompt+completion,
		"prompt_tokens_details", oaiObject("cached_tokens", cached, "audio_tokens", 0),
		"completion_tokens_details", oaiObject("reasoning_tokens", 0, "audio_tokens", 0,
			"accepted_prediction_tokens", 0, "rejected_prediction_tokens", 0))
	return string(oaiObject("id", OpenAIChatID, "object", "chat.completion.chunk", "created", openAICreated,
		"model", OpenAIModel, "service_tier", "default", "system_fingerprint", openAIFingerprint,
		"choices", []any{}, "usage", usage))
}

// Delta appends a chunk whose delta is the JSON object delta.
func (c *ChatStream) Delta(delta string) *ChatStream {
	return c.Data(ChatChunk(delta, ""))
}

// Data appends a data-only event holding data as it is.
func (c *ChatStream) Data(data string) *ChatStream {
	c.events = append(c.events, Event{Data: data})
	return c
}

// Text appends one content chunk per delta.
func (c *ChatStream) Text(deltas ...string) *ChatStream {
	for _, d := range deltas {
		c.Delta(string(oaiObject("content", d)))
		c.deltas++
	}
	return c
}

// Refusal appends one refusal chunk per delta.
func (c *ChatStream) Refusal(deltas ...string) *ChatStream {
	for _, d := range deltas {
		c.Delta(string(oaiObject("refusal", d)))
		c.deltas++
	}
	return c
}

// ToolCalls appends each call, one after the other (several calls in one
// step are parallel calls): a chunk with its index, id, name and empty
// arguments, then one chunk per piece of its arguments.
func (c *ChatStream) ToolCalls(calls ...OpenAIToolCall) *ChatStream {
	for _, call := range calls {
		idx := c.calls
		c.calls++
		first := oaiObject("index", idx, "id", call.ID, "type", "function",
			"function", oaiObject("name", call.Name, "arguments", ""))
		if idx == 0 {
			c.Delta(string(oaiObject("role", "assistant", "content", nil, "tool_calls", []json.RawMessage{first}, "refusal", nil)))
		} else {
			c.Delta(string(oaiObject("tool_calls", []json.RawMessage{first})))
		}
		for _, piece := range call.Args {
			c.Delta(string(oaiObject("tool_calls", []json.RawMessage{oaiObject("index", idx, "function", oaiObject("arguments", piece))})))
			c.deltas++
		}
	}
	return c
}

// Usage sets the usage Finish's usage chunk reports; by default
// OpenAIInputTokens prompt tokens and one completion token per delta.
func (c *ChatStream) Usage(prompt, completion int) *ChatStream {
	c.usage = &[2]int{prompt, completion}
	return c
}

// CachedTokens sets how many of the prompt tokens Finish's usage chunk
// reports as read from the prompt cache
// (prompt_tokens_details.cached_tokens); by default 0.
func (c *ChatStream) CachedTokens(n int) *ChatStream {
	c.cached = n
	return c
}

// Finish ends the stream with a chunk giving the finish reason ("stop",
// "length", "content_filter", "tool_calls"), the usage chunk (see Usage)
// and [DONE].
func (c *ChatStream) Finish(reason string) Reply {
	c.Data(ChatChunk(`{}`, reason))
	prompt, completion := OpenAIInputTokens, c.deltas
	if c.usage != nil {
		prompt, completion = c.usage[0], c.usage[1]
	}
	c.Data(chatUsageChunk(prompt, completion, c.cached))
	return c.Done()
}

// Done ends the stream with [DONE] only.
func (c *ChatStream) Done() Reply {
	c.Data("[DONE]")
	return c.Reply()
}

// Cut returns the stream so far with the connection dropped after it.
func (c *ChatStream) Cut() Reply { return Reply{Events: c.Events(), Cut: true} }

// Reply returns the stream so far, ended cleanly but without [DONE].
func (c *ChatStream) Reply() Reply { return Reply{Events: c.Events()} }

// Events returns the events so far.
func (c *ChatStream) Events() []Event { return append([]Event(nil), c.events...) }

// ChatText is a chat completion streaming deltas as content, then
// finishing with reason (see ChatStream.Finish).
func ChatText(reason string, deltas ...string) Reply {
	return NewChatStream().Text(deltas...).Finish(reason)
}

// ChatToolCalls is a chat completion calling tools, each call's
// arguments split across chunks, finishing with "tool_calls".
func ChatToolCalls(calls ...OpenAIToolCall) Reply {
	return NewChatStream().ToolCalls(calls...).Finish("tool_calls")
}

// ChatTextN is a chat completion of n content chunks of delta, finishing
// with "stop": a stream of a chosen length for benchmarks.
func ChatTextN(n int, delta string) Reply {
	return NewChatStream().Text(oaiRepeat(n, delta)...).Finish("stop")
}

// ResponsesStream builds a Responses API stream: response.created and
// response.in_progress, then output items one after the other, each
// added, streamed and done, then a terminal event whose response holds
// every item. Its methods append and return the builder; Completed,
// Incomplete, Failed, ErrorEvent, Cut and Reply end it.
type ResponsesStream struct {
	events []Event
	seq    int
	output []json.RawMessage // the done items, in output order
	deltas int               // the output tokens reported
	usage  *[2]int
	cached int // the input tokens reported as cached
}

// NewResponsesStream starts a stream with response.created and
// response.in_progress.
func NewResponsesStream() *ResponsesStream {
	r := &ResponsesStream{}
	r.Event("response.created", "response", r.response("in_progress", nil, nil))
	r.Event("response.in_progress", "response", r.response("in_progress", nil, nil))
	return r
}

// Event appends the event typ, its data holding "type", the next
// sequence_number and then the key-value pairs kv in order (a value is
// written as by encoding/json; a json.RawMessage as it is).
func (r *ResponsesStream) Event(typ string, kv ...any) *ResponsesStream {
	data := oaiObject(append([]any{"type", typ, "sequence_number", r.seq}, kv...)...)
	r.seq++
	return r.Raw(typ, string(data))
}

// Raw appends an event named name with data as it is (say an event this
// package's readers do not know, or a malformed one).
func (r *ResponsesStream) Raw(name, data string) *ResponsesStream {
	r.events = append(r.events, Event{Name: name, Data: data})
	return r
}

// Usage sets the usage the terminal response reports; by default
// OpenAIInputTokens in and one token per delta out.
func (r *ResponsesStream) Usage(input, output int) *ResponsesStream {
	r.usage = &[2]int{input, output}
	return r
}

// CachedTokens sets how many of the input tokens the terminal response
// reports as read from the prompt cache
// (input_tokens_details.cached_tokens); by default 0.
func (r *ResponsesStream) CachedTokens(n int) *ResponsesStream {
	r.cached = n
	return r
}

// OpenAIPart is a content part of a scripted message: output_text, or a
// refusal, streamed in deltas.
type OpenAIPart struct {
	Refusal bool
	Deltas  []string
}

// Text appends a message item with one output_text part streamed in
// deltas.
func (r *ResponsesStream) Text(deltas ...string) *ResponsesStream {
	return r.Message(OpenAIPart{Deltas: deltas})
}

// Refusal appends a message item with one refusal part streamed in
// deltas.
func (r *ResponsesStream) Refusal(deltas ...string) *ResponsesStream {
	return r.Message(OpenAIPart{Refusal: true, Deltas: deltas})
}

// Message appends a message item with parts, each added, streamed
// (response.output_text.delta or response.refusal.delta), and done.
func (r *ResponsesStream) Message(parts ...OpenAIPart) *ResponsesStream {
	oi := len(r.output)
	id := "msg_fake" + strconv.Itoa(oi)
	r.Event("response.output_item.added", "output_index", oi,
		"item", oaiObject("id", id, "type", "message", "status", "in_progress", "content", []any{}, "role", "assistant"))
	var done []json.RawMessage
	for ci, p := range parts {
		text := strings.Join(p.Deltas, "")
		kind, deltaEv, doneEv, field := "output_text", "response.output_text.delta", "response.output_text.done", "text"
		if p.Refusal {
			kind, deltaEv, doneEv, field = "refusal", "response.refusal.delta", "response.refusal.done", "refusal"
		}
		empty, final := oaiObject("type", kind, field, ""), oaiObject("type", kind, field, text)
		if !p.Refusal {
			empty = oaiObject("type", kind, "annotations", []any{}, "logprobs", []any{}, field, "")
			final = oaiObject("type", kind, "annotations", []any{}, "logprobs", []any{}, field, text)
		}
		r.Event("response.content_part.added", "item_id", id, "output_index", oi, "content_index", ci, "part", empty)
		for _, d := range p.Deltas {
			if p.Refusal {
				r.Event(deltaEv, "item_id", id, "output_index", oi, "content_index", ci, "delta", d)
			} else {
				r.Event(deltaEv, "item_id", id, "output_index", oi, "content_index", ci, "delta", d, "logprobs", []any{})
			}
			r.deltas++
		}
		if p.Refusal {
			r.Event(doneEv, "item_id", id, "output_index", oi, "content_index", ci, field, text)
		} else {
			r.Event(doneEv, "item_id", id, "output_index", oi, "content_index", ci, field, text, "logprobs", []any{})
		}
		r.Event("response.content_part.done", "item_id", id, "output_index", oi, "content_index", ci, "part", final)
		done = append(done, final)
	}
	if done == nil {
		done = []json.RawMessage{}
	}
	return r.itemDone(oaiObject("id", id, "type", "message", "status", "completed", "content", done, "role", "assistant"))
}

// FunctionCalls appends a function_call item per call, one after the
// other (several calls in one response are parallel calls): added with
// empty arguments, the arguments in response.function_call_arguments.delta
// pieces, response.function_call_arguments.done, then done.
func (r *ResponsesStream) FunctionCalls(calls ...OpenAIToolCall) *ResponsesStream {
	for _, c := range calls {
		oi := len(r.output)
		id := "fc_fake" + strconv.Itoa(oi)
		r.Event("response.output_item.added", "output_index", oi,
			"item", oaiObject("id", id, "type", "function_call", "status", "in_progress", "arguments", "", "call_id", c.ID, "name", c.Name))
		for _, piece := range c.Args {
			r.Event("response.function_call_arguments.delta", "item_id", id, "output_index", oi, "delta", piece)
			r.deltas++
		}
		r.Event("response.function_call_arguments.done", "item_id", id, "output_index", oi, "arguments", c.args())
		r.itemDone(oaiObject("id", id, "type", "function_call", "status", "completed", "arguments", c.args(), "call_id", c.ID, "name", c.Name))
	}
	return r
}

// Reasoning appends a reasoning item with a summary text and, when not
// empty, its encrypted content.
func (r *ResponsesStream) Reasoning(summary, encrypted string) *ResponsesStream {
	oi := len(r.output)
	id := "rs_fake" + strconv.Itoa(oi)
	r.Event("response.output_item.added", "output_index", oi, "item", oaiObject("id", id, "type", "reasoning", "summary", []any{}))
	kv := []any{"id", id, "type", "reasoning", "summary", []json.RawMessage{oaiObject("type", "summary_text", "text", summary)}}
	if encrypted != "" {
		kv = append(kv, "encrypted_content", encrypted)
	}
	return r.itemDone(oaiObject(kv...))
}

// Item appends an output item of any kind (a web_search_call, say, or
// one of a kind not yet invented), given as its JSON object, added then
// done.
func (r *ResponsesStream) Item(item string) *ResponsesStream {
	oi := len(r.output)
	r.Event("response.output_item.added", "output_index", oi, "item", json.RawMessage(item))
	return r.itemDone(json.RawMessage(item))
}

func (r *ResponsesStream) itemDone(item json.RawMessage) *ResponsesStream {
	oi := len(r.output)
	r.output = append(r.output, item)
	return r.Event("response.output_item.done", "output_index", oi, "item", item)
}

// Completed ends the stream with response.completed.
func (r *ResponsesStream) Completed() Reply {
	r.Event("response.completed", "response", r.response("completed", nil, nil))
	return r.Reply()
}

// Incomplete ends the stream with response.incomplete for reason
// ("max_output_tokens", "content_filter").
func (r *ResponsesStream) Incomplete(reason string) Reply {
	r.Event("response.incomplete", "response", r.response("incomplete", oaiObject("reason", reason), nil))
	return r.Reply()
}

// Failed ends the stream with response.failed with the error code and
// message ("server_error", "rate_limit_exceeded", "invalid_prompt"…).
func (r *ResponsesStream) Failed(code, message string) Reply {
	r.Event("response.failed", "response", r.response("failed", nil, oaiObject("code", code, "message", message)))
	return r.Reply()
}

// ErrorEvent ends the stream with an error event.
func (r *ResponsesStream) ErrorEvent(code, message string) Reply {
	r.Event("error", "code", code, "message", message, "param", nil)
	return r.Reply()
}

// Cut returns the stream so far with the connection dropped after it.
func (r *ResponsesStream) Cut() Reply { return Reply{Events: r.Events(), Cut: true} }

// Reply returns the stream so far, ended cleanly.
func (r *ResponsesStream) Reply() Reply { return Reply{Events: r.Events()} }

// Events returns the events so far.
func (r *ResponsesStream) Events() []Event { return append([]Event(nil), r.events...) }

// response is the response object in status, with the output so far;
// usage is given once the response has ended.
func (r *ResponsesStream) response(status string, incomplete, failure json.RawMessage) json.RawMessage {
	var usage any
	if status != "in_progress" {
		in, out := OpenAIInputTokens, r.deltas
		if r.usage != nil {
			in, out = r.usage[0], r.usage[1]
		}
		usage = oaiObject("input_tokens", in, "input_tokens_details", oaiObject("cached_tokens", r.cached),
			"output_tokens", out, "output_tokens_details", oaiObject("reasoning_tokens", 0), "total_tokens", in+out)
	}
	output := r.output
	if status == "in_progress" || output == nil {
		output = []json.RawMessage{}
	}
	return oaiObject("id", OpenAIResponseID, "object", "response", "created_at", openAICreated, "status", status,
		"background", false, "error", failure, "incomplete_details", incomplete, "instructions", nil,
		"max_output_tokens", nil, "model", OpenAIModel, "output", output, "parallel_tool_calls", true,
		"previous_response_id", nil, "reasoning", oaiObject("effort", nil, "summary", nil), "store", false,
		"temperature", 1.0, "text", oaiObject("format", oaiObject("type", "text"), "verbosity", "medium"),
		"tool_choice", "auto", "tools", []any{}, "top_p", 1.0, "truncation", "disabled",
		"usage", usage, "user", nil, "metadata", oaiObject())
}

// ResponsesText is a response streaming one message of deltas, then
// completed.
func ResponsesText(deltas ...string) Reply {
	return NewResponsesStream().Text(deltas...).Completed()
}

// ResponsesFunctionCalls is a response calling tools (in parallel when
// there are several), their arguments split across deltas, then
// completed.
func ResponsesFunctionCalls(calls ...OpenAIToolCall) Reply {
	return NewResponsesStream().FunctionCalls(calls...).Completed()
}

// ResponsesIncomplete is a response streaming a message of deltas, then
// ended incomplete for reason.
func ResponsesIncomplete(reason string, deltas ...string) Reply {
	return NewResponsesStream().Text(deltas...).Incomplete(reason)
}

// ResponsesRefusal is a response whose message is a refusal streamed in
// deltas, then completed.
func ResponsesRefusal(deltas ...string) Reply {
	return NewResponsesStream().Refusal(deltas...).Completed()
}

// ResponsesTextN is a response streaming one message of n deltas of
// delta, then completed: a stream of a chosen length for benchmarks.
func ResponsesTextN(n int, delta string) Reply {
	return NewResponsesStream().Text(oaiRepeat(n, delta)...).Completed()
}

func oaiRepeat(n int, s string) []string {
	out := make([]string, max(n, 0))
	for i := range out {
		out[i] = s
	}
	return out
}

// oaiObject is the JSON object of the key-value pairs kv, in order; a value
// is written as by encoding/json, a json.RawMessage as it is.
func oaiObject(kv ...any) json.RawMessage {
	if len(kv)%2 != 0 {
		panic("fakeapi: object needs key-value pairs")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		key, ok := kv[i].(string)
		if !ok {
			panic(fmt.Sprintf("fakeapi: object key %v is not a string", kv[i]))
		}
		if err := enc.Encode(key); err != nil {
			panic(err)
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		b.WriteByte(':')
		if err := enc.Encode(kv[i+1]); err != nil {
			panic(fmt.Sprintf("fakeapi: object value for %q: %v", key, err))
		}
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return b.Bytes()
}
