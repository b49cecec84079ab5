package actors

import (
	"context"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Reindex chunks every committed turn of branch again. Chunks are unique
// by (source turn, type, content hash), so turns already indexed gain
// nothing: it returns how many chunks were inserted and how many were
// already there.
func (r *Runtime) Reindex(ctx context.Context, branch messages.BranchID) (inserted, skipped int, err error) {
	row, err := r.db.BranchRow(ctx, branch)
	if err != nil {
		return 0, 0, err
	}
	ix := &indexer{rt: r}
	err = r.db.EachTurnRow(ctx, branch, func(t persistence.TurnRow) error {
		if t.Phase < messages.PhaseStateCommitted || t.Phase == messages.PhaseFailed {
			return nil
		}
		n, s, err := ix.index(&indexReq{branch: branch, session: row.Session, turn: t.ID, seq: t.Seq, reply: t.Reply})
		inserted, skipped = inserted+n-s, skipped+s
		return err
	})
	return inserted, skipped, err
}
