package tui

import (
	"fmt"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// ModelsScreen is the model selector: the models the runtime knows, the
// branch's current one marked; enter selects one for the branch.
type ModelsScreen struct {
	names   []string
	def     string // the default model's provider/id
	rows    rowCursor
	note    string
	loaded  bool
	busy    bool // a selection is running
	current string
}

// NewModelsScreen returns the model selector.
func NewModelsScreen() Screen { return &ModelsScreen{} }

// modelsMsg is the result of loading the model names.
type modelsMsg struct {
	names []string
	def   string
	err   error
}

// modelSelectedMsg is the result of selecting a model.
type modelSelectedMsg struct {
	name string
	err  error
}

// Name implements Screen.
func (m *ModelsScreen) Name() string { return "Models" }

// Open implements Screen: it loads the model names.
func (m *ModelsScreen) Open(s *State) tea.Cmd {
	m.note, m.busy = "Loading the models…", false
	return func() tea.Msg {
		names, err := s.Backend.ModelNames(s.Ctx)
		if err != nil {
			return modelsMsg{err: err}
		}
		out := modelsMsg{names: names}
		if p, id, err := s.Backend.Names(s.Ctx); err == nil {
			out.def = p + "/" + id
		}
		return out
	}
}

// Update implements Screen.
func (m *ModelsScreen) Update(s *State, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case modelsMsg:
		if msg.err != nil {
			m.note = "Cannot list the models: " + msg.err.Error()
			return statusErr("models", msg.err)
		}
		m.names, m.def, m.loaded = msg.names, msg.def, true
		m.current = s.Info.Model
		m.rows = rowCursor{}
		for i, n := range m.names {
			if n == m.current {
				m.rows.at = i
			}
		}
		m.note = m.currentLine()
		if len(m.names) == 0 {
			m.note = "No models are configured (models: in config.yaml); the branch uses the default."
		}
		return nil
	case modelSelectedMsg:
		m.busy = false
		if msg.err != nil {
			m.note = "Cannot select " + msg.name + ": " + msg.err.Error()
			return statusErr("select model "+msg.name, msg.err)
		}
		m.current = msg.name
		m.note = m.currentLine()
		return tea.Batch(statusText("model: "+msg.name),
			func() tea.Msg { return RefreshMsg{} }, func() tea.Msg { return CloseMsg{} })
	case tea.KeyPressMsg:
		switch msg.String() {
		case "up", "k":
			m.rows.move(-1, len(m.names))
		case "down", "j":
			m.rows.move(1, len(m.names))
		case "enter":
			if m.busy || len(m.names) == 0 {
				return nil
			}
			name, branch := m.names[m.rows.at], s.Branch.ID
			m.busy = true
			m.note = "Selecting " + name + "…"
			return func() tea.Msg {
				return modelSelectedMsg{name: name, err: s.Backend.SelectModel(s.Ctx, branch, name)}
			}
		}
	}
	return nil
}

// currentLine says which model the branch uses.
func (m *ModelsScreen) currentLine() string {
	if m.current == "" {
		if m.def != "" {
			return "The branch uses the default model (" + m.def + ")."
		}
		return "The branch uses the default model."
	}
	return "The branch uses " + m.current + "."
}

// View implements Screen.
func (m *ModelsScreen) View(s *State, width, height int) string {
	lines := append(appendWrapped(nil, m.note, width), "")
	top, end := m.rows.window(height-len(lines), len(m.names))
	for i := top; i < end; i++ {
		mark := "  "
		if i == m.rows.at {
			mark = "> "
		}
		cur := ""
		if m.names[i] == m.current {
			cur = "  (current)"
		}
		lines = append(lines, fmt.Sprintf("%s%s%s", mark, m.names[i], cur))
	}
	return fitScreen(lines, width, height)
}

// Keys implements Screen.
func (m *ModelsScreen) Keys() []key.Binding {
	return []key.Binding{
		key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "select")),
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "use this model")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))}
}
