package providers_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

func text(s string) messages.Text { return messages.Text{Text: s} }

// kinds lists the segment kinds and, for tool results, their ids and
// whether they are errors.
func layout(segs []providers.Segment) []string {
	var out []string
	for _, s := range segs {
		switch s.Kind {
		case providers.SegmentUser:
			out = append(out, "user:"+s.Blocks.RenderedText())
		case providers.SegmentAssistant:
			l := "assistant:" + s.Blocks.RenderedText()
			for _, b := range s.Blocks {
				if u, ok := b.(messages.ToolUse); ok {
					l += "+use(" + u.ToolUseID + ")"
				}
			}
			out = append(out, l)
		case providers.SegmentToolResults:
			l := "results:"
			for _, b := range s.Blocks {
				r := b.(messages.ToolResult)
				l += r.ToolUseID
				if r.IsError {
					l += "!"
				}
				l += ","
			}
			out = append(out, l)
		}
	}
	return out
}

func TestConversationPairsToolUses(t *testing.T) {
	reply := messages.NewMessage(messages.RoleAssistant,
		text("let me look"),
		messages.ToolUse{ToolUseID: "a", Name: "grep", Input: json.RawMessage(`{"q":"x"}`)},
		messages.ToolUse{ToolUseID: "b", Name: "grep"},
		messages.ToolResult{ToolUseID: "b", Content: messages.Blocks{text("2")}},
		messages.ToolResult{ToolUseID: "zz", Content: messages.Blocks{text("orphan")}},
		text("found it"),
		messages.ToolUse{ToolUseID: "c", Name: "ls"}, // parse_only: never answered
	)
	c := messages.AssembledContext{
		Window: []messages.Message{
			messages.NewMessage(messages.RoleUser, text("find x")),
			reply,
			messages.NewMessage(messages.RoleUser, text("")), // empty history message: skipped
		},
		User: messages.NewMessage(messages.RoleUser, text("and y?")),
		Continuation: messages.Items{
			messages.ToolCall{CallID: "d", Name: "grep", Arguments: json.RawMessage(`"{\"q\":\"y\"}"`)},
			messages.ToolOutput{CallID: "d", Output: json.RawMessage(`"none"`), IsError: true},
		},
		ToolMode: messages.ToolsEnabled,
		Tools:    []messages.Tool{{Name: "grep"}},
	}
	got := layout(providers.Conversation(c))
	want := []string{
		"user:find x",
		"assistant:let me look+use(a)+use(b)",
		"results:b,a!,",
		"assistant:found it+use(c)",
		"results:c!,",
		"user:and y?",
		"assistant:+use(d)",
		"results:d!,",
	}
	if len(got) != len(want) {
		t.Fatalf("layout:\n got %q\nwant %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("segment %d: got %q, want %q\n all: %q", i, got[i], want[i], got)
		}
	}
}

// Without tools in the request, tool uses and results are written as
// text, results in user segments.
func TestConversationWithoutToolsWritesThemAsText(t *testing.T) {
	c := messages.AssembledContext{
		Window: []messages.Message{messages.NewMessage(messages.RoleAssistant,
			messages.ToolUse{ToolUseID: "a", Name: "grep", Input: json.RawMessage(`"{\"q\": 1}"`)},
			messages.ToolResult{ToolUseID: "a", Content: messages.Blocks{text("2 hits")}},
			text("done"))},
		User:     messages.NewMessage(messages.RoleUser, text("next")),
		ToolMode: messages.ToolsEnabled, // but no tools to offer
	}
	got := layout(providers.Conversation(c))
	want := []string{`assistant:[tool call a: grep {"q":1}]`, "user:[tool result a: 2 hits]", "assistant:done", "user:next"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("layout %q, want %q", got, want)
	}
}

func TestConversationKeepsEmptyUser(t *testing.T) {
	segs := providers.Conversation(messages.AssembledContext{})
	if len(segs) != 1 || segs[0].Kind != providers.SegmentUser {
		t.Fatalf("segments %+v, want one user segment", segs)
	}
}

func TestArguments(t *testing.T) {
	cases := []struct{ raw, text, obj string }{
		{``, `{}`, `{}`},
		{`"{\"a\": 1}"`, `{"a": 1}`, `{"a":1}`},
		{`{"a": 1}`, `{"a":1}`, `{"a":1}`},
		{`"not json"`, `not json`, `{"arguments":"not json"}`},
		{`"[1,2]"`, `[1,2]`, `{"arguments":"[1,2]"}`},
	}
	for _, c := range cases {
		if got := providers.ArgumentsText(json.RawMessage(c.raw)); got != c.text {
			t.Errorf("ArgumentsText(%s) = %s, want %s", c.raw, got, c.text)
		}
		if got := string(providers.ArgumentsObject(json.RawMessage(c.raw))); got != c.obj {
			t.Errorf("ArgumentsObject(%s) = %s, want %s", c.raw, got, c.obj)
		}
	}
}
