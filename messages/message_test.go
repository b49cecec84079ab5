package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestNewMessage(t *testing.T) {
	m := NewMessage(RoleAssistant,
		Reasoning{Summary: ptr("thinking")},
		Text{Text: "Use "},
		Text{Text: "grep", Annotations: []json.RawMessage{raw(`{}`)}},
		ToolUse{ToolUseID: "t", Name: "grep", Input: raw(`{}`)},
		Text{Text: "."},
	)
	if m.Role != RoleAssistant || len(m.Blocks) != 5 || m.RenderedText != "Use grep." {
		t.Errorf("NewMessage(...) = %#v, want role assistant, 5 blocks, rendered text %q", m, "Use grep.")
	}
	if m := NewMessage(RoleUser); m.Blocks != nil || m.RenderedText != "" {
		t.Errorf("NewMessage(RoleUser) = %#v, want no blocks and no text", m)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	tests := []struct {
		msg  Message
		json string
	}{
		{NewMessage(RoleUser, Text{Text: "Hi <there>"}),
			`{"role":"user","blocks":[{"type":"text","text":"Hi <there>"}],"rendered_text":"Hi <there>"}`},
		{Message{Role: RoleAssistant},
			`{"role":"assistant","blocks":[],"rendered_text":""}`},
		{Message{Role: RoleAssistant, Blocks: Blocks{Unknown{Provider: "anthropic", Raw: raw(`{"type":"redacted_thinking","data":"Emw"}`)}}, RenderedText: "kept as stored"},
			`{"role":"assistant","blocks":[{"type":"unknown","provider":"anthropic","raw":{"type":"redacted_thinking","data":"Emw"}}],"rendered_text":"kept as stored"}`},
	}
	for _, tc := range tests {
		got, err := tc.msg.MarshalJSON()
		if err != nil || string(got) != tc.json {
			t.Errorf("MarshalJSON(%#v) = %s, %v, want %s", tc.msg, got, err, tc.json)
			continue
		}
		var back Message
		if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, tc.msg) {
			t.Errorf("json.Unmarshal(%s) = %#v, %v, want %#v", got, back, err, tc.msg)
		}
	}
}

// TestMessageKeepsNestedUnknown checks that an unknown block inside a tool
// result inside a message survives decoding and encoding byte for byte.
func TestMessageKeepsNestedUnknown(t *testing.T) {
	const unknown = `{ "type": "web_search_result",  "url": "https://a.example/?q=<a>&b",
		"page_age": null, "n": [1.50, 2e3 ] }`
	in := `{"rendered_text": "", "role" : "user", "blocks": [
		{"type": "tool_result", "tool_use_id": "srvtoolu_1", "content": [` + unknown + `]}
	]}`
	// Through encoding/json, inside a struct of the caller's.
	var turn struct{ Message Message }
	if err := json.Unmarshal([]byte(`{"Message":`+in+`}`), &turn); err != nil {
		t.Fatalf("json.Unmarshal = %v", err)
	}
	m := turn.Message
	want := Message{Role: RoleUser, Blocks: Blocks{ToolResult{ToolUseID: "srvtoolu_1", Content: Blocks{Unknown{Raw: raw(unknown)}}}}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("json.Unmarshal(%s) = %#v, want %#v", in, m, want)
	}
	out, err := m.MarshalJSON()
	if err != nil || !bytes.Contains(out, []byte(unknown)) {
		t.Fatalf("MarshalJSON() = %s, %v, want it to hold %s", out, err, unknown)
	}
	wantOut := `{"role":"user","blocks":[{"type":"tool_result","tool_use_id":"srvtoolu_1","content":[` + unknown + `]}],"rendered_text":""}`
	if string(out) != wantOut {
		t.Errorf("MarshalJSON() = %s, want %s", out, wantOut)
	}
}

func TestMessageErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
		is   error
	}{
		{`{"role":"system","blocks":[]}`, `field "role" is invalid: messages: unknown value: role "system"`, ErrUnknownValue},
		{`{"blocks":[]}`, `field "role" is required`, ErrInvalidMessage},
		{`{"role":"user","blocks":[{"type":"tool_use"}]}`, `field "blocks" is invalid: block 0: messages: invalid content block: tool_use: field "tool_use_id" is required`, ErrInvalidBlock},
		{`{"role":"user","rendered_text":1}`, `field "rendered_text" is invalid`, ErrInvalidMessage},
		{`[]`, `not a JSON object`, ErrInvalidMessage},
	}
	for _, tc := range tests {
		var m Message
		err := m.UnmarshalJSON([]byte(tc.in))
		if !errors.Is(err, ErrInvalidMessage) || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UnmarshalJSON(%s) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
	for _, m := range []Message{{}, {Role: RoleUser, Blocks: Blocks{Image{}}}} {
		if got, err := m.MarshalJSON(); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("MarshalJSON(%#v) = %s, %v, want ErrInvalidMessage", m, got, err)
		}
	}
}
