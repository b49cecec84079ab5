package providers

import (
	"fmt"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// ParamsTaker is implemented by a Provider that takes generation
// settings (Request.Params). RefusedParams returns the fields of p the
// provider's API cannot take for model, each with why, in GenParams'
// order; none when it takes them all. The runtime refuses a turn that
// sets one, naming it, rather than send the turn without it.
type ParamsTaker interface {
	RefusedParams(model string, p messages.GenParams) []RefusedParam
}

// RefusedParam is a field of GenParams (by its JSON name, "top_k") that a
// provider cannot take, and why ("OpenAI's Chat Completions API has no
// top_k").
type RefusedParam struct {
	Field string
	Why   string
}

// RefusedParams is p's ParamsTaker answer for gp, or, for a provider that
// does not implement it, every field gp sets but the output bound and
// parallel_tool_calls, which the runtime applies through
// Request.MaxOutputTokens and Request.ParallelToolCalls.
func RefusedParams(p Provider, model string, gp messages.GenParams) []RefusedParam {
	if r, ok := p.(*retrying); ok {
		p = r.Provider // retries take what the provider takes
	}
	if pt, ok := p.(ParamsTaker); ok {
		return pt.RefusedParams(model, gp)
	}
	var out []RefusedParam
	for _, f := range gp.Set() {
		if f != "max_output_tokens" && f != "parallel_tool_calls" {
			out = append(out, RefusedParam{Field: f, Why: fmt.Sprintf("the %s provider takes no generation settings", p.Name())})
		}
	}
	return out
}

// ParamsError is the error of a turn whose generation settings its
// model's provider cannot take (RefusedParams).
type ParamsError struct {
	Provider, Model string
	Refused         []RefusedParam
}

func (e *ParamsError) Error() string {
	parts := make([]string, len(e.Refused))
	for i, r := range e.Refused {
		parts[i] = "params." + r.Field + ": " + r.Why
	}
	return fmt.Sprintf("the model %s (provider %s) cannot take %s", e.Model, e.Provider, strings.Join(parts, "; "))
}

// Refuse is a helper for adapters: it appends field to out, with why,
// when set.
func Refuse(out []RefusedParam, set bool, field, why string) []RefusedParam {
	if set {
		out = append(out, RefusedParam{Field: field, Why: why})
	}
	return out
}
