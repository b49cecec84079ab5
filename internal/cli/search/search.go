package search

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/messages"
)

// Run is `ctxinf search --branch B [--k N] [--json] [--force]
// [--speaker S] [--from T] [--to T] QUERY`: the hybrid retrieval of a
// branch, with scores and source turns, of what a speaker said within a
// time if asked; with --force, the hits are forced into the branch's
// next turn.
func Run(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	branchFlag := fs.String("branch", "", "the branch to search (required)")
	k := fs.Int("k", 0, "hits to return (default retrieval.top_k)")
	asJSON := fs.Bool("json", false, "print the hits as JSON")
	force := fs.Bool("force", false, "force the hits into the branch's next turn")
	chunkFlag := fs.String("chunks", "", "with --force and no query: these chunk ids (comma-separated)")
	speaker := fs.String("speaker", "", "only what this speaker said: user, assistant, tool, or a participant's name")
	from := fs.String("from", "", "only what was said at or after this RFC 3339 time")
	to := fs.String("to", "", "only what was said before this RFC 3339 time")
	serverURL := fs.String("server", "", "ask the ctxinf serve at this URL (default: the data directory's, when one runs on it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *branchFlag == "" {
		return errors.New("search: --branch is required")
	}
	branch, err := messages.ParseID[messages.BranchID](*branchFlag)
	if err != nil {
		return fmt.Errorf("--branch: %w", err)
	}
	query := strings.Join(fs.Args(), " ")
	if query == "" && (*chunkFlag == "" || !*force) {
		return errors.New("search: a query is required (or --force --chunks ID,...)")
	}
	filter, err := server.SearchFilter(*speaker, "--from", *from, "--to", *to)
	if err != nil {
		return err
	}
	if !filter.IsZero() && query == "" {
		return errors.New("search: --speaker, --from and --to need a query")
	}
	opts := wiring.RankOptions(e.Config.Retrieval)
	if *k > 0 {
		opts.TopK, opts.MaxK, opts.Overfetch = *k, 0, max(opts.Overfetch, *k)
	}
	ctx := context.Background()
	var chunks []messages.ChunkID
	for _, s := range strings.Split(*chunkFlag, ",") {
		if s = strings.TrimSpace(s); s != "" {
			id, err := messages.ParseID[messages.ChunkID](s)
			if err != nil {
				return fmt.Errorf("--chunks: %w", err)
			}
			chunks = append(chunks, id)
		}
	}
	var hits []api.Hit
	var forced int
	var rt *ctxinf.Runtime
	if *serverURL == "" {
		rt, err = e.OpenRuntime(ctx)
	}
	if rt != nil {
		defer rt.Close()
		var local []actors.Hit
		local, forced, err = rt.SearchAndForce(ctx, branch, query, &opts, filter, *force, chunks)
		hits = server.Hits(local)
	} else {
		c, rerr := e.Remote(*serverURL, err)
		if rerr != nil {
			return rerr
		}
		hits, forced, err = c.SearchWith(ctx, branch, query, client.SearchOptions{K: *k, Force: *force, Chunks: chunks,
			Speaker: *speaker, From: *from, To: *to})
	}
	if err != nil {
		return err
	}
	if *asJSON {
		if hits == nil {
			hits = []api.Hit{}
		}
		return json.NewEncoder(e.Stdout).Encode(struct {
			Query  string    `json:"query"`
			Hits   []api.Hit `json:"hits"`
			Forced int       `json:"forced,omitempty"`
		}{query, hits, forced})
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "score\tvector\ttext\tturn seq\tsource turn\tchunk\ttext")
	for _, h := range hits {
		text := strings.Join(strings.Fields(h.Chunk.Text), " ")
		if r := []rune(text); len(r) > 80 {
			text = string(r[:77]) + "..."
		}
		fmt.Fprintf(tw, "%.3f\t%.3f\t%.3f\t%d\t%s\t%s\t%s\n", h.Score, h.Vector, h.Text, h.Chunk.Seq, h.Chunk.SourceTurn, h.Chunk.ID, text)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if forced > 0 {
		fmt.Fprintf(e.Stdout, "%d chunks forced into the next turn of branch %s\n", forced, branch)
	}
	return nil
}
