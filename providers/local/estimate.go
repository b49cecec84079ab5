package local

import (
	"unicode/utf8"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// perMessage is the tokens Estimate adds for each message and continuation
// item: the role and separators a real prompt wraps around it.
const perMessage = 4

// Estimate returns a rough count of the tokens c takes up in a prompt:
// one token per four characters (runes), rounded up, over all the text in
// c, plus four per message. It is the local provider's prompt size and a
// stand-in for providers without a tokenizer; it is not meant to match any
// real tokenizer.
//
// The text counted is the system instructions, the pinned facts, the
// summary, every window, pending and user message, the retrieved chunks,
// the continuation items, and the tools' names, descriptions and input
// schemas. In a message it is the text, tool uses' names and inputs, tool
// results' content, reasoning summaries and unknown blocks' raw JSON (a
// message without blocks counts its RenderedText); in a continuation item, assistant messages'
// blocks, tool calls' names and arguments, tool outputs and unknown items'
// raw JSON. Encrypted reasoning and metadata count nothing. An image
// (in a message or a tool result) counts providers.ImageTokens, as the
// model APIs charge for images by their size, not their bytes. The
// messages are the window, pending and user messages and the continuation
// items.
func Estimate(c messages.AssembledContext) int {
	chars := runes(c.SystemInstructions) + runes(c.Summary)
	for _, f := range c.PinnedFacts {
		chars += runes(f)
	}
	msgs := 1 + len(c.Window) + len(c.Pending) + len(c.Continuation)
	chars += messageChars(c.User)
	for _, m := range c.Window {
		chars += messageChars(m)
	}
	for _, m := range c.Pending {
		chars += messageChars(m)
	}
	for _, r := range c.Retrieved {
		chars += runes(r.Text)
	}
	for _, it := range c.Continuation {
		chars += itemChars(it)
	}
	for _, t := range c.Tools {
		chars += runes(t.Name) + runes(t.Description) + utf8.RuneCount(t.InputSchema)
	}
	images := blocksImageTokens(c.User.Blocks)
	for _, m := range c.Window {
		images += blocksImageTokens(m.Blocks)
	}
	for _, m := range c.Pending {
		images += blocksImageTokens(m.Blocks)
	}
	return ceilDiv(chars, 4) + perMessage*msgs + images
}

// blocksImageTokens is the tokens of the images in bs and in its tool
// results (providers.ImageTokens).
func blocksImageTokens(bs messages.Blocks) int {
	n := 0
	for _, b := range bs {
		switch b := b.(type) {
		case messages.Image:
			n += providers.ImageTokens(b)
		case messages.ToolResult:
			n += blocksImageTokens(b.Content)
		}
	}
	return n
}

// textTokens estimates the tokens of s alone, as Estimate counts text.
func textTokens(s string) int { return ceilDiv(runes(s), 4) }

func messageChars(m messages.Message) int {
	if len(m.Blocks) == 0 {
		return runes(m.RenderedText)
	}
	return blocksChars(m.Blocks)
}

func blocksChars(bs messages.Blocks) int {
	n := 0
	for _, b := range bs {
		switch b := b.(type) {
		case messages.Text:
			n += runes(b.Text)
		case messages.ToolUse:
			n += runes(b.Name) + utf8.RuneCount(b.Input)
		case messages.ToolResult:
			n += blocksChars(b.Content)
		case messages.Reasoning:
			if b.Summary != nil {
				n += runes(*b.Summary)
			}
		case messages.Unknown:
			n += utf8.RuneCount(b.Raw)
		}
	}
	return n
}

func itemChars(it messages.TranscriptItem) int {
	switch it := it.(type) {
	case messages.AssistantMessage:
		return blocksChars(it.Blocks)
	case messages.ToolCall:
		return runes(it.Name) + utf8.RuneCount(it.Arguments)
	case messages.ToolOutput:
		return utf8.RuneCount(it.Output)
	case messages.UnknownItem:
		return utf8.RuneCount(it.Raw)
	}
	return 0
}

func runes(s string) int { return utf8.RuneCountInString(s) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }
