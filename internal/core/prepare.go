package core

import (
	"slices"

	"github.com/contextinfinity/ctxinf/messages"
)

// ShrinkDue returns the AskShrink that the context of turn calls for, if
// any (SRD §7.3, step 4 with a librarian model): rep, the report of its
// assembly, shows the head summary shrunk to fit (StepShrinkSummary), and
// the head summary of this epoch was not asked to shrink already (asked
// is the epoch+1 of the last one asked; 0 for none). It changes nothing.
func (b *Branch) ShrinkDue(turn messages.TurnID, rep AssemblyReport, asked uint64) (AskShrink, bool) {
	if asked == b.Epoch+1 {
		return AskShrink{}, false
	}
	i := slices.IndexFunc(rep.Shrink, func(s ShrinkStep) bool { return s.Step == StepShrinkSummary })
	if i < 0 {
		return AskShrink{}, false
	}
	return AskShrink{Turn: turn, Epoch: b.Epoch, Summary: b.State.Summary, Target: rep.Shrink[i].Target}, true
}
