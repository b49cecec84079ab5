package main

import (
	"context"
	"fmt"
	"io"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
)

// recoveredLabel prefixes output recovered after a crash (SRD §13.4).
const recoveredLabel = "[incomplete, recovered after a crash]"

// printRecovered prints the partial reply of an interrupted turn, labeled.
func printRecovered(out io.Writer, depth uint64, r *actors.Recovered) {
	fmt.Fprintf(out, "  #%d assistant: %s %s\n", depth, recoveredLabel, oneLine(r.Text, 200))
}

// showInterrupted prints, when a chat resumes a branch whose last turn a
// crash cut off, what was recovered of its reply. Asking the branch
// activates it, which recovers the turn first.
func showInterrupted(ctx context.Context, out io.Writer, rt *ctxinf.Runtime, branch messages.BranchID) error {
	info, err := rt.Inspect(ctx, branch)
	if err != nil || info.TurnSeq == 0 {
		return err
	}
	rows, err := rt.DB().TurnRows(ctx, branch, info.TurnSeq, 1)
	if err != nil || len(rows) == 0 || rows[0].Phase != messages.PhaseFailed {
		return err
	}
	rec, ok, err := rt.RecoveredOutput(ctx, rows[0].ID)
	if err != nil || !ok {
		return err
	}
	fmt.Fprintf(out, "The last turn (%d) was interrupted: %s\n  %s %s\n", rows[0].Seq, rows[0].Reason, recoveredLabel, oneLine(rec.Text, 2000))
	return nil
}
