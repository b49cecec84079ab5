package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/messages"
)

// PendingScreen is the pending-turn inspector: the branch's turns not
// yet folded into its summary, one in full on enter, and "commit pending
// now" (c), which folds them.
type PendingScreen struct {
	turns   []pendingRow
	rows    rowCursor
	loaded  bool
	reading bool
	text    scrollPage
	note    string
	done    string // what the last commit did, shown above the list
	gen     int
	busy    bool // a commit is running
}

// pendingRow is a pending turn with its two messages, as far as the
// history had them.
type pendingRow struct {
	seq         uint64
	user, reply *Entry
}

// NewPendingScreen returns the pending-turn inspector.
func NewPendingScreen() Screen {
	return &PendingScreen{text: newScrollPage()}
}

// pendingMsg is the result of loading the pending turns.
type pendingMsg struct {
	gen   int
	turns []pendingRow
	err   error
}

// pendingCommittedMsg is the result of committing n pending turns.
type pendingCommittedMsg struct {
	n   int
	err error
}

// Name implements Screen.
func (p *PendingScreen) Name() string { return "Pending turns" }

// Modal reports whether the screen takes Esc itself: while a turn is
// shown in full (Esc goes back to the list).
func (p *PendingScreen) Modal() bool { return p.reading }

// Open implements Screen: it loads the pending turns.
func (p *PendingScreen) Open(s *State) tea.Cmd {
	p.reading, p.done = false, ""
	return p.load(s)
}

func (p *PendingScreen) load(s *State) tea.Cmd {
	p.gen++
	gen, branch := p.gen, s.Branch.ID
	if !p.loaded {
		p.note = "Loading the pending turns…"
	}
	return func() tea.Msg {
		turns, err := loadPending(s.Ctx, s.Backend, branch)
		return pendingMsg{gen: gen, turns: turns, err: err}
	}
}

// loadPending reads the pending turns of branch and finds their messages
// in its history (they are its newest turns: a few pages at most).
func loadPending(ctx context.Context, b Backend, branch messages.BranchID) ([]pendingRow, error) {
	pend, err := b.Pending(ctx, branch)
	if err != nil {
		return nil, err
	}
	want := make(map[messages.TurnID]bool, len(pend))
	for _, t := range pend {
		want[t.Turn] = true
	}
	found, err := findEntries(ctx, b, branch, messages.TurnID{}, want)
	if err != nil {
		return nil, err
	}
	out := make([]pendingRow, len(pend))
	for i, t := range pend {
		out[i] = pendingRow{seq: t.Seq}
		if te := found[t.Turn]; te != nil {
			out[i].user, out[i].reply = te.user, te.reply
		}
	}
	return out, nil
}

// findPageLen and findMaxPages bound findEntries' walk back through a
// branch's history.
const (
	findPageLen  = 50
	findMaxPages = 8
)

// turnEntries are a turn's messages in the history: its user message,
// and its reply (the last message after it; Items gathers the tool
// calls and outputs of every message after it).
type turnEntries struct {
	user, reply *Entry
}

// findEntries walks the branch's history back from before (zero: the
// head) until it has found the user message of every turn in want (the
// messages of a turn carry its id, Entry.Turn; the user message is its
// first, so its reply was seen by then) or read findMaxPages pages.
func findEntries(ctx context.Context, b Backend, branch messages.BranchID, before messages.NodeID,
	want map[messages.TurnID]bool) (map[messages.TurnID]*turnEntries, error) {
	found := make(map[messages.TurnID]*turnEntries, len(want))
	users := 0
	for page := 0; page < findMaxPages && users < len(want); page++ {
		entries, next, err := b.History(ctx, branch, before, findPageLen)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		// Newest first: a reply's messages before its user message.
		for i := len(entries) - 1; i >= 0; i-- {
			e := entries[i]
			if !want[e.Turn] {
				continue
			}
			te := found[e.Turn]
			if te == nil {
				te = &turnEntries{}
				found[e.Turn] = te
			}
			switch {
			case e.Role == messages.RoleUser:
				if te.user == nil {
					te.user = &e
					users++
				}
			case te.reply == nil:
				te.reply = &e
			default: // an earlier message of the reply (a tool step)
				te.reply.Items = append(slices.Clone(e.Items), te.reply.Items...)
			}
		}
		if next.IsZero() {
			break
		}
		before = next
	}
	return found, nil
}

// Update implements Screen.
func (p *PendingScreen) Update(s *State, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case pendingMsg:
		if msg.gen != p.gen {
			return nil
		}
		if msg.err != nil {
			p.note = "Cannot read the pending turns: " + msg.err.Error()
			return statusErr("pending turns", msg.err)
		}
		p.turns, p.loaded = msg.turns, true
		p.rows.move(0, len(p.turns))
		p.note = fmt.Sprintf("%d pending turns (finalized, not yet folded into the summary)", len(p.turns))
		if len(p.turns) == 1 {
			p.note = "1 pending turn (finalized, not yet folded into the summary)"
		}
		if len(p.turns) == 0 {
			p.note = "No pending turns: every finalized turn is folded into the summary."
			p.reading = false
		}
		return nil
	case pendingCommittedMsg:
		p.busy = false
		if msg.err != nil {
			p.note = "Commit failed: " + msg.err.Error()
			return statusErr("commit pending", msg.err)
		}
		text := fmt.Sprintf("committed %d pending turns into the summary", msg.n)
		if msg.n == 1 {
			text = "committed 1 pending turn into the summary"
		}
		p.done = strings.ToUpper(text[:1]) + text[1:] + "."
		p.reading = false
		return tea.Batch(statusText(text), func() tea.Msg { return RefreshMsg{} }, p.load(s))
	case tea.KeyPressMsg:
		k := msg.String()
		if p.reading {
			switch k {
			case "esc", "enter", "backspace", "q":
				p.reading = false
				return nil
			}
			return p.text.update(msg)
		}
		switch k {
		case "up", "k":
			p.rows.move(-1, len(p.turns))
		case "down", "j":
			p.rows.move(1, len(p.turns))
		case "enter":
			if len(p.turns) > 0 {
				p.reading = true
				p.text.setText(pendingText(p.turns[p.rows.at]))
			}
		case "r":
			return p.load(s)
		case "c":
			return p.commit(s)
		}
	}
	return nil
}

// commit folds the pending turns into the summary now.
func (p *PendingScreen) commit(s *State) tea.Cmd {
	if p.busy {
		return nil
	}
	if p.loaded && len(p.turns) == 0 {
		p.note = "Nothing to commit: no turn is pending."
		return statusText("nothing to commit: no turn is pending")
	}
	p.busy = true
	p.note = "Committing the pending turns…"
	n, branch := len(p.turns), s.Branch.ID
	return func() tea.Msg {
		return pendingCommittedMsg{n: n, err: s.Backend.CommitPending(s.Ctx, branch)}
	}
}

// View implements Screen.
func (p *PendingScreen) View(s *State, width, height int) string {
	var lines []string
	if p.done != "" {
		lines = appendWrapped(lines, p.done, width)
	}
	lines = appendWrapped(lines, p.note, width)
	if p.reading && len(p.turns) > 0 {
		lines = append(lines, strings.Repeat("─", width))
		lines = append(lines, p.text.view(width, max(height-len(lines)-1, 1)), p.text.position())
		return fitScreen(lines, width, height)
	}
	if len(p.turns) == 0 {
		return fitScreen(lines, width, height)
	}
	lines = append(lines, "  turn   user      reply     text")
	top, end := p.rows.window(height-len(lines), len(p.turns))
	for i := top; i < end; i++ {
		mark := "  "
		if i == p.rows.at {
			mark = "> "
		}
		t := p.turns[i]
		lines = append(lines, fmt.Sprintf("%s%-6s %-9s %-9s %s", mark, turnNumber(t.seq), entrySize(t.user),
			entrySize(t.reply), entryLine(t.user)))
	}
	return fitScreen(lines, width, height)
}

// Keys implements Screen.
func (p *PendingScreen) Keys() []key.Binding {
	if p.reading {
		return []key.Binding{
			key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "scroll")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back to the list"))}
	}
	return []key.Binding{
		key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "select")),
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "show")),
		key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "commit pending now")),
		key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))}
}

// entrySize is the size of a message's text, or ? when it was not found.
func entrySize(e *Entry) string {
	if e == nil {
		return "?"
	}
	return byteSize(len(e.Text))
}

// entryLine is the first line of a message, or why there is none.
func entryLine(e *Entry) string {
	if e == nil {
		return "(not in the history)"
	}
	return firstLine(e.Text)
}

// pendingText is a pending turn in full: the user's message, the reply
// and the reply's tool calls.
func pendingText(t pendingRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Turn %s (pending)\n\n", turnNumber(t.seq))
	writeEntry(&b, "User", t.user)
	b.WriteString("\n")
	writeEntry(&b, "Reply", t.reply)
	return b.String()
}

// writeEntry writes a message of the history under title, with its tool
// calls and outputs and any output recovered for its reply.
func writeEntry(b *strings.Builder, title string, e *Entry) {
	if e == nil {
		fmt.Fprintf(b, "%s: (not in the history)\n", title)
		return
	}
	fmt.Fprintf(b, "%s (%s):\n%s\n", title, byteSize(len(e.Text)), expandTabs(e.Text))
	for _, l := range itemLines(e.Items) {
		b.WriteString(l + "\n")
	}
	if e.Partial != nil {
		fmt.Fprintf(b, "Recovered output (incomplete):\n%s\n", expandTabs(*e.Partial))
	}
}

// itemLines describes the tool calls and outputs among items, one line
// each.
func itemLines(items []messages.TranscriptItem) []string {
	var out []string
	for _, it := range items {
		switch it := it.(type) {
		case messages.ToolCall:
			out = append(out, fmt.Sprintf("→ tool call %s %s(%s)", it.CallID, it.Name, compactJSON(it.Arguments)))
		case messages.ToolOutput:
			what := "output"
			if it.IsError {
				what = "error"
			}
			out = append(out, fmt.Sprintf("← tool %s %s: %s", what, it.CallID, compactJSON(it.Output)))
		}
	}
	return out
}

// compactJSON is raw JSON on one line; a JSON string is shown unquoted.
func compactJSON(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.Join(strings.Fields(s), " ")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return strings.Join(strings.Fields(string(raw)), " ")
	}
	return b.String()
}
