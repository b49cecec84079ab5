package tui

import (
	"context"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// browseScan is how many turns, newest first, the browse tab looks
// through for one that has chunks when it opens. Pending turns have none
// (they are indexed after they fold), and a branch keeps a handful of
// them; the scan stops there so that a branch with memory disabled does
// not cost a request per turn.
const browseScan = 32

// chunkBrowser is the chunk screen's browse tab: the chunks one turn of
// the branch was indexed into, a list to select from and a chunk's full
// text, read through Backend.TurnAt and Backend.Turn.
type chunkBrowser struct {
	seq     uint64        // the turn shown; 0: the newest that has chunks
	turn    *api.TurnInfo // the turn shown, once loaded
	note    string        // what the tab says instead of, or above, the list
	rows    rowCursor
	reading bool // the selected chunk's text is shown
	text    scrollPage
	gen     int // the load in flight; results of older ones are dropped
}

// chunkTurnMsg is the result of loading a turn for the browse tab.
type chunkTurnMsg struct {
	gen  int
	seq  uint64
	info api.TurnInfo
	// scanned is how many turns the search for one with chunks looked
	// at without finding one (0: the turn was asked for by its number).
	scanned int
	err     error
}

// load loads turn seq, or when seq is 0 the newest turn that has chunks
// (the newest turn if none of the last browseScan has any).
func (b *chunkBrowser) load(s *State) tea.Cmd {
	b.gen++
	b.reading = false
	last := s.Info.TurnSeq
	if last == 0 {
		b.turn, b.note = nil, "No turns yet on this branch: nothing was indexed."
		return nil
	}
	gen, seq, branch := b.gen, b.seq, s.Branch.ID
	if seq == 0 {
		b.note = "Looking for the newest turn with chunks…"
	} else {
		b.note = fmt.Sprintf("Loading turn %d…", seq)
	}
	b.turn = nil
	return func() tea.Msg {
		if seq != 0 {
			info, err := turnBySeq(s.Ctx, s.Backend, branch, seq)
			return chunkTurnMsg{gen: gen, seq: seq, info: info, err: err}
		}
		var newest api.TurnInfo
		scanned := 0
		for at := last; at >= 1 && scanned < browseScan; at-- {
			info, err := turnBySeq(s.Ctx, s.Backend, branch, at)
			if err != nil {
				return chunkTurnMsg{gen: gen, seq: at, err: err}
			}
			if len(info.Chunks) > 0 {
				return chunkTurnMsg{gen: gen, seq: at, info: info}
			}
			if at == last {
				newest = info
			}
			scanned++
		}
		return chunkTurnMsg{gen: gen, seq: last, info: newest, scanned: scanned}
	}
}

// turnBySeq is the branch's turn number seq with its chunks.
func turnBySeq(ctx context.Context, be Backend, branch messages.BranchID, seq uint64) (api.TurnInfo, error) {
	row, err := be.TurnAt(ctx, branch, seq)
	if err != nil {
		return api.TurnInfo{}, err
	}
	return be.Turn(ctx, branch, row.ID)
}

// loaded shows the result of load.
func (b *chunkBrowser) loaded(msg chunkTurnMsg) tea.Cmd {
	if msg.gen != b.gen {
		return nil
	}
	b.seq, b.rows, b.reading = msg.seq, rowCursor{}, false
	if msg.err != nil {
		b.turn, b.note = nil, fmt.Sprintf("No chunks for turn %d: %v", msg.seq, msg.err)
		return statusErr(fmt.Sprintf("chunks of turn %d", msg.seq), msg.err)
	}
	info := msg.info
	b.turn, b.note = &info, ""
	if len(info.Chunks) == 0 {
		b.note = noChunks(info)
		if msg.scanned > 1 {
			b.note = fmt.Sprintf("None of the last %d turns has chunks yet. ", msg.scanned) + b.note
		}
	}
	return nil
}

// noChunks says why a turn has no chunks, by its phase.
func noChunks(t api.TurnInfo) string {
	switch t.Phase {
	case messages.PhaseResponseFinalized:
		return fmt.Sprintf("Turn %d has no chunks yet (indexed after its pending turns fold: /commit).", t.Seq)
	case messages.PhaseStateCommitted:
		return fmt.Sprintf("Turn %d has no chunks yet: it is folded and being indexed (r reloads).", t.Seq)
	case messages.PhaseDone:
		return fmt.Sprintf("Turn %d was indexed into no chunks: it has no text to retrieve.", t.Seq)
	case messages.PhaseFailed:
		return fmt.Sprintf("Turn %d failed: a failed turn is not indexed, so it has no chunks.", t.Seq)
	}
	return fmt.Sprintf("Turn %d is still running: it is indexed once its reply is folded.", t.Seq)
}

// key handles a key on the browse tab.
func (b *chunkBrowser) key(s *State, k string, msg tea.KeyPressMsg) tea.Cmd {
	if b.reading {
		switch k {
		case "esc", "enter", "backspace", "q":
			b.reading = false
			return nil
		}
		return b.text.update(msg)
	}
	n := 0
	if b.turn != nil {
		n = len(b.turn.Chunks)
	}
	switch k {
	case "left", "h":
		if b.seq > 1 {
			b.seq--
			return b.load(s)
		}
	case "right", "l":
		if b.seq > 0 && b.seq < s.Info.TurnSeq {
			b.seq++
			return b.load(s)
		}
	case "r":
		return b.load(s)
	case "up", "k":
		b.rows.move(-1, n)
	case "down", "j":
		b.rows.move(1, n)
	case "pgup":
		b.rows.move(-10, n)
	case "pgdown":
		b.rows.move(10, n)
	case "enter":
		if n > 0 {
			b.reading = true
			b.text.setText(chunkText(*b.turn, b.turn.Chunks[b.rows.at]))
		}
	}
	return nil
}

// view renders the browse tab below lines (the tabs) in width×height.
func (b *chunkBrowser) view(s *State, lines []string, width, height int) string {
	if b.turn == nil {
		return fitScreen(appendWrapped(lines, b.note, width), width, height)
	}
	t := b.turn
	head := fmt.Sprintf("Turn %d of %d · %s · %s", t.Seq, max(s.Info.TurnSeq, t.Seq), t.Phase, plural(len(t.Chunks), "chunk"))
	lines = append(lines, head)
	if len(t.Chunks) == 0 {
		return fitScreen(appendWrapped(lines, b.note, width), width, height)
	}
	if b.reading {
		lines = append(lines, strings.Repeat("─", width))
		lines = append(lines, b.text.view(width, max(height-len(lines)-1, 1)), b.text.position())
		return fitScreen(lines, width, height)
	}
	const rowFormat = "%s%-8s  %-12s %6s  %-5s  %-9s  %s"
	lines = append(lines, fmt.Sprintf(rowFormat, "  ", "chunk", "type", "tokens", "from", "bytes", "text"))
	top, end := b.rows.window(height-len(lines), len(t.Chunks))
	for i := top; i < end; i++ {
		mark := "  "
		if i == b.rows.at {
			mark = "> "
		}
		ch := t.Chunks[i]
		lines = append(lines, fmt.Sprintf(rowFormat, mark, idTail(ch.ID), ch.Type, fmt.Sprint(ch.TokenEst),
			chunkFrom(*t, ch), byteRange(ch), firstLine(ch.Text)))
	}
	return fitScreen(lines, width, height)
}

// keys are the browse tab's key bindings; tab is the one to the next tab.
func (b *chunkBrowser) keys(tab key.Binding) []key.Binding {
	if b.reading {
		return []key.Binding{
			key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "scroll")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back to the list"))}
	}
	return []key.Binding{tab,
		key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "turn")),
		key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "select")),
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "read")),
		key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))}
}

// chunkFrom says which message of turn t a chunk's text is from: the
// user's, the reply, or (another node) its short id.
func chunkFrom(t api.TurnInfo, c api.ChunkInfo) string {
	switch {
	case c.Node == t.ID:
		return "user"
	case !c.Node.IsZero() && c.Node == t.Reply:
		return "reply"
	case c.Node.IsZero():
		return "-"
	}
	return idTail(c.Node)
}

// byteRange is a chunk's bytes in its message's rendered text, or - for
// a tool's result, which that text does not hold.
func byteRange(c api.ChunkInfo) string {
	if c.Start == 0 && c.End == 0 {
		return "-"
	}
	return fmt.Sprintf("%d-%d", c.Start, c.End)
}

// chunkText is a chunk's full text with what it is and where it is from.
func chunkText(t api.TurnInfo, c api.ChunkInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chunk %s · %s · turn %s · %d tokens\n", idTail(c.ID), c.Type, turnNumber(t.Seq), c.TokenEst)
	from := "message " + idTail(c.Node)
	switch chunkFrom(t, c) {
	case "user":
		from = "the user's message " + idTail(c.Node)
	case "reply":
		from = "the reply " + idTail(c.Node)
	case "-":
		from = "no recorded message"
	}
	if r := byteRange(c); r != "-" {
		fmt.Fprintf(&b, "from %s, bytes %s\n\n", from, r)
	} else {
		fmt.Fprintf(&b, "from %s (a tool's result: not in its rendered text)\n\n", from)
	}
	b.WriteString(expandTabs(c.Text))
	if c.Summary != "" {
		b.WriteString("\n\nSummary: " + expandTabs(c.Summary))
	}
	return b.String()
}

// plural is n things: 1 chunk, 2 chunks.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
