package providers

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig reads GIF sizes
	_ "image/jpeg"
	_ "image/png"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// ErrInvalidToolChoice is returned (wrapped, naming the field) when a
// context's ToolChoice cannot be sent: an unknown mode, or mode "tool"
// without a name or naming a tool the request does not offer.
var ErrInvalidToolChoice = errors.New("providers: invalid tool choice")

// ToolChoice is the tool choice a request for c sends, after checking
// c.ToolChoice: the zero value when the request offers no tools
// (SendsTools is false) or leaves the choice to the API's default (Mode
// ""); c.ToolChoice otherwise. It fails with ErrInvalidToolChoice, naming
// Context.ToolChoice, when the mode is none of "", "auto", "none",
// "required" and "tool", or when mode "tool" names no tool or a tool c
// does not offer; whether or not tools are offered, so that a bad choice
// is found at once rather than when tools come.
func ToolChoice(c messages.AssembledContext) (messages.ToolChoice, error) {
	tc := c.ToolChoice
	switch tc.Mode {
	case "", messages.ToolChoiceAuto, messages.ToolChoiceNone, messages.ToolChoiceRequired:
	case messages.ToolChoiceTool:
		if tc.Name == "" {
			return messages.ToolChoice{}, fmt.Errorf("%w: Context.ToolChoice.Name: required with mode %q", ErrInvalidToolChoice, tc.Mode)
		}
		offered := SendsTools(c) && slices.ContainsFunc(c.Tools, func(t messages.Tool) bool { return t.Name == tc.Name })
		if !offered {
			return messages.ToolChoice{}, fmt.Errorf("%w: Context.ToolChoice.Name %q: names no tool the request offers", ErrInvalidToolChoice, tc.Name)
		}
	default:
		return messages.ToolChoice{}, fmt.Errorf("%w: Context.ToolChoice.Mode %q: must be %q, %q, %q, %q or empty", ErrInvalidToolChoice,
			tc.Mode, messages.ToolChoiceAuto, messages.ToolChoiceNone, messages.ToolChoiceRequired, messages.ToolChoiceTool)
	}
	if tc.Mode == "" || !SendsTools(c) {
		return messages.ToolChoice{}, nil
	}
	return tc, nil
}

// UnsupportedPart is the text sent in place of a user content part the
// target API cannot take (an image from a source it does not read, a
// part another API's client sent): a short note, so that the model knows
// something was there and nothing is dropped silently.
func UnsupportedPart(kind string) string {
	if kind == "" {
		kind = "unknown"
	}
	return "[content part of type " + kind + " not supported by this model API]"
}

// UnsupportedImage is UnsupportedPart for an image an API cannot take,
// naming its media type and its source's type when known:
// "[content part of type image (image/heic, source file) not supported
// by this model API]".
func UnsupportedImage(img messages.Image) string {
	s := ReadImageSource(img)
	var details []string
	if s.MediaType != "" {
		details = append(details, s.MediaType)
	}
	if s.Type != "" {
		details = append(details, "source "+s.Type)
	}
	if len(details) == 0 {
		return UnsupportedPart("image")
	}
	return UnsupportedPart("image (" + strings.Join(details, ", ") + ")")
}

// UnknownType is the "type" of an unknown block's raw JSON, "" when it
// has none.
func UnknownType(u messages.Unknown) string {
	var v struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(u.Raw, &v)
	return v.Type
}

// ImageSource is an image's source as the adapters read it: Type
// "base64" (Data holding the bytes in standard base64), "url" (URL; a
// data URL is read as base64), "file" (FileID, an Anthropic file), or
// another type no adapter reads. MediaType is the image's: the block's,
// unless that is "" or "image/*" and the source or the data URL says
// more.
type ImageSource struct {
	Type, MediaType, Data, URL, FileID string
}

// ReadImageSource reads img's source. A url source holding a base64 data
// URL ("data:image/png;base64,…") comes back as a base64 source, a data
// URL that is not base64 as a base64 source of its decoded bytes.
func ReadImageSource(img messages.Image) ImageSource {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
		FileID    string `json:"file_id"`
	}
	_ = json.Unmarshal(img.Source, &src)
	s := ImageSource{Type: src.Type, MediaType: img.MediaType, Data: src.Data, URL: src.URL, FileID: src.FileID}
	if (s.MediaType == "" || s.MediaType == "image/*") && src.MediaType != "" {
		s.MediaType = src.MediaType
	}
	if s.Type == "url" {
		if mt, data, ok := parseDataURL(s.URL); ok {
			s.Type, s.Data, s.URL = "base64", data, ""
			if s.MediaType == "" || s.MediaType == "image/*" {
				s.MediaType = mt
			}
		}
	}
	return s
}

// ImageURL is the URL OpenAI's APIs take for img: the URL of a url
// source, a data URL for a base64 source ("data:MEDIA;base64,DATA");
// ok is false for any other source.
func ImageURL(img messages.Image) (u string, ok bool) {
	s := ReadImageSource(img)
	switch {
	case s.Type == "url" && s.URL != "":
		return s.URL, true
	case s.Type == "base64" && s.Data != "":
		mt := s.MediaType
		if mt == "" {
			mt = "image/*"
		}
		return "data:" + mt + ";base64," + s.Data, true
	}
	return "", false
}

// parseDataURL splits a data URL into its media type and its bytes in
// standard base64; ok is false when u is not a data URL.
func parseDataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	head, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	params := strings.Split(head, ";")
	mediaType = params[0]
	if slices.Contains(params[1:], "base64") {
		return mediaType, payload, true
	}
	raw, err := url.PathUnescape(payload)
	if err != nil {
		return "", "", false
	}
	return mediaType, base64.StdEncoding.EncodeToString([]byte(raw)), true
}

// ImageTokensDefault is ImageTokens' estimate for an image whose size it
// cannot read: about the most Anthropic (1600) and OpenAI at high detail
// (1445 for a 2048×768 image) charge for one image.
const ImageTokensDefault = 1600

// ImageTokens estimates the prompt tokens of an image. When its source
// holds its bytes (base64, or a data URL) as PNG, JPEG or GIF, its size
// is read and the larger of the two APIs' charges is taken: Anthropic's
// width×height/750 once scaled to at most 1568 pixels a side and 1.15
// megapixels, and OpenAI's high detail 85 + 170 per 512-pixel tile once
// scaled to fit 2048×2048 and then 768 pixels on its short side. Any
// other image counts ImageTokensDefault.
func ImageTokens(img messages.Image) int {
	s := ReadImageSource(img)
	if s.Type != "base64" || s.Data == "" {
		return ImageTokensDefault
	}
	cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(s.Data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return ImageTokensDefault
	}
	return max(anthropicImageTokens(float64(cfg.Width), float64(cfg.Height)),
		openAIImageTokens(float64(cfg.Width), float64(cfg.Height)))
}

func anthropicImageTokens(w, h float64) int {
	if long := max(w, h); long > 1568 {
		w, h = w*1568/long, h*1568/long
	}
	if area := w * h; area > 1.15e6 {
		f := math.Sqrt(1.15e6 / area)
		w, h = w*f, h*f
	}
	return int(math.Ceil(w * h / 750))
}

func openAIImageTokens(w, h float64) int {
	if long := max(w, h); long > 2048 {
		w, h = w*2048/long, h*2048/long
	}
	if short := min(w, h); short > 768 {
		w, h = w*768/short, h*768/short
	}
	return 85 + 170*int(math.Ceil(w/512))*int(math.Ceil(h/512))
}

// WithoutImageData returns c with the source of every image of its
// window, pending and user messages (tool results' content included)
// replaced by a short URL stand-in, and the images' tokens by
// ImageTokens: for an adapter that estimates a prompt by counting the
// tokens of its JSON, as an image's base64 text would count thousands of
// times what the image costs. c itself is not changed.
func WithoutImageData(c messages.AssembledContext) (messages.AssembledContext, int) {
	n := 0
	msgs := func(ms []messages.Message) []messages.Message {
		var out []messages.Message
		for i, m := range ms {
			bs, changed := blocksWithoutImageData(m.Blocks, &n)
			if !changed {
				continue
			}
			if out == nil {
				out = slices.Clone(ms)
			}
			out[i].Blocks = bs
		}
		if out == nil {
			return ms
		}
		return out
	}
	c.Window = msgs(c.Window)
	c.Pending = msgs(c.Pending)
	if bs, changed := blocksWithoutImageData(c.User.Blocks, &n); changed {
		c.User.Blocks = bs
	}
	return c, n
}

// imageStandIn is the source an image's is replaced with for estimates.
var imageStandIn = json.RawMessage(`{"type":"url","url":"https://image.invalid/"}`)

// blocksWithoutImageData is bs with its images' sources replaced (see
// WithoutImageData), adding their tokens to n; changed is false, and bs
// returned as it is, when bs holds no image.
func blocksWithoutImageData(bs messages.Blocks, n *int) (out messages.Blocks, changed bool) {
	for i, b := range bs {
		var nb messages.ContentBlock
		switch b := b.(type) {
		case messages.Image:
			*n += ImageTokens(b)
			nb = messages.Image{MediaType: b.MediaType, Source: imageStandIn}
		case messages.ToolResult:
			content, ok := blocksWithoutImageData(b.Content, n)
			if !ok {
				continue
			}
			b.Content = content
			nb = b
		default:
			continue
		}
		if out == nil {
			out = slices.Clone(bs)
		}
		out[i] = nb
	}
	if out == nil {
		return bs, false
	}
	return out, true
}
