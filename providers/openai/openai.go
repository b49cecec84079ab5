// Package openai is a Provider for OpenAI's two text generation APIs,
// streaming through the official SDK github.com/openai/openai-go/v3:
//
//   - the Responses API (POST /v1/responses), OpenAI's own API and the
//     default for it, whose output is a typed list of items (messages,
//     function calls, reasoning…);
//   - the Chat Completions API (POST /v1/chat/completions), which
//     OpenAI-compatible servers (Ollama, vLLM, llama.cpp's server…)
//     speak, and the default for any server other than OpenAI's.
//
// Both map an assembled context to one request (the system text from
// providers.SystemText, the conversation from providers.Conversation),
// normalize the streamed events into provider events and transcript
// items, and map HTTP and stream failures to *providers.Error.
//
// The SDK's own retries are off: the runtime retries with
// providers.WithRetry.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// Defaults used by New for unset Options.
const (
	DefaultName         = "openai"
	DefaultBaseURL      = "https://api.openai.com/v1"
	DefaultContextLimit = 128000
)

// The values of Options.API.
const (
	APIResponses = "responses" // the Responses API
	APIChat      = "chat"      // the Chat Completions API
)

// The values of Options.Truncation.
const (
	// TruncationDisabled makes a request over the model's context window
	// fail (context_length_exceeded, ContextTooLarge), so the runtime's
	// shrinker decides what to drop (SRD §7.2).
	TruncationDisabled = "disabled"
	// TruncationAuto lets the server drop items from the start of the
	// conversation to fit the window.
	TruncationAuto = "auto"
)

// openAIHost is the host of OpenAI's own API.
const openAIHost = "api.openai.com"

// Options configures a Provider. The zero value talks to OpenAI's
// Responses API with store false and truncation disabled.
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
	// API is the API requests use: APIResponses or APIChat. "" picks
	// APIResponses when BaseURL is empty or points at OpenAI itself
	// (host api.openai.com), and APIChat for any other server, as
	// OpenAI-compatible servers (Ollama, vLLM, llama.cpp's server…)
	// speak Chat Completions.
	API string
	// Store is the Responses API's store: whether OpenAI keeps the
	// response (SRD §11.2, privacy-configured). Default false; it is
	// always sent. Chat Completions requests send store only when it is
	// true, as compatible servers need not know the field.
	Store bool
	// Truncation is the Responses API's truncation: TruncationDisabled
	// (the default, also for "") or TruncationAuto. It is always sent
	// to the Responses API; Chat Completions has no such parameter.
	Truncation string
	// EncryptedReasoning asks the Responses API for the encrypted content
	// of reasoning items (include reasoning.encrypted_content) when Store
	// is false, so that a tool loop can send the model's reasoning back
	// to it. Only reasoning models accept it (others reject the request:
	// "Encrypted content is not supported with this model"), so it is
	// off by default; without it reasoning items are recorded but not
	// sent back.
	EncryptedReasoning bool
}

// Validate reports every invalid option at once (errors.Join), naming the
// field and the values it allows. New does not fail: a Provider made from
// invalid options fails each call with Validate's error, so callers
// validate first.
func (o Options) Validate() error {
	var errs []error
	switch o.API {
	case "", APIResponses, APIChat:
	default:
		errs = append(errs, fmt.Errorf("openai: options: API %q: must be %q, %q or empty (responses for OpenAI's own API, chat for other servers)", o.API, APIResponses, APIChat))
	}
	switch o.Truncation {
	case "", TruncationDisabled, TruncationAuto:
	default:
		errs = append(errs, fmt.Errorf("openai: options: Truncation %q: must be %q, %q or empty (disabled)", o.Truncation, TruncationDisabled, TruncationAuto))
	}
	if o.BaseURL != "" {
		if u, err := url.Parse(o.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("openai: options: BaseURL %q: must be an http or https URL", o.BaseURL))
		}
	}
	return errors.Join(errs...)
}

// resolvedAPI is the API o selects, "" being resolved from BaseURL.
func (o Options) resolvedAPI() string {
	if o.API != "" {
		return o.API
	}
	if o.BaseURL == "" {
		return APIResponses
	}
	if u, err := url.Parse(o.BaseURL); err == nil && strings.EqualFold(u.Hostname(), openAIHost) {
		return APIResponses
	}
	return APIChat
}

// Provider is the OpenAI provider. It is safe for concurrent use.
type Provider struct {
	name       string
	limit      int
	api        string
	store      bool
	truncation string
	reasoning  bool  // ask for encrypted reasoning
	optsErr    error // from Options.Validate, returned by every call
	client     oai.Client
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider configured by opts, with defaults for unset
// options. Options set here take precedence over the SDK's OPENAI_*
// environment variables for the base URL and the key. New does not fail:
// check opts.Validate first; invalid options make every call fail.
func New(opts Options) *Provider {
	optsErr := opts.Validate()
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.ContextLimit <= 0 {
		opts.ContextLimit = DefaultContextLimit
	}
	api := opts.resolvedAPI()
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if opts.Truncation == "" {
		opts.Truncation = TruncationDisabled
	}
	copts := clientOptions(opts.BaseURL, opts.APIKey, opts.HTTPClient)
	return &Provider{
		name:       opts.Name,
		limit:      opts.ContextLimit,
		api:        api,
		store:      opts.Store,
		truncation: opts.Truncation,
		reasoning:  opts.EncryptedReasoning,
		optsErr:    optsErr,
		client:     oai.NewClient(copts...),
	}
}

// Name returns Options.Name.
func (p *Provider) Name() string { return p.name }

// API returns the API the provider uses, APIResponses or APIChat.
func (p *Provider) API() string { return p.api }

// ContextLimit returns Options.ContextLimit whatever the model.
func (p *Provider) ContextLimit(string) int { return p.limit }

// EstimatePromptTokens estimates the prompt's size: the tokens, in
// req.Model's tiktoken encoding (tokens.ForModel), of the JSON
// instructions, messages or input items, and tools the request would
// send. JSON keys and quotes cost more than the chat framing they stand
// for, so it errs high. It fails when the options are invalid or the
// context cannot be mapped to a request.
func (p *Provider) EstimatePromptTokens(req providers.Request) (int, error) {
	if p.optsErr != nil {
		return 0, p.optsErr
	}
	var n int
	var err error
	tc := tokens.ForModel("openai", req.Model)
	if p.api == APIChat {
		n, err = estimateChat(req.Context, tc)
	} else {
		n, err = p.estimateResponses(req.Context, tc)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: estimate prompt tokens: %w", p.name, err)
	}
	return n, nil
}

// Stream runs one step on the provider's API with streaming. Every
// stream event is emitted, in order, with Type the provider's event name
// and Raw its JSON; text deltas are EventTextDelta, whole items (tool
// calls, reasoning…) EventItem, and everything else, known or not,
// EventOther.
//
// Outcomes, Responses API: response.completed is Completed, or
// Paused{tool_use} when the output holds function calls;
// response.incomplete is Incomplete{incomplete_details.reason}
// ("max_output_tokens", "content_filter", any other as given, "unknown"
// when none); response.failed and an error event are Failed{code,
// message} with a *providers.Error (server_error and rate_limit_exceeded
// retryable, context_length_exceeded ContextTooLarge).
//
// Outcomes, Chat Completions: finish reason "stop" is Completed, "length"
// Incomplete{max_output_tokens}, "content_filter"
// Incomplete{content_filter}, "tool_calls" and "function_call"
// Paused{tool_use}, any other Incomplete{reason}.
//
// For both, a refusal is kept as the assistant's text and does not change
// the outcome. A stream that ends before its terminal event (a dropped
// connection) fails with a retryable *providers.Error; HTTP errors map
// to *providers.Error too (429 and 5xx retryable, with Retry-After;
// context_length_exceeded sets ContextTooLarge). On failure the response
// holds what arrived. When ctx is done, Stream returns ctx.Err() with
// outcome Cancelled. Bad input fails before anything is sent, with an
// error naming the field and outcome Failed{bad_request}.
func (p *Provider) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	if p.optsErr != nil {
		return providers.Response{Outcome: messages.StepOutcome{
			Kind: messages.OutcomeFailed, Code: "bad_config", Message: p.optsErr.Error()}}, p.optsErr
	}
	if p.api == APIChat {
		return p.streamChat(ctx, req, emit)
	}
	return p.streamResponses(ctx, req, emit)
}

// pausedToolUse is the outcome of a step that stopped to call tools.
var pausedToolUse = messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}

// toolCallItem makes a tool call item. Arguments is a JSON string holding
// the model's arguments text exactly, so that arguments cut short (or
// otherwise not JSON) are kept too (providers.ArgumentsText reads it
// back).
func toolCallItem(id, name, args string) messages.ToolCall {
	data, err := json.Marshal(args)
	if err != nil {
		data = []byte(`""`)
	}
	return messages.ToolCall{CallID: id, Name: name, Arguments: data}
}

// clientOptions are the SDK client's options for an API root and key:
// the SDK's own retries are off (the runtime retries), and hc, if set,
// makes the requests.
func clientOptions(baseURL, apiKey string, hc *http.Client) []option.RequestOption {
	o := []option.RequestOption{option.WithBaseURL(baseURL), option.WithAPIKey(apiKey), option.WithMaxRetries(0)}
	if hc != nil {
		o = append(o, option.WithHTTPClient(hc))
	}
	return o
}
