package tui

import (
	"fmt"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/messages"
)

// What a question of the pins screen is for.
const (
	pinAdd = iota + 1
	pinEdit
	pinRemove
)

// pinsScreen lists the current branch's pinned facts, numbered as the
// API numbers them, and adds, edits and removes them.
type pinsScreen struct {
	gen     int
	loading bool
	err     error

	pins  []messages.PinnedFact
	cur   int
	top   int    // the first line of the list shown
	selID uint64 // the pin to select when the list comes

	ask    askLine
	target messages.PinnedFact // the pin edited or removed
	note   string              // the last action's result, shown at the bottom
	noteOK bool
}

// NewPinsScreen returns the screen of the current branch's pinned facts.
func NewPinsScreen() Screen { return &pinsScreen{} }

type (
	// pinsMsg is the branch's pins as read.
	pinsMsg struct {
		gen  int
		pins []messages.PinnedFact
		err  error
	}
	// pinsDoneMsg is the result of an add, an edit or a removal; a
	// failed add or edit asks again with the text typed.
	pinsDoneMsg struct {
		gen   int
		op    int
		text  string
		typed string
		sel   uint64
		err   error
	}
)

func (p *pinsScreen) Name() string { return "Pins" }

// Modal reports whether Esc is the screen's: a question is asked.
func (p *pinsScreen) Modal() bool { return p.ask.active() }

func (p *pinsScreen) Open(s *State) tea.Cmd {
	*p = pinsScreen{gen: p.gen + 1}
	return p.load(s)
}

func (p *pinsScreen) load(s *State) tea.Cmd {
	p.loading = true
	ctx, be, branch, gen := s.Ctx, s.Backend, s.Branch.ID, p.gen
	return func() tea.Msg {
		pins, err := be.Pins(ctx, branch)
		return pinsMsg{gen: gen, pins: pins, err: err}
	}
}

// Update handles keys and the screen's own results. Esc: while a
// question is asked Update consumes it (canceling it; it returns nil)
// and Modal reports true, so the shell must pass it here; otherwise
// the shell closes the screen.
func (p *pinsScreen) Update(s *State, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case pinsMsg:
		if msg.gen != p.gen {
			return nil
		}
		p.loading = false
		if msg.err != nil {
			p.err = msg.err
			return sayStatus("", fmt.Errorf("pins: %w", msg.err))
		}
		p.err, p.pins = nil, msg.pins
		p.cur = min(p.cur, max(len(p.pins)-1, 0))
		for i, x := range p.pins {
			if x.ID == p.selID {
				p.cur = i
			}
		}
		return nil
	case pinsDoneMsg:
		if msg.gen != p.gen {
			return nil
		}
		if msg.err != nil {
			p.note, p.noteOK = msg.err.Error(), false
			switch msg.op { // ask again, with what was typed, to shorten or fix it
			case pinAdd:
				p.askAdd(msg.typed)
			case pinEdit:
				p.askEdit(msg.typed)
			}
			return sayStatus("", msg.err)
		}
		p.note, p.noteOK = msg.text, true
		if msg.sel != 0 {
			p.selID = msg.sel
		}
		return tea.Batch(sayStatus(msg.text, nil), func() tea.Msg { return RefreshMsg{} }, p.load(s))
	case tea.KeyPressMsg:
		return p.key(s, msg)
	}
	return nil
}

func (p *pinsScreen) askAdd(value string) {
	p.ask.text(pinAdd, "Pin a fact:", value, "")
}

func (p *pinsScreen) askEdit(value string) {
	p.ask.text(pinEdit, fmt.Sprintf("Edit #%d:", p.target.ID), value, "")
}

func (p *pinsScreen) key(s *State, msg tea.KeyPressMsg) tea.Cmd {
	if p.ask.active() {
		res, cmd := p.ask.key(msg)
		switch res {
		case askCanceled:
			p.ask.done()
			return nil
		case askAccepted:
			op, text := p.ask.op, p.ask.value()
			p.ask.done()
			return p.act(s, op, text)
		}
		return cmd
	}
	p.note = ""
	switch msg.String() {
	case "up", "k":
		p.cur = max(p.cur-1, 0)
	case "down", "j":
		p.cur = max(min(p.cur+1, len(p.pins)-1), 0)
	case "home", "g":
		p.cur = 0
	case "end", "G":
		p.cur = max(len(p.pins)-1, 0)
	case "a":
		p.askAdd("")
	}
	if len(p.pins) == 0 {
		return nil
	}
	sel := p.pins[p.cur]
	p.selID = sel.ID
	switch msg.String() {
	case "e":
		p.target = sel
		p.askEdit(sel.Fact)
	case "x", "delete":
		p.target = sel
		p.ask.confirm(pinRemove, fmt.Sprintf("Unpin #%d %q?", sel.ID, cellFit(oneLineOf(sel.Fact), 40)))
	}
	return nil
}

// act runs the add, edit or removal asked for.
func (p *pinsScreen) act(s *State, op int, text string) tea.Cmd {
	ctx, be, branch, gen, t := s.Ctx, s.Backend, s.Branch.ID, p.gen, p.target
	switch op {
	case pinAdd:
		if text == "" {
			return nil
		}
		return func() tea.Msg {
			f, err := be.Pin(ctx, branch, text)
			if err != nil {
				return pinsDoneMsg{gen: gen, op: op, typed: text, err: fmt.Errorf("pin: %w", err)}
			}
			return pinsDoneMsg{gen: gen, op: op, sel: f.ID, text: fmt.Sprintf("pinned #%d", f.ID)}
		}
	case pinEdit:
		if text == "" {
			p.note, p.noteOK = "an empty fact: x unpins it", false
			return nil
		}
		return func() tea.Msg {
			f, err := be.EditPin(ctx, branch, t.ID, text)
			if err != nil {
				return pinsDoneMsg{gen: gen, op: op, typed: text, err: fmt.Errorf("edit pin #%d: %w", t.ID, err)}
			}
			return pinsDoneMsg{gen: gen, op: op, sel: f.ID, text: fmt.Sprintf("edited #%d", f.ID)}
		}
	case pinRemove:
		return func() tea.Msg {
			if err := be.Unpin(ctx, branch, t.ID); err != nil {
				return pinsDoneMsg{gen: gen, op: op, err: fmt.Errorf("unpin #%d: %w", t.ID, err)}
			}
			return pinsDoneMsg{gen: gen, op: op, text: fmt.Sprintf("unpinned #%d", t.ID)}
		}
	}
	return nil
}

func (p *pinsScreen) View(s *State, width, height int) string {
	if height < 1 || width < 1 {
		return ""
	}
	lines := []string{fmt.Sprintf("Pinned facts of %s · %d", branchTitle(s.Branch.Label, s.Branch.ID), len(p.pins))}
	var bottom []string
	switch {
	case p.ask.active():
		bottom = p.ask.view(width)
	case p.note != "":
		mark := "✗ "
		if p.noteOK {
			mark = "✓ "
		}
		bottom = cellWrap(mark+p.note, width)
		bottom = bottom[:min(len(bottom), 3)]
	default:
		bottom = []string{"Pinned facts go into every context of this branch and of forks made after them."}
	}
	rows := height - 1 - len(bottom)
	if rows < 1 {
		return cellBlock(lines, width, height)
	}
	switch {
	case p.loading && p.pins == nil:
		lines = append(lines, "loading…")
	case p.err != nil && p.pins == nil:
		lines = append(lines, cellWrap("could not read the pins: "+p.err.Error(), width)...)
	case len(p.pins) == 0:
		lines = append(lines, "no pinned facts: a pins one")
	default:
		lines = append(lines, p.listView(width, rows)...)
	}
	for len(lines) < height-len(bottom) {
		lines = append(lines, "")
	}
	return cellBlock(append(lines[:height-len(bottom)], bottom...), width, height)
}

// listView is the pins, each wrapped, the selected one visible.
func (p *pinsScreen) listView(width, rows int) []string {
	var all []string
	start, end := 0, 0
	for i, f := range p.pins {
		mark := "  "
		if i == p.cur {
			mark = "› "
			start = len(all)
		}
		num := fmt.Sprintf("#%-3d ", f.ID)
		ind := 2 + len(num) // the mark is 2 cells
		text := cellWrap(f.Fact+fmt.Sprintf(" (since turn %d)", f.Seq), width-ind)
		for j, l := range text {
			if j == 0 && i == p.cur {
				all = append(all, pickedRow.Render(mark+num+l))
			} else if j == 0 {
				all = append(all, mark+num+l)
			} else {
				all = append(all, fmt.Sprintf("%*s%s", ind, "", l))
			}
		}
		if i == p.cur {
			end = len(all)
		}
	}
	if start < p.top {
		p.top = start
	}
	if end > p.top+rows {
		p.top = min(start, end-rows)
	}
	p.top = max(0, min(p.top, len(all)-rows))
	return all[p.top:min(len(all), p.top+rows)]
}

func (p *pinsScreen) Keys() []key.Binding {
	if p.ask.active() {
		if p.ask.kind == askConfirm {
			return []key.Binding{
				key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "unpin")),
				key.NewBinding(key.WithKeys("n", "esc"), key.WithHelp("n/esc", "keep it")),
			}
		}
		return []key.Binding{
			key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "save")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
		}
	}
	return []key.Binding{
		key.NewBinding(key.WithKeys("up", "down", "k", "j"), key.WithHelp("↑/↓", "select")),
		key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "add")),
		key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "edit")),
		key.NewBinding(key.WithKeys("x", "delete"), key.WithHelp("x", "unpin")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close")),
	}
}
