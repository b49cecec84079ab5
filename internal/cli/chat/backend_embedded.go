package chat

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// nextContextText is the message the context of a next turn is
// assembled for when the TUI names none (as the API's context route).
const nextContextText = "(the next message)"

// embedded is tui.Backend on the embedded runtime rt, whose default model
// is provider's model. It answers what the server's API would (the
// server's mapping, internal/server/wire.go), so the chat and the TUI
// show the same on either backend.
type embedded struct {
	rt       *ctxinf.Runtime
	provider string
	model    string
}

// newEmbedded is the chat's and the TUI's backend on the embedded
// runtime rt, whose default model is provider's model.
func newEmbedded(rt *ctxinf.Runtime, provider, model string) tui.Backend {
	return embedded{rt: rt, provider: provider, model: model}
}

var _ tui.Backend = embedded{}

func (l embedded) Names(context.Context) (string, string, error) { return l.provider, l.model, nil }

func (l embedded) Session(ctx context.Context, id messages.SessionID) (api.Session, error) {
	s, err := l.rt.DB().Session(ctx, id)
	return server.Session(s), err
}

// LatestSession is the newest session of the default tenant, the
// library's and the local CLI's.
func (l embedded) LatestSession(ctx context.Context) (api.Session, bool, error) {
	ss, err := l.rt.DB().SessionPage(ctx, persistence.SessionQuery{Limit: 1, Newest: true})
	if err != nil || len(ss) == 0 {
		return api.Session{}, false, err
	}
	return server.Session(ss[0]), true, nil
}

func (l embedded) CreateSession(ctx context.Context, title string) (api.Branch, error) {
	_, b, err := l.rt.CreateSession(ctx, title)
	return server.Branch(b), err
}

func (l embedded) BranchRow(ctx context.Context, id messages.BranchID) (api.Branch, error) {
	b, err := l.rt.DB().BranchRow(ctx, id)
	return server.Branch(b), err
}

func (l embedded) Branches(ctx context.Context, session messages.SessionID) ([]api.Branch, error) {
	bs, err := l.rt.DB().Branches(ctx, session)
	return server.Branches(bs), err
}

func (l embedded) Info(ctx context.Context, branch messages.BranchID) (api.BranchInfo, error) {
	row, err := l.rt.DB().BranchRow(ctx, branch)
	if err != nil {
		return api.BranchInfo{}, err
	}
	info, err := l.rt.Inspect(ctx, branch)
	return server.BranchInfo(row, info), err
}

func (l embedded) Submit(ctx context.Context, branch messages.BranchID, text string, show func(tui.Update)) (uint64, tui.Update, error) {
	s, err := l.rt.Submit(ctx, branch, text)
	if err != nil {
		return 0, tui.Update{}, err
	}
	var last tui.Update
	for us := s.Next(nil); us != nil; us = s.Next(nil) {
		for _, au := range us {
			u := tui.Update{Delta: au.Delta, Item: au.Item, Displayed: au.Displayed, Durable: au.Durable,
				TextDisplayed: au.TextDisplayed, TextDurable: au.TextDurable,
				Done: au.Done, Phase: au.Phase, Outcome: au.Outcome, Err: au.Err}
			show(u)
			if u.Done {
				last = u
			}
		}
	}
	return s.Seq, last, nil
}

func (l embedded) Cancel(ctx context.Context, branch messages.BranchID) error {
	return l.rt.Cancel(ctx, branch)
}

func (l embedded) History(ctx context.Context, branch messages.BranchID, before messages.NodeID, n int) ([]tui.Entry, messages.NodeID, error) {
	return historyPage(ctx, func(ctx context.Context, before messages.NodeID, n int) ([]tui.Entry, messages.NodeID, error) {
		hist, next, err := l.rt.History(ctx, branch, before, n)
		out := make([]api.HistoryEntry, 0, len(hist))
		for _, h := range hist {
			out = append(out, server.HistoryEntry(h))
		}
		return entries(out), next, err
	}, before, n)
}

func (l embedded) TurnAt(ctx context.Context, branch messages.BranchID, seq uint64) (api.Turn, error) {
	row, err := l.rt.TurnAt(ctx, branch, seq)
	return server.Turn(row), err
}

func (l embedded) Turn(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (api.TurnInfo, error) {
	return server.TurnInfo(ctx, l.rt.Runtime, branch, turn)
}

func (l embedded) Pending(ctx context.Context, branch messages.BranchID) ([]messages.PendingTurn, error) {
	info, err := l.rt.Inspect(ctx, branch)
	return info.PendingTurns(), err
}

func (l embedded) CommitPending(ctx context.Context, branch messages.BranchID) error {
	return l.rt.CommitPending(ctx, branch)
}

func (l embedded) Fork(ctx context.Context, branch messages.BranchID, at messages.NodeID, label string) (api.Branch, error) {
	b, err := l.rt.Fork(ctx, branch, at, label)
	return server.Branch(b), err
}

func (l embedded) DeleteBranch(ctx context.Context, branch messages.BranchID) (api.Deleted, error) {
	res, err := l.rt.DeleteBranch(ctx, branch)
	return server.Deleted(res), err
}

func (l embedded) Pin(ctx context.Context, branch messages.BranchID, fact string) (messages.PinnedFact, error) {
	return l.rt.Pin(ctx, branch, fact)
}

func (l embedded) Pins(ctx context.Context, branch messages.BranchID) ([]messages.PinnedFact, error) {
	return l.rt.Pins(ctx, branch)
}

func (l embedded) Unpin(ctx context.Context, branch messages.BranchID, id uint64) error {
	return l.rt.Unpin(ctx, branch, id)
}

func (l embedded) EditPin(ctx context.Context, branch messages.BranchID, id uint64, fact string) (messages.PinnedFact, error) {
	return l.rt.EditPin(ctx, branch, id, fact)
}

func (l embedded) ModelNames(context.Context) ([]string, error) { return l.rt.ModelNames(), nil }

func (l embedded) SelectModel(ctx context.Context, branch messages.BranchID, name string) error {
	return l.rt.SelectModel(ctx, branch, name)
}

func (l embedded) Search(ctx context.Context, branch messages.BranchID, query string, k int) ([]api.Hit, error) {
	hits, err := l.rt.Search(ctx, branch, query, server.SearchK(l.rt.Runtime, k))
	return server.Hits(hits), err
}

func (l embedded) Context(ctx context.Context, branch messages.BranchID, seq uint64, text string) (api.ContextDebug, error) {
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

func (l embedded) Recovered(ctx context.Context, _ messages.BranchID, turn messages.TurnID) (string, bool, error) {
	rec, ok, err := l.rt.RecoveredOutput(ctx, turn)
	if err != nil || !ok {
		return "", false, err
	}
	return rec.Text, true, nil
}
