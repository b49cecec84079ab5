package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

func TestFoldDue(t *testing.T) {
	t.Parallel()
	b := newScript(t).run(created...).b
	b.Policy = Policy{K: 6, B: 4, SafetyTurns: 10}
	if _, ok := b.FoldDue(FoldAuto); ok {
		t.Fatal("a fold is due with nothing pending")
	}
	for i := range 6 {
		b.Turns = append(b.Turns, Turn{ID: id[messages.TurnID](fmt.Sprint("P", i)), Seq: uint64(i + 1), Phase: messages.PhaseResponseFinalized})
		s, ok := b.FoldDue(FoldAuto)
		msgs := 2 * (i + 1)
		switch {
		case msgs <= 10 && ok:
			t.Errorf("%d pending messages: a fold is due (%v), want none until K+B=10 is exceeded", msgs, s)
		case msgs > 10 && (!ok || len(s.Turns) != 3 || s.Reason != FoldOverflow || s.Turns[0] != b.Turns[0].ID):
			t.Errorf("%d pending messages: %+v, %v; want the oldest 3 turns folded, leaving K=6 messages", msgs, s, ok)
		}
	}
	// The budget trigger folds down to K, and at least one turn; manual
	// folds everything.
	b.Turns = b.Turns[:2]
	if s, ok := b.FoldDue(FoldBudget); !ok || len(s.Turns) != 1 || s.Reason != FoldBudget {
		t.Errorf("budget fold of 2 turns under K: %+v, %v; want the oldest turn", s, ok)
	}
	if s, ok := b.FoldDue(FoldManual); !ok || len(s.Turns) != 2 {
		t.Errorf("manual fold: %+v, %v; want both turns", s, ok)
	}
	// The safety trigger: with a large buffer, the tenth pending turn.
	b.Policy = Policy{K: 4, B: 100, SafetyTurns: 3}
	b.Turns = append(b.Turns, Turn{ID: id[messages.TurnID]("P9"), Seq: 9, Phase: messages.PhaseResponseFinalized})
	if s, ok := b.FoldDue(FoldAuto); !ok || s.Reason != FoldSafety || len(s.Turns) != 1 {
		t.Errorf("safety fold: %+v, %v; want the oldest turn (K=4 keeps two)", s, ok)
	}
}

// TestFoldPolicyProperty drives random conversations under random
// policies, with a librarian that answers late, out of order or never,
// pins that make summaries stale and turns that fail, and checks the
// contract's invariant: every finalized turn is at every moment either
// pending (sent verbatim in the next prompt) or folded into a committed
// state, never neither; a fold takes the oldest pending turns; a fold is
// asked for exactly when a trigger holds; and once the librarian has
// caught up, no more than K+B messages are pending.
func TestFoldPolicyProperty(t *testing.T) {
	t.Parallel()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for run := range 200 {
		p := Policy{K: r.IntN(11), B: r.IntN(7)}
		if r.IntN(2) == 0 {
			p.SafetyTurns = 1 + r.IntN(12)
		}
		if err := foldRun(r, p, 150); err != nil {
			t.Fatalf("run %d, policy %+v: %v (seed %d)", run, p, err, seed)
		}
	}
}

func foldRun(r *rand.Rand, p Policy, steps int) error {
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	b := &Branch{Policy: p}
	var asked []Summarize // folds the librarian has not answered yet
	finalized := map[messages.TurnID]bool{}
	folded := map[messages.TurnID]bool{}
	apply := func(evs []messages.BranchEvent, err error) error {
		if err != nil {
			return err
		}
		for _, ev := range evs {
			effects, err := b.Apply(ev)
			if err != nil {
				return err
			}
			if f, ok := ev.(messages.ResponseFinalized); ok {
				finalized[f.Turn] = true
			}
			if c, ok := ev.(messages.StateCommitted); ok {
				for _, id := range c.Turns {
					folded[id] = true
				}
			}
			for _, e := range effects {
				s, ok := e.(Summarize)
				if !ok {
					continue
				}
				pending := b.Pending()
				if len(s.Turns) == 0 || len(s.Turns) > len(pending) {
					return fmt.Errorf("fold of %d turns with %d pending", len(s.Turns), len(pending))
				}
				for i, id := range s.Turns {
					if pending[i].ID != id {
						return fmt.Errorf("fold %v is not the oldest pending turns", s.Turns)
					}
				}
				asked = append(asked, s)
			}
		}
		return nil
	}
	check := func() error {
		pending := map[messages.TurnID]bool{}
		for _, t := range b.Pending() {
			pending[t.ID] = true
		}
		for id := range finalized {
			if pending[id] == folded[id] {
				return fmt.Errorf("turn %s: pending %v, folded %v (want exactly one)", id, pending[id], folded[id])
			}
		}
		// A fold is due exactly when a trigger holds.
		n := len(b.Pending())
		due := n > 0 && (2*n > p.K+p.B || (p.SafetyTurns > 0 && n >= p.SafetyTurns)) && n-p.K/2 > 0
		if _, ok := b.FoldDue(FoldAuto); ok != due {
			return fmt.Errorf("%d pending turns: FoldDue = %v, want %v", n, ok, due)
		}
		return nil
	}
	if err := apply(b.Create(messages.BranchCreated{Session: messages.NewID[messages.SessionID](now()),
		Branch: messages.NewID[messages.BranchID](now()), At: now()})); err != nil {
		return err
	}
	for range steps {
		switch k := r.IntN(10); {
		case k < 5: // a turn
			turn := messages.NewID[messages.TurnID](now())
			if err := apply(b.Submit(turn, now())); err != nil {
				return err
			}
			step := messages.NewID[messages.StepID](now())
			if err := apply(b.Start(turn, step, now())); err != nil {
				return err
			}
			if r.IntN(8) == 0 {
				if err := apply(b.Fail(turn, messages.FailTurn, "boom", now())); err != nil {
					return err
				}
				break
			}
			reply := messages.NewID[messages.NodeID](now())
			if err := apply(b.Finalize(turn, step, reply, messages.StepOutcome{Kind: messages.OutcomeCompleted}, 0, 0, now())); err != nil {
				return err
			}
		case k < 8 && len(asked) > 0: // the librarian answers one fold
			i := r.IntN(len(asked))
			s := asked[i]
			asked = slices.Delete(asked, i, i+1)
			fold := s.Turns[:1+r.IntN(len(s.Turns))] // it may fold a prefix
			state := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now()), Seq: b.State.Seq + 1,
				Summary: "s", Pinned: b.State.Pinned}
			evs, err := b.Commit(state, fold, s.Epoch, now())
			switch {
			case errors.Is(err, ErrStaleEpoch), errors.Is(err, ErrInvalid):
				// Stale or overtaken: the shell asks again if a fold is due.
				if again, ok := b.FoldDue(FoldAuto); ok {
					asked = append(asked, again)
				}
			case err != nil:
				return err
			default:
				if err := apply(evs, nil); err != nil {
					return err
				}
			}
		case k == 8: // a pin makes folds in flight stale
			if err := apply(b.Pin(fmt.Sprint("fact ", r.IntN(1000)), PinLimits{}, now())); err != nil {
				return err
			}
		default: // the librarian loses a request
			if len(asked) > 0 {
				asked = asked[:len(asked)-1]
				if again, ok := b.FoldDue(FoldAuto); ok && r.IntN(2) == 0 {
					asked = append(asked, again)
				}
			}
		}
		if err := check(); err != nil {
			return err
		}
	}
	// The librarian catches up: at most K+B messages stay pending (and
	// fewer than SafetyTurns turns).
	for range 1000 {
		s, ok := b.FoldDue(FoldAuto)
		if !ok {
			break
		}
		state := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now()), Seq: b.State.Seq + 1, Pinned: b.State.Pinned}
		if err := apply(b.Commit(state, s.Turns, s.Epoch, now())); err != nil {
			return err
		}
	}
	n := len(b.Pending())
	if 2*n > p.K+p.B && n > p.K/2 {
		return fmt.Errorf("after catching up: %d pending messages, K+B = %d", 2*n, p.K+p.B)
	}
	if p.SafetyTurns > 0 && n >= p.SafetyTurns && n > p.K/2 {
		return fmt.Errorf("after catching up: %d pending turns, safety trigger at %d", n, p.SafetyTurns)
	}
	return check()
}
