// Package lifecycle says which lifecycle rows and jobs each event of a
// branch writes (the SRD's transactions TX-0, TX-A, TX-B and TX-C, each
// one atomic commit with the event). It is a pure function beside the
// core: it reads the branch as it is before the event applies and the
// time it is given, and does no I/O; the branch actor adds what only it
// knows (the transcript appends, the idempotency keys, the step rows)
// and commits the whole.
package lifecycle

import (
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Stored is what the store holds that the branch does not track, which
// some events' rows carry over.
type Stored struct {
	// StateSeq is, for a TurnIndexed, the state_seq of the indexed
	// turn's row: the seq of the state that folded it (the branch
	// keeps only that state's id).
	StateSeq uint64
	// SummarizeMicros is, for a TurnIndexed, the summarize latency the
	// turn's row holds (the branch actor records it with the fold).
	SummarizeMicros int64
}

// Tx returns the rows and jobs that go with ev on branch b, b as it is
// before ev applies, stamped now. An event that writes none gives an
// empty Tx. For a BranchCreated, the branch's context-store branch, its
// base state's row and the pending turns' rows and summary jobs; the
// caller adds the branch's row and, for a new session, the session's.
func Tx(b *core.Branch, ev messages.BranchEvent, now time.Time, stored Stored) *persistence.Tx {
	tx := &persistence.Tx{}
	row := func(t core.Turn) persistence.TurnRow {
		r := persistence.TurnRow{Branch: b.ID, Seq: t.Seq, ID: t.ID, Phase: t.Phase, Step: t.Step, Reply: t.Reply,
			Reason: t.Reason, StateAfter: t.StateAfter, Updated: now}
		if t.Outcome.Kind != 0 { // none before the response is final
			r.Outcome = t.Outcome.Kind.String()
		}
		return r
	}
	job := func(t persistence.JobType, turn messages.TurnID) persistence.Job {
		return persistence.Job{Type: t, Branch: b.ID, Turn: turn, Created: now}
	}
	switch e := ev.(type) {
	case messages.BranchCreated:
		base := e.State
		tx.NewBranches = []persistence.BranchSpec{{ID: e.Branch, At: e.Tip}}
		// The base state gets a row on this branch too, so that a fork of
		// this branch finds every state it may start from locally.
		tx.States = []persistence.StateRow{{Branch: e.Branch, Seq: base.Seq, ID: base.ID, Summary: base.Summary,
			Pinned: base.Pinned, Created: now}}
		for _, p := range e.Pending {
			tx.Jobs = append(tx.Jobs, persistence.Job{Type: persistence.JobSummarize, Branch: e.Branch, Turn: p.Turn, Created: now})
			tx.NewTurns = append(tx.NewTurns, persistence.TurnRow{Branch: e.Branch, Seq: p.Seq, ID: p.Turn,
				Phase: messages.PhaseResponseFinalized, Reply: p.Reply, Updated: now})
		}
	case messages.TurnRecorded:
		tx.NewTurns = []persistence.TurnRow{{Branch: b.ID, Seq: e.Seq, ID: e.Turn, Phase: messages.PhaseResponseFinalized,
			Reply: e.Reply, Outcome: messages.OutcomeCompleted.String(), Updated: now}}
		tx.Jobs = []persistence.Job{job(persistence.JobSummarize, e.Turn)}
	case messages.TurnAccepted:
		tx.NewTurns = []persistence.TurnRow{{Branch: b.ID, Seq: e.Seq, ID: e.Turn, Phase: messages.PhaseAccepted, Updated: now}}
		tx.Jobs = []persistence.Job{job(persistence.JobRespond, e.Turn)}
	case messages.ResponseStarted:
		if t, ok := b.Turn(e.Turn); ok {
			t.Phase, t.Step = messages.PhaseResponding, e.Step
			tx.Turns = []persistence.TurnRow{row(t)}
		}
	case messages.ResponseFinalized:
		if t, ok := b.Turn(e.Turn); ok {
			t.Phase, t.Reply, t.Outcome = messages.PhaseResponseFinalized, e.Reply, e.Outcome
			tx.Turns = []persistence.TurnRow{row(t)}
		}
		tx.DoneJobs = []persistence.JobKey{{Type: persistence.JobRespond, Turn: e.Turn}}
		tx.Jobs = []persistence.Job{job(persistence.JobSummarize, e.Turn)}
	case messages.TurnFailed:
		if t, ok := b.Turn(e.Turn); ok {
			t.Phase, t.Reason = messages.PhaseFailed, e.Reason
			t.Outcome = messages.FailedOutcome(e.Code, e.Reason)
			r := row(t)
			r.Code = t.Outcome.Code
			tx.Turns = []persistence.TurnRow{r}
		}
		tx.DoneJobs = []persistence.JobKey{{Type: persistence.JobRespond, Turn: e.Turn}}
	case messages.StateCommitted:
		tx.States = []persistence.StateRow{{Branch: b.ID, Seq: e.State.Seq, ID: e.State.ID, Summary: e.State.Summary,
			Pinned: e.State.Pinned, Turns: e.Turns, Created: now}}
		for _, id := range e.Turns {
			if t, ok := b.Turn(id); ok {
				t.Phase, t.StateAfter = messages.PhaseStateCommitted, e.State.ID
				r := row(t)
				r.StateSeq = e.State.Seq
				tx.Turns = append(tx.Turns, r)
			}
			tx.DoneJobs = append(tx.DoneJobs, persistence.JobKey{Type: persistence.JobSummarize, Turn: id})
			tx.Jobs = append(tx.Jobs, job(persistence.JobIndex, id))
		}
	case messages.TurnIndexed:
		if t, ok := b.Turn(e.Turn); ok {
			t.Phase = messages.PhaseDone
			r := row(t)
			r.StateSeq, r.SummarizeMicros = stored.StateSeq, stored.SummarizeMicros
			tx.Turns = []persistence.TurnRow{r}
		}
		tx.DoneJobs = []persistence.JobKey{{Type: persistence.JobIndex, Turn: e.Turn}}
	case messages.FactPinned, messages.FactUnpinned, messages.FactEdited:
		// A pin writes no turn row: it is activity the retention job
		// must see.
		tx.Touched = []persistence.SessionTouch{{Session: b.Session, At: now}}
	}
	return tx
}
