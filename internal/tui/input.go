package tui

import (
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

// maxInputHistory bounds the inputs up/down recall.
const maxInputHistory = 500

// input is the input line: a text input with editing (arrows, home/end,
// word moves and deletes) and a history of what was entered, recalled
// with up and down.
type input struct {
	ti      textinput.Model
	history []string
	// at is the recalled entry's index in history; len(history): none
	// (the draft, what was being typed before the first up, is shown).
	at    int
	draft string
}

func newInput() input {
	ti := textinput.New()
	ti.Prompt = "> "
	ti.Placeholder = "a message, or /help"
	// The terminal's cursor, not a drawn one: no blink ticks, and the
	// same screen for the same state.
	ti.SetVirtualCursor(false)
	return input{ti: ti}
}

func (in *input) focus() tea.Cmd { return in.ti.Focus() }

func (in *input) setWidth(w int) { in.ti.SetWidth(max(1, w-len(in.ti.Prompt)-1)) }

func (in *input) view() string { return in.ti.View() }

func (in *input) cursor() *tea.Cursor { return in.ti.Cursor() }

func (in *input) value() string { return in.ti.Value() }

// update passes a message (a key other than the shell's, a paste) to
// the text input.
func (in *input) update(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	in.ti, cmd = in.ti.Update(msg)
	return cmd
}

// take returns the text entered, records it in the history and clears
// the line.
func (in *input) take() string {
	v := in.ti.Value()
	if v != "" && (len(in.history) == 0 || in.history[len(in.history)-1] != v) {
		in.history = append(in.history, v)
		if len(in.history) > maxInputHistory {
			in.history = in.history[len(in.history)-maxInputHistory:]
		}
	}
	in.at, in.draft = len(in.history), ""
	in.ti.Reset()
	return v
}

// older shows the previous entry of the history (up).
func (in *input) older() {
	if in.at > len(in.history) {
		in.at = len(in.history)
	}
	if in.at == 0 {
		return
	}
	if in.at == len(in.history) {
		in.draft = in.ti.Value()
	}
	in.at--
	in.show(in.history[in.at])
}

// newer shows the next entry of the history, and after the newest the
// draft (down).
func (in *input) newer() {
	if in.at >= len(in.history) {
		return
	}
	in.at++
	if in.at == len(in.history) {
		in.show(in.draft)
		return
	}
	in.show(in.history[in.at])
}

func (in *input) show(s string) {
	in.ti.SetValue(s)
	in.ti.CursorEnd()
}
