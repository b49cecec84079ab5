package anthropic

import (
	"encoding/json"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// The generation settings (providers.Request.Params) the Messages API
// takes: temperature, top_p, top_k, max_tokens, stop_sequences (GenParams'
// stop), thinking, and output_config: its effort (reasoning_effort low,
// medium, high, xhigh or max) and its format (a json_schema
// response_format: the schema; the name and strict have no place, the
// API always enforces the schema). parallel_tool_calls false is
// disable_parallel_tool_use on the tool choice.

var _ providers.ParamsTaker = (*Provider)(nil)

// anthropicEfforts are the reasoning efforts output_config.effort takes.
var anthropicEfforts = map[string]bool{"low": true, "medium": true, "high": true, "xhigh": true, "max": true}

// RefusedParams is providers.ParamsTaker: what the Messages API cannot
// take of gp.
func (p *Provider) RefusedParams(_ string, gp messages.GenParams) []providers.RefusedParam {
	var out []providers.RefusedParam
	no := func(set bool, field string) {
		out = providers.Refuse(out, set, field, "Anthropic's Messages API has no "+field)
	}
	no(gp.FrequencyPenalty != nil, "frequency_penalty")
	no(gp.PresencePenalty != nil, "presence_penalty")
	no(gp.Seed != nil, "seed")
	no(len(gp.LogitBias) > 0, "logit_bias")
	if f := gp.ResponseFormat; f != nil && f.Type == messages.FormatJSONObject {
		out = append(out, providers.RefusedParam{Field: "response_format",
			Why: "Anthropic's Messages API has no JSON mode without a schema; send a json_schema format"})
	}
	if e := gp.ReasoningEffort; e != "" && !anthropicEfforts[e] {
		out = append(out, providers.RefusedParam{Field: "reasoning_effort",
			Why: "Anthropic's output_config.effort takes low, medium, high, xhigh or max, not " + e})
	}
	no(gp.Verbosity != "", "verbosity")
	return out
}

// setParams sets params' fields from gp (RefusedParams says which it
// cannot take).
func setParams(params *sdk.MessageNewParams, gp messages.GenParams) {
	if gp.Temperature != nil {
		params.Temperature = param.NewOpt(*gp.Temperature)
	}
	if gp.TopP != nil {
		params.TopP = param.NewOpt(*gp.TopP)
	}
	if gp.TopK != nil {
		params.TopK = param.NewOpt(int64(*gp.TopK))
	}
	params.StopSequences = gp.Stop
	if t := gp.Thinking; t != nil {
		switch t.Type {
		case messages.ThinkingEnabled:
			params.Thinking.OfEnabled = &sdk.ThinkingConfigEnabledParam{BudgetTokens: int64(t.BudgetTokens),
				Display: sdk.ThinkingConfigEnabledDisplay(t.Display)}
		case messages.ThinkingAdaptive:
			params.Thinking.OfAdaptive = &sdk.ThinkingConfigAdaptiveParam{Display: sdk.ThinkingConfigAdaptiveDisplay(t.Display)}
		case messages.ThinkingDisabled:
			params.Thinking.OfDisabled = &sdk.ThinkingConfigDisabledParam{}
		}
	}
	oc := outputConfig{Effort: gp.ReasoningEffort}
	if f := gp.ResponseFormat; f != nil && f.Type == messages.FormatJSONSchema {
		oc.Format = &outputFormat{Type: "json_schema", Schema: f.Schema}
	}
	if oc != (outputConfig{}) {
		// By hand, so that the schema goes as the client wrote it, its
		// properties in their order.
		params.OutputConfig = param.Override[sdk.OutputConfigParam](oc)
	}
}

// outputConfig is the output_config of a Messages request.
type outputConfig struct {
	Effort string        `json:"effort,omitempty"`
	Format *outputFormat `json:"format,omitempty"`
}

type outputFormat struct {
	Type   string          `json:"type"` // "json_schema"
	Schema json.RawMessage `json:"schema"`
}
