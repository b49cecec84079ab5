package erase

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/messages"
)

// Run is `ctxinf delete session|branch ID [--json] [--server URL]`:
// a hard delete (SRD §14.4), on the data directory or through the server
// that owns it (or the one at --server). It is irreversible, and asks for
// no confirmation: naming the id is the confirmation.
func Run(e *cli.Env, args []string) error {
	if len(args) == 0 || args[0] != "session" && args[0] != "branch" {
		return errors.New("delete: want `delete session ID` or `delete branch ID`")
	}
	what := args[0]
	fs := flag.NewFlagSet("delete "+what, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	asJSON := fs.Bool("json", false, "print what was deleted as JSON")
	serverURL := fs.String("server", "", "ask the ctxinf serve at this URL (default: the data directory's, when one runs on it)")
	// The id may come before or after the flags.
	rest := args[1:]
	var id string
	if len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] != '-' {
		id, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return fmt.Errorf("delete %s: want one id, got %q and %q", what, id, fs.Args())
	}
	if id == "" {
		return fmt.Errorf("delete %s: the %s id is required", what, what)
	}
	ctx := context.Background()
	var out client.Deleted
	var rt *ctxinf.Runtime
	var err error
	if *serverURL == "" {
		rt, err = e.OpenRuntime(ctx)
	}
	if rt != nil {
		defer rt.Close()
		var res actors.DeleteResult
		if what == "session" {
			var sid messages.SessionID
			if sid, err = messages.ParseID[messages.SessionID](id); err != nil {
				return fmt.Errorf("delete session: %w", err)
			}
			res, err = rt.DeleteSession(ctx, sid)
		} else {
			var bid messages.BranchID
			if bid, err = messages.ParseID[messages.BranchID](id); err != nil {
				return fmt.Errorf("delete branch: %w", err)
			}
			res, err = rt.DeleteBranch(ctx, bid)
		}
		if err != nil {
			return err
		}
		out = server.Deleted(res)
	} else {
		c, rerr := e.Remote(*serverURL, err)
		if rerr != nil {
			return rerr
		}
		if what == "session" {
			sid, perr := messages.ParseID[messages.SessionID](id)
			if perr != nil {
				return fmt.Errorf("delete session: %w", perr)
			}
			out, err = c.DeleteSession(ctx, sid)
		} else {
			bid, perr := messages.ParseID[messages.BranchID](id)
			if perr != nil {
				return fmt.Errorf("delete branch: %w", perr)
			}
			out, err = c.DeleteBranch(ctx, bid)
		}
		if err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(out)
	}
	fmt.Fprintf(e.Stdout, "deleted %s %s for good: %d branches, %d messages, %d turns, %d steps, %d chunks, %d journals (%d store keys) in %.0f ms\n",
		what, id, len(out.Branches), out.Nodes, out.Turns, out.Steps, out.Chunks, out.Journals, out.Keys, out.TookMS)
	if out.ValueLogPending {
		fmt.Fprintln(e.Stdout, "note: deleted values of 64 KiB or more are still in the store's value log (a long read held the store open); the file is rewritten at the next start")
	}
	return nil
}
