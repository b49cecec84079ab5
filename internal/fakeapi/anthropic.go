package fakeapi

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// The message every scripted Anthropic stream describes.
const (
	AnthropicMessageID   = "msg_fake_01"
	AnthropicModel       = "claude-fake-1"
	AnthropicInputTokens = 25
)

// AnthropicCall is one tool_use block of a scripted Anthropic reply.
type AnthropicCall struct {
	ID    string // "" means toolu_fake_<block index>
	Name  string
	Input string // the input JSON text, streamed in input_json_delta events
}

// AnthropicStream builds the server-sent events of one streamed
// Anthropic Messages response, as the Messages streaming documentation
// lays them out: message_start, then each content block as
// content_block_start, content_block_delta… and content_block_stop, then
// message_delta with the stop reason and usage, and message_stop. Blocks
// get consecutive indexes from 0. Usage is AnthropicInputTokens in and
// one output token per delta event, unless Usage and CacheUsage say
// otherwise.
type AnthropicStream struct {
	events []Event
	blocks int
	tokens int
	input  int
	output *int // set by Usage
	cache  *[2]int
}

// NewAnthropicStream starts a stream with message_start and a ping.
func NewAnthropicStream() *AnthropicStream {
	s := &AnthropicStream{input: AnthropicInputTokens}
	s.add("message_start", s.messageStart())
	s.add("ping", map[string]any{"type": "ping"})
	return s
}

// messageStart is the message_start event's data.
func (s *AnthropicStream) messageStart() map[string]any {
	usage := map[string]any{"input_tokens": s.input, "output_tokens": 1}
	if s.cache != nil {
		usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"] = s.cache[0], s.cache[1]
	}
	return map[string]any{"type": "message_start", "message": map[string]any{
		"id": AnthropicMessageID, "type": "message", "role": "assistant", "content": []any{},
		"model": AnthropicModel, "stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}}
}

// Usage sets the usage the stream reports: input tokens in message_start,
// output tokens in the final message_delta (by default one per delta).
func (s *AnthropicStream) Usage(input, output int) *AnthropicStream {
	s.input, s.output = input, &output
	s.events[0] = Event{Name: "message_start", Data: anthropicJSON(s.messageStart())}
	return s
}

// CacheUsage adds prompt cache usage to message_start: the input tokens
// written to the cache (cache_creation_input_tokens) and read from it
// (cache_read_input_tokens), which the API counts apart from
// input_tokens.
func (s *AnthropicStream) CacheUsage(creation, read int) *AnthropicStream {
	s.cache = &[2]int{creation, read}
	s.events[0] = Event{Name: "message_start", Data: anthropicJSON(s.messageStart())}
	return s
}

// Text adds a text block whose text arrives in deltas, one text_delta
// event each.
func (s *AnthropicStream) Text(deltas ...string) *AnthropicStream {
	var ds []any
	for _, d := range deltas {
		ds = append(ds, map[string]any{"type": "text_delta", "text": d})
	}
	return s.block(map[string]any{"type": "text", "text": ""}, ds)
}

// ToolUse adds a tool_use block whose input JSON text is split into
// chunks input_json_delta events of about equal size (at least one, as
// the API sends one even for empty input).
func (s *AnthropicStream) ToolUse(call AnthropicCall, chunks int) *AnthropicStream {
	id := call.ID
	if id == "" {
		id = "toolu_fake_" + strconv.Itoa(s.blocks)
	}
	var ds []any
	for _, part := range anthropicSplit(call.Input, chunks) {
		ds = append(ds, map[string]any{"type": "input_json_delta", "partial_json": part})
	}
	return s.block(map[string]any{"type": "tool_use", "id": id, "name": call.Name, "input": map[string]any{}}, ds)
}

// Thinking adds an extended thinking block: its text in thinking_delta
// events, then its signature in one signature_delta.
func (s *AnthropicStream) Thinking(signature string, deltas ...string) *AnthropicStream {
	var ds []any
	for _, d := range deltas {
		ds = append(ds, map[string]any{"type": "thinking_delta", "thinking": d})
	}
	ds = append(ds, map[string]any{"type": "signature_delta", "signature": signature})
	return s.block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, ds)
}

// Block adds a block of any kind: start is the JSON of its content_block
// (a server_tool_use, or a type no API has), each delta the JSON of one
// content_block_delta's delta.
func (s *AnthropicStream) Block(start string, deltas ...string) *AnthropicStream {
	ds := make([]any, len(deltas))
	for i, d := range deltas {
		ds[i] = json.RawMessage(d)
	}
	return s.block(json.RawMessage(start), ds)
}

// Event adds an event as given: an event type no API has, a ping, an
// event out of order.
func (s *AnthropicStream) Event(name, data string) *AnthropicStream {
	s.events = append(s.events, Event{Name: name, Data: data})
	return s
}

// Events returns the events so far, without an end.
func (s *AnthropicStream) Events() []Event {
	return append([]Event(nil), s.events...)
}

// Stop ends the stream: message_delta with stopReason and the output
// tokens, then message_stop.
func (s *AnthropicStream) Stop(stopReason string) Reply {
	output := s.tokens
	if s.output != nil {
		output = *s.output
	}
	s.add("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": output},
	})
	s.add("message_stop", map[string]any{"type": "message_stop"})
	return Reply{Events: s.Events()}
}

// Error ends the stream with an error event of errType
// ("overloaded_error", "api_error"…), as the API reports a failure after
// the response has begun.
func (s *AnthropicStream) Error(errType, msg string) Reply {
	s.events = append(s.events, AnthropicErrorEvent(errType, msg))
	return Reply{Events: s.Events()}
}

// Cut ends the stream by dropping the connection.
func (s *AnthropicStream) Cut() Reply {
	return Reply{Events: s.Events(), Cut: true}
}

// block adds the events of one content block.
func (s *AnthropicStream) block(start any, deltas []any) *AnthropicStream {
	idx := s.blocks
	s.blocks++
	s.add("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": start})
	for _, d := range deltas {
		s.tokens++
		s.add("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": d})
	}
	s.add("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
	return s
}

func (s *AnthropicStream) add(name string, v any) {
	s.events = append(s.events, Event{Name: name, Data: anthropicJSON(v)})
}

// AnthropicText is a reply of one text block made of deltas, ending with
// stopReason ("end_turn", "max_tokens", "refusal"…).
func AnthropicText(deltas []string, stopReason string) Reply {
	return NewAnthropicStream().Text(deltas...).Stop(stopReason)
}

// AnthropicTextN is a reply of one text block of n deltas, each delta,
// ending with end_turn: a long output for benchmarks.
func AnthropicTextN(n int, delta string) Reply {
	deltas := make([]string, n)
	for i := range deltas {
		deltas[i] = delta
	}
	return AnthropicText(deltas, "end_turn")
}

// AnthropicToolUse is a reply of a text block (left out when text is
// empty) then one tool_use block per call, each input split into
// argChunks deltas, ending with stop reason tool_use. Several calls are
// parallel tool use.
func AnthropicToolUse(text string, calls []AnthropicCall, argChunks int) Reply {
	s := NewAnthropicStream()
	if text != "" {
		s.Text(text)
	}
	for _, c := range calls {
		s.ToolUse(c, argChunks)
	}
	return s.Stop("tool_use")
}

// AnthropicError is an HTTP error reply in the API's error shape:
// status 429 with rate_limit_error, 500 api_error, 529 overloaded_error,
// 400 invalid_request_error ("prompt is too long: 210000 tokens > 200000
// maximum")… header holds extra headers such as Retry-After.
func AnthropicError(status int, errType, msg string, header http.Header) Reply {
	return Reply{Status: status, Header: header.Clone(), Body: anthropicErrorBody(errType, msg)}
}

// AnthropicErrorEvent is an error event sent in a stream.
func AnthropicErrorEvent(errType, msg string) Event {
	return Event{Name: "error", Data: anthropicErrorBody(errType, msg)}
}

func anthropicErrorBody(errType, msg string) string {
	return anthropicJSON(map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": errType, "message": msg},
		"request_id": "req_fake_01",
	})
}

// anthropicSplit cuts s into n parts of about equal length (at least
// one part), never inside a UTF-8 sequence.
func anthropicSplit(s string, n int) []string {
	rs := []rune(s)
	n = max(1, min(n, len(rs)))
	parts := make([]string, 0, n)
	for i := range n {
		parts = append(parts, string(rs[i*len(rs)/n:(i+1)*len(rs)/n]))
	}
	return parts
}

// anthropicJSON is v's JSON text; v is always encodable here.
func anthropicJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic("fakeapi: " + err.Error())
	}
	return string(data)
}
