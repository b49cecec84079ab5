package providers

import (
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// UntrustedPreamble introduces the retrieved chunks at the start of the
// user message (messages.MemoryPreamble).
const UntrustedPreamble = messages.MemoryPreamble

// MemoryEnd closes the retrieved memory that starts a user message
// (MemoryText), before the user's own words (messages.MemoryEnd).
const MemoryEnd = messages.MemoryEnd

// The layout of a request puts what stays the same from one request of a
// conversation to the next first, so that a provider's prompt cache can
// reuse it: the system prompt (the instructions, the pinned facts, then
// the summary, which changes only when turns are folded into it), the
// verbatim window and pending turns (which only grow between folds), and
// last what is new to each request: the retrieved memory, at the start
// of the new user message (Conversation), and the user's words.

// SystemText is the system prompt of a request made from c: the
// instructions, the pinned facts and the summary, in that order, each
// section present only when not empty and sections separated by a blank
// line (SystemParts joined). It is "" when every section is empty.
// Adapters send it where their API takes a system prompt (a system
// message, Anthropic's top-level system); it is never part of
// Conversation. The retrieved memory is not in it: it changes with every
// request, so it starts the user message instead (MemoryText).
func SystemText(c messages.AssembledContext) string {
	stable, summary := SystemParts(c)
	switch {
	case stable == "":
		return summary
	case summary == "":
		return stable
	}
	return stable + "\n\n" + summary
}

// SystemParts is SystemText in two parts, where a prompt cache
// breakpoint may go between them: stable, the instructions and pinned
// facts, which change only when the client's system prompt or the pins
// do; and summary, the summary section, which changes at each fold.
// Either is "" when its sections are empty.
func SystemParts(c messages.AssembledContext) (stable, summary string) {
	var sections []string
	if s := strings.TrimSpace(c.SystemInstructions); s != "" {
		sections = append(sections, s)
	}
	if len(c.PinnedFacts) > 0 {
		var b strings.Builder
		b.WriteString("Pinned facts (always true for this conversation):")
		for _, f := range c.PinnedFacts {
			b.WriteString("\n- ")
			b.WriteString(f)
		}
		sections = append(sections, b.String())
	}
	if s := strings.TrimSpace(c.Summary); s != "" {
		summary = "Summary of the earlier conversation:\n" + s
	}
	return strings.Join(sections, "\n\n"), summary
}

// MemoryText is the retrieved memory of c as it starts the new user
// message (Conversation puts it there, a blank line before the user's
// words): messages.MemoryText of its chunks, which the assembler counts
// (UntrustedPreamble, each chunk fenced in a <memory_artifact> element
// labelled untrusted, and MemoryEnd). It is "" when c has no retrieved
// chunks.
func MemoryText(c messages.AssembledContext) string {
	return messages.MemoryText(c.Retrieved)
}
