package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// itemCases pairs each kind of item with its JSON form.
var itemCases = []struct {
	name string
	item TranscriptItem
	json string
}{
	{"assistant_message",
		AssistantMessage{Blocks: Blocks{Text{Text: "Hi"}, Unknown{Raw: raw(`{"type":"refusal", "refusal":"no"}`)}}},
		`{"type":"assistant_message","blocks":[{"type":"text","text":"Hi"},{"type":"refusal", "refusal":"no"}]}`},
	{"assistant_message/empty", AssistantMessage{}, `{"type":"assistant_message","blocks":[]}`},
	{"tool_call",
		ToolCall{CallID: "call_1", Name: "get_weather", Arguments: raw(`"{\"city\":\"Paris\"}"`)},
		`{"type":"tool_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`},
	{"tool_call/object arguments",
		ToolCall{CallID: "toolu_1", Name: "grep", Arguments: raw(`{"q": "<x>"}`)},
		`{"type":"tool_call","call_id":"toolu_1","name":"grep","arguments":{"q": "<x>"}}`},
	{"tool_call/no arguments", ToolCall{CallID: "c", Name: "now"}, `{"type":"tool_call","call_id":"c","name":"now"}`},
	{"tool_output",
		ToolOutput{CallID: "call_1", Output: raw(`"18°C"`)},
		`{"type":"tool_output","call_id":"call_1","output":"18°C"}`},
	{"tool_output/empty", ToolOutput{}, `{"type":"tool_output","call_id":""}`},
	{"tool_output/error", ToolOutput{CallID: "c", Output: raw(`"timeout"`), IsError: true},
		`{"type":"tool_output","call_id":"c","output":"timeout","is_error":true}`},
	{"reasoning",
		ReasoningItem{EncryptedContent: ptr("gAAAAB"), Raw: raw(`{"id":"rs_1","summary":[]}`)},
		`{"type":"reasoning","encrypted_content":"gAAAAB","raw":{"id":"rs_1","summary":[]}}`},
	{"reasoning/none", ReasoningItem{}, `{"type":"reasoning"}`},
	{"metadata", Metadata{Key: "response_id", Value: "resp_1"}, `{"type":"metadata","key":"response_id","value":"resp_1"}`},
	{"metadata/empty", Metadata{}, `{"type":"metadata","key":"","value":""}`},
	{"unknown/verbatim",
		UnknownItem{Raw: raw(`{"type":"web_search_call","id":"ws_1", "status" : "completed"}`)},
		`{"type":"web_search_call","id":"ws_1", "status" : "completed"}`},
	{"unknown/provider",
		UnknownItem{Provider: "openai", Raw: raw(`{"type":"image_generation_call","result":"iVBO"}`)},
		`{"type":"unknown","provider":"openai","raw":{"type":"image_generation_call","result":"iVBO"}}`},
	{"unknown/shadows a known kind",
		UnknownItem{Raw: raw(`{"type":"metadata"}`)},
		`{"type":"unknown","provider":"","raw":{"type":"metadata"}}`},
}

func TestItemRoundTrip(t *testing.T) {
	for _, tc := range itemCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MarshalItem(tc.item)
			if err != nil || string(got) != tc.json {
				t.Fatalf("MarshalItem(%#v) = %s, %v, want %s", tc.item, got, err, tc.json)
			}
			back, err := UnmarshalItem(got)
			if err != nil || !reflect.DeepEqual(back, tc.item) {
				t.Fatalf("UnmarshalItem(%s) = %#v, %v, want %#v", got, back, err, tc.item)
			}
		})
	}
}

func TestItemsRoundTrip(t *testing.T) {
	var all Items
	var want []string
	for _, tc := range itemCases {
		all = append(all, tc.item)
		want = append(want, tc.json)
	}
	got, err := all.MarshalJSON()
	if w := "[" + strings.Join(want, ",") + "]"; err != nil || string(got) != w {
		t.Fatalf("Items.MarshalJSON() = %s, %v, want %s", got, err, w)
	}
	var back Items
	if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, all) {
		t.Fatalf("json.Unmarshal(%s) = %#v, %v, want %#v", got, back, err, all)
	}
	for _, in := range []string{`[]`, `null`} {
		back = Items{Metadata{}}
		if err := json.Unmarshal([]byte(in), &back); err != nil || back != nil {
			t.Errorf("json.Unmarshal(%s) = %#v, %v, want nil", in, back, err)
		}
	}
}

func TestUnmarshalItemErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
		is   []error
	}{
		{`[]`, `not a JSON object`, nil},
		{`{"call_id":"c"}`, `field "type" is required`, nil},
		{`{"type":"tool_call","name":"n"}`, `tool_call: field "call_id" is required`, nil},
		{`{"type":"tool_call","call_id":"c"}`, `tool_call: field "name" is required`, nil},
		{`{"type":"tool_output","call_id":1}`, `tool_output: field "call_id" is invalid`, nil},
		{`{"type":"metadata","key":"k","value":{}}`, `metadata: field "value" is invalid`, nil},
		{`{"type":"reasoning","encrypted_content":true}`, `reasoning: field "encrypted_content" is invalid`, nil},
		{`{"type":"assistant_message","blocks":[{"type":"image"}]}`,
			`assistant_message: field "blocks" is invalid: block 0: messages: invalid content block: image: field "media_type" is required`,
			[]error{ErrInvalidBlock}},
		{`{"type":"unknown","provider":"openai","raw":"x"}`, `unknown: field "raw" is not a JSON object`, nil},
	}
	for _, tc := range tests {
		got, err := UnmarshalItem([]byte(tc.in))
		if !errors.Is(err, ErrInvalidItem) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UnmarshalItem(%s) = %#v, %v, want error containing %q", tc.in, got, err, tc.want)
		}
		for _, target := range tc.is {
			if !errors.Is(err, target) {
				t.Errorf("UnmarshalItem(%s) = %v, want an error wrapping %v", tc.in, err, target)
			}
		}
	}
	var its Items
	if err := json.Unmarshal([]byte(`[{"type":"metadata"},{"type":"tool_call"}]`), &its); !errors.Is(err, ErrInvalidItem) || !strings.HasPrefix(err.Error(), "item 1: ") {
		t.Errorf("json.Unmarshal into Items = %v, want item 1: ErrInvalidItem", err)
	}
}

func TestMarshalItemErrors(t *testing.T) {
	tests := []struct {
		item TranscriptItem
		want string
	}{
		{nil, `nil item`},
		{&Metadata{}, `unsupported type *messages.Metadata`},
		{ToolCall{Name: "n"}, `tool_call: field "call_id" is required`},
		{ToolCall{CallID: "c"}, `tool_call: field "name" is required`},
		{ToolCall{CallID: "c", Name: "n", Arguments: raw(`{`)}, `tool_call: field "arguments" is not valid JSON`},
		{ToolOutput{Output: raw(`'x'`)}, `tool_output: field "output" is not valid JSON`},
		{ReasoningItem{Raw: raw(`{]`)}, `reasoning: field "raw" is not valid JSON`},
		{AssistantMessage{Blocks: Blocks{ToolUse{}}}, `assistant_message: field "blocks" is invalid: block 0:`},
		{UnknownItem{}, `unknown: field "raw" is not a JSON object`},
		{UnknownItem{Provider: "openai", Raw: raw(`"x"`)}, `unknown: field "raw" is not a JSON object`},
	}
	for _, tc := range tests {
		got, err := MarshalItem(tc.item)
		if !errors.Is(err, ErrInvalidItem) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MarshalItem(%#v) = %s, %v, want error containing %q", tc.item, got, err, tc.want)
		}
	}
}

// itemSeeds are realistic items: ours and OpenAI Responses output items.
var itemSeeds = []string{
	`{"type":"message","id":"msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41","status":"completed","role":"assistant","content":[{"type":"output_text","text":"The weather in Paris is 18°C.","annotations":[{"type":"url_citation","start_index":0,"end_index":10,"url":"https://weather.example","title":"Weather"}]}]}`,
	`{"type":"function_call","id":"fc_12345xyz","call_id":"call_12345xyz","name":"get_weather","arguments":"{\"location\":\"Paris, France\"}","status":"completed"}`,
	`{"type":"function_call_output","call_id":"call_12345xyz","output":"{\"temperature\": 18}"}`,
	`{"type":"reasoning","id":"rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7","summary":[{"type":"summary_text","text":"**Answering a simple question**"}],"encrypted_content":"gAAAAABoIPOF"}`,
	`{"type":"web_search_call","id":"ws_67c9fa0502748190b7dd390736892e100be649c1a5ff9609","status":"completed","action":{"type":"search","query":"weather paris"}}`,
	`{"type":"file_search_call","id":"fs_1","status":"completed","queries":["deep research"],"results":null}`,
	`{"type":"computer_call","id":"cu_1","call_id":"call_zw3","action":{"type":"click","button":"left","x":156,"y":50},"pending_safety_checks":[],"status":"completed"}`,
	`{"type":"mcp_call","id":"mcp_1","server_label":"deepwiki","name":"ask_question","arguments":"{\"repoName\":\"modelcontextprotocol/modelcontextprotocol\"}","output":"It supports ...","error":null}`,
	`{"type":"image_generation_call","id":"ig_1","status":"completed","result":"iVBORw0KGgo="}`,
	`{ "type" : "local_shell_call" , "call_id" : "c" , "action" : { "command" : [ "ls" , "-l" ] } }`,
	// Ours.
	`{"type":"assistant_message","blocks":[{"type":"text","text":"Hi"},{"type":"thinking","thinking":"hmm" ,"signature":"EqQB"},{"type":"tool_result","tool_use_id":"t","content":[{"type":"web_search_result" , "url":"https://a.example"}]}]}`,
	`{"type":"tool_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`,
	`{"type":"tool_output","call_id":"call_1","output":{"content":[{"type":"text","text":"18°C"}]}}`,
	`{"type":"reasoning","encrypted_content":null,"raw":{"type":"redacted_thinking","data":"EmwKAhgB"}}`,
	`{"type":"metadata","key":"stop_reason","value":"end_turn"}`,
	`{"type":"unknown","provider":"openai","raw":{"type":"code_interpreter_call","code":"print(1)"}}`,
}

func FuzzItemRoundTrip(f *testing.F) {
	for _, s := range itemSeeds {
		f.Add([]byte(s))
	}
	for _, tc := range itemCases {
		f.Add([]byte(tc.json))
	}
	known := map[string]bool{"assistant_message": true, "tool_call": true, "tool_output": true, "reasoning": true, "metadata": true, "unknown": true}
	f.Fuzz(func(t *testing.T, x []byte) {
		it, err := UnmarshalItem(x)
		if err != nil {
			return
		}
		y, err := MarshalItem(it)
		if err != nil {
			t.Fatalf("MarshalItem(%#v) = %v", it, err)
		}
		it2, err := UnmarshalItem(y)
		if err != nil || !reflect.DeepEqual(it2, it) {
			t.Fatalf("UnmarshalItem(%s) = %#v, %v, want %#v", y, it2, err, it)
		}
		if !known[tagOf(x)] {
			if want := (UnknownItem{Raw: x}); !reflect.DeepEqual(it, want) {
				t.Fatalf("UnmarshalItem(%s) = %#v, want %#v", x, it, want)
			}
			if !bytes.Equal(y, x) {
				t.Fatalf("MarshalItem(UnmarshalItem(%q)) = %q, want the input", x, y)
			}
		}
	})
}
