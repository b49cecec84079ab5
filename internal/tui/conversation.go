package tui

import (
	"context"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/contextinfinity/ctxinf/messages"
)

// conversation is the conversation pane: the branch's recent messages
// and the reply streaming in, in a viewport that follows the end unless
// the user scrolled up.
type conversation struct {
	vp      viewport.Model
	entries []convEntry
	width   int
}

// convEntry is a message as the pane shows it.
type convEntry struct {
	who  string // whoUser, whoAssistant, whoTool
	text string
	note string // "[incomplete]", "[failed: …]", a tool call…
}

// Who wrote an entry.
const (
	whoUser      = "you"
	whoAssistant = "assistant"
	whoTool      = "tool"
)

// roleWho is who wrote a message of the history.
func roleWho(r messages.Role) string {
	if r == messages.RoleUser {
		return whoUser
	}
	return whoAssistant
}

func newConversation() conversation {
	vp := viewport.New()
	vp.SoftWrap = true
	return conversation{vp: vp}
}

func (c *conversation) setSize(w, h int) {
	c.width = w
	c.vp.SetWidth(w)
	c.vp.SetHeight(h)
	c.render(true)
}

// render sets the viewport's content from the entries; follow keeps the
// view at the end when it was there.
func (c *conversation) render(follow bool) {
	atEnd := c.vp.AtBottom()
	var b strings.Builder
	if len(c.entries) == 0 {
		b.WriteString(styleDim.Render("No messages on this branch yet: type one below."))
	}
	for i, e := range c.entries {
		if i > 0 {
			b.WriteString("\n")
		}
		// Wrapped at spaces here (the viewport would cut words).
		b.WriteString(ansi.Wrap(e.render(), max(1, c.width), ""))
	}
	c.vp.SetContent(b.String())
	if follow || atEnd {
		c.vp.GotoBottom()
	}
}

func (e convEntry) render() string {
	var who string
	switch e.who {
	case whoUser:
		who = styleUser.Render(e.who + ":")
	case whoAssistant:
		who = styleBot.Render(e.who + ":")
	default:
		who = styleDim.Render(e.who + ":")
	}
	if e.note != "" {
		who += " " + styleWarn.Render(e.note)
	}
	if e.text == "" {
		return who
	}
	return who + " " + e.text
}

func (c *conversation) view() string { return c.vp.View() }

// set replaces the entries with the branch's history.
func (c *conversation) set(hist []Entry) {
	c.entries = c.entries[:0]
	for _, h := range hist {
		c.entries = append(c.entries, convEntry{who: roleWho(h.Role), text: h.Text})
		for _, it := range h.Items {
			if e, ok := itemEntry(it); ok {
				c.entries = append(c.entries, e)
			}
		}
		if h.Partial != nil {
			c.entries = append(c.entries, convEntry{who: whoAssistant, text: *h.Partial,
				note: "[incomplete]"})
		}
	}
	c.render(true)
}

func (c *conversation) add(e convEntry) {
	c.entries = append(c.entries, e)
	c.render(true)
}

// appendDelta appends streamed text to the reply being streamed, the
// last entry (open: it is the reply's).
func (c *conversation) appendDelta(delta string) {
	n := len(c.entries)
	c.entries[n-1].text += delta
	c.render(false)
}

// itemEntry is how the pane shows a tool call or output.
func itemEntry(it messages.TranscriptItem) (convEntry, bool) {
	switch it := it.(type) {
	case messages.ToolCall:
		return convEntry{who: whoAssistant, note: "[tool call " + it.Name + "]",
			text: oneLine(string(it.Arguments), 200)}, true
	case messages.ToolOutput:
		note := "[tool result]"
		if it.IsError {
			note = "[tool error]"
		}
		return convEntry{who: whoTool, note: note, text: oneLine(string(it.Output), 200)}, true
	}
	return convEntry{}, false
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// turnState is the turn the shell streams.
type turnState struct {
	active  bool // a turn streams
	started bool // a turn streamed since the branch was opened (its counters stay shown)
	id      int  // which submit the updates are of
	phase   string
	// displayed and durable are the bytes of the turn's text shown and
	// durable (Update.TextDisplayed, TextDurable).
	displayed, durable uint64
	replying           bool // the reply's entry is open in the conversation
	cancel             context.CancelFunc
}

// stop cancels the turn's submit call (the shell quits).
func (t *turnState) stop() {
	if t.cancel != nil {
		t.cancel()
	}
}

// Messages of a streaming turn, sent by the submit command.
type (
	streamUpdateMsg struct {
		id int
		u  Update
	}
	streamDoneMsg struct {
		id   int
		seq  uint64
		last Update
		err  error
	}
)

// submit starts a turn with text: the conversation shows it, and the
// returned command runs the backend's Submit, sending each update to
// the program and returning streamDoneMsg at the end.
func (m *Model) submit(text string) tea.Cmd {
	m.nextID++
	ctx, cancel := context.WithCancel(m.st.Ctx)
	m.turn = turnState{active: true, started: true, id: m.nextID, cancel: cancel}
	m.conv.add(convEntry{who: whoUser, text: text})
	m.setStatus("", nil)
	id, branch, be, send := m.nextID, m.st.Branch.ID, m.st.Backend, m.send
	return func() tea.Msg {
		defer cancel()
		seq, last, err := be.Submit(ctx, branch, text, func(u Update) {
			if send != nil {
				send(streamUpdateMsg{id: id, u: u})
			}
		})
		return streamDoneMsg{id: id, seq: seq, last: last, err: err}
	}
}

// onStreamUpdate shows an update of the streaming turn.
func (m *Model) onStreamUpdate(msg streamUpdateMsg) {
	if msg.id != m.turn.id || !m.turn.active {
		return // a turn of a branch left since, or already done
	}
	u := msg.u
	m.turn.displayed, m.turn.durable = u.TextDisplayed, u.TextDurable
	if u.Done {
		return // streamDoneMsg ends the turn
	}
	m.turn.phase = messages.PhaseResponding.String()
	if u.Item != nil {
		if e, ok := itemEntry(u.Item); ok {
			m.conv.add(e)
			m.turn.replying = false
		}
	}
	if u.Delta != "" {
		if !m.turn.replying {
			m.conv.add(convEntry{who: whoAssistant})
			m.turn.replying = true
		}
		m.conv.appendDelta(u.Delta)
	}
}

// onStreamDone ends the streaming turn: how it ended goes into the
// conversation (a failure with its reason) and the header re-reads the
// branch.
func (m *Model) onStreamDone(msg streamDoneMsg) tea.Cmd {
	if msg.id != m.turn.id || !m.turn.active {
		return nil
	}
	m.turn.active = false
	last := msg.last
	if last.Done {
		m.turn.displayed, m.turn.durable = last.TextDisplayed, last.TextDurable
	}
	if msg.seq > 0 {
		m.lastTurn = msg.seq
	}
	switch {
	case msg.err != nil:
		m.lastPhase = messages.PhaseFailed.String()
		m.conv.add(convEntry{who: whoAssistant, note: "[failed: " + msg.err.Error() + "]"})
		m.setStatus("turn", msg.err)
	case last.Phase == messages.PhaseFailed:
		m.lastPhase = last.Phase.String()
		m.conv.add(convEntry{who: whoAssistant, note: "[" + failure(last) + "]"})
		m.setStatus(fmt.Sprintf("turn %d failed", msg.seq), nil)
	default:
		if last.Phase != 0 {
			m.lastPhase = last.Phase.String()
		}
		if k := last.Outcome.Kind; k == messages.OutcomeIncomplete || k == messages.OutcomePaused {
			m.conv.add(convEntry{who: whoAssistant, note: fmt.Sprintf("[%s: %s]", k, last.Outcome.Reason)})
		}
		if !m.turn.replying && last.Outcome.Kind != messages.OutcomeIncomplete {
			m.conv.add(convEntry{who: whoAssistant, note: "[no text]"})
		}
	}
	m.turn.replying = false
	return m.refresh()
}

// failure says why a failed turn failed: its outcome's kind, code and
// message (cancelled (cancelled): …).
func failure(u Update) string {
	o := u.Outcome
	s := "failed"
	if o.Kind != 0 {
		s = o.Kind.String()
	}
	if o.Code != "" {
		s += " (" + o.Code + ")"
	}
	msg := o.Message
	if msg == "" {
		msg = u.Err
	}
	if msg != "" {
		s += ": " + msg
	}
	return s
}

// cancelTurn asks the backend to cancel the streaming turn; its done
// update ends it.
func (m *Model) cancelTurn() tea.Cmd {
	m.setStatus("cancelling the turn…", nil)
	be, branch, ctx := m.st.Backend, m.st.Branch.ID, m.st.Ctx
	return func() tea.Msg {
		if err := be.Cancel(ctx, branch); err != nil {
			return StatusMsg{Text: "cancel", Err: err}
		}
		return StatusMsg{Text: "turn cancelled"}
	}
}
