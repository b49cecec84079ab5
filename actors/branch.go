package actors

import (
	"context"
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
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/supervision"
)

// Transcript payload types in the context store.
const (
	TypeUserMessage      uint64 = 1
	TypeAssistantMessage uint64 = 2
	CodecJSON            uint32 = 1
)

// Requests a branch actor answers (with ctx.Respond).
type (
	createReq struct {
		claim
		key     *persistence.IdempotencyRow // committed with the branch, if set
		ev      messages.BranchCreated
		session *persistence.SessionRow // set when the branch opens a new session
		row     persistence.BranchRow
		// importing: the branch is built by an import (SessionImport),
		// which folds nothing until it ends; imp, if set, marks the
		// import as under way in the same commit.
		importing bool
		imp       *persistence.ImportRow
	}
	submitReq struct {
		claim
		// key and hash: the idempotency key the turn is sent under ("":
		// none) and the hash of its text and model.
		key, hash string
		msg       messages.Message
		turn      messages.TurnID // chosen by the caller: a resent request finds its turn
		// within, if positive, defers the commit of the turn's
		// acceptance (Runtime.SubmitDeferred).
		within time.Duration
		model  string // selected first, unless "" (SubmitOptions.Model)
		// memoryTools, if not nil, is selected first too
		// (SubmitOptions.MemoryTools).
		memoryTools *messages.MemoryTools
		client      core.Client // what an API client sent with the turn (SubmitOptions.Client)
	}
	// pinReq pins fact (op pinAdd), unpins pin id (pinRemove), edits pin
	// id to fact (pinEdit), or lists the pins (pinList).
	pinReq struct {
		op   pinOp
		id   uint64
		fact string
	}
	commitReq  struct{}
	inspectReq struct{}
	wakeReq    struct{}
	forkReq    struct {
		claim
		at messages.NodeID // zero: the head
	}
	cancelReq struct{}              // cancel the turn in flight
	modelReq  struct{ name string } // select a model for the next turns
	// memoryToolsReq selects the memory tools setting of the next turns.
	memoryToolsReq struct{ setting messages.MemoryTools }
	killReq        struct{} // chaos: panic now
)

// Messages from the actors a branch works with.
type (
	stepDone struct {
		turn            messages.TurnID
		step            messages.StepID
		provider, model string
		started         time.Time
		resp            providers.Response
		err             error
		counters        streamCounters // the step's journal's
		hash            string         // of the context the recipe rebuilds, if asked
		// committed, if not nil, holds back the fsync of the step's
		// journal (finishJournal) until the branch has committed what
		// the step leads to; finishStep closes it.
		committed chan struct{}
	}
	toolsDone struct {
		turn    messages.TurnID
		step    messages.StepID // the step whose calls ran
		outputs messages.Items
		// cancelled: the turn was cancelled while the tools ran.
		cancelled bool
	}
	summaryDone struct {
		epoch   uint64
		turns   []messages.TurnID
		summary string
		err     error
		took    time.Duration // the summarizer's call
	}
	indexDone struct {
		turn messages.TurnID
		rows []persistence.ChunkRow
		vecs []persistence.VectorRow
		ups  []persistence.TermUpdate
		err  error
		took time.Duration // chunking and embedding the turn
	}
	shrinkDone struct {
		epoch   uint64 // of the head summary shrunk
		summary string
		err     error
	}
	// workLost: a worker failed while doing one of this branch's jobs
	// (one of the three is set), and restarts; the branch asks again.
	workLost struct {
		kind    supervision.Kind
		reason  string
		summary *summarizeReq
		shrink  *shrinkReq
		index   *indexReq
	}
)

// branchActor is one branch: the single writer of its event log, its
// transcript branch and its lifecycle rows. It dispatches: Receive hands
// each message to the component that owns its concern, and run hands
// each effect of an event the branch applied to the same components.
// They share branchCore (the branch's state machine and the writer of
// its log) and own their own state; what they do is decided by the core
// (internal/core), and the rows each event writes by lifecycle.Tx. The
// actor itself keeps its life (replay, recovery, its end) and the
// assembly of a turn's context (assembly.go).
type branchActor struct {
	ppersist.Mixin
	*branchCore
	loop    turnLoop      // the turns: submitReq, resultsReq, cancelReq, modelReq, stepDone, toolsDone, flushUnackedReq
	folds   folder        // commitReq, summaryDone, shrinkDone, summaryCheck
	index   indexJobs     // indexDone, flushIndexedReq
	retries retrier       // foldRetry, indexAgain
	imports importer      // importReq, importItemsReq, importDoneReq
	pins    pinBoard      // pinReq
	queries branchQueries // inspectReq, forkReq
	idler   idler         // idleCheck, passivateNow
	msgs    messageCache  // the decoded messages of the window, the pending turns and the turn in flight
	// asker is the sender of the request being handled, until answered.
	asker *actor.PID
	// ending is set once this instance is stopping or failed (ended):
	// it handles nothing more.
	ending bool
}

func newBranchActor(rt *Runtime, id messages.BranchID) *branchActor {
	a := &branchActor{branchCore: &branchCore{rt: rt, rows: rt.db, actorLog: rt.actorLog, id: id, b: core.Branch{Policy: *rt.cfg.Fold}},
		msgs: newMessageCache(rt.db)}
	a.mixin, a.onApply, a.onCommit = &a.Mixin, a.applied, a.committed
	a.loop = turnLoop{branchCore: a.branchCore, msgs: &a.msgs, folds: &a.folds, queries: branchQueries{a.branchCore},
		assemble: a.assemble, fitContext: a.fitContext, streams: map[messages.TurnID]*TurnStream{}}
	a.idler = idler{c: a.branchCore, busy: a.busy}
	a.retries = retrier{c: a.branchCore, indexWaiting: map[messages.TurnID]struct{}{},
		summarizing: func() bool { return a.folds.summarizing != 0 }, foldAgain: a.folds.again,
		index: func(ctx actor.Context, turn messages.TurnID) { a.run(ctx, []core.Effect{core.Index{Turn: turn}}) }}
	a.folds = folder{c: a.branchCore, retries: &a.retries, msgs: &a.msgs, run: a.run, resume: a.loop.resumeShrunk}
	a.index = indexJobs{c: a.branchCore, retries: &a.retries, msgs: &a.msgs, asked: map[messages.TurnID]*indexReq{},
		turnRuns: func() bool { t, ok := a.b.InFlight(); return ok && !a.loop.idleTurn(t) }}
	a.imports = importer{c: a.branchCore, msgs: &a.msgs, index: &a.index, run: a.run, modelEvents: a.loop.modelEvents}
	a.pins, a.queries = pinBoard{a.branchCore}, branchQueries{a.branchCore}
	return a
}

// applied runs the effects of ev, which the branch just applied.
func (a *branchActor) applied(ctx actor.Context, ev messages.BranchEvent, effects []core.Effect) {
	a.index.countBacklog()
	if obs := a.rt.cfg.Observe; obs != nil {
		obs(a.id, ev)
	}
	a.run(ctx, effects)
}

func (a *branchActor) Receive(ctx actor.Context) {
	// Persisting may deliver a RequestSnapshot to this actor re-entrantly,
	// which replaces the context's current envelope: capture the sender
	// first and reply to it explicitly, never with ctx.Respond.
	sender := ctx.Sender()
	msg := ctx.Message()
	if a.ending {
		// Stopping: protoactor still delivers messages while the
		// children stop. What a step or job answers now (a step the stop
		// cancelled fails with context.Canceled) is not recorded: the
		// streams were told the turn was interrupted, as recovery
		// records. A request is left unclaimed, for its caller to send
		// again once this instance is gone.
		return
	}
	if c, ok := msg.(claimable); ok && !c.claimed().take() {
		return // its caller stopped waiting before it was read, and was told nothing was stored
	}
	respond := func(v any) {
		a.asker = nil
		if sender != nil {
			ctx.Send(sender, v)
		}
	}
	if answeredOnFailure(msg) {
		a.asker = sender // answered by respond, or on failure by Restarting
	}
	if !timerCheck(msg) {
		a.idler.active = markNow()
	}
	if a.loop.unacked && toldAfterFlush(msg) {
		a.flush() // nothing is told while a turn's acceptance is held
	}
	switch m := msg.(type) {
	// The actor's life: replay, snapshots, passivation, its end.
	case *wrapperspb.BytesValue:
		a.replay(m.Value)
	case *ppersist.RequestSnapshot:
		a.snapshot()
	case *ppersist.ReplayComplete:
		a.replayed(ctx)
	case *idleCheck:
		a.idler.check(ctx, m)
	case *passivateNow:
		a.idler.passivate(ctx)
	case *actor.Stopping:
		a.idler.stop()
		a.flushOnStop()
		a.ended(ctx)
		a.rt.mem.drop(a.id) // its index goes with it
	case *actor.Restarting:
		a.idler.stop()
		a.ended(ctx) // what it held is dropped, as a crash drops it
	case *killReq:
		panic(errors.New("chaos: branch actor killed"))

	// Requests.
	case *createReq:
		respond(a.create(ctx, m))
	case *submitReq:
		respond(answer(a.loop.submit(ctx, m)))
	case *resultsReq:
		respond(answer(a.loop.submitResults(ctx, m)))
	case *pinReq:
		respond(answer(a.pins.pin(ctx, m)))
	case *commitReq:
		a.folds.commitPending(ctx)
		respond(okReply{})
	case *inspectReq:
		a.index.flush() // what it reports indexed is searchable
		respond(a.queries.info())
	case *forkReq:
		respond(answer(a.queries.forkPoint(m.at)))
	case *wakeReq:
		respond(okReply{})
	case *cancelReq:
		respond(errOrOK(a.loop.cancel(ctx)))
	case *debugReq:
		respond(answer(a.debugNext(m.text)))
	case *modelReq:
		respond(errOrOK(a.loop.selectModel(ctx, m.name)))
	case *memoryToolsReq:
		respond(errOrOK(a.loop.selectMemoryTools(ctx, m.setting)))
	case *importReq:
		respond(answer(a.imports.exchanges(ctx, m.exchanges, m.key)))
	case *importItemsReq:
		respond(errOrOK(a.imports.items(ctx, m.items)))
	case *importDoneReq:
		a.imports.done(ctx)
		respond(okReply{})
	case *forceReq:
		respond(errOrOK(a.force(ctx, m.chunks)))

	// What the actors it works with answer.
	case *stepDone:
		a.loop.finishStep(ctx, m)
	case *toolsDone:
		a.loop.toolsDone(ctx, m)
	case *summaryDone:
		a.folds.commit(ctx, m)
	case *shrinkDone:
		a.folds.shrunk(ctx, m)
	case *indexDone:
		a.index.finished(ctx, m)
	case *workLost:
		a.workLost(ctx, m)

	// Its own timers.
	case *jobCheck:
		a.checkJob(ctx, m)
	case *indexAgain:
		a.retries.retryIndex(ctx, m)
	case *foldRetry:
		a.retries.retryFold(ctx, m)
	case *summaryCheck:
		a.folds.summaryDue(ctx, m)
	case *flushIndexedReq:
		a.index.flushDue()
	case *flushUnackedReq:
		a.loop.acceptanceDue(m)
	}
}

// answeredOnFailure reports whether msg is a request whose asker, if
// the actor fails while handling it, is told so (ended) rather than
// left to time out.
func answeredOnFailure(msg any) bool {
	switch msg.(type) {
	case *createReq, *submitReq, *pinReq, *commitReq, *inspectReq, *forkReq, *wakeReq, *cancelReq, *modelReq, *memoryToolsReq,
		*debugReq, *resultsReq:
		return true
	}
	return false
}

// timerCheck reports whether msg is a check one of the actor's timers
// sent, which is not activity: it does not keep the actor from
// passivating.
func timerCheck(msg any) bool {
	switch msg.(type) {
	case *idleCheck, *summaryCheck:
		return true
	}
	return false
}

// toldAfterFlush reports whether msg is a request whose answer may tell
// of what the actor holds: a deferred acceptance is committed first.
func toldAfterFlush(msg any) bool {
	switch msg.(type) {
	case *createReq, *pinReq, *commitReq, *inspectReq, *forkReq, *wakeReq, *cancelReq, *modelReq, *memoryToolsReq, *debugReq,
		*importReq, *forceReq, *importItemsReq, *importDoneReq, *resultsReq:
		return true
	}
	return false
}

// answer is a request's answer: err if it is set, else v.
func answer[T any](v T, err error) any {
	if err != nil {
		return err
	}
	return v
}

// replayed resumes the work of the branch once its log is replayed, and
// starts its idle timer.
func (a *branchActor) replayed(ctx actor.Context) {
	a.index.countBacklog()
	a.recover(ctx)
	a.idler.start(ctx)
}

// ended is the end of this instance (stopped, or failed and about to be
// replaced by one rebuilt from the log): its step stops, and whoever
// reads a stream learns the turn was interrupted, as recovery records.
func (a *branchActor) ended(ctx actor.Context) {
	a.ending = true
	a.index.release()
	a.loop.stop()
	if a.asker != nil {
		// The request this instance was handling failed with it: say
		// so now rather than leave the caller to time out.
		ctx.Send(a.asker, fmt.Errorf("%w: branch %s failed while handling the request; retry", ErrInterrupted, a.id))
		a.asker = nil
	}
	a.loop.interrupt()
}

type okReply struct{}

func errOrOK(err error) any {
	if err != nil {
		return err
	}
	return okReply{}
}

// busy says whether the branch has work in flight that passivation would
// interrupt. Pending turns are not: they are in the log, and the fold
// policy folds them when it is due, in whichever instance; nor is a turn
// that awaits its client's tool results, which runs nothing.
func (a *branchActor) busy() bool {
	t, inFlight := a.b.InFlight()
	return inFlight && !a.loop.idleTurn(t) || a.folds.summarizing != 0 || len(a.index.asked) > 0 || a.retries.retrying > 0
}

// recover resumes work after replay (SRD §6.5): interrupted turns fail,
// pending turns are summarized, committed turns are indexed.
func (a *branchActor) recover(ctx actor.Context) {
	if !a.b.Created {
		return
	}
	if _, err := a.rows.Import(context.Background(), a.b.Session); err == nil {
		a.imports.importing = true // its import goes on (one cut short was dropped at Open)
	}
	evs, effects := a.b.Recover(a.now())
	for _, ev := range evs {
		tx := a.txFor(ev)
		if f, ok := ev.(messages.TurnFailed); ok {
			// The interrupted step gets its row, with the output its
			// journal recovered, in the turn's failure's commit.
			if t, ok := a.b.Turn(f.Turn); ok {
				if row, ok := a.loop.interruptedStep(t); ok {
					tx.Steps = append(tx.Steps, row)
				}
			}
		}
		a.persist(ctx, ev, tx)
	}
	for _, e := range effects {
		if ab, ok := e.(core.Abandon); ok {
			// A tool loop ends with what it recorded; its step cut off
			// mid-stream, if any, gets its row with that commit.
			if t, ok := a.b.Turn(ab.Turn); ok {
				if row, ok := a.loop.interruptedStep(t); ok {
					a.loop.abandon(ctx, ab.Turn, ab.Reason, interruptedToolText, &row)
					continue
				}
			}
		}
		a.run(ctx, []core.Effect{e})
	}
	a.folds.resumeManual(ctx) // a commit asked of the instance before this one goes on
}

func (a *branchActor) create(ctx actor.Context, m *createReq) any {
	evs, err := a.b.Create(m.ev)
	if err != nil {
		return err
	}
	tx := lifecycle.Tx(&a.b, m.ev, a.now(), lifecycle.Stored{})
	tx.Branches = []persistence.BranchRow{m.row}
	if m.session != nil {
		tx.Sessions = []persistence.SessionRow{*m.session}
	}
	if m.imp != nil {
		tx.Imports = []persistence.ImportRow{*m.imp}
	}
	a.imports.importing = m.importing
	if m.importing {
		a.rt.mem.fresh(a.id)
	}
	if m.key != nil {
		tx.Keys = []persistence.IdempotencyRow{*m.key}
	}
	a.persist(ctx, evs[0], tx)
	return okReply{}
}

// run executes effects in order.
func (a *branchActor) run(ctx actor.Context, effects []core.Effect) {
	for _, e := range effects {
		switch e := e.(type) {
		case core.PrepareContext:
			if a.imports.importing {
				continue // an imported turn that failed: it is failed next
			}
			a.loop.prepare(ctx, e.Turn)
		case core.RunTools:
			a.loop.runTools(ctx, e)
		case core.AwaitResults:
			a.loop.awaitResults(ctx, e)
		case core.ContinueLoop:
			a.loop.continueLoop(ctx, e.Turn, e.Step)
		case core.RetryStep:
			a.loop.continueLoop(ctx, e.Turn, e.Step)
		case core.Abandon:
			text := e.Text
			if text == "" {
				text = interruptedToolText
			}
			a.loop.abandon(ctx, e.Turn, e.Reason, text, nil)
		case core.Summarize:
			if a.imports.importing {
				continue // the import brings its states
			}
			a.folds.summarize(ctx, e)
		case core.Index:
			if a.imports.stashing {
				a.imports.stashed = append(a.imports.stashed, e) // its turn is not committed yet
				continue
			}
			a.index.ask(ctx, e.Turn)
		case core.TurnDone:
			a.loop.turnDone(e)
		}
	}
}
