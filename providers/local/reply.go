package local

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/contextinfinity/ctxinf/messages"
)

// Snippet lengths, in characters, of the texts Reply quotes.
const (
	userSnippet    = 80
	pendingSnippet = 40
)

// Reply returns the local provider's reply to c, a report of what c holds:
//
//	[local] I received your message (3 words): "What is next?". Context:
//	1 pinned fact, summary of 12 tokens, 4 window messages, 2 pending
//	turns, 0 retrieved chunks. Pending turns: #1 "Rename the flag" #2
//	"Add a test".
//
// (on one line). Quoted texts, written as by %q, have their runs of white
// space folded into one space and are cut after 80 characters for the user's message and 40
// for each pending user message, with "…" marking the cut. The summary's
// size is estimated as in Estimate. The same c always gives the same reply.
func Reply(c messages.AssembledContext) string {
	user := messageText(c.User)
	pending := pendingUsers(c)
	var b strings.Builder
	fmt.Fprintf(&b, "[local] I received your message (%s): %q. ",
		count(len(strings.Fields(user)), "word"), snippet(user, userSnippet))
	fmt.Fprintf(&b, "Context: %s, summary of %s, %s, %s, %s.",
		count(len(c.PinnedFacts), "pinned fact"),
		count(textTokens(c.Summary), "token"),
		count(len(c.Window), "window message"),
		count(len(pending), "pending turn"),
		count(len(c.Retrieved), "retrieved chunk"))
	if len(pending) > 0 {
		b.WriteString(" Pending turns:")
		for i, m := range pending {
			fmt.Fprintf(&b, " #%d %q", i+1, snippet(messageText(m), pendingSnippet))
		}
		b.WriteString(".")
	}
	return b.String()
}

// Tokens splits s into word-sized tokens: each is a run of non-space
// characters with the white space that follows it; the first also takes
// any white space s starts with, and a string of white space alone is one
// token. Concatenated in order they give s exactly; the empty string has
// no tokens.
func Tokens(s string) []string {
	var toks []string
	start, word, prevSpace := 0, false, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space {
			if prevSpace && word {
				toks = append(toks, s[start:i])
				start = i
			}
			word = true
		}
		prevSpace = space
	}
	if start < len(s) {
		toks = append(toks, s[start:])
	}
	return toks
}

// pendingUsers returns the user messages among c's pending turns, in order:
// one per pending turn.
func pendingUsers(c messages.AssembledContext) []messages.Message {
	var users []messages.Message
	for _, m := range c.Pending {
		if m.Role == messages.RoleUser {
			users = append(users, m)
		}
	}
	return users
}

// messageText returns the text a reader sees in m: its RenderedText, or
// when that is empty the text of its blocks.
func messageText(m messages.Message) string {
	if m.RenderedText != "" {
		return m.RenderedText
	}
	return m.Blocks.RenderedText()
}

// snippet returns s with its runs of white space folded into one space,
// cut after n characters with "…" marking the cut.
func snippet(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return strings.TrimRight(s[:i], " ") + "…"
}

// count returns "1 noun" or "n nouns".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
