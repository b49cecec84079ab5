package tui

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// command is a slash command of the input line.
type command struct {
	name string // "/switch"
	args string // "LABEL|ID", for the help
	help string
	// screen, when set, is the screen the command opens (a word of its
	// name); run then handles only what the screen does not.
	screen string
	run    func(m *Model, args string) tea.Cmd
}

// commands are the slash commands, in the order the help lists them.
var commands = []command{
	{name: "/history", help: "history, paged", screen: "history"},
	{name: "/branches", help: "branch tree, forks", screen: "branch"},
	{name: "/pins", help: "pins: add/edit/remove", screen: "pin"},
	{name: "/chunks", args: "[Q]", help: "chunk browser, search", screen: "chunk"},
	{name: "/search", args: "Q", help: "retrieve for Q", screen: "chunk"},
	{name: "/pending", help: "pending turns", screen: "pending"},
	{name: "/steps", args: "[N]", help: "steps, tool calls", screen: "step"},
	{name: "/model", args: "[NAME]", help: "select the model", run: (*Model).cmdModel},
	{name: "/commit", help: "commit pending now", run: (*Model).cmdCommit},
	{name: "/switch", args: "B", help: "go to branch B", run: (*Model).cmdSwitch},
	{name: "/fork", args: "[N] [LABEL]", help: "fork at turn N", run: (*Model).cmdFork},
	{name: "/rollback", args: "N", help: "back to turn N", run: (*Model).cmdRollback},
	{name: "/pin", args: "FACT", help: "pin a fact", run: (*Model).cmdPin},
	{name: "/help", help: "this help", run: func(m *Model, _ string) tea.Cmd { m.showHelp = !m.showHelp; return nil }},
	{name: "/quit", help: "quit", run: func(m *Model, _ string) tea.Cmd { return m.quitCmd() }},
}

// runCommand runs a slash command line.
func (m *Model) runCommand(line string) tea.Cmd {
	name, args, _ := strings.Cut(strings.TrimSpace(line), " ")
	args = strings.TrimSpace(args)
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if name == "/exit" {
		i = slices.IndexFunc(commands, func(c command) bool { return c.name == "/quit" })
	}
	if i < 0 {
		m.setStatus("", fmt.Errorf("unknown command %s (F1 or /help lists them)", name))
		return nil
	}
	c := commands[i]
	if c.screen != "" {
		if c.name == "/search" && args == "" {
			m.setStatus("", errors.New("/search: usage /search QUERY"))
			return nil
		}
		if c.name == "/steps" && args != "" {
			if n, err := strconv.ParseUint(args, 10, 64); err != nil || n == 0 {
				m.setStatus("", errors.New("/steps: N must be a turn number (see /history)"))
				return nil
			}
		}
		s := m.screenFor(c.screen)
		if s == nil {
			m.setStatus("", fmt.Errorf("%s: no %s screen in this build", c.name, c.screen))
			return nil
		}
		return m.openScreen(s, args)
	}
	return c.run(m, args)
}

// Results of the commands that run through the backend.
type (
	// resultMsg shows a command's outcome on the status line and, with
	// refresh, re-reads the branch.
	resultMsg struct {
		text    string
		err     error
		refresh bool
	}
	// switchedMsg makes branch current after a fork or a switch.
	switchedMsg struct {
		branch api.Branch
		text   string
	}
)

func (m *Model) cmdModel(args string) tea.Cmd {
	be, ctx, branch := m.st.Backend, m.st.Ctx, m.st.Branch.ID
	if args == "" {
		if s := m.screenFor("model"); s != nil {
			return m.openScreen(s, "")
		}
		return func() tea.Msg {
			names, err := be.ModelNames(ctx)
			if err != nil {
				return resultMsg{text: "/model", err: err}
			}
			return resultMsg{text: "models: " + strings.Join(names, ", ") + " (/model NAME uses one; /model default)"}
		}
	}
	return func() tea.Msg {
		name := args
		if name == "default" {
			name = ""
		}
		if err := be.SelectModel(ctx, branch, name); err != nil {
			return resultMsg{text: "/model " + args, err: err}
		}
		return resultMsg{text: "model " + args + " selected for the next turns", refresh: true}
	}
}

func (m *Model) cmdCommit(string) tea.Cmd {
	be, ctx, branch := m.st.Backend, m.st.Ctx, m.st.Branch.ID
	return func() tea.Msg {
		if err := be.CommitPending(ctx, branch); err != nil {
			return resultMsg{text: "/commit", err: err}
		}
		return resultMsg{text: "committing the pending turns: the summary folds them in", refresh: true}
	}
}

func (m *Model) cmdPin(args string) tea.Cmd {
	if args == "" {
		m.setStatus("", errors.New("/pin: usage /pin FACT"))
		return nil
	}
	be, ctx, branch := m.st.Backend, m.st.Ctx, m.st.Branch.ID
	return func() tea.Msg {
		p, err := be.Pin(ctx, branch, args)
		if err != nil {
			return resultMsg{text: "/pin", err: err}
		}
		return resultMsg{text: fmt.Sprintf("pinned #%d: %s", p.ID, oneLine(p.Fact, 60)), refresh: true}
	}
}

func (m *Model) cmdSwitch(args string) tea.Cmd {
	if args == "" {
		m.setStatus("", errors.New("/switch: usage /switch LABEL, or an id or its short form (see /branches)"))
		return nil
	}
	be, ctx, session := m.st.Backend, m.st.Ctx, m.st.Branch.Session
	return func() tea.Msg {
		bs, err := be.Branches(ctx, session)
		if err != nil {
			return resultMsg{text: "/switch", err: err}
		}
		b, err := ResolveBranch(bs, args)
		if err != nil {
			return resultMsg{text: "/switch", err: err}
		}
		return switchedMsg{branch: b, text: "now on branch " + describe(b)}
	}
}

func (m *Model) cmdFork(args string) tea.Cmd {
	f := strings.Fields(args)
	var seq uint64
	if len(f) > 0 {
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			if n == 0 {
				m.setStatus("", errors.New("/fork: N must be a turn number, 1 or more (see /history)"))
				return nil
			}
			seq, f = n, f[1:]
		}
	}
	return m.fork("/fork", seq, strings.Join(f, " "), "fork")
}

func (m *Model) cmdRollback(args string) tea.Cmd {
	f := strings.Fields(args)
	n, err := uint64(0), error(nil)
	if len(f) == 1 {
		n, err = strconv.ParseUint(f[0], 10, 64)
	}
	if len(f) != 1 || err != nil || n == 0 {
		m.setStatus("", errors.New("/rollback: usage /rollback N, N the turn to go back to (see /history)"))
		return nil
	}
	return m.fork("/rollback", n, "", fmt.Sprintf("rollback-%d", n))
}

// forkReq is a /fork or /rollback to run: after the branch's turn seq
// (0: the head), labeled label (empty: a free label made of base).
type forkReq struct {
	what        string // the command, for the status line
	seq         uint64
	label, base string
}

// forkDoneMsg is what a fork ended with (a switchedMsg or a resultMsg);
// the shell then runs the next fork queued.
type forkDoneMsg struct{ msg tea.Msg }

// fork forks the branch after its turn seq (0: the head) as a branch
// labeled label (empty: a free label made of base) and switches to it.
// Forks run one at a time: one asked for while another is under way
// waits for it and then runs as if typed after it landed, on the fork
// it switched to, picking its default label among branches that
// include that fork's (so /fork twice gives fork, then fork-2).
func (m *Model) fork(what string, seq uint64, label, base string) tea.Cmd {
	r := forkReq{what: what, seq: seq, label: label, base: base}
	if m.forking {
		m.forkQueue = append(m.forkQueue, r)
		m.setStatus(fmt.Sprintf("%s: waits for the fork under way", what), nil)
		return nil
	}
	return m.startFork(r)
}

// nextFork starts the first fork queued that can start, if any.
func (m *Model) nextFork() tea.Cmd {
	for len(m.forkQueue) > 0 && !m.forking {
		r := m.forkQueue[0]
		m.forkQueue = m.forkQueue[1:]
		if cmd := m.startFork(r); cmd != nil {
			return cmd
		}
	}
	return nil
}

// startFork runs r on the current branch; its command's result is a
// forkDoneMsg.
func (m *Model) startFork(r forkReq) tea.Cmd {
	what, seq, label := r.what, r.seq, r.label
	if m.turn.active {
		m.setStatus("", fmt.Errorf("%s: a turn is streaming: wait for it, or esc to cancel it", what))
		return nil
	}
	m.forking = true
	be, ctx, cur := m.st.Backend, m.st.Ctx, m.st.Branch
	run := func() tea.Msg {
		var at messages.TurnID
		if seq > 0 {
			row, err := be.TurnAt(ctx, cur.ID, seq)
			if err != nil {
				return resultMsg{text: fmt.Sprintf("%s: turn %d", what, seq), err: err}
			}
			at = row.ID
		}
		bs, err := be.Branches(ctx, cur.Session)
		if err != nil {
			return resultMsg{text: what, err: err}
		}
		if label == "" {
			label = freeLabel(bs, r.base)
		} else if slices.ContainsFunc(bs, func(b api.Branch) bool { return b.Label == label }) {
			return resultMsg{text: what, err: fmt.Errorf("label %q is taken in this session: choose another", label)}
		}
		b, err := be.Fork(ctx, cur.ID, at, label)
		if err != nil {
			return resultMsg{text: what, err: err}
		}
		from := "the head"
		if seq > 0 {
			from = fmt.Sprintf("turn %d", seq)
		}
		return switchedMsg{branch: b, text: fmt.Sprintf("forked at %s of %s: now on branch %s", from, describe(cur), describe(b))}
	}
	return func() tea.Msg { return forkDoneMsg{msg: run()} }
}

// describe names a branch as the header does: label and short id.
func describe(b api.Branch) string {
	if b.Label == "" {
		return short(b.ID)
	}
	return b.Label + " " + short(b.ID)
}

// freeLabel is base, or base-2, base-3… the first no branch has.
func freeLabel(bs []api.Branch, base string) string {
	taken := map[string]bool{}
	for _, b := range bs {
		taken[b.Label] = true
	}
	if !taken[base] {
		return base
	}
	for i := 2; ; i++ {
		if l := fmt.Sprintf("%s-%d", base, i); !taken[l] {
			return l
		}
	}
}

// boundScreen is a screen with the key and the word its commands use.
type boundScreen struct {
	screen Screen
	key    string // "f2"…; "" past F9
}

// screenOrder orders the screens' keys: a screen whose name holds the
// n-th word gets F(n+2).
var screenOrder = []string{"history", "branch", "pin", "chunk", "pending", "step", "model"}

// bindScreens gives the screens their keys, F2…F9, in screenOrder's
// order (the others after, as given).
func bindScreens(ss []Screen) []boundScreen {
	rank := func(s Screen) int {
		name := strings.ToLower(s.Name())
		for i, w := range screenOrder {
			if strings.Contains(name, w) {
				return i
			}
		}
		return len(screenOrder)
	}
	sorted := slices.Clone(ss)
	slices.SortStableFunc(sorted, func(a, b Screen) int { return rank(a) - rank(b) })
	out := make([]boundScreen, 0, len(sorted))
	for i, s := range sorted {
		b := boundScreen{screen: s}
		if i < 8 {
			b.key = fmt.Sprintf("f%d", i+2)
		}
		out = append(out, b)
	}
	return out
}

// screenFor is the screen whose name holds word, or nil.
func (m *Model) screenFor(word string) *boundScreen {
	for i := range m.screens {
		if strings.Contains(strings.ToLower(m.screens[i].screen.Name()), word) {
			return &m.screens[i]
		}
	}
	return nil
}

// openScreen shows s over the conversation; args are its command's.
func (m *Model) openScreen(s *boundScreen, args string) tea.Cmd {
	m.active = s
	m.showHelp = false
	m.setStatus("", nil)
	if as, ok := s.screen.(ArgsScreen); ok && args != "" {
		return as.OpenArgs(&m.st, args)
	}
	return s.screen.Open(&m.st)
}

// closeScreen shows the conversation again.
func (m *Model) closeScreen() {
	m.active = nil
}
