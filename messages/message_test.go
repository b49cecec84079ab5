package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
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
		{Message{Role: RoleUser, RenderedText: "hi", Speaker: "Caroline", Time: time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)},
			`{"role":"user","blocks":[],"rendered_text":"hi","speaker":"Caroline","time":"2023-05-08T13:56:00Z"}`},
		{Message{Role: RoleUser, Time: time.Date(2023, 5, 8, 13, 56, 0, 500, time.UTC)},
			`{"role":"user","blocks":[],"rendered_text":"","time":"2023-05-08T13:56:00.0000005Z"}`},
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

// A time keeps its offset through a round trip, byte for byte.
func TestMessageTimeOffset(t *testing.T) {
	in := `{"role":"user","blocks":[],"rendered_text":"","time":"2023-05-08T13:56:00+02:00"}`
	var m Message
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2023, 5, 8, 11, 56, 0, 0, time.UTC); !m.Time.Equal(want) {
		t.Errorf("time = %v, want %v", m.Time, want)
	}
	if out, err := m.MarshalJSON(); err != nil || string(out) != in {
		t.Errorf("MarshalJSON = %s, %v, want %s", out, err, in)
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
		{`{"role":"user","time":"8 May 2023"}`, `field "time" is invalid: "8 May 2023" is not an RFC 3339 time`, ErrInvalidMessage},
		{`{"role":"user","time":7}`, `field "time" is invalid`, ErrInvalidMessage},
		{`{"role":"user","speaker":"a\nb"}`, `field "speaker" is invalid: holds control character U+000A`, ErrInvalidMessage},
		{`{"role":"user","speaker":"` + strings.Repeat("x", MaxSpeakerBytes+1) + `"}`, `field "speaker" is invalid: 257 bytes, limit 256`, ErrInvalidMessage},
	}
	for _, tc := range tests {
		var m Message
		err := m.UnmarshalJSON([]byte(tc.in))
		if !errors.Is(err, ErrInvalidMessage) || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UnmarshalJSON(%s) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
	for _, m := range []Message{{}, {Role: RoleUser, Blocks: Blocks{Image{}}}, {Role: RoleUser, Speaker: "\x00"},
		{Role: RoleUser, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}} {
		if got, err := m.MarshalJSON(); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("MarshalJSON(%#v) = %s, %v, want ErrInvalidMessage", m, got, err)
		}
	}
}
