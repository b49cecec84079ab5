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
		model  string      // selected first, unless "" (SubmitOptions.Model)
		client core.Client // what an API client sent with the turn (SubmitOptions.Client)
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
	killReq   struct{}              // chaos: panic now
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
	}
	indexDone struct {
		turn messages.TurnID
		rows []persistence.ChunkRow
		vecs []persistence.VectorRow
		ups  []persistence.TermUpdate
		err  error
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
// transcript branch and its lifecycle rows.
type branchActor struct {
	ppersist.Mixin
	*branchCore
	idler   idler         // idleCheck, passivateNow
	retries retrier       // foldRetry, indexAgain
	folds   folder        // commitReq, summaryDone, shrinkDone, summaryCheck
	index   indexJobs     // indexDone, flushIndexedReq
	imports importer      // importReq, importItemsReq, importDoneReq
	pins    pinBoard      // pinReq
	queries branchQueries // inspectReq, forkReq

	streams     map[messages.TurnID]*TurnStream
	step        messages.StepID            // the step streaming now
	tools       messages.StepID            // the step whose tool calls run now
	cancelStep  context.CancelFunc         // cancels the step or the tools running
	cancelled   bool                       // the user cancelled the turn in flight
	recipe      *persistence.ContextRecipe // of the turn in flight's first step
	sizeRetries int                        // steps of the turn in flight the provider rejected for size
	// deferring is set while a deferred submit runs its effects, so that
	// prepare leaves the turn's acceptance held; unacked while it is
	// held after (SubmitDeferred), until this actor's next write.
	deferring, unacked bool
	counters           streamCounters // of the turn's finished steps
	// usage and lastModel are the tokens used by the provider steps run
	// for the turn's current stream (since its acceptance, or since
	// SubmitToolResults) and the model id of the last one (Update.Usage,
	// Update.Model).
	usage     providers.Usage
	lastModel string
	// retryAfter is the wait the provider asked for when it failed the
	// turn's last step (Update.RetryAfter), 0 when it asked none.
	retryAfter time.Duration
	// stepLimited is the turn whose step past tools.max_steps called the
	// client's tools too: it awaits them, and its answer says the limit
	// was reached (Update.StepLimit).
	stepLimited messages.TurnID
	// stall is the step of a client's tool loop that failed after the
	// client's results, if one did: its turn waits for the client to
	// retry them (stalledStep).
	stall *stalledStep
	// results are the streams started by tool results sent under an
	// idempotency key (SubmitToolResults), by key, while their turn is in
	// flight: a repeat follows them.
	results map[string]*TurnStream
	msgs    messageCache // the decoded messages of the window, the pending turns and the turn in flight
	// hasher hashes the contexts of this branch's steps, keeping the
	// JSON of the last one's messages for the next.
	hasher contextHasher
	// keys are the idempotency keys of the turns this instance accepted
	// that are not committed yet (a deferred acceptance), by key; the
	// store holds the others.
	keys map[string]persistence.IdempotencyRow
	// asker is the sender of the request being handled, until answered.
	asker *actor.PID
	// ending is set once this instance is stopping or failed (ended):
	// it handles nothing more.
	ending bool
}

func newBranchActor(rt *Runtime, id messages.BranchID) *branchActor {
	a := &branchActor{branchCore: &branchCore{rt: rt, rows: rt.db, actorLog: rt.actorLog, id: id, b: core.Branch{Policy: *rt.cfg.Fold}},
		streams: map[messages.TurnID]*TurnStream{},
		msgs:    newMessageCache(rt.db)}
	a.mixin, a.onApply, a.onCommit = &a.Mixin, a.applied, a.committed
	a.idler = idler{c: a.branchCore, busy: a.busy}
	a.retries = retrier{c: a.branchCore, indexWaiting: map[messages.TurnID]struct{}{},
		summarizing: func() bool { return a.folds.summarizing != 0 }, foldAgain: a.folds.again,
		index: func(ctx actor.Context, turn messages.TurnID) { a.run(ctx, []core.Effect{core.Index{Turn: turn}}) }}
	a.folds = folder{c: a.branchCore, retries: &a.retries, msgs: &a.msgs, run: a.run, resume: a.resumeShrunk}
	a.index = indexJobs{c: a.branchCore, retries: &a.retries, msgs: &a.msgs, asked: map[messages.TurnID]*indexReq{},
		turnRuns: func() bool { t, ok := a.b.InFlight(); return ok && !a.idleTurn(t) }}
	a.imports = importer{c: a.branchCore, msgs: &a.msgs, index: &a.index, run: a.run, modelEvents: a.modelEvents}
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
	if a.unacked && toldAfterFlush(msg) {
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
		respond(answer(a.submit(ctx, m)))
	case *resultsReq:
		respond(answer(a.submitResults(ctx, m)))
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
		respond(errOrOK(a.cancel(ctx)))
	case *debugReq:
		respond(answer(a.debugNext(m.text)))
	case *modelReq:
		respond(errOrOK(a.selectModel(ctx, m.name)))
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
		a.finishStep(ctx, m)
	case *toolsDone:
		a.toolsDone(ctx, m)
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
		a.acceptanceDue(m)
	}
}

// answeredOnFailure reports whether msg is a request whose asker, if
// the actor fails while handling it, is told so (ended) rather than
// left to time out.
func answeredOnFailure(msg any) bool {
	switch msg.(type) {
	case *createReq, *submitReq, *pinReq, *commitReq, *inspectReq, *forkReq, *wakeReq, *cancelReq, *modelReq, *debugReq, *resultsReq:
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
	case *createReq, *pinReq, *commitReq, *inspectReq, *forkReq, *wakeReq, *cancelReq, *modelReq, *debugReq, *importReq, *forceReq,
		*importItemsReq, *importDoneReq, *resultsReq:
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
	if a.cancelStep != nil {
		a.cancelStep()
	}
	if a.asker != nil {
		// The request this instance was handling failed with it: say
		// so now rather than leave the caller to time out.
		ctx.Send(a.asker, fmt.Errorf("%w: branch %s failed while handling the request; retry", ErrInterrupted, a.id))
		a.asker = nil
	}
	for id, s := range a.streams {
		s.push(a.doneUpdate(Update{Done: true, Phase: messages.PhaseFailed, Err: core.InterruptedReason,
			Outcome: messages.FailedOutcome(messages.FailInterrupted, core.InterruptedReason)}))
		delete(a.streams, id)
	}
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
	return inFlight && !a.idleTurn(t) || a.folds.summarizing != 0 || len(a.index.asked) > 0 || a.retries.retrying > 0
}

// idleTurn reports whether t, the turn in flight, runs nothing: it
// awaits its client's tool results, or its client's retry of them
// (stall).
func (a *branchActor) idleTurn(t core.Turn) bool {
	return t.Awaiting() || a.stall != nil && a.stall.turn == t.ID
}

// doneUpdate is u, a stream's last update, with the turn's journal
// counters, and the usage and model of the steps run for the stream.
func (a *branchActor) doneUpdate(u Update) Update {
	u.setCounters(a.counters)
	u.Usage, u.Model = a.usage, a.lastModel
	return u
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
				if row, ok := a.interruptedStep(t); ok {
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
				if row, ok := a.interruptedStep(t); ok {
					a.abandon(ctx, ab.Turn, ab.Reason, interruptedToolText, &row)
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

func (a *branchActor) submit(ctx actor.Context, m *submitReq) (*TurnStream, error) {
	msg, turn, within, model := m.msg, m.turn, m.within, m.model
	if msg.Role != messages.RoleUser {
		return nil, fmt.Errorf("%w: message role is %s, want user", persistence.ErrInvalidArgument, msg.Role)
	}
	if turn.IsZero() {
		return nil, fmt.Errorf("%w: turn id is zero", persistence.ErrInvalidArgument)
	}
	if s, ok, err := a.submitted(turn); err != nil || ok {
		return s, err // the same request again, or an id already used
	}
	if m.key != "" {
		if s, ok, err := a.keyed(m.key, m.hash); err != nil || ok {
			return s, err // a repeat under the same idempotency key
		}
	}
	payload, err := msg.MarshalJSON()
	if err != nil {
		return nil, err
	}
	// Refused here, before anything is accepted: the store would refuse
	// the append, and its commit failing would fail the branch.
	if err := a.rows.CheckPayload("the user message (its text stored twice, as text and rendered text)", len(payload)); err != nil {
		return nil, err
	}
	now := a.now()
	var sel []messages.BranchEvent
	if model != "" {
		if sel, err = a.modelEvents(model); err != nil {
			return nil, err
		}
	}
	if model == "" {
		model = a.b.Model
	}
	if err := a.rt.CheckParams(model, m.client.Params); err != nil {
		return nil, err // the turn's model cannot take the client's settings
	}
	// A turn awaiting its client's tool results ends first: its client
	// went on without them.
	a.abandonAwaiting(ctx)
	evs, err := a.b.SubmitFor(turn, m.client, now)
	if err != nil {
		return nil, err
	}
	// The turn is valid (decided on a state the model does not touch):
	// its model is selected first, held, and committed with its
	// acceptance.
	for _, ev := range sel {
		a.persistHeld(ctx, ev, a.txFor(ev))
	}
	ev := evs[0].(messages.TurnAccepted)
	tip := a.b.Tip
	tx := a.txFor(ev)
	tx.Appends = []persistence.TxAppend{{Branch: a.id, ID: turn,
		Req: persistence.AppendRequest{Payload: payload, TypeTag: TypeUserMessage, Codec: CodecJSON, ExpectParent: &tip}}}
	if m.key != "" {
		// The key is committed with the turn's acceptance (TX-0): a
		// repeat finds the turn, and a turn lost finds no key.
		row := persistence.IdempotencyRow{Scope: persistence.ScopeTurn, Owner: a.id, Key: m.key, Hash: m.hash, Turn: turn, Created: now.UTC()}
		tx.Keys = []persistence.IdempotencyRow{row}
		if a.keys == nil {
			a.keys = map[string]persistence.IdempotencyRow{}
		}
		a.keys[m.key] = row
	}
	s := newTurnStream(a.id, turn, ev.Seq)
	a.streams[turn] = s
	a.msgs.put(turn, msg)
	a.deferring = within > 0
	a.persistHeld(ctx, ev, tx) // and its effects: prepare starts the step
	a.deferring = false
	if within > 0 && !a.step.IsZero() {
		// Deferred, and the step runs: its acceptance is committed with
		// what the step leads to, or by the deadline.
		a.unacked = true
		after(ctx, within, &flushUnackedReq{turn: turn})
		return s, nil
	}
	a.flush()
	return s, nil
}

// submitted returns the stream of turn if this branch already accepted it
// as its latest turn: the live one while it streams, else one that
// reports where the turn got to. An id the store holds for any other node
// is refused (committing it would fail the branch). A new id costs one
// store lookup.
func (a *branchActor) submitted(turn messages.TurnID) (*TurnStream, bool, error) {
	if s := a.streams[turn]; s != nil {
		return s, true, nil
	}
	var seq uint64
	var phase messages.TurnPhase
	var reason string
	var out messages.StepOutcome
	if t, ok := a.b.Turn(turn); ok && t.Seq == a.b.TurnSeq {
		seq, phase, reason, out = t.Seq, t.Phase, t.Reason, t.Outcome
	} else if ok {
		return nil, false, fmt.Errorf("%w: turn id %s is already used", persistence.ErrInvalidArgument, turn)
	} else if _, err := a.rows.Node(context.Background(), turn); errors.Is(err, persistence.ErrNodeNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	} else if rows, err := a.rows.TurnRows(context.Background(), a.id, a.b.TurnSeq, 1); err == nil && len(rows) == 1 && rows[0].ID == turn {
		seq, phase, reason = rows[0].Seq, rows[0].Phase, rows[0].Reason
		if phase == messages.PhaseFailed {
			out = messages.FailedOutcome(rows[0].Code, reason)
		} else if out.Kind.UnmarshalText([]byte(rows[0].Outcome)) != nil {
			out.Kind = messages.OutcomeCompleted // a row written before outcomes were
		}
	} else {
		return nil, false, fmt.Errorf("%w: turn id %s is already used", persistence.ErrInvalidArgument, turn)
	}
	s := newTurnStream(a.id, turn, seq)
	if phase >= messages.PhaseResponseFinalized {
		s.push(Update{Done: true, Phase: phase, Outcome: out, Err: reason})
	} else {
		a.streams[turn] = s // in flight: it ends with the turn
	}
	return s, true, nil
}

// run executes effects in order.
func (a *branchActor) run(ctx actor.Context, effects []core.Effect) {
	for _, e := range effects {
		switch e := e.(type) {
		case core.PrepareContext:
			if a.imports.importing {
				continue // an imported turn that failed: it is failed next
			}
			a.prepare(ctx, e.Turn)
		case core.RunTools:
			a.runTools(ctx, e)
		case core.AwaitResults:
			a.awaitResults(ctx, e)
		case core.ContinueLoop:
			a.continueLoop(ctx, e.Turn, e.Step)
		case core.RetryStep:
			a.continueLoop(ctx, e.Turn, e.Step)
		case core.Abandon:
			text := e.Text
			if text == "" {
				text = interruptedToolText
			}
			a.abandon(ctx, e.Turn, e.Reason, text, nil)
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
			if a.stall != nil && a.stall.turn == e.Turn {
				a.stall = nil
			}
			for k, s := range a.results {
				if s.Turn == e.Turn {
					delete(a.results, k) // a repeat reads the turn's end from the store
				}
			}
			if s := a.streams[e.Turn]; s != nil {
				u := a.doneUpdate(Update{Done: true, Phase: e.Phase})
				if t, ok := a.b.Turn(e.Turn); ok {
					u.Outcome, u.Err = t.Outcome, t.Reason
				}
				if u.Outcome.Kind == messages.OutcomeIncomplete && u.Outcome.Reason == ReasonToolStepLimit {
					u.StepLimit = a.rt.cfg.MaxToolSteps
				}
				if e.Phase == messages.PhaseFailed {
					u.Outcome = a.failOutcome(e.Turn)
					u.Err, u.RetryAfter = u.Outcome.Message, a.retryAfter
				}
				s.push(u)
				delete(a.streams, e.Turn)
			}
		}
	}
}

// failOutcome finds why a failed turn failed (failed turns leave Turns).
func (a *branchActor) failOutcome(turn messages.TurnID) messages.StepOutcome {
	rows, err := a.rows.TurnRows(context.Background(), a.id, a.b.TurnSeq, 1)
	if err == nil && len(rows) == 1 && rows[0].ID == turn {
		return messages.FailedOutcome(rows[0].Code, rows[0].Reason)
	}
	return messages.FailedOutcome(messages.FailTurn, "the turn failed")
}

// prepare assembles the context of turn and starts its provider step; if
// the context cannot be assembled the turn fails.
func (a *branchActor) prepare(ctx actor.Context, turn messages.TurnID) {
	if a.Recovering() {
		return
	}
	a.counters, a.cancelled, a.sizeRetries = streamCounters{}, false, 0
	a.usage, a.lastModel, a.retryAfter = providers.Usage{}, "", 0
	t0 := markNow()
	ac, rep, err := a.assemble(turn, nil)
	if err != nil {
		a.fail(ctx, turn, messages.FailTurn, "assemble context: "+err.Error())
		return
	}
	if obs := a.rt.cfg.ObserveAssembly; obs != nil {
		obs(a.id, t0.elapsed(), rep)
	}
	if a.folds.askShrink(ctx, turn, rep) {
		return // prepared again when the librarian answers
	}
	if err := a.fitContext(ctx, rep); err != nil {
		a.fail(ctx, turn, messages.FailContextTooLarge, err.Error())
		return
	}
	now := a.now()
	step := messages.NewID[messages.StepID](now)
	evs, err := a.b.Start(turn, step, now)
	if err != nil {
		a.fail(ctx, turn, messages.FailTurn, err.Error())
		return
	}
	// The step starts while its ResponseStarted (with a submitted
	// turn's TX-0, held since submit) is synced: the provider's time to
	// its first token overlaps the commit. Nothing the step does is
	// acknowledged before the flush: Submit answers (and hands out the
	// turn's stream) after it, the step's result reaches this actor
	// after this message, and tools run only then. A crash before the
	// flush leaves a provider call and, at most, a journal file that no
	// step of the store names. A deferred submit (SubmitDeferred) holds
	// the two on past the step's start.
	for _, ev := range evs {
		a.persistHeld(ctx, ev, a.txFor(ev))
	}
	a.spawnStep(ctx, turn, step, ac)
	if !a.deferring {
		a.flush()
	}
}

// spawnStep starts provider step step of turn on context ac, with the
// branch's model, the tools policy and the redaction (patterns, then
// hook) applied.
func (a *branchActor) spawnStep(ctx actor.Context, turn messages.TurnID, step messages.StepID, ac messages.AssembledContext) {
	var hashed *messages.AssembledContext // as assembled: what the recipe rebuilds
	t, _ := a.b.Turn(turn)
	if t.Steps <= 1 && a.recipe != nil && a.recipe.User == turn && a.recipe.Hash == "" {
		orig := ac
		hashed = &orig
	}
	ac.Tools, ac.ToolMode, ac.ToolChoice = a.rt.offeredTools(t)
	ac, err := a.rt.outbound().context(ac)
	if err != nil {
		a.endLoop(ctx, turn, messages.FailTurn, "redact: "+err.Error(), nil)
		return
	}
	if t.Steps <= 1 && a.recipe != nil && a.recipe.User == turn {
		// What the model is given beside the context, as sent.
		a.recipe.Tools, a.recipe.ToolMode, a.recipe.ToolChoice = ac.Tools, ac.ToolMode, ac.ToolChoice
		a.recipe.Params = t.Params
	}
	m := a.rt.model(a.b.Model)
	maxOut := a.rt.cfg.MaxOutputTokens
	if m.MaxOutputTokens > 0 {
		maxOut = m.MaxOutputTokens
	}
	parallel := a.rt.cfg.ParallelToolCalls
	// The client's settings: its output bound and parallel_tool_calls
	// win over the configured ones.
	if p := t.Params; p.MaxOutputTokens != nil {
		maxOut = *p.MaxOutputTokens
	}
	if p := t.Params; p.ParallelToolCalls != nil {
		parallel = *p.ParallelToolCalls
	}
	sctx, cancel := context.WithTimeout(context.Background(), a.rt.cfg.StepTimeout)
	a.step, a.cancelStep = step, cancel
	stream := a.streams[turn]
	req := providers.Request{Model: m.ID, Context: ac, MaxOutputTokens: maxOut, ParallelToolCalls: parallel, Params: t.Params}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &stepActor{rt: a.rt, ctx: sctx, branch: ctx.Self(), turn: turn, step: step, req: req, provider: m.Provider,
			stream: stream, base: a.counters, count: a.rt.counter(m), hashed: hashed, hasher: &a.hasher}
	}, actor.WithSupervisor(a.rt.journalSup))
	if _, err := ctx.SpawnNamed(props, "step-"+step.String()); err != nil {
		cancel()
		a.step, a.cancelStep = messages.StepID{}, nil
		a.endLoop(ctx, turn, messages.FailTurn, "start step: "+err.Error(), nil)
	}
}

// resumeShrunk goes on with turn, accepted, once the librarian's shrink
// it waited for is in: its context is prepared again, or it fails if it
// was cancelled meanwhile.
func (a *branchActor) resumeShrunk(ctx actor.Context, turn messages.TurnID) {
	if a.cancelled {
		a.fail(ctx, turn, messages.FailCancelled, "cancelled while the context was being shrunk")
		return
	}
	a.prepare(ctx, turn)
}

// fail fails turn with code (one of messages' Fail* codes) for reason.
func (a *branchActor) fail(ctx actor.Context, turn messages.TurnID, code, reason string) {
	reason = a.rt.cfg.Scrub.String(reason)
	evs, err := a.b.Fail(turn, code, reason, a.now())
	if err != nil {
		a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("fail turn")
		return
	}
	a.persistAll(ctx, evs)
}
