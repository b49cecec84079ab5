package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// nextContextText is the message the context of a next turn is
// assembled for when the TUI names none (as the API's context route).
const nextContextText = "(the next message)"

// newLocalTUI is the TUI's backend on the embedded runtime rt, whose
// default model is provider's model.
func newLocalTUI(rt *ctxinf.Runtime, provider, model string) tui.Backend {
	return localTUI{localChat{rt: rt, provider: provider, model: model}}
}

// newRemoteTUI is the TUI's backend on the API of the server c talks to.
func newRemoteTUI(c *client.Client) tui.Backend {
	return remoteTUI{remoteChat{c}}
}

// localTUI is tui.Backend on the embedded runtime: the chat's localChat
// and what the TUI needs beyond it.
type localTUI struct{ localChat }

var _ tui.Backend = localTUI{}

func (l localTUI) Cancel(ctx context.Context, branch messages.BranchID) error {
	return l.rt.Cancel(ctx, branch)
}

func (l localTUI) History(ctx context.Context, branch messages.BranchID, before messages.TurnID, n int) ([]tui.Entry, messages.TurnID, error) {
	return historyPage(ctx, l.page(branch), before, n)
}

func (l localTUI) Turn(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (api.TurnInfo, error) {
	return server.TurnInfo(ctx, l.rt.Runtime, branch, turn)
}

func (l localTUI) Search(ctx context.Context, branch messages.BranchID, query string, k int) ([]api.Hit, error) {
	hits, err := l.rt.Search(ctx, branch, query, server.SearchK(l.rt.Runtime, k))
	return server.Hits(hits), err
}

func (l localTUI) Context(ctx context.Context, branch messages.BranchID, seq uint64, text string) (api.ContextDebug, error) {
	var d actors.ContextDebug
	var err error
	if seq == 0 {
		if text == "" {
			text = nextContextText
		}
		d, err = l.rt.DebugNextContext(ctx, branch, text)
	} else {
		var row persistence.TurnRow
		if row, err = l.rt.TurnAt(ctx, branch, seq); err == nil {
			d, err = l.rt.DebugContext(ctx, branch, row.ID)
		}
	}
	if errors.Is(err, actors.ErrNoRecipe) {
		err = fmt.Errorf("%w: %w", tui.ErrNoContext, err)
	}
	return server.ContextDebug(d), err
}

// remoteTUI is tui.Backend on a server's API: the chat's remoteChat and
// what the TUI needs beyond it.
type remoteTUI struct{ remoteChat }

var _ tui.Backend = remoteTUI{}

func (r remoteTUI) Cancel(ctx context.Context, branch messages.BranchID) error {
	return r.c.Cancel(ctx, branch)
}

func (r remoteTUI) History(ctx context.Context, branch messages.BranchID, before messages.TurnID, n int) ([]tui.Entry, messages.TurnID, error) {
	return historyPage(ctx, r.page(branch), before, min(n, server.MaxHistory))
}

func (r remoteTUI) Turn(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (api.TurnInfo, error) {
	return r.c.Turn(ctx, branch, turn)
}

func (r remoteTUI) Search(ctx context.Context, branch messages.BranchID, query string, k int) ([]api.Hit, error) {
	return r.c.Search(ctx, branch, query, min(k, server.MaxSearchK), false)
}

func (r remoteTUI) Context(ctx context.Context, branch messages.BranchID, seq uint64, text string) (api.ContextDebug, error) {
	var raw json.RawMessage
	var err error
	if seq == 0 {
		if text == "" {
			text = nextContextText
		}
		raw, err = r.c.NextContext(ctx, branch, text)
	} else {
		raw, err = r.c.ContextOfTurn(ctx, branch, seq)
	}
	var d api.ContextDebug
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, fmt.Errorf("the server's context of branch %s: %w", branch, err)
	}
	return d, nil
}
