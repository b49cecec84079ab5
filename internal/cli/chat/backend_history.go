package chat

import (
	"context"
	"encoding/json"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/tui"
	"github.com/contextinfinity/ctxinf/messages"
)

// entries are the API's history entries h as the TUI's, each with its
// node as Turn (historyPage sets the turn).
func entries(h []api.HistoryEntry) []tui.Entry {
	out := make([]tui.Entry, 0, len(h))
	for _, e := range h {
		var partial *string
		if e.PartialReply != nil {
			partial = &e.PartialReply.Text
		}
		out = append(out, historyEntry(e.Node, e.Depth, e.Message, partial))
	}
	return out
}

// pageFunc reads up to n messages of a branch's history before node
// before (zero: the head), oldest first, each with its node as Turn, and
// returns the cursor of the page before them (zero: none).
type pageFunc func(ctx context.Context, before messages.NodeID, n int) ([]tui.Entry, messages.NodeID, error)

// historyPage reads a page of history with page and sets each message's
// Turn to the turn it belongs to: a user message starts its turn (its
// node is the turn's id), a reply belongs to the user message before it,
// which for the page's first message is read from the page before.
func historyPage(ctx context.Context, page pageFunc, before messages.NodeID, n int) ([]tui.Entry, messages.NodeID, error) {
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
func historyEntry(node messages.NodeID, depth uint64, m messages.Message, partial *string) tui.Entry {
	e := tui.Entry{Turn: node, Depth: depth, Role: m.Role, Text: m.RenderedText, Partial: partial}
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
