package anthropic

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// stream is the state of one Stream call: what the events said so far.
type stream struct {
	provider     string
	emit         func(providers.Event) error
	rawRequest   json.RawMessage
	id, model    string
	stopReason   string
	stopSequence string
	stopped      bool                       // message_stop arrived
	usage        map[string]json.RawMessage // the latest value of each usage field
	blocks       map[int]*block             // by content block index
}

// blockKind says how a content block is normalized.
type blockKind int

const (
	kindText     blockKind = iota + 1
	kindToolUse            // a ToolCall
	kindThinking           // thinking or redacted_thinking: a ReasoningItem
	kindUnknown            // any other type: an UnknownItem
)

// block accumulates one content block.
type block struct {
	kind      blockKind
	start     map[string]json.RawMessage // the content_block it started with
	text      strings.Builder            // text, or thinking text
	citations []json.RawMessage
	id, name  string
	input     strings.Builder // partial_json, concatenated
	gotInput  bool
	signature strings.Builder
	gotSig    bool
	stopped   bool // content_block_stop arrived; its item was emitted
}

func newStream(provider string, emit func(providers.Event) error) *stream {
	return &stream{provider: provider, emit: emit, usage: map[string]json.RawMessage{}, blocks: map[int]*block{}}
}

// setRawRequest keeps body, the request as sent (see providers.SentJSON).
func (s *stream) setRawRequest(body []byte) {
	s.rawRequest = providers.SentJSON(s.rawRequest, body)
}

// eventUsage is the part of message_start and message_delta events read
// for usage.
type eventUsage struct {
	Message struct {
		Usage map[string]json.RawMessage `json:"usage"`
	} `json:"message"`
	Usage map[string]json.RawMessage `json:"usage"`
}

// streamEvent is one Messages stream event. The per-token ones, a
// content_block_delta of text, tool input JSON, thinking or signature,
// are decoded as blockDelta with encoding/json; the others, a handful per
// message, as the SDK's union, whose decoder costs several times as much.
type streamEvent struct {
	delta *blockDelta
	sdk   sdk.MessageStreamEventUnion
	raw   json.RawMessage // the event, compacted
}

// blockDelta is a content_block_delta event.
type blockDelta struct {
	Type  string     `json:"type"`
	Index int        `json:"index"`
	Delta deltaParts `json:"delta"`
}

// deltaParts are the fields of a content block delta the stream reads.
type deltaParts struct {
	Type        string          `json:"type"`
	Text        string          `json:"text"`
	PartialJSON string          `json:"partial_json"`
	Thinking    string          `json:"thinking"`
	Signature   string          `json:"signature"`
	citation    json.RawMessage // of a citations_delta (decoded by the SDK)
}

// plainDelta are the delta types blockDelta holds whole.
var plainDelta = map[string]bool{"text_delta": true, "input_json_delta": true, "thinking_delta": true, "signature_delta": true}

func (e *streamEvent) UnmarshalJSON(data []byte) error {
	var d blockDelta
	if json.Unmarshal(data, &d) == nil && d.Type == "content_block_delta" && plainDelta[d.Delta.Type] {
		e.delta = &d
	} else if err := json.Unmarshal(data, &e.sdk); err != nil {
		return err
	}
	e.raw = providers.CompactJSON(data)
	return nil
}

// event takes in one stream event and emits its provider events. It
// fails only when emit does.
func (s *stream) event(e streamEvent) error {
	if d := e.delta; d != nil {
		ev := providers.Event{Kind: providers.EventOther, Type: d.Type, Raw: e.raw, Index: d.Index}
		if s.delta(d.Index, d.Delta) {
			ev.Kind, ev.Text = providers.EventTextDelta, d.Delta.Text
		}
		return s.emit(ev)
	}
	return s.sdkEvent(e.sdk, e.raw)
}

// sdkEvent is event for the events decoded as the SDK's union.
func (s *stream) sdkEvent(u sdk.MessageStreamEventUnion, raw json.RawMessage) error {
	idx := int(u.Index)
	ev := providers.Event{Kind: providers.EventOther, Type: u.Type, Raw: raw}
	var done *block
	switch u.Type {
	case "message_start":
		if u.Message.ID != "" {
			s.id = u.Message.ID
		}
		if u.Message.Model != "" {
			s.model = string(u.Message.Model)
		}
		if u.Message.StopReason != "" {
			s.stopReason = string(u.Message.StopReason)
		}
		s.addUsage(raw)
	case "content_block_start":
		ev.Index = idx
		b := startBlock(u.ContentBlock)
		s.blocks[idx] = b
		if b.kind == kindText && u.ContentBlock.Text != "" {
			b.text.WriteString(u.ContentBlock.Text)
			ev.Kind, ev.Text = providers.EventTextDelta, u.ContentBlock.Text
		}
	case "content_block_delta":
		ev.Index = idx
		if s.delta(idx, deltaParts{Type: u.Delta.Type, Text: u.Delta.Text, PartialJSON: u.Delta.PartialJSON,
			Thinking: u.Delta.Thinking, Signature: u.Delta.Signature, citation: json.RawMessage(u.Delta.Citation.RawJSON())}) {
			ev.Kind, ev.Text = providers.EventTextDelta, u.Delta.Text
		}
	case "content_block_stop":
		ev.Index = idx
		if b := s.blocks[idx]; b != nil && !b.stopped {
			b.stopped = true
			done = b
		}
	case "message_delta":
		if u.Delta.StopReason != "" {
			s.stopReason = string(u.Delta.StopReason)
		}
		if u.Delta.StopSequence != "" {
			s.stopSequence = u.Delta.StopSequence
		}
		s.addUsage(raw)
	case "message_stop":
		s.stopped = true
	case "ping":
	default:
		ev.Unhandled = true
	}
	if err := s.emit(ev); err != nil {
		return err
	}
	if done == nil || done.kind == kindText {
		return nil
	}
	item, ok := done.item(idx)
	if !ok {
		return nil
	}
	data, err := messages.MarshalItem(item)
	if err != nil {
		return nil // cannot happen: item returns valid items only
	}
	return s.emit(providers.Event{Kind: providers.EventItem, Index: idx, Item: item, Type: EventBlockDone, Raw: data})
}

// startBlock is the state of a block started as cb.
func startBlock(cb sdk.ContentBlockStartEventContentBlockUnion) *block {
	b := &block{id: cb.ID, name: cb.Name}
	_ = json.Unmarshal([]byte(cb.RawJSON()), &b.start) // a block that is no object stays nil
	switch cb.Type {
	case "text":
		b.kind = kindText
	case "tool_use":
		b.kind = kindToolUse
	case "thinking", "redacted_thinking":
		b.kind = kindThinking
		b.text.WriteString(cb.Thinking)
	default:
		b.kind = kindUnknown
	}
	return b
}

// delta merges a content_block_delta into block idx and reports whether
// it was text to show. Deltas for a block that never started are dropped,
// but for text, which starts a text block.
func (s *stream) delta(idx int, d deltaParts) (isText bool) {
	b := s.blocks[idx]
	if b == nil {
		if d.Type != "text_delta" {
			return false
		}
		b = &block{kind: kindText}
		s.blocks[idx] = b
	}
	switch d.Type {
	case "text_delta":
		if b.kind == kindText {
			b.text.WriteString(d.Text)
			return true
		}
	case "citations_delta":
		if c := providers.CompactJSON(d.citation); b.kind == kindText && c != nil {
			b.citations = append(b.citations, c)
		}
	case "input_json_delta":
		b.input.WriteString(d.PartialJSON)
		b.gotInput = true
	case "thinking_delta":
		b.text.WriteString(d.Thinking)
	case "signature_delta":
		b.signature.WriteString(d.Signature)
		b.gotSig = true
	}
	return false
}

// addUsage merges the usage fields an event carries.
func (s *stream) addUsage(raw json.RawMessage) {
	var eu eventUsage
	if json.Unmarshal(raw, &eu) != nil {
		return
	}
	for _, m := range []map[string]json.RawMessage{eu.Message.Usage, eu.Usage} {
		for k, v := range m {
			if string(v) != "null" {
				s.usage[k] = v
			}
		}
	}
}

// item returns the transcript item of a tool_use, thinking or unknown
// block; ok is false when it has none (a tool use without a name, a block
// that is no JSON object).
func (b *block) item(idx int) (messages.TranscriptItem, bool) {
	switch b.kind {
	case kindToolUse:
		if b.name == "" {
			return nil, false
		}
		id := b.id
		if id == "" {
			id = "toolu_block_" + strconv.Itoa(idx)
		}
		return toolCallItem(id, b.name, b.arguments()), true
	case kindThinking:
		raw := b.thinkingJSON()
		return messages.ReasoningItem{Raw: raw}, raw != nil
	case kindUnknown:
		raw := b.unknownJSON()
		return messages.UnknownItem{Provider: DefaultName, Raw: raw}, raw != nil
	}
	return nil, false
}

// arguments is the tool use's input text as the model wrote it: the
// streamed partial JSON, or when none came the input the block started
// with, unless that is the empty object the API starts every tool_use
// block with.
func (b *block) arguments() string {
	if b.gotInput {
		return b.input.String()
	}
	if in := providers.CompactJSON(b.start["input"]); in != nil && string(in) != "{}" && string(in) != "null" {
		return string(in)
	}
	return ""
}

// toolCallItem makes a tool call item. Arguments is a JSON string holding
// the model's input text exactly (as the other adapters record it), so
// that input cut short is kept too; no input at all is "{}".
func toolCallItem(id, name, args string) messages.ToolCall {
	if args == "" {
		args = "{}"
	}
	data, err := json.Marshal(args)
	if err != nil {
		data = []byte(`"{}"`)
	}
	return messages.ToolCall{CallID: id, Name: name, Arguments: data}
}

// thinkingJSON is the whole thinking block, its text and signature
// filled in from the deltas, as it is sent back; a redacted_thinking
// block is kept as it came.
func (b *block) thinkingJSON() json.RawMessage {
	if string(b.start["type"]) == `"redacted_thinking"` {
		return b.with(nil)
	}
	set := map[string]json.RawMessage{"thinking": jsonString(b.text.String())}
	if b.gotSig {
		set["signature"] = jsonString(b.signature.String())
	}
	return b.with(set)
}

// unknownJSON is the block as it started, with the input streamed into
// it (a server_tool_use block's, say) when that is valid JSON.
func (b *block) unknownJSON() json.RawMessage {
	if in := providers.CompactJSON([]byte(b.input.String())); b.gotInput && in != nil {
		return b.with(map[string]json.RawMessage{"input": in})
	}
	return b.with(nil)
}

// with is the JSON of the block as it started with the fields in set
// replaced, or nil when it did not start as a JSON object.
func (b *block) with(set map[string]json.RawMessage) json.RawMessage {
	if b.start == nil {
		return nil
	}
	m := make(map[string]json.RawMessage, len(b.start)+len(set))
	for k, v := range b.start {
		m[k] = v
	}
	for k, v := range set {
		m[k] = v
	}
	return marshal(m)
}

// jsonString is s as a JSON string.
func jsonString(s string) json.RawMessage {
	return marshal(s)
}

// marshal is v's compact JSON, with <, > and & written as they are
// (the model's text kept byte for byte), or nil when v does not encode.
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// items returns the response items in block order: consecutive text
// blocks as one assistant message, then each tool use, thinking or
// unknown block as its item, and the response id as metadata last.
func (s *stream) items() messages.Items {
	var items messages.Items
	var text messages.Blocks
	flush := func() {
		if len(text) > 0 {
			items = append(items, messages.AssistantMessage{Blocks: text})
			text = nil
		}
	}
	for _, idx := range sortedKeys(s.blocks) {
		b := s.blocks[idx]
		if b.kind == kindText {
			if t := b.text.String(); t != "" || len(b.citations) > 0 {
				text = append(text, messages.Text{Text: t, Annotations: b.citations})
			}
			continue
		}
		if it, ok := b.item(idx); ok {
			flush()
			items = append(items, it)
		}
	}
	flush()
	if s.id != "" {
		items = append(items, messages.Metadata{Key: "response_id", Value: s.id})
	}
	return items
}

// finish ends a stream that closed normally: it maps the stop reason to
// the outcome, or fails when the stream ended before message_stop.
func (s *stream) finish() (providers.Response, error) {
	var err *providers.Error
	switch {
	case !s.stopped:
		err = s.dropped("stream ended before message_stop")
	case s.stopReason == "":
		err = s.dropped("stream ended without a stop reason")
	default:
		return s.response(outcome(s.stopReason)), nil
	}
	return s.fail(err.Code, err), err
}

// dropped is the error of a stream cut off before its end.
func (s *stream) dropped(msg string) *providers.Error {
	return &providers.Error{Provider: s.provider, Code: "stream_incomplete", Message: msg, Retryable: true}
}

// outcome maps a stop reason to the step's outcome.
func outcome(stopReason string) messages.StepOutcome {
	switch stopReason {
	case "end_turn", "stop_sequence":
		return messages.StepOutcome{Kind: messages.OutcomeCompleted}
	case "tool_use":
		return pausedToolUse
	case "pause_turn":
		return pausedPauseTurn
	case "max_tokens":
		return messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}
	case "refusal":
		return messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "refusal"}
	case "model_context_window_exceeded":
		return messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "context_window"}
	default:
		return messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: stopReason}
	}
}

// response returns the response for what arrived, with outcome.
func (s *stream) response(outcome messages.StepOutcome) providers.Response {
	return providers.Response{
		Items:       s.items(),
		Outcome:     outcome,
		Usage:       s.tokenUsage(),
		Model:       s.model,
		RawRequest:  s.rawRequest,
		RawResponse: s.rawResponse(),
	}
}

// tokenUsage is the usage reported. Input counts every prompt token:
// those read from and written to the prompt cache (the API counts them
// apart from input_tokens) as well as the rest.
func (s *stream) tokenUsage() providers.Usage {
	n := func(k string) int {
		var v int
		_ = json.Unmarshal(s.usage[k], &v) // absent or not an integer: 0
		return v
	}
	read, write := n("cache_read_input_tokens"), n("cache_creation_input_tokens")
	return providers.Usage{
		InputTokens:      n("input_tokens") + write + read,
		OutputTokens:     n("output_tokens"),
		CacheReadTokens:  read,
		CacheWriteTokens: write,
	}
}

func (s *stream) cancelled() providers.Response {
	return s.response(messages.StepOutcome{Kind: messages.OutcomeCancelled})
}

// fail returns the response for what arrived with outcome Failed.
func (s *stream) fail(code string, err error) providers.Response {
	return s.response(providers.FailedOutcome(code, err))
}

func (s *stream) emitFailed(err error) (providers.Response, error) {
	outcome, err := providers.EmitFailed(s.provider, err)
	return s.response(outcome), err
}

// responseSummary is the RawResponse of a step: the message the stream
// described, in the shape of a Messages API response.
type responseSummary struct {
	ID           string                     `json:"id,omitempty"`
	Type         string                     `json:"type"`
	Role         string                     `json:"role"`
	Model        string                     `json:"model,omitempty"`
	Content      []json.RawMessage          `json:"content"`
	StopReason   string                     `json:"stop_reason,omitempty"`
	StopSequence string                     `json:"stop_sequence,omitempty"`
	Usage        map[string]json.RawMessage `json:"usage,omitempty"`
}

func (s *stream) rawResponse() json.RawMessage {
	sum := responseSummary{
		ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []json.RawMessage{},
		StopReason: s.stopReason, StopSequence: s.stopSequence, Usage: s.usage,
	}
	for _, idx := range sortedKeys(s.blocks) {
		if c := s.blocks[idx].summary(); c != nil {
			sum.Content = append(sum.Content, c)
		}
	}
	return marshal(sum)
}

// summary is the block as the API's non-streaming response would hold
// it; a tool use's input is its JSON, or when that is cut short or
// otherwise invalid, the text as a string.
func (b *block) summary() json.RawMessage {
	var v any
	switch b.kind {
	case kindText:
		t := map[string]any{"type": "text", "text": b.text.String()}
		if len(b.citations) > 0 {
			t["citations"] = b.citations
		}
		v = t
	case kindToolUse:
		args := b.arguments()
		input := any(args)
		if args == "" {
			input = map[string]any{}
		} else if c := providers.CompactJSON([]byte(args)); c != nil {
			input = c
		}
		v = map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": input}
	case kindThinking:
		return b.thinkingJSON()
	default:
		return b.unknownJSON()
	}
	return marshal(v)
}

// sortedKeys returns m's keys in increasing order.
func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
