package tui

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// The shell's keys. The input line's editing keys are the text input's
// (textinput.DefaultKeyMap), listed in the full help.
var (
	keySend    = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "send / run /command"))
	keyHistory = key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "recall inputs"))
	keyScroll  = key.NewBinding(key.WithKeys("pgup", "pgdown"), key.WithHelp("pgup/pgdn", "scroll"))
	keyCancel  = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel turn"))
	keyClose   = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))
	keyHelp    = key.NewBinding(key.WithKeys("f1", "?"), key.WithHelp("F1/?", "help"))
	keyInt     = key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "cancel / quit"))
	keyQuit    = key.NewBinding(key.WithKeys("ctrl+d"), key.WithHelp("ctrl+d", "quit"))

	// editKeys are the input line's editing keys, for the full help.
	editKeys = []key.Binding{
		key.NewBinding(key.WithKeys("left"), key.WithHelp("←/→", "move")),
		key.NewBinding(key.WithKeys("home"), key.WithHelp("home/end", "line start/end")),
		key.NewBinding(key.WithKeys("alt+left"), key.WithHelp("alt+←/→", "word left/right")),
		key.NewBinding(key.WithKeys("ctrl+w"), key.WithHelp("ctrl+w", "delete word")),
		key.NewBinding(key.WithKeys("ctrl+u"), key.WithHelp("ctrl+u/k", "delete to start/end")),
	}
)

func newHelp() help.Model {
	h := help.New()
	h.Styles = help.DefaultStyles(true)
	return h
}

// onKey handles a key: the shell's first, then the open screen's or
// the input line's.
func (m *Model) onKey(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	switch s {
	case "ctrl+c":
		if m.turn.active {
			return m.cancelTurn()
		}
		return m.quitCmd()
	case "ctrl+d":
		return m.quitCmd()
	case "f1":
		m.showHelp = !m.showHelp
		return nil
	}
	if m.showHelp {
		switch s {
		case "esc", "?", "q":
			m.showHelp = false
		case "up":
			m.helpOffset--
		case "down":
			m.helpOffset++
		case "pgup":
			m.helpOffset -= max(1, m.st.Height/2)
		case "pgdown":
			m.helpOffset += max(1, m.st.Height/2)
		}
		m.helpOffset = max(0, m.helpOffset) // fullHelp bounds it above
		return nil
	}
	for i := range m.screens {
		if b := &m.screens[i]; b.key != "" && b.key == s {
			return m.openScreen(b, "")
		}
	}
	if m.active != nil {
		// A screen in a mode of its own (an input, a question, a
		// detail view) leaves that mode on esc; otherwise esc closes it.
		if md, ok := m.active.screen.(Modal); s == "esc" && (!ok || !md.Modal()) {
			m.closeScreen()
			return nil
		}
		return m.active.screen.Update(&m.st, k)
	}
	switch s {
	case "esc":
		if m.turn.active {
			return m.cancelTurn()
		}
		m.setStatus("", nil)
		return nil
	case "?":
		if m.in.value() == "" {
			m.showHelp = true
			return nil
		}
	case "enter":
		return m.enter()
	case "up":
		m.in.older()
		return nil
	case "down":
		m.in.newer()
		return nil
	case "pgup":
		m.conv.vp.PageUp()
		return nil
	case "pgdown":
		m.conv.vp.PageDown()
		return nil
	}
	return m.in.update(k)
}

// enter sends the input line: a slash command runs, a message starts a
// turn unless one streams (then the line stays and the status says so).
func (m *Model) enter() tea.Cmd {
	line := strings.TrimSpace(m.in.value())
	switch {
	case line == "":
		return nil
	case strings.HasPrefix(line, "/"):
		m.in.take()
		return m.runCommand(line)
	case m.turn.active:
		m.setStatus("", errors.New("a turn is streaming: wait for it to end, or esc to cancel it"))
		return nil
	}
	m.in.take()
	return m.submit(line)
}

// shellKeys is the help's key map.
type shellKeys struct{ m *Model }

func (m *Model) keyMap() help.KeyMap { return shellKeys{m} }

// ShortHelp is the help line: the open screen's keys, or the
// conversation's.
func (k shellKeys) ShortHelp() []key.Binding {
	if k.m.showHelp {
		return []key.Binding{key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc/F1", "close help")), keyQuit}
	}
	if a := k.m.active; a != nil {
		keys := a.screen.Keys()
		if !slices.ContainsFunc(keys, func(b key.Binding) bool { return slices.Contains(b.Keys(), "esc") }) {
			keys = append([]key.Binding{keyClose}, keys...) // the screen says nothing of esc
		}
		return append(keys, keyHelp)
	}
	out := []key.Binding{keySend, keyHistory, keyCancel, keyHelp}
	if !k.m.turn.active {
		out[2] = keyQuit
	}
	return append(out, k.m.screenKeys()...)
}

// FullHelp is every key and command, in columns.
func (k shellKeys) FullHelp() [][]key.Binding { return k.m.helpGroups(0) }

// screenKeys are the keys that open the screens.
func (m *Model) screenKeys() []key.Binding {
	var out []key.Binding
	for _, b := range m.screens {
		if b.key != "" {
			out = append(out, key.NewBinding(key.WithKeys(b.key),
				key.WithHelp(strings.ToUpper(b.key), strings.ToLower(b.screen.Name()))))
		}
	}
	return out
}

// helpGroups is every binding and command as help columns of at most
// rows entries (0: no limit).
func (m *Model) helpGroups(rows int) [][]key.Binding {
	all := []key.Binding{keySend, keyHistory, keyScroll, keyCancel, keyInt, keyQuit, keyHelp}
	all = append(all, editKeys...)
	all = append(all, m.screenKeys()...)
	if m.active != nil {
		all = append(all, m.active.screen.Keys()...)
	}
	for _, c := range commands {
		k := c.name
		if c.args != "" {
			k += " " + c.args
		}
		all = append(all, key.NewBinding(key.WithKeys(c.name), key.WithHelp(k, c.help)))
	}
	if rows <= 0 {
		return [][]key.Binding{all}
	}
	var groups [][]key.Binding
	for len(all) > rows {
		groups = append(groups, all[:rows])
		all = all[rows:]
	}
	return append(groups, all)
}

// fullHelp renders the full help in w×h cells: every key and command,
// whole, in the most columns (at most four) that fit side by side; when
// the rows do not fit in h-1 lines, ↑/↓ and pgup/pgdn scroll them
// (helpOffset) and the title says so.
func (m *Model) fullHelp(w, h int) string {
	all := m.helpGroups(0)[0]
	var lines []string
	for cols := min(4, len(all)); cols >= 1; cols-- {
		rows := (len(all) + cols - 1) / cols
		var fits bool
		if lines, fits = helpColumns(all, rows, w); fits || cols == 1 {
			break
		}
	}
	rows, view := len(lines), max(1, h-1)
	m.helpOffset = max(0, min(m.helpOffset, rows-view))
	title := styleBold.Render("Keys and commands") + styleDim.Render(" (esc or F1 closes)")
	if rows > view {
		title = styleBold.Render("Keys and commands") + styleDim.Render(fmt.Sprintf(" %d–%d of %d (↑/↓ pgup/pgdn scroll; esc or F1 closes)",
			m.helpOffset+1, min(rows, m.helpOffset+view), rows))
	}
	var b strings.Builder
	b.WriteString(fitLine(title, w))
	for _, l := range lines[m.helpOffset:min(rows, m.helpOffset+view)] {
		b.WriteString("\n")
		b.WriteString(fitLine(l, w)) // only a terminal narrower than one entry cuts it
	}
	return b.String()
}

// helpColumns lays bindings out in columns of rows entries, each column
// as wide as its widest key and description, two spaces apart; fits
// says whether the lines are at most w wide.
func helpColumns(bindings []key.Binding, rows, w int) (lines []string, fits bool) {
	lines = make([]string, rows)
	width := 0
	for start := 0; start < len(bindings); start += rows {
		col := bindings[start:min(len(bindings), start+rows)]
		keyW, descW := 0, 0
		for _, b := range col {
			keyW = max(keyW, lipgloss.Width(b.Help().Key))
			descW = max(descW, lipgloss.Width(b.Help().Desc))
		}
		last := start+rows >= len(bindings)
		for r, b := range col {
			k := b.Help().Key
			e := k + strings.Repeat(" ", keyW-lipgloss.Width(k)+1) + b.Help().Desc
			if !last {
				e += strings.Repeat(" ", keyW+1+descW+2-lipgloss.Width(e))
			}
			lines[r] += e
		}
		if !last {
			// The rows a short last column leaves are padded to line up.
			for r := len(col); r < rows; r++ {
				lines[r] += strings.Repeat(" ", keyW+1+descW+2)
			}
		}
		width += keyW + 1 + descW
		if !last {
			width += 2
		}
	}
	for r := range lines {
		lines[r] = strings.TrimRight(lines[r], " ")
	}
	return lines, width <= w
}
