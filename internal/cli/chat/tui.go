package chat

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mattn/go-isatty"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/messages"
)

// TUILogName is the file in the temporary directory the log goes to
// while the TUI owns the terminal.
const TUILogName = "ctxinf-tui.log"

// tuiFlags are the flags of ctxinf tui (and of ctxinf chat, which runs
// the TUI on a terminal).
type tuiFlags struct {
	data, session, branch, server string
}

func (f *tuiFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.data, "data", "", "the data directory (default: data_dir of the configuration, ./data)")
	fs.StringVar(&f.session, "session", "", "session to resume (default: the newest, or a new one)")
	fs.StringVar(&f.branch, "branch", "", "branch to resume, by label, id or short id (default: the session's active branch)")
	fs.StringVar(&f.server, "server", "", "run as a client of the ctxinf serve at this URL, token from the environment (default: the data directory's server, when one runs on it)")
}

// TUI is ctxinf tui: the terminal UI on the embedded runtime, or on
// the server at --server (or the one that owns the data directory).
func TUI(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("tui", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	var f tuiFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return runTUI(e, f)
}

// isTerminal says whether f is a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && (isatty.IsTerminal(file.Fd()) || isatty.IsCygwinTerminal(file.Fd()))
}

func runTUI(e *cli.Env, f tuiFlags) error {
	if !isTerminal(e.Stdin) || !isTerminal(e.Stdout) {
		return fmt.Errorf("ctxinf tui needs a terminal; for scripts use ctxinf chat --plain")
	}
	if f.data != "" {
		e.Config.DataDir = f.data
	}
	// The log would draw over the screen: it goes to a file meanwhile.
	logPath := filepath.Join(os.TempDir(), TUILogName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	e.Log = wiring.Logger(e.Config.Log, logFile, e.Scrub)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	where, err := filepath.Abs(e.Config.DataDir)
	if err != nil {
		return err
	}
	where = "data in " + where
	var be tui.Backend
	if f.server == "" {
		cfg, cerr := e.RuntimeConfig()
		if cerr != nil {
			return cerr
		}
		var local *ctxinf.Runtime
		if local, err = e.OpenRuntimeWith(ctx, cfg); err == nil {
			defer local.Close()
			be = newEmbedded(local, cfg.Provider.Name(), cfg.Model)
		}
	}
	if be == nil {
		c, rerr := e.Remote(f.server, err)
		if rerr != nil {
			return rerr
		}
		be, where = newRemote(c), "server "+c.URL()
	}
	branch, err := tuiBranch(ctx, be, f.session, f.branch)
	if err != nil {
		return err
	}
	return tui.Run(tui.Options{Ctx: ctx, Backend: be, Branch: branch, Where: where, Screens: tuiScreens()}, e.Stdin, e.Stdout)
}

// tuiBranch is the branch the TUI opens: --branch by label, id or short
// id among the branches of --session (default: the newest session), or
// what the chat would resume.
func tuiBranch(ctx context.Context, be tui.Backend, session, branch string) (api.Branch, error) {
	if branch == "" {
		return pickBranch(ctx, be, session, "")
	}
	if id, err := messages.ParseID[messages.BranchID](branch); err == nil {
		return be.BranchRow(ctx, id)
	}
	var s api.Session
	if session != "" {
		id, err := messages.ParseID[messages.SessionID](session)
		if err != nil {
			return api.Branch{}, fmt.Errorf("--session: %w", err)
		}
		if s, err = be.Session(ctx, id); err != nil {
			return api.Branch{}, fmt.Errorf("--session: %w", err)
		}
	} else {
		latest, ok, err := be.LatestSession(ctx)
		if err != nil {
			return api.Branch{}, err
		}
		if !ok {
			return api.Branch{}, fmt.Errorf("--branch %s: the data directory has no session yet", branch)
		}
		s = latest
	}
	bs, err := be.Branches(ctx, s.ID)
	if err != nil {
		return api.Branch{}, err
	}
	b, err := tui.ResolveBranch(bs, branch)
	if err != nil {
		return api.Branch{}, fmt.Errorf("--branch: session %s: %w", s.ID, err)
	}
	return b, nil
}

// tuiScreens are the TUI's screens, on F2…F8 and their slash commands.
func tuiScreens() []tui.Screen {
	return []tui.Screen{
		tui.NewHistoryScreen(), tui.NewBranchesScreen(), tui.NewPinsScreen(), tui.NewChunksScreen(),
		tui.NewPendingScreen(), tui.NewStepsScreen(), tui.NewModelsScreen(),
	}
}
