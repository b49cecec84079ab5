package openai_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// What an API client (the proxy's) sends with a turn reaches the
// upstream: its tool choice, its images and other content parts, its
// tool outputs; and the upstream's usage and model come back.

// textReply is a plain text reply of api.
func textReply(api string) fakeapi.Reply {
	if api == openai.APIChat {
		return fakeapi.ChatText("stop", "ok")
	}
	return fakeapi.ResponsesText("ok")
}

// sendOnce runs req against a server of api scripted with reply, and
// returns the response and the JSON body the server got.
func sendOnce(t *testing.T, api string, reply fakeapi.Reply, req providers.Request) (providers.Response, map[string]any) {
	t.Helper()
	srv := newServer(t, reply)
	_, resp, err := run(t, provider(srv, api), req)
	if err != nil {
		t.Fatalf("%s: Stream: %v", api, err)
	}
	_, body := onlyRequest(t, srv)
	return resp, body
}

func compact(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestToolChoice(t *testing.T) {
	tests := []struct {
		choice          messages.ToolChoice
		chat, responses string // the tool_choice sent, "" for none
	}{
		{messages.ToolChoice{}, "", ""},
		{messages.ToolChoice{Mode: "auto"}, `"auto"`, `"auto"`},
		{messages.ToolChoice{Mode: "none"}, `"none"`, `"none"`},
		{messages.ToolChoice{Mode: "required"}, `"required"`, `"required"`},
		{messages.ToolChoice{Mode: "tool", Name: "get_weather"}, `{"function":{"name":"get_weather"},"type":"function"}`, `{"name":"get_weather","type":"function"}`},
	}
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		for _, tt := range tests {
			req := basicRequest()
			withTools(&req)
			req.Context.ToolChoice = tt.choice
			_, body := sendOnce(t, api, textReply(api), req)
			want := tt.chat
			if api == openai.APIResponses {
				want = tt.responses
			}
			got := ""
			if v, ok := body["tool_choice"]; ok {
				got = compact(t, v)
			}
			if got != want {
				t.Errorf("%s %+v: tool_choice %s, want %s", api, tt.choice, got, want)
			}
			if tt.choice.Mode == "tool" {
				p := provider(newServer(t), api)
				n, err := p.EstimatePromptTokens(req)
				req.Context.ToolChoice = messages.ToolChoice{}
				n0, _ := p.EstimatePromptTokens(req)
				if err != nil || n <= n0 {
					t.Errorf("%s: estimate %d (%v), %d without the choice: the choice is not counted", api, n, err, n0)
				}
			}
		}
		// No tools, no choice sent.
		req := basicRequest()
		req.Context.ToolChoice = messages.ToolChoice{Mode: "required"}
		if _, body := sendOnce(t, api, textReply(api), req); body["tool_choice"] != nil {
			t.Errorf("%s: tool_choice %v sent without tools", api, body["tool_choice"])
		}
	}
}

// A tool choice that cannot be sent fails before anything is sent, with
// an error naming Context.ToolChoice; so does the estimate.
func TestBadToolChoice(t *testing.T) {
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		for _, tc := range []messages.ToolChoice{{Mode: "any"}, {Mode: "tool"}, {Mode: "tool", Name: "rm"}} {
			srv := newServer(t, textReply(api))
			req := basicRequest()
			withTools(&req)
			req.Context.ToolChoice = tc
			_, resp, err := run(t, provider(srv, api), req)
			if !errors.Is(err, providers.ErrInvalidToolChoice) || !strings.Contains(err.Error(), "Context.ToolChoice") ||
				resp.Outcome.Code != "bad_request" || srv.Count() != 0 {
				t.Errorf("%s %+v: err %v, outcome %+v, %d requests", api, tc, err, resp.Outcome, srv.Count())
			}
			if _, err := provider(srv, api).EstimatePromptTokens(req); !errors.Is(err, providers.ErrInvalidToolChoice) {
				t.Errorf("%s %+v: estimate error %v", api, tc, err)
			}
		}
	}
}

// userParts is a user message of text, images of every source, and
// parts that clients of each API sent.
func userParts() messages.Message {
	return messages.NewMessage(messages.RoleUser,
		messages.Text{Text: "What are these?"},
		messages.Image{MediaType: "image/png", Source: json.RawMessage(`{"type":"base64","data":"iVBORw0K"}`)},
		messages.Image{MediaType: "image/jpeg", Source: json.RawMessage(`{"type":"url","url":"https://example.com/a.jpg"}`)},
		messages.Image{MediaType: "image/png", Source: json.RawMessage(`{"type":"file","file_id":"file_01"}`)},
		messages.Unknown{Provider: "openai.chat", Raw: json.RawMessage(`{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}}`)},
		messages.Unknown{Provider: "openai", Raw: json.RawMessage(`{"type":"input_file","file_id":"file_02"}`)},
		messages.Unknown{Provider: "anthropic", Raw: json.RawMessage(`{"type":"document","source":{"type":"text","data":"x"}}`)},
	)
}

// The user's images and content parts reach the upstream in order: as
// image_url (Chat Completions) or input_image (Responses) parts, the
// parts of this API's clients as they came, and what the API cannot take
// as a text saying so.
func TestUserContentParts(t *testing.T) {
	note := func(kind string) string { return providers.UnsupportedPart(kind) }
	fileImage := "image (image/png, source file)"
	wantChat := []any{
		map[string]any{"type": "text", "text": "What are these?"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw0K"}},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/a.jpg"}},
		map[string]any{"type": "text", "text": note(fileImage)},
		map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": "UklG", "format": "wav"}},
		map[string]any{"type": "text", "text": note("input_file")},
		map[string]any{"type": "text", "text": note("document")},
	}
	wantResponses := []any{
		map[string]any{"type": "input_text", "text": "What are these?"},
		map[string]any{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K", "detail": "auto"},
		map[string]any{"type": "input_image", "image_url": "https://example.com/a.jpg", "detail": "auto"},
		map[string]any{"type": "input_text", "text": note(fileImage)},
		map[string]any{"type": "input_text", "text": note("input_audio")},
		map[string]any{"type": "input_file", "file_id": "file_02"},
		map[string]any{"type": "input_text", "text": note("document")},
	}
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		req := basicRequest()
		req.Context.Window = []messages.Message{userParts(), messages.NewMessage(messages.RoleAssistant, messages.Text{Text: "Two pictures."})}
		req.Context.User = userParts()
		_, body := sendOnce(t, api, textReply(api), req)
		var contents []any
		if api == openai.APIChat {
			for _, m := range body["messages"].([]any) {
				if m := m.(map[string]any); m["role"] == "user" {
					contents = append(contents, m["content"])
				}
			}
			if len(contents) != 2 || !reflect.DeepEqual(contents[0], wantChat) || !reflect.DeepEqual(contents[1], wantChat) {
				t.Errorf("chat user contents\n%s\nwant twice\n%s", compact(t, contents), compact(t, wantChat))
			}
			continue
		}
		for _, it := range body["input"].([]any) {
			if it := it.(map[string]any); it["role"] == "user" {
				contents = append(contents, it["content"])
			}
		}
		if len(contents) != 2 || !reflect.DeepEqual(contents[0], wantResponses) || !reflect.DeepEqual(contents[1], wantResponses) {
			t.Errorf("responses user contents\n%s\nwant twice\n%s", compact(t, contents), compact(t, wantResponses))
		}
	}
}

// A message of text alone is sent as before: Chat Completions content
// is a string; a message whose other parts the API cannot take is text
// too, the notes a line apart.
func TestUserContentTextOnly(t *testing.T) {
	req := basicRequest()
	req.Context.User = messages.NewMessage(messages.RoleUser, messages.Text{Text: "Listen:"},
		messages.Unknown{Provider: "openai", Raw: json.RawMessage(`{"type":"input_file","file_id":"f"}`)})
	_, body := sendOnce(t, openai.APIChat, textReply(openai.APIChat), req)
	msgs := body["messages"].([]any)
	if got := msgs[len(msgs)-1].(map[string]any)["content"]; got != "Listen:\n"+providers.UnsupportedPart("input_file") {
		t.Errorf("content %v", got)
	}
	_, body = sendOnce(t, openai.APIChat, textReply(openai.APIChat), basicRequest())
	msgs = body["messages"].([]any)
	if got := msgs[len(msgs)-1].(map[string]any)["content"]; got != "Hi there" {
		t.Errorf("plain content %v", got)
	}
}

// An image's base64 data is not counted as text: the estimate of a
// context with a 100×50 PNG of any byte size is the image's tokens more
// than without it, not thousands.
func TestEstimateImages(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 100, 50))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(rng.Uint32()) // noise: the PNG does not compress
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	data := base64.StdEncoding.EncodeToString(buf.Bytes())
	if len(data) < 20000 {
		t.Fatalf("image of %d base64 bytes, want a large one", len(data))
	}
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		p := provider(newServer(t), api)
		req := basicRequest()
		base, err := p.EstimatePromptTokens(req)
		if err != nil {
			t.Fatal(err)
		}
		req.Context.User = messages.NewMessage(messages.RoleUser, messages.Text{Text: "Hi there"},
			messages.Image{MediaType: "image/png", Source: json.RawMessage(`{"type":"base64","data":"` + data + `"}`)})
		n, err := p.EstimatePromptTokens(req)
		if err != nil {
			t.Fatal(err)
		}
		if extra := n - base; extra < 255 || extra > 255+60 {
			t.Errorf("%s: the image adds %d tokens, want about 255", api, extra)
		}
	}
}

// A client's tool output is a JSON string: its text is sent as the
// output as it is, not quoted again; an error output starts "error: ".
func TestClientToolOutputs(t *testing.T) {
	withOutputs := func(r *providers.Request) {
		withTools(r)
		r.Context.Continuation = messages.Items{
			messages.ToolCall{CallID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Paris\"}"`)},
			messages.ToolCall{CallID: "call_2", Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Atlantis\"}"`)},
			messages.ToolOutput{CallID: "call_1", Output: json.RawMessage(`"{\"temp\": 21, \"unit\": \"C\"}"`)},
			messages.ToolOutput{CallID: "call_2", Output: json.RawMessage(`"city not found"`), IsError: true},
		}
	}
	want := map[string]string{"call_1": `{"temp": 21, "unit": "C"}`, "call_2": "error: city not found"}
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		req := basicRequest()
		withOutputs(&req)
		_, body := sendOnce(t, api, textReply(api), req)
		got := map[string]string{}
		if api == openai.APIChat {
			for _, m := range body["messages"].([]any) {
				if m := m.(map[string]any); m["role"] == "tool" {
					got[m["tool_call_id"].(string)] = m["content"].(string)
				}
			}
		} else {
			for _, it := range body["input"].([]any) {
				if it := it.(map[string]any); it["type"] == "function_call_output" {
					got[it["call_id"].(string)] = it["output"].(string)
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: outputs %q, want %q", api, got, want)
		}
	}
}

// The usage a response reports is the upstream's, from the usage chunk
// (Chat Completions) or the terminal response (Responses), for text,
// tool calls and a response cut short; the model is the one that
// answered.
func TestUpstreamUsage(t *testing.T) {
	call := fakeapi.OpenAIToolCall{ID: "call_1", Name: "get_weather", Args: []string{`{"city":"Paris"}`}}
	tests := []struct {
		name  string
		api   string
		reply fakeapi.Reply
		want  providers.Usage
	}{
		{"chat text", openai.APIChat, fakeapi.NewChatStream().Text("Hi").Usage(1234, 56).Finish("stop"), providers.Usage{InputTokens: 1234, OutputTokens: 56}},
		{"chat cached prompt", openai.APIChat, fakeapi.NewChatStream().Text("Hi").Usage(3000, 5).CachedTokens(2048).Finish("stop"),
			providers.Usage{InputTokens: 3000, OutputTokens: 5, CacheReadTokens: 2048}},
		{"chat tool calls", openai.APIChat, fakeapi.NewChatStream().ToolCalls(call).Usage(900, 31).Finish("tool_calls"), providers.Usage{InputTokens: 900, OutputTokens: 31}},
		{"chat cut by length", openai.APIChat, fakeapi.NewChatStream().Text("Hi").Usage(70, 8).Finish("length"), providers.Usage{InputTokens: 70, OutputTokens: 8}},
		{"chat without a usage chunk", openai.APIChat, fakeapi.NewChatStream().Text("Hi").Data(fakeapi.ChatChunk(`{}`, "stop")).Done(), providers.Usage{}},
		{"responses text", openai.APIResponses, fakeapi.NewResponsesStream().Text("Hi").Usage(2345, 67).Completed(), providers.Usage{InputTokens: 2345, OutputTokens: 67}},
		{"responses cached prompt", openai.APIResponses, fakeapi.NewResponsesStream().Text("Hi").Usage(2345, 7).CachedTokens(1152).Completed(),
			providers.Usage{InputTokens: 2345, OutputTokens: 7, CacheReadTokens: 1152}},
		{"responses tool calls", openai.APIResponses, fakeapi.NewResponsesStream().FunctionCalls(call).Usage(800, 22).Completed(), providers.Usage{InputTokens: 800, OutputTokens: 22}},
		{"responses incomplete", openai.APIResponses, fakeapi.NewResponsesStream().Text("Hi").Usage(500, 256).Incomplete("max_output_tokens"), providers.Usage{InputTokens: 500, OutputTokens: 256}},
	}
	for _, tt := range tests {
		req := basicRequest()
		withTools(&req)
		resp, body := sendOnce(t, tt.api, tt.reply, req)
		if resp.Usage != tt.want {
			t.Errorf("%s: usage %+v, want %+v", tt.name, resp.Usage, tt.want)
		}
		if resp.Model != fakeapi.OpenAIModel {
			t.Errorf("%s: model %q, want the upstream's %q", tt.name, resp.Model, fakeapi.OpenAIModel)
		}
		if tt.api == openai.APIChat && compact(t, body["stream_options"]) != `{"include_usage":true}` {
			t.Errorf("%s: stream_options %v", tt.name, body["stream_options"])
		}
	}
}
