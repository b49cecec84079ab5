package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// inspectBranch is what `ctxinf inspect` shows of a branch.
type inspectBranch struct {
	persistence.BranchRow
	Head      messages.TurnID `json:"head"`
	HeadDepth uint64          `json:"head_depth"`
	Turns     int             `json:"turns"`
	Pending   int             `json:"pending"`
	Chunks    int             `json:"chunks"`
	Phases    map[string]int  `json:"phases"`
	States    []inspectState  `json:"states"`
	LastTurns []inspectTurn   `json:"last_turns"`
}

type inspectState struct {
	Seq   uint64            `json:"seq"`
	ID    messages.StateID  `json:"id"`
	Turns []messages.TurnID `json:"turns,omitempty"`
}

// inspectTurn is a turn row, with the recovered partial output of a turn
// that never got its final response (SRD §13.4), labeled incomplete.
type inspectTurn struct {
	persistence.TurnRow
	Partial string `json:"partial_output,omitempty"`
	// Torn says a torn final journal line was dropped from Partial.
	Torn  bool          `json:"partial_torn_line_dropped,omitempty"`
	Steps []inspectStep `json:"steps,omitempty"`
}

// inspectStep is a provider step of a turn: who answered, how it ended
// and its stream counters (SRD §13.3).
type inspectStep struct {
	Index     uint32               `json:"index"`
	ID        messages.StepID      `json:"id"`
	Provider  string               `json:"provider"`
	Model     string               `json:"model"`
	Outcome   messages.StepOutcome `json:"outcome"`
	Items     int                  `json:"items"`
	Displayed uint64               `json:"displayed"`
	Durable   uint64               `json:"durable"`
	// Estimated is the assembler's count of the context, InputTokens
	// the provider's (0: not reported).
	Estimated   int `json:"estimated_tokens,omitempty"`
	InputTokens int `json:"input_tokens,omitempty"`
}

type inspectSession struct {
	persistence.SessionRow
	Branches []inspectBranch `json:"branches"`
}

type inspectReport struct {
	DataDir  string            `json:"data_dir"`
	Sessions []inspectSession  `json:"sessions"`
	Jobs     []persistence.Job `json:"jobs"`
}

// inspectSteps fills in t's provider steps and, for a turn that never got
// its response, the partial output its journal recovered.
func (e *env) inspectSteps(ctx context.Context, db *persistence.DB, t *inspectTurn) error {
	rows, err := db.Steps(ctx, t.ID)
	if err != nil {
		return err
	}
	for _, r := range rows {
		st := inspectStep{Index: r.Index, ID: r.ID, Provider: r.Provider, Model: r.Model,
			Outcome: r.Outcome, Items: len(r.Items), Displayed: r.Displayed, Durable: r.Durable, InputTokens: r.InputTokens}
		if r.Context != nil {
			st.Estimated = r.Context.Estimated
		}
		t.Steps = append(t.Steps, st)
	}
	if !t.Step.IsZero() && t.Reply.IsZero() {
		t.Partial, t.Torn, _ = actors.PartialOutput(filepath.Join(e.cfg.DataDir, "streams"), t.Step)
		if t.Torn {
			e.log.Warn().Str("turn", t.ID.String()).Str("step", t.Step.String()).Msg("stream journal: dropped a torn final line")
		}
	}
	return nil
}

// inspect reads the store directly (no actors run): sessions, branches,
// heads, turns with phases, pending counts and jobs.
func inspect(e *env, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	last := fs.Int("turns", 5, "how many of each branch's last turns to list")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	db, err := persistence.Open(storeOptions(e.cfg, filepath.Join(e.cfg.DataDir, "store"), e.log))
	if err != nil {
		return fmt.Errorf("open %s (is a runtime using it?): %w", e.cfg.DataDir, err)
	}
	defer db.Close()
	rep := inspectReport{DataDir: e.cfg.DataDir}
	sessions, err := db.Sessions(ctx)
	if err != nil {
		return err
	}
	for _, s := range sessions {
		is := inspectSession{SessionRow: s}
		branches, err := db.Branches(ctx, s.ID)
		if err != nil {
			return err
		}
		for _, b := range branches {
			ib := inspectBranch{BranchRow: b, Phases: map[string]int{}}
			if h, err := db.Head(ctx, b.ID); err == nil {
				ib.Head, ib.HeadDepth = h.Turn, h.Depth
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
				ib.LastTurns = append(ib.LastTurns, inspectTurn{TurnRow: r})
				if len(ib.LastTurns) > *last {
					ib.LastTurns = ib.LastTurns[1:]
				}
				return nil
			})
			if err != nil {
				return err
			}
			for i := range ib.LastTurns {
				if err := e.inspectSteps(ctx, db, &ib.LastTurns[i]); err != nil {
					return err
				}
			}
			states, err := db.StateRows(ctx, b.ID, 0, persistence.MaxPageTurns)
			if err != nil {
				return err
			}
			for _, st := range states {
				ib.States = append(ib.States, inspectState{Seq: st.Seq, ID: st.ID, Turns: st.Turns})
			}
			is.Branches = append(is.Branches, ib)
		}
		rep.Sessions = append(rep.Sessions, is)
	}
	if rep.Jobs, err = db.Jobs(ctx); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	w := e.stdout
	fmt.Fprintf(w, "data: %s · %d sessions · %d pending jobs\n", rep.DataDir, len(rep.Sessions), len(rep.Jobs))
	for _, s := range rep.Sessions {
		fmt.Fprintf(w, "session %s %q (active branch %s)\n", s.ID, s.Title, s.ActiveBranch)
		for _, b := range s.Branches {
			fmt.Fprintf(w, "  branch %s %s · head %s depth %d · %d turns · %d pending · %d states · %d chunks · phases %v\n",
				b.ID, b.Label, b.Head, b.HeadDepth, b.Turns, b.Pending, len(b.States), b.Chunks, b.Phases)
			if !b.Parent.IsZero() {
				fmt.Fprintf(w, "    forked from %s at %s\n", b.Parent, b.ForkAt)
			}
			for _, t := range b.LastTurns {
				line := fmt.Sprintf("    turn %d %s %s", t.Seq, t.ID, t.Phase)
				if t.Reason != "" {
					line += " (" + t.Reason + ")"
				}
				if t.StateSeq > 0 {
					line += fmt.Sprintf(" state #%d", t.StateSeq)
				}
				fmt.Fprintln(w, line)
				for _, st := range t.Steps {
					outcome := st.Outcome.Kind.String()
					if r := st.Outcome.Reason + st.Outcome.Code; r != "" {
						outcome += " (" + r + ")"
					}
					fmt.Fprintf(w, "      step %d %s %s/%s %s · %d items · stream durable/displayed %d/%d bytes · input tokens estimated %d, reported %d\n",
						st.Index, st.ID, st.Provider, st.Model, outcome, st.Items, st.Durable, st.Displayed, st.Estimated, st.InputTokens)
				}
				if t.Partial != "" {
					torn := ""
					if t.Torn {
						torn = " (a torn final journal line was dropped)"
					}
					fmt.Fprintf(w, "      partial output (incomplete)%s: %s\n", torn, oneLine(t.Partial, 200))
				}
			}
		}
	}
	for _, j := range rep.Jobs {
		fmt.Fprintf(w, "job %s branch %s turn %s\n", j.Type, j.Branch, j.Turn)
	}
	return nil
}
