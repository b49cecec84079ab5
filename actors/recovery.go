package actors

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Recovered is the output of a provider step that a crash cut off,
// recovered from its stream journal (SRD §13.4): incomplete, to be shown
// labeled so. It is never part of the transcript, of the head, or of any
// context.
type Recovered struct {
	Turn messages.TurnID
	Step messages.StepID
	Text string
	// Displayed is the bytes the journal held on disk (at least those
	// were shown), Durable those of its complete lines.
	Displayed, Durable uint64
}

// RecoveredOutput returns the output of turn's provider step a crash
// interrupted, if one was (false otherwise).
func (r *Runtime) RecoveredOutput(ctx context.Context, turn messages.TurnID) (Recovered, bool, error) {
	steps, err := r.db.Steps(ctx, turn)
	if err != nil {
		return Recovered{}, false, err
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if s := steps[i]; s.Interrupted {
			return Recovered{Turn: turn, Step: s.ID, Text: s.Partial, Displayed: s.Displayed, Durable: s.Durable}, true, nil
		}
	}
	return Recovered{}, false, nil
}

// withRecovered sets PartialReply on the entries of user messages whose
// turn a crash interrupted. Such a message is followed by no reply: only
// those are looked up.
func (r *Runtime) withRecovered(ctx context.Context, entries []Entry) error {
	for i := range entries {
		if entries[i].Message.Role != messages.RoleUser ||
			i+1 < len(entries) && entries[i+1].Message.Role == messages.RoleAssistant {
			continue
		}
		rec, ok, err := r.RecoveredOutput(ctx, entries[i].Node)
		if err != nil {
			return err
		}
		if ok {
			entries[i].PartialReply = &rec
		}
	}
	return nil
}

// interruptedStep is the row recovery writes for the provider step of t
// that a crash cut off (SRD §6.5): outcome incomplete for
// core.InterruptedReason, with the text its stream journal recovered
// (none if the journal never reached the disk). It is false when the step
// has no id or already has its row (it ended; the turn's tools were
// running).
func (a *branchActor) interruptedStep(t core.Turn) (persistence.StepRow, bool) {
	if t.Step.IsZero() {
		return persistence.StepRow{}, false
	}
	log := a.rt.log.With().Str("branch", a.id.String()).Str("turn", t.ID.String()).Str("step", t.Step.String()).Logger()
	if _, err := a.rows.StepRow(context.Background(), t.Step); err == nil {
		return persistence.StepRow{}, false
	} else if !errors.Is(err, persistence.ErrNotFound) {
		log.Warn().Err(err).Msg("read the row of an interrupted step; recording it anyway")
	}
	m := a.rt.model(a.b.Model)
	row := persistence.StepRow{ID: t.Step, Branch: a.id, Turn: t.ID, Index: max(t.Steps, 1) - 1, Provider: m.Provider.Name(),
		Model: m.ID, Outcome: messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: core.InterruptedReason},
		StreamPath: filepath.Join("streams", t.Step.String()+".jsonl"), Started: t.Step.Time(), Ended: a.now(),
		Interrupted: true}
	j, err := persistence.RecoverJournalIn(context.Background(), a.rt.journals, t.Step, a.rows.Cipher())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		row.StreamPath = "" // the step streamed nothing to disk
	case err != nil:
		log.Warn().Err(err).Msg("read the stream journal of an interrupted step")
	default:
		row.Partial = persistence.JournalText(j.Entries)
		row.Displayed, row.Durable = j.Size, j.Valid
		l := log.Info()
		if j.Torn {
			l = log.Warn()
		}
		// The journal holds the output the crash cut off: shown as
		// incomplete, never advancing the head (SRD §13.4).
		l.Int("recovered_bytes", len(row.Partial)).Bool("torn_line_dropped", j.Torn).
			Msg("recovered partial output of an interrupted turn")
	}
	return row, true
}
