// Package supervision decides what happens when an actor fails: restart
// it after a backoff, or stop it and surface the error (STYLE.md:
// transient → restart with backoff; corruption or bad config → stop).
package supervision

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// Directive is what a Decider chooses for a failure.
type Directive int

// The directives.
const (
	Restart Directive = iota // transient: restart the actor after a backoff
	Stop                     // fatal: stop the actor and report the error
)

// Decider classifies a failure reason (the panic value: usually an error).
type Decider func(reason any) Directive

// Strategy is a one-for-one supervisor strategy with a decider, an
// exponential backoff between restarts and a restart limit per window.
type Strategy struct {
	Decide      Decider
	MaxRestarts int           // within Window; more stops the actor
	Window      time.Duration // e.g. one minute
	Backoff     time.Duration // first delay; doubles per recent failure
	MaxBackoff  time.Duration
	Log         zerolog.Logger
	// StopIsRecovery says that a stop is how this strategy handles
	// failures (a provider step is never run twice): it is logged as a
	// warning, not an error.
	StopIsRecovery bool
	// OnStop is called when an actor is stopped for good, with why.
	OnStop func(child *actor.PID, reason any)
	// OnFailure, if set, is called first for every failure, with the
	// message the child was handling when it failed (nil when none, or
	// when the failure came from outside a message): a worker's
	// supervisor tells whoever asked for that work that it was lost,
	// so that it is asked for again from the durable job.
	OnFailure func(child *actor.PID, reason, message any)
	// Stopping, if set, reports whether the supervisor has asked child to
	// stop: such a child is not restarted. protoactor's restart turns a
	// stopping actor back into a live one that never reports Terminated,
	// so a restart that reaches an actor after its stop would leave
	// whoever waits for that stop waiting for ever. It is called on the
	// supervisor's goroutine.
	Stopping func(child *actor.PID) bool
	// Defer, if set, runs f after d on the supervisor's goroutine (by a
	// message to it), so that a delayed restart is ordered with the
	// supervisor's stops; without it f runs on a timer goroutine.
	Defer func(d time.Duration, f func())

	restarts, failures atomic.Int64
}

var _ actor.SupervisorStrategy = (*Strategy)(nil)

// Restarts counts the restarts this strategy has ordered.
func (s *Strategy) Restarts() int64 { return s.restarts.Load() }

// Failures counts the failures this strategy has handled, whatever it
// decided for them.
func (s *Strategy) Failures() int64 { return s.failures.Load() }

// HandleFailure implements actor.SupervisorStrategy.
func (s *Strategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason any, message any) {
	s.failures.Add(1)
	if s.OnFailure != nil {
		s.OnFailure(child, reason, actor.UnwrapEnvelopeMessage(message))
	}
	d := Restart
	if s.Decide != nil {
		d = s.Decide(reason)
	}
	if d == Restart {
		rs.Fail()
		if s.MaxRestarts > 0 && rs.NumberOfFailures(s.Window) > s.MaxRestarts {
			reason = fmt.Errorf("restarted more than %d times in %v; last failure: %v", s.MaxRestarts, s.Window, reason)
			d = Stop
		}
	}
	if d == Stop {
		l := s.Log.Error()
		if s.StopIsRecovery {
			l = s.Log.Warn()
		}
		l.Str("actor", child.Id).Str("reason", fmt.Sprint(reason)).Msg("actor stopped")
		if s.OnStop != nil {
			s.OnStop(child, reason)
		}
		sup.StopChildren(child)
		return
	}
	s.restarts.Add(1)
	delay := s.backoff(rs.NumberOfFailures(s.Window))
	s.Log.Warn().Str("actor", child.Id).Str("reason", fmt.Sprint(reason)).Dur("backoff", delay).Msg("actor restarting")
	restart := func() {
		if s.Stopping != nil && s.Stopping(child) {
			return // its stop wins: it terminates instead
		}
		sup.RestartChildren(child)
	}
	switch {
	case delay <= 0:
		restart()
	case s.Defer != nil:
		s.Defer(delay, restart)
	default:
		time.AfterFunc(delay, restart)
	}
}

// backoff returns the delay before the n-th recent restart: none for the
// first, then Backoff doubling up to MaxBackoff.
func (s *Strategy) backoff(n int) time.Duration {
	if n <= 1 || s.Backoff <= 0 {
		return 0
	}
	d := s.Backoff
	for i := 2; i < n && d < s.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, max(s.MaxBackoff, s.Backoff))
}
