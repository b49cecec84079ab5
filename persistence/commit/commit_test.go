package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/contextinfinity/ctxinf/persistence"
)

type testOp struct {
	n int
	Call
}

// The committer takes the ops waiting in the order they came, at most
// max at a time, and each writer gets its own op's result; once closed,
// the queue refuses new ops and Run returns after the ones queued.
func TestQueueGroupsInOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue[*testOp](16)
		// Seven ops queued before the committer runs, each in place
		// before the next (its writer blocked on its result): it takes
		// them as groups of at most three, in order.
		var wg sync.WaitGroup
		errs := make([]error, 7)
		for i := range 7 {
			o := &testOp{n: i}
			wg.Go(func() { errs[i] = q.Submit(context.Background(), o) })
			synctest.Wait()
		}
		if q.Len() != 7 {
			t.Fatalf("Len() = %d, want 7", q.Len())
		}
		var groups [][]int
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			q.Run(3, func(g []*testOp) {
				var ns []int
				for _, o := range g {
					ns = append(ns, o.n)
					if o.n%2 == 1 {
						o.Finish(fmt.Errorf("op %d refused", o.n))
					} else {
						o.Finish(nil)
					}
				}
				groups = append(groups, ns)
			})
		}()
		wg.Wait()
		for i, err := range errs {
			if (err != nil) != (i%2 == 1) {
				t.Errorf("Submit(op %d) = %v, want an error only for the odd ops", i, err)
			}
		}
		if !q.Close() || q.Close() {
			t.Error("Close() twice: want true, then false")
		}
		<-ran
		if want := [][]int{{0, 1, 2}, {3, 4, 5}, {6}}; !slices.EqualFunc(groups, want, slices.Equal) {
			t.Errorf("groups %v, want %v", groups, want)
		}
		if err := q.Submit(context.Background(), &testOp{}); !errors.Is(err, persistence.ErrClosed) || !q.Closed() {
			t.Errorf("Submit after Close = %v (Closed() %v), want ErrClosed", err, q.Closed())
		}
	})
}

// A writer whose context has ended gets its error, whether its op was
// queued or not.
func TestQueueSubmitStopsWithItsContext(t *testing.T) {
	t.Parallel()
	q := NewQueue[*testOp](1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Submit(ctx, &testOp{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Submit with its context done = %v, want context.Canceled", err)
	}
}

// Counters add what durable groups wrote and count the syncs, their
// times, the retries and the writes refused because a branch moved on.
func TestCounters(t *testing.T) {
	t.Parallel()
	var c Counters
	c.Add(GroupStats{Appends: 2, BlobWrites: 1, BlobDedups: 1, StoredBytes: 10, RawBytes: 30})
	c.Add(GroupStats{Appends: 1})
	c.Group(true, 3*time.Millisecond)
	c.Group(false, time.Hour)
	c.Retried()
	other := errors.New("other")
	for _, err := range []error{nil, other, persistence.ErrHeadMismatch, fmt.Errorf("x: %w", persistence.ErrDuplicate)} {
		if got := c.Counted(err); got != err {
			t.Errorf("Counted(%v) = %v, want it back", err, got)
		}
	}
	st := c.Stats()
	var times uint64
	for _, n := range st.SyncTimes {
		times += n
	}
	if st.Appends != 3 || st.BlobWrites != 1 || st.BlobDedups != 1 || st.StoredBytes != 10 || st.RawBytes != 30 ||
		st.Groups != 2 || st.Syncs != 1 || times != 1 || st.SyncTime != 3*time.Millisecond || st.Retries != 1 || st.HeadRejects != 2 {
		t.Errorf("Stats() = %+v", st)
	}
}
