package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// messageCache holds the decoded messages of a branch's window, its
// pending turns and its turn in flight, so that assembling a context
// reads the store only for what this instance has not seen (after
// activation).
type messageCache struct {
	rows messageReader
	m    map[messages.TurnID]messages.Message
}

func newMessageCache(rows messageReader) messageCache {
	return messageCache{rows: rows, m: map[messages.TurnID]messages.Message{}}
}

// get returns a transcript node's message, from the cache or the store.
func (c messageCache) get(node messages.NodeID) (messages.Message, error) {
	if m, ok := c.m[node]; ok {
		return m, nil
	}
	m, err := readMessage(c.rows, node)
	if err == nil {
		c.m[node] = m
	}
	return m, err
}

// put caches the message of node, which this instance wrote.
func (c messageCache) put(node messages.NodeID, m messages.Message) { c.m[node] = m }

// knownInto copies the cached messages of nodes into known, so that the
// librarian and indexer need not read and decode them again.
func (c messageCache) knownInto(known map[messages.NodeID]messages.Message, nodes ...messages.NodeID) {
	for _, n := range nodes {
		if m, ok := c.m[n]; ok {
			known[n] = m
		}
	}
}

// prune drops the cached messages that are no longer in b's window,
// pending, or the turn keep.
func (c messageCache) prune(b *core.Branch, keep messages.TurnID) {
	live := make(map[messages.TurnID]bool, len(b.Window)+8)
	for _, n := range b.Window {
		live[n] = true
	}
	for _, p := range b.PendingRefs() {
		live[p.ID], live[p.Reply] = true, true
	}
	live[keep] = true
	for n := range c.m {
		if !live[n] {
			delete(c.m, n)
		}
	}
}

func readMessage(db messageReader, node messages.NodeID) (messages.Message, error) {
	var m messages.Message
	t, err := db.Node(context.Background(), node)
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
	user, err := a.msgs.get(turn)
	if err != nil {
		return messages.AssembledContext{}, core.AssemblyReport{}, err
	}
	ac, rep, recipe, err := a.assembleFor(turn, user, continuation)
	if err != nil {
		return ac, rep, err
	}
	a.msgs.prune(&a.b, turn)
	a.loop.recipe = recipe
	for _, st := range rep.Shrink {
		a.rt.log.Info().Str("branch", a.id.String()).Str("turn", turn.String()).Str("step", st.Step).
			Int("saved_tokens", st.Saved).Str("detail", st.Detail).Msg("context shrunk")
	}
	return ac, rep, nil
}

// assembleFor assembles the context of user message user (transcript
// node userNode; zero for a message not stored) and returns the recipe
// to rebuild it from the store.
func (a *branchActor) assembleFor(userNode messages.NodeID, user messages.Message, continuation messages.Items) (
	messages.AssembledContext, core.AssemblyReport, *persistence.ContextRecipe, error) {
	t0 := markNow()
	recipe := &persistence.ContextRecipe{State: a.b.State.ID, Pinned: slices.Clone(a.b.State.Pinned), User: userNode,
		Latency: &persistence.ContextLatency{}}
	pending := a.b.PendingRefs()
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
		m, err := a.msgs.get(n)
		if err != nil {
			return messages.AssembledContext{}, core.AssemblyReport{}, nil, err
		}
		in.Window = append(in.Window, m)
	}
	for _, p := range pending {
		pm := core.PendingMessages{Turn: p.ID}
		for _, n := range []messages.NodeID{p.ID, p.Reply} {
			m, err := a.msgs.get(n)
			if err != nil {
				return messages.AssembledContext{}, core.AssemblyReport{}, nil, err
			}
			pm.Messages = append(pm.Messages, m)
		}
		in.Pending = append(in.Pending, pm)
	}
	m := a.rt.model(a.b.Model)
	budget := a.rt.budget(m)
	in.Retrieved = a.retrieve(user, recipe, budget.RetrievalMax, a.rt.counter(m))
	if t, ok := a.b.Turn(userNode); ok && !userNode.IsZero() && t.Params.MaxOutputTokens != nil {
		budget.ResponseReserve = clientReserve(*t.Params.MaxOutputTokens, budget)
	}
	for range a.loop.sizeRetries {
		// The provider counted more than estimated: aim a quarter lower.
		budget.SafetyMargin += budget.Input() / 4
	}
	recipe.ContextLimit, recipe.ResponseReserve, recipe.SafetyMargin = budget.ContextLimit, budget.ResponseReserve, budget.SafetyMargin
	recipe.RetrievalMax, recipe.ChunkMax = budget.RetrievalMax, budget.ChunkMax
	ac, rep := assembleShrinking(in, budget, a.rt.counter(m))
	// recipe.Hash is left to whoever needs it: a turn's step hashes the
	// context it sends once the stream is under way (stepDone.hash).
	recipe.Estimated = rep.Total
	recipe.Latency.AssembleMicros = t0.elapsed().Microseconds()
	for _, sec := range rep.Sections {
		if sec.Name == core.SectionRetrieved {
			recipe.RetrievalTokens = sec.Tokens
		}
	}
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
// verbatim, with their neighbours (retrieval.neighbours) while they fit
// in what budget tokens (counted with count) leaves after the forced
// chunks; and records them in recipe. A failed search is recorded and
// logged, and the turn goes on without retrieval (SRD §8.3).
func (a *branchActor) retrieve(user messages.Message, recipe *persistence.ContextRecipe, budget int, count core.Counter) []core.Candidate {
	if a.rt.cfg.NoRetrieval || user.RenderedText == "" {
		return nil
	}
	var out []core.Candidate
	seen := map[messages.ChunkID]bool{}
	add := func(e excerpt, forced bool) {
		if seen[e.best.ID] {
			return
		}
		seen[e.best.ID] = true
		c := core.Candidate{Summary: e.best.Summary,
			Chunk: messages.RetrievedChunk{Chunk: e.best.ID, SourceTurn: e.best.SourceTurn, Text: e.best.Text, Score: e.score}}
		ref := persistence.RetrievedRef{Chunk: e.best.ID, Score: e.score, Forced: forced}
		if len(e.rows) > 1 {
			c.Summary, c.Chunk.Text = "", e.text()
			for _, r := range e.rows {
				ref.Excerpt = append(ref.Excerpt, r.ID)
			}
		}
		out = append(out, c)
		recipe.Retrieved = append(recipe.Retrieved, ref)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	budget -= core.MemoryFrameTokens(count) // the memory's preamble and end, once
	for _, id := range a.b.Forced {
		c, err := a.rt.mem.chunk(ctx, nil, id)
		if err != nil {
			a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("forced chunk not found")
			continue
		}
		add(excerpt{best: c, score: ForcedScore, rows: []persistence.ChunkRow{c}}, true)
		budget -= core.ArtifactTokens(c.Text, count)
	}
	verbatim := map[messages.TurnID]bool{}
	for _, n := range recipe.Window {
		verbatim[n] = true
	}
	for _, t := range recipe.Pending {
		verbatim[t] = true
	}
	t0 := markNow()
	var took searchTook
	hits, err := a.rt.mem.search(ctx, a.id, user.RenderedText, a.rt.mem.opts, retrieval.Filter{}, verbatim, &took)
	recipe.Latency.EmbedMicros, recipe.Latency.SearchMicros = took.embed.Microseconds(), took.search.Microseconds()
	if obs := a.rt.cfg.ObserveRetrieval; obs != nil {
		obs(a.id, len(hits), t0.elapsed(), err)
	}
	if err != nil {
		recipe.RetrievalError = err.Error()
		a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("retrieval failed; the turn goes on without it")
		return out
	}
	excerpts, err := a.rt.mem.around(ctx, a.id, hits, verbatim, max(budget, 1), count)
	if err != nil {
		recipe.RetrievalError = err.Error()
		a.rt.log.Warn().Err(err).Str("branch", a.id.String()).Msg("retrieval failed; the turn goes on without it")
		return out
	}
	for _, e := range excerpts {
		add(e, false)
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
		a.folds.budgetFold(ctx)
	}
	if over {
		return errors.New(rep.Error())
	}
	return nil
}
