package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/supervision"
)

// stepActor runs one provider step: it streams from the provider, hands
// every event to its journal actor, forwards text to the branch, and
// reports the end. It lives for one step, as a child of its branch.
type stepActor struct {
	rt       *Runtime
	ctx      context.Context
	branch   *actor.PID
	turn     messages.TurnID
	step     messages.StepID
	req      providers.Request
	provider providers.Provider
	// stream is the turn's subscriber stream (nil when nobody reads
	// it); base counts the journal and text bytes of the turn's earlier
	// steps.
	stream *TurnStream
	base   streamCounters
	count  core.Counter // the model's token counter
	// hashed, if not nil, is the context as assembled (before tool
	// definitions and redaction), hashed by hasher (the branch's) for
	// the turn's recipe beside the stream, off the branch.
	hashed *messages.AssembledContext
	hasher *contextHasher
}

// closeMode is how a step's journal ends: closeSynced writes and fsyncs
// it before the step goes on; closeDeferred hands that work back (in
// journalClosed) to run after the commit that finalizes the step, and
// closeDeferredUnsynced the same without the fsync.
type closeMode int

const (
	closeSynced closeMode = iota
	closeDeferred
	closeDeferredUnsynced
)

// journalClosed is what journalActor.close returns.
type journalClosed struct {
	counters streamCounters // the step's own
	finish   func() error   // the deferred modes: the work still to run
}

func (s *stepActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); !ok {
		return
	}
	started := s.rt.cfg.Now()
	done := &stepDone{turn: s.turn, step: s.step, provider: s.provider.Name(), model: s.req.Model, started: started}
	// The journal's file is created at its first write (NewJournalIn):
	// the first delta does not wait for it.
	j, err := persistence.NewJournalIn(s.rt.journals, s.step, s.provider.Name(), s.rt.cfg.Journal, s.rt.cfg.Now)
	if err != nil {
		done.err = fmt.Errorf("create stream journal: %w", err)
		ctx.Send(s.branch, done)
		ctx.Stop(ctx.Self())
		return
	}
	ja := &journalActor{j: j, stream: s.stream, base: s.base, every: s.rt.cfg.Journal.FlushInterval, log: s.rt.log, kills: s.rt.kills,
		model: s.req.Model}
	_, _ = ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return ja }), "journal")
	// Each event is journaled and handed to the subscriber as it
	// arrives, on the stream's own goroutine: no queue between the
	// provider and the journal, so a provider streaming faster than the
	// disk waits for it, and a delta's latency is its own work only. The
	// journal actor applies the time-based part of the policy (ticks).
	// The context's hash, for the turn's recipe, is computed beside the
	// stream, on a goroutine started with the step: it takes a JSON
	// encoding of the whole context, which is done while the provider
	// thinks rather than after its last event, where the step waits
	// for it.
	var hash chan string
	if s.hashed != nil {
		hash = make(chan string, 1)
		go func() { hash <- s.hasher.hash(*s.hashed) }()
	}
	defer func() {
		if p := recover(); p != nil {
			s.crashed(ctx, ja, done, hash, p)
			panic(p) // to the supervisor, which stops this actor: a step never runs twice
		}
	}()
	var unhandled map[string]bool
	resp, err := s.provider.Stream(s.ctx, s.req, func(ev providers.Event) error {
		raw := ev.Raw
		if failureEvent(ev.Type) {
			raw = s.rt.cfg.Scrub.Bytes(raw) // an upstream's error may echo the key: journaled scrubbed
		}
		ja.append(ev.Type, raw, ev.Text)
		s.rt.kills.Point(supervision.KindStep)
		if ev.Unhandled && !unhandled[ev.Type] {
			if unhandled == nil {
				unhandled = map[string]bool{}
			}
			unhandled[ev.Type] = true
			s.rt.log.Debug().Str("provider", s.provider.Name()).Str("step", s.step.String()).Str("event_type", ev.Type).
				Msg("stream event not handled: journaled and skipped")
		}
		return nil
	})
	// The journal is fsynced at completion (SRD §13.2). A step that ends
	// in a way that fails its turn waits for that fsync: its journal is
	// the only record of what was streamed. The journal of a step whose
	// response the branch will finalize is written and fsynced once that
	// commit (TX-A, which holds the same output) is made, not before it
	// (with stream.fsync_finalized off, written and not fsynced).
	finalizes := err == nil && finalizable(resp.Outcome.Kind)
	mode := closeSynced
	if finalizes {
		mode = closeDeferred
		if s.rt.cfg.SkipFinalizedFsync {
			mode = closeDeferredUnsynced
		}
	}
	closed := ja.close(mode)
	if closed.finish != nil {
		done.committed = make(chan struct{})
		s.rt.finishJournal(s.step, closed.finish, done.committed)
	}
	if s.count != nil {
		// Count the reply here, off the branch: the next turn's assembly
		// finds it in the runtime's count cache.
		s.count(replyMessage(append(slices.Clone(s.req.Context.Continuation), resp.Items...)).RenderedText)
	}
	if hash != nil {
		done.hash = <-hash
	}
	// What the step's failure says is stored and logged: an upstream
	// that echoes the key it was sent must not get it there.
	done.resp, done.err = s.rt.cfg.Scrub.Response(resp, err)
	done.counters = closed.counters
	ctx.Send(s.branch, done)
	ctx.Stop(ctx.Self())
}

// failureEvent reports whether a stream event of type typ reports a
// failure ("error", "response.failed", "response.error"…): its payload
// is scrubbed before it is journaled. Other events, the model's output,
// are journaled as they came.
func failureEvent(typ string) bool {
	return strings.Contains(typ, "error") || strings.HasSuffix(typ, ".failed")
}

// crashed reports a step that panicked (reason p) to its branch as a step
// that failed, with what its journal holds, closed and fsynced: the turn
// ends as interrupted, its partial output kept (SRD §13.4), and the
// provider is not called again for this step.
func (s *stepActor) crashed(ctx actor.Context, ja *journalActor, done *stepDone, hash chan string, p any) {
	closed := ja.close(closeSynced)
	if hash != nil {
		<-hash // the branch's hasher is free again
	}
	done.resp = providers.Response{Outcome: messages.StepOutcome{Kind: messages.OutcomeFailed, Code: messages.FailInterrupted,
		Message: fmt.Sprintf("the provider step's actor failed: %v", p)}}
	done.err = fmt.Errorf("%w: %v", errStepCrashed, p)
	done.resp, done.err = s.rt.cfg.Scrub.Response(done.resp, done.err)
	done.counters = closed.counters
	ctx.Send(s.branch, done)
}

// errStepCrashed is the error of a step whose actor failed mid-stream.
var errStepCrashed = errors.New("the provider step's actor failed mid-stream; the turn is interrupted and was not sent again")

// journalActor owns a step's stream journal (SRD §13): it appends every
// event, flushes and fsyncs by the journal policy (ticking when events
// pause), and hands the text and the displayed and durable byte counts
// (of the journal and of the text) to the turn's subscriber stream
// itself, so that a delta never waits behind the branch actor's commits.
type journalActor struct {
	mu     sync.Mutex // appends come from the step's stream, ticks from the actor
	j      *persistence.Journal
	text   journalText // under mu
	stream *TurnStream
	base   streamCounters
	every  time.Duration
	err    error // sticky: the journal takes no more after it
	log    zerolog.Logger
	tick   *time.Timer // the next journalTick; the actor's goroutine only
	gen    int         // of the tick chain: a restart starts a new one
	kills  *supervision.KillSwitch
	model  string // the configured id of the step's model, for its updates
}

// journalTick makes a journal actor apply its policy's intervals.
type journalTick struct {
	to  *journalActor
	gen int
}

// after sends msg to the actor of ctx after d, from a timer of its own.
// Protoactor's receive timeout is not used: it fires once and then stays
// off, and its timer reads the actor's context from the timer's
// goroutine, racing with the actor's stop.
func after(ctx actor.Context, d time.Duration, msg any) *time.Timer {
	sys, self := ctx.ActorSystem(), ctx.Self()
	return time.AfterFunc(d, func() { sys.Root.Send(self, msg) })
}

// journalText counts the text of a journal's records: the text bytes
// displayed, and those whose records its durable offset covers.
type journalText struct {
	displayed, durable uint64
	// records are the journal's records not yet durable that hold text:
	// the journal's offset at the record's end, and the text displayed
	// up to it, in order.
	records []textRecord
}

type textRecord struct{ end, text uint64 }

// appended counts a record of n bytes of text that the journal has taken
// (journaled: its offset at the record's end is end), or not (its
// journal failed: that text is never durable).
func (t *journalText) appended(n int, journaled bool, end uint64) {
	if n == 0 {
		return
	}
	t.displayed += uint64(n)
	if journaled {
		t.records = append(t.records, textRecord{end: end, text: t.displayed})
	}
}

// synced makes the text of every record that ends at or before the
// journal's durable offset durable.
func (t *journalText) synced(durable uint64) {
	i := 0
	for ; i < len(t.records) && t.records[i].end <= durable; i++ {
		t.durable = t.records[i].text
	}
	t.records = t.records[i:]
}

// countersOf returns the step's counters: the journal's c and the text's;
// ja.mu is held.
func (ja *journalActor) countersOf(c persistence.JournalCounters) streamCounters {
	ja.text.synced(c.Durable)
	return streamCounters{displayed: c.Displayed, durable: c.Durable, textDisplayed: ja.text.displayed, textDurable: ja.text.durable}
}

// append journals one event and gives its text to the subscriber.
func (ja *journalActor) append(eventType string, payload []byte, text string) {
	ja.mu.Lock()
	var c persistence.JournalCounters
	if ja.err == nil {
		c, ja.err = ja.j.AppendText(eventType, payload, text)
		// A failed append may still have taken the record (its write
		// or fsync failed): it is then never durable either way.
		ja.text.appended(len(text), ja.err == nil, c.Displayed)
	} else {
		c = ja.j.Counters()
		ja.text.appended(len(text), false, 0)
	}
	sc := ja.countersOf(c)
	ok := ja.err == nil
	ja.mu.Unlock()
	if ja.stream != nil && (text != "" || ok) {
		ja.stream.push(Update{Delta: text, Model: ja.model}.withCounters(ja.base.plus(sc)))
	}
}

func (ja *journalActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ja.gen++
		ja.tick = after(ctx, max(ja.every, time.Millisecond), &journalTick{ja, ja.gen})
		ja.kills.Point(supervision.KindJournal)
	case *actor.Restarting:
		// Restarted after a failure: the journal and its counters are
		// this same value's, and go on; only the tick chain starts again.
		if ja.tick != nil {
			ja.tick.Stop()
		}
	case *journalTick:
		if m.to != ja || m.gen != ja.gen {
			return // an earlier instance's, or chain's
		}
		ja.kills.Point(supervision.KindJournal)
		ja.mu.Lock()
		var c, before persistence.JournalCounters
		var sc streamCounters
		if ja.err == nil {
			before = ja.j.Counters()
			c, ja.err = ja.j.Tick()
			sc = ja.countersOf(c)
		}
		ok := ja.err == nil
		ja.mu.Unlock()
		if c != before && ja.stream != nil {
			ja.stream.push(Update{Model: ja.model}.withCounters(ja.base.plus(sc)))
		}
		if ok {
			ja.tick = after(ctx, max(ja.every, time.Millisecond), &journalTick{ja, ja.gen})
		}
	case *actor.Stopping:
		if ja.tick != nil {
			ja.tick.Stop()
		}
		ja.mu.Lock()
		ja.j.Close()
		ja.mu.Unlock()
	}
}

// close ends the journal by mode; the step calls it once its stream has
// ended (a tick that comes after finds the journal closed).
func (ja *journalActor) close(mode closeMode) journalClosed {
	ja.mu.Lock()
	defer ja.mu.Unlock()
	var finish func() error
	var err error
	switch mode {
	case closeSynced:
		err = ja.j.Close()
	case closeDeferred:
		finish, err = ja.j.CloseDeferred(true)
	case closeDeferredUnsynced:
		finish, err = ja.j.CloseDeferred(false)
	}
	if err != nil && ja.err == nil {
		ja.err = err
	}
	if ja.err != nil {
		// The step goes on: its output is committed with the turn, and
		// the durable count shows what the journal holds.
		ja.log.Warn().Err(ja.err).Str("path", ja.j.Path()).Msg("stream journal failed")
	}
	return journalClosed{counters: ja.countersOf(ja.j.Counters()), finish: finish}
}

// finalizable says whether a step that ended with outcome k gets its
// response finalized (the others fail the turn).
func finalizable(k messages.OutcomeKind) bool {
	return k == messages.OutcomeCompleted || k == messages.OutcomeIncomplete || k == messages.OutcomePaused
}

// summarizeReq asks the librarian to fold turns into a new summary.
type summarizeReq struct {
	known    map[messages.TurnID]messages.Message // messages the branch had decoded
	from     *actor.PID
	branch   messages.BranchID
	epoch    uint64
	previous string
	pinned   []string // the head's pinned facts: the summary must not lose them
	turns    []messages.PendingTurn
	count    core.Counter // the branch model's: the new summary is counted here, off the branch
}

// shrinkReq asks the librarian to shrink a head summary (Config.Shrink).
type shrinkReq struct {
	from    *actor.PID
	epoch   uint64
	summary string
	target  int          // tokens, as count counts them
	count   core.Counter // the branch model's
}

// librarian writes state summaries with Config.Summarize: a librarian
// model (LLMSummarizer) or the deterministic fallback (SRD §10.3); and
// shrinks them with Config.Shrink.
type librarian struct{ rt *Runtime }

func (l *librarian) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *summarizeReq:
		l.rt.kills.Point(supervision.KindLibrarian)
		l.summarize(ctx, m)
	case *shrinkReq:
		l.rt.kills.Point(supervision.KindLibrarian)
		done := &shrinkDone{epoch: m.epoch}
		sctx := withOutbound(WithCounter(context.Background(), m.count), l.rt.outbound())
		done.summary, done.err = l.rt.cfg.Shrink(sctx, m.summary, m.target)
		done.err = l.rt.cfg.Scrub.Error(done.err)
		if done.err == nil && m.count != nil {
			m.count(done.summary) // warms the count cache, as for a summary
		}
		l.rt.jobs.done(m)
		ctx.Send(m.from, done)
	}
}

func (l *librarian) summarize(ctx actor.Context, m *summarizeReq) {
	if l.rt.dropSummaries.Load() > 0 && l.rt.dropSummaries.Add(-1) >= 0 {
		l.rt.jobs.done(m)
		return // lost, unanswered (tests)
	}
	done := &summaryDone{epoch: m.epoch}
	exchanges := make([]core.Exchange, 0, len(m.turns))
	for _, t := range m.turns {
		u, err := knownMessage(l.rt.db, m.known, t.Turn)
		if err != nil {
			done.err = err
			break
		}
		r, err := knownMessage(l.rt.db, m.known, t.Reply)
		if err != nil {
			done.err = err
			break
		}
		exchanges = append(exchanges, core.Exchange{User: u.RenderedText, Assistant: r.RenderedText})
		done.turns = append(done.turns, t.Turn)
	}
	if done.err == nil {
		sctx := withOutbound(WithPinnedFacts(context.Background(), m.pinned), l.rt.outbound())
		t0 := markNow()
		done.summary, done.err = l.rt.cfg.Summarize(sctx, m.previous, exchanges)
		done.took = t0.elapsed()
	}
	done.err = l.rt.cfg.Scrub.Error(done.err)
	if done.err == nil && m.count != nil {
		m.count(done.summary) // warms the runtime's count cache for the next assembly
	}
	l.rt.jobs.done(m)
	ctx.Send(m.from, done)
}

// indexReq asks the indexer to chunk and store a committed turn.
type indexReq struct {
	known   map[messages.TurnID]messages.Message // messages the branch had decoded
	from    *actor.PID
	branch  messages.BranchID
	session messages.SessionID
	turn    messages.TurnID
	seq     uint64
	reply   messages.NodeID
}

// indexer turns committed turns into chunk rows, embedded, idempotently:
// a chunk is unique by (source turn, type, content hash), so indexing
// twice inserts nothing (SRD §9.3).
type indexer struct {
	rt *Runtime
	// recent holds the chunks of the turns it indexed last, per branch:
	// the branch may not have committed them yet when the next turn
	// gives them its context.
	recent map[messages.BranchID][]recentTurn
}

// recentTurn is a turn the indexer indexed: its nodes, chunks, and the
// terms of its whole text.
type recentTurn struct {
	turn   messages.TurnID
	reply  messages.NodeID
	chunks []persistence.ChunkRow
	tf     map[string]float32
	n      float32
}

// remember keeps a turn among the branch's last few.
func (ix *indexer) remember(b messages.BranchID, t recentTurn) {
	if ix.recent == nil {
		ix.recent = map[messages.BranchID][]recentTurn{}
	}
	r := append(ix.recent[b], t)
	if len(r) > len(contextWeights)+1 {
		r = slices.Delete(r, 0, len(r)-len(contextWeights)-1)
	}
	ix.recent[b] = r
	if len(ix.recent) > 4096 { // many branches: start again rather than grow
		clear(ix.recent)
	}
}

// recentOf returns the remembered turn whose user message or reply is
// node.
func (ix *indexer) recentOf(b messages.BranchID, node messages.NodeID) (recentTurn, bool) {
	for _, r := range ix.recent[b] {
		if r.turn == node || (r.reply == node && !node.IsZero()) {
			return r, true
		}
	}
	return recentTurn{}, false
}

func (ix *indexer) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*indexReq)
	if !ok {
		return
	}
	ix.rt.kills.Point(supervision.KindIndexer)
	if ix.rt.dropIndexes.Load() > 0 && ix.rt.dropIndexes.Add(-1) >= 0 {
		ix.rt.jobs.done(m)
		return // lost, unanswered (tests)
	}
	t0 := markNow()
	rows, vecs, ups, err := ix.chunks(m)
	took := t0.elapsed()
	ix.rt.jobs.done(m)
	ctx.Send(m.from, &indexDone{turn: m.turn, rows: rows, vecs: vecs, ups: ups, err: err, took: took})
}

// index chunks a turn's two messages and stores the chunks; it returns
// how many chunks the turn has and how many of them were already stored.
func (ix *indexer) index(m *indexReq) (int, int, error) {
	// The context this turn gives the turns before it is not added
	// again: their partition entries hold it since they were indexed.
	rows, vecs, _, err := ix.chunks(m)
	if err != nil || len(rows) == 0 {
		return 0, 0, err
	}
	res, err := ix.rt.db.Commit(context.Background(), &persistence.Tx{Chunks: rows, Vectors: vecs})
	if err == nil {
		ix.rt.mem.added(rows, vecs, nil)
	}
	return len(rows), res.ChunksSkipped, err
}

// Neighbour context (LoCoMo dev: recall@10 0.652 → 0.761 with it): a
// chunk's full-text entry holds, besides its own terms, the terms of the
// turns around its own at these weights: the previous turn and the one
// before it when the chunk is indexed, the next two as they are.
var contextWeights = [2]float32{0.5, 0.25}

// chunks cuts a turn's two messages into chunk rows, with their
// full-text terms and neighbour context, and embeds them; it returns too
// the context this turn adds to the two turns before it on the branch.
// The branch stores it all in the transaction that marks the turn
// indexed. A failed embedding leaves the chunks to full-text search
// (logged): indexing does not wait for an embedding server.
func (ix *indexer) chunks(m *indexReq) ([]persistence.ChunkRow, []persistence.VectorRow, []persistence.TermUpdate, error) {
	rows, ups, err := ix.chunkRows(m)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vecs, err := ix.rt.mem.embedChunks(ctx, rows)
	if err != nil {
		ix.rt.log.Warn().Err(err).Str("branch", m.branch.String()).Str("turn", m.turn.String()).
			Msg("index: chunks stored without vectors (full-text search only)")
	}
	return rows, vecs, ups, nil
}

// chunkRows is chunks without the embedding: the turn's chunk rows and
// the context it adds to the two turns before it.
func (ix *indexer) chunkRows(m *indexReq) ([]persistence.ChunkRow, []persistence.TermUpdate, error) {
	now := ix.rt.cfg.Now()
	var rows []persistence.ChunkRow
	var own strings.Builder
	for _, node := range []messages.NodeID{m.turn, m.reply} {
		if node.IsZero() {
			continue
		}
		msg, err := knownMessage(ix.rt.db, m.known, node)
		if err != nil {
			return nil, nil, err
		}
		own.WriteString(msg.RenderedText + "\n")
		chunks := retrieval.ChunkTextWith(msg.Role, msg.RenderedText, ix.rt.cfg.ChunkOverlap)
		for _, tr := range toolResults(msg.Blocks) {
			own.WriteString(tr.text + "\n")
			chunks = append(chunks, retrieval.ChunkToolResult("result of "+tr.tool, tr.text)...)
		}
		for _, c := range chunks {
			hash := persistence.HashOf([]byte(c.Text))
			start, end := c.Start, c.Start+len(c.Text)
			if c.Type == messages.ChunkToolResult {
				start, end = 0, 0 // not in the rendered text: no offsets
			}
			terms, n := retrieval.TermFreqs(c.Text)
			rows = append(rows, persistence.ChunkRow{
				ID: ChunkIDFor(m.turn, c.Type, hash), Session: m.session, Branch: m.branch,
				SourceTurn: m.turn, Seq: m.seq, Node: node, Start: start, End: end,
				Type: c.Type, Text: c.Text, Summary: firstSentence(c.Text),
				TokenEst: c.TokenEst, Hash: hash, Created: now, Speaker: msg.Speaker, Time: msg.Time, Terms: terms, TermCount: n,
			})
		}
	}
	prev, err := ix.previousTurns(m, len(contextWeights))
	if err != nil {
		return nil, nil, err
	}
	for i := range rows {
		r := &rows[i]
		for j, p := range prev {
			r.TermCount += retrieval.AddWeighted(r.Terms, p.tf, p.n, contextWeights[j])
		}
	}
	var ups []persistence.TermUpdate
	tf, n := retrieval.TermFreqs(own.String())
	if len(prev) > 0 {
		for j, p := range prev {
			for _, c := range p.chunks {
				add := map[string]float32{}
				count := retrieval.AddWeighted(add, tf, n, contextWeights[j])
				ups = append(ups, persistence.TermUpdate{Branch: m.branch, Seq: c.Seq, Chunk: c.ID, Add: add, Count: count})
			}
		}
	}
	ix.remember(m.branch, recentTurn{turn: m.turn, reply: m.reply, chunks: rows, tf: tf, n: n})
	return rows, ups, nil
}

// toolResult is the text of a tool's result in a message.
type toolResult struct{ tool, text string }

// toolResults returns the results of tool calls a message holds (a reply
// with its tool loop), each with the name of the tool that gave it.
func toolResults(bs messages.Blocks) []toolResult {
	names := map[string]string{}
	var out []toolResult
	for _, b := range bs {
		switch b := b.(type) {
		case messages.ToolUse:
			names[b.ToolUseID] = b.Name
		case messages.ToolResult:
			if t := b.Content.RenderedText(); strings.TrimSpace(t) != "" {
				out = append(out, toolResult{tool: cmp.Or(names[b.ToolUseID], "a tool"), text: t})
			}
		}
	}
	return out
}

// neighbour is a turn before the one indexed: its terms and its chunks.
type neighbour struct {
	tf     map[string]float32
	n      float32
	chunks []persistence.ChunkRow
}

// previousTurns returns up to n turns before m's, nearest first, found
// by walking the transcript back from its user message (so a fork's
// first turns find their parent's): each turn is the messages from a
// user message up to the next one.
func (ix *indexer) previousTurns(m *indexReq, n int) ([]neighbour, error) {
	var out []neighbour
	node, err := ix.rt.db.Node(context.Background(), m.turn)
	if err != nil {
		return nil, err
	}
	var text []string
	for len(out) < n && !node.Parent.IsZero() {
		if node, err = ix.rt.db.Node(context.Background(), node.Parent); err != nil {
			return nil, err
		}
		if r, ok := ix.recentOf(m.branch, node.ID); ok {
			// Indexed just before: its terms are known, and its reply
			// and user message need not be read.
			if node.ID == r.turn {
				out = append(out, neighbour{tf: r.tf, n: r.n, chunks: r.chunks})
				text = text[:0]
			}
			continue
		}
		msg, err := knownMessage(ix.rt.db, m.known, node.ID)
		if err != nil {
			return nil, err
		}
		text = append(text, msg.RenderedText)
		if node.TypeTag != TypeUserMessage {
			continue
		}
		slices.Reverse(text)
		chunks, err := ix.rt.db.Chunks(context.Background(), node.ID)
		if err != nil {
			return nil, err
		}
		tf, n := retrieval.TermFreqs(strings.Join(text, "\n") + "\n")
		out = append(out, neighbour{tf: tf, n: n, chunks: chunks})
		text = text[:0]
	}
	return out, nil
}

// knownMessage returns known[node], or reads the node's message.
func knownMessage(db messageReader, known map[messages.NodeID]messages.Message, node messages.NodeID) (messages.Message, error) {
	if m, ok := known[node]; ok {
		return m, nil
	}
	return readMessage(db, node)
}

// firstSentence is a chunk's fallback summary: its first sentence, at
// most 200 bytes.
func firstSentence(s string) string {
	for i, r := range s {
		if (r == '.' || r == '!' || r == '?' || r == '\n') && i > 20 {
			s = s[:i+1]
			break
		}
	}
	return clipRunes(s, 200)
}

// clipRunes cuts s to at most n bytes without splitting a UTF-8 rune.
func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
