// Package commit is the part of the stores' write path both engines
// (persistence/badgerdb, persistence/pgdb) share: a queue that hands the
// writers' ops to one committer goroutine in groups, and the counters
// their Stats report. What a group does with its ops is the engine's.
package commit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextinfinity/ctxinf/persistence"
)

// Call is the part of an op its writer waits on; an engine's op embeds
// it, and the committer ends it with Finish.
type Call struct {
	done chan struct{}
	err  error
}

// Finish ends the call with err (nil: the op committed) and wakes its
// writer, if it has one (a test may run an op through a committer's
// step without Submit). A call is finished once.
func (c *Call) Finish(err error) {
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

func (c *Call) call() *Call { return c }

// Op is an engine's op: a pointer to a struct that embeds Call.
type Op interface{ call() *Call }

// Queue hands ops to one committer (Run) in the order they come, until
// Close.
type Queue[O Op] struct {
	mu     sync.RWMutex // guards closed and the sends on ops
	closed bool
	ops    chan O
}

// NewQueue returns a queue holding at most buffer ops not yet taken.
func NewQueue[O Op](buffer int) *Queue[O] {
	return &Queue[O]{ops: make(chan O, buffer)}
}

// Submit hands o to the committer and waits until it is finished, or
// for ctx: persistence.ErrClosed once the queue is closed.
func (q *Queue[O]) Submit(ctx context.Context, o O) error {
	c := o.call()
	c.done = make(chan struct{})
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		return persistence.ErrClosed
	}
	select {
	case q.ops <- o:
	case <-ctx.Done():
		q.mu.RUnlock()
		return ctx.Err()
	}
	q.mu.RUnlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		// The write may still land; a caller that must know uses
		// ExpectParent on its next append.
		return ctx.Err()
	}
}

// Len is how many ops wait for the committer to take them.
func (q *Queue[O]) Len() int { return len(q.ops) }

// Closed reports whether Close was called.
func (q *Queue[O]) Closed() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.closed
}

// Close stops taking ops: Run returns once those already queued are
// committed. It reports whether this call closed the queue (false: it
// was closed already).
func (q *Queue[O]) Close() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.closed = true
	close(q.ops)
	return true
}

// Run is the committer: it calls commit with each group, the ops waiting
// (at most max) in the order they came, until the queue is closed and
// empty. commit must Finish every op of its group, now or later; the
// group's slice is reused once commit returns.
func (q *Queue[O]) Run(max int, commit func(group []O)) {
	group := make([]O, 0, max)
	for first := range q.ops {
		group = append(group[:0], first)
	drain:
		for len(group) < max {
			select {
			case o, ok := <-q.ops:
				if !ok {
					break drain
				}
				group = append(group, o)
			default:
				break drain
			}
		}
		commit(group)
		clear(group)
	}
}

// GroupStats are the Stats counts of one group, added to the store's
// (Counters.Add) once the group is durable, so that failed ops never
// count.
type GroupStats struct {
	Appends, BlobWrites, BlobDedups, StoredBytes, RawBytes uint64
}

// Counters are what a store's Stats reports.
type Counters struct {
	appends, blobWrites, blobDedups, groups, syncs, storedBytes, rawBytes, retries, headRejects atomic.Uint64
	// syncTimes and syncNanos are Stats.SyncTimes and Stats.SyncTime.
	syncTimes [len(persistence.SyncTimeBounds) + 1]atomic.Uint64
	syncNanos atomic.Int64
}

// Counted counts a write refused because its branch had moved on
// (Stats.HeadRejects), and returns err.
func (c *Counters) Counted(err error) error {
	if err != nil && (errors.Is(err, persistence.ErrHeadMismatch) || errors.Is(err, persistence.ErrDuplicate)) {
		c.headRejects.Add(1)
	}
	return err
}

// Add counts what a durable group wrote.
func (c *Counters) Add(g GroupStats) {
	c.appends.Add(g.Appends)
	c.blobWrites.Add(g.BlobWrites)
	c.blobDedups.Add(g.BlobDedups)
	c.storedBytes.Add(g.StoredBytes)
	c.rawBytes.Add(g.RawBytes)
}

// Group counts a group written; synced, one whose write was synced
// (made durable) and took took.
func (c *Counters) Group(synced bool, took time.Duration) {
	c.groups.Add(1)
	if synced {
		c.syncs.Add(1)
		c.syncTimes[persistence.SyncTimeBucket(took)].Add(1)
		c.syncNanos.Add(int64(took))
	}
}

// Retried counts a group (or a purge) tried again (Stats.Retries).
func (c *Counters) Retried() { c.retries.Add(1) }

// Stats is what the counters hold.
func (c *Counters) Stats() persistence.Stats {
	st := persistence.Stats{
		Appends: c.appends.Load(), BlobWrites: c.blobWrites.Load(), BlobDedups: c.blobDedups.Load(),
		Groups: c.groups.Load(), Syncs: c.syncs.Load(),
		StoredBytes: c.storedBytes.Load(), RawBytes: c.rawBytes.Load(),
		Retries: c.retries.Load(), HeadRejects: c.headRejects.Load(),
	}
	for i := range c.syncTimes {
		st.SyncTimes[i] = c.syncTimes[i].Load()
	}
	st.SyncTime = time.Duration(c.syncNanos.Load())
	return st
}
