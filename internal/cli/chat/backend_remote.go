package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
)

// remote is tui.Backend on the API of the server c talks to.
type remote struct{ c *client.Client }

// newRemote is the chat's and the TUI's backend on the API of the server
// c talks to.
func newRemote(c *client.Client) tui.Backend { return remote{c} }

var _ tui.Backend = remote{}

func (r remote) Names(ctx context.Context) (string, string, error) {
	ms, err := r.c.Models(ctx)
	if err != nil || len(ms) == 0 {
		return "", "", err
	}
	return ms[0].OwnedBy, ms[0].ModelID, nil
}

func (r remote) Session(ctx context.Context, id messages.SessionID) (api.Session, error) {
	return r.c.Session(ctx, id)
}

func (r remote) LatestSession(ctx context.Context) (api.Session, bool, error) {
	p, err := r.c.SessionPage(ctx, client.Page{Limit: 1, Newest: true})
	if err != nil || len(p.Sessions) == 0 {
		return api.Session{}, false, err
	}
	return p.Sessions[0], true, nil
}

func (r remote) CreateSession(ctx context.Context, title string) (api.Branch, error) {
	_, b, err := r.c.CreateSession(ctx, title)
	return b, err
}

func (r remote) BranchRow(ctx context.Context, id messages.BranchID) (api.Branch, error) {
	info, err := r.c.Branch(ctx, id)
	return info.Branch, err
}

func (r remote) Branches(ctx context.Context, session messages.SessionID) ([]api.Branch, error) {
	return r.c.Branches(ctx, session)
}

func (r remote) Info(ctx context.Context, branch messages.BranchID) (api.BranchInfo, error) {
	return r.c.Branch(ctx, branch)
}

func (r remote) Submit(ctx context.Context, branch messages.BranchID, text string, show func(tui.Update)) (uint64, tui.Update, error) {
	var last tui.Update
	res, err := r.c.Stream(ctx, branch, text, func(ev client.Event) error {
		u := tui.Update{Delta: ev.Text, Displayed: ev.Displayed, Durable: ev.Durable,
			TextDisplayed: ev.TextDisplayed, TextDurable: ev.TextDurable}
		switch ev.Type {
		case "item":
			it, err := messages.UnmarshalItem(ev.Item)
			if err != nil {
				return err
			}
			u.Item = it
		case "done":
			u.Done, u.Phase, u.Outcome, u.Err = true, ev.Phase, ev.Outcome, ev.Error
			last = u
		case "delta":
		default:
			return nil
		}
		show(u)
		return nil
	})
	var te *client.TurnError
	if errors.As(err, &te) && last.Done {
		err = nil // the failed turn's done event says why, as the embedded runtime's does
	}
	return res.Seq, last, err
}

func (r remote) Cancel(ctx context.Context, branch messages.BranchID) error {
	return r.c.Cancel(ctx, branch)
}

func (r remote) History(ctx context.Context, branch messages.BranchID, before messages.NodeID, n int) ([]tui.Entry, messages.NodeID, error) {
	return historyPage(ctx, func(ctx context.Context, before messages.NodeID, n int) ([]tui.Entry, messages.NodeID, error) {
		hist, next, err := r.c.History(ctx, branch, before, n)
		return entries(hist), next, err
	}, before, n)
}

func (r remote) TurnAt(ctx context.Context, branch messages.BranchID, seq uint64) (api.Turn, error) {
	t, err := r.c.TurnNumber(ctx, branch, seq)
	return t.Turn, err
}

func (r remote) Turn(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (api.TurnInfo, error) {
	return r.c.Turn(ctx, branch, turn)
}

func (r remote) Pending(ctx context.Context, branch messages.BranchID) ([]messages.PendingTurn, error) {
	ps, err := r.c.Pending(ctx, branch)
	out := make([]messages.PendingTurn, 0, len(ps))
	for _, p := range ps {
		out = append(out, messages.PendingTurn{Turn: p.Turn, Seq: p.Seq, Reply: p.Reply})
	}
	return out, err
}

func (r remote) CommitPending(ctx context.Context, branch messages.BranchID) error {
	return r.c.Commit(ctx, branch)
}

func (r remote) Fork(ctx context.Context, branch messages.BranchID, at messages.NodeID, label string) (api.Branch, error) {
	return r.c.Fork(ctx, branch, at, label)
}

func (r remote) DeleteBranch(ctx context.Context, branch messages.BranchID) (api.Deleted, error) {
	return r.c.DeleteBranch(ctx, branch)
}

func (r remote) Pin(ctx context.Context, branch messages.BranchID, fact string) (messages.PinnedFact, error) {
	return r.c.Pin(ctx, branch, fact)
}

func (r remote) Pins(ctx context.Context, branch messages.BranchID) ([]messages.PinnedFact, error) {
	return r.c.Pins(ctx, branch)
}

func (r remote) Unpin(ctx context.Context, branch messages.BranchID, id uint64) error {
	return r.c.Unpin(ctx, branch, id)
}

func (r remote) EditPin(ctx context.Context, branch messages.BranchID, id uint64, fact string) (messages.PinnedFact, error) {
	return r.c.EditPin(ctx, branch, id, fact)
}

func (r remote) ModelNames(ctx context.Context) ([]string, error) {
	ms, err := r.c.Models(ctx)
	var names []string
	for _, m := range ms {
		if m.ID != "default" {
			names = append(names, m.ID)
		}
	}
	slices.Sort(names)
	return names, err
}

func (r remote) SelectModel(ctx context.Context, branch messages.BranchID, name string) error {
	return r.c.SelectModel(ctx, branch, name)
}

func (r remote) Search(ctx context.Context, branch messages.BranchID, query string, k int) ([]api.Hit, error) {
	return r.c.Search(ctx, branch, query, min(k, server.MaxSearchK), false)
}

func (r remote) Context(ctx context.Context, branch messages.BranchID, seq uint64, text string) (api.ContextDebug, error) {
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

func (r remote) Recovered(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (string, bool, error) {
	t, err := r.c.Turn(ctx, branch, turn)
	if err != nil || t.Partial == nil {
		return "", false, err
	}
	return t.Partial.Text, true, nil
}
