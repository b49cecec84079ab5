package persistence

import (
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Retention: sessions idle longer than their retention are
// deleted by a job of the runtime (actors/retention.go). The store keeps
// what the job decides on and what lets it resume:
//
//   - a session's own retention (SessionRow.Retention, Tx.Retention);
//   - its last activity (SessionActivity): read from the rows a turn or a
//     fork writes, and from a per-session activity row for what writes
//     none (a pin: Tx.Touched);
//   - the job's record (RetentionJob): the sessions a run chose and has
//     not deleted yet, so that a run cut short by a crash resumes with
//     them. Each delete is a Purge, all or nothing by its own marker.

// SessionTouch is activity on a session at At (Tx.Touched).
type SessionTouch struct {
	Session messages.SessionID
	At      time.Time
}

// SessionRetention sets a session's own retention (Tx.Retention): Idle
// nil returns it to its tenant's; 0 keeps it forever.
type SessionRetention struct {
	Session messages.SessionID
	Idle    *time.Duration
}

// RetentionJob is the retention job's record in the store.
type RetentionJob struct {
	// Pending are the sessions the run under way chose to delete and has
	// not deleted yet (empty between runs): a run cut short resumes with
	// them, each checked again (one active since is kept).
	Pending []messages.SessionID `json:"pending,omitempty"`
	// Started is when the run under way (or the last) started; Finished
	// when the last run ended, NextRun when the next is due.
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	NextRun  time.Time `json:"next_run,omitzero"`
	// Deleted counts the sessions the job has deleted, over all runs.
	Deleted uint64 `json:"deleted,omitempty"`
}

// SessionActivity is what DB.SessionActivity knows of a session.
type SessionActivity struct {
	Session SessionRow
	// Last is the session's latest activity: the latest of its creation,
	// its branches' creation (forks), its turn rows' last writes (a turn
	// accepted, answered, failed, folded) and its touches (pins).
	Last time.Time
	// InFlight: a turn of the session has no final response yet
	// (accepted, context prepared or responding).
	InFlight bool
}
