package supervision

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// fakeSupervisor records what a strategy asks of it.
type fakeSupervisor struct{ restarted, stopped []*actor.PID }

func (f *fakeSupervisor) Children() []*actor.PID            { return nil }
func (f *fakeSupervisor) EscalateFailure(any, any)          {}
func (f *fakeSupervisor) RestartChildren(p ...*actor.PID)   { f.restarted = append(f.restarted, p...) }
func (f *fakeSupervisor) StopChildren(p ...*actor.PID)      { f.stopped = append(f.stopped, p...) }
func (f *fakeSupervisor) ResumeChildren(pids ...*actor.PID) {}

func TestStrategy(t *testing.T) {
	child := actor.NewPID("local", "b-1")
	var deferred []func()
	stopping := false
	s := &Strategy{
		Decide:      func(r any) Directive { return map[bool]Directive{true: Stop, false: Restart}[r == "fatal"] },
		MaxRestarts: 3, Window: time.Minute, Backoff: time.Millisecond, MaxBackoff: time.Second,
		Log:      zerolog.Nop(),
		Stopping: func(*actor.PID) bool { return stopping },
		Defer:    func(_ time.Duration, f func()) { deferred = append(deferred, f) },
	}
	sup, rs := &fakeSupervisor{}, actor.NewRestartStatistics()

	// The first failure restarts at once, the next after a backoff.
	s.HandleFailure(nil, sup, child, rs, errors.New("boom"), nil)
	if len(sup.restarted) != 1 || len(deferred) != 0 {
		t.Fatalf("first failure: restarted %d, deferred %d", len(sup.restarted), len(deferred))
	}
	s.HandleFailure(nil, sup, child, rs, errors.New("boom"), nil)
	if len(sup.restarted) != 1 || len(deferred) != 1 {
		t.Fatalf("second failure: restarted %d, deferred %d", len(sup.restarted), len(deferred))
	}
	// A child asked to stop in the meantime is not restarted: its stop wins.
	stopping = true
	deferred[0]()
	if len(sup.restarted) != 1 {
		t.Fatalf("a stopping child was restarted")
	}
	s.HandleFailure(nil, sup, child, rs, errors.New("boom"), nil)
	deferred[1]()
	if len(sup.restarted) != 1 {
		t.Fatalf("a stopping child was restarted")
	}
	// Past the limit, or on a fatal failure, the child stops.
	stopping = false
	s.HandleFailure(nil, sup, child, rs, errors.New("boom"), nil)
	if len(sup.stopped) != 1 {
		t.Fatalf("past the restart limit: stopped %d", len(sup.stopped))
	}
	s.HandleFailure(nil, sup, child, actor.NewRestartStatistics(), "fatal", nil)
	if len(sup.stopped) != 2 || s.Restarts() != 3 {
		t.Fatalf("fatal failure: stopped %d, restarts %d", len(sup.stopped), s.Restarts())
	}
}
