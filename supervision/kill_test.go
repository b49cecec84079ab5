package supervision

import (
	"errors"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

func TestKillSwitch(t *testing.T) {
	var nilSwitch *KillSwitch
	nilSwitch.Arm(KindStep)
	nilSwitch.Point(KindStep) // kills nothing

	k := &KillSwitch{}
	k.Point(KindIndexer) // not armed
	k.Arm(KindIndexer)
	k.Arm(KindIndexer)
	k.Point(KindLibrarian) // another kind's point
	for i := range 2 {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ErrKilled) {
					t.Fatalf("Point %d after two Arms: recovered %v, want ErrKilled", i, err)
				}
			}()
			k.Point(KindIndexer)
		}()
	}
	k.Point(KindIndexer) // both kills taken
	if n := k.Killed(KindIndexer); n != 2 {
		t.Fatalf("Killed(indexer) = %d, want 2", n)
	}
	if n := k.Killed(KindLibrarian); n != 0 {
		t.Fatalf("Killed(librarian) = %d, want 0", n)
	}
}

func TestParseKinds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{{"", len(Kinds), true}, {"all", len(Kinds), true}, {"step,indexer,step", 2, true}, {"branch, journal", 2, true}, {"provider", 0, false}} {
		got, err := ParseKinds(tc.in)
		if (err == nil) != tc.ok || len(got) != tc.want {
			t.Errorf("ParseKinds(%q) = %v, %v; want %d kinds, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// OnFailure sees the message the child failed on, unwrapped, before the
// strategy decides; every failure is counted.
func TestStrategyOnFailure(t *testing.T) {
	var seen []any
	s := &Strategy{Log: zerolog.Nop(), OnFailure: func(_ *actor.PID, _, msg any) { seen = append(seen, msg) },
		Decide: func(any) Directive { return Stop }}
	sup := &fakeSupervisor{}
	s.HandleFailure(nil, sup, actor.NewPID("local", "w"), actor.NewRestartStatistics(), "boom",
		&actor.MessageEnvelope{Message: "job"})
	if len(seen) != 1 || seen[0] != "job" || s.Failures() != 1 || len(sup.stopped) != 1 {
		t.Fatalf("seen %v, failures %d, stopped %d; want [job], 1, 1", seen, s.Failures(), len(sup.stopped))
	}
}
