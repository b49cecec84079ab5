// Package providers defines how the runtime talks to language models (SRD
// §11): the Provider interface, its typed errors, and the adapters in the
// subpackages (local, openai, anthropic; fake for tests). Only providers/*
// import provider SDKs.
package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Request is one provider step: the assembled context and the explicit,
// policy-driven parameters of the call.
type Request struct {
	Model           string // the provider's model id
	Context         messages.AssembledContext
	MaxOutputTokens int // always set and bounded by the caller
	// ParallelToolCalls is the tool policy's answer to whether the model
	// may call several tools in one step (OpenAI parallel_tool_calls,
	// Anthropic's disable_parallel_tool_use negated). It matters only
	// when the context carries tools.
	ParallelToolCalls bool
	// Options are provider-specific settings from config, passed through.
	Options json.RawMessage
	// Params are the generation settings an API client sent with the
	// turn: each adapter sends those its API takes under that API's
	// names (ParamsTaker says which it cannot take; the runtime refuses
	// a turn that sets one). MaxOutputTokens and ParallelToolCalls above
	// already hold Params' output bound and parallel_tool_calls.
	Params messages.GenParams
}

// EventKind says what a stream event carries.
type EventKind int

// The kinds of stream event.
const (
	// EventTextDelta: Text is appended to the output at Index (the
	// provider's output/content index; text at different indexes is kept
	// apart, never assumed to be one field).
	EventTextDelta EventKind = iota + 1
	// EventItem: a whole transcript item is done (a tool call, reasoning…).
	EventItem
	// EventOther: a provider event with nothing to show (started, pings,
	// usage updates). It is still journaled.
	EventOther
)

// Event is one streamed event, normalized. Type and Raw are the provider's
// own event name and payload, kept for the stream journal.
type Event struct {
	Kind  EventKind
	Index int
	Text  string
	Item  messages.TranscriptItem
	Type  string
	Raw   json.RawMessage
	// Unhandled marks an event the adapter took nothing from: a type it
	// does not know (a newer API's) or does not use. It is journaled
	// and otherwise skipped; the runtime logs each such type once per
	// step.
	Unhandled bool
}

// Usage is the token usage a provider reports for a step. InputTokens
// counts every prompt token, those the provider's prompt cache served
// (CacheReadTokens) and those it stored in its cache (CacheWriteTokens)
// included.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CacheReadTokens are the prompt tokens read from the prompt cache:
	// OpenAI's cached_tokens, Anthropic's cache_read_input_tokens.
	CacheReadTokens int `json:"cache_read_input_tokens,omitempty"`
	// CacheWriteTokens are the prompt tokens written to the prompt
	// cache: Anthropic's cache_creation_input_tokens (OpenAI reports
	// none; its cache writes cost nothing extra).
	CacheWriteTokens int `json:"cache_creation_input_tokens,omitempty"`
}

// Add returns the sum of u and v, field by field.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens}
}

// Response is the end of a step: the normalized transcript items, the
// outcome, usage, and the raw request and response for the step record.
type Response struct {
	Items   messages.Items
	Outcome messages.StepOutcome
	// Usage is the step's token usage as the upstream reported it
	// (zero when it reported none, say a stream cut before its end).
	Usage Usage
	// Model is the id of the model that answered, as the upstream
	// reported it in its stream; "" when it did not say.
	Model       string
	RawRequest  json.RawMessage
	RawResponse json.RawMessage
}

// Provider is a language model API (SRD §11.1). Implementations are safe
// for concurrent use.
type Provider interface {
	// Name is the provider's name in config ("local", "openai", "anthropic").
	Name() string
	// ContextLimit is the context window of model in tokens.
	ContextLimit(model string) int
	// EstimatePromptTokens estimates the tokens req's context will use.
	EstimatePromptTokens(req Request) (int, error)
	// Stream runs one step, calling emit for every stream event in order,
	// and returns the final response. It stops early with ctx's error when
	// ctx is done, and with emit's error when emit fails. A response
	// already begun and then cut off returns what arrived in Response
	// along with the error.
	Stream(ctx context.Context, req Request, emit func(Event) error) (Response, error)
}

// ErrorKind says what a failed provider call means to whoever asked for
// it: the runtime's retries and the API's answer to its client decide on
// it. The zero ErrorKind is unclassified.
type ErrorKind uint8

// The kinds of provider error.
const (
	// KindUnknown: a failure the kinds do not name (a dropped
	// connection, a malformed stream, an unexpected status).
	KindUnknown ErrorKind = iota
	// KindRateLimited: the upstream is rate limiting the server's key
	// (429, rate_limit_error); RetryAfter says for how long when it
	// said.
	KindRateLimited
	// KindRejected: the upstream refused the request's content (400,
	// 422, invalid_request_error); the same request fails again.
	KindRejected
	// KindAuth: the upstream refused the server's key or its rights
	// (401, 403, authentication_error, permission_error).
	KindAuth
	// KindModelNotFound: the upstream does not know the model (404,
	// model_not_found, not_found_error).
	KindModelNotFound
	// KindOverloaded: the upstream is overloaded (503, 529,
	// overloaded_error).
	KindOverloaded
	// KindServer: the upstream failed (another 5xx, server_error,
	// api_error).
	KindServer
)

var errorKinds = [...]string{"unknown", "rate_limited", "rejected", "auth", "model_not_found", "overloaded", "server"}

// String returns the kind's name ("rate_limited").
func (k ErrorKind) String() string {
	if int(k) < len(errorKinds) {
		return errorKinds[k]
	}
	return fmt.Sprintf("error kind(%d)", k)
}

// StatusKind is the kind of an HTTP error status.
func StatusKind(status int) ErrorKind {
	switch {
	case status == 429:
		return KindRateLimited
	case status == 401 || status == 403:
		return KindAuth
	case status == 404:
		return KindModelNotFound
	case status == 400 || status == 413 || status == 422:
		return KindRejected
	case status == 503 || status == 529:
		return KindOverloaded
	case status >= 500:
		return KindServer
	}
	return KindUnknown
}

// CodeKind is the kind of an error code or type the OpenAI or Anthropic
// API sends in an error body or a stream's error event
// ("rate_limit_exceeded", "overloaded_error"), KindUnknown for one it
// does not name.
func CodeKind(code string) ErrorKind {
	switch code {
	case "rate_limit_exceeded", "rate_limit_error", "insufficient_quota":
		return KindRateLimited
	case "invalid_request_error", "invalid_prompt", "context_length_exceeded", "request_too_large":
		return KindRejected
	case "authentication_error", "permission_error", "invalid_api_key", "invalid_organization":
		return KindAuth
	case "model_not_found", "not_found_error":
		return KindModelNotFound
	case "overloaded_error", "server_is_overloaded", "slow_down":
		return KindOverloaded
	case "server_error", "api_error":
		return KindServer
	}
	return KindUnknown
}

// HTTPKind is the kind of an error response with status (0 for an error
// event in a stream) and codes (the body's code and type): the status's
// kind, else the first code's that names one.
func HTTPKind(status int, codes ...string) ErrorKind {
	if k := StatusKind(status); k != KindUnknown {
		return k
	}
	for _, c := range codes {
		if k := CodeKind(c); k != KindUnknown {
			return k
		}
	}
	return KindUnknown
}

// Error is a failed provider call. Supervision and retries decide on it
// with errors.As.
type Error struct {
	Provider   string
	StatusCode int // HTTP status, 0 when there was none
	Code       string
	Message    string
	// Kind classifies the failure; KindOf derives it from StatusCode
	// and Code when an adapter left it unset.
	Kind       ErrorKind
	Retryable  bool          // 429, 5xx, a dropped connection
	RetryAfter time.Duration // from Retry-After, 0 when absent
	// ContextTooLarge is set when the provider rejected the request for
	// its size, so the shrinker can react.
	ContextTooLarge bool
	Err             error // the underlying error, if any
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s", e.Provider, e.Message)
	if e.StatusCode != 0 {
		s = fmt.Sprintf("%s: status %d: %s", e.Provider, e.StatusCode, e.Message)
	}
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf is the kind of err: its *Error's Kind, else the kind its HTTP
// status or its code says, else KindUnknown.
func KindOf(err error) ErrorKind {
	var pe *Error
	if !errors.As(err, &pe) {
		return KindUnknown
	}
	if pe.Kind != KindUnknown {
		return pe.Kind
	}
	return HTTPKind(pe.StatusCode, pe.Code)
}

// IsRetryable reports whether err is a provider error worth retrying.
func IsRetryable(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Retryable
}
