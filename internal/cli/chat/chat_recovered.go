package chat

import (
	"context"
	"fmt"
	"io"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
)

// recoveredLabel prefixes output recovered after a crash (SRD §13.4).
const recoveredLabel = "[incomplete, recovered after a crash]"

// printRecovered prints the partial reply of an interrupted turn, labeled.
func printRecovered(out io.Writer, depth uint64, text string) {
	fmt.Fprintf(out, "  #%d assistant: %s %s\n", depth, recoveredLabel, cli.OneLine(text, 200))
}

// showInterrupted prints, when a chat resumes a branch whose last turn a
// crash cut off, what was recovered of its reply. Asking the branch
// activates it, which recovers the turn first.
func showInterrupted(ctx context.Context, out io.Writer, be tui.Backend, branch messages.BranchID) error {
	info, err := be.Info(ctx, branch)
	if err != nil || info.TurnSeq == 0 {
		return err
	}
	row, err := be.TurnAt(ctx, branch, info.TurnSeq)
	if err != nil || row.Phase != messages.PhaseFailed {
		return err
	}
	text, ok, err := be.Recovered(ctx, branch, row.ID)
	if err != nil || !ok {
		return err
	}
	fmt.Fprintf(out, "The last turn (%d) was interrupted: %s\n  %s %s\n", row.Seq, row.Reason, recoveredLabel, cli.OneLine(text, 2000))
	return nil
}
