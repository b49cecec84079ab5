package providers

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

func TestNewRedactorRejects(t *testing.T) {
	long := strings.Repeat("a", MaxRedactPatternBytes+1)
	many := make([]RedactRule, MaxRedactRules+1)
	for i := range many {
		many[i] = RedactRule{Pattern: "x"}
	}
	for _, tc := range []struct {
		rules []RedactRule
		want  string
	}{
		{[]RedactRule{{Pattern: "ok"}, {Pattern: "(unclosed"}}, "rule 1: pattern: error parsing regexp"},
		{[]RedactRule{{Pattern: ""}}, "rule 0: pattern: must not be empty"},
		{[]RedactRule{{Pattern: "a*"}}, `rule 0: pattern: "a*" matches the empty string`},
		{[]RedactRule{{Pattern: long}}, "rule 0: pattern: 1025 bytes, at most 1024"},
		{[]RedactRule{{Pattern: "x", Replacement: long}}, "rule 0: replacement: 1025 bytes, at most 1024"},
		{many, "101 rules, at most 100"},
	} {
		_, err := NewRedactor(tc.rules)
		if !errors.Is(err, ErrBadRedactRule) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRedactor(%.40v) = %v, want ErrBadRedactRule containing %q", tc.rules, err, tc.want)
		}
	}
	if r, err := NewRedactor(nil); r != nil || err != nil {
		t.Errorf("NewRedactor(nil) = %v, %v, want nil, nil", r, err)
	}
}

func TestRedactorText(t *testing.T) {
	r, err := NewRedactor([]RedactRule{
		{Pattern: `hunter\d`},
		{Pattern: `(card) \d{4}-\d{4}`, Replacement: "$1 ####"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"pw hunter2 and hunter3": "pw [redacted] and [redacted]",
		"my card 1234-5678.":     "my card ####.",
		"nothing here":           "nothing here",
	} {
		if got := r.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	var none *Redactor
	if got := none.Text("hunter2"); got != "hunter2" {
		t.Errorf("nil Text = %q", got)
	}
}

func TestRedactorJSONKeepsStructure(t *testing.T) {
	r, _ := NewRedactor([]RedactRule{{Pattern: `hunter2`, Replacement: `"quoted\"`}})
	for in, want := range map[string]string{
		`{"q": "pw hunter2",  "n": 12}`:       `{"q": "pw \"quoted\\\"",  "n": 12}`,
		`"{\"city\":\"hunter2\"}"`:            `"{\"city\":\"\"quoted\\\"\"}"`,
		`{"esc\"aped": ["a", "x hunter2 y"]}`: `{"esc\"aped": ["a", "x \"quoted\\\" y"]}`,
		`{"clean": true}`:                     `{"clean": true}`,
	} {
		got := r.JSON(json.RawMessage(in))
		if string(got) != want || !json.Valid(got) {
			t.Errorf("JSON(%s) = %s (valid %v), want %s", in, got, json.Valid(got), want)
		}
	}
}

// Every text of a context the model receives is redacted; the context
// given is not changed in place.
func TestRedactorContext(t *testing.T) {
	r, _ := NewRedactor([]RedactRule{{Pattern: `SECRET-\d+`}})
	user := messages.NewMessage(messages.RoleUser, messages.Text{Text: "user SECRET-1"})
	win := []messages.Message{messages.NewMessage(messages.RoleAssistant, messages.Text{Text: "win SECRET-2"},
		messages.ToolUse{ToolUseID: "t", Name: "f", Input: json.RawMessage(`{"a":"SECRET-3"}`)},
		messages.ToolResult{ToolUseID: "t", Content: messages.Blocks{messages.Text{Text: "out SECRET-4"}}})}
	ac := messages.AssembledContext{
		SystemInstructions: "sys SECRET-5", PinnedFacts: []string{"pin SECRET-6", "clean"}, Summary: "sum SECRET-7",
		Window: win, Pending: []messages.Message{messages.NewMessage(messages.RoleUser, messages.Text{Text: "pend SECRET-8"})},
		Retrieved: []messages.RetrievedChunk{{Text: "ret SECRET-9"}}, User: user,
		Continuation: messages.Items{messages.ToolCall{CallID: "c", Name: "f", Arguments: json.RawMessage(`"{\"k\":\"SECRET-10\"}"`)},
			messages.ToolOutput{CallID: "c", Output: json.RawMessage(`"SECRET-11"`)},
			messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "SECRET-12"}}}},
		Tools: []messages.Tool{{Name: "f", Description: "desc SECRET-13", InputSchema: []byte(`{"description":"SECRET-14"}`)}},
	}
	before, _ := json.Marshal(ac)
	got := r.Context(ac)
	after, _ := json.Marshal(ac)
	if string(before) != string(after) {
		t.Fatalf("Context changed its argument:\n%s\n%s", before, after)
	}
	sent, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sent), "SECRET-") {
		t.Errorf("redacted context still holds a secret: %s", sent)
	}
	if n := strings.Count(string(sent), DefaultReplacement); n < 14 {
		t.Errorf("%d replacements, want at least 14: %s", n, sent)
	}
}
