package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	ppersist "github.com/asynkron/protoactor-go/persistence"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The branch registry: the root actor, which activates branch actors and
// passivates them, and the way a request reaches a branch's actor (pid,
// ask, request).

// activateReq asks root for branch id's actor, activated if need be.
type activateReq struct{ id messages.BranchID }

// deferred is work the supervision strategy runs on the root's goroutine.
type deferred struct{ f func() }

// passivateReq asks root to stop routing to branch id's actor pid.
type passivateReq struct {
	id  messages.BranchID
	pid *actor.PID
	// ifIdle is an idle branch's own request: root stops routing to it
	// and asks it (passivateNow) to stop if it is still idle, since a
	// request it accepted after asking (sent to the PID its caller held)
	// must not be cut off. Without ifIdle (Stop, Rebalance) root stops it.
	ifIdle bool
}

// passivateNow is root's answer to an idle branch's passivateReq: it is
// no longer routed to, and stops unless it took work meanwhile, in which
// case it says so (passivateCancel) and root routes to it again.
type passivateNow struct{}

// passivateCancel is a branch's answer to passivateNow when it took work
// after asking to passivate.
type passivateCancel struct {
	id  messages.BranchID
	pid *actor.PID
}

// root activates branch actors on their first message and passivates
// them when idle; state lives in the event log, so a passivated branch
// costs nothing but its rows. Activations that arrive while an old actor
// of the same branch is still stopping wait for it to terminate.
type root struct {
	rt       *Runtime
	stopping map[string]bool // by PID id: branch actors asked to stop, not yet terminated
	// asked are the idle branch actors asked to stop if still idle
	// (passivateNow), not yet terminated or routed to again, by PID id.
	asked   map[string]bool
	live    map[messages.BranchID]*actor.PID
	waiting map[messages.BranchID][]*actor.PID // requesters waiting for a stop to finish
	byPID   map[string]messages.BranchID
	spawned map[string]*actor.PID // by PID id: the PID spawn returned
}

func newRoot(r *Runtime) *root {
	return &root{rt: r, stopping: map[string]bool{}, asked: map[string]bool{}, live: map[messages.BranchID]*actor.PID{},
		waiting: map[messages.BranchID][]*actor.PID{}, byPID: map[string]messages.BranchID{},
		spawned: map[string]*actor.PID{}}
}

func branchName(id messages.BranchID) string { return "b-" + id.String() }

func branchOfPID(pid *actor.PID) (messages.BranchID, bool) {
	name := pid.Id
	if i := len(name) - 26; i >= 2 && name[i-2:i] == "b-" {
		id, err := messages.ParseID[messages.BranchID](name[i:])
		return id, err == nil
	}
	return messages.BranchID{}, false
}

func (ro *root) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *activateReq:
		if pid, ok := ro.live[m.id]; ok {
			ctx.Respond(pid)
			return
		}
		if _, stopping := ro.waiting[m.id]; stopping {
			ro.waiting[m.id] = append(ro.waiting[m.id], ctx.Sender())
			return
		}
		ctx.Respond(ro.spawn(ctx, m.id))
	case *passivateReq:
		if pid, ok := ro.live[m.id]; ok && pid.Equal(m.pid) {
			// Activations wait (waiting) until it stops or cancels.
			delete(ro.live, m.id)
			ro.waiting[m.id] = nil
			if m.ifIdle {
				ro.asked[pid.Id] = true
				ctx.Send(pid, &passivateNow{})
				return
			}
			ro.stopping[pid.Id] = true
			ctx.Stop(pid)
		} else if !m.ifIdle && ro.asked[m.pid.Id] {
			ro.hardStop(ctx, m.pid) // asked to passivate, and now told to stop
		}
	case *passivateCancel:
		ws, waiting := ro.waiting[m.id]
		if _, live := ro.live[m.id]; live || !waiting || !ro.asked[m.pid.Id] {
			return
		}
		delete(ro.waiting, m.id)
		delete(ro.asked, m.pid.Id)
		ro.live[m.id] = m.pid
		for _, w := range ws {
			ctx.Send(w, m.pid)
		}
	case *deferred:
		m.f()
	case *liveBranchesReq:
		live := make(map[messages.BranchID]*actor.PID, len(ro.live))
		for id, pid := range ro.live {
			live[id] = pid
		}
		ctx.Respond(live)
	case *stopBranchReq:
		ctx.Respond(ro.stop(ctx, m.id))
	case *actor.Terminated:
		delete(ro.stopping, m.Who.Id)
		delete(ro.asked, m.Who.Id)
		id, ok := ro.byPID[m.Who.Id]
		if !ok {
			return
		}
		delete(ro.byPID, m.Who.Id)
		if p := ro.spawned[m.Who.Id]; p != nil {
			delete(ro.spawned, m.Who.Id)
			ro.rt.gone.terminated(p)
			ro.rt.pids.CompareAndDelete(id, p)
		}
		if pid, live := ro.live[id]; live && pid.Equal(m.Who) {
			delete(ro.live, id) // stopped by supervision
		}
		if ws, stopping := ro.waiting[id]; stopping {
			delete(ro.waiting, id)
			if len(ws) > 0 {
				pid := ro.spawn(ctx, id)
				for _, w := range ws {
					ctx.Send(w, pid)
				}
			}
		}
	}
}

func (ro *root) spawn(ctx actor.Context, id messages.BranchID) any {
	if ro.rt.isDeleted(id) {
		return fmt.Errorf("%w: branch %s was deleted", persistence.ErrBranchNotFound, id)
	}
	if err := ro.rt.stoppedErr(id); err != nil {
		return err
	}
	props := actor.PropsFromProducer(func() actor.Actor { return newBranchActor(ro.rt, id) },
		actor.WithReceiverMiddleware(ppersist.Using(ro.rt.actorLog)), actor.WithSupervisor(ro.rt.stepSup))
	pid, err := ctx.SpawnNamed(props, branchName(id))
	if err != nil {
		return fmt.Errorf("activate branch %s: %w", id, err)
	}
	ro.live[id] = pid
	ro.byPID[pid.Id] = id
	ro.spawned[pid.Id] = pid
	ro.rt.gone.spawned(pid)
	return pid
}

// terminations holds a channel per live branch actor, closed when the
// actor terminates, so that a request to it stops waiting then. The zero
// value holds none.
type terminations struct {
	mu sync.Mutex
	m  map[*actor.PID]chan struct{}
}

// spawned opens the channel of pid, a branch actor root spawned.
func (g *terminations) spawned(pid *actor.PID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[*actor.PID]chan struct{}{}
	}
	g.m[pid] = make(chan struct{})
}

// terminated closes the channel of pid, which terminated.
func (g *terminations) terminated(pid *actor.PID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.m[pid])
	delete(g.m, pid)
}

// of returns a channel closed once the branch actor pid terminates:
// closed already for one that is not live.
func (g *terminations) of(pid *actor.PID) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.m[pid]; ok {
		return c
	}
	c := make(chan struct{})
	close(c)
	return c
}

// goneChan returns a channel closed once the branch actor pid terminates.
func (r *Runtime) goneChan(pid *actor.PID) <-chan struct{} { return r.gone.of(pid) }

// replyBox is a process that receives the answer to one request into a
// channel. An actor's answer is in the box as soon as the actor sends it,
// so once the actor has terminated an empty box means the request was
// never handled: a stopping actor drops what is left in its mailbox
// unread, and the caller should send again rather than wait out its
// timeout.
type replyBox struct{ ch chan any }

func (b *replyBox) SendUserMessage(_ *actor.PID, m any) {
	_, msg, _ := actor.UnwrapEnvelope(m)
	select {
	case b.ch <- msg:
	default: // one answer per request
	}
}

func (b *replyBox) SendSystemMessage(*actor.PID, any) {}

func (b *replyBox) Stop(*actor.PID) {}

// errNotHandled: the request never reached the actor or was dropped
// unread; sending it again is safe.
var errNotHandled = errors.New("actors: request not handled")

// errAbandoned: the request (claimable) timed out unread and was
// abandoned: it will never be carried out. errUnanswered: the actor took
// it, and did not answer in time (twice the timeout).
var (
	errAbandoned  = errors.New("actors: request abandoned unread")
	errUnanswered = errors.New("actors: request taken, not answered")
)

// request sends msg to pid and waits for the answer, the actor's end,
// ctx or timeout. A claimable request that times out unread is abandoned
// (errAbandoned); one the actor has taken is waited for once more as
// long, since it is being carried out (errUnanswered after that).
func (r *Runtime) request(ctx context.Context, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	gone := r.goneChan(pid)
	select {
	case <-gone:
		// Do not send to a terminated actor's PID: it resolves by name, and
		// may reach the next actor of the branch while protoactor is still
		// spawning it (the registry has it before its mailbox has handlers).
		return nil, errNotHandled
	default:
	}
	c, claims := msg.(claimable)
	box := &replyBox{ch: make(chan any, 1)}
	self, _ := r.sys.ProcessRegistry.Add(box, "ask"+r.sys.ProcessRegistry.NextId())
	keep := false
	defer func() {
		if !keep {
			r.sys.ProcessRegistry.Remove(self)
		}
	}()
	// unanswered gives up on a request the actor took: its answer will
	// come, and the box takes it then (rather than the dead letters,
	// which would print the answer while others use it).
	unanswered := func() (any, error) {
		keep = true
		go func() {
			select {
			case <-box.ch:
			case <-gone:
			}
			r.sys.ProcessRegistry.Remove(self)
		}()
		return nil, errUnanswered
	}
	r.sys.Root.RequestWithCustomSender(pid, msg, self)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	answer := func(v any) (any, error) {
		if _, ok := v.(*actor.DeadLetterResponse); ok {
			return nil, errNotHandled
		}
		return v, nil
	}
	for extended := false; ; {
		select {
		case v := <-box.ch:
			return answer(v)
		case <-gone:
			select {
			case v := <-box.ch:
				return answer(v)
			default:
				return nil, errNotHandled
			}
		case <-ctx.Done():
			deadline := errors.Is(ctx.Err(), context.DeadlineExceeded)
			switch {
			case !claims:
			case c.claimed().abandon():
				if deadline {
					return nil, errAbandoned
				}
			default:
				_, err := unanswered()
				if deadline {
					return nil, err
				}
			}
			return nil, ctx.Err()
		case <-timer.C:
			switch {
			case !claims:
				return nil, actor.ErrTimeout
			case c.claimed().abandon():
				return nil, errAbandoned
			case extended:
				return unanswered()
			}
			extended = true
			timer.Reset(timeout)
		}
	}
}

// requestWhat names what a claimable request asks for, for its
// TimeoutError.
func requestWhat(msg any) string {
	switch msg.(type) {
	case *submitReq:
		return "the turn"
	case *createReq, *forkReq:
		return "the branch"
	case *importReq:
		return "the import"
	case *resultsReq:
		return "the request with the tool results"
	}
	return "the request"
}

// pid returns branch id's actor: the one root last activated while it
// lives, else what root activates (if needed) now.
func (r *Runtime) pid(ctx context.Context, id messages.BranchID) (*actor.PID, error) {
	if r.isDeleted(id) {
		return nil, fmt.Errorf("%w: branch %s was deleted", persistence.ErrBranchNotFound, id)
	}
	if v, ok := r.pids.Load(id); ok {
		pid := v.(*actor.PID)
		select {
		case <-r.goneChan(pid):
			r.pids.CompareAndDelete(id, pid)
		default:
			return pid, nil
		}
	}
	res, err := r.sys.Root.RequestFuture(r.root, &activateReq{id: id}, r.cfg.RequestTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("activate branch %s: %w", id, err)
	}
	switch v := res.(type) {
	case *actor.PID:
		r.pids.Store(id, v)
		return v, nil
	case error:
		return nil, v
	}
	return nil, fmt.Errorf("activate branch %s: unexpected %T", id, res)
}

// ask sends msg to branch id's actor and waits for its answer; it retries
// once when the actor was passivated between activation and delivery.
func (r *Runtime) ask(ctx context.Context, id messages.BranchID, msg any) (any, error) {
	timeout := r.cfg.RequestTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, untilDeadline(d))
	}
	if err := r.placed(ctx, id, sessionOfMsg(msg)); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		pid, err := r.pid(ctx, id)
		if err != nil {
			return nil, err
		}
		res, err := r.request(ctx, pid, msg, timeout)
		if errors.Is(err, errNotHandled) {
			r.pids.CompareAndDelete(id, pid) // ask root again
			if c, ok := msg.(claimable); ok && c.claimed().taken() {
				// Taken and not answered: cannot happen (an actor that
				// ends answers the request in hand), and is not sent twice.
				return nil, fmt.Errorf("%w: branch %s stopped while handling the request", ErrInterrupted, id)
			}
			if attempt < 100 {
				continue // never delivered, or dropped unread: safe to send again
			}
			return nil, fmt.Errorf("%w: branch %s kept stopping", ErrInterrupted, id)
		}
		if errors.Is(err, actor.ErrTimeout) || errors.Is(err, errAbandoned) || errors.Is(err, errUnanswered) {
			if ferr := r.stoppedErr(id); ferr != nil {
				return nil, ferr
			}
			if errors.Is(err, actor.ErrTimeout) {
				return nil, fmt.Errorf("%w: branch %s", ErrTimeout, id)
			}
			te := &TimeoutError{Branch: id, Accepted: AcceptedUnknown, what: requestWhat(msg)}
			if errors.Is(err, errAbandoned) {
				te.Accepted = AcceptedNo
			}
			return nil, te
		}
		if err != nil {
			return nil, err
		}
		if e, ok := res.(error); ok {
			return nil, e
		}
		return res, nil
	}
}
