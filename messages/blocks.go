package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidBlock is returned when a content block cannot be encoded or
// decoded: it is not a JSON object, lacks a required field, or holds a raw
// value that is not valid JSON.
var ErrInvalidBlock = errors.New("messages: invalid content block")

// ContentBlock is one block of message content (SRD §5.1): Text, ToolUse,
// ToolResult, Image, Reasoning or Unknown. The set is closed.
//
// On the wire a block is a JSON object tagged by "type": "text",
// "tool_use", "tool_result", "image", "reasoning" or "unknown". Optional
// fields are left out when nil, empty or false. Raw JSON fields are written
// byte for byte as they were read.
type ContentBlock interface {
	contentBlock()
}

// Text is visible text, with the provider's annotations (citations and the
// like) kept as raw JSON.
//
//	{"type":"text","text":"Hi","annotations":[{"type":"url_citation"}]}
type Text struct {
	Text        string
	Annotations []json.RawMessage
}

// ToolUse is a request by the model to call a tool. ToolUseID is Claude's
// tool_use id or OpenAI's call_id; ToolUseID and Name are required.
//
//	{"type":"tool_use","tool_use_id":"toolu_1","name":"grep","input":{"q":"x"}}
type ToolUse struct {
	ToolUseID string
	Name      string
	Input     json.RawMessage
}

// ToolResult is the result of the tool call ToolUseID, which is required.
// Content is always written, as [] when empty.
//
//	{"type":"tool_result","tool_use_id":"toolu_1","content":[],"is_error":true}
type ToolResult struct {
	ToolUseID string
	Content   Blocks
	IsError   bool
}

// Image is an image of MediaType, which is required, from Source (the
// provider's base64, URL or file reference).
//
//	{"type":"image","media_type":"image/png","source":{"type":"url","url":"…"}}
type Image struct {
	MediaType string
	Source    json.RawMessage
}

// Reasoning is the model's reasoning: its encrypted form, a summary, and
// the provider's raw item; each may be nil.
//
//	{"type":"reasoning","encrypted_content":"gAAA…","summary":"…","raw":{…}}
type Reasoning struct {
	EncryptedContent *string
	Summary          *string
	Raw              json.RawMessage
}

// Unknown is a block of a kind this package does not know, kept so that it
// can be sent back unchanged.
//
// Decoding a block whose "type" is not one of ours gives an Unknown with an
// empty Provider and Raw holding the input bytes exactly; such an Unknown
// encodes as Raw verbatim. An Unknown made by a provider adapter names the
// provider and encodes wrapped:
//
//	{"type":"unknown","provider":"anthropic","raw":{"type":"thinking",…}}
//
// An Unknown with an empty Provider is also written wrapped when Raw would
// not decode back to it (when Raw's "type" is one of ours, say). Raw must
// be a JSON object.
type Unknown struct {
	Provider string
	Raw      json.RawMessage
}

func (Text) contentBlock()       {}
func (ToolUse) contentBlock()    {}
func (ToolResult) contentBlock() {}
func (Image) contentBlock()      {}
func (Reasoning) contentBlock()  {}
func (Unknown) contentBlock()    {}

// MarshalBlock returns the JSON form of b. It fails with ErrInvalidBlock
// when a required field is empty or a raw field is not valid JSON.
func MarshalBlock(b ContentBlock) ([]byte, error) {
	switch b := b.(type) {
	case Text:
		w := newWriter(scope{ErrInvalidBlock, "text"})
		w.str("text", b.Text)
		w.rawList("annotations", b.Annotations)
		return w.finish()
	case ToolUse:
		w := newWriter(scope{ErrInvalidBlock, "tool_use"})
		w.required("tool_use_id", b.ToolUseID)
		w.required("name", b.Name)
		w.raw("input", b.Input)
		return w.finish()
	case ToolResult:
		w := newWriter(scope{ErrInvalidBlock, "tool_result"})
		w.required("tool_use_id", b.ToolUseID)
		w.blocks("content", b.Content)
		w.boolean("is_error", b.IsError)
		return w.finish()
	case Image:
		w := newWriter(scope{ErrInvalidBlock, "image"})
		w.required("media_type", b.MediaType)
		w.raw("source", b.Source)
		return w.finish()
	case Reasoning:
		w := newWriter(scope{ErrInvalidBlock, "reasoning"})
		w.optStr("encrypted_content", b.EncryptedContent)
		w.optStr("summary", b.Summary)
		w.raw("raw", b.Raw)
		return w.finish()
	case Unknown:
		if b.Provider == "" {
			v, err := UnmarshalBlock(b.Raw)
			if u, ok := v.(Unknown); err == nil && ok && u.Provider == "" && bytes.Equal(u.Raw, b.Raw) {
				return bytes.Clone(b.Raw), nil
			}
		}
		return marshalUnknown(scope{ErrInvalidBlock, "unknown"}, b.Provider, b.Raw)
	case nil:
		return nil, fmt.Errorf("%w: nil block", ErrInvalidBlock)
	default:
		return nil, fmt.Errorf("%w: unsupported type %T", ErrInvalidBlock, b)
	}
}

// UnmarshalBlock decodes the JSON form of a block. A block whose "type" is
// not one of ours decodes as an Unknown holding data exactly.
func UnmarshalBlock(data []byte) (ContentBlock, error) {
	r, err := readObject(scope{sentinel: ErrInvalidBlock}, data)
	if err != nil {
		return nil, err
	}
	var b ContentBlock
	switch r.kind = r.required("type"); r.kind {
	case "":
		return nil, r.err
	case "text":
		b = Text{Text: r.str("text"), Annotations: r.rawList("annotations")}
	case "tool_use":
		b = ToolUse{ToolUseID: r.required("tool_use_id"), Name: r.required("name"), Input: r.raw("input")}
	case "tool_result":
		b = ToolResult{ToolUseID: r.required("tool_use_id"), Content: r.blocks("content"), IsError: r.boolean("is_error")}
	case "image":
		b = Image{MediaType: r.required("media_type"), Source: r.raw("source")}
	case "reasoning":
		b = Reasoning{EncryptedContent: r.optStr("encrypted_content"), Summary: r.optStr("summary"), Raw: r.raw("raw")}
	case "unknown":
		b = Unknown{Provider: r.str("provider"), Raw: r.unknownRaw()}
	default:
		return Unknown{Raw: bytes.Clone(data)}, nil
	}
	if r.err != nil {
		return nil, r.err
	}
	return b, nil
}

// Blocks is a list of content blocks that encodes as a JSON array, for use
// as a field. An empty list encodes as [] and decodes as nil.
//
// encoding/json compacts what MarshalJSON returns, so raw values reach the
// output of json.Marshal unchanged only up to insignificant whitespace and
// HTML escaping; call MarshalJSON directly to keep them byte for byte.
type Blocks []ContentBlock

// MarshalJSON encodes bs as an array of blocks.
func (bs Blocks) MarshalJSON() ([]byte, error) {
	buf := []byte{'['}
	for i, b := range bs {
		data, err := MarshalBlock(b)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", i, err)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, data...)
	}
	return append(buf, ']'), nil
}

// UnmarshalJSON decodes an array of blocks; null decodes as nil.
func (bs *Blocks) UnmarshalJSON(data []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidBlock, err)
	}
	var out Blocks
	for i, raw := range raws {
		b, err := UnmarshalBlock(raw)
		if err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
		out = append(out, b)
	}
	*bs = out
	return nil
}

// RenderedText returns the text a reader sees in bs: the Text of its Text
// blocks concatenated in order with nothing in between (providers split one
// passage into several blocks, around citations for instance). Other kinds,
// including text nested in a ToolResult, are not visible.
func (bs Blocks) RenderedText() string {
	var sb strings.Builder
	for _, b := range bs {
		if t, ok := b.(Text); ok {
			sb.WriteString(t.Text)
		}
	}
	return sb.String()
}

// marshalUnknown writes the wrapped form of an unknown block or item.
func marshalUnknown(s scope, provider string, raw json.RawMessage) ([]byte, error) {
	if !isObject(raw) {
		return nil, s.errorf("raw", "is not a JSON object")
	}
	w := newWriter(s)
	w.str("provider", provider)
	w.raw("raw", raw)
	return w.finish()
}

// unknownRaw returns the "raw" field of a wrapped unknown block or item,
// which must be a JSON object.
func (r *reader) unknownRaw() json.RawMessage {
	raw := r.raw("raw")
	if r.err == nil && !isObject(raw) {
		r.err = r.errorf("raw", "is not a JSON object")
	}
	return raw
}
