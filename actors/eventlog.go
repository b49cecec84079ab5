package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	ppersist "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/contextinfinity/ctxinf/actors/lifecycle"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Event and snapshot encodings in the actor log: one tag byte, then JSON.
const (
	tagEvent    = 'E'
	tagSnapshot = 'S'
)

// flushIndexedReq commits the index results a branch holds, once
// Config.IndexFlushDelay passed; flushUnackedReq is the deadline of turn's
// deferred acceptance (SubmitDeferred).
type (
	flushIndexedReq struct{}
	flushUnackedReq struct{ turn messages.TurnID }
)

// branchCore is the part of a branch actor every component shares: the
// branch (its state machine, core.Branch), the runtime and the store's
// rows it reads, and the writer of its event log. Every event is
// written here (persist), applied to b, and its effects handed to
// onApply; every write tells onCommit, which commits what the
// components held.
type branchCore struct {
	rt       *Runtime
	rows     branchRows // the store, read
	actorLog branchLog  // the event log's own: what the Mixin persists is committed by Flush
	mixin    *ppersist.Mixin
	id       messages.BranchID
	b        core.Branch
	// onApply runs after ev is applied, with its effects; onCommit after
	// every write.
	onApply  func(ctx actor.Context, ev messages.BranchEvent, effects []core.Effect)
	onCommit func()
}

func (c *branchCore) now() time.Time { return c.rt.cfg.Now() }

// snapshot persists the branch as a snapshot of its log, which commits
// what was held with it.
func (c *branchCore) snapshot() {
	b, err := json.Marshal(&c.b)
	if err != nil {
		panic(fmt.Errorf("%w: encode snapshot: %v", errFatal, err))
	}
	c.mixin.PersistSnapshot(wrapperspb.Bytes(append([]byte{tagSnapshot}, b...)))
	c.onCommit()
}

// flushOnStop commits what a stopping branch holds: index results (their
// index jobs would run again otherwise) and a deferred acceptance (its
// turn is in flight, and would be lost). A failure is only logged: the
// jobs are still there, and nobody was told of the turn.
func (a *branchActor) flushOnStop() {
	if !a.index.holding() && !a.loop.unacked {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			a.rt.log.Warn().Str("branch", a.id.String()).Interface("error", p).Msg("commit index results at stop")
		}
	}()
	a.flush()
}

// committed is called after every write of this actor, which commits
// whatever it held: a deferred acceptance is durable, and so are the
// index results, whose chunks go into the retrieval index.
func (a *branchActor) committed() {
	a.loop.committed()
	a.index.committed()
}

// replay applies a stored event or snapshot; effects are not run.
func (c *branchCore) replay(data []byte) {
	if len(data) == 0 {
		panic(fmt.Errorf("%w: empty record in the log of branch %s", errFatal, c.id))
	}
	switch data[0] {
	case tagSnapshot:
		// The actor log gave this snapshot only if checkSnapshot read it.
		b, err := decodeSnapshot(data)
		if err != nil {
			panic(fmt.Errorf("%w: snapshot of branch %s: %v", errFatal, c.id, err))
		}
		b.Policy = *c.rt.cfg.Fold
		c.b = b
	case tagEvent:
		ev, err := messages.UnmarshalBranchEvent(data[1:])
		if err == nil {
			_, err = c.b.Apply(ev)
		}
		if err != nil {
			panic(fmt.Errorf("%w: event of branch %s: %v", errFatal, c.id, err))
		}
	default:
		panic(fmt.Errorf("%w: unknown record tag %q in the log of branch %s", errFatal, data[0], c.id))
	}
}

// decodeSnapshot decodes a snapshot record of a branch's log.
func decodeSnapshot(data []byte) (core.Branch, error) {
	var b core.Branch
	if len(data) == 0 || data[0] != tagSnapshot {
		return b, errors.New("not a snapshot record")
	}
	err := json.Unmarshal(data[1:], &b)
	return b, err
}

// checkSnapshot is the actor log's check of a branch snapshot: one that
// does not decode is replaced, on replay, by the snapshot before it and
// the events after that (persistence.ActorLog).
func checkSnapshot(_ string, data []byte) error {
	_, err := decodeSnapshot(data)
	return err
}

// badSnapshot logs a branch snapshot the actor log found unreadable.
func (r *Runtime) badSnapshot(actor string, index uint64, err error) {
	r.log.Warn().Err(err).Str("actor", actor).Uint64("index", index).
		Msg("unreadable snapshot: the branch replays from the snapshot before it and the events after that")
}

// persist writes ev with the rows and appends it implies (one atomic
// transaction), then applies it and runs its effects. A write that fails
// panics inside the persistence provider: the supervisor restarts the
// actor, which replays and so never holds state that was not written.
func (c *branchCore) persist(ctx actor.Context, ev messages.BranchEvent, tx *persistence.Tx) {
	c.persistEnvelope(ctx, ev, tx, false)
}

// persistHeld is persist for an event that the effects it triggers
// always follow with another persisted event before anything is
// acknowledged (a submitted turn is followed by its ResponseStarted or
// TurnFailed): the two are committed together, one synced write instead
// of two. The caller flushes before it answers anyone.
func (c *branchCore) persistHeld(ctx actor.Context, ev messages.BranchEvent, tx *persistence.Tx) {
	c.persistEnvelope(ctx, ev, tx, true)
}

// flush commits any held event.
func (c *branchCore) flush() {
	c.actorLog.Flush(c.mixin.Name())
	c.onCommit()
}

func (c *branchCore) persistEnvelope(ctx actor.Context, ev messages.BranchEvent, tx *persistence.Tx, hold bool) {
	data, err := messages.MarshalBranchEvent(ev)
	if err != nil {
		panic(fmt.Errorf("%w: encode event: %v", errFatal, err))
	}
	env := persistence.NewEnvelope(append([]byte{tagEvent}, data...), tx)
	env.Hold = hold
	c.mixin.PersistReceive(env)
	if !hold {
		c.onCommit()
	}
	effects, err := c.b.Apply(ev)
	if err != nil {
		panic(fmt.Errorf("%w: apply %T: %v", errFatal, ev, err))
	}
	c.onApply(ctx, ev, effects)
}

func (c *branchCore) persistAll(ctx actor.Context, evs []messages.BranchEvent) {
	for _, ev := range evs {
		c.persist(ctx, ev, c.txFor(ev))
	}
}

// txFor returns the lifecycle rows and jobs that go with ev
// (lifecycle.Tx), with what the store holds that they carry over.
func (c *branchCore) txFor(ev messages.BranchEvent) *persistence.Tx {
	var stored lifecycle.Stored
	if e, ok := ev.(messages.TurnIndexed); ok {
		if t, ok := c.b.Turn(e.Turn); ok {
			if rows, err := c.rows.TurnRows(context.Background(), c.id, t.Seq, 1); err == nil && len(rows) == 1 {
				stored.StateSeq, stored.SummarizeMicros = rows[0].StateSeq, rows[0].SummarizeMicros
			}
		}
	}
	return lifecycle.Tx(&c.b, ev, c.now(), stored)
}
