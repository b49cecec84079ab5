package retrieval

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

// Every chunk is a piece of the text at its offset, at most
// MaxChunkTokens, typed by what it is.
func TestChunkText(t *testing.T) {
	t.Parallel()
	text := "# Plan\n\nWe decided to use Postgres for the ledger.\n\n```go\nfunc main() {}\n```\n\n## Notes\n\nThe cache stays in Redis."
	got := ChunkText(messages.RoleAssistant, text)
	var kinds []string
	for _, c := range got {
		if text[c.Start:c.Start+len(c.Text)] != c.Text {
			t.Errorf("chunk %q is not the text at offset %d", c.Text, c.Start)
		}
		kinds = append(kinds, c.Type.String())
	}
	if want := "decision code explanation"; strings.Join(kinds, " ") != want {
		t.Errorf("chunk types %v, want %s", kinds, want)
	}
	if c := ChunkText(messages.RoleUser, "hello there"); len(c) != 1 || c[0].Type != messages.ChunkUserContext {
		t.Errorf("a user message: %+v", c)
	}
	if c := ChunkText(messages.RoleUser, " \n\n "); len(c) != 0 {
		t.Errorf("blank text gave %+v", c)
	}
}

// A long code block is cut where a function starts, and no chunk is over
// the limit.
func TestChunkLongCodeAtFunctions(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("```go\n")
	for i := range 60 {
		fmt.Fprintf(&b, "func f%d(x int) int {\n\t// %s\n\treturn x + %d\n}\n\n", i, strings.Repeat("step ", 20), i)
	}
	b.WriteString("```")
	text := b.String()
	got := ChunkText(messages.RoleAssistant, text)
	if len(got) < 3 {
		t.Fatalf("%d chunks for %d bytes of code", len(got), len(text))
	}
	for i, c := range got {
		if c.Type != messages.ChunkCode || len(c.Text) > MaxChunkTokens*4 || text[c.Start:c.Start+len(c.Text)] != c.Text {
			t.Errorf("chunk %d: type %s, %d bytes, at %d", i, c.Type, len(c.Text), c.Start)
		}
		if i > 0 && !strings.HasPrefix(c.Text, "func f") {
			t.Errorf("chunk %d does not start at a function: %.30q", i, c.Text)
		}
	}
}

// With overlap, a chunk cut for its size repeats the end of the one
// before it from a word boundary; a new section does not.
func TestChunkOverlap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "sentence number %d about the migration. ", i)
	}
	b.WriteString("\n\n# Next section\n\nshort words here")
	text := b.String()
	plain := ChunkText(messages.RoleUser, text)
	over := ChunkTextWith(messages.RoleUser, text, 50)
	if len(plain) != len(over) || len(plain) < 3 {
		t.Fatalf("%d chunks without overlap, %d with", len(plain), len(over))
	}
	for i := range over {
		c := over[i]
		if text[c.Start:c.Start+len(c.Text)] != c.Text {
			t.Errorf("chunk %d is not the text at its offset", i)
		}
		carried := len(c.Text) - len(plain[i].Text)
		switch {
		case i == 0 || strings.HasPrefix(c.Text, "# Next"):
			if carried != 0 {
				t.Errorf("chunk %d carries %d bytes over a section start", i, carried)
			}
		case carried < 150 || carried > 200:
			t.Errorf("chunk %d carries %d bytes, want about 50 tokens", i, carried)
		case !strings.HasSuffix(over[i-1].Text, c.Text[:carried]) || text[c.Start-1] != ' ':
			t.Errorf("chunk %d does not start with the end of chunk %d at a word", i, i-1)
		}
	}
}

func TestChunkToolResult(t *testing.T) {
	t.Parallel()
	got := ChunkToolResult("result of grep", "line one\nline two")
	if len(got) != 1 || got[0].Type != messages.ChunkToolResult || got[0].Text != "result of grep: line one\nline two" {
		t.Errorf("ChunkToolResult = %+v", got)
	}
	long := ChunkToolResult("", strings.Repeat("row of output\n", 600))
	for _, c := range long {
		if len(c.Text) > MaxChunkTokens*4 {
			t.Errorf("a tool-result chunk of %d bytes", len(c.Text))
		}
	}
	if len(long) < 2 {
		t.Errorf("%d chunks of a long result", len(long))
	}
}
