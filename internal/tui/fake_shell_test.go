package tui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// fakeShell is the shell tests' Backend: one session with fixed ids,
// its branches, and turns whose stream the test scripts and paces.
type fakeShell struct {
	mu       sync.Mutex
	session  api.Session
	branches []api.Branch
	info     map[messages.BranchID]api.BranchInfo
	history  map[messages.BranchID][]Entry
	phases   map[turnKey]messages.TurnPhase

	// script is the updates each Submit streams, the last one Done;
	// with gate set, Submit waits for a receive on it before each one.
	script []Update
	gate   chan struct{}

	// forkArrive, when set, makes Fork send on it and then wait for a
	// receive on forkProceed before it forks (tests hold forks in flight).
	forkArrive, forkProceed chan struct{}

	submitted []string
	forks     []forkCall
	pins      []string
	commits   int
	cancels   int
	selected  []string
	cancelled chan struct{} // closed by Cancel
}

type turnKey struct {
	branch messages.BranchID
	seq    uint64
}

type forkCall struct {
	from  messages.BranchID
	at    messages.TurnID
	label string
}

// fakeTime is when everything of the fake happened.
var fakeTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeID is a fixed id: the same 16 bytes but the last, n.
func fakeID[T ~[16]byte](n byte) T {
	var id T
	id[0], id[5], id[15] = 1, 0x42, n
	id[12] = n * 7
	return id
}

func newFakeShell() *fakeShell {
	sid := fakeID[messages.SessionID](200)
	main := api.Branch{ID: fakeID[messages.BranchID](1), Session: sid, Label: "main", Created: fakeTime}
	exp := api.Branch{ID: fakeID[messages.BranchID](2), Session: sid, Parent: main.ID,
		ForkAt: fakeID[messages.NodeID](1), ForkSeq: 1, Label: "experiment", Created: fakeTime}
	f := &fakeShell{
		session:  api.Session{ID: sid, Title: "demo", ActiveBranch: main.ID, Created: fakeTime},
		branches: []api.Branch{main, exp},
		info: map[messages.BranchID]api.BranchInfo{
			main.ID: {Branch: main, State: messages.StateCheckpoint{ID: fakeID[messages.StateID](3), Seq: 3},
				TurnSeq: 2, Committed: 1, Failed: 1, Pending: 1},
			exp.ID: {Branch: exp, State: messages.StateCheckpoint{ID: fakeID[messages.StateID](9), Seq: 1},
				TurnSeq: 1, Committed: 1},
		},
		history: map[messages.BranchID][]Entry{
			main.ID: {
				{Turn: fakeID[messages.TurnID](1), Depth: 1, Role: messages.RoleUser, Text: "What is ContextInfinity?"},
				{Turn: fakeID[messages.TurnID](1), Depth: 2, Role: messages.RoleAssistant, Text: "A runtime for unlimited conversations."},
				// A crash cut turn 2's reply off: its user message carries
				// what was recovered.
				{Turn: fakeID[messages.TurnID](2), Depth: 3, Role: messages.RoleUser, Text: "Tell me more.",
					Partial: ptr("It keeps a bounded working context and the full tra")},
			},
			exp.ID: {
				{Turn: fakeID[messages.TurnID](1), Depth: 1, Role: messages.RoleUser, Text: "What is ContextInfinity?"},
				{Turn: fakeID[messages.TurnID](9), Depth: 2, Role: messages.RoleAssistant, Text: "An experiment."},
			},
		},
		phases: map[turnKey]messages.TurnPhase{
			{main.ID, 1}: messages.PhaseDone, {main.ID, 2}: messages.PhaseFailed, {exp.ID, 1}: messages.PhaseDone,
		},
		cancelled: make(chan struct{}),
	}
	f.script = []Update{
		{Delta: "Hello", TextDisplayed: 5},
		{Delta: ", world", TextDisplayed: 12, TextDurable: 5},
		{Done: true, Phase: messages.PhaseResponseFinalized, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted},
			TextDisplayed: 12, TextDurable: 12},
	}
	return f
}

func ptr[T any](v T) *T { return &v }

func (f *fakeShell) Names(context.Context) (string, string, error) { return "local", "echo-1", nil }

func (f *fakeShell) Session(_ context.Context, id messages.SessionID) (api.Session, error) {
	if id != f.session.ID {
		return api.Session{}, errors.New("fakeShell: no such session")
	}
	return f.session, nil
}

func (f *fakeShell) LatestSession(context.Context) (api.Session, bool, error) {
	return f.session, true, nil
}

func (f *fakeShell) CreateSession(context.Context, string) (api.Branch, error) {
	return api.Branch{}, errors.New("fakeShell: CreateSession")
}

func (f *fakeShell) BranchRow(_ context.Context, id messages.BranchID) (api.Branch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.branches {
		if b.ID == id {
			return b, nil
		}
	}
	return api.Branch{}, persistence.ErrNotFound
}

func (f *fakeShell) Branches(context.Context, messages.SessionID) ([]api.Branch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.Branch(nil), f.branches...), nil
}

func (f *fakeShell) Info(_ context.Context, b messages.BranchID) (api.BranchInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, ok := f.info[b]
	if !ok {
		return info, persistence.ErrNotFound
	}
	return info, nil
}

func (f *fakeShell) Submit(ctx context.Context, b messages.BranchID, text string, show func(Update)) (uint64, Update, error) {
	f.mu.Lock()
	f.submitted = append(f.submitted, text)
	info := f.info[b]
	info.TurnSeq++
	seq := info.TurnSeq
	f.info[b] = info
	f.phases[turnKey{b, seq}] = messages.PhaseResponding
	script, gate := f.script, f.gate
	f.mu.Unlock()
	var last Update
	for _, u := range script {
		if gate != nil {
			select {
			case <-gate:
			case <-f.cancelled:
				u = Update{Done: true, Phase: messages.PhaseFailed, TextDisplayed: last.TextDisplayed,
					TextDurable: last.TextDisplayed, Outcome: messages.StepOutcome{Kind: messages.OutcomeCancelled,
						Code: "cancelled", Message: "cancelled by the client"}}
			case <-ctx.Done():
				return seq, last, ctx.Err()
			}
		}
		show(u)
		last = u
		if u.Done {
			break
		}
	}
	f.mu.Lock()
	f.phases[turnKey{b, seq}] = last.Phase
	if last.Phase == messages.PhaseResponseFinalized {
		info := f.info[b]
		info.Pending++
		f.info[b] = info
	}
	f.mu.Unlock()
	return seq, last, nil
}

func (f *fakeShell) Cancel(context.Context, messages.BranchID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels++
	if f.cancels == 1 {
		close(f.cancelled)
	}
	return nil
}

func (f *fakeShell) History(_ context.Context, b messages.BranchID, _ messages.TurnID, n int) ([]Entry, messages.TurnID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.history[b]
	if len(h) > n {
		h = h[len(h)-n:]
	}
	return h, messages.TurnID{}, nil
}

func (f *fakeShell) TurnAt(_ context.Context, b messages.BranchID, seq uint64) (api.Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.phases[turnKey{b, seq}]
	if !ok {
		return api.Turn{}, persistence.ErrNotFound
	}
	return api.Turn{Branch: b, Seq: seq, ID: fakeID[messages.TurnID](byte(seq)), Phase: p, Updated: fakeTime}, nil
}

func (f *fakeShell) Turn(context.Context, messages.BranchID, messages.TurnID) (api.TurnInfo, error) {
	return api.TurnInfo{}, errors.New("fakeShell: Turn")
}

func (f *fakeShell) Pending(context.Context, messages.BranchID) ([]messages.PendingTurn, error) {
	return nil, nil
}

func (f *fakeShell) CommitPending(_ context.Context, b messages.BranchID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits++
	info := f.info[b]
	info.Pending = 0
	info.State.Seq++
	info.State.ID = fakeID[messages.StateID](byte(40 + info.State.Seq))
	f.info[b] = info
	return nil
}

func (f *fakeShell) Fork(_ context.Context, b messages.BranchID, at messages.NodeID, label string) (api.Branch, error) {
	f.mu.Lock()
	arrive, proceed := f.forkArrive, f.forkProceed
	f.mu.Unlock()
	if arrive != nil {
		arrive <- struct{}{}
		<-proceed
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forks = append(f.forks, forkCall{from: b, at: at, label: label})
	nb := api.Branch{ID: fakeID[messages.BranchID](byte(10 + len(f.branches))), Session: f.session.ID,
		Parent: b, ForkAt: at, Label: label, Created: fakeTime}
	f.branches = append(f.branches, nb)
	f.info[nb.ID] = api.BranchInfo{Branch: nb, State: f.info[b].State}
	return nb, nil
}

func (f *fakeShell) DeleteBranch(context.Context, messages.BranchID) (api.Deleted, error) {
	return api.Deleted{}, errors.New("fakeShell: DeleteBranch")
}

func (f *fakeShell) Pin(_ context.Context, _ messages.BranchID, fact string) (messages.PinnedFact, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pins = append(f.pins, fact)
	return messages.PinnedFact{ID: uint64(len(f.pins)), Fact: fact, At: fakeTime}, nil
}

func (f *fakeShell) Pins(context.Context, messages.BranchID) ([]messages.PinnedFact, error) {
	return nil, nil
}
func (f *fakeShell) Unpin(context.Context, messages.BranchID, uint64) error { return nil }
func (f *fakeShell) EditPin(context.Context, messages.BranchID, uint64, string) (messages.PinnedFact, error) {
	return messages.PinnedFact{}, errors.New("fakeShell: EditPin")
}

func (f *fakeShell) ModelNames(context.Context) ([]string, error) {
	return []string{"echo-1", "gpt"}, nil
}

func (f *fakeShell) SelectModel(_ context.Context, b messages.BranchID, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "" && name != "gpt" && name != "echo-1" {
		return fmt.Errorf("no model %q (models: echo-1, gpt)", name)
	}
	f.selected = append(f.selected, name)
	info := f.info[b]
	info.Model = name
	f.info[b] = info
	return nil
}

func (f *fakeShell) Search(context.Context, messages.BranchID, string, int) ([]api.Hit, error) {
	return nil, nil
}

func (f *fakeShell) Context(context.Context, messages.BranchID, uint64, string) (api.ContextDebug, error) {
	return api.ContextDebug{}, errors.New("fakeShell: Context")
}

func (f *fakeShell) Recovered(context.Context, messages.BranchID, messages.TurnID) (string, bool, error) {
	return "", false, nil
}
