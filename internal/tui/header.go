package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/contextinfinity/ctxinf/messages"
)

// headerRows is the header's height: two lines of fields and a rule.
const headerRows = 3

// shortLen is how many characters of an id the header shows. The
// header shows an id's last characters (a ULID's first ten are its
// time, alike for ids made in the same second); /switch takes them.
const shortLen = 8

// short is the short form of an id: its last shortLen characters.
func short(id fmt.Stringer) string {
	s := id.String()
	if len(s) <= shortLen {
		return s
	}
	return s[len(s)-shortLen:]
}

// header renders the header (SRD §17.1): session and branch, the model,
// the head state, pending turns, the current turn's phase and, from a
// turn's first update on, the streamed text's durable/displayed bytes.
func (m *Model) header(w int) []string {
	b, info := m.st.Branch, m.st.Info
	title := m.sessionTitle
	if title == "" {
		title = "session"
	}
	label := b.Label
	if label == "" {
		label = "(no label)"
	}
	model := info.Model
	if model == "" {
		model = m.model
		if model == "" {
			model = "default"
		}
	}
	where := ""
	if m.active != nil {
		where = " · " + m.active.screen.Name()
	}
	l1 := fmt.Sprintf("%s · session %s %s · branch %s %s · model %s%s",
		styleBold.Render("ctxinf"), title, short(b.Session), styleBold.Render(label), short(b.ID), model, where)

	state := "state #0"
	if !info.State.ID.IsZero() || info.State.Seq > 0 {
		state = fmt.Sprintf("state #%d %s", info.State.Seq, short(info.State.ID))
	}
	l2 := fmt.Sprintf("%s · pending %d · %s", state, info.Pending, m.phaseField())
	if m.turn.active || m.turn.started {
		l2 += " · " + m.streamField()
	}
	return []string{fitLine(l1, w), fitLine(l2, w), styleDim.Render(strings.Repeat("─", w))}
}

// phaseField is the current turn's phase: the streaming turn's while
// one streams, else the branch's newest turn's (idle before any).
func (m *Model) phaseField() string {
	switch {
	case m.turn.active && m.turn.phase == "":
		return "turn: " + styleWarn.Render("accepted")
	case m.turn.active:
		return "turn: " + styleWarn.Render(m.turn.phase)
	case m.st.Info.InFlight != nil:
		return "turn: " + styleWarn.Render("in flight")
	case m.lastTurn == 0:
		return "turn: idle"
	}
	phase := m.lastPhase
	if phase == messages.PhaseFailed.String() {
		phase = styleErr.Render(phase)
	}
	return fmt.Sprintf("turn %d: %s", m.lastTurn, phase)
}

// streamField is "Stream: durable/displayed B" in bytes of text, marked
// buffered while some displayed text is not durable yet (SRD §13.3).
func (m *Model) streamField() string {
	s := fmt.Sprintf("Stream: %d/%d B", m.turn.durable, m.turn.displayed)
	if m.turn.displayed > m.turn.durable {
		s += " " + styleWarn.Render("(buffered)")
	}
	return s
}

// truncate cuts s to w cells, ending with "…".
func truncate(s string, w int) string { return ansi.Truncate(s, w, "…") }
