package chat

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
)

// chatRuntime is what the chat needs of a runtime: the embedded one on
// the data directory (localChat), or the API of the server that owns it
// (remoteChat). The chat prints the same either way. The TUI's backends
// (tui_backend.go) are these, with what the TUI needs beyond them.
type chatRuntime interface {
	// Names are the default model's provider and id.
	Names(ctx context.Context) (provider, model string, err error)
	Sessions(ctx context.Context) ([]api.Session, error)
	CreateSession(ctx context.Context, title string) (api.Branch, error)
	BranchRow(ctx context.Context, id messages.BranchID) (api.Branch, error)
	Branches(ctx context.Context, session messages.SessionID) ([]api.Branch, error)
	// Submit runs a turn, calling show with each update; it returns the
	// turn's number and its last update.
	Submit(ctx context.Context, branch messages.BranchID, text string, show func(tui.Update)) (uint64, tui.Update, error)
	History(ctx context.Context, branch messages.BranchID, n int) ([]chatEntry, error)
	Info(ctx context.Context, branch messages.BranchID) (api.BranchInfo, error)
	Pending(ctx context.Context, branch messages.BranchID) ([]messages.PendingTurn, error)
	ModelNames(ctx context.Context) ([]string, error)
	SelectModel(ctx context.Context, branch messages.BranchID, name string) error
	Pin(ctx context.Context, branch messages.BranchID, fact string) (messages.PinnedFact, error)
	Pins(ctx context.Context, branch messages.BranchID) ([]messages.PinnedFact, error)
	Unpin(ctx context.Context, branch messages.BranchID, id uint64) error
	EditPin(ctx context.Context, branch messages.BranchID, id uint64, fact string) (messages.PinnedFact, error)
	CommitPending(ctx context.Context, branch messages.BranchID) error
	// DeleteBranch deletes a branch for good (actors.DeleteBranch).
	DeleteBranch(ctx context.Context, branch messages.BranchID) (api.Deleted, error)
	// TurnAt returns the row of the branch's turn number seq.
	TurnAt(ctx context.Context, branch messages.BranchID, seq uint64) (api.Turn, error)
	Fork(ctx context.Context, branch messages.BranchID, at messages.TurnID, label string) (api.Branch, error)
	// Recovered returns the output recovered from the turn's interrupted
	// step, if any.
	Recovered(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (string, bool, error)
}

// chatEntry is a message of the history, with the output recovered for
// its reply when a crash cut that off: the TUI's.
type chatEntry = tui.Entry

// localChat is chatRuntime on the embedded runtime.
type localChat struct {
	rt       *ctxinf.Runtime
	provider string
	model    string
}

func (l localChat) Names(context.Context) (string, string, error) { return l.provider, l.model, nil }
func (l localChat) Sessions(ctx context.Context) ([]api.Session, error) {
	ss, err := l.rt.DB().Sessions(ctx)
	return server.Sessions(ss), err
}
func (l localChat) CreateSession(ctx context.Context, title string) (api.Branch, error) {
	_, b, err := l.rt.CreateSession(ctx, title)
	return server.Branch(b), err
}
func (l localChat) BranchRow(ctx context.Context, id messages.BranchID) (api.Branch, error) {
	b, err := l.rt.DB().BranchRow(ctx, id)
	return server.Branch(b), err
}
func (l localChat) Branches(ctx context.Context, session messages.SessionID) ([]api.Branch, error) {
	bs, err := l.rt.DB().Branches(ctx, session)
	return server.Branches(bs), err
}

func (l localChat) Submit(ctx context.Context, branch messages.BranchID, text string, show func(tui.Update)) (uint64, tui.Update, error) {
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

func (l localChat) History(ctx context.Context, branch messages.BranchID, n int) ([]chatEntry, error) {
	out, _, err := historyPage(ctx, l.page(branch), messages.TurnID{}, n)
	return out, err
}

// page reads the branch's history for historyPage.
func (l localChat) page(branch messages.BranchID) pageFunc {
	return func(ctx context.Context, before messages.TurnID, n int) ([]chatEntry, messages.TurnID, error) {
		hist, next, err := l.rt.History(ctx, branch, before, n)
		out := make([]chatEntry, 0, len(hist))
		for _, h := range hist {
			var partial *string
			if h.PartialReply != nil {
				partial = &h.PartialReply.Text
			}
			out = append(out, historyEntry(h.Node, h.Depth, h.Message, partial))
		}
		return out, next, err
	}
}

func (l localChat) Info(ctx context.Context, branch messages.BranchID) (api.BranchInfo, error) {
	row, err := l.rt.DB().BranchRow(ctx, branch)
	if err != nil {
		return api.BranchInfo{}, err
	}
	info, err := l.rt.Inspect(ctx, branch)
	return server.BranchInfo(row, info), err
}

func (l localChat) Pending(ctx context.Context, branch messages.BranchID) ([]messages.PendingTurn, error) {
	info, err := l.rt.Inspect(ctx, branch)
	return info.PendingTurns(), err
}

func (l localChat) ModelNames(context.Context) ([]string, error) { return l.rt.ModelNames(), nil }
func (l localChat) SelectModel(ctx context.Context, branch messages.BranchID, name string) error {
	return l.rt.SelectModel(ctx, branch, name)
}
func (l localChat) Pin(ctx context.Context, branch messages.BranchID, fact string) (messages.PinnedFact, error) {
	return l.rt.Pin(ctx, branch, fact)
}
func (l localChat) Pins(ctx context.Context, branch messages.BranchID) ([]messages.PinnedFact, error) {
	return l.rt.Pins(ctx, branch)
}
func (l localChat) Unpin(ctx context.Context, branch messages.BranchID, id uint64) error {
	return l.rt.Unpin(ctx, branch, id)
}
func (l localChat) EditPin(ctx context.Context, branch messages.BranchID, id uint64, fact string) (messages.PinnedFact, error) {
	return l.rt.EditPin(ctx, branch, id, fact)
}
func (l localChat) CommitPending(ctx context.Context, branch messages.BranchID) error {
	return l.rt.CommitPending(ctx, branch)
}

func (l localChat) DeleteBranch(ctx context.Context, branch messages.BranchID) (api.Deleted, error) {
	res, err := l.rt.DeleteBranch(ctx, branch)
	return server.Deleted(res), err
}

func (l localChat) TurnAt(ctx context.Context, branch messages.BranchID, seq uint64) (api.Turn, error) {
	row, err := l.rt.TurnAt(ctx, branch, seq)
	return server.Turn(row), err
}

func (l localChat) Fork(ctx context.Context, branch messages.BranchID, at messages.TurnID, label string) (api.Branch, error) {
	b, err := l.rt.Fork(ctx, branch, at, label)
	return server.Branch(b), err
}

func (l localChat) Recovered(ctx context.Context, _ messages.BranchID, turn messages.TurnID) (string, bool, error) {
	rec, ok, err := l.rt.RecoveredOutput(ctx, turn)
	if err != nil || !ok {
		return "", false, err
	}
	return rec.Text, true, nil
}

// remoteChat is chatRuntime on a server's API.
type remoteChat struct{ c *client.Client }

func (r remoteChat) Names(ctx context.Context) (string, string, error) {
	ms, err := r.c.Models(ctx)
	if err != nil || len(ms) == 0 {
		return "", "", err
	}
	return ms[0].OwnedBy, ms[0].ModelID, nil
}
func (r remoteChat) Sessions(ctx context.Context) ([]api.Session, error) {
	return r.c.Sessions(ctx)
}
func (r remoteChat) CreateSession(ctx context.Context, title string) (api.Branch, error) {
	_, b, err := r.c.CreateSession(ctx, title)
	return b, err
}
func (r remoteChat) BranchRow(ctx context.Context, id messages.BranchID) (api.Branch, error) {
	info, err := r.c.Branch(ctx, id)
	return info.Branch, err
}
func (r remoteChat) Branches(ctx context.Context, session messages.SessionID) ([]api.Branch, error) {
	return r.c.Branches(ctx, session)
}

func (r remoteChat) Submit(ctx context.Context, branch messages.BranchID, text string, show func(tui.Update)) (uint64, tui.Update, error) {
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
		err = nil // the failed turn's done event says why, as the local chat's does
	}
	return res.Seq, last, err
}

func (r remoteChat) History(ctx context.Context, branch messages.BranchID, n int) ([]chatEntry, error) {
	out, _, err := historyPage(ctx, r.page(branch), messages.TurnID{}, n)
	return out, err
}

// page reads the branch's history for historyPage.
func (r remoteChat) page(branch messages.BranchID) pageFunc {
	return func(ctx context.Context, before messages.TurnID, n int) ([]chatEntry, messages.TurnID, error) {
		hist, next, err := r.c.History(ctx, branch, before, n)
		out := make([]chatEntry, 0, len(hist))
		for _, h := range hist {
			var partial *string
			if h.PartialReply != nil {
				partial = &h.PartialReply.Text
			}
			out = append(out, historyEntry(h.Node, h.Depth, h.Message, partial))
		}
		return out, next, err
	}
}

func (r remoteChat) Info(ctx context.Context, branch messages.BranchID) (api.BranchInfo, error) {
	return r.c.Branch(ctx, branch)
}
func (r remoteChat) Pending(ctx context.Context, branch messages.BranchID) ([]messages.PendingTurn, error) {
	ps, err := r.c.Pending(ctx, branch)
	out := make([]messages.PendingTurn, 0, len(ps))
	for _, p := range ps {
		out = append(out, messages.PendingTurn{Turn: p.Turn, Seq: p.Seq, Reply: p.Reply})
	}
	return out, err
}

func (r remoteChat) ModelNames(ctx context.Context) ([]string, error) {
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
func (r remoteChat) SelectModel(ctx context.Context, branch messages.BranchID, name string) error {
	return r.c.SelectModel(ctx, branch, name)
}
func (r remoteChat) Pin(ctx context.Context, branch messages.BranchID, fact string) (messages.PinnedFact, error) {
	return r.c.Pin(ctx, branch, fact)
}
func (r remoteChat) Pins(ctx context.Context, branch messages.BranchID) ([]messages.PinnedFact, error) {
	return r.c.Pins(ctx, branch)
}
func (r remoteChat) Unpin(ctx context.Context, branch messages.BranchID, id uint64) error {
	return r.c.Unpin(ctx, branch, id)
}
func (r remoteChat) EditPin(ctx context.Context, branch messages.BranchID, id uint64, fact string) (messages.PinnedFact, error) {
	return r.c.EditPin(ctx, branch, id, fact)
}
func (r remoteChat) CommitPending(ctx context.Context, branch messages.BranchID) error {
	return r.c.Commit(ctx, branch)
}

func (r remoteChat) DeleteBranch(ctx context.Context, branch messages.BranchID) (api.Deleted, error) {
	return r.c.DeleteBranch(ctx, branch)
}

func (r remoteChat) TurnAt(ctx context.Context, branch messages.BranchID, seq uint64) (api.Turn, error) {
	t, err := r.c.TurnNumber(ctx, branch, seq)
	return t.Turn, err
}

func (r remoteChat) Fork(ctx context.Context, branch messages.BranchID, at messages.TurnID, label string) (api.Branch, error) {
	return r.c.Fork(ctx, branch, at, label)
}

func (r remoteChat) Recovered(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (string, bool, error) {
	t, err := r.c.Turn(ctx, branch, turn)
	if err != nil || t.Partial == nil {
		return "", false, err
	}
	return t.Partial.Text, true, nil
}

// pageFunc reads up to n messages of a branch's history before node
// before (zero: the head), oldest first, each with its node as Turn, and
// returns the cursor of the page before them (zero: none).
type pageFunc func(ctx context.Context, before messages.TurnID, n int) ([]chatEntry, messages.TurnID, error)

// historyPage reads a page of history with page and sets each message's
// Turn to the turn it belongs to: a user message starts its turn (its
// node is the turn's id), a reply belongs to the user message before it,
// which for the page's first message is read from the page before.
func historyPage(ctx context.Context, page pageFunc, before messages.TurnID, n int) ([]chatEntry, messages.TurnID, error) {
	out, next, err := page(ctx, before, n)
	if err != nil {
		return nil, messages.TurnID{}, err
	}
	var turn messages.TurnID
	if len(out) > 0 && out[0].Role != messages.RoleUser && !next.IsZero() {
		prev, _, err := page(ctx, out[0].Turn, 1)
		if err != nil {
			return nil, messages.TurnID{}, err
		}
		if len(prev) == 1 && prev[0].Role == messages.RoleUser {
			turn = prev[0].Turn
		}
	}
	for i := range out {
		if out[i].Role == messages.RoleUser {
			turn = out[i].Turn
		} else {
			out[i].Turn = turn
		}
	}
	return out, next, nil
}

// historyEntry is the stored message m at node, depth as an Entry: its
// text, the tool calls and outputs it holds, and the output recovered for
// its reply (partial) when a crash cut that off.
func historyEntry(node messages.TurnID, depth uint64, m messages.Message, partial *string) chatEntry {
	e := chatEntry{Turn: node, Depth: depth, Role: m.Role, Text: m.RenderedText, Partial: partial}
	for _, b := range m.Blocks {
		switch b := b.(type) {
		case messages.ToolUse:
			e.Items = append(e.Items, messages.ToolCall{CallID: b.ToolUseID, Name: b.Name, Arguments: b.Input})
		case messages.ToolResult:
			out, _ := json.Marshal(b.Content.RenderedText()) // a string: cannot fail
			e.Items = append(e.Items, messages.ToolOutput{CallID: b.ToolUseID, Output: out, IsError: b.IsError})
		}
	}
	return e
}
