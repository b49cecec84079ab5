package actors

import "time"

// The runtime reads time two ways, and this file is the only one that
// reads the machine's clock directly.
//
// A wall-clock stamp that is stored (a row's Created or Updated, an id's
// milliseconds, an event's At) or that decides something a user sees (a
// stopped branch's retry time, a retention cutoff) comes from Config.Now,
// so that a test's clock shows up wherever stamps are written: through
// branchActor.now, or r.cfg.Now.
//
// A span measured against the runtime's own timers (an idle actor's
// passivation, how long a summary has gone unanswered) or reported as a
// latency (ObserveAssembly, ObserveRetrieval, the librarian's log) is
// read from the monotonic clock, with a mark: a test clock frozen at
// one instant must not stop the timers' checks from seeing time pass.

// mark is an instant on the monotonic clock.
type mark struct{ t time.Time }

// markNow returns the current instant on the monotonic clock.
func markNow() mark { return mark{time.Now()} }

// elapsed returns the time passed since m.
func (m mark) elapsed() time.Duration { return time.Since(m.t) }

// same reports whether m and o are the same instant.
func (m mark) same(o mark) bool { return m.t.Equal(o.t) }

// untilDeadline returns the time left before deadline d, a context's
// (contexts' deadlines are on the machine's clock, not Config.Now).
func untilDeadline(d time.Time) time.Duration { return time.Until(d) }
