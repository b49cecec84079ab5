package core

import "github.com/contextinfinity/ctxinf/messages"

// Policy is the summary-as-state policy of the summarization contract
// (v2.2). A branch's unfolded messages are its pending turns (two each:
// the user message and the reply); they are sent verbatim until a fold
// rewrites the summary with the oldest of them and they leave the prompt.
//
//   - K: the verbatim messages a fold keeps unfolded (the most recent
//     ones). A fold takes the oldest pending turns, leaving the newest
//     K/2 turns pending.
//   - B: the overflow buffer. A fold is due when the pending messages
//     exceed K + B (the overflow trigger); exceeding K alone is not.
//   - SafetyTurns: a fold is also due once that many user turns are
//     pending (the safety trigger); 0 disables it.
//
// The budget trigger (estimated input above a fraction of the budget) is
// the shell's: it asks with FoldDue(FoldBudget). No turn ever leaves the
// prompt without being folded: pending turns leave only by the
// StateCommitted that folds them.
//
// The zero Policy folds every pending turn as soon as it is finalized.
type Policy struct {
	K           int
	B           int
	SafetyTurns int
}

// FoldReason says why a fold is asked for, in the contract's priority
// order: budget, overflow, safety; manual is an explicit request.
type FoldReason string

// The fold reasons. FoldAuto asks FoldDue for whichever of overflow and
// safety is due.
const (
	FoldAuto     FoldReason = ""
	FoldBudget   FoldReason = "budget"
	FoldOverflow FoldReason = "overflow"
	FoldSafety   FoldReason = "safety"
	FoldManual   FoldReason = "manual"
)

// FoldDue returns the Summarize effect a fold for reason calls for, if
// one is due. FoldAuto checks the overflow trigger, then the safety
// trigger; FoldBudget folds down to K pending messages, and at least the
// oldest pending turn; FoldManual folds every pending turn. It returns
// false when no turn is pending or nothing is due; it does not change the
// branch.
func (b *Branch) FoldDue(reason FoldReason) (Summarize, bool) {
	// Counted, not listed: Apply asks after every turn, and an import
	// leaves hundreds pending (Pending copies every one).
	pending := 0
	for i := range b.Turns {
		if b.Turns[i].Phase == messages.PhaseResponseFinalized {
			pending++
		}
	}
	if pending == 0 {
		return Summarize{}, false
	}
	keep := max(b.Policy.K, 0) / 2 // turns left unfolded
	n := 0                         // turns to fold
	switch reason {
	case FoldManual:
		n = pending
	case FoldBudget:
		n = max(pending-keep, 1)
	case FoldAuto:
		switch {
		case 2*pending > max(b.Policy.K, 0)+max(b.Policy.B, 0):
			reason = FoldOverflow
		case b.Policy.SafetyTurns > 0 && pending >= b.Policy.SafetyTurns:
			reason = FoldSafety
		default:
			return Summarize{}, false
		}
		n = pending - keep
	default:
		return Summarize{}, false
	}
	if n <= 0 {
		return Summarize{}, false
	}
	ids := make([]messages.TurnID, 0, n)
	for i := range b.Turns {
		if t := &b.Turns[i]; t.Phase == messages.PhaseResponseFinalized && len(ids) < n {
			ids = append(ids, t.ID)
		}
	}
	return Summarize{Turns: ids, Epoch: b.Epoch, State: cloneState(b.State), Reason: reason}, true
}
