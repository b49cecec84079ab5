package providers

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/contextinfinity/ctxinf/messages"
)

// MissingResultText is the output given to a tool call that has no
// recorded result when a request is built (a parse_only call, or one cut
// off by a crash the store has not yet mended): providers reject a tool
// call left unanswered, so every call is answered.
const MissingResultText = "error: no result was recorded for this tool call; it was not executed or its result was lost"

// SegmentKind says who sends a segment of the conversation.
type SegmentKind int

// The kinds of segment.
const (
	// SegmentUser is a user message: text, images, unknown blocks.
	SegmentUser SegmentKind = iota + 1
	// SegmentAssistant is a model message: text, reasoning, tool uses.
	SegmentAssistant
	// SegmentToolResults holds the results (ToolResult blocks) of the
	// tool uses of the assistant segment just before it, every one
	// answered, in the order the results were recorded.
	SegmentToolResults
)

// Segment is a run of blocks sent by one party, in provider order.
type Segment struct {
	Kind   SegmentKind
	Blocks messages.Blocks
	// New marks the segments of the user message and the continuation
	// of its tool loop: what the previous request of the conversation
	// did not hold. The segments before the first New one are the
	// history, the part of the request a prompt cache may reuse.
	New bool
}

// Conversation lays out c's messages as the segments a provider request
// is made of: the window, the pending turns, the user message and the
// continuation of the current tool loop, in that order. The system text
// (instructions, pinned facts, summary) is not part of it. The retrieved
// memory (MemoryText) starts the user message, as a text block of its
// own before the user's blocks ending in a blank line: it is new to each
// request, so everything before it can be the same as in the request
// before (see SystemText).
//
// A message is split at its tool results, so a reply that holds a whole
// tool loop becomes assistant, results, assistant… segments. The layout
// is always valid for a provider: every tool use is answered in the
// results segment right after it (a missing result becomes an error
// result holding MissingResultText), results that answer no tool use of
// the segment before them are left out, and empty history messages are
// skipped. The last user message is always present, even when empty.
//
// A request that defines no tools (SendsTools is false) may hold no tool
// blocks either (Anthropic rejects them, OpenAI-compatible servers' chat
// templates may), so then tool uses and results are written as text: see
// ToolsAsText.
func Conversation(c messages.AssembledContext) []Segment {
	var segs []Segment
	for _, m := range c.Window {
		segs = appendMessage(segs, m, false, false)
	}
	for _, m := range c.Pending {
		segs = appendMessage(segs, m, false, false)
	}
	segs = appendMessage(segs, withMemory(c.User, MemoryText(c)), true, true)
	if len(c.Continuation) > 0 {
		segs = appendBlocks(segs, SegmentAssistant, messages.ItemBlocks(c.Continuation), false, true)
	}
	segs = pairToolResults(segs)
	if !SendsTools(c) {
		segs = ToolsAsText(segs)
	}
	return segs
}

// SendsTools says whether a request for c defines tools: the tool mode is
// enabled or parse_only and there is at least one tool.
func SendsTools(c messages.AssembledContext) bool {
	return (c.ToolMode == messages.ToolsEnabled || c.ToolMode == messages.ToolsParseOnly) && len(c.Tools) > 0
}

// ToolsAsText writes the tool uses and results of segs as text blocks,
// "[tool call ID: NAME ARGUMENTS]" and "[tool result ID: TEXT]" (or
// "[tool error ID: TEXT]"); a results segment becomes a user segment.
func ToolsAsText(segs []Segment) []Segment {
	out := make([]Segment, 0, len(segs))
	for _, s := range segs {
		blocks := make(messages.Blocks, 0, len(s.Blocks))
		for _, b := range s.Blocks {
			switch b := b.(type) {
			case messages.ToolUse:
				blocks = append(blocks, messages.Text{Text: "[tool call " + b.ToolUseID + ": " + b.Name + " " + string(ArgumentsObject(b.Input)) + "]"})
			case messages.ToolResult:
				kind := "result"
				if b.IsError {
					kind = "error"
				}
				blocks = append(blocks, messages.Text{Text: "[tool " + kind + " " + b.ToolUseID + ": " + ResultText(b) + "]"})
			default:
				blocks = append(blocks, b)
			}
		}
		kind := s.Kind
		if kind == SegmentToolResults {
			kind = SegmentUser
		}
		out = append(out, Segment{Kind: kind, Blocks: blocks, New: s.New})
	}
	return out
}

// withMemory is the user message m with the retrieved memory text
// memory (MemoryText) as its first block, a blank line after it; m when
// memory is "".
func withMemory(m messages.Message, memory string) messages.Message {
	if memory == "" {
		return m
	}
	blocks := m.Blocks
	if len(blocks) == 0 && m.RenderedText != "" {
		blocks = messages.Blocks{messages.Text{Text: m.RenderedText}}
	}
	m.Blocks = append(messages.Blocks{messages.Text{Text: memory + "\n\n"}}, blocks...)
	m.RenderedText = m.Blocks.RenderedText()
	return m
}

// appendMessage appends m's segments to segs, marked new when isNew.
func appendMessage(segs []Segment, m messages.Message, keepEmpty, isNew bool) []Segment {
	kind := SegmentUser
	if m.Role == messages.RoleAssistant {
		kind = SegmentAssistant
	}
	blocks := m.Blocks
	if len(blocks) == 0 && m.RenderedText != "" {
		blocks = messages.Blocks{messages.Text{Text: m.RenderedText}}
	}
	return appendBlocks(segs, kind, blocks, keepEmpty, isNew)
}

// appendBlocks appends blocks sent by kind, split at tool results, the
// segments marked new when isNew.
func appendBlocks(segs []Segment, kind SegmentKind, blocks messages.Blocks, keepEmpty, isNew bool) []Segment {
	var run messages.Blocks
	runKind := kind
	flush := func() {
		if len(run) > 0 && (runKind == SegmentToolResults || !emptyBlocks(run)) {
			segs = append(segs, Segment{Kind: runKind, Blocks: run, New: isNew})
		}
		run = nil
	}
	for _, b := range blocks {
		k := kind
		if _, ok := b.(messages.ToolResult); ok {
			k = SegmentToolResults
		}
		if k != runKind {
			flush()
			runKind = k
		}
		run = append(run, b)
	}
	flush()
	if keepEmpty && (len(segs) == 0 || segs[len(segs)-1].Kind != kind) {
		segs = append(segs, Segment{Kind: kind, Blocks: messages.Blocks{messages.Text{}}, New: isNew})
	}
	return segs
}

// emptyBlocks reports whether bs holds nothing but empty text.
func emptyBlocks(bs messages.Blocks) bool {
	for _, b := range bs {
		if t, ok := b.(messages.Text); !ok || t.Text != "" {
			return false
		}
	}
	return true
}

// pairToolResults makes every tool use answered by the results segment
// right after its assistant segment, and drops results that answer none.
func pairToolResults(in []Segment) []Segment {
	out := make([]Segment, 0, len(in))
	for i := 0; i < len(in); i++ {
		s := in[i]
		if s.Kind == SegmentToolResults {
			continue // orphan results: their assistant segment did not claim them
		}
		out = append(out, s)
		var uses []string
		for _, b := range s.Blocks {
			if u, ok := b.(messages.ToolUse); ok && s.Kind == SegmentAssistant {
				uses = append(uses, u.ToolUseID)
			}
		}
		if len(uses) == 0 {
			continue
		}
		var results messages.Blocks
		answered := map[string]bool{}
		for i+1 < len(in) && in[i+1].Kind == SegmentToolResults {
			i++
			for _, b := range in[i].Blocks {
				r := b.(messages.ToolResult)
				if !answered[r.ToolUseID] && slices.Contains(uses, r.ToolUseID) {
					answered[r.ToolUseID] = true
					results = append(results, r)
				}
			}
		}
		for _, id := range uses {
			if !answered[id] {
				answered[id] = true
				results = append(results, messages.ToolResult{ToolUseID: id, IsError: true,
					Content: messages.Blocks{messages.Text{Text: MissingResultText}}})
			}
		}
		out = append(out, Segment{Kind: SegmentToolResults, Blocks: results, New: s.New})
	}
	return out
}

// ArgumentsText returns a tool call's arguments as the text a model
// wrote: adapters record streamed arguments as a JSON string holding that
// text, returned unquoted; arguments recorded as a JSON object (or any
// other value) give their compact JSON text; none give "{}".
func ArgumentsText(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// ArgumentsObject returns a tool call's arguments as a JSON object, for
// APIs whose tool input is one (Anthropic's tool_use input): the
// arguments text when it is a JSON object, {} when there is none, and
// otherwise the text kept whole as {"arguments": text}.
func ArgumentsObject(raw json.RawMessage) json.RawMessage {
	text := ArgumentsText(raw)
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &obj) == nil && obj != nil {
		var b bytes.Buffer
		if json.Compact(&b, []byte(text)) == nil {
			return b.Bytes()
		}
	}
	if text == "" {
		return json.RawMessage(`{}`)
	}
	out, _ := json.Marshal(map[string]string{"arguments": text})
	return out
}

// ResultText returns the text of a tool result's content blocks, for APIs
// whose tool output is a string.
func ResultText(r messages.ToolResult) string {
	return r.Content.RenderedText()
}
