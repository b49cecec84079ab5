package reindex

import (
	"context"
	"flag"
	"fmt"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/messages"
)

// Run runs indexing again over committed turns: of every branch, or
// of one. Chunks are unique by (source turn, type, hash), so nothing is
// duplicated; it reports what it inserted and what was already there.
// Through the server that owns the data directory (or --server) when one
// runs.
func Run(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("reindex", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	branchFlag := fs.String("branch", "", "only this branch")
	serverURL := fs.String("server", "", "ask the ctxinf serve at this URL (default: the data directory's, when one runs on it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var only []messages.BranchID
	if *branchFlag != "" {
		id, err := messages.ParseID[messages.BranchID](*branchFlag)
		if err != nil {
			return fmt.Errorf("--branch: %w", err)
		}
		only = append(only, id)
	}
	ctx := context.Background()
	var err error
	if *serverURL == "" {
		r, oerr := e.OpenRuntime(ctx)
		if oerr == nil {
			defer r.Close()
			return reindexWith(ctx, e, only, func(ctx context.Context) ([]messages.BranchID, error) {
				var bs []messages.BranchID
				sessions, err := r.DB().Sessions(ctx)
				if err != nil {
					return nil, err
				}
				for _, s := range sessions {
					rows, err := r.DB().Branches(ctx, s.ID)
					if err != nil {
						return nil, err
					}
					for _, b := range rows {
						bs = append(bs, b.ID)
					}
				}
				return bs, nil
			}, r.Reindex)
		}
		err = oerr
	}
	c, rerr := e.Remote(*serverURL, err)
	if rerr != nil {
		return rerr
	}
	return reindexWith(ctx, e, only, func(ctx context.Context) ([]messages.BranchID, error) { return remoteBranches(ctx, c) }, c.Reindex)
}

// reindexWith reindexes the branches only names, or all that list
// returns, with run, and prints what each got.
func reindexWith(ctx context.Context, e *cli.Env, only []messages.BranchID, list func(context.Context) ([]messages.BranchID, error),
	run func(context.Context, messages.BranchID) (int, int, error)) error {
	branches := only
	if len(branches) == 0 {
		var err error
		if branches, err = list(ctx); err != nil {
			return err
		}
	}
	for _, b := range branches {
		ins, skip, err := run(ctx, b)
		if err != nil {
			return fmt.Errorf("reindex branch %s: %w", b, err)
		}
		fmt.Fprintf(e.Stdout, "branch %s: %d chunks inserted, %d already indexed\n", b, ins, skip)
	}
	return nil
}

// remoteBranches lists every branch of every session the server shows.
func remoteBranches(ctx context.Context, c *client.Client) ([]messages.BranchID, error) {
	sessions, err := c.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	var bs []messages.BranchID
	for _, s := range sessions {
		rows, err := c.Branches(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		for _, b := range rows {
			bs = append(bs, b.ID)
		}
	}
	return bs, nil
}
