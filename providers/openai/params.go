package openai

import (
	"encoding/json"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// The generation settings (providers.Request.Params) each API takes.
//
// Chat Completions takes them all but top_k and thinking: temperature,
// top_p, frequency_penalty, presence_penalty, seed, logit_bias, stop,
// max_completion_tokens, response_format, parallel_tool_calls,
// reasoning_effort and verbosity, under those names.
//
// Responses has no stop, seed, penalties, logit_bias or top_k either: it
// takes temperature, top_p, max_output_tokens, parallel_tool_calls,
// reasoning.effort, and text.format (response_format) and text.verbosity.
//
// Neither has Anthropic's thinking; {"type":"disabled"} asks for nothing
// and is taken.
//
// Both cache prompt prefixes by themselves (the request's start, from
// 1,024 tokens, for 5 to 10 minutes of inactivity): a cache_control is
// taken as it stands, but one that asks for an hour (ttl "1h") is not,
// since neither keeps a prefix that long on request.

var _ providers.ParamsTaker = (*Provider)(nil)

// RefusedParams is providers.ParamsTaker: what p's API (chat or
// responses) cannot take of gp.
func (p *Provider) RefusedParams(_ string, gp messages.GenParams) []providers.RefusedParam {
	var out []providers.RefusedParam
	api := "OpenAI's Responses API"
	if p.api == APIChat {
		api = "the Chat Completions API"
	}
	no := func(set bool, field string) {
		out = providers.Refuse(out, set, field, api+" has no "+field)
	}
	no(gp.TopK != nil, "top_k")
	if p.api != APIChat {
		no(gp.FrequencyPenalty != nil, "frequency_penalty")
		no(gp.PresencePenalty != nil, "presence_penalty")
		no(gp.Seed != nil, "seed")
		no(len(gp.LogitBias) > 0, "logit_bias")
		no(len(gp.Stop) > 0, "stop")
	}
	out = providers.Refuse(out, gp.Thinking != nil && gp.Thinking.Type != messages.ThinkingDisabled, "thinking",
		api+" has no thinking budget (Anthropic's); use reasoning_effort")
	out = providers.Refuse(out, gp.CacheControl != nil && gp.CacheControl.TTL == "1h", "cache_control",
		"OpenAI caches prompt prefixes by itself for 5 to 10 minutes and takes no ttl; send cache_control without ttl \"1h\"")
	return out
}

// chatParams sets r's fields from gp (RefusedParams says which it
// cannot take); parallel_tool_calls and the output bound come from the
// request's own fields.
func chatParams(r *chatRequest, gp messages.GenParams) {
	r.Temperature, r.TopP, r.Seed = gp.Temperature, gp.TopP, gp.Seed
	r.FrequencyPenalty, r.PresencePenalty = gp.FrequencyPenalty, gp.PresencePenalty
	r.LogitBias, r.Stop = gp.LogitBias, gp.Stop
	r.ReasoningEffort, r.Verbosity = gp.ReasoningEffort, gp.Verbosity
	if f := gp.ResponseFormat; f != nil {
		rf := &chatResponseFormat{Type: f.Type}
		if f.Type == messages.FormatJSONSchema {
			rf.JSONSchema = &chatJSONSchema{Name: schemaName(f), Description: f.Description, Schema: f.Schema, Strict: f.Strict}
		}
		r.ResponseFormat = rf
	}
}

// chatResponseFormat is Chat Completions' response_format.
type chatResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *chatJSONSchema `json:"json_schema,omitempty"`
}

type chatJSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// schemaName is a json_schema format's name, which OpenAI requires:
// "response" when the client gave none (Anthropic's formats have none).
func schemaName(f *messages.ResponseFormat) string {
	if f.Name == "" {
		return "response"
	}
	return f.Name
}

// responsesParams sets params' fields from gp (RefusedParams says which
// it cannot take). text (format and verbosity) is written by hand, so
// that a json_schema's schema goes as the client wrote it, its
// properties in their order (the order the model writes them in).
func responsesParams(params *responses.ResponseNewParams, gp messages.GenParams) {
	if gp.Temperature != nil {
		params.Temperature = param.NewOpt(*gp.Temperature)
	}
	if gp.TopP != nil {
		params.TopP = param.NewOpt(*gp.TopP)
	}
	if gp.ReasoningEffort != "" {
		params.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(gp.ReasoningEffort)}
	}
	if gp.Verbosity == "" && gp.ResponseFormat == nil {
		return
	}
	text := responsesText{Verbosity: gp.Verbosity}
	if f := gp.ResponseFormat; f != nil {
		text.Format = &responsesFormat{Type: f.Type}
		if f.Type == messages.FormatJSONSchema {
			text.Format.Name, text.Format.Description = schemaName(f), f.Description
			text.Format.Schema, text.Format.Strict = f.Schema, f.Strict
		}
	}
	params.Text = param.Override[responses.ResponseTextConfigParam](text)
}

// responsesText is the text field of a Responses request.
type responsesText struct {
	Format    *responsesFormat `json:"format,omitempty"`
	Verbosity string           `json:"verbosity,omitempty"`
}

// responsesFormat is text.format: Chat Completions' json_schema fields
// are at its top.
type responsesFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}
