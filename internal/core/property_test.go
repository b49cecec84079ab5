package core

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

var seedFlag = flag.Uint64("seed", 0, "seed of TestReplayProperty (0: from the clock)")

// TestReplayProperty drives branches with random command sequences, mostly
// valid, with restarts, and checks that
//   - a command either returns events that apply or an error and no events,
//     and never changes the branch;
//   - replaying any prefix of the log on a fresh branch gives exactly the
//     state the live branch had after as many events, also after a JSON
//     round trip of that state and of the events;
//   - applying the log twice gives identical states and effects;
//   - a naive model agrees: every accepted turn is tracked until it fails
//     or is indexed, none is committed twice or both committed and failed,
//     and the counters add up.
func TestReplayProperty(t *testing.T) {
	t.Parallel()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0))
	runs, steps := 100, 120
	if testing.Short() {
		runs = 20
	}
	seen := map[string]int{}
	for run := range runs {
		if !randomRun(t, r, steps, seen) {
			t.Fatalf("run %d failed; seed %d (replay with -seed=%d)", run, seed, seed)
		}
	}
	// The generator must reach every kind of event.
	t.Logf("events applied: %v", seen)
	for _, kind := range []string{"BranchCreated", "TurnAccepted", "ResponseStarted", "ResponseFinalized",
		"TurnFailed", "StateCommitted", "TurnIndexed", "FactPinned", "FactUnpinned", "FactEdited", "recovered", "rejected"} {
		if seen[kind] == 0 {
			t.Errorf("no %s in %d runs", kind, runs)
		}
	}
}

// randomRun runs one random sequence and checks it; it reports success.
// seen counts the events applied by kind, recoveries that failed a turn,
// and rejected commands.
func randomRun(t *testing.T, r *rand.Rand, steps int, seen map[string]int) bool {
	t.Helper()
	var (
		b       Branch
		log     []messages.BranchEvent
		states  = []*Branch{cloneBranch(&b)} // states[k]: after k events
		effects [][]Effect                   // effects[k]: of event k
		clock   = t0
		n       int // ids made so far
		ok      = true
	)
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		ok = false
	}
	newID := func(prefix string) string { n++; return fmt.Sprintf("%s%d", prefix, n) }
	turnID := func() messages.TurnID { return id[messages.TurnID](newID("t")) }

	// Create, half the time as a fork with pending turns.
	ev := messages.BranchCreated{Session: id[messages.SessionID]("se"), Branch: id[messages.BranchID](newID("b")), At: clock}
	if r.IntN(2) == 0 {
		ev.Parent, ev.ForkAt = id[messages.BranchID]("parent"), turnID()
		ev.State = messages.StateCheckpoint{ID: id[messages.StateID](newID("st")), Seq: r.Uint64N(5), Pinned: pick(r, []string{"p0"})}
		ev.TurnSeq = 10 + r.Uint64N(5)
		for seq := ev.TurnSeq - r.Uint64N(3); seq <= ev.TurnSeq; seq++ {
			ev.Pending = append(ev.Pending, messages.PendingTurn{Turn: turnID(), Seq: seq, Reply: turnID()})
		}
	}

	apply := func(evs []messages.BranchEvent) {
		for _, ev := range evs {
			// Persist: the stored form is what applies and replays.
			data, err := messages.MarshalBranchEvent(ev)
			if err != nil {
				fail("MarshalBranchEvent(%+v) = %v", ev, err)
				return
			}
			stored, err := messages.UnmarshalBranchEvent(data)
			if err != nil || !reflect.DeepEqual(stored, ev) {
				fail("UnmarshalBranchEvent(%s) = %+v, %v, want %+v", data, stored, err, ev)
				return
			}
			effs, err := b.Apply(stored)
			if err != nil {
				fail("Apply(%+v) = %v for an event a command decided", ev, err)
				return
			}
			seen[strings.TrimPrefix(fmt.Sprintf("%T", ev), "messages.")]++
			log = append(log, stored)
			effects = append(effects, effs)
			states = append(states, cloneBranch(&b))
		}
	}
	// decided checks a command's result and applies its events.
	decided := func(what string, evs []messages.BranchEvent, err error, mustSucceed bool) {
		if err != nil {
			seen["rejected"]++
			if evs != nil {
				fail("%s = %v, %v: events with an error", what, evs, err)
			}
			if mustSucceed {
				fail("%s = %v, want success", what, err)
			}
			return
		}
		apply(evs)
	}
	evs, err := b.Create(ev)
	decided("Create", evs, err, true)

	facts := []string{"f1", "f2", "f3", "f4"}
	for step := 0; step < steps && ok; step++ {
		clock = clock.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
		before := cloneBranch(&b)
		inflight, busy := b.InFlight()
		pending := b.Pending()
		var what string
		var evs []messages.BranchEvent
		var err error
		must := false
		switch k := r.IntN(100); {
		case k < 20:
			what = "Submit"
			evs, err = b.Submit(turnID(), clock)
			must = !busy
			if busy && !errors.Is(err, ErrBusy) {
				fail("Submit with %v in flight = %v, want ErrBusy", inflight.Phase, err)
			}
		case k < 45 && busy && (inflight.Phase == messages.PhaseAccepted || r.IntN(10) == 0):
			what = "Start"
			evs, err = b.Start(inflight.ID, id[messages.StepID](newID("s")), clock)
			must = inflight.Phase == messages.PhaseAccepted
		case k < 45 && busy:
			what = "Finalize"
			o := []messages.StepOutcome{{Kind: messages.OutcomeCompleted}, {Kind: messages.OutcomeIncomplete, Reason: "max"},
				{Kind: messages.OutcomePaused}, {Kind: messages.OutcomeFailed}}[r.IntN(4)]
			evs, err = b.Finalize(inflight.ID, inflight.Step, turnID(), o, r.Uint64N(1000), r.Uint64N(1000), clock)
			must = inflight.Phase == messages.PhaseResponding && o.Kind != messages.OutcomeFailed
		case k < 48 && busy:
			what = "Fail"
			evs, err = b.Fail(inflight.ID, messages.FailTurn, "boom", clock)
			must = true
		case k < 75 && len(pending) > 0:
			what = "Commit"
			var turns []messages.TurnID
			for _, p := range pending[:1+r.IntN(len(pending))] {
				turns = append(turns, p.ID)
			}
			state := messages.StateCheckpoint{ID: id[messages.StateID](newID("st")), Seq: b.State.Seq + 1,
				Summary: fmt.Sprint("folds ", len(turns)), Pinned: slices.Clone(b.State.Pinned)}
			epoch := b.Epoch
			switch r.IntN(10) {
			case 0: // a summary overtaken by a pin or a commit
				if epoch > 0 {
					epoch--
				}
			case 1: // a commit delivered twice
				state.Seq--
			}
			evs, err = b.Commit(state, turns, epoch, clock)
			must = epoch == b.Epoch && state.Seq == b.State.Seq+1
			if state.Seq <= b.State.Seq && b.State.Seq > 0 && !errors.Is(err, ErrDuplicate) {
				fail("Commit(seq %d) with head %d = %v, want ErrDuplicate", state.Seq, b.State.Seq, err)
			}
		case k < 85:
			what = "MarkIndexed"
			turn := turnID()
			must = true
			if len(b.Turns) > 0 {
				t := b.Turns[r.IntN(len(b.Turns))]
				turn, must = t.ID, t.Phase == messages.PhaseStateCommitted
			}
			evs, err = b.MarkIndexed(turn, r.IntN(5), clock)
		case k < 92:
			what = "Pin"
			live := b.LivePins()
			switch j := r.IntN(4); {
			case j == 0 && len(live) > 0:
				what = "Unpin"
				evs, err = b.Unpin(live[r.IntN(len(live))].ID, clock)
			case j == 1 && len(live) > 0:
				what = "EditPin"
				p := live[r.IntN(len(live))]
				evs, err = b.EditPin(p.ID, p.Fact+"'", PinLimits{}, clock)
				must = !slices.Contains(b.State.Pinned, p.Fact+"'")
			default:
				evs, err = b.Pin(facts[r.IntN(len(facts))], PinLimits{}, clock)
				must = true
			}
			if what != "EditPin" {
				must = true
			}
		case k < 96:
			// A restart: replay the log, then recover.
			what = "Recover"
			replayed, err := replay(log)
			if err != nil {
				fail("replay: %v", err)
				break
			}
			b = replayed
			evs, _ = b.Recover(clock)
			seen["recovered"] += len(evs)
			if busy != (len(evs) == 1) {
				fail("Recover() = %v with a turn in flight: %v", evs, busy)
			}
			before = cloneBranch(&b)
			must = true
		default:
			// Junk: a random command on random or stale ids.
			what = "junk"
			turn := turnID()
			if len(b.Turns) > 0 && r.IntN(2) == 0 {
				turn = b.Turns[r.IntN(len(b.Turns))].ID
			}
			switch r.IntN(5) {
			case 0:
				evs, err = b.Start(turn, id[messages.StepID](newID("s")), clock)
			case 1:
				evs, err = b.Finalize(turn, id[messages.StepID](newID("s")), turnID(), messages.StepOutcome{Kind: messages.OutcomeCompleted}, 0, 0, clock)
			case 2:
				evs, err = b.Commit(messages.StateCheckpoint{ID: id[messages.StateID](newID("st")), Seq: b.State.Seq + 1, Pinned: b.State.Pinned},
					[]messages.TurnID{turn}, b.Epoch, clock)
			case 3:
				evs, err = b.Fail(turn, messages.FailTurn, "junk", clock)
			case 4:
				_, err = b.Create(ev)
			}
		}
		if !reflect.DeepEqual(&b, before) {
			fail("%s changed the branch", what)
		}
		decided(what, evs, err, must)
		if ok {
			checkModel(t, &b, log, &ok)
		}
	}
	if !ok {
		return false
	}

	// The pins in effect at each turn_seq (PinsAt) are the live pins of
	// the last state at that turn_seq, before the next turn was accepted.
	for seq := uint64(0); seq <= b.TurnSeq; seq++ {
		var at *Branch
		for _, st := range states {
			if st.Created && st.TurnSeq == seq {
				at = st
			}
		}
		if at == nil {
			continue // before the fork point
		}
		if got, want := b.PinsAt(seq), at.LivePins(); !reflect.DeepEqual(got, want) || !slices.Equal(PinFacts(want), at.State.Pinned) {
			fail("PinsAt(%d) = %+v, want %+v (pinned %q)", seq, got, want, at.State.Pinned)
		}
	}

	// Replaying any prefix gives the state after as many events, and that
	// state survives a snapshot.
	for k := 0; k <= len(log); k++ {
		replayed, err := replay(log[:k])
		if err != nil {
			fail("replay of %d events: %v", k, err)
			break
		}
		if !reflect.DeepEqual(&replayed, states[k]) {
			fail("replaying %d events gives\n%+v, want\n%+v", k, replayed, *states[k])
			break
		}
		data, err := json.Marshal(states[k])
		var back Branch
		if err != nil || json.Unmarshal(data, &back) != nil || !reflect.DeepEqual(&back, states[k]) {
			fail("snapshot after %d events: %s decodes as %+v (%v), want %+v", k, data, back, err, *states[k])
			break
		}
	}
	// The log applied twice gives identical states and effects, equal to
	// the live ones.
	var x, y Branch
	for i, ev := range log {
		ex, errx := x.Apply(ev)
		ey, erry := y.Apply(ev)
		if errx != nil || erry != nil || !reflect.DeepEqual(ex, ey) || !reflect.DeepEqual(ex, effects[i]) {
			fail("event %d: effects %#v (%v) and %#v (%v), live %#v", i, ex, errx, ey, erry, effects[i])
			break
		}
	}
	if !reflect.DeepEqual(x, y) || !reflect.DeepEqual(&x, &b) {
		fail("the log applied twice gives\n%+v\n%+v, live\n%+v", x, y, b)
	}
	return ok
}

// checkModel checks b against a naive reading of log.
func checkModel(t *testing.T, b *Branch, log []messages.BranchEvent, ok *bool) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		*ok = false
	}
	accepted := map[messages.TurnID]bool{}
	gone := map[messages.TurnID]string{} // failed or indexed
	committed := map[messages.TurnID]bool{}
	var order []messages.TurnID
	for _, ev := range log {
		switch ev := ev.(type) {
		case messages.BranchCreated:
			for _, p := range ev.Pending {
				accepted[p.Turn] = true
				order = append(order, p.Turn)
			}
		case messages.TurnAccepted:
			if accepted[ev.Turn] {
				fail("turn %s accepted twice", ev.Turn)
			}
			accepted[ev.Turn] = true
			order = append(order, ev.Turn)
		case messages.TurnFailed:
			if committed[ev.Turn] {
				fail("turn %s failed after its commit", ev.Turn)
			}
			gone[ev.Turn] = "failed"
		case messages.StateCommitted:
			for _, turn := range ev.Turns {
				if committed[turn] || gone[turn] != "" {
					fail("turn %s committed twice or after failing", turn)
				}
				committed[turn] = true
			}
		case messages.TurnIndexed:
			if !committed[ev.Turn] {
				fail("turn %s indexed before its commit", ev.Turn)
			}
			gone[ev.Turn] = "indexed"
		}
	}
	// Tracked: exactly the accepted turns neither failed nor indexed, in
	// acceptance order, with increasing seqs.
	var want []messages.TurnID
	for _, turn := range order {
		if gone[turn] == "" {
			want = append(want, turn)
		}
	}
	var got []messages.TurnID
	inflight := 0
	for i, tr := range b.Turns {
		got = append(got, tr.ID)
		if i > 0 && tr.Seq <= b.Turns[i-1].Seq {
			fail("turn seqs out of order: %+v", b.Turns)
		}
		if inFlight(tr.Phase) {
			inflight++
		}
		if committed[tr.ID] != (tr.Phase == messages.PhaseStateCommitted) {
			fail("turn %s is %s, committed in the log: %v", tr.ID, tr.Phase, committed[tr.ID])
		}
	}
	if !slices.Equal(got, want) {
		fail("tracked turns %v, want %v", got, want)
	}
	if inflight > 1 {
		fail("%d turns in flight", inflight)
	}
	var failed, indexed uint64
	for _, g := range gone {
		if g == "failed" {
			failed++
		} else {
			indexed++
		}
	}
	if b.Failed != failed || b.Indexed != indexed || b.Committed != uint64(len(committed)) {
		fail("counters failed=%d indexed=%d committed=%d, want %d %d %d", b.Failed, b.Indexed, b.Committed, failed, indexed, len(committed))
	}
	if len(b.Window) > WindowMax || len(b.Window)%2 != 0 {
		fail("window of %d nodes", len(b.Window))
	}
	if b.Events != uint64(len(log)) {
		fail("Events = %d, want %d", b.Events, len(log))
	}
}

// pick returns a random prefix of s, nil when empty.
func pick[T any](r *rand.Rand, s []T) []T {
	if k := r.IntN(len(s) + 1); k > 0 {
		return s[:k]
	}
	return nil
}
