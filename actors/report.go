package actors

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Report is what `ctxinf inspect` shows of a data directory: every
// session with its branches (heads, turn phases, pending counts, states,
// chunks, the last turns with their provider steps and the output
// recovered from interrupted ones) and the pending jobs. It is read from
// the store alone (BuildReport), or from a server that owns the store
// (GET /v1/inspect), to the same bytes.
type Report struct {
	DataDir  string            `json:"data_dir"`
	Sessions []ReportSession   `json:"sessions"`
	Jobs     []persistence.Job `json:"jobs"`
}

// ReportSession is a session of a Report.
type ReportSession struct {
	persistence.SessionRow
	Branches []ReportBranch `json:"branches"`
}

// ReportBranch is a branch of a Report.
type ReportBranch struct {
	persistence.BranchRow
	Head      messages.NodeID `json:"head"`
	HeadDepth uint64          `json:"head_depth"`
	Turns     int             `json:"turns"`
	Pending   int             `json:"pending"`
	Chunks    int             `json:"chunks"`
	Phases    map[string]int  `json:"phases"`
	States    []ReportState   `json:"states"`
	LastTurns []ReportTurn    `json:"last_turns"`
}

// ReportState is a state row of a branch: its seq, id and the turns it
// folded.
type ReportState struct {
	Seq   uint64            `json:"seq"`
	ID    messages.StateID  `json:"id"`
	Turns []messages.TurnID `json:"turns,omitempty"`
}

// ReportTurn is a turn row, with the recovered partial output of a turn
// that never got its final response (SRD §13.4), labeled incomplete.
type ReportTurn struct {
	persistence.TurnRow
	Partial string `json:"partial_output,omitempty"`
	// Torn says a torn final journal line was dropped from Partial.
	Torn  bool         `json:"partial_torn_line_dropped,omitempty"`
	Steps []ReportStep `json:"steps,omitempty"`
}

// ReportStep is a provider step of a turn: who answered, how it ended
// and its stream counters (SRD §13.3).
type ReportStep struct {
	Index     uint32               `json:"index"`
	ID        messages.StepID      `json:"id"`
	Provider  string               `json:"provider"`
	Model     string               `json:"model"`
	Outcome   messages.StepOutcome `json:"outcome"`
	Items     int                  `json:"items"`
	Displayed uint64               `json:"displayed"`
	Durable   uint64               `json:"durable"`
	// Estimated is the assembler's count of the context, InputTokens
	// the provider's (0: not reported), CacheReadTokens the part of it
	// read from the provider's prompt cache.
	Estimated       int `json:"estimated_tokens,omitempty"`
	InputTokens     int `json:"input_tokens,omitempty"`
	CacheReadTokens int `json:"cache_read_input_tokens,omitempty"`
	// RetrievalTokens is the retrieved memory's share of Estimated, of
	// at most RetrievalMax.
	RetrievalTokens int `json:"retrieval_tokens,omitempty"`
	RetrievalMax    int `json:"retrieval_max,omitempty"`
}

// BuildReport reads the report of the store in dataDir (db, its stream
// journals under dataDir/streams), listing up to lastTurns last turns of
// each branch.
func BuildReport(ctx context.Context, db persistence.Database, dataDir string, lastTurns int) (Report, error) {
	return BuildReportOf(ctx, db, dataDir, lastTurns, nil)
}

// BuildReportOf is BuildReport of the sessions keep keeps (nil: all),
// with the jobs of their branches only.
func BuildReportOf(ctx context.Context, db persistence.Database, dataDir string, lastTurns int, keep func(persistence.SessionRow) bool) (Report, error) {
	sessions, err := db.Sessions(ctx)
	if err != nil {
		return Report{DataDir: dataDir, Sessions: []ReportSession{}}, err
	}
	if keep != nil {
		sessions = slices.DeleteFunc(sessions, func(s persistence.SessionRow) bool { return !keep(s) })
	}
	return reportOf(ctx, db, dataDir, lastTurns, sessions, keep == nil)
}

// BuildReportOfSessions is BuildReport of the sessions given (a page of
// a tenant's), with the jobs of their branches only.
func BuildReportOfSessions(ctx context.Context, db persistence.Database, dataDir string, lastTurns int, sessions []persistence.SessionRow) (Report, error) {
	return reportOf(ctx, db, dataDir, lastTurns, sessions, false)
}

// reportOf builds the report of sessions, with every pending job if
// allJobs and those of their branches otherwise.
func reportOf(ctx context.Context, db persistence.Database, dataDir string, lastTurns int, sessions []persistence.SessionRow, allJobs bool) (Report, error) {
	rep := Report{DataDir: dataDir, Sessions: []ReportSession{}}
	journals, done := reportJournals(db, filepath.Join(dataDir, "streams"))
	defer done()
	kept := map[messages.BranchID]bool{}
	for _, s := range sessions {
		is := ReportSession{SessionRow: s}
		branches, err := db.Branches(ctx, s.ID)
		if err != nil {
			return rep, err
		}
		for _, b := range branches {
			ib := ReportBranch{BranchRow: b, Phases: map[string]int{}}
			if h, err := db.Head(ctx, b.ID); err == nil {
				ib.Head, ib.HeadDepth = h.Node, h.Depth
			}
			err := db.EachTurnRow(ctx, b.ID, func(r persistence.TurnRow) error {
				ib.Turns++
				ib.Phases[r.Phase.String()]++
				if r.Phase == messages.PhaseResponseFinalized {
					ib.Pending++
				}
				cs, err := db.Chunks(ctx, r.ID)
				if err != nil {
					return err
				}
				ib.Chunks += len(cs)
				ib.LastTurns = append(ib.LastTurns, ReportTurn{TurnRow: r})
				if len(ib.LastTurns) > lastTurns {
					ib.LastTurns = ib.LastTurns[1:]
				}
				return nil
			})
			if err != nil {
				return rep, err
			}
			for i := range ib.LastTurns {
				if err := reportSteps(ctx, db, journals, &ib.LastTurns[i]); err != nil {
					return rep, err
				}
			}
			states, err := db.StateRows(ctx, b.ID, 0, persistence.MaxPageNodes)
			if err != nil {
				return rep, err
			}
			for _, st := range states {
				ib.States = append(ib.States, ReportState{Seq: st.Seq, ID: st.ID, Turns: st.Turns})
			}
			is.Branches = append(is.Branches, ib)
			kept[b.ID] = true
		}
		rep.Sessions = append(rep.Sessions, is)
	}
	jobs, err := db.Jobs(ctx)
	rep.Jobs = []persistence.Job{} // [] when none, filtered or not
	if allJobs {
		rep.Jobs = append(rep.Jobs, jobs...)
		return rep, err
	}
	for _, j := range jobs {
		if kept[j.Branch] {
			rep.Jobs = append(rep.Jobs, j)
		}
	}
	return rep, err
}

// reportSteps fills in t's provider steps and the output a crash cut
// off of one of them (recoveredOutput; on a store whose recovery has not
// run, read from the journals).
func reportSteps(ctx context.Context, db persistence.Database, journals persistence.JournalStore, t *ReportTurn) error {
	rows, err := db.Steps(ctx, t.ID)
	if err != nil {
		return err
	}
	for _, r := range rows {
		st := ReportStep{Index: r.Index, ID: r.ID, Provider: r.Provider, Model: r.Model,
			Outcome: r.Outcome, Items: len(r.Items), Displayed: r.Displayed, Durable: r.Durable, InputTokens: r.InputTokens,
			CacheReadTokens: r.CacheReadTokens}
		if r.Context != nil {
			st.Estimated = r.Context.Estimated
			st.RetrievalTokens, st.RetrievalMax = r.Context.RetrievalTokens, r.Context.RetrievalMax
		}
		t.Steps = append(t.Steps, st)
	}
	// A journal that does not read leaves the turn without its output
	// rather than the report unread.
	if rec, ok, err := recoveredOutput(ctx, rows, journals, db.Cipher(), t.ID, t.Step); err == nil && ok {
		t.Partial, t.Torn = rec.Text, rec.Torn()
	}
	return nil
}

// DataDir is the runtime's data directory.
func (r *Runtime) DataDir() string { return r.cfg.DataDir }
