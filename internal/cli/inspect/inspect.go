package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Run reads the store directly (no actors run): sessions, branches,
// heads, turns with phases, pending counts and jobs; from the server that
// owns the data directory (or --server) when one does.
func Run(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	last := fs.Int("turns", 5, "how many of each branch's last turns to list")
	serverURL := fs.String("server", "", "ask the ctxinf serve at this URL (default: the data directory's, when one runs on it)")
	journal := fs.String("journal", "", "write the stream journal of this step, as the file {data_dir}/streams/{step_id}.jsonl of SRD 13.1 (lines sealed as stored in an encrypted store)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	if *journal != "" {
		return writeJournal(ctx, e, *journal)
	}
	var rep api.Report
	var err error
	var db persistence.Database // nil unless it opened
	if *serverURL == "" {
		db, err = e.OpenStore(ctx)
	}
	if db != nil {
		defer db.Close()
		var local actors.Report
		local, err = actors.BuildReport(ctx, db, e.Config.DataDir, *last)
		rep = server.Report(local)
	} else {
		c, rerr := e.Remote(*serverURL, err)
		if rerr != nil {
			return fmt.Errorf("open %s: %w", e.Config.DataDir, rerr)
		}
		rep, err = c.Inspect(ctx, *last)
	}
	if err != nil {
		return err
	}
	for _, s := range rep.Sessions {
		for _, b := range s.Branches {
			for _, t := range b.LastTurns {
				if t.Torn {
					e.Log.Warn().Str("turn", t.ID.String()).Str("step", t.Step.String()).Msg("stream journal: dropped a torn final line")
				}
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	w := e.Stdout
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
					cached := ""
					if st.CacheReadTokens > 0 {
						cached = fmt.Sprintf(" (%d from the prompt cache)", st.CacheReadTokens)
					}
					fmt.Fprintf(w, "      step %d %s %s/%s %s · %d items · stream durable/displayed %d/%d bytes · input tokens estimated %d, reported %d%s\n",
						st.Index, st.ID, st.Provider, st.Model, outcome, st.Items, st.Durable, st.Displayed, st.Estimated, st.InputTokens, cached)
				}
				if t.Partial != "" {
					torn := ""
					if t.Torn {
						torn = " (a torn final journal line was dropped)"
					}
					fmt.Fprintf(w, "      partial output (incomplete)%s: %s\n", torn, cli.OneLine(t.Partial, 200))
				}
			}
		}
	}
	for _, j := range rep.Jobs {
		fmt.Fprintf(w, "job %s branch %s turn %s\n", j.Type, j.Branch, j.Turn)
	}
	return nil
}

// writeJournal writes the stream journal of the step named by id to
// stdout, byte for byte the SRD's one file per step: from the segment
// files of {data_dir}/streams (which a running server does not lock), or
// from the PostgreSQL store's rows.
func writeJournal(ctx context.Context, e *cli.Env, id string) error {
	step, err := messages.ParseID[messages.StepID](id)
	if err != nil {
		return fmt.Errorf("--journal: %w", err)
	}
	pg, err := wiring.PostgresOptions(e.Config, e.Log)
	if err != nil {
		return err
	}
	var js persistence.JournalStore
	if pg != nil {
		db, err := e.OpenStore(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		k, ok := db.(interface {
			Journals() persistence.JournalStore
		})
		if !ok {
			return fmt.Errorf("--journal: the store %T keeps no stream journals", db)
		}
		js = k.Journals()
	} else {
		s := persistence.NewSegmentJournals(filepath.Join(e.Config.DataDir, "streams"))
		defer s.Close()
		js = s
	}
	r, err := js.Open(ctx, step)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--journal: step %s has no stream journal in %s", step, e.Config.DataDir)
	}
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(e.Stdout, r)
	return err
}
