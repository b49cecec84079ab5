// Package anthropic is a Provider for the Anthropic Messages API (SRD
// §11.3), streaming through the official SDK
// github.com/anthropics/anthropic-sdk-go. It maps an assembled context to
// one Messages request (the system prompt top-level, roles alternating,
// tool results first in the user message right after the tool uses they
// answer), normalizes the block-indexed stream into provider events, and
// maps HTTP and stream failures to *providers.Error.
//
// The SDK's own retries are off (the runtime retries with
// providers.WithRetry), and so is its autoloading of credentials and base
// URL from ANTHROPIC_* variables and profile files: Options is the only
// configuration.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// Defaults used by New for unset Options.
const (
	DefaultName         = "anthropic"
	DefaultBaseURL      = "https://api.anthropic.com" // the SDK adds /v1/messages
	DefaultContextLimit = 200000
)

// EventBlockDone is the Event.Type of the EventItem emitted when a
// tool_use, thinking or unknown content block has stopped; Raw is the
// item's JSON form (messages.MarshalItem).
const EventBlockDone = "content_block_done"

// Options configures a Provider.
type Options struct {
	// Name is the provider's name in config; "" means DefaultName.
	Name string
	// BaseURL is the API root, without /v1; "" means DefaultBaseURL.
	BaseURL string
	// APIKey is sent in the x-api-key header. The caller reads it from
	// the environment variable config names; it is never logged, and it
	// appears in no error and no raw request.
	APIKey string
	// ContextLimit is the context window reported for every model;
	// 0 (or less) means DefaultContextLimit.
	ContextLimit int
	// HTTPClient, when set, makes the HTTP requests; by default a client
	// that waits at most 10 minutes for response headers.
	HTTPClient *http.Client
	// NoCache sends no prompt cache breakpoints (cache_control): the
	// model's cache option off. By default the stable prefix of every
	// request is marked (see markCache).
	NoCache bool
}

// Provider is the Anthropic Messages provider. It is safe for concurrent
// use.
type Provider struct {
	name   string
	limit  int
	cache  bool
	client sdk.Client
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider configured by opts alone: the SDK's environment
// defaults (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles) are not read.
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
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(opts.BaseURL),
		option.WithAPIKey(opts.APIKey),
		option.WithMaxRetries(0),
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = defaultHTTPClient()
	}
	copts = append(copts, option.WithHTTPClient(opts.HTTPClient))
	return &Provider{name: opts.Name, limit: opts.ContextLimit, cache: !opts.NoCache, client: sdk.NewClient(copts...)}
}

// responseHeaderTimeout bounds the wait for response headers of the
// default HTTP client, as the SDK's own default client does; a stream's
// body is not bounded.
const responseHeaderTimeout = 10 * time.Minute

// defaultHTTPClient is the HTTP client used when Options has none.
func defaultHTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{Transport: http.DefaultTransport}
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = responseHeaderTimeout
	return &http.Client{Transport: t}
}

// Name returns Options.Name.
func (p *Provider) Name() string { return p.name }

// ContextLimit returns Options.ContextLimit whatever the model.
func (p *Provider) ContextLimit(string) int { return p.limit }

// EstimatePromptTokens estimates the prompt's size: tokens.Anthropic's
// estimate (Claude's tokenizer is not public) of the JSON system prompt,
// messages, tools and tool choice the request would send, whose keys
// and quotes cost more than the framing they stand for; images count
// providers.ImageTokens rather than their data. It fails when the
// context cannot be mapped to a request.
func (p *Provider) EstimatePromptTokens(req providers.Request) (int, error) {
	c, images := providers.WithoutImageData(req.Context)
	tools, err := buildTools(c)
	if err != nil {
		return 0, fmt.Errorf("%s: estimate prompt tokens: %w", p.name, err)
	}
	msgs, err := buildMessages(c)
	if err != nil {
		return 0, fmt.Errorf("%s: estimate prompt tokens: %w", p.name, err)
	}
	choice, err := buildToolChoice(c, req.ParallelToolCalls)
	if err != nil {
		return 0, fmt.Errorf("%s: estimate prompt tokens: %w", p.name, err)
	}
	est := struct {
		System     string                    `json:"system,omitempty"`
		Messages   []sdk.MessageParam        `json:"messages"`
		Tools      []sdk.ToolUnionParam      `json:"tools,omitempty"`
		ToolChoice *sdk.ToolChoiceUnionParam `json:"tool_choice,omitempty"`
	}{System: providers.SystemText(c), Messages: msgs, Tools: tools}
	if len(tools) > 0 {
		est.ToolChoice = &choice
	}
	data, err := json.Marshal(est)
	if err != nil {
		return 0, fmt.Errorf("%s: estimate prompt tokens: encode: %w", p.name, err)
	}
	return tokens.ForModel("anthropic", req.Model).Count(string(data)) + images, nil
}

// Stream runs one Messages request with streaming. Each stream event
// becomes one provider event whose Type is the event's type and Raw its
// JSON: text deltas (and text a text block starts with) are
// EventTextDelta with Index the content block index; every other event
// is EventOther. When a tool_use, thinking or unknown block stops, an
// EventItem of type EventBlockDone follows with its transcript item.
// Pings never reach the adapter (the SDK drops them); event types it
// does not know are passed on as EventOther and otherwise ignored.
//
// The outcome follows the stop reason: end_turn and stop_sequence are
// Completed; max_tokens is Incomplete{Reason: "max_output_tokens"},
// refusal Incomplete{Reason: "refusal"}, model_context_window_exceeded
// Incomplete{Reason: "context_window"}; tool_use is Paused{Reason:
// "tool_use"} and pause_turn Paused{Reason: "pause_turn"}; any other
// reason is Incomplete with the reason as given. A stream that ends
// before message_stop and a stop reason fails with a retryable
// *providers.Error, as does an error event saying the API is overloaded
// or failed; HTTP errors map to *providers.Error too. On failure the
// response holds what arrived, with outcome Failed. When ctx is done,
// Stream returns ctx.Err() with outcome Cancelled.
func (p *Provider) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	s := newStream(p.name, emit)
	params, err := buildParams(req, p.cache)
	if err == nil {
		s.rawRequest, err = json.Marshal(params) // replaced by the bytes sent, once sent
	}
	if err != nil {
		err = fmt.Errorf("%s: build request: %w", p.name, err)
		return s.fail("bad_request", err), err
	}
	if err := ctx.Err(); err != nil {
		return s.cancelled(), err
	}
	capture := &providers.Exchange{}
	// The body is sent as encoded above rather than encoded again by the
	// client; what the client reads from params besides the body (its
	// headers, its thinking warning) it still finds in head.
	head := sdk.MessageNewParams{Model: params.Model, Thinking: params.Thinking,
		UserProfileID: params.UserProfileID, WorkspaceID: params.WorkspaceID}
	// The SDK makes the request (auth, retries, errors); its events are
	// decoded here as streamEvent (see there).
	var res *http.Response
	call := p.client.Messages.NewStreaming(ctx, head, option.WithRequestBody("application/json", []byte(s.rawRequest)),
		option.WithMiddleware(capture.Middleware), option.WithResponseInto(&res))
	defer call.Close()
	var stream *ssestream.Stream[streamEvent]
	switch {
	case call.Err() != nil:
		stream = ssestream.NewStream[streamEvent](nil, call.Err())
	case res == nil:
		stream = ssestream.NewStream[streamEvent](nil, errors.New("the client returned no response"))
	default:
		stream = ssestream.NewStream[streamEvent](ssestream.NewDecoder(res), nil)
	}
	defer stream.Close()
	for stream.Next() {
		if err := s.event(stream.Current()); err != nil {
			s.setRawRequest(capture.Body)
			return s.emitFailed(err)
		}
		if ctx.Err() != nil {
			s.setRawRequest(capture.Body)
			return s.cancelled(), ctx.Err()
		}
	}
	s.setRawRequest(capture.Body)
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return s.cancelled(), ctx.Err()
		}
		perr := toError(p.name, err, capture.Response)
		return s.fail(providers.OutcomeCode(perr), perr), perr
	}
	if ctx.Err() != nil {
		return s.cancelled(), ctx.Err()
	}
	return s.finish()
}

// isObject reports whether raw is a JSON object.
func isObject(raw []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// The outcomes of the stop reasons that are not Completed.
var (
	pausedToolUse   = messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}
	pausedPauseTurn = messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "pause_turn"}
)
