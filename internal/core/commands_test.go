package core

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Names of fixed ids for the table tests.
var (
	T1, T2, T3 = id[messages.TurnID]("T1"), id[messages.TurnID]("T2"), id[messages.TurnID]("T3")
	R1, R2     = id[messages.TurnID]("R1"), id[messages.TurnID]("R2")
	S1, S2     = id[messages.StepID]("S1"), id[messages.StepID]("S2")
	St1, St2   = id[messages.StateID]("St1"), id[messages.StateID]("St2")
	B1, B0     = id[messages.BranchID]("B1"), id[messages.BranchID]("B0")
	Se1        = id[messages.SessionID]("Se1")
)

// now is the time passed to the commands under test; local is the same
// instant elsewhere, which the commands record in UTC.
var (
	now   = t0.Add(time.Hour)
	local = now.In(time.FixedZone("CET", 3600))
)

var (
	completed = messages.StepOutcome{Kind: messages.OutcomeCompleted}
	paused    = messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "pause_turn"}
)

// Script prefixes that put a branch in a known state.
var (
	created    = []string{"create"}
	accepted   = append(created[:1:1], "submit T1")
	responding = append(accepted[:2:2], "start T1 S1")
	finalized  = append(responding[:3:3], "finalize T1 S1 R1 completed")
	committed  = append(finalized[:4:4], "commit 1 T1 epoch=0")
	indexed    = append(committed[:5:5], "index T1")
)

// decision is one command call of a table test.
type decision struct {
	setup []string // script lines run first
	call  string   // describes the call, for messages
	do    func(b *Branch) ([]messages.BranchEvent, error)
	want  []messages.BranchEvent
	err   error  // the error wanted, matched with errors.Is
	text  string // a substring of the error wanted
}

func runDecisions(t *testing.T, tests []decision) {
	t.Helper()
	for _, tc := range tests {
		s := newScript(t).run(tc.setup...)
		before := cloneBranch(&s.b)
		got, err := tc.do(&s.b)
		switch {
		case tc.err == nil && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("after %q: %s = %s, %v, want %s", tc.setup, tc.call, unname(fmtEvents(got)), err, unname(fmtEvents(tc.want)))
		case tc.err != nil && (!errors.Is(err, tc.err) || !strings.Contains(unname(err.Error()), tc.text) || got != nil):
			t.Errorf("after %q: %s = %s, %v, want error %v containing %q", tc.setup, tc.call, unname(fmtEvents(got)), err, tc.err, tc.text)
		}
		if !reflect.DeepEqual(&s.b, before) {
			t.Errorf("after %q: %s changed the branch", tc.setup, tc.call)
		}
		for _, ev := range got {
			if _, err := s.b.Apply(ev); err != nil {
				t.Errorf("after %q: %s decided %s, which does not apply: %v", tc.setup, tc.call, fmtEvents(got), err)
			}
		}
	}
}

func fmtEvents(evs []messages.BranchEvent) string {
	if evs == nil {
		return "nil"
	}
	var ss []string
	for _, ev := range evs {
		ss = append(ss, formatEvent(ev))
	}
	return "[" + strings.Join(ss, "; ") + "]"
}

func events(evs ...messages.BranchEvent) []messages.BranchEvent { return evs }

func TestCreate(t *testing.T) {
	t.Parallel()
	fresh := messages.BranchCreated{Session: Se1, Branch: B1, At: now}
	fork := messages.BranchCreated{Session: Se1, Branch: B1, Parent: B0, ForkAt: T2, Tip: R2,
		State:   messages.StateCheckpoint{ID: St1, Seq: 1, Summary: "s", Pinned: []string{"p"}},
		Pending: []messages.PendingTurn{{Turn: T2, Seq: 2, Reply: R2}}, Window: []messages.NodeID{T1, R1}, TurnSeq: 2, At: now}
	with := func(ev messages.BranchCreated, f func(*messages.BranchCreated)) messages.BranchCreated {
		ev.Pending = append([]messages.PendingTurn(nil), ev.Pending...)
		ev.Window = append([]messages.NodeID(nil), ev.Window...)
		f(&ev)
		return ev
	}
	create := func(ev messages.BranchCreated) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.Create(ev) }
	}
	tests := []decision{
		{nil, "Create(new)", create(fresh), events(fresh), nil, ""},
		{nil, "Create(new, local time)", create(with(fresh, func(e *messages.BranchCreated) { e.At = local })), events(fresh), nil, ""},
		{nil, "Create(fork)", create(fork), events(fork), nil, ""},
		{nil, "Create(empty lists)", create(with(fresh, func(e *messages.BranchCreated) {
			e.Pending, e.State.Pinned, e.Window = []messages.PendingTurn{}, []string{}, []messages.NodeID{}
		})), events(fresh), nil, ""},
		{created, "Create(again)", create(fresh), nil, ErrExists, "core: branch exists: branch B1"},
		{nil, "Create(no branch)", create(with(fresh, func(e *messages.BranchCreated) { e.Branch = messages.BranchID{} })), nil, ErrInvalid, "branch: required"},
		{nil, "Create(no session)", create(with(fresh, func(e *messages.BranchCreated) { e.Session = messages.SessionID{} })), nil, ErrInvalid, "session: required"},
		{nil, "Create(fork without fork_at)", create(with(fork, func(e *messages.BranchCreated) { e.ForkAt = messages.NodeID{} })), nil, ErrInvalid, "parent and fork_at"},
		{nil, "Create(fork_at without parent)", create(with(fork, func(e *messages.BranchCreated) { e.Parent = messages.BranchID{} })), nil, ErrInvalid, "parent and fork_at"},
		{nil, "Create(pending without turn)", create(with(fork, func(e *messages.BranchCreated) { e.Pending[0].Turn = messages.NodeID{} })), nil, ErrInvalid, "pending[0].turn: required"},
		{nil, "Create(pending without reply)", create(with(fork, func(e *messages.BranchCreated) { e.Pending[0].Reply = messages.NodeID{} })), nil, ErrInvalid, "pending[0].reply"},
		{nil, "Create(pending seq 0)", create(with(fork, func(e *messages.BranchCreated) { e.Pending[0].Seq = 0 })), nil, ErrInvalid, "pending[0].seq: 0"},
		{nil, "Create(pending past turn_seq)", create(with(fork, func(e *messages.BranchCreated) { e.TurnSeq = 1 })), nil, ErrInvalid, "after the fork point's turn_seq 1"},
		{nil, "Create(window of an odd count)", create(with(fork, func(e *messages.BranchCreated) { e.Window = e.Window[:1] })), nil, ErrInvalid, "window: 1 nodes, want pairs"},
		{nil, "Create(window too long)", create(with(fork, func(e *messages.BranchCreated) {
			e.Window = slices.Repeat(e.Window, WindowMax/2+1)
		})), nil, ErrInvalid, "window: 14 nodes, want at most 12"},
		{nil, "Create(window with a zero node)", create(with(fork, func(e *messages.BranchCreated) { e.Window[1] = messages.NodeID{} })), nil, ErrInvalid, "window[1]: required"},
		{nil, "Create(window without a tip)", create(with(fresh, func(e *messages.BranchCreated) { e.Window = []messages.NodeID{T1, R1} })), nil, ErrInvalid, "no tip"},
		{nil, "Create(pending twice)", create(with(fork, func(e *messages.BranchCreated) {
			e.Pending = append(e.Pending, messages.PendingTurn{Turn: T2, Seq: 3, Reply: R1})
			e.TurnSeq = 3
		})), nil, ErrInvalid, "pending[1].turn: T2 is listed twice"},
	}
	runDecisions(t, tests)
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	submit := func(turn messages.TurnID, at time.Time) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.Submit(turn, at) }
	}
	tests := []decision{
		{created, "Submit(T1)", submit(T1, now), events(messages.TurnAccepted{Turn: T1, Seq: 1, At: now}), nil, ""},
		{created, "Submit(T1, local time)", submit(T1, local), events(messages.TurnAccepted{Turn: T1, Seq: 1, At: now}), nil, ""},
		{finalized, "Submit(T2) with T1 pending", submit(T2, now), events(messages.TurnAccepted{Turn: T2, Seq: 2, At: now}), nil, ""},
		{committed, "Submit(T2) after a commit", submit(T2, now), events(messages.TurnAccepted{Turn: T2, Seq: 2, StateBefore: St1, At: now}), nil, ""},
		{append(committed[:5:5], "submit T2", "fail T2 x"), "Submit(T3) after a failure", submit(T3, now),
			events(messages.TurnAccepted{Turn: T3, Seq: 3, StateBefore: St1, At: now}), nil, ""},
		{nil, "Submit(T1) before Create", submit(T1, now), nil, ErrNotCreated, "core: branch not created"},
		{created, "Submit(zero)", submit(messages.TurnID{}, now), nil, ErrInvalid, "turn: required"},
		{accepted, "Submit(T2) with T1 accepted", submit(T2, now), nil, ErrBusy, "core: busy: turn T1 is accepted"},
		{responding, "Submit(T2) with T1 responding", submit(T2, now), nil, ErrBusy, "core: busy: turn T1 is responding"},
		{finalized, "Submit(T1) again", submit(T1, now), nil, ErrDuplicate, "turn T1 is accepted already"},
	}
	runDecisions(t, tests)

	s := newScript(t).run(responding...)
	_, err := s.b.Submit(T2, now)
	var busy *BusyError
	if !errors.As(err, &busy) || *busy != (BusyError{Turn: T1, Phase: messages.PhaseResponding}) {
		t.Errorf("Submit(T2) = %v, want *BusyError{T1, responding}", err)
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	start := func(turn messages.TurnID, step messages.StepID) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.Start(turn, step, local) }
	}
	tests := []decision{
		{accepted, "Start(T1, S1)", start(T1, S1), events(messages.ResponseStarted{Turn: T1, Step: S1, At: now}), nil, ""},
		{nil, "Start(T1, S1) before Create", start(T1, S1), nil, ErrNotCreated, ""},
		{accepted, "Start(zero, S1)", start(messages.TurnID{}, S1), nil, ErrInvalid, "turn: required"},
		{accepted, "Start(T2, S1)", start(T2, S1), nil, ErrInvalid, "turn T2: not tracked"},
		{accepted, "Start(T1, zero)", start(T1, messages.StepID{}), nil, ErrInvalid, "turn T1: step: required"},
		{responding, "Start(T1, S2) responding", start(T1, S2), nil, ErrInvalid, "turn T1 is responding, want accepted"},
		{finalized, "Start(T1, S2) finalized", start(T1, S2), nil, ErrInvalid, "turn T1 is response_finalized"},
	}
	runDecisions(t, tests)
}

func TestFinalize(t *testing.T) {
	t.Parallel()
	finalize := func(turn messages.TurnID, step messages.StepID, reply messages.NodeID, o messages.StepOutcome) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.Finalize(turn, step, reply, o, 10, 9, local) }
	}
	want := func(o messages.StepOutcome) []messages.BranchEvent {
		return events(messages.ResponseFinalized{Turn: T1, Step: S1, Reply: R1, Outcome: o, Displayed: 10, Durable: 9, At: now})
	}
	tests := []decision{
		{responding, "Finalize(completed)", finalize(T1, S1, R1, completed), want(completed), nil, ""},
		{responding, "Finalize(incomplete)", finalize(T1, S1, R1, messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_tokens"}),
			want(messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_tokens"}), nil, ""},
		{responding, "Finalize(paused)", finalize(T1, S1, R1, paused), want(paused), nil, ""},
		{nil, "Finalize before Create", finalize(T1, S1, R1, completed), nil, ErrNotCreated, ""},
		{responding, "Finalize(failed)", finalize(T1, S1, R1, messages.StepOutcome{Kind: messages.OutcomeFailed, Code: "x"}), nil, ErrInvalid, "outcome failed does not finalize"},
		{responding, "Finalize(cancelled)", finalize(T1, S1, R1, messages.StepOutcome{Kind: messages.OutcomeCancelled}), nil, ErrInvalid, "outcome cancelled"},
		{responding, "Finalize(zero outcome)", finalize(T1, S1, R1, messages.StepOutcome{}), nil, ErrInvalid, "outcome step outcome(0)"},
		{responding, "Finalize(other step)", finalize(T1, S2, R1, completed), nil, ErrInvalid, "step S2 is not the running step S1"},
		{responding, "Finalize(no reply)", finalize(T1, S1, messages.NodeID{}, completed), nil, ErrInvalid, "reply: required"},
		{responding, "Finalize(reply = turn)", finalize(T1, S1, T1, completed), nil, ErrInvalid, "reply: must differ"},
		{accepted, "Finalize(accepted turn)", finalize(T1, S1, R1, completed), nil, ErrInvalid, "turn T1 is accepted, want responding"},
		{finalized, "Finalize(again)", finalize(T1, S1, R1, completed), nil, ErrInvalid, "turn T1 is response_finalized, want responding"},
		{responding, "Finalize(unknown turn)", finalize(T2, S1, R1, completed), nil, ErrInvalid, "turn T2: not tracked"},
	}
	runDecisions(t, tests)
}

func TestFail(t *testing.T) {
	t.Parallel()
	fail := func(turn messages.TurnID, reason string) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) {
			return b.Fail(turn, messages.FailProvider, reason, local)
		}
	}
	tests := []decision{
		{accepted, "Fail(accepted)", fail(T1, "context: too large"), events(messages.TurnFailed{Turn: T1, Code: messages.FailProvider, Reason: "context: too large", At: now}), nil, ""},
		{responding, "Fail(responding)", fail(T1, "provider: 529"), events(messages.TurnFailed{Turn: T1, Step: S1, Code: messages.FailProvider, Reason: "provider: 529", At: now}), nil, ""},
		{nil, "Fail before Create", fail(T1, "x"), nil, ErrNotCreated, ""},
		{responding, "Fail(no reason)", fail(T1, ""), nil, ErrInvalid, "turn T1: reason: required"},
		{responding, "Fail(zero)", fail(messages.TurnID{}, "x"), nil, ErrInvalid, "turn: required"},
		{responding, "Fail(unknown)", fail(T2, "x"), nil, ErrInvalid, "turn T2: not tracked"},
		{finalized, "Fail(finalized)", fail(T1, "x"), nil, ErrInvalid, "turn T1 is response_finalized: only a turn in flight can fail"},
		{committed, "Fail(committed)", fail(T1, "x"), nil, ErrInvalid, "turn T1 is state_committed"},
		{append(responding[:3:3], "fail T1 x"), "Fail(failed)", fail(T1, "x"), nil, ErrInvalid, "turn T1: not tracked"},
	}
	runDecisions(t, tests)
}

func TestCommit(t *testing.T) {
	t.Parallel()
	st1 := messages.StateCheckpoint{ID: St1, Seq: 1, Summary: "s1"}
	commit := func(state messages.StateCheckpoint, epoch uint64, turns ...messages.TurnID) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.Commit(state, turns, epoch, local) }
	}
	two := append(finalized[:4:4], "submit T2", "start T2 S2", "finalize T2 S2 R2 completed")
	pinned := append(finalized[:4:4], `pin "p"`)
	tests := []decision{
		{finalized, "Commit(St1, [T1], 0)", commit(st1, 0, T1), events(messages.StateCommitted{State: st1, Turns: []messages.TurnID{T1}, Epoch: 0, At: now}), nil, ""},
		{two, "Commit(St1, [T1], 0) of two", commit(st1, 0, T1), events(messages.StateCommitted{State: st1, Turns: []messages.TurnID{T1}, At: now}), nil, ""},
		{two, "Commit(St1, [T1 T2], 0)", commit(st1, 0, T1, T2), events(messages.StateCommitted{State: st1, Turns: []messages.TurnID{T1, T2}, At: now}), nil, ""},
		{pinned, "Commit(St1+pin, [T1], 1)", commit(messages.StateCheckpoint{ID: St1, Seq: 1, Pinned: []string{"p"}}, 1, T1),
			events(messages.StateCommitted{State: messages.StateCheckpoint{ID: St1, Seq: 1, Pinned: []string{"p"}}, Turns: []messages.TurnID{T1}, Epoch: 1, At: now}), nil, ""},
		{nil, "Commit before Create", commit(st1, 0, T1), nil, ErrNotCreated, ""},
		{pinned, "Commit(St1, [T1], 0) after a pin", commit(st1, 0, T1), nil, ErrStaleEpoch, "summary computed for epoch 0, the branch is at epoch 1"},
		{finalized, "Commit(St1, [T1], 1) from the future", commit(st1, 1, T1), nil, ErrStaleEpoch, ""},
		{committed, "Commit(St1, [T1], 0) again", commit(st1, 0, T1), nil, ErrDuplicate, "state_seq 1 is committed already (head is 1)"},
		{committed, "Commit(St1, [T1], 1) again", commit(st1, 1, T1), nil, ErrDuplicate, ""},
		{finalized, "Commit(seq 2)", commit(messages.StateCheckpoint{ID: St1, Seq: 2}, 0, T1), nil, ErrInvalid, "state.seq: 2, want 1"},
		{finalized, "Commit(seq 0)", commit(messages.StateCheckpoint{ID: St1}, 0, T1), nil, ErrInvalid, "state.seq: 0, want 1"},
		{finalized, "Commit(no state id)", commit(messages.StateCheckpoint{Seq: 1}, 0, T1), nil, ErrInvalid, "state.id: required"},
		{pinned, "Commit(pins dropped)", commit(st1, 1, T1), nil, ErrInvalid, `state.pinned: [], want the head's pinned facts ["p"]`},
		{finalized, "Commit(no turns)", commit(st1, 0), nil, ErrInvalid, "turns: 0 turns, want 1 to 1"},
		{created, "Commit(nothing pending)", commit(st1, 0, T1), nil, ErrInvalid, "turns: 1 turns, want 1 to 0"},
		{responding, "Commit(turn in flight)", commit(st1, 0, T1), nil, ErrInvalid, "want 1 to 0"},
		{two, "Commit([T2])", commit(st1, 0, T2), nil, ErrInvalid, "turns[0]: T2, want T1"},
		{two, "Commit([T2 T1])", commit(st1, 0, T2, T1), nil, ErrInvalid, "turns[0]: T2, want T1"},
		{two, "Commit([T1 T1])", commit(st1, 0, T1, T1), nil, ErrInvalid, "turns[1]: T1, want T2"},
	}
	runDecisions(t, tests)
}

func TestRecord(t *testing.T) {
	t.Parallel()
	record := func(turn messages.TurnID, reply messages.NodeID) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.Record(turn, reply, local) }
	}
	tests := []decision{
		{created, "Record(T1, R1)", record(T1, R1), events(messages.TurnRecorded{Turn: T1, Seq: 1, Reply: R1, At: now}), nil, ""},
		{committed, "Record(T2, R2) after a turn", record(T2, R2), events(messages.TurnRecorded{Turn: T2, Seq: 2, Reply: R2, At: now}), nil, ""},
		{responding, "Record while a turn responds", record(T2, R2), nil, ErrBusy, ""},
		{committed, "Record(T1) again", record(T1, R2), nil, ErrDuplicate, "turn T1 is accepted already"},
		{created, "Record(zero turn)", record(messages.NodeID{}, R1), nil, ErrInvalid, "turn: required"},
		{created, "Record(zero reply)", record(T1, messages.NodeID{}), nil, ErrInvalid, "reply: required"},
		{created, "Record(T1, T1)", record(T1, T1), nil, ErrInvalid, "is the turn's own node"},
		{nil, "Record before Create", record(T1, R1), nil, ErrNotCreated, ""},
	}
	runDecisions(t, tests)
	// A recorded turn is pending like a finalized one, and folds.
	s := newScript(t).run(append(created[:1:1], "record T1 R1", "record T2 R2", "commit 1 T1 T2 epoch=0")...)
	if s.b.TurnSeq != 2 || s.b.Tip != R2 || s.b.Committed != 2 || len(s.b.Pending()) != 0 {
		t.Errorf("after two recorded turns and a commit: seq %d, tip %s, committed %d, pending %d",
			s.b.TurnSeq, s.b.Tip, s.b.Committed, len(s.b.Pending()))
	}
}

func TestCommitShrunk(t *testing.T) {
	t.Parallel()
	shrink := func(summary string, epoch uint64) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) {
			return b.CommitShrunk(messages.StateCheckpoint{ID: St2, Seq: 2, Summary: summary}, epoch, local)
		}
	}
	pendingToo := append(committed[:5:5], "submit T2", "start T2 S2", "finalize T2 S2 R2 completed")
	tests := []decision{
		{committed, "CommitShrunk(shorter, 1)", shrink("sum 1", 1),
			events(messages.StateCommitted{State: messages.StateCheckpoint{ID: St2, Seq: 2, Summary: "sum 1"}, Shrunk: true, Epoch: 1, At: now}), nil, ""},
		{pendingToo, "CommitShrunk with a turn pending", shrink("sum 1", 1),
			events(messages.StateCommitted{State: messages.StateCheckpoint{ID: St2, Seq: 2, Summary: "sum 1"}, Shrunk: true, Epoch: 1, At: now}), nil, ""},
		{committed, "CommitShrunk(stale)", shrink("sum 1", 0), nil, ErrStaleEpoch, "computed for epoch 0, the branch is at epoch 1"},
		{committed, "CommitShrunk(not shorter)", shrink("summary 2", 1), nil, ErrInvalid,
			"state.summary: 9 bytes in a shrunk state, want fewer than the head's 9"},
		{nil, "CommitShrunk before Create", shrink("", 0), nil, ErrNotCreated, ""},
	}
	runDecisions(t, tests)
	// A shrunk state folds no turn: the pending one is still pending.
	s := newScript(t).run(pendingToo...)
	evs, err := s.b.CommitShrunk(messages.StateCheckpoint{ID: St2, Seq: 2, Summary: "s"}, 1, local)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if _, err := s.b.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if p := s.b.Pending(); len(p) != 1 || p[0].ID != T2 || s.b.Epoch != 2 || s.b.State.Summary != "s" {
		t.Errorf("after CommitShrunk: pending %v, epoch %d, summary %q; want [T2], 2, %q", p, s.b.Epoch, s.b.State.Summary, "s")
	}
}

func TestMarkIndexed(t *testing.T) {
	t.Parallel()
	index := func(turn messages.TurnID, chunks int) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.MarkIndexed(turn, chunks, local) }
	}
	tests := []decision{
		{committed, "MarkIndexed(T1, 3)", index(T1, 3), events(messages.TurnIndexed{Turn: T1, Chunks: 3, At: now}), nil, ""},
		{committed, "MarkIndexed(T1, 0)", index(T1, 0), events(messages.TurnIndexed{Turn: T1, At: now}), nil, ""},
		{indexed, "MarkIndexed(T1) again", index(T1, 3), nil, nil, ""},
		{committed, "MarkIndexed(T2) never accepted", index(T2, 3), nil, nil, ""},
		{nil, "MarkIndexed before Create", index(T1, 3), nil, ErrNotCreated, ""},
		{committed, "MarkIndexed(zero)", index(messages.TurnID{}, 3), nil, ErrInvalid, "turn: required"},
		{committed, "MarkIndexed(T1, -1)", index(T1, -1), nil, ErrInvalid, "turn T1: chunks: -1 is negative"},
		{finalized, "MarkIndexed(finalized)", index(T1, 3), nil, ErrInvalid, "turn T1 is response_finalized, want state_committed"},
		{responding, "MarkIndexed(responding)", index(T1, 3), nil, ErrInvalid, "turn T1 is responding"},
	}
	runDecisions(t, tests)
}

func TestPin(t *testing.T) {
	t.Parallel()
	pin := func(fact string, lim PinLimits) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.Pin(fact, lim, local) }
	}
	long := strings.Repeat("é", DefaultPinLimits.MaxBytes/2)
	two := append(created[:1:1], `pin "a"`, `pin "b"`)
	tests := []decision{
		{created, "Pin(fact)", pin("answer in French", PinLimits{}), events(messages.FactPinned{Fact: "answer in French", At: now}), nil, ""},
		{created, "Pin(max_pin_bytes bytes)", pin(long, PinLimits{}), events(messages.FactPinned{Fact: long, At: now}), nil, ""},
		{append(created[:1:1], `pin "x"`), "Pin(x) again", pin("x", PinLimits{}), nil, nil, ""},
		{nil, "Pin before Create", pin("x", PinLimits{}), nil, ErrNotCreated, ""},
		{created, `Pin("")`, pin("", PinLimits{}), nil, ErrInvalid, "core: invalid: fact: required"},
		{created, "Pin(max_pin_bytes+1 bytes)", pin(long+"x", PinLimits{}), nil, ErrInvalid,
			"core: invalid: fact: 2049 bytes, limit 2048 (context.max_pin_bytes)"},
		{created, "Pin(11 bytes), limit 10", pin("0123456789a", PinLimits{MaxBytes: 10}), nil, ErrInvalid,
			"core: invalid: fact: 11 bytes, limit 10 (context.max_pin_bytes)"},
		{two, "Pin(c), limit 2", pin("c", PinLimits{MaxPins: 2}), nil, ErrInvalid,
			"core: invalid: fact: the branch has 2 pinned facts, limit 2 (context.max_pins); unpin one first"},
		{two, "Pin(c), limit 3", pin("c", PinLimits{MaxPins: 3}), events(messages.FactPinned{Fact: "c", At: now}), nil, ""},
		{two, "Pin(a) again at the limit", pin("a", PinLimits{MaxPins: 2}), nil, nil, ""},
		{append(two, "unpin 1"), "Pin(c) after an unpin, limit 2", pin("c", PinLimits{MaxPins: 2}), events(messages.FactPinned{Fact: "c", At: now}), nil, ""},
	}
	runDecisions(t, tests)
}

func TestUnpinAndEditPin(t *testing.T) {
	t.Parallel()
	unpin := func(id uint64) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.Unpin(id, local) }
	}
	edit := func(id uint64, fact string, lim PinLimits) func(*Branch) ([]messages.BranchEvent, error) {
		return func(b *Branch) ([]messages.BranchEvent, error) { return b.EditPin(id, fact, lim, local) }
	}
	two := append(created[:1:1], `pin "a"`, `pin "b"`)
	tests := []decision{
		{two, "Unpin(1)", unpin(1), events(messages.FactUnpinned{Pin: 1, At: now}), nil, ""},
		{two, "Unpin(0)", unpin(0), nil, ErrInvalid, "core: invalid: pin: required"},
		{two, "Unpin(3)", unpin(3), nil, ErrNoPin, "core: no such pin: pin 3 is not pinned on branch B1"},
		{append(two, "unpin 1"), "Unpin(1) again", unpin(1), nil, ErrNoPin, "pin 1 is not pinned"},
		{nil, "Unpin before Create", unpin(1), nil, ErrNotCreated, ""},
		{two, "EditPin(2, c)", edit(2, "c", PinLimits{}), events(messages.FactEdited{Pin: 2, Fact: "c", At: now}), nil, ""},
		{two, "EditPin(2, b) unchanged", edit(2, "b", PinLimits{}), nil, nil, ""},
		{two, "EditPin(2, a) a duplicate", edit(2, "a", PinLimits{}), nil, ErrInvalid, "core: invalid: fact: pinned already as pin 1"},
		{two, `EditPin(2, "")`, edit(2, "", PinLimits{}), nil, ErrInvalid, "core: invalid: fact: required"},
		{two, "EditPin(2), over max_pin_bytes", edit(2, "0123456789a", PinLimits{MaxBytes: 10}), nil, ErrInvalid,
			"core: invalid: fact: 11 bytes, limit 10 (context.max_pin_bytes)"},
		{two, "EditPin(9, c)", edit(9, "c", PinLimits{}), nil, ErrNoPin, "pin 9 is not pinned"},
		{nil, "EditPin before Create", edit(1, "c", PinLimits{}), nil, ErrNotCreated, ""},
	}
	runDecisions(t, tests)
}

func TestRecover(t *testing.T) {
	t.Parallel()
	tests := []struct {
		setup   []string
		events  []messages.BranchEvent
		effects []Effect
	}{
		{nil, nil, nil},
		{created, nil, nil},
		{accepted, events(messages.TurnFailed{Turn: T1, Code: messages.FailInterrupted, Reason: InterruptedReason, At: now}), nil},
		{responding, events(messages.TurnFailed{Turn: T1, Step: S1, Code: messages.FailInterrupted, Reason: InterruptedReason, At: now}), nil},
		{finalized, nil, []Effect{Summarize{Turns: []messages.TurnID{T1}, Reason: FoldOverflow}}},
		{append(committed[:5:5], "submit T2", "start T2 S2", "finalize T2 S2 R2 completed", "submit T3"),
			events(messages.TurnFailed{Turn: T3, Code: messages.FailInterrupted, Reason: InterruptedReason, At: now}),
			[]Effect{Index{Turn: T1}, Summarize{Turns: []messages.TurnID{T2}, Epoch: 1, State: messages.StateCheckpoint{ID: St1, Seq: 1, Summary: "summary 1"}, Reason: FoldOverflow}}},
		{indexed, nil, nil},
	}
	for _, tc := range tests {
		s := newScript(t).run(tc.setup...)
		before := cloneBranch(&s.b)
		evs, effects := s.b.Recover(local)
		if !reflect.DeepEqual(evs, tc.events) || !reflect.DeepEqual(effects, tc.effects) {
			t.Errorf("after %q: Recover() = %s, %#v, want %s, %#v", tc.setup, unname(fmtEvents(evs)), effects, unname(fmtEvents(tc.events)), tc.effects)
		}
		if !reflect.DeepEqual(&s.b, before) {
			t.Errorf("after %q: Recover changed the branch", tc.setup)
		}
	}
}

func TestQueries(t *testing.T) {
	t.Parallel()
	s := newScript(t).run(append(committed[:5:5], "submit T2", "start T2 S2", "finalize T2 S2 R2 completed", "submit T3")...)
	b := &s.b
	if got := b.Pending(); len(got) != 1 || got[0].ID != T2 || got[0].Phase != messages.PhaseResponseFinalized || got[0].Reply != R2 {
		t.Errorf("Pending() = %+v, want [T2 response_finalized]", got)
	}
	if got, ok := b.InFlight(); !ok || got.ID != T3 || got.Phase != messages.PhaseAccepted || got.StateBefore != St1 {
		t.Errorf("InFlight() = %+v, %v, want T3 accepted", got, ok)
	}
	if got, ok := b.Turn(T1); !ok || got.Phase != messages.PhaseStateCommitted || got.StateAfter != St1 {
		t.Errorf("Turn(T1) = %+v, %v, want T1 state_committed after St1", got, ok)
	}
	if got, ok := b.Turn(R1); ok {
		t.Errorf("Turn(R1) = %+v, true, want false", got)
	}
	// The queries return copies.
	b.Pending()[0].Phase = messages.PhaseFailed
	if got, _ := b.Turn(T2); got.Phase != messages.PhaseResponseFinalized {
		t.Errorf("Pending() shares its turns with the branch")
	}
	var empty Branch
	if got, ok := empty.InFlight(); ok || !reflect.DeepEqual(got, Turn{}) || empty.Pending() != nil {
		t.Errorf("zero Branch: InFlight() = %+v, %v, Pending() = %v, want nothing", got, ok, empty.Pending())
	}
}

func TestApplyRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		setup []string
		ev    messages.BranchEvent
		text  string
	}{
		{nil, nil, "nil event"},
		{nil, messages.TurnAccepted{Turn: T1, Seq: 1}, "core: branch not created"},
		{created, messages.BranchCreated{Session: Se1, Branch: B1}, "core: branch exists"},
		{created, messages.TurnAccepted{Turn: T1, Seq: 2}, "seq 2, want 1"},
		{created, messages.TurnAccepted{Turn: T1, Seq: 1, StateBefore: St1}, "state_before St1, want the head state"},
		{accepted, messages.TurnAccepted{Turn: T2, Seq: 2}, "core: busy"},
		{accepted, messages.ResponseFinalized{Turn: T1, Step: S1, Reply: R1, Outcome: completed}, "want responding"},
		{responding, messages.TurnFailed{Turn: T1, Reason: "x"}, "is not the running step S1"},
		{finalized, messages.StateCommitted{State: messages.StateCheckpoint{ID: St1, Seq: 1}, Turns: []messages.TurnID{T1}, Epoch: 3}, "core: stale epoch"},
		{finalized, messages.TurnIndexed{Turn: T1}, "want state_committed"},
		{created, messages.FactPinned{}, "fact: required"},
		{created, &messages.FactPinned{Fact: "x"}, "unsupported event *messages.FactPinned"},
		{created, messages.FactUnpinned{Pin: 1}, "pin 1 is not pinned"},
		{created, messages.FactEdited{Pin: 1, Fact: "x"}, "pin 1 is not pinned"},
		{append(created[:1:1], `pin "a"`), messages.FactEdited{Pin: 1}, "fact: required"},
		{nil, messages.BranchCreated{Session: Se1, Branch: B1, State: messages.StateCheckpoint{Pinned: []string{"a"}},
			Pins: []messages.PinnedFact{{ID: 1, Fact: "b"}}}, `pins: ["b"], want the facts of state.pinned ["a"]`},
		{nil, messages.BranchCreated{Session: Se1, Branch: B1, State: messages.StateCheckpoint{Pinned: []string{"a", "b"}},
			Pins: []messages.PinnedFact{{ID: 2, Fact: "a"}, {ID: 2, Fact: "b"}}}, "pins[1].id: 2, want more than 2"},
		{nil, messages.BranchCreated{Session: Se1, Branch: B1, State: messages.StateCheckpoint{Pinned: []string{"a"}},
			Pins: []messages.PinnedFact{{ID: 1, Fact: "a", Seq: 3}}, TurnSeq: 2}, "pins[0].seq: 3 is after the fork point's turn_seq 2"},
	}
	for _, tc := range tests {
		s := newScript(t).run(tc.setup...)
		before := cloneBranch(&s.b)
		effects, err := s.b.Apply(tc.ev)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(unname(err.Error()), tc.text) || effects != nil {
			t.Errorf("after %q: Apply(%#v) = %v, %v, want an error wrapping ErrInvalid containing %q", tc.setup, tc.ev, effects, err, tc.text)
		}
		if !reflect.DeepEqual(&s.b, before) {
			t.Errorf("after %q: a rejected Apply changed the branch", tc.setup)
		}
	}
}

func TestApplyDoesNotAlias(t *testing.T) {
	t.Parallel()
	pinned := []string{"a", "b"}
	pending := []messages.PendingTurn{{Turn: T1, Seq: 1, Reply: R1}}
	var b Branch
	effects, err := b.Apply(messages.BranchCreated{Session: Se1, Branch: B1, State: messages.StateCheckpoint{Pinned: pinned[:1]}, Pending: pending, TurnSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(messages.FactPinned{Fact: "c"}); err != nil {
		t.Fatal(err)
	}
	if pinned[1] != "b" {
		t.Errorf("Apply(FactPinned) wrote into the event's pinned facts: %q", pinned)
	}
	effects[0].(Summarize).State.Pinned[0] = "z"
	if b.State.Pinned[0] != "a" {
		t.Errorf("a Summarize effect shares its pinned facts with the branch")
	}
	committed := []string{"a", "c", "keep"}
	if _, err := b.Apply(messages.StateCommitted{State: messages.StateCheckpoint{ID: St1, Seq: 1, Pinned: committed[:2]},
		Turns: []messages.TurnID{T1}, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(messages.FactPinned{Fact: "d"}); err != nil {
		t.Fatal(err)
	}
	if committed[2] != "keep" {
		t.Errorf("Apply(FactPinned) wrote into the pinned facts of a StateCommitted event: %q", committed)
	}
}

func TestSnapshotJSON(t *testing.T) {
	t.Parallel()
	s := newScript(t).run(append(committed[:5:5], `pin "<b> & c"`, "submit T2", "start T2 S2", "finalize T2 S2 R2 paused", "submit T3")...)
	data, err := json.Marshal(&s.b)
	if err != nil {
		t.Fatal(err)
	}
	var back Branch
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, s.b) {
		t.Errorf("json.Unmarshal(%s) = %+v, %v, want %+v", data, back, err, s.b)
	}
	for _, key := range []string{`"tip":`, `"turn_seq":3`, `"phase":"response_finalized"`, `"outcome":{"kind":"paused"}`, `"window":[`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("json.Marshal(branch) = %s, want it to contain %s", data, key)
		}
	}
	var zero, zeroBack Branch
	if data, err := json.Marshal(&zero); err != nil || json.Unmarshal(data, &zeroBack) != nil || !reflect.DeepEqual(zeroBack, zero) {
		t.Errorf("zero Branch: json round trip = %+v, %v, want the zero Branch", zeroBack, err)
	}
}

func TestToolLoop(t *testing.T) {
	t.Parallel()
	s := newScript(t).run(responding...)
	b := &s.b
	apply := func(evs []messages.BranchEvent, err error) []Effect {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var effects []Effect
		for _, ev := range evs {
			eff, err := b.Apply(ev)
			if err != nil {
				t.Fatal(err)
			}
			effects = append(effects, eff...)
		}
		return effects
	}
	call := func(id string) messages.ToolCall {
		return messages.ToolCall{CallID: id, Name: "grep", Arguments: json.RawMessage(`"{}"`)}
	}
	out := func(id string) messages.ToolOutput {
		return messages.ToolOutput{CallID: id, Output: json.RawMessage(`"ok"`)}
	}
	text := messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "looking"}}}

	// Bad decisions change nothing.
	for _, tc := range []struct {
		name string
		do   func() ([]messages.BranchEvent, error)
		text string
	}{
		{"no call", func() ([]messages.BranchEvent, error) { return b.IssueToolCalls(T1, S1, messages.Items{text}, now) }, "no tool call"},
		{"wrong step", func() ([]messages.BranchEvent, error) {
			return b.IssueToolCalls(T1, S2, messages.Items{call("a")}, now)
		}, "not the running step"},
		{"output in items", func() ([]messages.BranchEvent, error) {
			return b.IssueToolCalls(T1, S1, messages.Items{call("a"), out("a")}, now)
		}, "tool output"},
		{"duplicate id", func() ([]messages.BranchEvent, error) {
			return b.IssueToolCalls(T1, S1, messages.Items{call("a"), call("a")}, now)
		}, "used already"},
		{"results with none open", func() ([]messages.BranchEvent, error) {
			return b.RecordToolResults(T1, messages.Items{out("a")}, S2, now)
		}, "no tool call is open"},
	} {
		if evs, err := tc.do(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.text) || evs != nil {
			t.Errorf("%s: %v, %v; want ErrInvalid containing %q", tc.name, evs, err, tc.text)
		}
	}

	effects := apply(b.IssueToolCalls(T1, S1, messages.Items{text, call("a"), call("b")}, now))
	if want := []Effect{RunTools{Turn: T1, Step: S1, Calls: []messages.ToolCall{call("a"), call("b")}}}; !reflect.DeepEqual(effects, want) {
		t.Fatalf("IssueToolCalls effects = %#v, want %#v", effects, want)
	}
	// Open calls block finalizing and a second issue; results must answer
	// every open call once.
	if _, err := b.Finalize(T1, S1, R1, completed, 0, 0, now); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "has no output") {
		t.Errorf("Finalize with open calls: %v", err)
	}
	if _, err := b.RecordToolResults(T1, messages.Items{out("a")}, S2, now); err == nil || !strings.Contains(err.Error(), "b has no output") {
		t.Errorf("partial results: %v", err)
	}
	if _, err := b.RecordToolResults(T1, messages.Items{out("a"), out("b"), out("c")}, S2, now); err == nil || !strings.Contains(err.Error(), `"c" answers no open`) {
		t.Errorf("extra result: %v", err)
	}
	effects = apply(b.RecordToolResults(T1, messages.Items{out("b"), out("a")}, S2, now))
	if want := []Effect{ContinueLoop{Turn: T1, Step: S2}}; !reflect.DeepEqual(effects, want) {
		t.Fatalf("RecordToolResults effects = %#v, want %#v", effects, want)
	}
	if tr, _ := b.Turn(T1); tr.Step != S2 || tr.Steps != 2 || len(tr.Loop) != 5 || len(tr.OpenCalls()) != 0 {
		t.Fatalf("turn after one loop step = %+v", tr)
	}

	// A snapshot keeps the loop; a crash now abandons the turn instead of
	// failing it.
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Branch
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(&back, b) {
		t.Fatalf("snapshot round trip = %+v, %v", back, err)
	}
	apply(b.IssueToolCalls(T1, S2, messages.Items{call("c")}, now))
	evs, effects := b.Recover(now)
	if len(evs) != 0 || !reflect.DeepEqual(effects, []Effect{Abandon{Turn: T1, Reason: "interrupted"}}) {
		t.Fatalf("Recover mid-loop = %s, %#v", fmtEvents(evs), effects)
	}
	outs := b.AbandonOutputs(T1, "interrupted")
	if len(outs) != 1 || outs[0].(messages.ToolOutput).CallID != "c" || !outs[0].(messages.ToolOutput).IsError {
		t.Fatalf("AbandonOutputs = %+v", outs)
	}
	apply(b.RecordToolResults(T1, outs, messages.StepID{}, now))
	apply(b.Finalize(T1, S2, R1, messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "interrupted"}, 0, 0, now))
	if tr, _ := b.Turn(T1); tr.Loop != nil || tr.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("finalized turn = %+v", tr)
	}
}

func TestSelectModel(t *testing.T) {
	t.Parallel()
	s := newScript(t).run(created...)
	if evs, err := s.b.SelectModel("claude", now); err != nil || len(evs) != 1 {
		t.Fatalf("SelectModel = %v, %v", evs, err)
	} else if _, err := s.b.Apply(evs[0]); err != nil || s.b.Model != "claude" {
		t.Fatalf("Apply = %v, model %q", err, s.b.Model)
	}
	if evs, err := s.b.SelectModel("claude", now); err != nil || evs != nil {
		t.Errorf("selecting the current model = %v, %v, want nothing", evs, err)
	}
	if _, err := s.b.SelectModel(strings.Repeat("m", ModelNameMax+1), now); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limit 128") {
		t.Errorf("long name: %v", err)
	}
	var zero Branch
	if _, err := zero.SelectModel("x", now); !errors.Is(err, ErrNotCreated) {
		t.Errorf("uncreated branch: %v", err)
	}
}

func TestSelectMemoryTools(t *testing.T) {
	t.Parallel()
	s := newScript(t).run(created...)
	evs, err := s.b.SelectMemoryTools(messages.MemoryToolsOff, local)
	if want := []messages.BranchEvent{messages.MemoryToolsSelected{Setting: messages.MemoryToolsOff, At: now}}; err != nil || !reflect.DeepEqual(evs, want) {
		t.Fatalf("SelectMemoryTools = %v, %v, want %v", evs, err, want)
	}
	if _, err := s.b.Apply(evs[0]); err != nil || s.b.MemoryTools != messages.MemoryToolsOff {
		t.Fatalf("Apply = %v, memory tools %q", err, s.b.MemoryTools)
	}
	if evs, err := s.b.SelectMemoryTools(messages.MemoryToolsOff, now); err != nil || evs != nil {
		t.Errorf("selecting the current setting = %v, %v, want nothing", evs, err)
	}
	if _, err := s.b.SelectMemoryTools("yes", now); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "memory_tools") {
		t.Errorf("a setting that is none: %v", err)
	}
	if _, err := s.b.Apply(messages.MemoryToolsSelected{Setting: "yes", At: now}); !errors.Is(err, ErrInvalid) || s.b.MemoryTools != messages.MemoryToolsOff {
		t.Errorf("applying a setting that is none: %v, memory tools %q", err, s.b.MemoryTools)
	}
	var zero Branch
	if _, err := zero.SelectMemoryTools(messages.MemoryToolsOn, now); !errors.Is(err, ErrNotCreated) {
		t.Errorf("uncreated branch: %v", err)
	}
}

func TestRetryStep(t *testing.T) {
	t.Parallel()
	s := newScript(t).run(responding...)
	b := &s.b
	if _, err := b.RetryStep(T1, S2, S1, "too large", now); !errors.Is(err, ErrInvalid) {
		t.Errorf("retrying a step that is not running: %v", err)
	}
	if _, err := b.RetryStep(T1, S1, S1, "too large", now); !errors.Is(err, ErrInvalid) {
		t.Errorf("retrying a step as itself: %v", err)
	}
	evs, err := b.RetryStep(T1, S1, S2, "too large", now)
	if err != nil {
		t.Fatal(err)
	}
	effects, err := b.Apply(evs[0])
	if err != nil || !reflect.DeepEqual(effects, []Effect{RetryStep{Turn: T1, Step: S2}}) {
		t.Fatalf("Apply = %#v, %v", effects, err)
	}
	if tr, _ := b.Turn(T1); tr.Step != S2 || tr.Steps != 2 || tr.Phase != messages.PhaseResponding {
		t.Fatalf("turn after a retry = %+v", tr)
	}
	if _, err := b.Finalize(T1, S2, R1, completed, 0, 0, now); err != nil {
		t.Fatalf("finalizing the retried step: %v", err)
	}
}

// A turn sent with a client's tools: a step calling only the client's
// tools awaits their results; one calling a runtime tool and a client
// tool runs the runtime's first, records its output, then awaits the
// client's; results must answer every open call before the loop goes on;
// Recover leaves an awaiting turn waiting; the client's part is dropped
// once the response is finalized.
func TestClientToolLoop(t *testing.T) {
	t.Parallel()
	s := newScript(t).run(created...)
	b := &s.b
	apply := func(evs []messages.BranchEvent, err error) []Effect {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var effects []Effect
		for _, ev := range evs {
			eff, err := b.Apply(ev)
			if err != nil {
				t.Fatal(err)
			}
			effects = append(effects, eff...)
		}
		return effects
	}
	call := func(id, name string) messages.ToolCall {
		return messages.ToolCall{CallID: id, Name: name, Arguments: json.RawMessage(`"{}"`)}
	}
	out := func(id string) messages.ToolOutput {
		return messages.ToolOutput{CallID: id, Output: json.RawMessage(`"ok"`)}
	}
	client := Client{System: "be brief", Tools: []messages.Tool{{Name: "weather", InputSchema: []byte{}}},
		ToolChoice: messages.ToolChoice{Mode: messages.ToolChoiceRequired},
		Params:     messages.GenParams{Temperature: new(0.5), Stop: []string{"END"}}}

	for _, tc := range []struct {
		c    Client
		text string
	}{
		{Client{Tools: []messages.Tool{{}}}, "tools[0].name: required"},
		{Client{Tools: []messages.Tool{{Name: "a"}, {Name: "a"}}}, `tools[1].name: "a" is tools[0]'s already`},
		{Client{ToolChoice: messages.ToolChoice{Mode: "any"}}, `tool_choice.mode: "any"`},
		{Client{ToolChoice: messages.ToolChoice{Mode: messages.ToolChoiceTool}}, "tool_choice.name: required"},
		{Client{ToolChoice: messages.ToolChoice{Mode: messages.ToolChoiceAuto, Name: "a"}}, "tool_choice.name: only with mode"},
	} {
		if evs, err := b.SubmitFor(T1, tc.c, now); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.text) || evs != nil {
			t.Errorf("SubmitFor(%+v) = %v, %v; want ErrInvalid containing %q", tc.c, evs, err, tc.text)
		}
	}
	apply(b.SubmitFor(T1, client, now))
	apply(b.Start(T1, S1, now))
	if tr, _ := b.Turn(T1); tr.System != "be brief" || len(tr.Tools) != 1 || tr.Tools[0].InputSchema != nil ||
		tr.ToolChoice != client.ToolChoice || !reflect.DeepEqual(tr.Params, client.Params) || tr.Awaiting() {
		t.Fatalf("accepted client turn = %+v", tr)
	}

	// Only the client's tool: awaited at once.
	effects := apply(b.IssueToolCalls(T1, S1, messages.Items{call("w1", "weather")}, now))
	if want := []Effect{AwaitResults{Turn: T1, Step: S1, Calls: []messages.ToolCall{call("w1", "weather")}}}; !reflect.DeepEqual(effects, want) {
		t.Fatalf("IssueToolCalls effects = %#v, want %#v", effects, want)
	}
	if tr, ok := b.Awaiting(); !ok || tr.ID != T1 {
		t.Fatalf("Awaiting() = %+v, %v", tr, ok)
	}
	// A restart leaves it waiting, and so does a snapshot.
	if evs, effects := b.Recover(now); len(evs) != 0 || len(effects) != 0 {
		t.Fatalf("Recover while awaiting = %s, %#v; want nothing", fmtEvents(evs), effects)
	}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Branch
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(&back, b) {
		t.Fatalf("snapshot round trip = %+v, %v\nwant %+v", back, err, b)
	}
	if _, err := b.Submit(T2, now); !errors.Is(err, ErrBusy) {
		t.Fatalf("Submit while awaiting = %v, want ErrBusy (the shell abandons the turn first)", err)
	}
	effects = apply(b.RecordToolResults(T1, messages.Items{out("w1")}, S2, now))
	if want := []Effect{ContinueLoop{Turn: T1, Step: S2}}; !reflect.DeepEqual(effects, want) {
		t.Fatalf("RecordToolResults effects = %#v, want %#v", effects, want)
	}

	// The runtime's and the client's: the runtime's run first.
	effects = apply(b.IssueToolCalls(T1, S2, messages.Items{call("g1", "grep"), call("w2", "weather")}, now))
	if want := []Effect{RunTools{Turn: T1, Step: S2, Calls: []messages.ToolCall{call("g1", "grep")}}}; !reflect.DeepEqual(effects, want) {
		t.Fatalf("mixed IssueToolCalls effects = %#v, want %#v", effects, want)
	}
	if _, ok := b.Awaiting(); ok {
		t.Fatal("Awaiting while the runtime's call is open")
	}
	if _, err := b.RecordToolResults(T1, messages.Items{out("w2")}, messages.StepID{}, now); err == nil || !strings.Contains(err.Error(), "g1 has no output") {
		t.Errorf("the client's result before the runtime's: %v", err)
	}
	if _, err := b.RecordToolResults(T1, messages.Items{out("g1")}, S1, now); err == nil || !strings.Contains(err.Error(), "w2 has no output") {
		t.Errorf("the loop going on with the client's call open: %v", err)
	}
	if _, err := b.RecordToolResults(T1, nil, messages.StepID{}, now); err == nil || !strings.Contains(err.Error(), "outputs: required") {
		t.Errorf("no outputs: %v", err)
	}
	effects = apply(b.RecordToolResults(T1, messages.Items{out("g1")}, messages.StepID{}, now))
	if want := []Effect{AwaitResults{Turn: T1, Step: S2, Calls: []messages.ToolCall{call("w2", "weather")}}}; !reflect.DeepEqual(effects, want) {
		t.Fatalf("runtime results effects = %#v, want %#v", effects, want)
	}
	if _, ok := b.Awaiting(); !ok {
		t.Fatal("not awaiting the client's call")
	}
	// Abandoned: the open call answered with an error, then finalized.
	apply(b.RecordToolResults(T1, b.AbandonOutputs(T1, "no result"), messages.StepID{}, now))
	apply(b.Finalize(T1, S2, R1, messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "tool_results_missing"}, 0, 0, now))
	if tr, _ := b.Turn(T1); tr.Loop != nil || tr.System != "" || tr.Tools != nil || tr.ToolChoice != (messages.ToolChoice{}) || !tr.Params.IsZero() {
		t.Fatalf("finalized client turn = %+v", tr)
	}
}

func TestRuntimeToolSteps(t *testing.T) {
	t.Parallel()
	call := func(id, name string) messages.TranscriptItem {
		return messages.ToolCall{CallID: id, Name: name, Arguments: json.RawMessage(`"{}"`)}
	}
	out := func(id string) messages.TranscriptItem {
		return messages.ToolOutput{CallID: id, Output: json.RawMessage(`"ok"`)}
	}
	text := messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "let me look"}}}
	tools := []messages.Tool{{Name: "weather"}}
	tests := []struct {
		name string
		loop messages.Items
		want int
	}{
		{"no loop", nil, 0},
		{"client's only", messages.Items{call("c1", "weather"), out("c1"), call("c2", "weather"), out("c2"), call("c3", "weather")}, 0},
		{"runtime's", messages.Items{text, call("r1", "grep"), call("r2", "grep"), out("r1"), out("r2"), call("r3", "grep")}, 2},
		{"mixed step counts once", messages.Items{call("r1", "grep"), call("c1", "weather"), out("r1"), out("c1"), call("c2", "weather")}, 1},
		{"alternating", messages.Items{call("c1", "weather"), out("c1"), call("r1", "grep"), out("r1"), call("c2", "weather"), out("c2"),
			call("r2", "grep")}, 2},
	}
	for _, tt := range tests {
		tr := Turn{Loop: tt.loop, Tools: tools}
		if got := tr.RuntimeToolSteps(); got != tt.want {
			t.Errorf("%s: RuntimeToolSteps() = %d, want %d", tt.name, got, tt.want)
		}
	}
}
