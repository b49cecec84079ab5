package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// A step's stream journal holds every raw event its provider streamed
// (SRD §13): with OpenAI's chunks about 450 bytes per token, in a file of
// its own. Once the step's turn has its response finalized, the store
// holds that output (the reply and the step's row), and the journal is
// only a record of how it streamed: left alone, journals would outgrow
// the transcript many times over in a long-lived runtime. PruneJournals
// removes them once they are Config.RetainFinalized old. The journal of
// a turn that failed or was interrupted stays: it is the only record of
// what was shown (PartialOutput).

// PruneJournals removes the stream journals of steps that ended more than
// Config.RetainFinalized ago, whose outcome and whose turn's response
// were finalized, and returns how many it removed. With RetainFinalized
// 0 it removes none. The journals are the runtime's journal store's:
// files of {data_dir}/streams, or rows of a database that keeps them
// (PGDB), pruned by whichever member runs it.
func (r *Runtime) PruneJournals(ctx context.Context) (int, error) {
	if r.cfg.RetainFinalized <= 0 {
		return 0, nil
	}
	steps, err := r.journals.List(ctx)
	if err != nil {
		return 0, err
	}
	cutoff := r.cfg.Now().Add(-r.cfg.RetainFinalized)
	var prune []messages.StepID
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// A step ends after it starts: one that started after the
		// cutoff needs no lookup.
		if !step.Time().Before(cutoff) {
			continue
		}
		ok, err := r.prunable(ctx, step, cutoff)
		if err != nil {
			return 0, err
		}
		if ok {
			prune = append(prune, step)
		}
	}
	// One removal for them all: for files, one directory fsync.
	n, err := r.journals.Remove(ctx, prune)
	if err != nil {
		return n, fmt.Errorf("prune stream journals: %w", err)
	}
	orphans, err := r.RemoveOrphanJournals(ctx, r.cfg.Now().Add(-r.orphanAge()))
	return n + orphans, err
}

// prunable says whether the journal of step may go: its step row says it
// ended before cutoff with an outcome that is kept in the store, and its
// turn's response was finalized. A step without a row (interrupted before
// it ended) keeps its journal.
func (r *Runtime) prunable(ctx context.Context, step messages.StepID, cutoff time.Time) (bool, error) {
	row, err := r.db.StepRow(ctx, step)
	if errors.Is(err, persistence.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !row.Ended.Before(cutoff) || !finalizable(row.Outcome.Kind) {
		return false, nil
	}
	t, err := r.db.TurnRow(ctx, row.Branch, row.Turn)
	if errors.Is(err, persistence.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return t.Phase >= messages.PhaseResponseFinalized && t.Phase != messages.PhaseFailed, nil
}

// RemoveOrphanJournals removes the stream journals of steps that started
// before before and have no step row: their turn was deleted (a delete a
// crash cut short between the store's purge and the journals' removal),
// or never accepted (a deferred acceptance a crash lost). Recovery gives
// an interrupted step its row, so a journal that records what a client was
// shown is never an orphan once its branch recovered. It returns how many
// it removed.
func (r *Runtime) RemoveOrphanJournals(ctx context.Context, before time.Time) (int, error) {
	steps, err := r.journals.List(ctx)
	if err != nil {
		return 0, err
	}
	var orphans []messages.StepID
	for _, step := range steps {
		if !step.Time().Before(before) {
			continue
		}
		_, err := r.db.StepRow(ctx, step)
		if errors.Is(err, persistence.ErrNotFound) {
			orphans = append(orphans, step)
			continue
		}
		if err != nil {
			return 0, err
		}
	}
	n, err := r.journals.Remove(ctx, orphans)
	if err != nil {
		return n, fmt.Errorf("remove orphan stream journals: %w", err)
	}
	return n, nil
}

// orphanAge is how old a step without a row must be for its journal to be
// an orphan in a store other runtimes share (PGDB's journals): older than
// any step may run (runtime.provider_timeout), with a margin.
func (r *Runtime) orphanAge() time.Duration { return r.cfg.StepTimeout + 10*time.Minute }

// pruneInterval is how often the runtime prunes journals with retention
// retain: a quarter of it, from a minute to an hour.
func pruneInterval(retain time.Duration) time.Duration {
	return min(max(retain/4, time.Minute), time.Hour)
}

// pruneLoop prunes journals at start and then every pruneInterval until
// the runtime closes, which also stops a pruning under way.
func (r *Runtime) pruneLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(pruneInterval(r.cfg.RetainFinalized))
	defer t.Stop()
	for {
		n, err := r.PruneJournals(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn().Err(err).Int("removed", n).Msg("prune stream journals")
		case n > 0:
			r.log.Info().Int("removed", n).Dur("retain_finalized", r.cfg.RetainFinalized).Msg("pruned the stream journals of finalized steps")
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
