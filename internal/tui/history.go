package tui

import (
	"encoding/json"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/messages"
)

// histPageLen is how many messages a page of the history screen holds.
const histPageLen = 20

// historyPreview is how many wrapped lines of a message's text the list
// shows; Enter shows all of it.
const historyPreview = 3

// What a question of the history screen is for.
const (
	histFork = iota + 1
	histRollback
	histSteps
)

// historyScreen pages through the current branch's messages, newest page
// first, and forks or rolls back at the turn of the one selected.
type historyScreen struct {
	gen     int // the load generation: results of older loads are dropped
	loading bool
	err     error // the last load's, shown in place of the list

	entries []Entry
	older   messages.NodeID   // the cursor of the page older than this one (zero: none)
	pages   []messages.NodeID // the before of each page from the newest to this one
	cur     int               // the message selected
	top     int               // the first line of the list shown

	detail bool // showing the selected message in full
	view   viewport.Model
	viewW  int // the width the viewport's content was wrapped to

	ask  askLine
	turn historyTurnMsg // the turn the question is about
}

// NewHistoryScreen returns the history screen: the current branch's
// messages in pages of histPageLen (20), from which a turn can be forked
// (f), rolled back to (r), shown whole (enter) or its steps found (s).
func NewHistoryScreen() Screen { return &historyScreen{} }

type (
	// historyPageMsg is a page History returned.
	historyPageMsg struct {
		gen     int
		entries []Entry
		older   messages.TurnID
		pages   []messages.TurnID // the screen's pages with this one last
		toNewer bool              // the page is newer than the one it replaces: select its first message
		err     error
	}
	// historyTurnMsg is the turn (and its number) of the message an
	// action was asked on.
	historyTurnMsg struct {
		gen  int
		op   int
		turn messages.TurnID
		seq  uint64
		err  error
	}
	// historyForkedMsg is a fork or rollback that failed.
	historyForkedMsg struct {
		gen int
		err error
	}
)

func (h *historyScreen) Name() string { return "History" }

// Modal reports whether Esc is the screen's: a question or the whole
// message is shown (Esc leaves them, not the screen).
func (h *historyScreen) Modal() bool { return h.ask.active() || h.detail }

func (h *historyScreen) Open(s *State) tea.Cmd {
	*h = historyScreen{gen: h.gen + 1}
	return h.load(s, []messages.TurnID{{}}, false)
}

// load reads the last of pages: the messages before it (zero: the
// newest); the screen moves to it when they come.
func (h *historyScreen) load(s *State, pages []messages.TurnID, toNewer bool) tea.Cmd {
	h.loading = true
	ctx, be, branch, gen := s.Ctx, s.Backend, s.Branch.ID, h.gen
	before := pages[len(pages)-1]
	return func() tea.Msg {
		es, older, err := be.History(ctx, branch, before, histPageLen)
		return historyPageMsg{gen: gen, entries: es, older: older, pages: pages, toNewer: toNewer, err: err}
	}
}

// Update handles keys and the screen's own results. Esc: while a
// question or the whole message is shown, Update consumes it (leaving
// that mode, returning nil) and Modal reports true, so the shell must
// pass it here; otherwise Update ignores it and the shell closes the
// screen.
func (h *historyScreen) Update(s *State, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case historyPageMsg:
		if msg.gen != h.gen {
			return nil
		}
		h.loading = false
		if msg.err != nil { // stay on the page shown
			h.err = msg.err
			return sayStatus("", fmt.Errorf("history: %w", msg.err))
		}
		h.err = nil
		h.entries, h.older, h.pages = msg.entries, msg.older, msg.pages
		h.cur, h.top = len(h.entries)-1, 0
		if msg.toNewer {
			h.cur = 0
		}
		h.cur = max(h.cur, 0)
		return nil
	case historyTurnMsg:
		if msg.gen != h.gen {
			return nil
		}
		if msg.err != nil {
			return sayStatus("", msg.err)
		}
		h.turn = msg
		switch msg.op {
		case histSteps:
			return sayStatus(fmt.Sprintf("turn %d: type /steps %d to see its provider steps and tool calls", msg.seq, msg.seq), nil)
		case histFork:
			h.ask.text(histFork, fmt.Sprintf("Fork at turn %d, label:", msg.seq), "", fmt.Sprintf("fork-%d", msg.seq))
		case histRollback:
			h.ask.text(histRollback, fmt.Sprintf("Roll back to turn %d on a new branch, label:", msg.seq), "", fmt.Sprintf("rollback-%d", msg.seq))
		}
		return nil
	case historyForkedMsg:
		if msg.gen != h.gen {
			return nil
		}
		if msg.err != nil {
			return sayStatus("", msg.err)
		}
		return nil
	case tea.KeyPressMsg:
		return h.key(s, msg)
	}
	return nil
}

func (h *historyScreen) key(s *State, msg tea.KeyPressMsg) tea.Cmd {
	if h.ask.active() {
		res, cmd := h.ask.key(msg)
		switch res {
		case askCanceled:
			h.ask.done()
			return nil
		case askAccepted:
			label, op, t := h.ask.value(), h.ask.op, h.turn
			if label == "" {
				label = h.ask.input.Placeholder
			}
			h.ask.done()
			return h.fork(s, op, t, label)
		}
		return cmd
	}
	if h.detail {
		switch msg.String() {
		case "esc", "enter", "q":
			h.detail = false
			return nil
		}
		var cmd tea.Cmd
		h.view, cmd = h.view.Update(msg)
		return cmd
	}
	switch msg.String() {
	case "up", "k":
		h.cur = max(h.cur-1, 0)
	case "down", "j":
		h.cur = max(min(h.cur+1, len(h.entries)-1), 0)
	case "home", "g":
		h.cur = 0
	case "end", "G":
		h.cur = max(len(h.entries)-1, 0)
	case "pgup", "left":
		if h.loading {
			return nil
		}
		if h.older.IsZero() {
			return sayStatus("history: this is the oldest page", nil)
		}
		return h.load(s, append(h.pages[:len(h.pages):len(h.pages)], h.older), false)
	case "pgdown", "right":
		if h.loading {
			return nil
		}
		if len(h.pages) <= 1 {
			return sayStatus("history: this is the newest page", nil)
		}
		return h.load(s, h.pages[:len(h.pages)-1], true)
	case "enter":
		if len(h.entries) > 0 {
			h.detail, h.viewW = true, 0
		}
	case "f":
		return h.resolve(s, histFork)
	case "r":
		return h.resolve(s, histRollback)
	case "s":
		return h.resolve(s, histSteps)
	}
	return nil
}

// resolve finds the turn of the message selected (a reply's turn is
// its user message's) and its number, for the action op.
func (h *historyScreen) resolve(s *State, op int) tea.Cmd {
	if len(h.entries) == 0 {
		return nil
	}
	var turn messages.TurnID
	for i := h.cur; i >= 0; i-- {
		if h.entries[i].Role == messages.RoleUser {
			turn = h.entries[i].Turn
			break
		}
	}
	ctx, be, branch, gen := s.Ctx, s.Backend, s.Branch.ID, h.gen
	sel := h.entries[h.cur]
	return func() tea.Msg {
		t := turn
		if t.IsZero() {
			// The reply opens the page: its user message is on the page before.
			es, _, err := be.History(ctx, branch, sel.Turn, 4)
			if err != nil {
				return historyTurnMsg{gen: gen, op: op, err: fmt.Errorf("find the turn of message #%d: %w", sel.Depth, err)}
			}
			for i := len(es) - 1; i >= 0 && t.IsZero(); i-- {
				if es[i].Role == messages.RoleUser {
					t = es[i].Turn
				}
			}
			if t.IsZero() {
				return historyTurnMsg{gen: gen, op: op, err: fmt.Errorf("message #%d belongs to no turn of this branch", sel.Depth)}
			}
		}
		info, err := be.Turn(ctx, branch, t)
		if err != nil {
			return historyTurnMsg{gen: gen, op: op, err: fmt.Errorf("find the turn of message #%d: %w", sel.Depth, err)}
		}
		return historyTurnMsg{gen: gen, op: op, turn: t, seq: info.Seq}
	}
}

// fork makes a branch continuing after turn t labeled label; for a
// rollback, it then makes it the current branch.
func (h *historyScreen) fork(s *State, op int, t historyTurnMsg, label string) tea.Cmd {
	ctx, be, branch, gen := s.Ctx, s.Backend, s.Branch.ID, h.gen
	return func() tea.Msg {
		row, err := be.Fork(ctx, branch, t.turn, label)
		if err != nil {
			return historyForkedMsg{gen: gen, err: fmt.Errorf("fork at turn %d: %w", t.seq, err)}
		}
		name := fmt.Sprintf("%s (%s)", row.Label, shortBranchID(row.ID))
		if op == histRollback {
			return tea.BatchMsg{
				func() tea.Msg { return SwitchMsg{Branch: row} },
				sayStatus(fmt.Sprintf("rolled back to turn %d: now on branch %s", t.seq, name), nil),
			}
		}
		return StatusMsg{Text: fmt.Sprintf("forked at turn %d: branch %s (/switch %s to go there)", t.seq, name, row.Label)}
	}
}

func (h *historyScreen) View(s *State, width, height int) string {
	if height < 1 || width < 1 {
		return ""
	}
	title := "History of " + branchTitle(s.Branch.Label, s.Branch.ID)
	if len(h.pages) > 0 {
		title += fmt.Sprintf(" · page %d", len(h.pages))
	}
	if n := len(h.entries); n > 0 {
		title += fmt.Sprintf(" · messages #%d–#%d", h.entries[0].Depth, h.entries[n-1].Depth)
	}
	lines := []string{title}
	bottom := ""
	switch {
	case h.ask.active():
		bottom = strings.Join(h.ask.view(width), " ") // a text question: one line
	case h.detail:
		bottom = "↑/↓ scroll · esc back to the list"
	default:
		var more []string
		if !h.older.IsZero() {
			more = append(more, "pgup: older")
		}
		if len(h.pages) > 1 {
			more = append(more, "pgdn: newer")
		}
		bottom = strings.Join(more, " · ")
	}
	rows := height - 2 // the title and the bottom line
	if rows < 1 {
		return cellBlock([]string{title}, width, height)
	}
	switch {
	case h.loading && h.entries == nil:
		lines = append(lines, "loading…")
	case h.err != nil && h.entries == nil:
		lines = append(lines, cellWrap("could not read the history: "+h.err.Error(), width)...)
	case len(h.entries) == 0:
		lines = append(lines, "no messages yet")
	case h.detail:
		lines = append(lines, strings.Split(h.detailView(width, rows), "\n")...)
	default:
		lines = append(lines, h.listView(width, rows)...)
	}
	for len(lines) < height-1 {
		lines = append(lines, "")
	}
	return cellBlock(append(lines[:height-1], bottom), width, height)
}

// listView renders the messages in rows lines, the selected one visible.
func (h *historyScreen) listView(width, rows int) []string {
	var all []string
	start, end := 0, 0
	for i, e := range h.entries {
		if i == h.cur {
			start = len(all)
		}
		all = append(all, entryLines(e, i == h.cur, width)...)
		if i == h.cur {
			end = len(all)
		}
	}
	// Keep the selected message whole on screen, its first line at least.
	if start < h.top {
		h.top = start
	}
	if end > h.top+rows {
		h.top = min(start, end-rows)
	}
	h.top = max(0, min(h.top, len(all)-rows))
	return all[h.top:min(len(all), h.top+rows)]
}

// entryLines is a message in the list: its depth and role, the first
// lines of its text, its tool items and recovered output summarized.
func entryLines(e Entry, selected bool, width int) []string {
	mark := "  "
	if selected {
		mark = "› "
	}
	head := fmt.Sprintf("%s#%d %s", mark, e.Depth, e.Role)
	if n := len(e.Items); n > 0 {
		head += fmt.Sprintf(" · %d item%s", n, nounS(n))
	}
	if selected {
		head = pickedRow.Render(head)
	}
	out := []string{head}
	const ind = "    "
	text := cellWrap(strings.TrimSpace(e.Text), width-len(ind))
	if len(text) > historyPreview {
		text = text[:historyPreview]
		text[historyPreview-1] = cellFit(text[historyPreview-1]+" …", width-len(ind))
	}
	for _, l := range text {
		if l != "" || len(text) == 1 {
			out = append(out, ind+l)
		}
	}
	for _, l := range itemSummary(e.Items, 3) {
		out = append(out, cellFit(ind+l, width))
	}
	if e.Partial != nil {
		out = append(out, cellFit(ind+"[incomplete] "+oneLineOf(*e.Partial), width))
	}
	return out
}

// itemSummary is a line for each tool call and output of items (up to
// n, then how many more), and a count of the other items.
func itemSummary(items []messages.TranscriptItem, n int) []string {
	var out []string
	other, more := 0, 0
	add := func(l string) {
		if len(out) < n {
			out = append(out, l)
		} else {
			more++
		}
	}
	for _, it := range items {
		switch it := it.(type) {
		case messages.ToolCall:
			add(fmt.Sprintf("→ tool %s(%s)", it.Name, oneLineOf(string(it.Arguments))))
		case messages.ToolOutput:
			l := "← " + oneLineOf(jsonText(it.Output))
			if it.IsError {
				l = "← error: " + oneLineOf(jsonText(it.Output))
			}
			add(l)
		case messages.AssistantMessage:
			// its text is the message's
		default:
			other++
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("… %d more tool item%s (enter shows them)", more, nounS(more)))
	}
	if other > 0 {
		out = append(out, fmt.Sprintf("+ %d other item%s (reasoning, metadata)", other, nounS(other)))
	}
	return out
}

// detailView is the selected message whole, in a viewport of rows lines.
func (h *historyScreen) detailView(width, rows int) string {
	if h.viewW != width {
		h.view = viewport.New(viewport.WithWidth(width), viewport.WithHeight(rows))
		h.view.SetContentLines(entryFull(h.entries[h.cur], width))
		h.viewW = width
	}
	h.view.SetWidth(width)
	h.view.SetHeight(rows)
	return h.view.View()
}

// entryFull is a message with all its text, items and recovered output.
func entryFull(e Entry, width int) []string {
	out := []string{fmt.Sprintf("#%d %s · node %s", e.Depth, e.Role, e.Turn), ""}
	out = append(out, cellWrap(e.Text, width)...)
	for _, it := range e.Items {
		switch it := it.(type) {
		case messages.ToolCall:
			out = append(out, "", fmt.Sprintf("→ tool call %s (%s):", it.Name, it.CallID))
			out = append(out, cellWrap(string(it.Arguments), width)...)
		case messages.ToolOutput:
			what := "output"
			if it.IsError {
				what = "error output"
			}
			out = append(out, "", fmt.Sprintf("← tool %s of %s:", what, it.CallID))
			out = append(out, cellWrap(jsonText(it.Output), width)...)
		case messages.ReasoningItem:
			out = append(out, "", "(reasoning item)")
		case messages.Metadata:
			out = append(out, "", fmt.Sprintf("(metadata %s = %s)", it.Key, it.Value))
		case messages.UnknownItem:
			out = append(out, "", fmt.Sprintf("(an item of %s this version does not know)", it.Provider))
		}
	}
	if e.Partial != nil {
		out = append(out, "", "[incomplete] the reply's output recovered after a crash cut it off:")
		out = append(out, cellWrap(*e.Partial, width)...)
	}
	return out
}

func (h *historyScreen) Keys() []key.Binding {
	switch {
	case h.ask.active():
		what := "fork"
		if h.ask.op == histRollback {
			what = "roll back"
		}
		return []key.Binding{
			key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", what)),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
		}
	case h.detail:
		return []key.Binding{
			key.NewBinding(key.WithKeys("up", "down", "pgup", "pgdown"), key.WithHelp("↑/↓/pgup/pgdn", "scroll")),
			key.NewBinding(key.WithKeys("esc", "enter", "q"), key.WithHelp("esc", "back")),
		}
	}
	return []key.Binding{
		key.NewBinding(key.WithKeys("up", "down", "k", "j"), key.WithHelp("↑/↓", "select")),
		key.NewBinding(key.WithKeys("pgup", "left"), key.WithHelp("pgup/←", "older")),
		key.NewBinding(key.WithKeys("pgdown", "right"), key.WithHelp("pgdn/→", "newer")),
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "show")),
		key.NewBinding(key.WithKeys("f"), key.WithHelp("f", "fork here")),
		key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "roll back here")),
		key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "steps")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close")),
	}
}

// jsonText is a JSON value as text: a string's contents, else the JSON.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func nounS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
