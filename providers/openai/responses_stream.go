package openai

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// TextIndexStride spreads the Responses API's text indexes over
// Event.Index: the text of content part c of output item o is at
// o*TextIndexStride + c, so text of different parts or items is never
// merged.
const TextIndexStride = 1000

// itemProvider is the Provider of the unknown items and blocks this
// adapter records, whatever its configured name.
const itemProvider = "openai"

// The Responses stream events the normalizer reads; any other event is
// emitted as an EventOther and otherwise ignored.
const (
	evCreated          = "response.created"
	evInProgress       = "response.in_progress"
	evQueued           = "response.queued"
	evItemAdded        = "response.output_item.added"
	evItemDone         = "response.output_item.done"
	evPartAdded        = "response.content_part.added"
	evPartDone         = "response.content_part.done"
	evTextDelta        = "response.output_text.delta"
	evTextDone         = "response.output_text.done"
	evRefusalDelta     = "response.refusal.delta"
	evRefusalDone      = "response.refusal.done"
	evArgsDelta        = "response.function_call_arguments.delta"
	evArgsDone         = "response.function_call_arguments.done"
	evCompleted        = "response.completed"
	evIncomplete       = "response.incomplete"
	evFailed           = "response.failed"
	evError            = "error"
	evUnnamed          = "unknown" // the Type of an event without a type
	partRefusal        = "refusal"
	itemMessage        = "message"
	itemFunctionCall   = "function_call"
	itemReasoning      = "reasoning"
	incompleteUnstated = "unknown" // the reason of an incomplete response that gives none
)

// responsesStream is the state of one Responses stream: what its events
// said so far, output item by output index.
type responsesStream struct {
	provider   string
	emit       func(providers.Event) error
	rawRequest json.RawMessage
	id, model  string
	outputs    map[int]*outputSlot
	// terminal is the type of the event that ended the response
	// (evCompleted, evIncomplete, evFailed or evError), "" before it.
	terminal string
	// rawResponse is the latest response object: the terminal event's,
	// else the latest created or in_progress one.
	rawResponse json.RawMessage
	incomplete  string // incomplete_details.reason
	// errCode and errMessage are the failed response's error, or the
	// error event's.
	errCode, errMessage string
	usage               *providers.Usage
}

// outputSlot accumulates one output item.
type outputSlot struct {
	itemType     string
	callID, name string
	parts        map[int]*textPart // by content index
	args         strings.Builder   // function call arguments deltas
	argsDone     *string           // from function_call_arguments.done
	// done is the whole item, from output_item.done or the terminal
	// response's output; it wins over the deltas.
	done json.RawMessage
}

// textPart accumulates one content part of a message.
type textPart struct {
	refusal bool
	text    strings.Builder
	final   *string // from output_text.done, refusal.done or content_part.done
}

func newResponsesStream(provider string, emit func(providers.Event) error) *responsesStream {
	return &responsesStream{provider: provider, emit: emit, outputs: map[int]*outputSlot{}}
}

// setRawRequest keeps body, the request as sent (see providers.SentJSON).
func (s *responsesStream) setRawRequest(body []byte) {
	s.rawRequest = providers.SentJSON(s.rawRequest, body)
}

// responsesEvent is one streamed Responses event. The per-token ones
// (text, refusal and argument deltas) are decoded as responsesDelta with
// encoding/json; the others, a handful per response, as the SDK's union,
// whose decoder costs several times as much (BenchmarkStream).
type responsesEvent struct {
	delta *responsesDelta
	sdk   responses.ResponseStreamEventUnion
	raw   json.RawMessage // the event, compacted
}

// responsesDelta is a response.output_text.delta, response.refusal.delta
// or response.function_call_arguments.delta event.
type responsesDelta struct {
	Type         string `json:"type"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
}

func (e *responsesEvent) UnmarshalJSON(data []byte) error {
	var d responsesDelta
	if json.Unmarshal(data, &d) == nil && (d.Type == evTextDelta || d.Type == evRefusalDelta || d.Type == evArgsDelta) {
		e.delta = &d
	} else if err := json.Unmarshal(data, &e.sdk); err != nil {
		return err
	}
	e.raw = providers.CompactJSON(data)
	return nil
}

// event takes in one stream event, emits it, and reports whether it
// ended the response. It fails only when emit does.
func (s *responsesStream) event(e responsesEvent) (end bool, err error) {
	if d := e.delta; d != nil {
		out := providers.Event{Kind: providers.EventOther, Type: d.Type, Raw: e.raw}
		if d.Type == evArgsDelta {
			s.slot(d.OutputIndex).args.WriteString(d.Delta)
			return false, s.emit(out)
		}
		p := s.slot(d.OutputIndex).part(d.ContentIndex)
		p.refusal = d.Type == evRefusalDelta
		p.text.WriteString(d.Delta)
		if d.Delta != "" {
			out.Kind, out.Index, out.Text = providers.EventTextDelta, d.OutputIndex*TextIndexStride+d.ContentIndex, d.Delta
		}
		return false, s.emit(out)
	}
	return s.sdkEvent(e.sdk, e.raw)
}

// sdkEvent is event for the events decoded as the SDK's union.
func (s *responsesStream) sdkEvent(ev responses.ResponseStreamEventUnion, raw json.RawMessage) (end bool, err error) {
	typ := ev.Type
	if typ == "" {
		typ = evUnnamed
	}
	out := providers.Event{Kind: providers.EventOther, Type: typ, Raw: raw}
	oi, ci := int(ev.OutputIndex), int(ev.ContentIndex)
	switch ev.Type {
	case evCreated, evInProgress, evQueued:
		s.setResponse(ev.Response)
	case evItemAdded:
		s.slot(oi).added(ev.Item)
	case evPartAdded:
		s.slot(oi).part(ci).refusal = ev.Part.Type == partRefusal
	case evTextDelta, evRefusalDelta:
		p := s.slot(oi).part(ci)
		p.refusal = ev.Type == evRefusalDelta
		p.text.WriteString(ev.Delta)
		if ev.Delta != "" {
			out.Kind, out.Index, out.Text = providers.EventTextDelta, oi*TextIndexStride+ci, ev.Delta
		}
	case evTextDone:
		s.slot(oi).part(ci).setFinal(ev.Text)
	case evRefusalDone:
		s.slot(oi).part(ci).setFinal(ev.Refusal)
	case evPartDone:
		p := s.slot(oi).part(ci)
		if ev.Part.Type == partRefusal {
			p.refusal = true
			p.setFinal(ev.Part.Refusal)
		} else {
			p.setFinal(ev.Part.Text)
		}
	case evArgsDelta:
		s.slot(oi).args.WriteString(ev.Delta)
	case evArgsDone:
		args := ev.Arguments
		s.slot(oi).argsDone = &args
	case evItemDone:
		sl := s.slot(oi)
		sl.added(ev.Item)
		sl.done = providers.CompactJSON([]byte(ev.Item.RawJSON()))
		if sl.done != nil && sl.itemType != itemMessage { // a message's text has been streamed
			if items := sl.items(oi); len(items) == 1 {
				out.Kind, out.Index, out.Item = providers.EventItem, oi, items[0]
			}
		}
	case evCompleted, evIncomplete, evFailed:
		s.end(ev.Type, ev.Response)
		end = true
	case evError:
		s.terminal = evError
		s.errCode, s.errMessage = ev.Code, ev.Message
		end = true
	default:
		out.Unhandled = true
	}
	return end, s.emit(out)
}

// setResponse records a response object from the stream.
func (s *responsesStream) setResponse(r responses.Response) {
	if c := providers.CompactJSON([]byte(r.RawJSON())); c != nil {
		s.rawResponse = c
	}
	if r.ID != "" {
		s.id = r.ID
	}
	if r.Model != "" {
		s.model = string(r.Model)
	}
}

// end records the terminal response: its status details, usage, and the
// output items no output_item.done event gave.
func (s *responsesStream) end(terminal string, r responses.Response) {
	s.terminal = terminal
	s.setResponse(r)
	s.incomplete = r.IncompleteDetails.Reason
	s.errCode, s.errMessage = string(r.Error.Code), r.Error.Message
	if r.JSON.Usage.Valid() {
		s.usage = &providers.Usage{InputTokens: int(r.Usage.InputTokens), OutputTokens: int(r.Usage.OutputTokens),
			CacheReadTokens: int(r.Usage.InputTokensDetails.CachedTokens)}
	}
	for i, it := range r.Output {
		sl := s.slot(i)
		if sl.done == nil {
			sl.added(it)
			sl.done = providers.CompactJSON([]byte(it.RawJSON()))
		}
	}
}

// slot returns the state of output item idx, created on first use.
func (s *responsesStream) slot(idx int) *outputSlot {
	sl, ok := s.outputs[idx]
	if !ok {
		sl = &outputSlot{parts: map[int]*textPart{}}
		s.outputs[idx] = sl
	}
	return sl
}

// added records what an output item says of itself.
func (sl *outputSlot) added(it responses.ResponseOutputItemUnion) {
	if it.Type != "" {
		sl.itemType = it.Type
	}
	if it.CallID != "" {
		sl.callID = it.CallID
	}
	if it.Name != "" {
		sl.name = it.Name
	}
}

// part returns the state of content part idx, created on first use.
func (sl *outputSlot) part(idx int) *textPart {
	p, ok := sl.parts[idx]
	if !ok {
		p = &textPart{}
		sl.parts[idx] = p
	}
	return p
}

func (p *textPart) setFinal(text string) { p.final = &text }

// String is the part's text: its final text when it came, else the
// deltas.
func (p *textPart) String() string {
	if p.final != nil {
		return *p.final
	}
	return p.text.String()
}

// arguments is the function call's arguments text: from
// function_call_arguments.done when it came, else the deltas.
func (sl *outputSlot) arguments() string {
	if sl.argsDone != nil {
		return *sl.argsDone
	}
	return sl.args.String()
}

// items returns the transcript items of output item idx: from the whole
// item when it came, else from its deltas (a message's text, a function
// call's arguments). A message without text, a function call without a
// name, and a partial item of another kind give none.
func (sl *outputSlot) items(idx int) messages.Items {
	if sl.done != nil {
		if it := sl.doneItem(idx); it != nil {
			return messages.Items{it}
		}
		return nil
	}
	switch sl.itemType {
	case itemFunctionCall:
		if call, ok := sl.toolCall(idx, ""); ok {
			return messages.Items{call}
		}
	case itemMessage, "":
		var blocks messages.Blocks
		for _, ci := range sortedKeys(sl.parts) {
			if text := sl.parts[ci].String(); text != "" {
				blocks = append(blocks, messages.Text{Text: text})
			}
		}
		if len(blocks) > 0 {
			return messages.Items{messages.AssistantMessage{Blocks: blocks}}
		}
	}
	return nil
}

// toolCall returns the function call item, its arguments args or, when
// empty, those streamed. A call without a call id takes the item's id,
// else one made from idx; ok is false when it has no name.
func (sl *outputSlot) toolCall(idx int, args string) (messages.ToolCall, bool) {
	if sl.name == "" {
		return messages.ToolCall{}, false
	}
	if args == "" {
		args = sl.arguments()
	}
	id := sl.callID
	if id == "" {
		id = "call_" + strconv.Itoa(idx)
	}
	return toolCallItem(id, sl.name, args), true
}

// doneItem maps a whole output item: a message to an AssistantMessage
// (output_text and refusal parts as Text blocks, other parts as Unknown
// blocks), a function call to a ToolCall, reasoning to a ReasoningItem,
// and any other object to an UnknownItem kept to be sent back. It
// returns nil for an item that gives nothing.
func (sl *outputSlot) doneItem(idx int) messages.TranscriptItem {
	f, ok := fields(sl.done)
	if !ok {
		return nil
	}
	switch str(f, "type") {
	case itemMessage:
		var parts []json.RawMessage
		_ = json.Unmarshal(f["content"], &parts)
		var blocks messages.Blocks
		for _, raw := range parts {
			if b := contentBlock(raw); b != nil {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			return nil
		}
		return messages.AssistantMessage{Blocks: blocks}
	case itemFunctionCall:
		args := str(f, "arguments")
		if args == "" && len(f["arguments"]) > 0 && f["arguments"][0] == '{' {
			args = string(providers.CompactJSON(f["arguments"])) // an object, not the usual string
		}
		if id := str(f, "id"); sl.callID == "" && id != "" {
			sl.callID = id
		}
		if call, ok := sl.toolCall(idx, args); ok {
			return call
		}
		return nil
	case itemReasoning:
		r := messages.ReasoningItem{Raw: sl.done}
		if enc := str(f, "encrypted_content"); enc != "" {
			r.EncryptedContent = &enc
		}
		return r
	default:
		return messages.UnknownItem{Provider: itemProvider, Raw: sl.done}
	}
}

// contentBlock maps a content part of an output message: output_text to
// Text with its annotations, refusal to Text, any other object to an
// Unknown block; nil for an empty text or a part that is not an object.
func contentBlock(raw json.RawMessage) messages.ContentBlock {
	f, ok := fields(raw)
	if !ok {
		return nil
	}
	switch str(f, "type") {
	case "output_text":
		t := messages.Text{Text: str(f, "text")}
		var anns []json.RawMessage
		if json.Unmarshal(f["annotations"], &anns) == nil {
			for _, a := range anns {
				if c := providers.CompactJSON(a); c != nil {
					t.Annotations = append(t.Annotations, c)
				}
			}
		}
		if t.Text == "" {
			return nil
		}
		return t
	case partRefusal:
		if text := str(f, "refusal"); text != "" {
			return messages.Text{Text: text}
		}
		return nil
	default:
		return messages.Unknown{Provider: itemProvider, Raw: providers.CompactJSON(raw)}
	}
}

// fields decodes a JSON object's fields; ok is false when raw is not one.
func fields(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil || f == nil {
		return nil, false
	}
	return f, true
}

// str returns field key of f when it is a JSON string, else "".
func str(f map[string]json.RawMessage, key string) string {
	var s string
	if json.Unmarshal(f[key], &s) != nil {
		return ""
	}
	return s
}

// items returns the response items in output order, then the response id
// as Metadata{Key: "response_id"}.
func (s *responsesStream) items() messages.Items {
	var items messages.Items
	for _, idx := range sortedKeys(s.outputs) {
		items = append(items, s.outputs[idx].items(idx)...)
	}
	if s.id != "" {
		items = append(items, messages.Metadata{Key: "response_id", Value: s.id})
	}
	return items
}

// finish ends a stream whose terminal event came, mapping it to the
// outcome: completed is Completed, or Paused{tool_use} when the output
// holds function calls; incomplete is Incomplete with the reason given
// ("max_output_tokens", "content_filter"…; "unknown" when none); failed
// and an error event are Failed with a *providers.Error.
func (s *responsesStream) finish() (providers.Response, error) {
	switch s.terminal {
	case evCompleted:
		items := s.items()
		outcome := messages.StepOutcome{Kind: messages.OutcomeCompleted}
		for _, it := range items {
			if _, ok := it.(messages.ToolCall); ok {
				outcome = pausedToolUse
				break
			}
		}
		return s.responseWith(items, outcome), nil
	case evIncomplete:
		reason := s.incomplete
		if reason == "" {
			reason = incompleteUnstated
		}
		return s.response(messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: reason}), nil
	case evFailed, evError:
		msg := s.errMessage
		if msg == "" {
			msg = "the response failed"
			if s.terminal == evError {
				msg = "error event in the stream"
			}
		}
		perr := failureError(s.provider, s.errCode, "", msg, nil)
		return s.fail(providers.OutcomeCode(perr), perr), perr
	default:
		perr := &providers.Error{Provider: s.provider, Code: "stream_incomplete",
			Message: "stream ended before the response completed", Retryable: true}
		return s.fail(perr.Code, perr), perr
	}
}

// response returns the response for what arrived, with outcome.
func (s *responsesStream) response(outcome messages.StepOutcome) providers.Response {
	return s.responseWith(s.items(), outcome)
}

func (s *responsesStream) responseWith(items messages.Items, outcome messages.StepOutcome) providers.Response {
	resp := providers.Response{
		Items:       items,
		Outcome:     outcome,
		Model:       s.model,
		RawRequest:  s.rawRequest,
		RawResponse: s.rawResponse,
	}
	if s.usage != nil {
		resp.Usage = *s.usage
	}
	return resp
}

func (s *responsesStream) cancelled() providers.Response {
	return s.response(messages.StepOutcome{Kind: messages.OutcomeCancelled})
}

// fail returns the response for what arrived with outcome Failed.
func (s *responsesStream) fail(code string, err error) providers.Response {
	return s.response(providers.FailedOutcome(code, err))
}

func (s *responsesStream) emitFailed(err error) (providers.Response, error) {
	outcome, err := providers.EmitFailed(s.provider, err)
	return s.response(outcome), err
}
