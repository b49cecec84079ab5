// Package retrieval turns committed turns into chunks and, in later
// steps, embeds, indexes and searches them (SRD §8, §9).
package retrieval

import (
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// Chunk is a piece of one turn's text, ready to be stored and indexed.
type Chunk struct {
	Type     messages.ChunkType
	Text     string
	Start    int // byte offset in the source text
	TokenEst int
}

// MaxChunkTokens is the upper bound of a chunk (SRD §9.1: 200–800 tokens).
const MaxChunkTokens = 800

// EstimateTokens is the runtime's rough token estimate: a quarter of the
// bytes, at least one for non-empty text.
func EstimateTokens(s string) int {
	if s == "" {
		return 0
	}
	return (len(s) + 3) / 4
}

// ChunkText splits the text of one message into chunks: at code fences
// (a fenced block is a Code chunk), then at headings and blank lines,
// packing paragraphs up to MaxChunkTokens. role decides the type of prose:
// UserContext for the user, Explanation (or Decision when it reads as one)
// for the assistant. The result is deterministic.
func ChunkText(role messages.Role, text string) []Chunk {
	var out []Chunk
	prose := messages.ChunkExplanation
	if role == messages.RoleUser {
		prose = messages.ChunkUserContext
	}
	emit := func(t messages.ChunkType, s string, start int) {
		if strings.TrimSpace(s) == "" {
			return
		}
		out = append(out, Chunk{Type: t, Text: s, Start: start, TokenEst: EstimateTokens(s)})
	}
	pos := 0
	for pos < len(text) {
		open := strings.Index(text[pos:], "```")
		if open < 0 {
			packProse(text[pos:], pos, prose, emit)
			break
		}
		packProse(text[pos:pos+open], pos, prose, emit)
		start := pos + open
		end := strings.Index(text[start+3:], "```")
		if end < 0 {
			emit(messages.ChunkCode, text[start:], start)
			break
		}
		stop := start + 3 + end + 3
		splitLong(text[start:stop], start, messages.ChunkCode, emit)
		pos = stop
	}
	return out
}

func packProse(s string, base int, t messages.ChunkType, emit func(messages.ChunkType, string, int)) {
	var cur strings.Builder
	curStart := base
	flush := func() {
		typ := t
		if t == messages.ChunkExplanation && decisionWords(cur.String()) {
			typ = messages.ChunkDecision
		}
		splitLong(cur.String(), curStart, typ, emit)
		cur.Reset()
	}
	off := 0
	for _, para := range strings.SplitAfter(s, "\n\n") {
		heading := strings.HasPrefix(strings.TrimSpace(para), "#")
		if cur.Len() > 0 && (heading || EstimateTokens(cur.String()+para) > MaxChunkTokens) {
			flush()
		}
		if cur.Len() == 0 {
			curStart = base + off
		}
		cur.WriteString(para)
		off += len(para)
	}
	if cur.Len() > 0 {
		flush()
	}
}

// splitLong cuts a run longer than MaxChunkTokens at line breaks.
func splitLong(s string, base int, t messages.ChunkType, emit func(messages.ChunkType, string, int)) {
	limit := MaxChunkTokens * 4
	for len(s) > limit {
		cut := strings.LastIndex(s[:limit], "\n")
		if cut <= 0 {
			cut = limit
		}
		emit(t, s[:cut], base)
		s, base = s[cut:], base+cut
	}
	emit(t, s, base)
}

func decisionWords(s string) bool {
	l := strings.ToLower(s)
	for _, w := range []string{"we decided", "decision:", "let's go with", "we will use", "agreed"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// ChunkToolResult splits the text of a tool's result into ToolResult
// chunks of at most MaxChunkTokens, at line breaks; label (the tool's
// name, say) heads each so that a chunk says what it is. Start is the
// byte offset in text.
func ChunkToolResult(label, text string) []Chunk {
	var out []Chunk
	splitLong(text, 0, messages.ChunkToolResult, func(t messages.ChunkType, s string, start int) {
		if strings.TrimSpace(s) == "" {
			return
		}
		if label != "" {
			s = label + ": " + s
		}
		out = append(out, Chunk{Type: t, Text: s, Start: start, TokenEst: EstimateTokens(s)})
	})
	return out
}
