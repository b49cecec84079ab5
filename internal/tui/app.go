package tui

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// Options configure the shell.
type Options struct {
	// Ctx bounds every backend call; nil: context.Background().
	Ctx     context.Context
	Backend Backend
	// Branch is the branch the shell opens on.
	Branch api.Branch
	// Screens are the panes the shell can open, by key (F2…F9, in the
	// order of screenOrder) and slash command (/history, /branches…).
	Screens []Screen
	// Where names the runtime in the status line at start ("data in
	// DIR", "server URL"); optional.
	Where string
}

// ArgsScreen is a Screen that takes the arguments of the slash command
// that opens it (/steps 3, /search QUERY). The shell calls OpenArgs
// instead of Open when the command has arguments.
type ArgsScreen interface {
	Screen
	OpenArgs(s *State, args string) tea.Cmd
}

// historyPage is how many messages of the branch the conversation shows
// when it opens.
const historyPage = 50

// refreshEvery is how often the header re-reads the branch while its
// last turn has not reached Done (the fold and indexing go on after
// the reply).
const refreshEvery = time.Second

// Model is the shell: a header, the conversation or an open screen,
// the input line, a status line and the help line.
type Model struct {
	st State

	// send delivers the streaming updates of a turn to the program (its
	// Send); the submit command runs outside Update.
	send func(tea.Msg)
	// tick schedules the next header refresh (tea.Tick; tests replace it).
	tick func(time.Duration, func(time.Time) tea.Msg) tea.Cmd

	sessionTitle string
	provider     string
	model        string
	lastTurn     uint64 // the branch's newest turn number, and its phase
	lastPhase    string
	refreshing   bool // a refresh tick is scheduled
	polls        int  // refreshes since the last thing the user did

	screens []boundScreen
	active  *boundScreen

	conv     conversation
	in       input
	help     help.Model
	showHelp bool
	// helpOffset is the first row of the full help shown (it scrolls
	// when its rows do not fit).
	helpOffset int

	status    string
	statusErr bool

	turn   turnState
	nextID int
	// forking is set while a /fork or /rollback is under way; those
	// entered meanwhile wait in forkQueue, in order (see fork).
	forking   bool
	forkQueue []forkReq
	quit      bool
}

// New returns the shell on o.Branch. Run it with Run, or with a
// tea.Program after calling SetSend with the program's Send.
func New(o Options) *Model {
	ctx := o.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	m := &Model{
		st:   State{Ctx: ctx, Backend: o.Backend, Branch: o.Branch, Width: 80, Height: 24},
		tick: tea.Tick,
		conv: newConversation(),
		in:   newInput(),
		help: newHelp(),
	}
	m.screens = bindScreens(o.Screens)
	if o.Where != "" {
		m.status = "ctxinf tui on " + o.Where + ": type a message, / for commands, F1 for help"
	}
	m.layout()
	return m
}

// SetSend sets how the streaming updates of a turn reach the program:
// a tea.Program's Send.
func (m *Model) SetSend(send func(tea.Msg)) { m.send = send }

// Run runs the shell on a terminal (in, out) until the user quits.
func Run(o Options, in io.Reader, out io.Writer) error {
	m := New(o)
	opts := []tea.ProgramOption{tea.WithInput(in), tea.WithOutput(out)}
	if o.Ctx != nil {
		opts = append(opts, tea.WithContext(o.Ctx))
	}
	p := tea.NewProgram(m, opts...)
	m.SetSend(p.Send)
	_, err := p.Run()
	m.turn.stop()
	return err
}

// Init loads the header's data and the branch's recent history.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.in.focus(), m.loadNames(), m.openBranch())
}

// openBranch loads what the shell shows of the current branch.
func (m *Model) openBranch() tea.Cmd {
	return tea.Batch(m.loadSession(), m.refresh(), m.loadHistory())
}

// State is the state the shell shares with its screens.
func (m *Model) State() *State { return &m.st }

// layout sizes the panes to the terminal.
func (m *Model) layout() {
	w := m.st.Width
	m.conv.setSize(w, m.bodyHeight())
	m.in.setWidth(w)
	m.help.SetWidth(w)
}

// The rows the shell takes around the body: the header (headerRows),
// the input line, the status line and the help line.
const chromeRows = headerRows + 3

func (m *Model) bodyHeight() int { return max(1, m.st.Height-chromeRows) }

// View draws the header, the body (the conversation, the open screen or
// the full help), the input, the status and the help line.
func (m *Model) View() tea.View {
	w, bodyH := m.st.Width, m.bodyHeight()
	var body string
	switch {
	case m.showHelp:
		body = m.fullHelp(w, bodyH)
	case m.active != nil:
		body = m.active.screen.View(&m.st, w, bodyH)
	default:
		body = m.conv.view()
	}
	lines := make([]string, 0, m.st.Height)
	lines = append(lines, m.header(w)...)
	lines = append(lines, fit(body, w, bodyH)...)
	inputRow := len(lines)
	lines = append(lines, m.in.view(), fitLine(m.statusLine(), w), fitLine(m.help.View(m.keyMap()), w))
	v := tea.NewView(strings.Join(lines, "\n"))
	v.AltScreen = true
	v.WindowTitle = "ctxinf tui"
	if c := m.in.cursor(); c != nil && m.active == nil && !m.showHelp {
		c.Position.Y += inputRow
		v.Cursor = c
	}
	return v
}

// statusLine is the status text, an error in red.
func (m *Model) statusLine() string {
	if m.status == "" {
		if m.turn.active {
			return styleDim.Render("streaming: esc or ctrl+c cancels the turn")
		}
		return ""
	}
	if m.statusErr {
		return styleErr.Render("error: " + m.status)
	}
	return m.status
}

func (m *Model) setStatus(text string, err error) {
	m.status, m.statusErr = text, err != nil
	if err != nil {
		m.status = err.Error()
		if text != "" {
			m.status = text + ": " + err.Error()
		}
	}
}

// fit cuts or pads s to exactly h lines of at most w cells.
func fit(s string, w, h int) []string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = fitLine(l, w)
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines
}

// fitLine cuts l to w cells.
func fitLine(l string, w int) string {
	if lipgloss.Width(l) <= w {
		return l
	}
	return truncate(l, w)
}

var (
	styleBold = lipgloss.NewStyle().Bold(true)
	styleDim  = lipgloss.NewStyle().Faint(true)
	styleErr  = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	styleWarn = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
	styleUser = lipgloss.NewStyle().Foreground(lipgloss.Color("6")).Bold(true)
	styleBot  = lipgloss.NewStyle().Foreground(lipgloss.Color("2")).Bold(true)
)

// Messages of the shell's own loads.
type (
	namesMsg struct {
		provider, model string
		err             error
	}
	sessionMsg struct {
		session messages.SessionID
		title   string
		err     error
	}
	infoMsg struct {
		branch    messages.BranchID
		info      api.BranchInfo
		lastPhase string // the phase of the turn numbered info.TurnSeq
		err       error
	}
	historyMsg struct {
		branch  messages.BranchID
		entries []Entry
		err     error
	}
	// refreshTickMsg asks for the next header refresh.
	refreshTickMsg struct{}
)

// maxPolls bounds the header refreshes after the last thing the user
// did, while the newest turn has not reached Done.
const maxPolls = 30

// Update handles a message: keys, the terminal's size, the results of
// the backend calls, a streaming turn's updates, and the messages of the
// open screen, which gets whatever the shell does not take.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.st.Width, m.st.Height = max(msg.Width, 20), max(msg.Height, chromeRows+1)
		m.layout()
	case tea.KeyPressMsg:
		return m, m.onKey(msg)
	case streamUpdateMsg:
		m.onStreamUpdate(msg)
		return m, nil
	case streamDoneMsg:
		m.polls = 0
		return m, m.onStreamDone(msg)
	case namesMsg:
		m.provider, m.model = msg.provider, msg.model
		if msg.err != nil {
			m.setStatus("model names", msg.err)
		}
		return m, nil
	case sessionMsg:
		if msg.session == m.st.Branch.Session {
			m.sessionTitle = msg.title
			if msg.err != nil {
				m.setStatus("sessions", msg.err)
			}
		}
		return m, nil
	case infoMsg:
		return m, m.onInfo(msg)
	case historyMsg:
		if msg.branch == m.st.Branch.ID {
			if msg.err != nil {
				m.setStatus("history", msg.err)
			} else if !m.turn.started {
				m.conv.set(msg.entries)
			}
		}
		return m, nil
	case refreshTickMsg:
		m.refreshing = false
		return m, m.refresh()
	case resultMsg:
		m.setStatus(msg.text, msg.err)
		if msg.refresh {
			m.polls = 0
			return m, m.refresh()
		}
		return m, nil
	case switchedMsg:
		return m, m.switchTo(msg.branch, msg.text)
	case forkDoneMsg:
		m.forking = false
		_, cmd := m.Update(msg.msg)
		return m, tea.Batch(cmd, m.nextFork())
	case SwitchMsg:
		return m, m.switchTo(msg.Branch, "now on branch "+describe(msg.Branch))
	case StatusMsg:
		m.setStatus(msg.Text, msg.Err)
		return m, nil
	case RefreshMsg:
		m.polls = 0
		return m, m.refresh()
	case CloseMsg:
		m.closeScreen()
		return m, nil
	}
	if m.active != nil {
		return m, m.active.screen.Update(&m.st, msg)
	}
	return m, m.in.update(msg)
}

// onInfo takes the branch's live state into the header and, while its
// newest turn goes on (fold, indexing), schedules the next refresh.
func (m *Model) onInfo(msg infoMsg) tea.Cmd {
	if msg.branch != m.st.Branch.ID {
		return nil
	}
	if msg.err != nil {
		m.setStatus("branch", msg.err)
		return nil
	}
	m.st.Info = msg.info
	if !m.turn.active {
		m.lastTurn, m.lastPhase = msg.info.TurnSeq, msg.lastPhase
	}
	ongoing := msg.info.InFlight != nil || (msg.info.TurnSeq > 0 &&
		msg.lastPhase != messages.PhaseDone.String() && msg.lastPhase != messages.PhaseFailed.String())
	if !ongoing || m.refreshing || m.polls >= maxPolls || m.tick == nil {
		return nil
	}
	m.refreshing = true
	m.polls++
	return m.tick(refreshEvery, func(time.Time) tea.Msg { return refreshTickMsg{} })
}

// switchTo makes b the current branch and shows its conversation.
func (m *Model) switchTo(b api.Branch, text string) tea.Cmd {
	if m.turn.active {
		m.setStatus("", errors.New("a turn is streaming: wait for it, or esc to cancel it, then switch"))
		return nil
	}
	m.st.Branch, m.st.Info = b, api.BranchInfo{}
	m.lastTurn, m.lastPhase, m.polls = 0, "", 0
	m.turn = turnState{}
	m.conv.set(nil)
	m.closeScreen()
	m.setStatus(text, nil)
	return m.openBranch()
}

func (m *Model) loadNames() tea.Cmd {
	be, ctx := m.st.Backend, m.st.Ctx
	return func() tea.Msg {
		p, model, err := be.Names(ctx)
		return namesMsg{provider: p, model: model, err: err}
	}
}

func (m *Model) loadSession() tea.Cmd {
	be, ctx, id := m.st.Backend, m.st.Ctx, m.st.Branch.Session
	return func() tea.Msg {
		s, err := be.Session(ctx, id)
		if err != nil {
			return sessionMsg{session: id, err: err}
		}
		return sessionMsg{session: id, title: s.Title}
	}
}

// refresh re-reads the branch's live state and its newest turn's phase.
func (m *Model) refresh() tea.Cmd {
	be, ctx, id := m.st.Backend, m.st.Ctx, m.st.Branch.ID
	return func() tea.Msg {
		info, err := be.Info(ctx, id)
		if err != nil {
			return infoMsg{branch: id, err: err}
		}
		out := infoMsg{branch: id, info: info}
		if info.TurnSeq > 0 {
			row, err := be.TurnAt(ctx, id, info.TurnSeq)
			if err != nil {
				return infoMsg{branch: id, err: err}
			}
			out.lastPhase = row.Phase.String()
		}
		return out
	}
}

func (m *Model) loadHistory() tea.Cmd {
	be, ctx, id := m.st.Backend, m.st.Ctx, m.st.Branch.ID
	return func() tea.Msg {
		hist, _, err := be.History(ctx, id, messages.TurnID{}, historyPage)
		return historyMsg{branch: id, entries: hist, err: err}
	}
}

// quitCmd leaves the shell; a turn streaming goes on in the runtime.
func (m *Model) quitCmd() tea.Cmd {
	m.quit = true
	m.turn.stop()
	return tea.Quit
}
