package actors

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// facts are user turns with one distinct detail each.
var facts = []string{
	"The staging database runs on host db-stage-7 in Frankfurt.",
	"Our release train leaves every second Tuesday at noon.",
	"The billing service is written in Rust and owned by Priya.",
	"Invoices are archived to the bucket s3://acme-invoices for seven years.",
	"The mobile app uses Kotlin Multiplatform for shared code.",
	"Customer support escalations go to the pager rotation named sunrise.",
}

// indexedConfig folds every turn at once, so that each is committed and
// indexed right after it is finalized.
func indexedConfig(t *testing.T, ev *events) Config {
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Fold = &core.Policy{}
	return cfg
}

// reopenIndexed closes r and opens a runtime of indexedConfig on its
// data directory (a restart), closed when the test ends.
func reopenIndexed(t *testing.T, r *Runtime) *Runtime {
	t.Helper()
	dir := r.cfg.DataDir
	r.Close()
	cfg := indexedConfig(t, newEvents())
	cfg.DataDir = dir
	r2 := openRuntime(t, cfg)
	t.Cleanup(func() { r2.Close() })
	return r2
}

// waitIndexed waits until n turns are indexed and searchable on b.
func waitIndexed(t *testing.T, r *Runtime, b messages.BranchID, ev *events, n int) {
	t.Helper()
	ev.waitFor(t, "TurnIndexed", n, isType[messages.TurnIndexed])
	if err := r.Settle(bg, b); err != nil { // commits what the branch holds
		t.Fatal(err)
	}
}

func sourceTurns(hits []Hit) []messages.TurnID {
	var out []messages.TurnID
	for _, h := range hits {
		out = append(out, h.Chunk.SourceTurn)
	}
	return out
}

// A fork retrieves its own turns and its parent's up to the fork point;
// never the parent's later turns, and the parent never the fork's.
func TestRetrievalIsForkAware(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	r := openRuntime(t, indexedConfig(t, ev))
	defer r.Close()
	_, main, _ := r.CreateSession(bg, "fork-aware")
	var turns []messages.TurnID
	for _, f := range facts[:3] {
		runTurn(t, r, main.ID, f)
		rows, _ := r.DB().TurnRows(bg, main.ID, uint64(len(turns)+1), 1)
		turns = append(turns, rows[0].ID)
	}
	waitIndexed(t, r, main.ID, ev, 3)
	fork, err := r.Fork(bg, main.ID, messages.NodeID{}, "fork")
	if err != nil {
		t.Fatal(err)
	}
	runTurn(t, r, main.ID, facts[3]) // the parent after the fork point
	runTurn(t, r, fork.ID, facts[4]) // the fork's own
	waitIndexed(t, r, main.ID, ev, 5)
	waitIndexed(t, r, fork.ID, ev, 5)
	mainAfter, _ := r.DB().TurnRows(bg, main.ID, 4, 1)
	forkOwn, _ := r.DB().TurnRows(bg, fork.ID, 4, 1)

	hits, err := r.Search(bg, fork.ID, "where are invoices archived", nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(sourceTurns(hits), mainAfter[0].ID) {
		t.Errorf("the fork retrieved the parent's turn after the fork point: %+v", hits)
	}
	hits, _ = r.Search(bg, fork.ID, "which language does the mobile app use for shared code", nil)
	if len(hits) == 0 || hits[0].Chunk.SourceTurn != forkOwn[0].ID {
		t.Errorf("the fork's own turn is not its best hit: %+v", hits)
	}
	// (The fork's own turn holds the billing turn as its neighbour
	// context, so it may rank first.)
	hits, _ = r.Search(bg, fork.ID, "who owns the billing service written in Rust", nil)
	if !slices.Contains(sourceTurns(hits[:min(2, len(hits))]), turns[2]) {
		t.Errorf("the parent's turn before the fork is not among the fork's best hits: %+v", hits)
	}
	hits, _ = r.Search(bg, main.ID, "which language does the mobile app use for shared code", nil)
	if slices.Contains(sourceTurns(hits), forkOwn[0].ID) {
		t.Errorf("the parent retrieved the fork's turn: %+v", hits)
	}
	hits, _ = r.Search(bg, main.ID, "where are invoices archived", nil)
	if len(hits) == 0 || hits[0].Chunk.SourceTurn != mainAfter[0].ID {
		t.Errorf("the parent's own later turn is not its best hit: %+v", hits)
	}

	// The same after a restart: the indexes are rebuilt from the store.
	r2 := reopenIndexed(t, r)
	hits, _ = r2.Search(bg, fork.ID, "where are invoices archived", nil)
	if slices.Contains(sourceTurns(hits), mainAfter[0].ID) {
		t.Errorf("after a restart the fork retrieved the parent's later turn: %+v", hits)
	}
	hits, _ = r2.Search(bg, main.ID, "where are invoices archived", nil)
	if len(hits) == 0 || hits[0].Chunk.SourceTurn != mainAfter[0].ID {
		t.Errorf("after a restart: %+v", hits)
	}
}

// memoryRuntime runs turns on a new branch of a runtime that folds every
// turn at once and keeps two turns verbatim, its provider the fake f.
func memoryRuntime(t *testing.T, turns []string) (*Runtime, *fake.Provider, *events, *persistence.BranchRow) {
	t.Helper()
	ev := newEvents()
	cfg := indexedConfig(t, ev)
	f := fake.New()
	cfg.Provider = f
	cfg.Fold = &core.Policy{K: 2, B: 0}
	r := openRuntime(t, cfg)
	t.Cleanup(func() { r.Close() })
	_, b, err := r.CreateSession(bg, "memory")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range turns {
		runTurn(t, r, b.ID, text)
	}
	return r, f, ev, &b
}

// An old turn that left the verbatim window comes back as retrieved
// memory when the conversation needs it; what was offered is recorded
// and context debug rebuilds the context with it exactly.
func TestRetrievedMemoryReachesTheContext(t *testing.T) {
	t.Parallel()
	r, f, ev, b := memoryRuntime(t, facts)
	waitIndexed(t, r, b.ID, ev, len(facts)-1)
	rows, _ := r.DB().TurnRows(bg, b.ID, 1, 1)
	runTurn(t, r, b.ID, "Remind me: which host runs the staging database?")
	sent := f.Requests()[len(f.Requests())-1].Context
	if len(sent.Retrieved) == 0 || sent.Retrieved[0].SourceTurn != rows[0].ID || !strings.Contains(sent.Retrieved[0].Text, "db-stage-7") {
		t.Fatalf("retrieved memory sent: %+v", sent.Retrieved)
	}
	for _, w := range sent.Window {
		if strings.Contains(w.RenderedText, "db-stage-7") {
			t.Fatal("the first turn is still in the verbatim window: the test proves nothing")
		}
	}
	last, _ := r.DB().TurnRows(bg, b.ID, uint64(len(facts)+1), 1)
	d, err := r.DebugContext(bg, b.ID, last[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Matches || len(d.Retrieved) == 0 || d.Retrieved[0].Chunk != sent.Retrieved[0].Chunk || len(d.Report.Chunks) == 0 {
		t.Errorf("context debug: matches %v, retrieved %+v, report chunks %+v", d.Matches, d.Retrieved, d.Report.Chunks)
	}
}

// A turn still in the verbatim window is never offered again as
// retrieved memory, however well it matches, while one that left the
// window is; every turn is indexed when the question is asked.
func TestVerbatimTurnsAreNotRetrieved(t *testing.T) {
	t.Parallel()
	turns := append(slices.Clone(facts), "The launch code word for the staging database is zebra-42.")
	r, f, ev, b := memoryRuntime(t, turns)
	waitIndexed(t, r, b.ID, ev, len(turns)-1) // Settle indexes the last one
	runTurn(t, r, b.ID, "Which launch code word and which host belong to the staging database?")
	sent := f.Requests()[len(f.Requests())-1].Context
	inWindow := false
	for _, w := range sent.Window {
		inWindow = inWindow || strings.Contains(w.RenderedText, "zebra-42")
	}
	if !inWindow {
		t.Fatal("the last fact is not in the verbatim window: the test proves nothing")
	}
	stage := false
	for _, c := range sent.Retrieved {
		if strings.Contains(c.Text, "zebra-42") {
			t.Errorf("retrieved chunk %s repeats a turn in the verbatim window", c.Chunk)
		}
		stage = stage || strings.Contains(c.Text, "db-stage-7")
	}
	if !stage {
		t.Errorf("the first fact, out of the window, was not retrieved: %+v", sent.Retrieved)
	}
}

// failingEmbedder fails every call.
type failingEmbedder struct{ retrieval.HashEmbedder }

func (failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("embedding server down")
}

// With the embedder failing, chunks are still indexed for full-text
// search; a turn whose search fails goes on without retrieval, and the
// failure is recorded with its context.
func TestRetrievalFailureDoesNotFailTheTurn(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := indexedConfig(t, ev)
	cfg.Embedder = failingEmbedder{}
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "failing")
	runTurn(t, r, b.ID, facts[0])
	waitIndexed(t, r, b.ID, ev, 1)
	_, last, _ := runTurn(t, r, b.ID, "which host runs staging?")
	if last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("the turn ended %+v", last)
	}
	rows, _ := r.DB().TurnRows(bg, b.ID, 2, 1)
	steps, _ := r.DB().Steps(bg, rows[0].ID)
	if len(steps) != 1 || !strings.Contains(steps[0].Context.RetrievalError, "embedding server down") {
		t.Errorf("recorded retrieval error: %+v", steps[0].Context)
	}
	first, _ := r.DB().TurnRows(bg, b.ID, 1, 1)
	if cs, _ := r.DB().Chunks(bg, first[0].ID); len(cs) == 0 {
		t.Error("the first turn was not indexed")
	}
}

// Chunks chosen by the user reach the next turn first, once, even after
// a restart; a chunk of another session cannot be chosen.
func TestForceChunks(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := indexedConfig(t, ev)
	f := fake.New()
	cfg.Provider = f
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "force")
	for _, fact := range facts[:4] {
		runTurn(t, r, b.ID, fact)
	}
	waitIndexed(t, r, b.ID, ev, 4)
	hits, err := r.Search(bg, b.ID, "release train Tuesday", nil)
	if err != nil || len(hits) == 0 {
		t.Fatal(hits, err)
	}
	chosen := hits[0].Chunk.ID
	if err := r.ForceChunks(bg, b.ID, []messages.ChunkID{chosen}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	cfg.DataDir = r.cfg.DataDir
	r = openRuntime(t, cfg)
	defer r.Close()
	runTurn(t, r, b.ID, "unrelated: what is for lunch")
	sent := f.Requests()[len(f.Requests())-1].Context
	if len(sent.Retrieved) == 0 || sent.Retrieved[0].Chunk != chosen || sent.Retrieved[0].Score != ForcedScore {
		t.Errorf("the forced chunk was not sent first: %+v", sent.Retrieved)
	}
	runTurn(t, r, b.ID, "unrelated again: what is for dinner")
	if sent := f.Requests()[len(f.Requests())-1].Context; slices.ContainsFunc(sent.Retrieved, func(c messages.RetrievedChunk) bool {
		return c.Score == ForcedScore
	}) {
		t.Error("the chunk was forced into a second turn")
	}
	_, other, _ := r.CreateSession(bg, "other")
	if err := r.ForceChunks(bg, other.ID, []messages.ChunkID{chosen}); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("forcing another session's chunk: %v", err)
	}
	if err := r.ForceChunks(bg, b.ID, nil); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Errorf("forcing nothing: %v", err)
	}
}

// Imported exchanges become turns without a provider step: in the
// transcript, folded, indexed and retrievable, and still there after a
// restart.
func TestImport(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := indexedConfig(t, ev)
	f := fake.New()
	cfg.Provider = f
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "import")
	var xs []Exchange
	for _, fact := range facts {
		xs = append(xs, Exchange{User: messages.NewMessage(messages.RoleUser, messages.Text{Text: fact}),
			Reply: messages.NewMessage(messages.RoleAssistant)})
	}
	ids, err := r.Import(bg, b.ID, xs)
	if err != nil || len(ids) != len(facts) {
		t.Fatal(ids, err)
	}
	waitIndexed(t, r, b.ID, ev, len(facts))
	if len(f.Requests()) != 0 {
		t.Errorf("an import called the provider %d times", len(f.Requests()))
	}
	hits, err := r.Search(bg, b.ID, "who owns the billing service", nil)
	if err != nil || len(hits) == 0 || hits[0].Chunk.SourceTurn != ids[2].Turn || ids[2].Seq != 3 {
		t.Fatalf("search after import: %+v, %v", hits, err)
	}
	h, _, _ := r.History(bg, b.ID, messages.TurnID{}, 100)
	if len(h) != 2*len(facts) || h[0].Message.RenderedText != facts[0] || h[1].Message.Role != messages.RoleAssistant {
		t.Errorf("history after import: %d entries", len(h))
	}
	// A turn after the import sees them like any other.
	runTurn(t, r, b.ID, "and the release train?")
	if rows, _ := r.DB().TurnRows(bg, b.ID, 7, 1); len(rows) != 1 || rows[0].Seq != 7 {
		t.Errorf("the turn after the import: %+v", rows)
	}
	if _, err := r.Import(bg, b.ID, []Exchange{{User: messages.NewMessage(messages.RoleAssistant), Reply: xs[0].Reply}}); !errors.Is(err, persistence.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "exchanges[0].user: role assistant, want user") {
		t.Errorf("an exchange with the wrong role: %v", err)
	}
	if _, err := r.Import(bg, b.ID, nil); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Errorf("importing nothing: %v", err)
	}
	r2 := reopenIndexed(t, r)
	info, err := r2.Inspect(bg, b.ID)
	if err != nil || info.TurnSeq != 7 {
		t.Errorf("after a restart: %+v, %v", info, err)
	}
}

// A tool's result is indexed as a ToolResult chunk, labelled with the
// tool, and comes back from search.
func TestToolResultsAreIndexed(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := fake.New(
		fake.Step{Reply: "Looking.", Items: messages.Items{grepCall("a", "invoice-7781-kestrel")}, Outcome: pausedForTools},
		fake.Step{Reply: "Found it."},
	)
	r, _, b := toolRuntime(t, f, messages.ToolsEnabled, grepTool(&calls, nil))
	defer r.Close()
	runTurn(t, r, b, "find the invoice")
	if err := r.Settle(bg, b); err != nil {
		t.Fatal(err)
	}
	hits, err := r.Search(bg, b, "kestrel invoice 7781", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, h := range hits {
		if h.Chunk.Type == messages.ChunkToolResult && h.Chunk.Text == "result of grep: match:invoice-7781-kestrel" {
			found = true
		}
	}
	if !found {
		t.Errorf("no tool result chunk among %+v", hits)
	}
}

// Vectors are kept per embedder: after a switch the search goes on with
// full text alone, never comparing vectors of two models, until the
// turns are embedded again (Reindex) in the new namespace.
func TestEmbedderSwitchUsesANewNamespace(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := indexedConfig(t, ev)
	cfg.Embedder = retrieval.HashEmbedder{Dims: 512}
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "switch")
	for _, f := range facts[:3] {
		runTurn(t, r, b.ID, f)
	}
	waitIndexed(t, r, b.ID, ev, 3)
	r.Close()
	cfg.Embedder = retrieval.HashEmbedder{Dims: 64}
	r2 := openRuntime(t, cfg)
	defer r2.Close()
	hits, err := r2.Search(bg, b.ID, "who owns the billing service", nil)
	if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Chunk.Text, "billing") {
		t.Fatalf("search after the switch: %+v, %v", hits, err)
	}
	for _, h := range hits {
		if h.Vector != 0 {
			t.Fatalf("a vector score with no vectors in the new namespace: %+v", h)
		}
	}
	if _, _, err := r2.Reindex(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	hits, _ = r2.Search(bg, b.ID, "who owns the billing service", nil)
	if len(hits) == 0 || hits[0].Vector == 0 {
		t.Errorf("after reindexing no vector scores: %+v", hits)
	}
	r2.Close()
	r3 := openRuntime(t, cfg) // the index is loaded from the store again
	defer r3.Close()
	hits, _ = r3.Search(bg, b.ID, "who owns the billing service", nil)
	if len(hits) == 0 || hits[0].Vector == 0 {
		t.Errorf("after reindexing no vector scores: %+v", hits)
	}
}

// SearchAndForce forces its hits, then the chunks named, into the next
// turn only when asked; without a query it forces the chunks alone.
func TestSearchAndForce(t *testing.T) {
	t.Parallel()
	r, f, ev, b := memoryRuntime(t, facts[:4])
	waitIndexed(t, r, b.ID, ev, 3) // Settle indexes the last one
	hits, forced, err := r.SearchAndForce(bg, b.ID, "release train Tuesday", nil, retrieval.Filter{}, false, nil)
	if err != nil || len(hits) == 0 || forced != 0 {
		t.Fatalf("search without force: %d hits, %d forced, %v", len(hits), forced, err)
	}
	named := hits[len(hits)-1].Chunk.ID
	if _, forced, err = r.SearchAndForce(bg, b.ID, "", nil, retrieval.Filter{}, true, []messages.ChunkID{named}); err != nil || forced != 1 {
		t.Fatalf("force one named chunk: %d forced, %v", forced, err)
	}
	got, forced, err := r.SearchAndForce(bg, b.ID, "release train Tuesday", nil, retrieval.Filter{}, true, []messages.ChunkID{named})
	if err != nil || forced != len(got)+1 {
		t.Fatalf("search and force: %d hits, %d forced, %v", len(got), forced, err)
	}
	runTurn(t, r, b.ID, "unrelated: what is for lunch")
	sent := f.Requests()[len(f.Requests())-1].Context
	for _, id := range append([]messages.ChunkID{named}, sourceChunks(got)...) {
		if !slices.ContainsFunc(sent.Retrieved, func(c messages.RetrievedChunk) bool { return c.Chunk == id && c.Score == ForcedScore }) {
			t.Errorf("chunk %s was not sent forced: %+v", id, sent.Retrieved)
		}
	}
	if _, _, err := r.SearchAndForce(bg, b.ID, "", nil, retrieval.Filter{}, true, []messages.ChunkID{{1}}); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("forcing an unknown chunk: %v", err)
	}
}

func sourceChunks(hits []Hit) []messages.ChunkID {
	var out []messages.ChunkID
	for _, h := range hits {
		out = append(out, h.Chunk.ID)
	}
	return out
}

// A turn's index results are held for the branch's next write: with the
// flush delay far off, they are committed (searchable, their job done)
// with the next turn's first commit and not before; Inspect commits what
// is held before it reports a turn indexed.
func TestIndexResultsRideTheNextWrite(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := indexedConfig(t, ev)
	cfg.IndexFlushDelay = time.Hour
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "ride")
	indexJobs := func() int {
		jobs, err := r.DB().Jobs(bg)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, j := range jobs {
			if j.Type == persistence.JobIndex && j.Branch == b.ID {
				n++
			}
		}
		return n
	}
	staging := func() bool {
		hits, err := r.Search(bg, b.ID, "staging database host Frankfurt", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if strings.Contains(h.Chunk.Text, "db-stage-7") {
				return true
			}
		}
		return false
	}
	runTurn(t, r, b.ID, facts[0])
	ev.waitFor(t, "TurnIndexed", 1, isType[messages.TurnIndexed])
	if staging() || indexJobs() != 1 {
		t.Fatalf("held index results: searchable %v, index jobs %d; want not yet, 1", staging(), indexJobs())
	}
	runTurn(t, r, b.ID, facts[1])
	if !staging() {
		t.Fatal("the first turn's index results were not committed with the second turn")
	}
	ev.waitFor(t, "TurnIndexed", 2, isType[messages.TurnIndexed])
	if n := indexJobs(); n != 1 {
		t.Fatalf("index jobs %d after the second turn was indexed, want 1 (its own, held)", n)
	}
	info, err := r.Inspect(bg, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := indexJobs(); n != 0 || len(info.Turns) != 0 {
		t.Fatalf("after Inspect: index jobs %d, turns not indexed %d; want 0, 0", n, len(info.Turns))
	}
}

// A hit comes into the context with the chunks beside it in the
// conversation, merged into one excerpt in their order, while they fit
// in the retrieval budget: with room for the hit alone, it comes alone.
// Context debug rebuilds the excerpt exactly.
func TestNeighboursComeWithTheirHit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget int // 0: the configuration's
		alone  bool
	}{{"room", 0, false}, {"no room", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := newEvents()
			cfg := indexedConfig(t, ev)
			f := fake.New()
			cfg.Provider = f
			cfg.Fold = &core.Policy{K: 2, B: 0}
			rank := *FillConfig(cfg).Rank
			rank.Neighbours = 1
			cfg.Rank = &rank
			if tc.budget == 1 { // room for the staging turn's message, not for a neighbour
				cfg.RetrievalMax = core.MemoryFrameTokens(tokens.Estimate.Count) + core.ArtifactTokens(facts[0], tokens.Estimate.Count)
			}
			r := openRuntime(t, cfg)
			defer r.Close()
			_, b, _ := r.CreateSession(bg, "neighbours")
			for _, text := range facts {
				runTurn(t, r, b.ID, text)
			}
			waitIndexed(t, r, b.ID, ev, len(facts)-1)
			runTurn(t, r, b.ID, "Remind me: which host runs the staging database in Frankfurt?")
			last, _ := r.DB().TurnRows(bg, b.ID, uint64(len(facts)+1), 1)
			steps, _ := r.DB().Steps(bg, last[0].ID)
			refs := steps[0].Context.Retrieved
			if rc := steps[0].Context; rc.RetrievalTokens <= 0 || rc.RetrievalTokens > rc.RetrievalMax {
				t.Errorf("retrieval tokens recorded: %d of %d", rc.RetrievalTokens, rc.RetrievalMax)
			}
			if len(refs) == 0 {
				t.Fatal("nothing retrieved")
			}
			hit, err := r.DB().ChunkByID(bg, refs[0].Chunk)
			if err != nil || !strings.Contains(hit.Text, "db-stage-7") {
				t.Fatalf("first retrieved %+v (%v), want the staging turn's chunk", hit, err)
			}
			sent := f.Requests()[len(f.Requests())-1].Context.Retrieved[0]
			if tc.alone {
				if len(refs[0].Excerpt) != 0 || sent.Text != hit.Text {
					t.Errorf("with room for the hit alone: excerpt %v, text %q", refs[0].Excerpt, sent.Text)
				}
			} else {
				var rows []persistence.ChunkRow
				for _, id := range refs[0].Excerpt {
					row, err := r.DB().ChunkByID(bg, id)
					if err != nil {
						t.Fatal(err)
					}
					rows = append(rows, row)
				}
				if len(rows) < 2 || !slices.Contains(refs[0].Excerpt, hit.ID) || sent.Text != excerptText(rows) ||
					!strings.HasPrefix(sent.Text, hit.Text) && !strings.Contains(sent.Text, "\n"+hit.Text) {
					t.Errorf("excerpt %v sent as %q, want the hit and its neighbours in order", refs[0].Excerpt, sent.Text)
				}
				for i := 1; i < len(rows); i++ {
					if rows[i].Seq < rows[i-1].Seq {
						t.Errorf("excerpt out of the conversation's order: %+v", rows)
					}
				}
			}
			d, err := r.DebugContext(bg, b.ID, last[0].ID)
			if err != nil || !d.Matches {
				t.Errorf("context debug: matches %v, %v", d.Matches, err)
			}
		})
	}
}

// A branch's loaded index goes when its actor stops (passivation frees
// it), and its next search loads it again from the store, finding the
// same chunks.
func TestPassivationFreesTheIndex(t *testing.T) {
	t.Parallel()
	r, _, ev, b := memoryRuntime(t, facts)
	waitIndexed(t, r, b.ID, ev, len(facts)-1)
	loaded := func() bool {
		r.mem.mu.Lock()
		defer r.mem.mu.Unlock()
		_, ok := r.mem.parts[b.ID]
		return ok
	}
	before, err := r.Search(bg, b.ID, "staging database host", nil)
	if err != nil || len(before) == 0 || !loaded() {
		t.Fatalf("Search() = %d hits, %v, index loaded %v", len(before), err, loaded())
	}
	pid, err := r.pid(bg, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	<-r.goneChan(pid)
	if loaded() {
		t.Fatal("the index of a branch whose actor stopped is still loaded")
	}
	after, err := r.Search(bg, b.ID, "staging database host", nil)
	if err != nil || !slices.Equal(sourceChunks(after), sourceChunks(before)) {
		t.Fatalf("Search() after the reload = %v, %v; want %v", sourceChunks(after), err, sourceChunks(before))
	}
}

// An ancestor's index that a fork's searches loaded stays while a branch
// searched since its actor started uses it, and goes with the last one.
func TestPassivationFreesAncestorIndexes(t *testing.T) {
	t.Parallel()
	r, _, ev, b := memoryRuntime(t, facts)
	waitIndexed(t, r, b.ID, ev, len(facts)-1)
	fork, err := r.Fork(bg, b.ID, messages.NodeID{}, "")
	if err != nil {
		t.Fatal(err)
	}
	loaded := func(id messages.BranchID) bool {
		r.mem.mu.Lock()
		defer r.mem.mu.Unlock()
		_, ok := r.mem.parts[id]
		return ok
	}
	stop := func(id messages.BranchID) {
		t.Helper()
		pid, err := r.pid(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Stop(bg, id); err != nil {
			t.Fatal(err)
		}
		<-r.goneChan(pid)
	}
	before, err := r.Search(bg, fork.ID, "staging database host", nil)
	if err != nil || len(before) == 0 || !loaded(fork.ID) || !loaded(b.ID) {
		t.Fatalf("Search(fork) = %d hits, %v; loaded: fork %v, parent %v", len(before), err, loaded(fork.ID), loaded(b.ID))
	}
	stop(b.ID)
	if !loaded(b.ID) {
		t.Fatal("the parent's index went with its actor while its fork's searches use it")
	}
	stop(fork.ID)
	if loaded(b.ID) || loaded(fork.ID) {
		t.Fatalf("after both actors stopped: parent's index loaded %v, fork's %v", loaded(b.ID), loaded(fork.ID))
	}
	after, err := r.Search(bg, fork.ID, "staging database host", nil)
	if err != nil || !slices.Equal(sourceChunks(after), sourceChunks(before)) {
		t.Fatalf("Search(fork) after the reload = %v, %v; want %v", sourceChunks(after), err, sourceChunks(before))
	}
}
