package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// idler passivates its branch actor once it has been idle for
// Config.IdleAfter and runs nothing (busy), asking root first.
type idler struct {
	c    *branchCore
	busy func() bool // the branch has work in flight that passivation would interrupt
	// active is when the actor last took a message; idle is the timer of
	// the next idleCheck.
	active mark
	idle   *time.Timer
}

// idleCheck makes a branch actor passivate if it has been idle for
// Config.IdleAfter, or look again when it could be.
type idleCheck struct{ to *idler }

// start starts the idle timer, once the branch is replayed.
func (i *idler) start(ctx actor.Context) {
	i.idle = after(ctx, i.c.rt.cfg.IdleAfter, &idleCheck{i})
}

// check asks root to passivate the actor if it has been idle for
// Config.IdleAfter and runs nothing, or looks again when it could be.
func (i *idler) check(ctx actor.Context, m *idleCheck) {
	if m.to != i {
		return // an earlier instance's
	}
	if wait := i.c.rt.cfg.IdleAfter - i.active.elapsed(); wait > 0 || i.busy() {
		if wait <= 0 {
			wait = i.c.rt.cfg.IdleAfter
		}
		i.idle = after(ctx, wait, &idleCheck{i})
		return
	}
	ctx.Send(ctx.Parent(), &passivateReq{id: i.c.id, pid: ctx.Self(), ifIdle: true})
}

// passivate stops the actor, root routing nothing new to it; what came
// before root's answer was handled. Work taken since asking keeps the
// actor, and root is told so.
func (i *idler) passivate(ctx actor.Context) {
	if i.busy() {
		ctx.Send(ctx.Parent(), &passivateCancel{id: i.c.id, pid: ctx.Self()})
		i.stop()
		i.start(ctx)
		return
	}
	ctx.Stop(ctx.Self())
}

// stop stops the idle timer of this instance, if it has one.
func (i *idler) stop() {
	if i.idle != nil {
		i.idle.Stop()
	}
}
