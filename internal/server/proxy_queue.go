package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// The proxy's turns on one conversation run one at a time, in the order
// they came: a branch takes a new turn once the one before has its
// response (SRD §6.2), and clients of the OpenAI APIs send a
// conversation's requests concurrently (LangChain's batch()) and retry a
// 409 only a couple of times. A request waits in its conversation's queue
// (at most Options.ProxyQueue waiting, each at most ProxyQueueWait) for
// the turn before it to end, then submits; a full queue is 429, a wait
// that runs out 409, both with Retry-After. The HTTP API does not queue:
// it answers a busy branch with 409 turn_in_flight and Retry-After.

// proxyQueues are the conversations' queues, by branch.
type proxyQueues struct {
	mu sync.Mutex
	q  map[messages.BranchID]*proxyQueue
}

// proxyQueue is one conversation's: the request whose turn runs (busy)
// and those waiting, first in line first.
type proxyQueue struct {
	busy    bool
	waiting []chan struct{} // closed when it is that request's turn
}

// waiting returns how many requests wait on branch b (for tests).
func (ps *proxyQueues) waiting(b messages.BranchID) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if q := ps.q[b]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// enter waits until it is this request's turn on branch b, and returns
// the function that passes the turn on to the next request. limit is the
// most requests that may wait.
func (ps *proxyQueues) enter(ctx context.Context, b messages.BranchID, limit int, wait time.Duration) (func(), error) {
	ps.mu.Lock()
	if ps.q == nil {
		ps.q = map[messages.BranchID]*proxyQueue{}
	}
	q := ps.q[b]
	if q == nil {
		q = &proxyQueue{}
		ps.q[b] = q
	}
	leave := func() {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		if len(q.waiting) > 0 {
			next := q.waiting[0]
			q.waiting = q.waiting[1:]
			close(next)
			return
		}
		q.busy = false
		delete(ps.q, b)
	}
	if !q.busy {
		q.busy = true
		ps.mu.Unlock()
		return leave, nil
	}
	if len(q.waiting) >= limit {
		ps.mu.Unlock()
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: api.CodeOverloaded, Message: fmt.Sprintf(
			"%d requests already wait for this conversation's turns, the limit is %d (server.proxy_queue)", len(q.waiting), limit)}
	}
	mine := make(chan struct{})
	q.waiting = append(q.waiting, mine)
	ps.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case <-mine:
		return leave, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = &apiError{Status: http.StatusConflict, Code: api.CodeBusy, Message: fmt.Sprintf(
			"waited %s (server.proxy_queue_wait) for this conversation's turns before this one to end", wait)}
	}
	ps.mu.Lock()
	for i, c := range q.waiting {
		if c == mine {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			ps.mu.Unlock()
			return nil, err
		}
	}
	ps.mu.Unlock()
	leave() // it was this request's turn already: pass it on
	return nil, err
}

// proxyRun runs a turn of branch b for a proxied request, after the
// turns of b before it (proxyQueues): submit starts the turn (or goes on
// with one: Runtime.SubmitToolResults) and returns its stream; proxyRun
// returns that stream and the function to call once the request is done
// with the turn. A turn the branch still refuses as busy (its client went
// away and the turn goes on, or a turn came through the HTTP API) is sent
// again until the wait runs out.
func (s *Server) proxyRun(r *http.Request, b messages.BranchID, submit func(context.Context) (*actors.TurnStream, error)) (*actors.TurnStream, func(), error) {
	limit, wait := s.opts.ProxyQueue, s.opts.ProxyQueueWait
	if limit == 0 { // no queue: a busy branch is 409 at once
		st, err := submit(r.Context())
		return st, func() {}, err
	}
	deadline := time.Now().Add(wait)
	leave, err := s.proxy.queues.enter(r.Context(), b, limit, wait)
	if err != nil {
		return nil, nil, err
	}
	backoff := 20 * time.Millisecond
	for {
		st, err := submit(r.Context())
		if err == nil {
			return st, leave, nil
		}
		left := time.Until(deadline)
		if !errors.Is(err, core.ErrBusy) || left <= 0 {
			leave()
			return nil, nil, err
		}
		t := time.NewTimer(min(backoff, left))
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			leave()
			return nil, nil, r.Context().Err()
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
