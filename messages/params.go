package messages

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// GenParams are the generation settings an API client sent with a turn
// (the proxy): sampling, the output's bound, format and stop sequences,
// reasoning. A field left nil (or empty) is not sent: the upstream's
// default applies. Each provider adapter sends the fields its API takes,
// under that API's names (OpenAI's stop is Anthropic's stop_sequences,
// response_format is Responses' text.format and Anthropic's
// output_config.format…), and says which it cannot take
// (providers.ParamsTaker): a turn is refused naming them rather than sent
// without them.
//
// They are kept with the turn (TurnAccepted.Params): every provider step
// of the turn's tool loop uses them, after a restart too. The JSON names
// below are the runtime's own; errors name a field by them
// ("params.top_k").
type GenParams struct {
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	TopK             *int     `json:"top_k,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
	// LogitBias maps token ids (as strings, OpenAI's) to a bias.
	LogitBias map[string]float64 `json:"logit_bias,omitempty"`
	// MaxOutputTokens bounds the step's output, in place of the model's
	// configured max_output_tokens.
	MaxOutputTokens *int `json:"max_output_tokens,omitempty"`
	// Stop are sequences at which the model stops.
	Stop []string `json:"stop,omitempty"`
	// ResponseFormat constrains the reply's text: JSON, or JSON of a
	// schema (structured outputs).
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// ParallelToolCalls, when set, says whether the model may call
	// several tools in one step, in place of the runtime's
	// tools.parallel.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// ReasoningEffort is OpenAI's reasoning effort (none, minimal, low,
	// medium, high, xhigh) or Anthropic's output_config.effort (low,
	// medium, high, xhigh, max).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Thinking is Anthropic's extended thinking.
	Thinking *Thinking `json:"thinking,omitempty"`
	// Verbosity is OpenAI's verbosity of the answer (low, medium, high).
	Verbosity string `json:"verbosity,omitempty"`
	// CacheControl is a client's request to cache the prompt (Anthropic's
	// cache_control, on any block of its request). The runtime lays the
	// prompt out itself, so it places the cache breakpoints itself, at the
	// ends of the prompt's stable parts, with this TTL.
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// CacheControl asks for the prompt to be cached: Type "ephemeral" (the
// only one), TTL "5m" or "1h" ("" is the API's default, 5m).
type CacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// ResponseFormat is the format of a reply's text: Type "text" (the
// default), "json_object" (any JSON object) or "json_schema" (JSON valid
// against Schema, named Name; Strict asks the upstream to enforce it).
type ResponseFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// The response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// Thinking is Anthropic's thinking setting: Type "enabled" (with
// BudgetTokens), "adaptive" or "disabled"; Display "summarized" or
// "omitted" (empty: the model's default).
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// The thinking types.
const (
	ThinkingEnabled  = "enabled"
	ThinkingAdaptive = "adaptive"
	ThinkingDisabled = "disabled"
)

// IsZero reports whether p sets nothing.
func (p GenParams) IsZero() bool { return len(p.Set()) == 0 }

// Set returns the JSON names of the fields p sets, in the order of the
// struct's fields.
func (p GenParams) Set() []string {
	var out []string
	add := func(name string, set bool) {
		if set {
			out = append(out, name)
		}
	}
	add("temperature", p.Temperature != nil)
	add("top_p", p.TopP != nil)
	add("top_k", p.TopK != nil)
	add("frequency_penalty", p.FrequencyPenalty != nil)
	add("presence_penalty", p.PresencePenalty != nil)
	add("seed", p.Seed != nil)
	add("logit_bias", len(p.LogitBias) > 0)
	add("max_output_tokens", p.MaxOutputTokens != nil)
	add("stop", len(p.Stop) > 0)
	add("response_format", p.ResponseFormat != nil)
	add("parallel_tool_calls", p.ParallelToolCalls != nil)
	add("reasoning_effort", p.ReasoningEffort != "")
	add("thinking", p.Thinking != nil)
	add("verbosity", p.Verbosity != "")
	add("cache_control", p.CacheControl != nil)
	return out
}

// Clone returns a copy of p that shares no memory with it.
func (p GenParams) Clone() GenParams {
	c := p
	if p.Temperature != nil {
		c.Temperature = new(*p.Temperature)
	}
	if p.TopP != nil {
		c.TopP = new(*p.TopP)
	}
	if p.TopK != nil {
		c.TopK = new(*p.TopK)
	}
	if p.FrequencyPenalty != nil {
		c.FrequencyPenalty = new(*p.FrequencyPenalty)
	}
	if p.PresencePenalty != nil {
		c.PresencePenalty = new(*p.PresencePenalty)
	}
	if p.Seed != nil {
		c.Seed = new(*p.Seed)
	}
	c.LogitBias = maps.Clone(p.LogitBias)
	if p.MaxOutputTokens != nil {
		c.MaxOutputTokens = new(*p.MaxOutputTokens)
	}
	c.Stop = slices.Clone(p.Stop)
	if p.ResponseFormat != nil {
		f := *p.ResponseFormat
		f.Schema = slices.Clone(f.Schema)
		if f.Strict != nil {
			f.Strict = new(*f.Strict)
		}
		c.ResponseFormat = &f
	}
	if p.ParallelToolCalls != nil {
		c.ParallelToolCalls = new(*p.ParallelToolCalls)
	}
	if p.Thinking != nil {
		c.Thinking = new(*p.Thinking)
	}
	if p.CacheControl != nil {
		c.CacheControl = new(*p.CacheControl)
	}
	return c
}

// MaxStopSequences is the most stop sequences GenParams.Stop holds.
const MaxStopSequences = 16

// Check checks what no upstream takes, naming the field (by its JSON
// name) and the limit: a positive output bound, at most
// MaxStopSequences stop sequences none empty, a known response format (a
// JSON object schema with json_schema, and only there), a known thinking
// type (a positive budget when enabled), a positive top_k. Ranges that
// differ between APIs (temperature…) are the upstream's to check.
func (p GenParams) Check() error {
	bad := func(format string, args ...any) error { return fmt.Errorf(format, args...) }
	switch {
	case p.MaxOutputTokens != nil && *p.MaxOutputTokens < 1:
		return bad("max_output_tokens: %d, want at least 1", *p.MaxOutputTokens)
	case p.TopK != nil && *p.TopK < 1:
		return bad("top_k: %d, want at least 1", *p.TopK)
	case len(p.Stop) > MaxStopSequences:
		return bad("stop: %d sequences, limit %d", len(p.Stop), MaxStopSequences)
	}
	for i, s := range p.Stop {
		if s == "" {
			return bad("stop[%d]: empty", i)
		}
	}
	if f := p.ResponseFormat; f != nil {
		switch f.Type {
		case FormatText, FormatJSONObject:
			if len(f.Schema) > 0 {
				return bad("response_format.schema: only with type %s", FormatJSONSchema)
			}
		case FormatJSONSchema:
			var obj map[string]json.RawMessage
			if json.Unmarshal(f.Schema, &obj) != nil || obj == nil {
				return bad("response_format.schema: required with type %s: a JSON Schema object", FormatJSONSchema)
			}
		default:
			return bad("response_format.type: %q, want text, json_object or json_schema", f.Type)
		}
	}
	if t := p.Thinking; t != nil {
		switch t.Type {
		case ThinkingEnabled:
			if t.BudgetTokens < 1 {
				return bad("thinking.budget_tokens: %d, want at least 1 with type enabled", t.BudgetTokens)
			}
		case ThinkingAdaptive, ThinkingDisabled:
			if t.BudgetTokens != 0 {
				return bad("thinking.budget_tokens: only with type enabled")
			}
		default:
			return bad("thinking.type: %q, want enabled, adaptive or disabled", t.Type)
		}
	}
	if cc := p.CacheControl; cc != nil {
		if cc.Type != CacheEphemeral {
			return bad("cache_control.type: %q, want %s", cc.Type, CacheEphemeral)
		}
		if cc.TTL != "" && cc.TTL != "5m" && cc.TTL != "1h" {
			return bad("cache_control.ttl: %q, want 5m or 1h", cc.TTL)
		}
	}
	return nil
}

// CacheEphemeral is the type of every CacheControl.
const CacheEphemeral = "ephemeral"
