package main

// The TUI's two backends over the chat's runtimes: the shell's first
// cut, which the backend work replaces with the full ones (same
// constructors).

import (
	"context"
	"errors"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
)

// errNotRemote is what the remote backend answers for what it does not
// do over the API yet.
var errNotRemote = errors.New("not available through a server yet")

// newLocalTUI is the TUI's backend on the embedded runtime.
func newLocalTUI(rt *ctxinf.Runtime, provider, model string) tui.Backend {
	return localTUI{localChat{rt: rt, provider: provider, model: model}}
}

// newRemoteTUI is the TUI's backend on a server's API.
func newRemoteTUI(c *client.Client) tui.Backend { return remoteTUI{remoteChat{c}} }

type localTUI struct{ localChat }

func (l localTUI) Cancel(ctx context.Context, branch messages.BranchID) error {
	return l.rt.Cancel(ctx, branch)
}

func (l localTUI) History(ctx context.Context, branch messages.BranchID, before messages.TurnID, n int) ([]tui.Entry, messages.TurnID, error) {
	hist, next, err := l.rt.History(ctx, branch, before, n)
	out := make([]tui.Entry, 0, len(hist))
	for _, h := range hist {
		e := tui.Entry{Turn: h.Node, Depth: h.Depth, Role: h.Message.Role, Text: h.Message.RenderedText}
		if h.PartialReply != nil {
			e.Partial = &h.PartialReply.Text
		}
		out = append(out, e)
	}
	return out, next, err
}

func (l localTUI) Turn(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (client.TurnInfo, error) {
	row, err := l.rt.TurnRow(ctx, branch, turn)
	return client.TurnInfo{TurnRow: row}, err
}

func (l localTUI) Search(ctx context.Context, branch messages.BranchID, query string, k int) ([]actors.Hit, error) {
	hits, err := l.rt.Search(ctx, branch, query, nil)
	if len(hits) > k && k > 0 {
		hits = hits[:k]
	}
	return hits, err
}

func (l localTUI) Context(ctx context.Context, branch messages.BranchID, seq uint64, text string) (actors.ContextDebug, error) {
	if seq == 0 {
		return l.rt.DebugNextContext(ctx, branch, text)
	}
	row, err := l.rt.TurnAt(ctx, branch, seq)
	if err != nil {
		return actors.ContextDebug{}, err
	}
	return l.rt.DebugContext(ctx, branch, row.ID)
}

type remoteTUI struct{ remoteChat }

func (r remoteTUI) Cancel(ctx context.Context, branch messages.BranchID) error {
	return r.c.Cancel(ctx, branch)
}

func (r remoteTUI) History(ctx context.Context, branch messages.BranchID, before messages.TurnID, n int) ([]tui.Entry, messages.TurnID, error) {
	hist, next, err := r.c.History(ctx, branch, before, n)
	out := make([]tui.Entry, 0, len(hist))
	for _, h := range hist {
		e := tui.Entry{Turn: h.Node, Depth: h.Depth, Role: h.Message.Role, Text: h.Message.RenderedText}
		if h.PartialReply != nil {
			e.Partial = &h.PartialReply.Text
		}
		out = append(out, e)
	}
	return out, next, err
}

func (r remoteTUI) Turn(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (client.TurnInfo, error) {
	return r.c.Turn(ctx, branch, turn)
}

func (r remoteTUI) Search(context.Context, messages.BranchID, string, int) ([]actors.Hit, error) {
	return nil, errNotRemote
}

func (r remoteTUI) Context(context.Context, messages.BranchID, uint64, string) (actors.ContextDebug, error) {
	return actors.ContextDebug{}, errNotRemote
}
