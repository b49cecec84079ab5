// Package openai is a Provider for the OpenAI Chat Completions API (and
// servers compatible with it), streaming through the official SDK
// github.com/openai/openai-go/v3. It maps an assembled context to one
// chat completion request, normalizes the streamed chunks into provider
// events, and maps HTTP and stream failures to *providers.Error.
//
// The SDK's own retries are off: the runtime retries with
// providers.WithRetry.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// Defaults used by New for unset Options.
const (
	DefaultName         = "openai"
	DefaultBaseURL      = "https://api.openai.com/v1"
	DefaultContextLimit = 128000
)

// EventChunk is the Event.Type of every event made from a streamed chunk.
const EventChunk = "chat.completion.chunk"

// EventToolCall is the Event.Type of the EventItem emitted for each tool
// call once its choice has finished; Raw is the item's JSON form.
const EventToolCall = "chat.completion.tool_call"

// Options configures a Provider.
type Options struct {
	// Name is the provider's name in config; "" means DefaultName.
	Name string
	// BaseURL is the API root, ending in /v1; "" means DefaultBaseURL.
	BaseURL string
	// APIKey is sent as the bearer token. The caller reads it from the
	// environment variable config names; it is never logged.
	APIKey string
	// ContextLimit is the context window reported for every model;
	// 0 (or less) means DefaultContextLimit.
	ContextLimit int
	// HTTPClient, when set, makes the HTTP requests.
	HTTPClient *http.Client
}

// Provider is the OpenAI Chat Completions provider. It is safe for
// concurrent use.
type Provider struct {
	name   string
	limit  int
	client oai.Client
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider configured by opts. Options set here take
// precedence over the SDK's OPENAI_* environment variables for the base
// URL and the key.
func New(opts Options) *Provider {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if opts.ContextLimit <= 0 {
		opts.ContextLimit = DefaultContextLimit
	}
	copts := []option.RequestOption{
		option.WithBaseURL(opts.BaseURL),
		option.WithAPIKey(opts.APIKey),
		option.WithMaxRetries(0),
	}
	if opts.HTTPClient != nil {
		copts = append(copts, option.WithHTTPClient(opts.HTTPClient))
	}
	return &Provider{name: opts.Name, limit: opts.ContextLimit, client: oai.NewClient(copts...)}
}

// Name returns Options.Name.
func (p *Provider) Name() string { return p.name }

// ContextLimit returns Options.ContextLimit whatever the model.
func (p *Provider) ContextLimit(string) int { return p.limit }

// EstimatePromptTokens returns a rough estimate of the prompt's size: one
// token per four characters (runes) of the JSON messages and tools the
// request would send, rounded up. It fails when the context cannot be
// mapped to a request.
func (p *Provider) EstimatePromptTokens(req providers.Request) (int, error) {
	msgs, err := buildMessages(req.Context)
	if err != nil {
		return 0, fmt.Errorf("%s: estimate prompt tokens: %w", p.name, err)
	}
	tools, err := buildTools(req.Context)
	if err != nil {
		return 0, fmt.Errorf("%s: estimate prompt tokens: %w", p.name, err)
	}
	data, err := json.Marshal(struct {
		Messages []oai.ChatCompletionMessageParamUnion `json:"messages"`
		Tools    []oai.ChatCompletionToolUnionParam    `json:"tools,omitempty"`
	}{msgs, tools})
	if err != nil {
		return 0, fmt.Errorf("%s: estimate prompt tokens: encode: %w", p.name, err)
	}
	return (utf8.RuneCount(data) + 3) / 4, nil
}

// Stream runs one chat completion with streaming. For every chunk it
// emits one EventTextDelta per choice with content (or refusal) text,
// Index being the choice index, or an EventOther when the chunk carries
// no text; Type is EventChunk and Raw the chunk's JSON. When a choice
// finishes with tool calls, an EventItem of type EventToolCall follows
// for each.
//
// The outcome follows the finish reason: "stop" is Completed, "length"
// Incomplete{Reason: "max_output_tokens"}, "content_filter"
// Incomplete{Reason: "content_filter"}, "tool_calls" and "function_call"
// Paused{Reason: "tool_use"}; any other reason is Incomplete with the
// reason as given. A stream that ends before a finish reason fails with
// a retryable *providers.Error; HTTP errors map to *providers.Error too.
// On failure the response holds what arrived. When ctx is done, Stream
// returns ctx.Err() with outcome Cancelled.
func (p *Provider) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	s := newStream(p.name, emit)
	params, err := buildParams(req)
	if err != nil {
		err = fmt.Errorf("%s: build request: %w", p.name, err)
		return s.fail("bad_request", err), err
	}
	if body, merr := json.Marshal(params); merr == nil {
		s.rawRequest = body // replaced by the bytes sent, once sent
	}
	if err := ctx.Err(); err != nil {
		return s.cancelled(), err
	}
	capture := &exchange{}
	stream := p.client.Chat.Completions.NewStreaming(ctx, params, option.WithMiddleware(capture.middleware))
	defer stream.Close()
	for stream.Next() {
		if err := s.chunk(stream.Current()); err != nil {
			s.setRawRequest(capture.body)
			return s.emitFailed(err)
		}
	}
	s.setRawRequest(capture.body)
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return s.cancelled(), ctx.Err()
		}
		perr := toError(p.name, err, capture.response)
		return s.fail(outcomeCode(perr), perr), perr
	}
	if ctx.Err() != nil {
		return s.cancelled(), ctx.Err()
	}
	return s.finish()
}

// outcomeCode is the Failed outcome's code for err: its error code, else
// its HTTP status ("http_503").
func outcomeCode(err *providers.Error) string {
	if err.Code == "" && err.StatusCode != 0 {
		return "http_" + strconv.Itoa(err.StatusCode)
	}
	return err.Code
}

// exchange records the request body sent and the HTTP response received,
// for the step record and for errors the SDK could not decode.
type exchange struct {
	body     []byte
	response *http.Response
}

// middleware copies the request body, then passes the request on.
func (x *exchange) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			x.body, _ = io.ReadAll(rc)
			_ = rc.Close()
		}
	}
	resp, err := next(req)
	x.response = resp
	return resp, err
}

// compactJSON returns data compacted when it is valid JSON, else nil.
func compactJSON(data []byte) json.RawMessage {
	var buf bytes.Buffer
	if len(data) == 0 || json.Compact(&buf, data) != nil {
		return nil
	}
	return buf.Bytes()
}

// pausedToolUse is the outcome of a step that stopped to call tools.
var pausedToolUse = messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}
