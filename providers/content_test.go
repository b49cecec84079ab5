package providers_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"reflect"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

func TestToolChoice(t *testing.T) {
	tools := []messages.Tool{{Name: "grep"}, {Name: "ls"}}
	ctx := func(mode messages.ToolMode, tools []messages.Tool, tc messages.ToolChoice) messages.AssembledContext {
		return messages.AssembledContext{ToolMode: mode, Tools: tools, ToolChoice: tc}
	}
	tests := []struct {
		name  string
		c     messages.AssembledContext
		want  messages.ToolChoice
		field string // the field the error names; "" for no error
	}{
		{"no choice", ctx(messages.ToolsEnabled, tools, messages.ToolChoice{}), messages.ToolChoice{}, ""},
		{"auto", ctx(messages.ToolsEnabled, tools, messages.ToolChoice{Mode: "auto"}), messages.ToolChoice{Mode: "auto"}, ""},
		{"none", ctx(messages.ToolsParseOnly, tools, messages.ToolChoice{Mode: "none"}), messages.ToolChoice{Mode: "none"}, ""},
		{"required", ctx(messages.ToolsEnabled, tools, messages.ToolChoice{Mode: "required"}), messages.ToolChoice{Mode: "required"}, ""},
		{"tool", ctx(messages.ToolsEnabled, tools, messages.ToolChoice{Mode: "tool", Name: "ls"}), messages.ToolChoice{Mode: "tool", Name: "ls"}, ""},
		{"no tools offered: nothing sent", ctx(messages.ToolsEnabled, nil, messages.ToolChoice{Mode: "required"}), messages.ToolChoice{}, ""},
		{"tools disabled: nothing sent", ctx(messages.ToolsDisabled, tools, messages.ToolChoice{Mode: "none"}), messages.ToolChoice{}, ""},
		{"unknown mode", ctx(messages.ToolsEnabled, tools, messages.ToolChoice{Mode: "any"}), messages.ToolChoice{}, "Context.ToolChoice.Mode"},
		{"unknown mode without tools", ctx(messages.ToolsDisabled, nil, messages.ToolChoice{Mode: "sometimes"}), messages.ToolChoice{}, "Context.ToolChoice.Mode"},
		{"tool without a name", ctx(messages.ToolsEnabled, tools, messages.ToolChoice{Mode: "tool"}), messages.ToolChoice{}, "Context.ToolChoice.Name"},
		{"tool not offered", ctx(messages.ToolsEnabled, tools, messages.ToolChoice{Mode: "tool", Name: "rm"}), messages.ToolChoice{}, "Context.ToolChoice.Name"},
		{"tool while tools are disabled", ctx(messages.ToolsDisabled, tools, messages.ToolChoice{Mode: "tool", Name: "ls"}), messages.ToolChoice{}, "Context.ToolChoice.Name"},
	}
	for _, tt := range tests {
		got, err := providers.ToolChoice(tt.c)
		if tt.field == "" {
			if err != nil || got != tt.want {
				t.Errorf("%s: ToolChoice = %+v, %v; want %+v", tt.name, got, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, providers.ErrInvalidToolChoice) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: ToolChoice error %v, want ErrInvalidToolChoice naming %s", tt.name, err, tt.field)
		}
	}
}

// encodedImage is a w×h image encoded by enc, in base64.
func encodedImage(t *testing.T, w, h int, enc func(*bytes.Buffer, image.Image) error) string {
	t.Helper()
	var buf bytes.Buffer
	if err := enc(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func pngData(t *testing.T, w, h int) string {
	return encodedImage(t, w, h, func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) })
}

func source(kv ...string) json.RawMessage {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	data, _ := json.Marshal(m)
	return data
}

func TestImageURL(t *testing.T) {
	tests := []struct {
		img  messages.Image
		want string
		ok   bool
	}{
		{messages.Image{MediaType: "image/png", Source: source("type", "base64", "data", "iVBO")}, "data:image/png;base64,iVBO", true},
		{messages.Image{MediaType: "image/*", Source: source("type", "base64", "media_type", "image/gif", "data", "R0lG")}, "data:image/gif;base64,R0lG", true},
		{messages.Image{MediaType: "image/jpeg", Source: source("type", "url", "url", "https://example.com/a.jpg")}, "https://example.com/a.jpg", true},
		// a data URL given as a URL comes back as it was
		{messages.Image{MediaType: "image/*", Source: source("type", "url", "url", "data:image/webp;base64,UklG")}, "data:image/webp;base64,UklG", true},
		{messages.Image{MediaType: "image/png", Source: source("type", "file", "file_id", "file_1")}, "", false},
		{messages.Image{MediaType: "image/png", Source: source("type", "base64")}, "", false},
		{messages.Image{MediaType: "image/png"}, "", false},
	}
	for _, tt := range tests {
		got, ok := providers.ImageURL(tt.img)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ImageURL(%s) = %q, %v; want %q, %v", tt.img.Source, got, ok, tt.want, tt.ok)
		}
	}
}

func TestReadImageSourceDataURL(t *testing.T) {
	s := providers.ReadImageSource(messages.Image{MediaType: "image/*", Source: source("type", "url", "url", "data:image/png;base64,iVBO")})
	if s != (providers.ImageSource{Type: "base64", MediaType: "image/png", Data: "iVBO"}) {
		t.Errorf("base64 data URL read as %+v", s)
	}
	s = providers.ReadImageSource(messages.Image{MediaType: "image/svg+xml", Source: source("type", "url", "url", "data:image/svg+xml,%3Csvg%2F%3E")})
	if s.Type != "base64" || s.MediaType != "image/svg+xml" || s.Data != base64.StdEncoding.EncodeToString([]byte("<svg/>")) {
		t.Errorf("percent-encoded data URL read as %+v", s)
	}
}

func TestImageTokens(t *testing.T) {
	jpg := encodedImage(t, 4000, 3000, func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) })
	tests := []struct {
		name string
		img  messages.Image
		want int
	}{
		// OpenAI: 85 + 170 × 1 tile; Anthropic: 5000/750 → 7
		{"small png", messages.Image{MediaType: "image/png", Source: source("type", "base64", "data", pngData(t, 100, 50))}, 255},
		// OpenAI: 1024×1024 → 768×768, 4 tiles: 765; Anthropic: 1024²/750 → 1399 (under 1.15 MP)
		{"1024 square png", messages.Image{MediaType: "image/png", Source: source("type", "base64", "data", pngData(t, 1024, 1024))}, 1399},
		// Anthropic: 4000×3000 → 1568×1176 = 1.84 MP → scaled to 1.15 MP: 1534; OpenAI: → 2048×1536 → 1024×768, 4 tiles: 765
		{"large jpeg", messages.Image{MediaType: "image/jpeg", Source: source("type", "base64", "data", jpg)}, 1534},
		{"png as a data URL", messages.Image{MediaType: "image/png", Source: source("type", "url", "url", "data:image/png;base64,"+pngData(t, 100, 50))}, 255},
		{"url", messages.Image{MediaType: "image/png", Source: source("type", "url", "url", "https://example.com/a.png")}, providers.ImageTokensDefault},
		{"undecodable", messages.Image{MediaType: "image/png", Source: source("type", "base64", "data", "bm90IGFuIGltYWdl")}, providers.ImageTokensDefault},
	}
	for _, tt := range tests {
		if got := providers.ImageTokens(tt.img); got != tt.want {
			t.Errorf("ImageTokens(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestWithoutImageData(t *testing.T) {
	data := pngData(t, 100, 50)
	img := messages.Image{MediaType: "image/png", Source: source("type", "base64", "data", data)}
	c := messages.AssembledContext{
		Window: []messages.Message{messages.NewMessage(messages.RoleUser, text("no image")),
			messages.NewMessage(messages.RoleUser, img, messages.ToolResult{ToolUseID: "t", Content: messages.Blocks{img}})},
		User: messages.NewMessage(messages.RoleUser, text("look"), img),
	}
	got, n := providers.WithoutImageData(c)
	if n != 3*255 {
		t.Errorf("image tokens %d, want %d", n, 3*255)
	}
	all, _ := json.Marshal(struct {
		W []messages.Message
		U messages.Message
	}{got.Window, got.User})
	if strings.Contains(string(all), data) || strings.Count(string(all), `"image"`) != 3 {
		t.Errorf("images not stood in for: %s", all)
	}
	orig, _ := json.Marshal(struct {
		W []messages.Message
		U messages.Message
	}{c.Window, c.User})
	if strings.Count(string(orig), data) != 3 {
		t.Errorf("the context given was changed: %s", orig)
	}
	if &got.Window[0] == &c.Window[0] {
		t.Error("the window was changed in place")
	}
	plain := messages.AssembledContext{Window: c.Window[:1], User: c.Window[0]}
	if p, n := providers.WithoutImageData(plain); n != 0 || &p.Window[0] != &plain.Window[0] {
		t.Errorf("a context without images was copied (%d tokens)", n)
	}
}

func TestUnsupportedPart(t *testing.T) {
	if got := providers.UnsupportedPart("input_audio"); got != "[content part of type input_audio not supported by this model API]" {
		t.Errorf("UnsupportedPart = %q", got)
	}
	img := messages.Image{MediaType: "image/heic", Source: source("type", "file", "file_id", "f")}
	if got := providers.UnsupportedImage(img); got != "[content part of type image (image/heic, source file) not supported by this model API]" {
		t.Errorf("UnsupportedImage = %q", got)
	}
	if got := providers.UnknownType(messages.Unknown{Provider: "openai", Raw: json.RawMessage(`{"type":"input_file","file_id":"f"}`)}); got != "input_file" {
		t.Errorf("UnknownType = %q", got)
	}
}

// Images and unknown parts of user messages keep their place in the
// layout, with or without tools; a message of an image alone is not
// skipped as empty.
func TestConversationKeepsImages(t *testing.T) {
	img := messages.Image{MediaType: "image/png", Source: source("type", "url", "url", "https://example.com/a.png")}
	part := messages.Unknown{Provider: "openai.chat", Raw: json.RawMessage(`{"type":"input_audio"}`)}
	for _, mode := range []messages.ToolMode{messages.ToolsDisabled, messages.ToolsEnabled} {
		c := messages.AssembledContext{
			Window:   []messages.Message{messages.NewMessage(messages.RoleUser, img), messages.NewMessage(messages.RoleAssistant, text("a cat"))},
			User:     messages.NewMessage(messages.RoleUser, text("and this?"), img, part),
			ToolMode: mode, Tools: []messages.Tool{{Name: "grep"}},
		}
		segs := providers.Conversation(c)
		want := []providers.Segment{{Kind: providers.SegmentUser, Blocks: messages.Blocks{img}},
			{Kind: providers.SegmentAssistant, Blocks: messages.Blocks{text("a cat")}},
			{Kind: providers.SegmentUser, Blocks: messages.Blocks{text("and this?"), img, part}, New: true}}
		if !reflect.DeepEqual(segs, want) {
			t.Errorf("mode %q: segments %+v", mode, segs)
		}
	}
}
