package tui

import (
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// pickedRow styles the selected row of a list.
var pickedRow = lipgloss.NewStyle().Reverse(true)

// Modal is implemented by a screen that has modes of its own: an inline
// input, a y/n confirmation, a detail view or a filter. While Modal
// returns true the screen consumes Esc (to leave that mode), so the
// shell passes Esc to it instead of closing it; otherwise the shell
// closes the screen on Esc.
type Modal interface{ Modal() bool }

// askKind is what an askLine asks for.
type askKind int

const (
	askNone    askKind = iota
	askText            // a line of text, ended by enter
	askConfirm         // y or n
)

// askLine is the question a screen asks on its bottom line: a line of
// text (bubbles' textinput, with its editing keys) or a y/n
// confirmation. What the answer is for is the screen's (op).
type askLine struct {
	kind   askKind
	op     int
	prompt string
	input  textinput.Model
}

// askResult is what a key did to an askLine.
type askResult int

const (
	askTyping   askResult = iota // the key edited the text (or was ignored)
	askAccepted                  // enter, or y
	askCanceled                  // esc, or n
)

// text starts asking for a line of text after prompt, prefilled with
// value, placeholder shown while it is empty.
func (a *askLine) text(op int, prompt, value, placeholder string) {
	in := textinput.New()
	st := textinput.DefaultDarkStyles()
	st.Cursor.Blink = false // a static cursor: no blink ticks
	in.SetStyles(st)
	in.Prompt = ""
	in.Placeholder = placeholder
	in.SetValue(value)
	in.CursorEnd()
	in.Focus()
	*a = askLine{kind: askText, op: op, prompt: prompt, input: in}
}

// confirm starts asking question, to be answered y or n.
func (a *askLine) confirm(op int, question string) {
	*a = askLine{kind: askConfirm, op: op, prompt: question}
}

// active reports whether a question is being asked.
func (a *askLine) active() bool { return a.kind != askNone }

// done stops asking.
func (a *askLine) done() { *a = askLine{} }

// value is the text typed, trimmed.
func (a *askLine) value() string { return strings.TrimSpace(a.input.Value()) }

// key applies a key press to the question.
func (a *askLine) key(msg tea.KeyPressMsg) (askResult, tea.Cmd) {
	switch a.kind {
	case askConfirm:
		switch msg.String() {
		case "y", "Y":
			return askAccepted, nil
		case "n", "N", "esc":
			return askCanceled, nil
		}
		return askTyping, nil
	case askText:
		switch msg.String() {
		case "enter":
			return askAccepted, nil
		case "esc":
			return askCanceled, nil
		}
		var cmd tea.Cmd
		a.input, cmd = a.input.Update(msg)
		return askTyping, cmd
	}
	return askTyping, nil
}

// view renders the question in width cells: a line of text input, or
// a confirmation wrapped to up to three lines.
func (a *askLine) view(width int) []string {
	switch a.kind {
	case askConfirm:
		ls := cellWrap(a.prompt+" [y/n]", width)
		if len(ls) > 3 {
			ls = append(ls[:2], cellFit(ls[len(ls)-1], width))
		}
		return ls
	case askText:
		p := cellFit(a.prompt, width*2/3) + " "
		if w := max(1, width-ansi.StringWidth(p)-1); w != a.input.Width() {
			a.input.SetWidth(w)
			a.input.SetCursor(a.input.Position()) // scroll the text to the cursor
		}
		return []string{cellFit(p+a.input.View(), width)}
	}
	return nil
}

// cellFit cuts s (one line) to width cells, marking a cut with "…".
func cellFit(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, "…")
}

// cellWrap wraps text to width cells: words where it can, hard
// breaks where a word is longer than a line. Tabs become spaces.
func cellWrap(text string, width int) []string {
	if width < 1 {
		width = 1
	}
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\t", "    ")
	var out []string
	for _, l := range strings.Split(ansi.Wrap(text, width, ""), "\n") {
		out = append(out, strings.TrimRight(l, " "))
	}
	return out
}

// cellBlock joins lines into exactly height lines, each cut to width.
func cellBlock(lines []string, width, height int) string {
	if height < 1 {
		return ""
	}
	out := make([]string, height)
	for i := range out {
		if i < len(lines) {
			out[i] = cellFit(lines[i], width)
		}
	}
	return strings.Join(out, "\n")
}

// listWindow returns the first row to show of n rows in height rows so
// that row cur is visible, moving top as little as possible.
func listWindow(top, cur, n, height int) int {
	if height < 1 {
		return cur
	}
	if cur < top {
		top = cur
	}
	if cur >= top+height {
		top = cur - height + 1
	}
	top = min(top, max(0, n-height))
	return max(0, top)
}

// sayStatus is a command showing text, or err, on the status line.
func sayStatus(text string, err error) tea.Cmd {
	return func() tea.Msg { return StatusMsg{Text: text, Err: err} }
}

// oneLineOf is s with its runs of white space, newlines too, as one space.
func oneLineOf(s string) string { return strings.Join(strings.Fields(s), " ") }
