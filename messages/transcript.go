package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalidItem is returned when a transcript item cannot be encoded or
// decoded: it is not a JSON object, lacks a required field, or holds a raw
// value that is not valid JSON. Errors in nested blocks wrap
// ErrInvalidBlock as well.
var ErrInvalidItem = errors.New("messages: invalid transcript item")

// TranscriptItem is one item of a provider step's normalized transcript
// (SRD §5.3): AssistantMessage, ToolCall, ToolOutput, ReasoningItem,
// Metadata or UnknownItem. The set is closed.
//
// On the wire an item is a JSON object tagged by "type":
// "assistant_message", "tool_call", "tool_output", "reasoning", "metadata"
// or "unknown". Optional fields are left out when nil. Raw JSON fields are
// written byte for byte as they were read.
type TranscriptItem interface {
	transcriptItem()
}

// AssistantMessage is a message from the model. Blocks is always written,
// as [] when empty.
//
//	{"type":"assistant_message","blocks":[{"type":"text","text":"Hi"}]}
type AssistantMessage struct {
	Blocks Blocks
}

// ToolCall is a call of tool Name; CallID and Name are required.
//
//	{"type":"tool_call","call_id":"call_1","name":"grep","arguments":"{\"q\":\"x\"}"}
type ToolCall struct {
	CallID    string
	Name      string
	Arguments json.RawMessage
}

// ToolOutput is the output of the tool call CallID. IsError marks an
// output that reports a failure (the tool failed, or never ran); it is
// left out of the JSON form when false.
//
//	{"type":"tool_output","call_id":"call_1","output":"3 matches"}
//	{"type":"tool_output","call_id":"call_2","output":"timeout","is_error":true}
type ToolOutput struct {
	CallID  string
	Output  json.RawMessage
	IsError bool
}

// ReasoningItem is the model's reasoning: its encrypted form and the
// provider's raw item; each may be nil.
//
//	{"type":"reasoning","encrypted_content":"gAAA…","raw":{…}}
type ReasoningItem struct {
	EncryptedContent *string
	Raw              json.RawMessage
}

// Metadata is a key and value recorded alongside the transcript.
//
//	{"type":"metadata","key":"response_id","value":"resp_1"}
type Metadata struct {
	Key   string
	Value string
}

// UnknownItem is an item of a kind this package does not know, kept so that
// it can be sent back unchanged. It follows the rules of Unknown: decoding
// an item whose "type" is not one of ours gives an UnknownItem with an
// empty Provider and Raw holding the input bytes exactly, which encodes as
// Raw verbatim; otherwise it is written wrapped:
//
//	{"type":"unknown","provider":"openai","raw":{"type":"web_search_call",…}}
//
// Raw must be a JSON object.
type UnknownItem struct {
	Provider string
	Raw      json.RawMessage
}

func (AssistantMessage) transcriptItem() {}
func (ToolCall) transcriptItem()         {}
func (ToolOutput) transcriptItem()       {}
func (ReasoningItem) transcriptItem()    {}
func (Metadata) transcriptItem()         {}
func (UnknownItem) transcriptItem()      {}

// MarshalItem returns the JSON form of it. It fails with ErrInvalidItem
// when a required field is empty or a raw field is not valid JSON.
func MarshalItem(it TranscriptItem) ([]byte, error) {
	switch it := it.(type) {
	case AssistantMessage:
		w := newWriter(scope{ErrInvalidItem, "assistant_message"})
		w.blocks("blocks", it.Blocks)
		return w.finish()
	case ToolCall:
		w := newWriter(scope{ErrInvalidItem, "tool_call"})
		w.required("call_id", it.CallID)
		w.required("name", it.Name)
		w.raw("arguments", it.Arguments)
		return w.finish()
	case ToolOutput:
		w := newWriter(scope{ErrInvalidItem, "tool_output"})
		w.str("call_id", it.CallID)
		w.raw("output", it.Output)
		w.boolean("is_error", it.IsError)
		return w.finish()
	case ReasoningItem:
		w := newWriter(scope{ErrInvalidItem, "reasoning"})
		w.optStr("encrypted_content", it.EncryptedContent)
		w.raw("raw", it.Raw)
		return w.finish()
	case Metadata:
		w := newWriter(scope{ErrInvalidItem, "metadata"})
		w.str("key", it.Key)
		w.str("value", it.Value)
		return w.finish()
	case UnknownItem:
		if it.Provider == "" {
			v, err := UnmarshalItem(it.Raw)
			if u, ok := v.(UnknownItem); err == nil && ok && u.Provider == "" && bytes.Equal(u.Raw, it.Raw) {
				return bytes.Clone(it.Raw), nil
			}
		}
		return marshalUnknown(scope{ErrInvalidItem, "unknown"}, it.Provider, it.Raw)
	case nil:
		return nil, fmt.Errorf("%w: nil item", ErrInvalidItem)
	default:
		return nil, fmt.Errorf("%w: unsupported type %T", ErrInvalidItem, it)
	}
}

// UnmarshalItem decodes the JSON form of an item. An item whose "type" is
// not one of ours decodes as an UnknownItem holding data exactly.
func UnmarshalItem(data []byte) (TranscriptItem, error) {
	r, err := readObject(scope{sentinel: ErrInvalidItem}, data)
	if err != nil {
		return nil, err
	}
	var it TranscriptItem
	switch r.kind = r.required("type"); r.kind {
	case "":
		return nil, r.err
	case "assistant_message":
		it = AssistantMessage{Blocks: r.blocks("blocks")}
	case "tool_call":
		it = ToolCall{CallID: r.required("call_id"), Name: r.required("name"), Arguments: r.raw("arguments")}
	case "tool_output":
		it = ToolOutput{CallID: r.str("call_id"), Output: r.raw("output"), IsError: r.boolean("is_error")}
	case "reasoning":
		it = ReasoningItem{EncryptedContent: r.optStr("encrypted_content"), Raw: r.raw("raw")}
	case "metadata":
		it = Metadata{Key: r.str("key"), Value: r.str("value")}
	case "unknown":
		it = UnknownItem{Provider: r.str("provider"), Raw: r.unknownRaw()}
	default:
		return UnknownItem{Raw: bytes.Clone(data)}, nil
	}
	if r.err != nil {
		return nil, r.err
	}
	return it, nil
}

// Items is a list of transcript items that encodes as a JSON array, for use
// as a field. An empty list encodes as [] and decodes as nil. As with
// Blocks, call MarshalJSON directly to keep raw values byte for byte.
type Items []TranscriptItem

// MarshalJSON encodes its as an array of items.
func (its Items) MarshalJSON() ([]byte, error) {
	buf := []byte{'['}
	for i, it := range its {
		data, err := MarshalItem(it)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, data...)
	}
	return append(buf, ']'), nil
}

// UnmarshalJSON decodes an array of items; null decodes as nil.
func (its *Items) UnmarshalJSON(data []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidItem, err)
	}
	var out Items
	for i, raw := range raws {
		it, err := UnmarshalItem(raw)
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		out = append(out, it)
	}
	*its = out
	return nil
}

// ItemBlocks returns the content blocks that record items in a message:
// an assistant message gives its blocks, a tool call a ToolUse (its
// arguments as Input, as recorded), a tool output a ToolResult with the
// output as text (a JSON string's contents, other JSON as its text),
// reasoning a Reasoning block and an unknown item an Unknown block.
// Metadata has no block and is left out.
func ItemBlocks(items Items) Blocks {
	var out Blocks
	for _, it := range items {
		switch it := it.(type) {
		case AssistantMessage:
			out = append(out, it.Blocks...)
		case ToolCall:
			out = append(out, ToolUse{ToolUseID: it.CallID, Name: it.Name, Input: it.Arguments})
		case ToolOutput:
			out = append(out, ToolResult{ToolUseID: it.CallID, IsError: it.IsError,
				Content: Blocks{Text{Text: outputText(it.Output)}}})
		case ReasoningItem:
			out = append(out, Reasoning{EncryptedContent: it.EncryptedContent, Raw: it.Raw})
		case UnknownItem:
			out = append(out, Unknown(it))
		}
	}
	return out
}

// outputText is a tool output as text: a JSON string's contents, any other
// JSON value as its text.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
