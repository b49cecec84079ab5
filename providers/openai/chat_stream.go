package openai

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// chatChunk is what the stream reads of a streamed chat completion
// chunk. It is decoded with encoding/json rather than as the SDK's
// ChatCompletionChunk, whose decoder takes three times as long (19 µs a
// chunk against 6.6 with the compaction, BenchmarkChatChunkDecode on the
// dev VM), once for every streamed token.
type chatChunk struct {
	ID      string            `json:"id"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   json.RawMessage   `json:"usage"`
	raw     json.RawMessage   // the chunk, compacted
}

type chatChunkChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content   string              `json:"content"`
		Refusal   string              `json:"refusal"`
		ToolCalls []chatChunkToolCall `json:"tool_calls"`
	} `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type chatChunkToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatUsage is the usage a chunk may carry (stream_options.include_usage).
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"` // part of PromptTokens
	} `json:"prompt_tokens_details"`
}

func (c *chatChunk) UnmarshalJSON(data []byte) error {
	type plain chatChunk
	if err := json.Unmarshal(data, (*plain)(c)); err != nil {
		return err
	}
	c.raw = providers.CompactJSON(data)
	return nil
}

// chatStream is the state of one Chat Completions stream: what the
// chunks said so far.
type chatStream struct {
	provider   string
	emit       func(providers.Event) error
	rawRequest json.RawMessage
	id, model  string
	choices    map[int]*choice
	usage      json.RawMessage // the last usage a chunk carried
}

// choice accumulates one choice of the completion.
type choice struct {
	text    strings.Builder
	calls   map[int]*toolCall // by tool call index
	finish  string
	emitted bool // its tool call items have been emitted
}

// toolCall accumulates one tool call, its arguments split across deltas.
type toolCall struct {
	id, name string
	args     strings.Builder
}

func newChatStream(provider string, emit func(providers.Event) error) *chatStream {
	return &chatStream{provider: provider, emit: emit, choices: map[int]*choice{}}
}

// setRawRequest keeps body, the request as sent (see providers.SentJSON).
func (s *chatStream) setRawRequest(body []byte) {
	s.rawRequest = providers.SentJSON(s.rawRequest, body)
}

// chunk takes in one streamed chunk and emits its events. It fails only
// when emit does.
func (s *chatStream) chunk(c chatChunk) error {
	raw := c.raw
	if c.ID != "" {
		s.id = c.ID
	}
	if c.Model != "" {
		s.model = c.Model
	}
	if u := providers.CompactJSON(c.Usage); u != nil && string(u) != "null" {
		s.usage = u
	}
	texts := 0
	var finished []int
	for _, ch := range c.Choices {
		idx := ch.Index
		st := s.choice(idx)
		text := ch.Delta.Content + ch.Delta.Refusal
		if text != "" {
			st.text.WriteString(text)
			texts++
			if err := s.emit(providers.Event{Kind: providers.EventTextDelta, Index: idx, Text: text, Type: EventChunk, Raw: raw}); err != nil {
				return err
			}
		}
		for _, d := range ch.Delta.ToolCalls {
			st.addToolCall(d)
		}
		if ch.FinishReason != "" {
			st.finish = ch.FinishReason
			finished = append(finished, idx)
		}
	}
	if texts == 0 {
		if err := s.emit(providers.Event{Kind: providers.EventOther, Type: EventChunk, Raw: raw}); err != nil {
			return err
		}
	}
	for _, idx := range finished {
		if err := s.emitToolCalls(idx); err != nil {
			return err
		}
	}
	return nil
}

// choice returns the state of choice idx, created on first use.
func (s *chatStream) choice(idx int) *choice {
	st, ok := s.choices[idx]
	if !ok {
		st = &choice{calls: map[int]*toolCall{}}
		s.choices[idx] = st
	}
	return st
}

// addToolCall merges one tool call delta into the call at its index.
func (c *choice) addToolCall(d chatChunkToolCall) {
	idx := d.Index
	tc, ok := c.calls[idx]
	if !ok {
		tc = &toolCall{}
		c.calls[idx] = tc
	}
	if d.ID != "" {
		tc.id = d.ID
	}
	if d.Function.Name != "" {
		tc.name = d.Function.Name
	}
	tc.args.WriteString(d.Function.Arguments)
}

// emitToolCalls emits an EventItem for each tool call of the finished
// choice idx, once.
func (s *chatStream) emitToolCalls(idx int) error {
	st := s.choices[idx]
	if st == nil || st.emitted {
		return nil
	}
	st.emitted = true
	for _, call := range st.toolCalls(idx) {
		raw, err := messages.MarshalItem(call)
		if err != nil {
			continue // cannot happen: toolCalls returns valid items
		}
		if err := s.emit(providers.Event{Kind: providers.EventItem, Index: idx, Item: call, Type: EventToolCall, Raw: raw}); err != nil {
			return err
		}
	}
	return nil
}

// toolCalls returns the choice's tool calls as items, by tool call index.
// A call without an id gets one made from the indexes; a call without a
// name is left out, as it cannot be run or sent back.
func (c *choice) toolCalls(choiceIdx int) []messages.ToolCall {
	var out []messages.ToolCall
	for _, i := range sortedKeys(c.calls) {
		tc := c.calls[i]
		if tc.name == "" {
			continue
		}
		id := tc.id
		if id == "" {
			id = "call_" + strconv.Itoa(choiceIdx) + "_" + strconv.Itoa(i)
		}
		out = append(out, toolCallItem(id, tc.name, tc.args.String()))
	}
	return out
}

// items returns the response items: per choice in index order, its text
// as an assistant message, then its tool calls.
func (s *chatStream) items() messages.Items {
	var items messages.Items
	for _, idx := range sortedKeys(s.choices) {
		st := s.choices[idx]
		if text := st.text.String(); text != "" {
			items = append(items, messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: text}}})
		}
		for _, call := range st.toolCalls(idx) {
			items = append(items, call)
		}
	}
	return items
}

// finish ends a stream that closed normally: it maps the finish reasons
// to the outcome, or fails when a choice never got one.
func (s *chatStream) finish() (providers.Response, error) {
	if len(s.choices) == 0 {
		err := s.dropped("stream ended without any choice")
		return s.fail(err.Code, err), err
	}
	for _, idx := range sortedKeys(s.choices) {
		if s.choices[idx].finish == "" {
			err := s.dropped(fmt.Sprintf("stream ended before choice %d finished", idx))
			return s.fail(err.Code, err), err
		}
	}
	return s.response(s.outcome()), nil
}

// dropped is the error of a stream cut off before its end.
func (s *chatStream) dropped(msg string) *providers.Error {
	return &providers.Error{Provider: s.provider, Code: "stream_incomplete", Message: msg, Retryable: true}
}

// outcome maps the finish reasons of all choices to the step's outcome;
// the most pressing wins: tool use, then a cut, then completion.
func (s *chatStream) outcome() messages.StepOutcome {
	var incomplete *messages.StepOutcome
	for _, idx := range sortedKeys(s.choices) {
		switch r := s.choices[idx].finish; r {
		case "stop":
		case "tool_calls", "function_call":
			return pausedToolUse
		case "length":
			incomplete = outcomeOnce(incomplete, "max_output_tokens")
		default: // "content_filter", or one this adapter does not know
			incomplete = outcomeOnce(incomplete, r)
		}
	}
	if incomplete != nil {
		return *incomplete
	}
	return messages.StepOutcome{Kind: messages.OutcomeCompleted}
}

// outcomeOnce returns o, or when nil an Incomplete outcome for reason.
func outcomeOnce(o *messages.StepOutcome, reason string) *messages.StepOutcome {
	if o != nil {
		return o
	}
	return &messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: reason}
}

// response returns the response for what arrived, with outcome.
func (s *chatStream) response(outcome messages.StepOutcome) providers.Response {
	resp := providers.Response{
		Items:       s.items(),
		Outcome:     outcome,
		Model:       s.model,
		RawRequest:  s.rawRequest,
		RawResponse: s.rawResponse(),
	}
	var u chatUsage
	if s.usage != nil && json.Unmarshal(s.usage, &u) == nil {
		resp.Usage = providers.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
			CacheReadTokens: u.PromptTokensDetails.CachedTokens}
	}
	return resp
}

func (s *chatStream) cancelled() providers.Response {
	return s.response(messages.StepOutcome{Kind: messages.OutcomeCancelled})
}

// fail returns the response for what arrived with outcome Failed.
func (s *chatStream) fail(code string, err error) providers.Response {
	return s.response(providers.FailedOutcome(code, err))
}

func (s *chatStream) emitFailed(err error) (providers.Response, error) {
	outcome, err := providers.EmitFailed(s.provider, err)
	return s.response(outcome), err
}

// responseSummary is the RawResponse of a step.
type responseSummary struct {
	ID      string          `json:"id,omitempty"`
	Model   string          `json:"model,omitempty"`
	Choices []choiceSummary `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type choiceSummary struct {
	Index        int    `json:"index"`
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason,omitempty"`
	ToolCalls    int    `json:"tool_calls,omitempty"`
}

func (s *chatStream) rawResponse() json.RawMessage {
	sum := responseSummary{ID: s.id, Model: s.model, Choices: []choiceSummary{}}
	for _, idx := range sortedKeys(s.choices) {
		st := s.choices[idx]
		sum.Choices = append(sum.Choices, choiceSummary{
			Index: idx, Text: st.text.String(), FinishReason: st.finish, ToolCalls: len(st.calls),
		})
	}
	sum.Usage = s.usage
	data, err := json.Marshal(sum)
	if err != nil {
		return nil
	}
	return data
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
