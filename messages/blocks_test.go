package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// blockCases pairs each kind of block with its JSON form.
var blockCases = []struct {
	name  string
	block ContentBlock
	json  string
}{
	{"text", Text{Text: "Hello"}, `{"type":"text","text":"Hello"}`},
	{"text/empty", Text{}, `{"type":"text","text":""}`},
	{"text/escapes", Text{Text: "if a < b && c > d {\n\t\"q\"\n}"}, `{"type":"text","text":"if a < b && c > d {\n\t\"q\"\n}"}`},
	{"text/annotations",
		Text{Text: "Paris", Annotations: []json.RawMessage{raw(`{"type":"url_citation", "url":"https://a.example"}`), raw(`7`)}},
		`{"type":"text","text":"Paris","annotations":[{"type":"url_citation", "url":"https://a.example"},7]}`},
	{"tool_use",
		ToolUse{ToolUseID: "toolu_01A", Name: "get_weather", Input: raw(`{"city": "Paris"}`)},
		`{"type":"tool_use","tool_use_id":"toolu_01A","name":"get_weather","input":{"city": "Paris"}}`},
	{"tool_use/no input", ToolUse{ToolUseID: "call_1", Name: "now"}, `{"type":"tool_use","tool_use_id":"call_1","name":"now"}`},
	{"tool_result",
		ToolResult{ToolUseID: "toolu_01A", Content: Blocks{Text{Text: "18°C"}}, IsError: true},
		`{"type":"tool_result","tool_use_id":"toolu_01A","content":[{"type":"text","text":"18°C"}],"is_error":true}`},
	{"tool_result/empty", ToolResult{ToolUseID: "t"}, `{"type":"tool_result","tool_use_id":"t","content":[]}`},
	{"tool_result/nested unknown",
		ToolResult{ToolUseID: "t", Content: Blocks{Unknown{Raw: raw(`{"type":"search_result" ,"n": [1, 2]}`)}}},
		`{"type":"tool_result","tool_use_id":"t","content":[{"type":"search_result" ,"n": [1, 2]}]}`},
	{"image",
		Image{MediaType: "image/png", Source: raw(`{"type":"base64","data":"iVBORw0KGgo="}`)},
		`{"type":"image","media_type":"image/png","source":{"type":"base64","data":"iVBORw0KGgo="}}`},
	{"image/no source", Image{MediaType: "image/jpeg"}, `{"type":"image","media_type":"image/jpeg"}`},
	{"reasoning",
		Reasoning{EncryptedContent: ptr("gAAAAB"), Summary: ptr("Compared the two."), Raw: raw(`{"id":"rs_1"}`)},
		`{"type":"reasoning","encrypted_content":"gAAAAB","summary":"Compared the two.","raw":{"id":"rs_1"}}`},
	{"reasoning/empty strings", Reasoning{EncryptedContent: ptr(""), Summary: ptr("")}, `{"type":"reasoning","encrypted_content":"","summary":""}`},
	{"reasoning/none", Reasoning{}, `{"type":"reasoning"}`},
	{"unknown/verbatim",
		Unknown{Raw: raw(`{"type":"server_tool_use","id":"x", "weird": [1, 2 ]}`)},
		`{"type":"server_tool_use","id":"x", "weird": [1, 2 ]}`},
	{"unknown/provider",
		Unknown{Provider: "anthropic", Raw: raw(`{"type":"thinking", "thinking":"hmm","signature":"EqQB"}`)},
		`{"type":"unknown","provider":"anthropic","raw":{"type":"thinking", "thinking":"hmm","signature":"EqQB"}}`},
	{"unknown/shadows a known kind",
		Unknown{Raw: raw(`{"type":"text","text":"x"}`)},
		`{"type":"unknown","provider":"","raw":{"type":"text","text":"x"}}`},
	{"unknown/untyped", Unknown{Raw: raw(`{ }`)}, `{"type":"unknown","provider":"","raw":{ }}`},
}

func TestBlockRoundTrip(t *testing.T) {
	for _, tc := range blockCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MarshalBlock(tc.block)
			if err != nil || string(got) != tc.json {
				t.Fatalf("MarshalBlock(%#v) = %s, %v, want %s", tc.block, got, err, tc.json)
			}
			back, err := UnmarshalBlock(got)
			if err != nil || !reflect.DeepEqual(back, tc.block) {
				t.Fatalf("UnmarshalBlock(%s) = %#v, %v, want %#v", got, back, err, tc.block)
			}
		})
	}
}

func TestBlocksRoundTrip(t *testing.T) {
	var all Blocks
	var want []string
	for _, tc := range blockCases {
		all = append(all, tc.block)
		want = append(want, tc.json)
	}
	got, err := all.MarshalJSON()
	if w := "[" + strings.Join(want, ",") + "]"; err != nil || string(got) != w {
		t.Fatalf("Blocks.MarshalJSON() = %s, %v, want %s", got, err, w)
	}
	var back Blocks
	if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, all) {
		t.Fatalf("json.Unmarshal(%s) = %#v, %v, want %#v", got, back, err, all)
	}
}

func TestUnmarshalBlockNormalizes(t *testing.T) {
	tests := []struct {
		in   string
		want ContentBlock
	}{
		{`{"type":"text","text":"a","annotations":[]}`, Text{Text: "a"}},
		{`{"type":"text","text":"a","annotations":null}`, Text{Text: "a"}},
		{`{"type":"text","text":null}`, Text{}},
		{`{"type":"text","text":"a","citations":[{"x":1}]}`, Text{Text: "a"}},
		{`{"type":"text","Text":"a"}`, Text{}}, // keys match exactly
		{`{"type":"text","text":"a","text":"b"}`, Text{Text: "b"}},
		{`{"type":"tool_use","tool_use_id":"t","name":"n","input":null}`, ToolUse{ToolUseID: "t", Name: "n"}},
		{`{"type":"tool_result","tool_use_id":"t","content":null,"is_error":false}`, ToolResult{ToolUseID: "t"}},
		{`{"type":"reasoning","summary":null}`, Reasoning{}},
		{` {"type":"x"}` + "\n", Unknown{Raw: raw(` {"type":"x"}` + "\n")}},
		{`{"type":"unknown","raw":{"type":"x"}}`, Unknown{Raw: raw(`{"type":"x"}`)}},
	}
	for _, tc := range tests {
		got, err := UnmarshalBlock([]byte(tc.in))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("UnmarshalBlock(%s) = %#v, %v, want %#v", tc.in, got, err, tc.want)
		}
	}
}

func TestUnmarshalBlockErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `not a JSON object`},
		{`null`, `not a JSON object`},
		{`[{"type":"text"}]`, `not a JSON object`},
		{`"text"`, `not a JSON object`},
		{`{"type":"text"`, `unexpected end of JSON input`},
		{`{}`, `field "type" is required`},
		{`{"type":""}`, `field "type" is required`},
		{`{"type":5}`, `field "type" is invalid`},
		{`{"type":"text","text":5}`, `text: field "text" is invalid`},
		{`{"type":"text","annotations":{}}`, `text: field "annotations" is invalid`},
		{`{"type":"tool_use","name":"n"}`, `tool_use: field "tool_use_id" is required`},
		{`{"type":"tool_use","tool_use_id":"t"}`, `tool_use: field "name" is required`},
		{`{"type":"tool_use","tool_use_id":"t","name":""}`, `tool_use: field "name" is required`},
		{`{"type":"tool_result"}`, `tool_result: field "tool_use_id" is required`},
		{`{"type":"tool_result","tool_use_id":"t","is_error":"yes"}`, `tool_result: field "is_error" is invalid`},
		{`{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_use","tool_use_id":"u"}]}`,
			`tool_result: field "content" is invalid: block 0: messages: invalid content block: tool_use: field "name" is required`},
		{`{"type":"tool_result","tool_use_id":"t","content":{}}`, `tool_result: field "content" is invalid`},
		{`{"type":"image","source":{}}`, `image: field "media_type" is required`},
		{`{"type":"reasoning","summary":[{"type":"summary_text"}]}`, `reasoning: field "summary" is invalid`},
		{`{"type":"unknown","provider":"anthropic"}`, `unknown: field "raw" is not a JSON object`},
		{`{"type":"unknown","raw":[1]}`, `unknown: field "raw" is not a JSON object`},
	}
	for _, tc := range tests {
		got, err := UnmarshalBlock([]byte(tc.in))
		if !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UnmarshalBlock(%s) = %#v, %v, want error containing %q", tc.in, got, err, tc.want)
		}
	}
}

func TestMarshalBlockErrors(t *testing.T) {
	tests := []struct {
		block ContentBlock
		want  string
	}{
		{nil, `nil block`},
		{&Text{Text: "a"}, `unsupported type *messages.Text`},
		{Text{Annotations: []json.RawMessage{raw(`{}`), raw(`{`)}}, `text: field "annotations" is invalid: element 1 is not valid JSON`},
		{Text{Annotations: []json.RawMessage{nil}}, `text: field "annotations" is invalid: element 0 is not valid JSON`},
		{ToolUse{Name: "n"}, `tool_use: field "tool_use_id" is required`},
		{ToolUse{ToolUseID: "t"}, `tool_use: field "name" is required`},
		{ToolUse{ToolUseID: "t", Name: "n", Input: raw(`{"a":}`)}, `tool_use: field "input" is not valid JSON`},
		{ToolResult{}, `tool_result: field "tool_use_id" is required`},
		{ToolResult{ToolUseID: "t", Content: Blocks{Image{}}},
			`tool_result: field "content" is invalid: block 0: messages: invalid content block: image: field "media_type" is required`},
		{Image{Source: raw(`{}`)}, `image: field "media_type" is required`},
		{Image{MediaType: "image/png", Source: raw(``)}, `image: field "source" is not valid JSON`},
		{Reasoning{Raw: raw(`nope`)}, `reasoning: field "raw" is not valid JSON`},
		{Unknown{}, `unknown: field "raw" is not a JSON object`},
		{Unknown{Raw: raw(`not json`)}, `unknown: field "raw" is not a JSON object`},
		{Unknown{Provider: "openai", Raw: raw(`[1]`)}, `unknown: field "raw" is not a JSON object`},
		{Unknown{Provider: "openai", Raw: raw(`{"a":1}}`)}, `unknown: field "raw" is not a JSON object`},
	}
	for _, tc := range tests {
		got, err := MarshalBlock(tc.block)
		if !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MarshalBlock(%#v) = %s, %v, want error containing %q", tc.block, got, err, tc.want)
		}
	}
	if _, err := (Blocks{Text{}, nil}).MarshalJSON(); !errors.Is(err, ErrInvalidBlock) || !strings.HasPrefix(err.Error(), "block 1: ") {
		t.Errorf("Blocks.MarshalJSON() with a nil block = %v, want block 1: ErrInvalidBlock", err)
	}
}

func TestBlocksRenderedText(t *testing.T) {
	bs := Blocks{
		Text{Text: "The capital is "},
		Text{Text: "Paris", Annotations: []json.RawMessage{raw(`{"type":"char_location"}`)}},
		ToolResult{ToolUseID: "t", Content: Blocks{Text{Text: "hidden"}}},
		Reasoning{Summary: ptr("hidden")},
		Unknown{Raw: raw(`{"type":"thinking","thinking":"hidden"}`)},
		Text{Text: "."},
	}
	if got, want := bs.RenderedText(), "The capital is Paris."; got != want {
		t.Errorf("RenderedText() = %q, want %q", got, want)
	}
	if got := Blocks(nil).RenderedText(); got != "" {
		t.Errorf("Blocks(nil).RenderedText() = %q, want \"\"", got)
	}
}

// blockSeeds are realistic blocks: ours, Anthropic content blocks and
// OpenAI Responses output items.
var blockSeeds = []string{
	// Anthropic Messages API content blocks.
	`{"type":"text","text":"The Eiffel Tower is in Paris.","citations":[{"type":"char_location","cited_text":"Paris","document_index":0,"start_char_index":0,"end_char_index":5}]}`,
	`{"type":"thinking","thinking":"Let me add 2 and 2.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}`,
	`{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}`,
	`{"type":"server_tool_use","id":"srvtoolu_01WYG3ziw53XMcoyKL4XcZmE","name":"web_search","input":{"query":"claude shannon birth date"}}`,
	`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_01WYG3ziw53XMcoyKL4XcZmE","content":[{"type":"web_search_result","url":"https://en.wikipedia.org/wiki/Claude_Shannon","title":"Claude Shannon - Wikipedia","encrypted_content":"EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2","page_age":"April 30, 2025"}]}`,
	`{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"San Francisco, CA","unit":"celsius"}}`,
	`{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQSkZJRg=="}}`,
	`{ "type" : "mcp_tool_use" , "id" : "mcptoolu_1" , "name" : "echo" , "server_name" : "e" , "input" : { "x" : [ 1 , 2.50 , -0e3 ] } }`,
	// OpenAI Responses output items.
	`{"type":"message","id":"msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}`,
	`{"type":"function_call","id":"fc_12345xyz","call_id":"call_12345xyz","name":"get_weather","arguments":"{\"location\":\"Paris, France\"}"}`,
	`{"type":"reasoning","id":"rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7","summary":[{"type":"summary_text","text":"**Answering a simple question**"}],"encrypted_content":"gAAAAABoIPOF"}`,
	`{"type":"web_search_call","id":"ws_67c9fa0502748190b7dd390736892e100be649c1a5ff9609","status":"completed"}`,
	// Ours.
	`{"type":"reasoning","encrypted_content":"gAAAAABoIPOF","summary":"Answering a simple question","raw":{"id":"rs_1","summary":[]}}`,
	`{"type":"unknown","provider":"anthropic","raw":{"type":"thinking","thinking":"hmm","signature":"EqQB"}}`,
	`{"type":"unknown","provider":"","raw":{"type":"text","text":"x"}}`,
	`{"type":"text","text":"see \u003ccode\u003e & \"quotes\" \ud83d\ude00 \u2028","annotations":[{"type":"url_citation","start_index":0,"end_index":3,"url":"https://a.example","title":"A"}]}`,
	"{\"type\":\"text\",\"text\":\"bad \xff utf-8\"}",
	`{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"ok"},{"type":"web_search_result" , "url":"https://a.example"}],"is_error":false}`,
}

// tagOf returns the "type" of the JSON object in data, or "" if there is none.
func tagOf(data []byte) string {
	var fields map[string]json.RawMessage
	var s string
	if json.Unmarshal(data, &fields) == nil {
		json.Unmarshal(fields["type"], &s)
	}
	return s
}

func FuzzBlockRoundTrip(f *testing.F) {
	for _, s := range blockSeeds {
		f.Add([]byte(s))
	}
	for _, tc := range blockCases {
		f.Add([]byte(tc.json))
	}
	known := map[string]bool{"text": true, "tool_use": true, "tool_result": true, "image": true, "reasoning": true, "unknown": true}
	f.Fuzz(func(t *testing.T, x []byte) {
		b, err := UnmarshalBlock(x)
		if err != nil {
			return
		}
		y, err := MarshalBlock(b)
		if err != nil {
			t.Fatalf("MarshalBlock(%#v) = %v", b, err)
		}
		b2, err := UnmarshalBlock(y)
		if err != nil || !reflect.DeepEqual(b2, b) {
			t.Fatalf("UnmarshalBlock(%s) = %#v, %v, want %#v", y, b2, err, b)
		}
		verbatim := !known[tagOf(x)]
		if verbatim {
			if want := (Unknown{Raw: x}); !reflect.DeepEqual(b, want) {
				t.Fatalf("UnmarshalBlock(%s) = %#v, want %#v", x, b, want)
			}
			if !bytes.Equal(y, x) {
				t.Fatalf("MarshalBlock(UnmarshalBlock(%q)) = %q, want the input", x, y)
			}
		}
		// Nested in a tool result, the block decodes the same (less
		// surrounding space) and encodes to the same bytes.
		x = bytes.TrimSpace(x)
		if verbatim {
			b, y = Unknown{Raw: x}, x
		}
		outer := `{"type":"tool_result","tool_use_id":"t","content":[` + string(x) + `]}`
		got, err := UnmarshalBlock([]byte(outer))
		if want := (ToolResult{ToolUseID: "t", Content: Blocks{b}}); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("UnmarshalBlock(%s) = %#v, %v, want %#v", outer, got, err, want)
		}
		enc, err := MarshalBlock(got)
		if want := `{"type":"tool_result","tool_use_id":"t","content":[` + string(y) + `]}`; err != nil || string(enc) != want {
			t.Fatalf("MarshalBlock(%#v) = %s, %v, want %s", got, enc, err, want)
		}
	})
}
