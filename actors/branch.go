package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	ppersist "github.com/asynkron/protoactor-go/persistence"
	"github.com/rs/zerolog"
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
		at messages.TurnID // zero: the head
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

// Event and snapshot encodings in the actor log: one tag byte, then JSON.
const (
	tagEvent    = 'E'
	tagSnapshot = 'S'
)

// branchActor is one branch: the single writer of its event log, its
// transcript branch and its lifecycle rows.
type branchActor struct {
	ppersist.Mixin
	rt       *Runtime
	rows     branchRows // the store, read
	actorLog branchLog  // the event log's own: what the Mixin persists is committed by Flush
	id       messages.BranchID
	b        core.Branch

	streams     map[messages.TurnID]*TurnStream
	step        messages.StepID            // the step streaming now
	tools       messages.StepID            // the step whose tool calls run now
	cancelStep  context.CancelFunc         // cancels the step or the tools running
	cancelled   bool                       // the user cancelled the turn in flight
	recipe      *persistence.ContextRecipe // of the turn in flight's first step
	sizeRetries int                        // steps of the turn in flight the provider rejected for size
	manualFold  bool                       // a /commit is folding every pending turn
	summarizing uint64                     // epoch+1 of the summary asked for; 0 none
	// summaryAsked is when the summary summarizing waits for was asked:
	// one with no answer by summaryDeadline (a summaryCheck), or
	// commitReask when a commit is asked, is taken for lost and asked
	// again, so that a request lost without a workLost never leaves the
	// branch's pending turns unfolded.
	summaryAsked mark
	summaryReq   *summarizeReq // the request summarizing waits for
	// shrinkAsked is epoch+1 of the last head summary the librarian was
	// asked to shrink (Config.Shrink), so that each summary is asked
	// once; shrinkTurn is the turn waiting for it, zero when none.
	shrinkAsked uint64
	shrinkTurn  messages.TurnID
	indexing    map[messages.TurnID]*indexReq // the index jobs asked for, by turn
	indexed     []*indexDone                  // held, committed by flushIndexed
	flushQueued bool                          // a flushIndexedReq is in the mailbox
	// deferring is set while a deferred submit runs its effects, so that
	// prepare leaves the turn's acceptance held; unacked while it is
	// held after (SubmitDeferred), until this actor's next write.
	deferring, unacked bool
	// importing is set while an import builds the branch (its session
	// is not committed yet): its states come from the export, so the
	// fold policy asks for no summary until the import ends.
	importing bool
	counters  streamCounters // of the turn's finished steps
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
	// msgs holds the decoded messages of the window, the pending turns and
	// the turn in flight, so that assembling a context reads the store only
	// for what this instance has not seen (after activation).
	msgs map[messages.TurnID]messages.Message
	// hasher hashes the contexts of this branch's steps, keeping the
	// JSON of the last one's messages for the next.
	hasher contextHasher
	// lost counts the jobs of this instance lost or failed in a row
	// (workLost, no answer, an error): past maxLostJobs each is asked
	// again after a wait (retryWait), so that a job that always kills its
	// worker does not loop, and none is given up. retrying counts the
	// timers of those waits (foldRetry, indexAgain) not yet fired; a
	// branch with one is busy. foldRetrying: a fold waits for one;
	// indexWaiting: the turns whose index jobs wait for one. A job that
	// succeeds asks for all of them at once (retryNow): its worker is
	// well again.
	lost         int
	retrying     int
	foldRetrying bool
	indexWaiting map[messages.TurnID]struct{}
	// keys are the idempotency keys of the turns this instance accepted
	// that are not committed yet (a deferred acceptance), by key; the
	// store holds the others.
	keys map[string]persistence.IdempotencyRow
	// asker is the sender of the request being handled, until answered.
	asker *actor.PID
	// active is when this actor last took a message; idle is the timer
	// of the next idleCheck (passivation after Config.IdleAfter).
	active mark
	idle   *time.Timer
	// ending is set once this instance is stopping or failed (ended):
	// it handles nothing more.
	ending bool
	// stashing is set while an import records turns in held writes: the
	// indexer reads a turn's neighbours from the store, so their index
	// jobs (stashed) go once the import's writes are committed (stash).
	stashing bool
	stashed  []core.Effect
	// importIx indexes the turns an import folds (indexNow), keeping
	// the last ones' terms for the next.
	importIx *indexer
	// backlog is what this instance counts in Runtime.indexBacklog: its
	// turns folded and not yet indexed.
	backlog int64
}

// stash holds the index jobs of the turns recorded until the returned
// func, called once they are committed, sends them; while an import
// builds the branch, it indexes them itself (indexNow).
func (a *branchActor) stash(ctx actor.Context) (commit func()) {
	a.stashing = true
	return func() {
		a.flush()
		a.stashing = false
		effs := a.stashed
		a.stashed = nil
		if a.importing {
			effs = a.indexNow(ctx, effs)
		}
		a.run(ctx, effs)
	}
}

// idleCheck makes a branch actor passivate if it has been idle for
// Config.IdleAfter, or look again when it could be.
type idleCheck struct{ to *branchActor }

func newBranchActor(rt *Runtime, id messages.BranchID) *branchActor {
	return &branchActor{rt: rt, rows: rt.db, actorLog: rt.actorLog, id: id, b: core.Branch{Policy: *rt.cfg.Fold},
		streams:  map[messages.TurnID]*TurnStream{},
		indexing: map[messages.TurnID]*indexReq{}, indexWaiting: map[messages.TurnID]struct{}{},
		msgs: map[messages.TurnID]messages.Message{}}
}

func (a *branchActor) now() time.Time { return a.rt.cfg.Now() }

func (a *branchActor) Receive(ctx actor.Context) {
	// Persisting may deliver a RequestSnapshot to this actor re-entrantly,
	// which replaces the context's current envelope: capture the sender
	// first and reply to it explicitly, never with ctx.Respond.
	sender := ctx.Sender()
	if a.ending {
		// Stopping: protoactor still delivers messages while the
		// children stop. What a step or job answers now (a step the stop
		// cancelled fails with context.Canceled) is not recorded: the
		// streams were told the turn was interrupted, as recovery
		// records. A request is left unclaimed, for its caller to send
		// again once this instance is gone.
		return
	}
	if c, ok := ctx.Message().(claimable); ok && !c.claimed().take() {
		return // its caller stopped waiting before it was read, and was told nothing was stored
	}
	respond := func(v any) {
		a.asker = nil
		if sender != nil {
			ctx.Send(sender, v)
		}
	}
	switch ctx.Message().(type) {
	case *createReq, *submitReq, *pinReq, *commitReq, *inspectReq, *forkReq, *wakeReq, *cancelReq, *modelReq, *debugReq, *resultsReq:
		a.asker = sender // answered by respond, or on failure by Restarting
	}
	switch ctx.Message().(type) {
	case *idleCheck, *summaryCheck:
	default:
		a.active = markNow()
	}
	switch ctx.Message().(type) {
	case *createReq, *pinReq, *commitReq, *inspectReq, *forkReq, *wakeReq, *cancelReq, *modelReq, *debugReq, *importReq, *forceReq,
		*importItemsReq, *importDoneReq, *resultsReq:
		if a.unacked {
			// Nothing is told while a turn's acceptance is held.
			a.flush()
		}
	}
	switch m := ctx.Message().(type) {
	case *wrapperspb.BytesValue:
		a.replay(m.Value)
	case *ppersist.RequestSnapshot:
		b, err := json.Marshal(&a.b)
		if err != nil {
			panic(fmt.Errorf("%w: encode snapshot: %v", errFatal, err))
		}
		a.PersistSnapshot(wrapperspb.Bytes(append([]byte{tagSnapshot}, b...)))
		a.committed() // a snapshot commits what was held with it
	case *ppersist.ReplayComplete:
		a.countBacklog()
		a.recover(ctx)
		a.idle = after(ctx, a.rt.cfg.IdleAfter, &idleCheck{a})
	case *idleCheck:
		if m.to != a {
			return // an earlier instance's
		}
		if wait := a.rt.cfg.IdleAfter - a.active.elapsed(); wait > 0 || a.busy() {
			if wait <= 0 {
				wait = a.rt.cfg.IdleAfter
			}
			a.idle = after(ctx, wait, &idleCheck{a})
			return
		}
		ctx.Send(ctx.Parent(), &passivateReq{id: a.id, pid: ctx.Self(), ifIdle: true})
	case *passivateNow:
		// Root routes nothing new here; what came before this message
		// was handled. Work taken since asking keeps the actor.
		if a.busy() {
			ctx.Send(ctx.Parent(), &passivateCancel{id: a.id, pid: ctx.Self()})
			a.stopIdle()
			a.idle = after(ctx, a.rt.cfg.IdleAfter, &idleCheck{a})
			return
		}
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		a.stopIdle()
		a.flushOnStop()
		a.ended(ctx)
	case *actor.Restarting:
		a.stopIdle()
		a.ended(ctx) // what it held is dropped, as a crash drops it
	case *createReq:
		respond(a.create(ctx, m))
	case *submitReq:
		s, err := a.submit(ctx, m)
		if err != nil {
			respond(err)
			return
		}
		respond(s)
	case *resultsReq:
		s, err := a.submitResults(ctx, m)
		if err != nil {
			respond(err)
			return
		}
		respond(s)
	case *pinReq:
		res, err := a.pin(ctx, m)
		if err != nil {
			respond(err)
			return
		}
		respond(res)
	case *commitReq:
		a.manualFold = true
		a.rt.manualFolds.Store(a.id, struct{}{})
		if a.summarizing != 0 {
			if !a.rt.jobs.holds(a.summaryReq) {
				a.summaryLost("no worker holds it when a commit was asked")
			} else if a.summaryAsked.elapsed() > a.rt.commitReask {
				a.summaryLost("no answer in " + a.rt.commitReask.String() + " when a commit was asked")
			}
		}
		if a.summarizing == 0 {
			a.foldAgain(ctx)
		}
		// else the summary under way is committed, then the manual
		// fold goes on (commit); a summary its worker lost is asked
		// for again (workLost). Asking again now would queue one more
		// summary of the same turns behind it per request: a client
		// asking in a loop filled the librarians' mailboxes faster
		// than they wrote summaries.
		respond(okReply{})
	case *inspectReq:
		a.flushIndexed() // what it reports indexed is searchable
		respond(a.info())
	case *forkReq:
		res, err := a.forkPoint(m.at)
		if err != nil {
			respond(err)
			return
		}
		respond(res)
	case *wakeReq:
		respond(okReply{})
	case *cancelReq:
		respond(errOrOK(a.cancel(ctx)))
	case *debugReq:
		d, err := a.debugNext(m.text)
		if err != nil {
			respond(err)
			return
		}
		respond(d)
	case *modelReq:
		respond(errOrOK(a.selectModel(ctx, m.name)))
	case *importReq:
		ids, err := a.importTurns(ctx, m.exchanges, m.key)
		if err != nil {
			respond(err)
			return
		}
		respond(ids)
	case *importItemsReq:
		respond(errOrOK(a.importItems(ctx, m.items)))
	case *importDoneReq:
		if a.importing {
			a.importing = false
			if s, ok := a.b.FoldDue(core.FoldAuto); ok {
				a.run(ctx, []core.Effect{s})
			}
		}
		respond(okReply{})
	case *forceReq:
		evs, err := a.b.Force(m.chunks, a.now())
		if err == nil {
			a.persistAll(ctx, evs)
		}
		respond(errOrOK(err))
	case *toolsDone:
		a.toolsDone(ctx, m)
	case *killReq:
		panic(errors.New("chaos: branch actor killed"))
	case *stepDone:
		a.finishStep(ctx, m)
	case *summaryDone:
		a.commit(ctx, m)
	case *shrinkDone:
		a.shrunk(ctx, m)
	case *workLost:
		a.workLost(ctx, m)
	case *indexAgain:
		if m.to != a {
			return // an earlier instance's: this one's recovery asked
		}
		a.retrying--
		if _, ok := a.indexWaiting[m.turn]; ok {
			delete(a.indexWaiting, m.turn)
			a.indexCommitted(ctx, m.turn)
		}
	case *jobCheck:
		if m.to == a {
			a.checkJob(ctx, m)
		}
	case *foldRetry:
		if m.to != a {
			return
		}
		a.retrying--
		if a.foldRetrying {
			a.foldRetrying = false
			if a.summarizing == 0 {
				a.foldAgain(ctx)
			}
		}
	case *summaryCheck:
		if m.to == a && a.summarizing == m.epoch+1 && a.summaryAsked.same(m.asked) {
			a.summaryLost("no answer in " + a.rt.summaryDeadline.String())
			a.foldSoon(ctx)
		}
	case *indexDone:
		a.endIndexJob(m.turn)
		if m.err != nil {
			a.lost++
			wait := max(indexRetry, a.retryWait())
			a.rt.log.Warn().Err(m.err).Str("branch", a.id.String()).Str("turn", m.turn.String()).Dur("asked_again_in", wait).
				Msg("index failed")
			a.indexLater(ctx, m.turn, wait)
			return
		}
		a.lost = 0
		defer a.retryNow(ctx)
		evs, err := a.b.MarkIndexed(m.turn, len(m.rows), a.now())
		if err != nil {
			a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("mark indexed")
			return
		}
		for i, ev := range evs {
			tx := a.txFor(ev)
			if i == 0 {
				tx.Chunks = m.rows // inserted unless present: indexing twice adds nothing
				tx.Vectors = m.vecs
				tx.TermUpdates = m.ups
				a.indexed = append(a.indexed, m)
			}
			// Held: committed with the branch's next write (the next
			// turn's, if it comes soon) or else by flushIndexedReq after
			// IndexFlushDelay, with any other index results by then: a
			// synced write saved, off the path of any turn. Nobody is
			// told a turn is indexed before (Inspect flushes first); a
			// crash before the commit loses nothing, as the index jobs
			// run again.
			a.persistHeld(ctx, ev, tx)
		}
		if !a.flushQueued {
			a.flushQueued = true
			after(ctx, a.rt.cfg.IndexFlushDelay, &flushIndexedReq{})
		}
	case *flushIndexedReq:
		if t, inFlight := a.b.InFlight(); inFlight && !a.idleTurn(t) {
			// The turn in flight ends with a write of its own (its
			// response or its failure; a stop flushes first), which
			// takes the index results with it. Committing them now
			// would stall the turn behind a synced write, and commit a
			// deferred acceptance before its response.
			a.flushQueued = false
			return
		}
		a.flushIndexed()
	case *flushUnackedReq:
		// The deadline of turn m.turn's acceptance: a later turn's
		// acceptance, held when it fires, has a deadline of its own.
		if t, ok := a.b.InFlight(); a.unacked && ok && t.ID == m.turn {
			a.flush()
		}
	}
}

// maxLostJobs bounds the jobs lost or failed in a row that a branch
// asks for again at once (an index job that failed waits indexRetry);
// past it each waits retryWait.
const maxLostJobs = 5

// retryBase is the first wait of retryWait, maxRetryWait its longest
// (Runtime.retryBase and Runtime.retryMax start as them).
const (
	retryBase    = time.Second
	maxRetryWait = 10 * time.Second
)

// retryWait is the wait before a job is asked again after a.lost jobs
// were lost or failed in a row: none up to maxLostJobs, then
// Runtime.retryBase doubling up to Runtime.retryMax. A job is never given
// up: its work is durable, and a branch with work due and nothing asked
// must make progress.
func (a *branchActor) retryWait() time.Duration {
	n := a.lost - maxLostJobs
	if n <= 0 {
		return 0
	}
	d := a.rt.retryBase
	for i := 1; i < n && d < a.rt.retryMax; i++ {
		d *= 2
	}
	return min(d, a.rt.retryMax)
}

// foldRetry makes a branch ask for the fold due, after retryWait.
type foldRetry struct{ to *branchActor }

// foldSoon asks for the fold due now (foldAgain), or after retryWait when
// jobs were lost in a row; a fold asked in the meantime (a turn's, a
// commit's) goes first, and the timer then finds a summary on its way.
func (a *branchActor) foldSoon(ctx actor.Context) {
	wait := a.retryWait()
	if wait <= 0 {
		a.foldAgain(ctx)
		return
	}
	if a.foldRetrying {
		return
	}
	a.foldRetrying = true
	a.retrying++
	after(ctx, wait, &foldRetry{to: a})
}

// indexLater asks for the index job of turn again after wait, or after
// retryWait if longer.
func (a *branchActor) indexLater(ctx actor.Context, turn messages.TurnID, wait time.Duration) {
	if wait = max(wait, a.retryWait()); wait <= 0 {
		a.run(ctx, []core.Effect{core.Index{Turn: turn}})
		return
	}
	if _, ok := a.indexWaiting[turn]; ok {
		return // its timer is set
	}
	a.indexWaiting[turn] = struct{}{}
	a.retrying++
	after(ctx, wait, &indexAgain{to: a, turn: turn})
}

// indexCommitted asks for the index job of turn if it is committed and
// not indexed yet.
func (a *branchActor) indexCommitted(ctx actor.Context, turn messages.TurnID) {
	if t, ok := a.b.Turn(turn); ok && t.Phase == messages.PhaseStateCommitted {
		a.run(ctx, []core.Effect{core.Index{Turn: turn}})
	}
}

// retryNow asks at once for the jobs waiting for a retry timer, once a
// job succeeded: the timers still fire, and find nothing left to ask.
func (a *branchActor) retryNow(ctx actor.Context) {
	if a.foldRetrying {
		a.foldRetrying = false
		if a.summarizing == 0 {
			a.foldAgain(ctx)
		}
	}
	for turn := range a.indexWaiting {
		delete(a.indexWaiting, turn)
		a.indexCommitted(ctx, turn)
	}
}

// summaryDeadline is how long a branch waits for a summary it asked for
// before it takes the request for lost and asks again, even if a worker
// holds it (a summarizer call is bounded by 2 minutes); commitReask is
// that wait when a commit (CommitPending) is asked. jobCheckEvery is how
// often a branch looks whether a job it waits for is still held by a
// worker (checkJob). Runtime.summaryDeadline, Runtime.commitReask and
// Runtime.jobCheck start as these.
const (
	summaryDeadline = 3 * time.Minute
	commitReask     = 10 * time.Second
	jobCheckEvery   = 5 * time.Second
)

// endIndexJob forgets the index job of turn: answered, failed or lost.
func (a *branchActor) endIndexJob(turn messages.TurnID) { delete(a.indexing, turn) }

// indexRetry is the wait before an index job that failed is asked again.
const indexRetry = time.Second

// jobCheck makes a branch look at a job it asked for (one of the three
// is set) jobCheck after asking (checkJob).
type jobCheck struct {
	to      *branchActor
	summary *summarizeReq
	shrink  *shrinkReq
	index   *indexReq
}

// ask sends a job to a worker, holding it in Runtime.jobs until the
// worker is done with it, and looks at it after Runtime.jobCheck.
func (a *branchActor) ask(ctx actor.Context, worker *actor.PID, req any, check *jobCheck) {
	a.rt.jobs.hold(req)
	ctx.Send(worker, req)
	after(ctx, a.rt.jobCheck, check)
}

// checkJob looks at a job the branch asked for: answered or superseded,
// there is nothing to do; held by a worker (queued or running, however
// long a backlog), it is looked at again later; held by none and not
// answered, it was lost without a word (no answer, no workLost) and is
// asked again, as a job a worker lost is (a shrink falls back to the
// deterministic one). An answer on its way when the check runs makes the
// job asked twice, which only repeats work.
func (a *branchActor) checkJob(ctx actor.Context, m *jobCheck) {
	var req any
	switch {
	case m.summary != nil && m.summary == a.summaryReq:
		req = m.summary
	case m.shrink != nil && !a.shrinkTurn.IsZero() && a.shrinkAsked == m.shrink.epoch+1:
		req = m.shrink
	case m.index != nil && a.indexing[m.index.turn] == m.index:
		req = m.index
	default:
		return
	}
	if a.rt.jobs.holds(req) {
		after(ctx, a.rt.jobCheck, m)
		return
	}
	switch {
	case m.summary != nil:
		a.summaryLost("no worker holds it")
		a.foldSoon(ctx)
	case m.shrink != nil:
		a.shrunk(ctx, &shrinkDone{epoch: m.shrink.epoch, err: errors.New("the shrink was lost: no worker holds it")})
	default:
		a.lost++
		a.rt.log.Warn().Str("branch", a.id.String()).Str("turn", m.index.turn.String()).Dur("asked_again_in", a.retryWait()).
			Msg("an index job was asked for and never answered")
		a.endIndexJob(m.index.turn)
		a.indexLater(ctx, m.index.turn, 0)
	}
}

// indexAgain asks for the index job of turn again.
type indexAgain struct {
	to   *branchActor
	turn messages.TurnID
}

// summaryCheck is the deadline of the summary of epoch asked at asked.
type summaryCheck struct {
	to    *branchActor
	epoch uint64
	asked mark
}

// summaryLost forgets the summary the branch waits for, which got no
// answer (why); the caller asks again (foldAgain, foldSoon). Its answer,
// if it comes after all, is used if the branch still waits for a
// summary of the same epoch.
func (a *branchActor) summaryLost(why string) {
	a.lost++
	a.rt.log.Warn().Str("branch", a.id.String()).Uint64("epoch", a.summarizing-1).Str("reason", why).Dur("asked_again_in", a.retryWait()).
		Msg("a summary was asked for and never answered")
	a.summarizing, a.summaryReq = 0, nil
}

// workLost asks again for a job whose worker failed while doing it (the
// job is durable: it is derived again from the branch's state), at once
// or after retryWait; a shrink falls back to the deterministic one,
// which needs no worker.
func (a *branchActor) workLost(ctx actor.Context, m *workLost) {
	switch {
	case m.summary != nil:
		if a.summarizing == 0 || m.summary != a.summaryReq {
			// Answered, superseded, asked again already, or an earlier
			// instance's request: the one this instance waits for, if
			// any, is on its way.
			return
		}
		a.lost++
		a.lostLog(m).Uint64("epoch", m.summary.epoch).Msg("a summary's worker failed")
		a.summarizing, a.summaryReq = 0, nil
		a.foldSoon(ctx)
	case m.shrink != nil:
		a.lostLog(m).Uint64("epoch", m.shrink.epoch).Msg("a shrink's worker failed; the deterministic shrink is used")
		a.shrunk(ctx, &shrinkDone{epoch: m.shrink.epoch, err: errors.New(m.reason)})
	case m.index != nil:
		if a.indexing[m.index.turn] != m.index {
			return // answered, or an earlier instance's: this one's recovery asked
		}
		a.lost++
		a.lostLog(m).Str("turn", m.index.turn.String()).Msg("an index job's worker failed")
		a.endIndexJob(m.index.turn)
		a.indexLater(ctx, m.index.turn, 0)
	}
}

// lostLog starts the warning that m's job was lost.
func (a *branchActor) lostLog(m *workLost) *zerolog.Event {
	return a.rt.log.Warn().Str("branch", a.id.String()).Str("kind", string(m.kind)).Str("reason", m.reason).Dur("asked_again_in", a.retryWait())
}

// stopIdle stops the idle timer of this instance, if it has one.
func (a *branchActor) stopIdle() {
	if a.idle != nil {
		a.idle.Stop()
	}
}

type (
	flushIndexedReq struct{}
	flushUnackedReq struct{ turn messages.TurnID } // a deferred acceptance's deadline
)

// flushOnStop commits what a stopping branch holds: index results (their
// index jobs would run again otherwise) and a deferred acceptance (its
// turn is in flight, and would be lost). A failure is only logged: the
// jobs are still there, and nobody was told of the turn.
func (a *branchActor) flushOnStop() {
	if len(a.indexed) == 0 && !a.unacked {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			a.rt.log.Warn().Str("branch", a.id.String()).Interface("error", p).Msg("commit index results at stop")
		}
	}()
	a.flush()
}

// ended is the end of this instance (stopped, or failed and about to be
// replaced by one rebuilt from the log): its step stops, and whoever
// reads a stream learns the turn was interrupted, as recovery records.
func (a *branchActor) ended(ctx actor.Context) {
	a.ending = true
	a.rt.indexBacklog.Add(-a.backlog) // counted by the next instance, if any
	a.backlog = 0
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

// countBacklog brings this instance's count in Runtime.indexBacklog up to
// date: its turns folded and not indexed yet.
func (a *branchActor) countBacklog() {
	n := int64(0)
	if a.b.Committed > a.b.Indexed {
		n = int64(a.b.Committed - a.b.Indexed)
	}
	a.rt.indexBacklog.Add(n - a.backlog)
	a.backlog = n
}

// flushIndexed commits the held index results, if a write has not taken
// them already, and so makes their chunks searchable.
func (a *branchActor) flushIndexed() {
	a.flushQueued = false
	if len(a.indexed) == 0 {
		return
	}
	a.flush()
}

// committed is called after every write of this actor, which commits
// whatever it held: a deferred acceptance is durable, and so are the
// index results, whose chunks go into the retrieval index.
func (a *branchActor) committed() {
	a.unacked = false
	clear(a.keys)
	for _, m := range a.indexed {
		a.rt.mem.added(m.rows, m.vecs, m.ups)
	}
	a.indexed = nil
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
	return inFlight && !a.idleTurn(t) || a.summarizing != 0 || len(a.indexing) > 0 || a.retrying > 0
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

// replay applies a stored event or snapshot; effects are not run.
func (a *branchActor) replay(data []byte) {
	if len(data) == 0 {
		panic(fmt.Errorf("%w: empty record in the log of branch %s", errFatal, a.id))
	}
	switch data[0] {
	case tagSnapshot:
		// The actor log gave this snapshot only if checkSnapshot read it.
		b, err := decodeSnapshot(data)
		if err != nil {
			panic(fmt.Errorf("%w: snapshot of branch %s: %v", errFatal, a.id, err))
		}
		b.Policy = *a.rt.cfg.Fold
		a.b = b
	case tagEvent:
		ev, err := messages.UnmarshalBranchEvent(data[1:])
		if err == nil {
			_, err = a.b.Apply(ev)
		}
		if err != nil {
			panic(fmt.Errorf("%w: event of branch %s: %v", errFatal, a.id, err))
		}
	default:
		panic(fmt.Errorf("%w: unknown record tag %q in the log of branch %s", errFatal, data[0], a.id))
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

// recover resumes work after replay (SRD §6.5): interrupted turns fail,
// pending turns are summarized, committed turns are indexed.
func (a *branchActor) recover(ctx actor.Context) {
	if !a.b.Created {
		return
	}
	if _, err := a.rows.Import(context.Background(), a.b.Session); err == nil {
		a.importing = true // its import goes on (one cut short was dropped at Open)
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
	if _, ok := a.rt.manualFolds.Load(a.id); ok {
		// A commit asked of the instance before this one goes on.
		a.manualFold = true
		if a.summarizing == 0 {
			a.foldAgain(ctx)
		}
	}
}

// persist writes ev with the rows and appends it implies (one atomic
// transaction), then applies it and runs its effects. A write that fails
// panics inside the persistence provider: the supervisor restarts the
// actor, which replays and so never holds state that was not written.
func (a *branchActor) persist(ctx actor.Context, ev messages.BranchEvent, tx *persistence.Tx) {
	a.persistEnvelope(ctx, ev, tx, false)
}

// persistHeld is persist for an event that the effects it triggers
// always follow with another persisted event before anything is
// acknowledged (a submitted turn is followed by its ResponseStarted or
// TurnFailed): the two are committed together, one synced write instead
// of two. The caller flushes before it answers anyone.
func (a *branchActor) persistHeld(ctx actor.Context, ev messages.BranchEvent, tx *persistence.Tx) {
	a.persistEnvelope(ctx, ev, tx, true)
}

// flush commits any held event.
func (a *branchActor) flush() {
	a.actorLog.Flush(a.Name())
	a.committed()
}

func (a *branchActor) persistEnvelope(ctx actor.Context, ev messages.BranchEvent, tx *persistence.Tx, hold bool) {
	data, err := messages.MarshalBranchEvent(ev)
	if err != nil {
		panic(fmt.Errorf("%w: encode event: %v", errFatal, err))
	}
	env := persistence.NewEnvelope(append([]byte{tagEvent}, data...), tx)
	env.Hold = hold
	a.PersistReceive(env)
	if !hold {
		a.committed()
	}
	effects, err := a.b.Apply(ev)
	if err != nil {
		panic(fmt.Errorf("%w: apply %T: %v", errFatal, ev, err))
	}
	a.countBacklog()
	if obs := a.rt.cfg.Observe; obs != nil {
		obs(a.id, ev)
	}
	a.run(ctx, effects)
}

func (a *branchActor) persistAll(ctx actor.Context, evs []messages.BranchEvent) {
	for _, ev := range evs {
		a.persist(ctx, ev, a.txFor(ev))
	}
}

// txFor returns the lifecycle rows and jobs that go with ev
// (lifecycle.Tx), with what the store holds that they carry over.
func (a *branchActor) txFor(ev messages.BranchEvent) *persistence.Tx {
	var stored lifecycle.Stored
	if e, ok := ev.(messages.TurnIndexed); ok {
		if t, ok := a.b.Turn(e.Turn); ok {
			if rows, err := a.rows.TurnRows(context.Background(), a.id, t.Seq, 1); err == nil && len(rows) == 1 {
				stored.StateSeq = rows[0].StateSeq
			}
		}
	}
	return lifecycle.Tx(&a.b, ev, a.now(), stored)
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
	a.importing = m.importing
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
	a.msgs[turn] = msg
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
	} else if _, err := a.rows.Turn(context.Background(), turn); errors.Is(err, persistence.ErrTurnNotFound) {
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
			if a.importing {
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
			if a.importing {
				continue // the import brings its states
			}
			if a.summarizing == e.Epoch+1 {
				continue // this epoch's summary is on its way
			}
			a.summarizing = e.Epoch + 1
			turns := a.pendingOf(e.Turns)
			known := map[messages.TurnID]messages.Message{}
			for _, t := range turns {
				a.knownInto(known, t.Turn, t.Reply)
			}
			a.summaryReq = &summarizeReq{known: known, from: ctx.Self(), branch: a.id, epoch: e.Epoch, pinned: e.State.Pinned,
				count:    a.rt.counter(a.rt.model(a.b.Model)),
				previous: e.State.Summary, turns: turns}
			a.ask(ctx, a.rt.librarian(a.id), a.summaryReq, &jobCheck{to: a, summary: a.summaryReq})
			a.summaryAsked = markNow()
			after(ctx, a.rt.summaryDeadline, &summaryCheck{to: a, epoch: e.Epoch, asked: a.summaryAsked})
		case core.Index:
			if a.stashing {
				a.stashed = append(a.stashed, e) // its turn is not committed yet
				continue
			}
			if a.indexing[e.Turn] != nil {
				continue
			}
			t, ok := a.b.Turn(e.Turn)
			if !ok {
				continue
			}
			if req, ok := a.rt.jobs.indexJob(a.id, t.ID); ok && req.from.Equal(ctx.Self()) {
				// Asked by the instance this one replaced, and still held
				// by a worker, which answers this actor: taken over.
				a.indexing[e.Turn] = req
				after(ctx, a.rt.jobCheck, &jobCheck{to: a, index: req})
				continue
			}
			known := map[messages.TurnID]messages.Message{}
			a.knownInto(known, t.ID, t.Reply)
			req := &indexReq{known: known, from: ctx.Self(), branch: a.id, session: a.b.Session, turn: t.ID, seq: t.Seq, reply: t.Reply}
			a.indexing[e.Turn] = req
			a.ask(ctx, a.rt.indexer(a.id), req, &jobCheck{to: a, index: req})

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

func (a *branchActor) pendingOf(ids []messages.TurnID) []messages.PendingTurn {
	out := make([]messages.PendingTurn, 0, len(ids))
	for _, id := range ids {
		if t, ok := a.b.Turn(id); ok {
			out = append(out, messages.PendingTurn{Turn: t.ID, Seq: t.Seq, Reply: t.Reply})
		}
	}
	return out
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
	if a.askShrink(ctx, turn, rep) {
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

// askShrink starts step 4 of the shrinker with a librarian model
// (Config.Shrink) when the context of turn needs it
// (core.Branch.ShrinkDue, core.AskShrink): the librarian is
// asked to shrink the head summary and turn waits (still accepted) until
// the answer is committed as a new state (shrunk). It reports whether
// turn now waits. Each head summary is asked for once; without
// Config.Shrink, or when the answer cannot be used, the deterministic
// core.ShrinkSummary of assembleShrinking stands.
func (a *branchActor) askShrink(ctx actor.Context, turn messages.TurnID, rep core.AssemblyReport) bool {
	if a.rt.cfg.Shrink == nil {
		return false
	}
	e, ok := a.b.ShrinkDue(turn, rep, a.shrinkAsked)
	if !ok {
		return false
	}
	a.shrinkAsked, a.shrinkTurn = e.Epoch+1, e.Turn
	a.rt.log.Info().Str("branch", a.id.String()).Str("turn", turn.String()).Int("target_tokens", e.Target).
		Msg("context over budget: the librarian shrinks the head summary")
	req := &shrinkReq{from: ctx.Self(), epoch: e.Epoch, summary: e.Summary, target: e.Target, count: a.rt.counter(a.rt.model(a.b.Model))}
	a.ask(ctx, a.rt.librarian(a.id), req, &jobCheck{to: a, shrink: req})
	return true
}

// shrunk commits the librarian's shrunk head summary as a new state, if
// it is shorter and the branch is still at the epoch it was read at, and
// prepares the waiting turn again (or fails it, if cancelled meanwhile).
func (a *branchActor) shrunk(ctx actor.Context, m *shrinkDone) {
	turn := a.shrinkTurn
	a.shrinkTurn = messages.TurnID{}
	log := a.rt.log.With().Str("branch", a.id.String()).Logger()
	switch {
	case m.err != nil:
		log.Warn().Err(m.err).Msg("shrink summary failed; the deterministic shrink is used")
	case len(m.summary) >= len(a.b.State.Summary) || m.epoch != a.b.Epoch:
		log.Info().Uint64("epoch", m.epoch).Uint64("head_epoch", a.b.Epoch).Msg("shrunk summary not used: stale or not shorter")
	default:
		now := a.now()
		state := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now), Seq: a.b.State.Seq + 1,
			Summary: m.summary, Pinned: a.b.State.Pinned}
		evs, err := a.b.CommitShrunk(state, m.epoch, now)
		if err != nil {
			log.Warn().Err(err).Msg("commit shrunk summary")
			break
		}
		a.persistAll(ctx, evs)
		a.shrinkAsked = a.b.Epoch + 1 // this summary is the shrunk one: do not shrink it again
	}
	t, ok := a.b.Turn(turn)
	if !ok || t.Phase != messages.PhaseAccepted {
		return
	}
	if a.cancelled {
		a.fail(ctx, turn, messages.FailCancelled, "cancelled while the context was being shrunk")
		return
	}
	a.prepare(ctx, turn)
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

// message returns a transcript node's message, from msgs or the store.
func (a *branchActor) message(node messages.TurnID) (messages.Message, error) {
	if m, ok := a.msgs[node]; ok {
		return m, nil
	}
	m, err := readMessage(a.rows, node)
	if err == nil {
		a.msgs[node] = m
	}
	return m, err
}

// knownInto copies the cached messages of nodes into known, so that the
// librarian and indexer need not read and decode them again.
func (a *branchActor) knownInto(known map[messages.TurnID]messages.Message, nodes ...messages.TurnID) {
	for _, n := range nodes {
		if m, ok := a.msgs[n]; ok {
			known[n] = m
		}
	}
}

// pruneMessages drops the cached messages that are no longer in the
// window, pending, or the turn keep.
func (a *branchActor) pruneMessages(keep messages.TurnID) {
	live := make(map[messages.TurnID]bool, len(a.b.Window)+8)
	for _, n := range a.b.Window {
		live[n] = true
	}
	for _, p := range a.b.Pending() {
		live[p.ID], live[p.Reply] = true, true
	}
	live[keep] = true
	for n := range a.msgs {
		if !live[n] {
			delete(a.msgs, n)
		}
	}
}

func readMessage(db messageReader, node messages.TurnID) (messages.Message, error) {
	var m messages.Message
	t, err := db.Turn(context.Background(), node)
	if err != nil {
		return m, err
	}
	p, err := db.Blob(context.Background(), t.PayloadHash)
	if err != nil {
		return m, err
	}
	err = m.UnmarshalJSON(p)
	return m, err
}

// assemble builds the context of turn (SRD §5.9, §7) with core.Assemble:
// system instructions, pinned facts, the head summary, the verbatim
// window, the pending turns in order, the user message and continuation,
// within the budget of the branch's model. The verbatim window tops the
// pending (unfolded) messages up to the policy's K with the most recent
// folded ones. Retrieval comes with the retrieval issue.
func (a *branchActor) assemble(turn messages.TurnID, continuation messages.Items) (messages.AssembledContext, core.AssemblyReport, error) {
	user, err := a.message(turn)
	if err != nil {
		return messages.AssembledContext{}, core.AssemblyReport{}, err
	}
	ac, rep, recipe, err := a.assembleFor(turn, user, continuation)
	if err != nil {
		return ac, rep, err
	}
	a.pruneMessages(turn)
	a.recipe = recipe
	for _, st := range rep.Shrink {
		a.rt.log.Info().Str("branch", a.id.String()).Str("turn", turn.String()).Str("step", st.Step).
			Int("saved_tokens", st.Saved).Str("detail", st.Detail).Msg("context shrunk")
	}
	return ac, rep, nil
}

// assembleFor assembles the context of user message user (transcript
// node userNode; zero for a message not stored) and returns the recipe
// to rebuild it from the store.
func (a *branchActor) assembleFor(userNode messages.TurnID, user messages.Message, continuation messages.Items) (
	messages.AssembledContext, core.AssemblyReport, *persistence.ContextRecipe, error) {
	recipe := &persistence.ContextRecipe{State: a.b.State.ID, Pinned: slices.Clone(a.b.State.Pinned), User: userNode}
	pending := a.b.Pending()
	if need := a.b.Policy.K - 2*len(pending); need > 0 {
		recipe.Window = slices.Clone(a.b.Window[max(len(a.b.Window)-need, 0):])
	}
	for _, p := range pending {
		recipe.Pending = append(recipe.Pending, p.ID)
	}
	system := a.rt.cfg.SystemInstructions
	if t, ok := a.b.Turn(userNode); ok && !userNode.IsZero() {
		system = joinSystem(t.System, system) // a client's system prompt first
		recipe.System = t.System
	}
	in := core.AssembleInput{System: system, Pinned: a.b.State.Pinned, Summary: a.b.State.Summary,
		User: user, Continuation: continuation}
	for _, n := range recipe.Window {
		m, err := a.message(n)
		if err != nil {
			return messages.AssembledContext{}, core.AssemblyReport{}, nil, err
		}
		in.Window = append(in.Window, m)
	}
	for _, p := range pending {
		pm := core.PendingMessages{Turn: p.ID}
		for _, n := range []messages.TurnID{p.ID, p.Reply} {
			m, err := a.message(n)
			if err != nil {
				return messages.AssembledContext{}, core.AssemblyReport{}, nil, err
			}
			pm.Messages = append(pm.Messages, m)
		}
		in.Pending = append(in.Pending, pm)
	}
	in.Retrieved = a.retrieve(user, recipe)
	m := a.rt.model(a.b.Model)
	budget := a.rt.budget(m)
	if t, ok := a.b.Turn(userNode); ok && !userNode.IsZero() && t.Params.MaxOutputTokens != nil {
		budget.ResponseReserve = clientReserve(*t.Params.MaxOutputTokens, budget)
	}
	for range a.sizeRetries {
		// The provider counted more than estimated: aim a quarter lower.
		budget.SafetyMargin += budget.Input() / 4
	}
	recipe.ContextLimit, recipe.ResponseReserve, recipe.SafetyMargin = budget.ContextLimit, budget.ResponseReserve, budget.SafetyMargin
	recipe.RetrievalMax, recipe.ChunkMax = budget.RetrievalMax, budget.ChunkMax
	ac, rep := assembleShrinking(in, budget, a.rt.counter(m))
	// recipe.Hash is left to whoever needs it: a turn's step hashes the
	// context it sends once the stream is under way (stepDone.hash).
	recipe.Estimated = rep.Total
	return ac, rep, recipe, nil
}

// clientReserve is the response reserve of a turn whose client bounds
// its output at want: the context leaves room for that output, but is
// not squeezed below half the window (or the configured reserve, if
// larger) by a bound the model may never reach (Claude Code asks for
// 32000 tokens; a 32k model would get no context at all). The upstream
// still gets the client's bound: one it cannot take is its to refuse.
func clientReserve(want int, b core.Budget) int {
	return min(want, max(b.ResponseReserve, b.ContextLimit/2))
}

// ForcedScore is the score of a chunk the user forced into a turn
// (Runtime.ForceChunks): above any search hit (at most 1 plus the
// recency boost), so it is packed first.
const ForcedScore = 10.0

// retrieve returns the retrieved memory offered to the context of user
// (SRD §8): the chunks forced into this turn, then the hybrid search's
// hits for the user's text, leaving out the turns in the prompt
// verbatim; and records them in recipe. A failed search is recorded and
// logged, and the turn goes on without retrieval (SRD §8.3).
func (a *branchActor) retrieve(user messages.Message, recipe *persistence.ContextRecipe) []core.Candidate {
	if a.rt.cfg.NoRetrieval || user.RenderedText == "" {
		return nil
	}
	var out []core.Candidate
	seen := map[messages.ChunkID]bool{}
	add := func(c persistence.ChunkRow, score float64, forced bool) {
		if seen[c.ID] {
			return
		}
		seen[c.ID] = true
		out = append(out, core.Candidate{Summary: c.Summary,
			Chunk: messages.RetrievedChunk{Chunk: c.ID, SourceTurn: c.SourceTurn, Text: c.Text, Score: score}})
		recipe.Retrieved = append(recipe.Retrieved, persistence.RetrievedRef{Chunk: c.ID, Score: score, Forced: forced})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range a.b.Forced {
		c, err := a.rt.mem.chunk(ctx, id)
		if err != nil {
			a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("forced chunk not found")
			continue
		}
		add(c, ForcedScore, true)
	}
	verbatim := map[messages.TurnID]bool{}
	for _, n := range recipe.Window {
		verbatim[n] = true
	}
	for _, t := range recipe.Pending {
		verbatim[t] = true
	}
	t0 := markNow()
	hits, err := a.rt.mem.search(ctx, a.id, user.RenderedText, a.rt.mem.opts, verbatim)
	if obs := a.rt.cfg.ObserveRetrieval; obs != nil {
		obs(a.id, len(hits), t0.elapsed(), err)
	}
	if err != nil {
		recipe.RetrievalError = err.Error()
		a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("retrieval failed; the turn goes on without it")
		return out
	}
	for _, h := range hits {
		add(h.Chunk, h.Score, false)
	}
	return out
}

// assembleShrinking is core.Assemble and, when the context is still over
// budget, step 4 of the shrinker: the summary sent (never the state's) is
// shrunk keeping every entity it holds, and the context assembled again.
func assembleShrinking(in core.AssembleInput, budget core.Budget, count core.Counter) (messages.AssembledContext, core.AssemblyReport) {
	ac, rep := core.Assemble(in, budget, count)
	if rep.Fits() || in.Summary == "" {
		return ac, rep
	}
	before := count(in.Summary)
	target := max(before-rep.Over, 1)
	if shrunk := core.ShrinkSummary(in.Summary, target, count); count(shrunk) < before {
		in.Summary = shrunk
		ac, rep = core.Assemble(in, budget, count)
		rep.Shrink = append(rep.Shrink, core.ShrinkStep{Step: core.StepShrinkSummary, Saved: before - count(shrunk), Target: target,
			Detail: fmt.Sprintf("summary of %d tokens sent as %d (entities kept)", before, count(shrunk))})
	}
	return ac, rep
}

// fitContext checks an assembled context against its budget: over the
// policy's fraction of the budget it asks for a budget fold (the
// contract's primary trigger), and over the budget itself it returns the
// error the turn fails with.
func (a *branchActor) fitContext(ctx actor.Context, rep core.AssemblyReport) error {
	over := !rep.Fits()
	if over || float64(rep.Total) > a.rt.cfg.FoldAtFraction*float64(rep.Budget.Input()) {
		if fold, ok := a.b.FoldDue(core.FoldBudget); ok && a.summarizing == 0 {
			a.run(ctx, []core.Effect{fold})
		}
	}
	if over {
		return errors.New(rep.Error())
	}
	return nil
}

func (a *branchActor) commit(ctx actor.Context, m *summaryDone) {
	if a.summarizing != m.epoch+1 {
		return // superseded
	}
	a.summarizing, a.summaryReq = 0, nil
	if obs := a.rt.cfg.ObserveSummary; obs != nil {
		defer func() { obs(a.id, m.epoch+1 == a.b.Epoch, m.err) }()
	}
	if m.err != nil {
		a.lost++
		a.rt.log.Warn().Err(m.err).Str("branch", a.id.String()).Dur("asked_again_in", a.retryWait()).Msg("summarize failed")
		a.foldSoon(ctx)
		return
	}
	a.lost = 0
	defer a.retryNow(ctx)
	now := a.now()
	state := messages.StateCheckpoint{ID: messages.NewID[messages.StateID](now), Seq: a.b.State.Seq + 1,
		Summary: m.summary, Pinned: a.b.State.Pinned}
	evs, err := a.b.Commit(state, m.turns, m.epoch, now)
	if errors.Is(err, core.ErrStaleEpoch) {
		a.foldAgain(ctx) // the state moved on: fold again if still due
		return
	}
	if err != nil {
		a.lost++
		a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Dur("asked_again_in", a.retryWait()).Msg("commit state")
		a.foldSoon(ctx)
		return
	}
	a.persistAll(ctx, evs)
	if a.manualFold && a.summarizing == 0 {
		a.foldAgain(ctx) // a manual fold goes on until nothing is pending
	}
}

// foldAgain asks for the fold due now: every pending turn while a manual
// fold (/commit) is unfinished, else what the policy calls for.
func (a *branchActor) foldAgain(ctx actor.Context) {
	reason := core.FoldAuto
	if a.manualFold {
		reason = core.FoldManual
	}
	if fold, ok := a.b.FoldDue(reason); ok {
		a.run(ctx, []core.Effect{fold})
	} else if a.manualFold {
		a.manualFold = false
		a.rt.manualFolds.Delete(a.id)
	}
}
