package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/messages"
)

// retrier paces the jobs a branch asks for again. lost counts the jobs
// of this instance lost or failed in a row (workLost, no answer, an
// error): past maxLostJobs each is asked again after a wait (wait), so
// that a job that always kills its worker does not loop, and none is
// given up. retrying counts the timers of those waits (foldRetry,
// indexAgain) not yet fired; a branch with one is busy. foldRetrying: a
// fold waits for one; indexWaiting: the turns whose index jobs wait for
// one. A job that succeeds asks for all of them at once (retryNow): its
// worker is well again.
type retrier struct {
	c            *branchCore
	lost         int
	retrying     int
	foldRetrying bool
	indexWaiting map[messages.TurnID]struct{}
	// summarizing says a summary is on its way; foldAgain asks for the
	// fold due now; index asks for the index job of turn now.
	summarizing func() bool
	foldAgain   func(ctx actor.Context)
	index       func(ctx actor.Context, turn messages.TurnID)
}

// maxLostJobs bounds the jobs lost or failed in a row that a branch
// asks for again at once (an index job that failed waits indexRetry);
// past it each waits retrier.wait.
const maxLostJobs = 5

// retryBase is the first wait of retrier.wait, maxRetryWait its longest
// (Runtime.retryBase and Runtime.retryMax start as them).
const (
	retryBase    = time.Second
	maxRetryWait = 10 * time.Second
)

// wait is the wait before a job is asked again after r.lost jobs
// were lost or failed in a row: none up to maxLostJobs, then
// Runtime.retryBase doubling up to Runtime.retryMax. A job is never given
// up: its work is durable, and a branch with work due and nothing asked
// must make progress.
func (r *retrier) wait() time.Duration {
	n := r.lost - maxLostJobs
	if n <= 0 {
		return 0
	}
	d := r.c.rt.retryBase
	for i := 1; i < n && d < r.c.rt.retryMax; i++ {
		d *= 2
	}
	return min(d, r.c.rt.retryMax)
}

// foldRetry makes a branch ask for the fold due, after retrier.wait.
type foldRetry struct{ to *retrier }

// foldSoon asks for the fold due now (foldAgain), or after a wait when
// jobs were lost in a row (wait); a fold asked in the meantime (a turn's, a
// commit's) goes first, and the timer then finds a summary on its way.
func (r *retrier) foldSoon(ctx actor.Context) {
	wait := r.wait()
	if wait <= 0 {
		r.foldAgain(ctx)
		return
	}
	if r.foldRetrying {
		return
	}
	r.foldRetrying = true
	r.retrying++
	after(ctx, wait, &foldRetry{to: r})
}

// indexLater asks for the index job of turn again after wait, or after
// r.wait() if longer.
func (r *retrier) indexLater(ctx actor.Context, turn messages.TurnID, wait time.Duration) {
	if wait = max(wait, r.wait()); wait <= 0 {
		r.index(ctx, turn)
		return
	}
	if _, ok := r.indexWaiting[turn]; ok {
		return // its timer is set
	}
	r.indexWaiting[turn] = struct{}{}
	r.retrying++
	after(ctx, wait, &indexAgain{to: r, turn: turn})
}

// indexCommitted asks for the index job of turn if it is committed and
// not indexed yet.
func (r *retrier) indexCommitted(ctx actor.Context, turn messages.TurnID) {
	if t, ok := r.c.b.Turn(turn); ok && t.Phase == messages.PhaseStateCommitted {
		r.index(ctx, turn)
	}
}

// retryNow asks at once for the jobs waiting for a retry timer, once a
// job succeeded: the timers still fire, and find nothing left to ask.
func (r *retrier) retryNow(ctx actor.Context) {
	if r.foldRetrying {
		r.foldRetrying = false
		if !r.summarizing() {
			r.foldAgain(ctx)
		}
	}
	for turn := range r.indexWaiting {
		delete(r.indexWaiting, turn)
		r.indexCommitted(ctx, turn)
	}
}

// indexAgain asks for the index job of turn again.
type indexAgain struct {
	to   *retrier
	turn messages.TurnID
}

// lostLog starts the warning that m's job was lost.
func (r *retrier) lostLog(m *workLost) *zerolog.Event {
	return r.c.rt.log.Warn().Str("branch", r.c.id.String()).Str("kind", string(m.kind)).Str("reason", m.reason).Dur("asked_again_in", r.wait())
}

// retryIndex asks again for the index job m names, whose wait is over,
// if it still waits.
func (r *retrier) retryIndex(ctx actor.Context, m *indexAgain) {
	if m.to != r {
		return // an earlier instance's: this one's recovery asked
	}
	r.retrying--
	if _, ok := r.indexWaiting[m.turn]; ok {
		delete(r.indexWaiting, m.turn)
		r.indexCommitted(ctx, m.turn)
	}
}

// retryFold asks for the fold due, its wait over, if it still waits.
func (r *retrier) retryFold(ctx actor.Context, m *foldRetry) {
	if m.to != r {
		return
	}
	r.retrying--
	if r.foldRetrying {
		r.foldRetrying = false
		if !r.summarizing() {
			r.foldAgain(ctx)
		}
	}
}
