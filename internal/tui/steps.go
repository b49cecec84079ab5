package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// StepsScreen shows a turn's provider steps (provider and model, outcome,
// tokens, journal bytes, interrupted or not), its tool calls and their
// outputs, and the output recovered for a step a crash cut off, labeled
// incomplete. Left and right move to the previous and next turn.
type StepsScreen struct {
	at   uint64 // the turn to open at (At); 0: the branch's last
	seq  uint64 // the turn shown
	last uint64 // the branch's last turn when it was loaded
	turn *stepsTurn
	note string
	page scrollPage
	gen  int
}

// stepsTurn is what the screen shows of a turn.
type stepsTurn struct {
	info        api.TurnInfo
	user, reply *Entry
	histErr     error // the history could not be read: no tool calls
}

// NewStepsScreen returns the steps screen; At chooses the turn it opens
// at (by default the branch's last).
func NewStepsScreen() *StepsScreen {
	return &StepsScreen{page: newScrollPage()}
}

// At makes the next Open show the branch's turn number seq (0: its last
// turn).
func (t *StepsScreen) At(seq uint64) { t.at = seq }

// stepsMsg is the result of loading a turn.
type stepsMsg struct {
	gen  int
	seq  uint64
	turn stepsTurn
	err  error
}

// OpenArgs implements ArgsScreen: /steps N opens on turn N.
func (t *StepsScreen) OpenArgs(s *State, args string) tea.Cmd {
	seq, err := strconv.ParseUint(strings.TrimSpace(args), 10, 64)
	if err != nil || seq == 0 {
		return statusErr("/steps", fmt.Errorf("%q is not a turn number (1 to %d; see /history)", args, s.Info.TurnSeq))
	}
	t.At(seq)
	return t.Open(s)
}

// Name implements Screen.
func (t *StepsScreen) Name() string { return "Steps" }

// Open implements Screen: it loads the turn At chose, or the branch's
// last.
func (t *StepsScreen) Open(s *State) tea.Cmd {
	seq := t.at
	t.at = 0
	if seq == 0 {
		seq = s.Info.TurnSeq
	}
	return t.load(s, seq)
}

func (t *StepsScreen) load(s *State, seq uint64) tea.Cmd {
	t.gen++
	t.seq, t.last = seq, max(s.Info.TurnSeq, seq)
	if seq == 0 {
		t.turn, t.note = nil, "No turns yet on this branch."
		return nil
	}
	t.note = fmt.Sprintf("Loading turn %d…", seq)
	gen, branch, last := t.gen, s.Branch.ID, t.last
	return func() tea.Msg {
		turn, err := loadTurn(s.Ctx, s.Backend, branch, seq, last)
		return stepsMsg{gen: gen, seq: seq, turn: turn, err: err}
	}
}

// loadTurn reads turn number seq of branch (whose last turn is last):
// its row and steps, then its messages from the history page that ends
// with it.
func loadTurn(ctx context.Context, b Backend, branch messages.BranchID, seq, last uint64) (stepsTurn, error) {
	row, err := b.TurnAt(ctx, branch, seq)
	if err != nil {
		return stepsTurn{}, err
	}
	info, err := b.Turn(ctx, branch, row.ID)
	if err != nil {
		return stepsTurn{}, err
	}
	out := stepsTurn{info: info}
	// The history before the next turn's message ends with this turn.
	var before messages.NodeID
	if seq < last {
		if next, err := b.TurnAt(ctx, branch, seq+1); err == nil {
			before = next.ID
		}
	}
	want := map[messages.TurnID]bool{row.ID: true}
	found, err := findEntries(ctx, b, branch, before, want)
	if err != nil {
		out.histErr = err
		return out, nil
	}
	if te := found[row.ID]; te != nil {
		out.user, out.reply = te.user, te.reply
	}
	return out, nil
}

// Update implements Screen.
func (t *StepsScreen) Update(s *State, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case stepsMsg:
		if msg.gen != t.gen {
			return nil
		}
		if msg.err != nil {
			t.turn = nil
			t.note = fmt.Sprintf("Cannot read turn %d: %v", msg.seq, msg.err)
			return statusErr(fmt.Sprintf("turn %d", msg.seq), msg.err)
		}
		turn, seq, last := msg.turn, msg.seq, t.last
		t.turn, t.note = &turn, ""
		t.page.set(func(width int) []string { return turn.lines(seq, last, width) })
		return nil
	case tea.KeyPressMsg:
		switch msg.String() {
		case "left", "h":
			if t.seq > 1 {
				return t.load(s, t.seq-1)
			}
			return nil
		case "right", "l":
			if t.seq < max(t.last, s.Info.TurnSeq) {
				return t.load(s, t.seq+1)
			}
			return nil
		case "r":
			return t.load(s, t.seq)
		}
		return t.page.update(msg)
	}
	return nil
}

// View implements Screen.
func (t *StepsScreen) View(s *State, width, height int) string {
	if t.turn == nil {
		return fitScreen(appendWrapped(nil, t.note, width), width, height)
	}
	return fitScreen([]string{t.page.view(width, max(height-1, 1)), t.page.position()}, width, height)
}

// Keys implements Screen.
func (t *StepsScreen) Keys() []key.Binding {
	return []key.Binding{
		key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "previous/next turn")),
		key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "scroll")),
		key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))}
}

// lines renders turn seq of a branch whose last turn is last, for
// width cells.
func (st *stepsTurn) lines(seq, last uint64, width int) []string {
	p := pageLines{width: width}
	in := st.info
	head := fmt.Sprintf("Turn %d of %d · %s · %s", seq, last, idTail(in.ID), in.Phase)
	if in.Outcome != "" && in.Outcome != in.Phase.String() {
		head += " · " + in.Outcome
	}
	p.text(head)
	if in.Code != "" || in.Reason != "" {
		p.text("Failed: " + strings.TrimPrefix(in.Code+": "+in.Reason, ": "))
	}
	if st.user != nil {
		p.row("User: " + firstLine(st.user.Text))
	}
	p.text("")
	p.text(fmt.Sprintf("Provider steps (%d):", len(in.Steps)))
	const rowFormat = "%2s %-18s %-12s %6s %5s  %-15s %s"
	if len(in.Steps) > 0 {
		p.row(fmt.Sprintf(rowFormat, "#", "provider/model", "outcome", "in", "out", "durable/shown", ""))
	}
	var why []string
	for _, sp := range in.Steps {
		flag := ""
		if sp.Interrupted {
			flag = "INTERRUPTED"
		}
		p.row(fmt.Sprintf(rowFormat, fmt.Sprint(sp.Index), clip(sp.Provider+"/"+sp.Model, 18),
			clip(outcomeKind(sp.Outcome), 12), tokens(sp.InputTokens), tokens(sp.OutputTokens),
			byteSize(int(sp.Durable))+"/"+byteSize(int(sp.Displayed)), flag))
		if d := outcomeDetail(sp.Outcome); d != "" {
			why = append(why, fmt.Sprintf("Step %d %s: %s", sp.Index, outcomeKind(sp.Outcome), d))
		}
	}
	for _, w := range why {
		p.text(w)
	}

	p.text("")
	p.text("Tool calls:")
	switch {
	case st.histErr != nil:
		p.text("  (cannot read the history: " + st.histErr.Error() + ")")
	case st.reply == nil && in.Reply.IsZero():
		p.text("  none (the turn has no reply)")
	case st.reply == nil:
		p.text("  (the reply is not in the history)")
	default:
		calls := itemLines(st.reply.Items)
		if len(calls) == 0 {
			p.text("  none")
		}
		for _, c := range calls {
			p.text("  " + c)
		}
	}
	if st.reply != nil {
		p.text("")
		p.text("Reply:")
		p.text(st.reply.Text)
	}
	partial, what := "", ""
	switch {
	case in.Partial != nil:
		partial = in.Partial.Text
		what = fmt.Sprintf(" of step %s (%s durable of %s shown)", idTail(in.Partial.Step),
			byteSize(int(in.Partial.Durable)), byteSize(int(in.Partial.Displayed)))
	case st.user != nil && st.user.Partial != nil:
		partial = *st.user.Partial
	}
	if partial != "" || in.Partial != nil {
		p.text("")
		p.text("Recovered output" + what + ", INCOMPLETE (a crash cut it off):")
		p.text(partial)
	}
	return p.out
}

// outcomeKind is a step outcome's kind, or - when the step has none.
func outcomeKind(o messages.StepOutcome) string {
	if o.Kind == 0 {
		return "-"
	}
	return o.Kind.String()
}

// outcomeDetail is why a step ended as it did, if it says.
func outcomeDetail(o messages.StepOutcome) string {
	var parts []string
	for _, p := range []string{o.Reason, o.Code, o.Message} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ": ")
}

// tokens is a token count, or - when the provider reported none.
func tokens(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// clip cuts s to n cells.
func clip(s string, n int) string { return ansi.Truncate(s, n, "…") }
