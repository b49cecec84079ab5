package tui

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// fakeSession is the Backend of the history, branches and pins screens'
// tests: one session, its branches, one transcript (every branch's
// history is it) and the current branch's pins, with fixed ids and
// times. It records the calls that change something.
type fakeSession struct {
	session  api.Session
	branches []api.Branch
	msgs     []Entry
	pins     []messages.PinnedFact
	maxPins  int
	maxBytes int
	nextPin  uint64
	forks    int

	historyErr error
	forkErr    error

	calls []string // "fork BRANCH AT LABEL", "delete BRANCH", "pin FACT", …
}

var errFakeSession = errors.New("fakeSession: not used by these screens")

// fakeSessionTime is the creation time of everything in fakeSession.
var fakeSessionTime = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

// sessionID makes an id of its first and last characters (Crockford base32),
// zeros between.
func sessionID[T ~[16]byte](head, tail string) T {
	id, err := messages.ParseID[T](head + strings.Repeat("0", 26-len(head)-len(tail)) + tail)
	if err != nil {
		panic(err)
	}
	return id
}

// newFakeSession returns a session whose branch tree is
//
//	main
//	├─ fix-typo (@2)
//	│  └─ fix-typo-2 (@3)
//	└─ experiment (@4)
//	   ├─ exp-a (@5)
//	   └─ exp-b (@6)  (its id starts as exp-a's and ends with exp-a's last 8)
//
// and a transcript of n exchanges (2n messages).
func newFakeSession(n int) *fakeSession {
	f := &fakeSession{maxPins: 4, maxBytes: 64, nextPin: 4}
	f.session = api.Session{ID: sessionID[messages.SessionID]("01JBS", "SESS10N1"), Title: "chat", Created: fakeSessionTime}
	ids := map[string]messages.BranchID{
		"main":       sessionID[messages.BranchID]("01JBMA", "MA1NMA1N"),
		"experiment": sessionID[messages.BranchID]("01JBEX", "EXPERMNT"),
		"fix-typo":   sessionID[messages.BranchID]("01JBF1", "F1XTYP00"),
		"exp-a":      sessionID[messages.BranchID]("01JBEA", "1SHARED01"),
		"exp-b":      sessionID[messages.BranchID]("01JBEA", "2SHARED01"),
		"fix-typo-2": sessionID[messages.BranchID]("01JBF2", "F1XTYP02"),
	}
	mk := func(label, parent string, seq uint64) api.Branch {
		b := api.Branch{ID: ids[label], Session: f.session.ID, Label: label, ForkSeq: seq, Created: fakeSessionTime}
		if parent != "" {
			b.Parent = ids[parent]
			b.ForkAt = sessionID[messages.NodeID](fmt.Sprintf("01JT%02d", seq), "")
		}
		return b
	}
	f.branches = []api.Branch{
		mk("main", "", 0),
		mk("experiment", "main", 4),
		mk("fix-typo", "main", 2),
		mk("exp-a", "experiment", 5),
		mk("exp-b", "experiment", 6),
		mk("fix-typo-2", "fix-typo", 3),
	}
	f.session.ActiveBranch = f.branches[1].ID
	for i := 1; i <= n; i++ {
		u := Entry{Turn: sessionID[messages.TurnID](fmt.Sprintf("01JT%02d", i), ""), Depth: uint64(2*i - 1), Role: messages.RoleUser,
			Text: fmt.Sprintf("Question %d: what does step %d of the plan need?", i, i)}
		a := Entry{Turn: sessionID[messages.TurnID](fmt.Sprintf("01JR%02d", i), ""), Depth: uint64(2 * i), Role: messages.RoleAssistant,
			Text: fmt.Sprintf("Answer %d. Step %d needs the config file and a running server.", i, i)}
		f.msgs = append(f.msgs, u, a)
	}
	f.pins = []messages.PinnedFact{
		{ID: 1, Fact: "The user's name is Ada.", Seq: 1, At: fakeSessionTime},
		{ID: 3, Fact: "Deploys go to eu-west-1 only; never touch the us-east-1 stack without asking first.", Seq: 4, At: fakeSessionTime},
	}
	return f
}

// entry returns the fake's message at depth d.
func (f *fakeSession) entry(d uint64) *Entry { return &f.msgs[d-1] }

func (f *fakeSession) branch(label string) api.Branch {
	for _, b := range f.branches {
		if b.Label == label {
			return b
		}
	}
	panic("fakeSession: no branch " + label)
}

func (f *fakeSession) History(_ context.Context, _ messages.BranchID, before messages.NodeID, n int) ([]Entry, messages.NodeID, error) {
	f.calls = append(f.calls, fmt.Sprintf("history %s %d", before, n))
	if f.historyErr != nil {
		return nil, messages.TurnID{}, f.historyErr
	}
	end := len(f.msgs)
	if !before.IsZero() {
		end = slices.IndexFunc(f.msgs, func(e Entry) bool { return e.Turn == before })
		if end < 0 {
			return nil, messages.NodeID{}, fmt.Errorf("fakeSession: no message %s", before)
		}
	}
	start := max(0, end-n)
	var older messages.TurnID
	if start > 0 {
		older = f.msgs[start].Turn
	}
	return slices.Clone(f.msgs[start:end]), older, nil
}

func (f *fakeSession) Turn(_ context.Context, _ messages.BranchID, turn messages.TurnID) (api.TurnInfo, error) {
	seq := uint64(0)
	for _, e := range f.msgs {
		if e.Role == messages.RoleUser {
			seq++
			if e.Turn == turn {
				return api.TurnInfo{Turn: api.Turn{Seq: seq, ID: turn}}, nil
			}
		}
	}
	return api.TurnInfo{}, fmt.Errorf("fakeSession: %s is no turn", turn)
}

func (f *fakeSession) Fork(_ context.Context, branch messages.BranchID, at messages.NodeID, label string) (api.Branch, error) {
	f.calls = append(f.calls, fmt.Sprintf("fork %s %s %s", branch, at, label))
	if f.forkErr != nil {
		return api.Branch{}, f.forkErr
	}
	f.forks++
	row := api.Branch{ID: sessionID[messages.BranchID]("01JBN", fmt.Sprintf("F0RK%04d", f.forks)), Session: f.session.ID,
		Parent: branch, ForkAt: at, ForkSeq: 9, Label: label, Created: fakeSessionTime}
	f.branches = append(f.branches, row)
	return row, nil
}

func (f *fakeSession) Branches(_ context.Context, session messages.SessionID) ([]api.Branch, error) {
	if session != f.session.ID {
		return nil, fmt.Errorf("fakeSession: no session %s", session)
	}
	return slices.Clone(f.branches), nil
}

func (f *fakeSession) Session(_ context.Context, id messages.SessionID) (api.Session, error) {
	if id != f.session.ID {
		return api.Session{}, fmt.Errorf("fakeSession: no session %s", id)
	}
	return f.session, nil
}

func (f *fakeSession) LatestSession(context.Context) (api.Session, bool, error) {
	return f.session, true, nil
}

func (f *fakeSession) DeleteBranch(_ context.Context, branch messages.BranchID) (api.Deleted, error) {
	f.calls = append(f.calls, "delete "+branch.String())
	i := slices.IndexFunc(f.branches, func(b api.Branch) bool { return b.ID == branch })
	if i < 0 {
		return api.Deleted{}, fmt.Errorf("fakeSession: no branch %s", branch)
	}
	if f.branches[i].Parent.IsZero() {
		return api.Deleted{}, fmt.Errorf("%w: delete branch %s: it is the first branch of session %s: delete the session",
			actors.ErrFirstBranch, branch, f.session.ID)
	}
	var forks []string
	for _, b := range f.branches {
		if b.Parent == branch {
			forks = append(forks, b.ID.String())
		}
	}
	if len(forks) > 0 {
		return api.Deleted{}, fmt.Errorf("%w: delete branch %s: it has forks (%s), which share its turns: delete them first",
			actors.ErrHasForks, branch, strings.Join(forks, ", "))
	}
	f.branches = slices.Delete(f.branches, i, i+1)
	return api.Deleted{Session: f.session.ID, Branches: []messages.BranchID{branch}, Nodes: 4, Turns: 2}, nil
}

func (f *fakeSession) Pins(context.Context, messages.BranchID) ([]messages.PinnedFact, error) {
	return slices.Clone(f.pins), nil
}

// checkPin is the runtime's rule (core.Pin) in small: a size and a count.
func (f *fakeSession) checkPin(fact string) error {
	if fact == "" {
		return errors.New("core: invalid: fact: empty")
	}
	if len(fact) > f.maxBytes {
		return fmt.Errorf("core: invalid: fact: %d bytes, limit %d (context.max_pin_bytes)", len(fact), f.maxBytes)
	}
	return nil
}

func (f *fakeSession) Pin(_ context.Context, _ messages.BranchID, fact string) (messages.PinnedFact, error) {
	f.calls = append(f.calls, "pin "+fact)
	if err := f.checkPin(fact); err != nil {
		return messages.PinnedFact{}, err
	}
	if len(f.pins) >= f.maxPins {
		return messages.PinnedFact{}, fmt.Errorf("core: invalid: fact: %d facts pinned, limit %d (context.max_pins)", len(f.pins), f.maxPins)
	}
	p := messages.PinnedFact{ID: f.nextPin, Fact: fact, Seq: 9, At: fakeSessionTime}
	f.nextPin++
	f.pins = append(f.pins, p)
	return p, nil
}

func (f *fakeSession) EditPin(_ context.Context, _ messages.BranchID, id uint64, fact string) (messages.PinnedFact, error) {
	f.calls = append(f.calls, fmt.Sprintf("editpin %d %s", id, fact))
	if err := f.checkPin(fact); err != nil {
		return messages.PinnedFact{}, err
	}
	for i := range f.pins {
		if f.pins[i].ID == id {
			f.pins[i].Fact = fact
			return f.pins[i], nil
		}
	}
	return messages.PinnedFact{}, fmt.Errorf("core: not found: no pinned fact #%d", id)
}

func (f *fakeSession) Unpin(_ context.Context, _ messages.BranchID, id uint64) error {
	f.calls = append(f.calls, fmt.Sprintf("unpin %d", id))
	i := slices.IndexFunc(f.pins, func(p messages.PinnedFact) bool { return p.ID == id })
	if i < 0 {
		return fmt.Errorf("core: not found: no pinned fact #%d", id)
	}
	f.pins = slices.Delete(f.pins, i, i+1)
	return nil
}

// The rest of Backend: not used by these screens.

func (f *fakeSession) Names(context.Context) (string, string, error) { return "", "", errFakeSession }
func (f *fakeSession) CreateSession(context.Context, string) (api.Branch, error) {
	return api.Branch{}, errFakeSession
}
func (f *fakeSession) BranchRow(context.Context, messages.BranchID) (api.Branch, error) {
	return api.Branch{}, errFakeSession
}
func (f *fakeSession) Info(context.Context, messages.BranchID) (api.BranchInfo, error) {
	return api.BranchInfo{}, errFakeSession
}
func (f *fakeSession) Submit(context.Context, messages.BranchID, string, func(Update)) (uint64, Update, error) {
	return 0, Update{}, errFakeSession
}
func (f *fakeSession) Cancel(context.Context, messages.BranchID) error { return errFakeSession }
func (f *fakeSession) TurnAt(context.Context, messages.BranchID, uint64) (api.Turn, error) {
	return api.Turn{}, errFakeSession
}
func (f *fakeSession) Pending(context.Context, messages.BranchID) ([]messages.PendingTurn, error) {
	return nil, errFakeSession
}
func (f *fakeSession) CommitPending(context.Context, messages.BranchID) error { return errFakeSession }
func (f *fakeSession) ModelNames(context.Context) ([]string, error)           { return nil, errFakeSession }
func (f *fakeSession) SelectModel(context.Context, messages.BranchID, string) error {
	return errFakeSession
}
func (f *fakeSession) Search(context.Context, messages.BranchID, string, int) ([]api.Hit, error) {
	return nil, errFakeSession
}
func (f *fakeSession) Context(context.Context, messages.BranchID, uint64, string) (api.ContextDebug, error) {
	return api.ContextDebug{}, errFakeSession
}
func (f *fakeSession) Recovered(context.Context, messages.BranchID, messages.TurnID) (string, bool, error) {
	return "", false, errFakeSession
}

var _ Backend = (*fakeSession)(nil)

// updateSession rewrites the golden screens of these tests (a flag name of
// their own: the package's other tests may have an -update).
var updateSession = flag.Bool("update-session", false, "rewrite testdata/session/*.golden")

// sessionRun drives a screen as the shell would, without a terminal: it
// passes messages to Update and runs the commands it returns at once,
// feeding the screen's own results back and keeping the messages meant
// for the shell.
type sessionRun struct {
	t     *testing.T
	f     *fakeSession
	st    *State
	scr   Screen
	shell []tea.Msg // StatusMsg, SwitchMsg, RefreshMsg, CloseMsg, in order
}

// newSessionRun opens scr on fake's branch labeled branch.
func newSessionRun(t *testing.T, f *fakeSession, branch string, scr Screen) *sessionRun {
	t.Helper()
	r := &sessionRun{t: t, f: f, scr: scr, st: &State{Ctx: t.Context(), Backend: f, Branch: f.branch(branch), Width: 80, Height: 24}}
	r.run(scr.Open(r.st))
	return r
}

func (r *sessionRun) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	r.deliver(cmd())
}

func (r *sessionRun) deliver(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			r.run(c)
		}
	case StatusMsg, SwitchMsg, RefreshMsg, CloseMsg:
		r.shell = append(r.shell, msg)
	default:
		r.send(msg)
	}
}

// send passes msg to the screen's Update.
func (r *sessionRun) send(msg tea.Msg) { r.run(r.scr.Update(r.st, msg)) }

// press sends the keys: names ("enter", "esc", "up", "pgup", …) or a
// single character each.
func (r *sessionRun) press(keys ...string) {
	for _, k := range keys {
		r.send(sessionKey(k))
	}
}

// typeText sends text a character at a time.
func (r *sessionRun) typeText(text string) {
	for _, c := range text {
		r.send(tea.KeyPressMsg{Code: c, Text: string(c)})
	}
}

// takeShell returns the messages for the shell since the last call.
func (r *sessionRun) takeShell() []tea.Msg {
	out := r.shell
	r.shell = nil
	return out
}

// view renders the screen at w×h, checks that it fills exactly h lines
// of at most w cells, and returns it without colours and trailing
// spaces.
func (r *sessionRun) view(w, h int) string {
	r.t.Helper()
	v := r.scr.View(r.st, w, h)
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		r.t.Errorf("%s.View(%d, %d) has %d lines, want %d", r.scr.Name(), w, h, len(lines), h)
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			r.t.Errorf("%s.View(%d, %d): line %d is %d cells wide: %q", r.scr.Name(), w, h, i+1, n, ansi.Strip(l))
		}
		lines[i] = strings.TrimRight(ansi.Strip(l), " ")
	}
	return strings.Join(lines, "\n")
}

// golden compares the screen at w×h with testdata/session/name.golden.
func (r *sessionRun) golden(name string, w, h int) {
	r.t.Helper()
	got := r.view(w, h) + "\n"
	path := filepath.Join("testdata", "session", name+".golden")
	if *updateSession {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			r.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		r.t.Fatalf("%v (run go test -run %s -update-session to write it)", err, r.t.Name())
	}
	if got != string(want) {
		r.t.Errorf("%s: the screen differs from %s\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// sessionKey is the key press named k.
func sessionKey(k string) tea.KeyPressMsg {
	codes := map[string]rune{"enter": tea.KeyEnter, "esc": tea.KeyEscape, "up": tea.KeyUp, "down": tea.KeyDown,
		"left": tea.KeyLeft, "right": tea.KeyRight, "pgup": tea.KeyPgUp, "pgdown": tea.KeyPgDown,
		"delete": tea.KeyDelete, "backspace": tea.KeyBackspace, "home": tea.KeyHome, "end": tea.KeyEnd}
	if c, ok := codes[k]; ok {
		return tea.KeyPressMsg{Code: c}
	}
	c := []rune(k)
	if len(c) != 1 {
		panic("sessionKey: no key " + k)
	}
	return tea.KeyPressMsg{Code: c[0], Text: k}
}
