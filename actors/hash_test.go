package actors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

// randText returns text with what encoding/json escapes in its own ways
// (HTML characters, U+2028, control characters, quotes) now and then.
func randText(r *rand.Rand) string {
	parts := []string{"plain words ", "<b>&amp;</b> ", "\u2028\u2029 ", "tab\tnew\nline ", `"quoted" \back\ `, "zoë café 🙂 ", "\x01\x1f "}
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

func randMessage(r *rand.Rand) messages.Message {
	role := messages.RoleUser
	if r.IntN(2) == 0 {
		role = messages.RoleAssistant
	}
	var blocks []messages.ContentBlock
	for range 1 + r.IntN(3) {
		switch r.IntN(4) {
		case 0:
			blocks = append(blocks, messages.ToolUse{ToolUseID: "call_" + fmt.Sprint(r.IntN(99)), Name: "grep",
				Input: json.RawMessage(`{"q":"<x> & y"}`)})
		case 1:
			blocks = append(blocks, messages.ToolResult{ToolUseID: "call_1", Content: messages.Blocks{messages.Text{Text: randText(r)}},
				IsError: r.IntN(2) == 0})
		default:
			blocks = append(blocks, messages.Text{Text: randText(r)})
		}
	}
	return messages.NewMessage(role, blocks...)
}

func randContext(r *rand.Rand, pool []messages.Message) messages.AssembledContext {
	pick := func() messages.Message { return pool[r.IntN(len(pool))] }
	ac := messages.AssembledContext{SystemInstructions: randText(r), User: pick()}
	if r.IntN(2) == 0 {
		ac.PinnedFacts = []string{randText(r), randText(r)}
	}
	if r.IntN(2) == 0 {
		ac.Summary = randText(r)
	}
	for range r.IntN(6) {
		ac.Window = append(ac.Window, pick())
	}
	for range r.IntN(3) {
		ac.Pending = append(ac.Pending, pick())
	}
	for range r.IntN(3) {
		ac.Retrieved = append(ac.Retrieved, messages.RetrievedChunk{Text: randText(r), Score: r.Float64() * 1e3})
	}
	if r.IntN(3) == 0 {
		ac.Continuation = messages.Items{messages.ToolCall{CallID: "call_1", Name: "grep", Arguments: json.RawMessage(`{"q":"x"}`)},
			messages.ToolOutput{CallID: "call_1", Output: json.RawMessage(`"<3 matches>"`), IsError: r.IntN(2) == 0}}
	}
	if r.IntN(3) == 0 {
		ac.Tools = []messages.Tool{{Name: "grep", Description: randText(r), InputSchema: []byte(`{"type":"object"}`)}}
		ac.ToolMode = messages.ToolsEnabled
	}
	return ac
}

// The bytes hashed with the cache are json.Marshal's, whatever the
// context holds and whichever of its messages the last context had.
func TestContextJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	pool := make([]messages.Message, 12)
	for i := range pool {
		pool[i] = randMessage(r)
	}
	var h contextHasher
	for i := range 2000 {
		if i%50 == 0 {
			pool[r.IntN(len(pool))] = randMessage(r) // a message replaced by another
		}
		ac := randContext(r, pool)
		want, err := json.Marshal(ac)
		if err != nil {
			t.Fatalf("context %d: json.Marshal: %v", i, err)
		}
		var got bytes.Buffer
		err = contextJSON(&got, ac, func(m messages.Message) ([]byte, error) { return json.Marshal(m) })
		if err != nil || got.String() != string(want) {
			t.Fatalf("context %d: contextJSON = %s, %v\nwant %s", i, got.Bytes(), err, want)
		}
		if got, want := h.hash(ac), contextHash(ac); got != want {
			t.Fatalf("context %d: the cached hash %s, want %s", i, got, want)
		}
	}
	if len(h.last) == 0 || len(h.last) > 12 {
		t.Errorf("the cache holds %d messages, want those of the last context only", len(h.last))
	}
}
