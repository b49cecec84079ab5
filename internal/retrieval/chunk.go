// Package retrieval turns committed turns into chunks, embeds them and
// searches them: a vector index and a full-text (BM25) index merged by a
// hybrid ranker with MMR (SRD §8, §9).
package retrieval

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/tokens"
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

// ChunkText is ChunkTextWith with no overlap.
func ChunkText(role messages.Role, text string) []Chunk { return ChunkTextWith(role, text, 0) }

// MaxOverlapTokens bounds ChunkTextWith's overlap.
const MaxOverlapTokens = 200

// ChunkTextWith splits the text of one message into chunks: at code
// fences (a fenced block is a Code chunk; one longer than MaxChunkTokens
// is cut at function boundaries where it has them, else at line breaks),
// then at headings and blank lines, packing paragraphs up to
// MaxChunkTokens. role decides the type of prose: UserContext for the
// user, Explanation (or Decision when it reads as one) for the
// assistant. When a run was cut only for its size (not at a heading or a
// fence), the next chunk repeats about overlap tokens of the one before
// it, from a word boundary (SRD §9.1's optional overlap; 0 for none, at
// most MaxOverlapTokens). The result is deterministic.
func ChunkTextWith(role messages.Role, text string, overlap int) []Chunk {
	out := chunkText(role, text)
	if overlap <= 0 {
		return out
	}
	overlap = min(overlap, MaxOverlapTokens)
	for i := 1; i < len(out); i++ {
		prev, c := out[i-1], &out[i]
		if prev.Type != c.Type || prev.Start+len(prev.Text) != c.Start || strings.HasPrefix(strings.TrimSpace(c.Text), "#") {
			continue // a section, fence or type boundary: nothing to carry over
		}
		from := max(len(prev.Text)-4*overlap, 0)
		if j := strings.IndexAny(prev.Text[from:], " \n\t"); from > 0 && j >= 0 {
			from += j + 1
		}
		carried := prev.Text[from:]
		c.Text, c.Start = carried+c.Text, c.Start-len(carried)
		c.TokenEst = tokens.Estimate.Count(c.Text)
	}
	return out
}

func chunkText(role messages.Role, text string) []Chunk {
	var out []Chunk
	prose := messages.ChunkExplanation
	if role == messages.RoleUser {
		prose = messages.ChunkUserContext
	}
	emit := func(t messages.ChunkType, s string, start int) {
		if strings.TrimSpace(s) == "" {
			return
		}
		out = append(out, Chunk{Type: t, Text: s, Start: start, TokenEst: tokens.Estimate.Count(s)})
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
		if cur.Len() > 0 && (heading || tokens.Estimate.Count(cur.String()+para) > MaxChunkTokens) {
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

// funcStart matches a line that starts a function, method or type in the
// usual languages: where a long code block is best cut.
var funcStart = regexp.MustCompile(`(?m)^[ \t]*(?:func|def|class|fn|function|pub fn|async def|async function|public|private|protected|static|interface|type|impl|struct|module|sub)\b`)

// splitLong cuts a run longer than MaxChunkTokens: code at the last
// function boundary that leaves the piece at least a quarter full, else
// at a line break; anything else at a line break.
func splitLong(s string, base int, t messages.ChunkType, emit func(messages.ChunkType, string, int)) {
	limit := MaxChunkTokens * 4
	for len(s) > limit {
		cut := -1
		if t == messages.ChunkCode {
			for _, m := range funcStart.FindAllStringIndex(s[:limit], -1) {
				if m[0] >= limit/4 {
					cut = m[0]
				}
			}
		}
		if cut <= 0 {
			cut = strings.LastIndex(s[:limit], "\n")
		}
		if cut <= 0 {
			cut = limit
		}
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++ // never inside a rune
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
		out = append(out, Chunk{Type: t, Text: s, Start: start, TokenEst: tokens.Estimate.Count(s)})
	})
	return out
}
