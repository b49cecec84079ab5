package local

import (
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

var _ providers.ParamsTaker = (*Provider)(nil)

// RefusedParams is providers.ParamsTaker. The local model takes the
// output bound and stop sequences (its reply ends before the first one),
// and the sampling settings, which change nothing in a deterministic
// reply (temperature, top_p, top_k, penalties, seed, logit_bias). It
// writes no JSON and does not reason: a JSON response_format,
// reasoning_effort, thinking (but disabled) and verbosity are refused.
func (p *Provider) RefusedParams(_ string, gp messages.GenParams) []providers.RefusedParam {
	var out []providers.RefusedParam
	const why = "the local model writes a plain report of its context"
	out = providers.Refuse(out, gp.ResponseFormat != nil && gp.ResponseFormat.Type != messages.FormatText, "response_format", why)
	out = providers.Refuse(out, gp.ReasoningEffort != "", "reasoning_effort", "the local model does not reason")
	out = providers.Refuse(out, gp.Thinking != nil && gp.Thinking.Type != messages.ThinkingDisabled, "thinking", "the local model does not reason")
	out = providers.Refuse(out, gp.Verbosity != "", "verbosity", why)
	return out
}

// cutAtStop is reply up to the first of the stop sequences in it.
func cutAtStop(reply string, stop []string) string {
	end := len(reply)
	for _, s := range stop {
		if i := strings.Index(reply, s); s != "" && i >= 0 && i < end {
			end = i
		}
	}
	return reply[:end]
}
