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

// Torn reports whether a torn final journal line (a crash mid-write) was
// dropped from Text: the journal held more bytes than its complete lines.
func (r Recovered) Torn() bool { return r.Displayed > r.Durable }

// RecoveredOutput returns the output of turn's provider step a crash
// interrupted, if one was (false otherwise): what recovery recorded
// (recoveredOutput).
func (r *Runtime) RecoveredOutput(ctx context.Context, turn messages.TurnID) (Recovered, bool, error) {
	steps, err := r.db.Steps(ctx, turn)
	if err != nil {
		return Recovered{}, false, err
	}
	return recoveredOutput(ctx, steps, nil, nil, turn, messages.StepID{})
}

// recoveredOutput is the one way the output a crash cut off is read
// (Runtime.RecoveredOutput, the history's Entry.PartialReply, the API's
// turn, the chat and the TUI, and the report): the row recovery wrote
// for turn's interrupted step, among steps, the turn's step rows
// (StepRow.Interrupted, its Partial and counters). A store whose
// recovery has not run yet (the report reads one) is read with its
// journals js and cipher c: the turn's last step, if it has no row yet,
// is what its journal holds. With js nil only the rows are read.
func recoveredOutput(ctx context.Context, steps []persistence.StepRow, js persistence.JournalStore, c *persistence.Cipher,
	turn messages.TurnID, last messages.StepID) (Recovered, bool, error) {
	for i := len(steps) - 1; i >= 0; i-- {
		if s := steps[i]; s.Interrupted {
			return Recovered{Turn: turn, Step: s.ID, Text: s.Partial, Displayed: s.Displayed, Durable: s.Durable}, true, nil
		}
	}
	if js == nil || last.IsZero() {
		return Recovered{}, false, nil
	}
	for _, s := range steps {
		if s.ID == last {
			return Recovered{}, false, nil // it ended: nothing was cut off
		}
	}
	rec, err := journalOutput(ctx, js, c, turn, last)
	if errors.Is(err, fs.ErrNotExist) {
		return Recovered{}, false, nil // the step streamed nothing to disk
	}
	return rec, err == nil, err
}

// journalOutput reads the output step of turn streamed from its journal
// in js, with the store's cipher c: the text it displayed, the journal's
// bytes and those of its complete lines (a torn final line is dropped).
// An error wrapping fs.ErrNotExist: the step streamed nothing to disk.
func journalOutput(ctx context.Context, js persistence.JournalStore, c *persistence.Cipher, turn messages.TurnID, step messages.StepID) (Recovered, error) {
	j, err := persistence.RecoverJournalIn(ctx, js, step, c)
	if err != nil {
		return Recovered{}, err
	}
	return Recovered{Turn: turn, Step: step, Text: persistence.JournalText(j.Entries), Displayed: j.Size, Durable: j.Valid}, nil
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
func (l *turnLoop) interruptedStep(t core.Turn) (persistence.StepRow, bool) {
	if t.Step.IsZero() {
		return persistence.StepRow{}, false
	}
	log := l.rt.log.With().Str("branch", l.id.String()).Str("turn", t.ID.String()).Str("step", t.Step.String()).Logger()
	if _, err := l.rows.StepRow(context.Background(), t.Step); err == nil {
		return persistence.StepRow{}, false
	} else if !errors.Is(err, persistence.ErrNotFound) {
		log.Warn().Err(err).Msg("read the row of an interrupted step; recording it anyway")
	}
	m := l.rt.model(l.b.Model)
	row := persistence.StepRow{ID: t.Step, Branch: l.id, Turn: t.ID, Index: max(t.Steps, 1) - 1, Provider: m.Provider.Name(),
		Model: m.ID, Outcome: messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: core.InterruptedReason},
		StreamPath: filepath.Join("streams", t.Step.String()+".jsonl"), Started: t.Step.Time(), Ended: l.now(),
		Interrupted: true}
	rec, err := journalOutput(context.Background(), l.rt.journals, l.rows.Cipher(), t.ID, t.Step)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		row.StreamPath = "" // the step streamed nothing to disk
	case err != nil:
		log.Warn().Err(err).Msg("read the stream journal of an interrupted step")
	default:
		row.Partial, row.Displayed, row.Durable = rec.Text, rec.Displayed, rec.Durable
		l := log.Info()
		if rec.Torn() {
			l = log.Warn()
		}
		// The journal holds the output the crash cut off: shown as
		// incomplete, never advancing the head (SRD §13.4).
		l.Int("recovered_bytes", len(row.Partial)).Bool("torn_line_dropped", rec.Torn()).
			Msg("recovered partial output of an interrupted turn")
	}
	return row, true
}
