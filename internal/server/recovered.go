package server

import (
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
)

// partialOutput is the API form of output recovered after a crash,
// labeled incomplete; nil for nil.
func partialOutput(r *actors.Recovered) *api.PartialOutput {
	if r == nil {
		return nil
	}
	return &api.PartialOutput{Step: r.Step, Text: r.Text, Incomplete: true, Displayed: r.Displayed, Durable: r.Durable}
}
