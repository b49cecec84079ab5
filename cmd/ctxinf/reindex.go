package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/contextinfinity/ctxinf/messages"
)

// reindex runs indexing again over committed turns: of every branch, or
// of one. Chunks are unique by (source turn, type, hash), so nothing is
// duplicated; it reports what it inserted and what was already there.
func reindex(e *env, args []string) error {
	fs := flag.NewFlagSet("reindex", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	branchFlag := fs.String("branch", "", "only this branch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	rt, err := openRuntime(ctx, e)
	if err != nil {
		return err
	}
	defer rt.Close()
	var branches []messages.BranchID
	if *branchFlag != "" {
		id, err := messages.ParseID[messages.BranchID](*branchFlag)
		if err != nil {
			return fmt.Errorf("--branch: %w", err)
		}
		branches = append(branches, id)
	} else {
		sessions, err := rt.DB().Sessions(ctx)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			bs, err := rt.DB().Branches(ctx, s.ID)
			if err != nil {
				return err
			}
			for _, b := range bs {
				branches = append(branches, b.ID)
			}
		}
	}
	for _, b := range branches {
		ins, skip, err := rt.Reindex(ctx, b)
		if err != nil {
			return fmt.Errorf("reindex branch %s: %w", b, err)
		}
		fmt.Fprintf(e.stdout, "branch %s: %d chunks inserted, %d already indexed\n", b, ins, skip)
	}
	return nil
}
