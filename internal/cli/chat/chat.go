package chat

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

const chatHelp = `Type a message and press Enter. Commands:
  /history [N]   the last N messages of this branch (default 10)
  /pending       turns answered but not yet folded into the summary
  /pin FACT      pin a fact: every later context shows it verbatim
  /pins          the pinned facts, by number
  /unpin N       unpin fact N (see /pins)
  /editpin N FACT
                 replace the text of pinned fact N (it keeps its number)
  /commit        fold pending turns into the summary now
  /fork [N]      fork after turn N (default: the head) and switch to it
  /branches      branches of this session
  /switch B      switch to another branch (its label, id or short id)
  /delete        delete this branch for good (asks you to confirm with
                 its id; a branch with forks, or the session's first,
                 cannot be: see ctxinf delete session)
  /state         the head state: summary, pinned facts, counters
  /model [NAME]  the models this branch can use, or switch it to NAME
                 ("default" goes back to default_model)
  /help          this text
  /quit          leave (everything is already on disk)
`

// Chat is `ctxinf chat`: the terminal UI (TUI) on a terminal; with --plain,
// or when stdin or stdout is not one, the line mode, a line in and the
// reply out, with the /commands of chatHelp.
func Chat(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	var f tuiFlags
	f.register(fs)
	plain := fs.Bool("plain", false, "the line mode (what ctxinf chat runs when stdin or stdout is not a terminal): a line in, the reply out")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*plain && isTerminal(e.Stdin) && isTerminal(e.Stdout) {
		return runTUI(e, f)
	}
	if f.data != "" {
		e.Config.DataDir = f.data
	}
	sessionFlag, serverURL := &f.session, &f.server
	branchFlag := &f.branch
	ctx := context.Background()
	var be tui.Backend
	where, err := filepath.Abs(e.Config.DataDir)
	if err != nil {
		return err
	}
	where = "data in " + where
	if *serverURL == "" {
		var cfg actors.Config
		if cfg, err = e.RuntimeConfig(); err != nil {
			return err
		}
		var local *ctxinf.Runtime
		if local, err = e.OpenRuntimeWith(ctx, cfg); err == nil {
			defer local.Close()
			be = newEmbedded(local, cfg.Provider.Name(), cfg.Model)
		}
	}
	if be == nil {
		c, rerr := e.Remote(*serverURL, err)
		if rerr != nil {
			return rerr
		}
		be, where = newRemote(c), "server "+c.URL()
	}
	branch, err := pickBranch(ctx, be, *sessionFlag, *branchFlag)
	if err != nil {
		return err
	}
	provider, model, err := be.Names(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "ctxinf chat: session %s, branch %s (%s), %s, provider %s, model %s.\nType a message, or /help.\n",
		branch.Session, branch.ID, branch.Label, where, provider, model)
	if err := showInterrupted(ctx, e.Stdout, be, branch.ID); err != nil {
		fmt.Fprintf(e.Stdout, "error: %v\n", err)
	}
	in := bufio.NewScanner(e.Stdin)
	in.Buffer(make([]byte, 64<<10), 8<<20)
	for {
		fmt.Fprint(e.Stdout, "> ")
		if !in.Scan() {
			fmt.Fprintln(e.Stdout)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		if strings.ContainsRune(line, '\x1b') {
			// An arrow or function key: this mode has no line editing.
			fmt.Fprintln(e.Stdout, "error: the line holds a terminal key sequence (an arrow?) and was not sent: the line mode has no line editing; use ctxinf tui")
			continue
		}
		if strings.HasPrefix(line, "/") {
			quit, err := chatCommand(ctx, e, be, &branch, line)
			if err != nil {
				fmt.Fprintf(e.Stdout, "error: %v\n", err)
			}
			if quit {
				return nil
			}
			continue
		}
		seq, last, err := be.Submit(ctx, branch.ID, line, func(u tui.Update) {
			fmt.Fprint(e.Stdout, u.Delta)
			switch it := u.Item.(type) {
			case messages.ToolCall:
				fmt.Fprintf(e.Stdout, "\n  [tool call %s %s]\n", it.Name, cli.OneLine(string(it.Arguments), 200))
			case messages.ToolOutput:
				fmt.Fprintf(e.Stdout, "  [tool result %s]\n", cli.OneLine(string(it.Output), 200))
			}
		})
		if err != nil {
			fmt.Fprintf(e.Stdout, "error: %v\n", err)
			continue
		}
		if last.Outcome.Kind == messages.OutcomeIncomplete || last.Outcome.Kind == messages.OutcomePaused {
			fmt.Fprintf(e.Stdout, "\n  [%s: %s]", last.Outcome.Kind, last.Outcome.Reason)
		}
		fmt.Fprintf(e.Stdout, "\n  [turn %d · %s · stream durable/displayed %d/%d bytes of text]\n", seq, last.Phase, last.TextDurable, last.TextDisplayed)
		if last.Phase == messages.PhaseFailed {
			// What failed, and why: the code a client of the server
			// gets (context_too_large, provider_error, cancelled…).
			fmt.Fprintf(e.Stdout, "  %s (%s): %s\n", last.Outcome.Kind, last.Outcome.Code, last.Outcome.Message)
		}
	}
}

// pickBranch resumes the given branch or session, else the newest
// session's active branch, else a new session.
func pickBranch(ctx context.Context, be tui.Backend, session, branch string) (api.Branch, error) {
	if branch != "" {
		if id, err := messages.ParseID[messages.BranchID](branch); err == nil {
			return be.BranchRow(ctx, id)
		}
		// A label or short id, of the session's branches.
		b, err := pickBranch(ctx, be, session, "")
		if err == nil {
			b, err = resolveBranch(ctx, be, b.Session, branch)
		}
		if err != nil {
			return api.Branch{}, fmt.Errorf("--branch: %w", err)
		}
		return b, nil
	}
	if session != "" {
		id, err := messages.ParseID[messages.SessionID](session)
		if err != nil {
			return api.Branch{}, fmt.Errorf("--session: %w", err)
		}
		s, err := be.Session(ctx, id)
		if err != nil {
			return api.Branch{}, fmt.Errorf("--session: %w", err)
		}
		return be.BranchRow(ctx, s.ActiveBranch)
	}
	s, ok, err := be.LatestSession(ctx)
	if err != nil {
		return api.Branch{}, err
	}
	if !ok {
		return be.CreateSession(ctx, "chat")
	}
	return be.BranchRow(ctx, s.ActiveBranch)
}

// resolveBranch finds the branch of session name names: its id, label or
// short id (tui.ResolveBranch).
func resolveBranch(ctx context.Context, be tui.Backend, session messages.SessionID, name string) (api.Branch, error) {
	if id, err := messages.ParseID[messages.BranchID](name); err == nil {
		return be.BranchRow(ctx, id)
	}
	bs, err := be.Branches(ctx, session)
	if err != nil {
		return api.Branch{}, err
	}
	return tui.ResolveBranch(bs, name)
}

func chatCommand(ctx context.Context, e *cli.Env, be tui.Backend, branch *api.Branch, line string) (quit bool, err error) {
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	out := e.Stdout
	switch cmd {
	case "/quit", "/exit":
		return true, nil
	case "/help":
		fmt.Fprint(out, chatHelp)
	case "/history":
		n := 10
		if arg != "" {
			if n, err = strconv.Atoi(arg); err != nil || n < 1 || n > persistence.MaxPageNodes {
				return false, fmt.Errorf("/history: N must be 1..%d", persistence.MaxPageNodes)
			}
		}
		hist, _, err := be.History(ctx, branch.ID, messages.TurnID{}, n)
		if err != nil {
			return false, err
		}
		for _, h := range hist {
			fmt.Fprintf(out, "  #%d %s: %s\n", h.Depth, h.Role, cli.OneLine(h.Text, 200))
			if h.Partial != nil {
				printRecovered(out, h.Depth, *h.Partial)
			}
		}
	case "/state":
		info, err := be.Info(ctx, branch.ID)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(out, "  head state #%d %s · turns %d · committed %d · failed %d · indexed %d · pending %d\n",
			info.State.Seq, info.State.ID, info.TurnSeq, info.Committed, info.Failed, info.Indexed, info.Pending)
		pins, err := be.Pins(ctx, branch.ID)
		if err != nil {
			return false, err
		}
		for _, p := range pins {
			fmt.Fprintf(out, "  pinned #%d: %s\n", p.ID, p.Fact)
		}
		fmt.Fprintf(out, "  summary:\n%s\n", cli.Indent(info.State.Summary))
	case "/pending":
		pending, err := be.Pending(ctx, branch.ID)
		if err != nil {
			return false, err
		}
		if len(pending) == 0 {
			fmt.Fprintln(out, "  no pending turns")
		}
		for _, t := range pending {
			fmt.Fprintf(out, "  turn %d (%s) is pending: it goes into the next context verbatim\n", t.Seq, t.Turn)
		}
	case "/model":
		if arg == "" {
			info, err := be.Info(ctx, branch.ID)
			if err != nil {
				return false, err
			}
			current := info.Model
			if current == "" {
				current = "default"
			}
			names, err := be.ModelNames(ctx)
			if err != nil {
				return false, err
			}
			fmt.Fprintf(out, "  this branch uses: %s; available: %s\n", current, strings.Join(names, ", "))
			return false, nil
		}
		if arg == "default" {
			arg = ""
		}
		if err := be.SelectModel(ctx, branch.ID, arg); err != nil {
			return false, err
		}
		fmt.Fprintln(out, "  model selected for the next turns")
	case "/pin":
		p, err := be.Pin(ctx, branch.ID, arg)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(out, "  pinned #%d (/unpin %d to unpin it)\n", p.ID, p.ID)
	case "/pins":
		pins, err := be.Pins(ctx, branch.ID)
		if err != nil {
			return false, err
		}
		if len(pins) == 0 {
			fmt.Fprintln(out, "  no pinned facts")
		}
		for _, p := range pins {
			fmt.Fprintf(out, "  #%d %s (since turn %d)\n", p.ID, p.Fact, p.Seq)
		}
	case "/unpin":
		n, err := strconv.ParseUint(arg, 10, 64)
		if err != nil || n == 0 {
			return false, errors.New("/unpin: N must be a pinned fact's number (see /pins)")
		}
		if err := be.Unpin(ctx, branch.ID, n); err != nil {
			return false, err
		}
		fmt.Fprintf(out, "  unpinned #%d\n", n)
	case "/editpin":
		num, fact, _ := strings.Cut(arg, " ")
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n == 0 {
			return false, errors.New("/editpin: usage /editpin N FACT, N a pinned fact's number (see /pins)")
		}
		p, err := be.EditPin(ctx, branch.ID, n, strings.TrimSpace(fact))
		if err != nil {
			return false, err
		}
		fmt.Fprintf(out, "  #%d is now: %s\n", p.ID, p.Fact)
	case "/commit":
		if err := be.CommitPending(ctx, branch.ID); err != nil {
			return false, err
		}
		fmt.Fprintln(out, "  summarizing the pending turns")
	case "/fork":
		at := ctxinf.TurnID{}
		if arg != "" {
			seq, err := strconv.ParseUint(arg, 10, 64)
			if err != nil || seq == 0 {
				return false, errors.New("/fork: N must be a turn number (see /history)")
			}
			row, err := be.TurnAt(ctx, branch.ID, seq)
			if err != nil {
				return false, fmt.Errorf("/fork: %w", err)
			}
			at = row.ID
		}
		b, err := be.Fork(ctx, branch.ID, at, "fork")
		if err != nil {
			return false, err
		}
		*branch = b
		fmt.Fprintf(out, "  now on branch %s (forked from %s)\n", b.ID, b.Parent)
	case "/branches":
		bs, err := be.Branches(ctx, branch.Session)
		if err != nil {
			return false, err
		}
		for _, b := range bs {
			mark := " "
			if b.ID == branch.ID {
				mark = "*"
			}
			fmt.Fprintf(out, " %s %s %s parent=%s\n", mark, b.ID, b.Label, b.Parent)
		}
	case "/switch":
		b, err := resolveBranch(ctx, be, branch.Session, arg)
		if err != nil {
			return false, fmt.Errorf("/switch: %w", err)
		}
		*branch = b
		fmt.Fprintf(out, "  now on branch %s (%s)\n", b.ID, b.Label)
	case "/delete":
		return false, chatDelete(ctx, out, be, branch, arg)
	default:
		return false, fmt.Errorf("unknown command %s (try /help)", cmd)
	}
	return false, nil
}

// chatDelete is /delete: without an argument it says what deleting the
// current branch does, or why it cannot be deleted, and asks for its id
// as the confirmation; with the id it deletes it for good and moves to
// its parent.
func chatDelete(ctx context.Context, out io.Writer, be tui.Backend, branch *api.Branch, arg string) error {
	if branch.Parent.IsZero() {
		fmt.Fprintf(out, "  branch %s is the first branch of session %s: it goes only with the session,\n"+
			"  which deletes every branch of it: ctxinf delete session %s\n", branch.ID, branch.Session, branch.Session)
		return nil
	}
	bs, err := be.Branches(ctx, branch.Session)
	if err != nil {
		return err
	}
	var forks []string
	for _, b := range bs {
		if b.Parent == branch.ID {
			forks = append(forks, b.ID.String())
		}
	}
	if len(forks) > 0 {
		fmt.Fprintf(out, "  branch %s has forks (%s), which share its turns: delete them first (/switch to each, /delete)\n",
			branch.ID, strings.Join(forks, ", "))
		return nil
	}
	if arg == "" {
		fmt.Fprintf(out, "  /delete removes branch %s (%s) for good: its turns, summaries, pins, chunks, the requests and\n"+
			"  responses of its model calls and its stream journals; nothing of it stays on disk. It cannot be undone.\n"+
			"  To confirm, type: /delete %s\n", branch.ID, branch.Label, branch.ID)
		return nil
	}
	if arg != branch.ID.String() {
		return fmt.Errorf("/delete: %q is not this branch's id (%s): nothing deleted", arg, branch.ID)
	}
	parent, err := be.BranchRow(ctx, branch.Parent)
	if err != nil {
		return err
	}
	res, err := be.DeleteBranch(ctx, branch.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  deleted branch %s for good (%d messages, %d turns, %.0f ms); now on branch %s\n",
		branch.ID, res.Nodes, res.Turns, res.TookMS, parent.ID)
	*branch = parent
	return nil
}
