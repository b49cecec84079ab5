package actors

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// memory is the runtime's retrieval (SRD §8, §9): the embedder and the
// in-memory index of each branch's partition, loaded from the store when
// first searched and kept up to date as chunks are committed. The store
// is the source of truth; an index is a cache. It is safe for concurrent
// use.
type memory struct {
	db    chunkRows
	embed retrieval.Embedder
	ns    string // retrieval.Namespace(embed)
	opts  retrieval.RankOptions

	mu    sync.Mutex
	parts map[messages.BranchID]*partition
	// A branch searched is a user of its lineage's indexes (its own and
	// its ancestors', which its searches load) until its actor stops
	// (drop): lineage holds each user's lineage, refs how many users
	// each index has. An index goes with its last user.
	lineage map[messages.BranchID][]messages.BranchID
	refs    map[messages.BranchID]int
	// Loads run in the background (load); stop ends them when the
	// runtime closes, and loads says when they have.
	stop      context.Context
	stopLoads context.CancelFunc
	loads     sync.WaitGroup

	// Off the store's read path of every search: a branch's parent and
	// fork point never change, and a turn's chunks change only by
	// additions, which added merges in.
	parents    genCache[messages.BranchID, forkPoint]
	turnChunks genCache[messages.TurnID, []messages.ChunkID]
}

// maxPartitionRows bounds each generation of a partition's cache of
// chunk rows (partition.rows; rows hold their text: a few KB each at
// most).
const maxPartitionRows = 512

// forkPoint is where a branch was forked: its parent (zero for a root)
// and the parent's seq it was forked at.
type forkPoint struct {
	parent messages.BranchID
	seq    uint64
}

// partition is a branch's index, ready once loaded.
type partition struct {
	p     *retrieval.Partition
	ready chan struct{}
	err   error        // set before ready closes
	read  atomic.Int64 // chunks read from the store so far
	start mark
	// rows are the rows of the partition's chunks that searches found
	// (hits, and their neighbours), each read from the store (two reads
	// and a JSON decoding) the first time only: chunk rows are written
	// once and never change. They go with the index (drop), so that
	// what a branch holds follows its data and passivation frees it.
	rows genCache[messages.ChunkID, persistence.ChunkRow]
}

func newPartition(dim int) *partition {
	return &partition{p: retrieval.NewPartition(dim), ready: make(chan struct{}),
		rows: genCache[messages.ChunkID, persistence.ChunkRow]{limit: maxPartitionRows}}
}

// chunkRows is what retrieval reads of the store: the chunk rows, with
// their vectors, and the branch rows that say where a branch was forked.
type chunkRows interface {
	BranchRow(ctx context.Context, id messages.BranchID) (persistence.BranchRow, error)
	Chunks(ctx context.Context, turn messages.TurnID) ([]persistence.ChunkRow, error)
	ChunkByID(ctx context.Context, id messages.ChunkID) (persistence.ChunkRow, error)
	BranchChunkVectors(ctx context.Context, ns string, branch messages.BranchID, fn func(persistence.ChunkDoc, []float32) error) error
}

func newMemory(db chunkRows, embed retrieval.Embedder, opts retrieval.RankOptions) *memory {
	m := &memory{db: db, embed: embed, ns: retrieval.Namespace(embed), opts: opts,
		parts: map[messages.BranchID]*partition{}, lineage: map[messages.BranchID][]messages.BranchID{},
		refs: map[messages.BranchID]int{}}
	m.stop, m.stopLoads = context.WithCancel(context.Background())
	return m
}

// close ends the loads under way and waits for them: the runtime is
// closing its store.
func (m *memory) close() {
	m.stopLoads()
	m.loads.Wait()
}

// fresh registers an empty index for branch, loaded: a branch an import
// is building, which has no chunk in the store yet. The chunks committed
// from now on are added to it (added), so that its first search reads
// none from the store: the first turn after a long import does not wait
// for its whole index to load.
func (m *memory) fresh(branch messages.BranchID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.parts[branch]; !ok {
		pt := newPartition(m.embed.Dim())
		close(pt.ready)
		m.parts[branch] = pt
	}
}

// drop frees branch's loaded index, and its ancestors' that no other
// branch searched since its actor started uses: its actor stopped
// (passivated, or the runtime closing). The next search of the branch,
// or of a fork of it, loads them from the store again.
func (m *memory) drop(branch messages.BranchID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.use(branch, nil)
	if m.refs[branch] == 0 {
		delete(m.parts, branch)
	}
}

// use records lineage (branch, then its ancestors) as what branch's
// searches use; nil ends branch's use. An index no branch uses any more
// is freed. The caller holds m.mu.
func (m *memory) use(branch messages.BranchID, lineage []messages.BranchID) {
	old := m.lineage[branch]
	if slices.Equal(old, lineage) {
		return
	}
	for _, b := range lineage {
		m.refs[b]++
	}
	if lineage == nil {
		delete(m.lineage, branch)
	} else {
		m.lineage[branch] = lineage
	}
	for _, b := range old {
		if m.refs[b]--; m.refs[b] <= 0 {
			delete(m.refs, b)
			delete(m.parts, b)
		}
	}
}

// chunk returns the row of chunk id, a chunk of pt's index (nil: not
// known), from pt's cache of rows when it holds it.
func (m *memory) chunk(ctx context.Context, pt *partition, id messages.ChunkID) (persistence.ChunkRow, error) {
	if pt != nil {
		if row, ok := pt.rows.get(id); ok {
			return row, nil
		}
	}
	row, err := m.db.ChunkByID(ctx, id)
	if err == nil && pt != nil {
		pt.rows.put(id, row)
	}
	return row, err
}

// ChunkIDFor is the id of the chunk (turn, type, hash): the turn's
// timestamp, then 80 bits of a SHA-256 of the three, so that the same
// chunk indexed twice, or by two branches, has one id.
func ChunkIDFor(turn messages.TurnID, typ messages.ChunkType, hash persistence.Hash) messages.ChunkID {
	h := sha256.New()
	h.Write(turn[:])
	h.Write([]byte{byte(typ)})
	h.Write(hash[:])
	var id messages.ChunkID
	copy(id[:6], turn[:6])
	copy(id[6:], h.Sum(nil)[:10])
	return id
}

// partition returns branch's index. The first call starts loading it
// from the store in the background (load). With wait, it waits for the
// load until ctx is done, and fails naming how far the load got; without,
// it returns the index as loaded so far, which grows as the load goes on
// (a turn's search takes it so rather than stall on a large branch's
// load, or fail). A load that failed is started again by the next call.
func (m *memory) partition(ctx context.Context, branch messages.BranchID, wait bool) (*retrieval.Partition, error) {
	pt, err := m.index(ctx, branch, wait)
	if pt == nil {
		return nil, err
	}
	return pt.p, err
}

// index is partition, returning the branch's index with its cache of
// rows.
func (m *memory) index(ctx context.Context, branch messages.BranchID, wait bool) (*partition, error) {
	m.mu.Lock()
	pt, ok := m.parts[branch]
	if !ok {
		pt = newPartition(m.embed.Dim())
		pt.start = markNow()
		m.parts[branch] = pt
		m.loads.Add(1)
		go m.load(branch, pt)
	}
	m.mu.Unlock()
	if !wait {
		select {
		case <-pt.ready:
			return pt, pt.err
		default:
			return pt, nil
		}
	}
	select {
	case <-pt.ready:
		return pt, pt.err
	case <-ctx.Done():
		return nil, fmt.Errorf("still loading from the store: %d chunks read in %s: %w",
			pt.read.Load(), pt.start.elapsed().Round(time.Millisecond), ctx.Err())
	}
}

// load reads branch's index from the store into pt: its partition rows,
// each with its vector of the runtime's embedder namespace (read with the
// rows: a few queries on PostgreSQL, not one per chunk). pt is registered
// before it is read: chunks committed meanwhile are added to it by added
// (Add is idempotent).
func (m *memory) load(branch messages.BranchID, pt *partition) {
	defer m.loads.Done()
	err := m.db.BranchChunkVectors(m.stop, m.ns, branch, func(d persistence.ChunkDoc, vec []float32) error {
		pt.p.Add(retrieval.Doc{ID: d.Chunk, Seq: d.Seq, Terms: d.Terms, Len: d.TermCount, Vector: vec,
			Time: d.Meta.Time, Role: d.Meta.Role, Speaker: d.Meta.Speaker})
		pt.read.Add(1)
		return m.stop.Err()
	})
	if err != nil {
		pt.err = fmt.Errorf("read its chunks from the store (%d read): %w", pt.read.Load(), err)
		m.mu.Lock()
		if m.parts[branch] == pt {
			delete(m.parts, branch) // loaded again next time
		}
		m.mu.Unlock()
	}
	close(pt.ready)
}

// added adds committed chunks to the loaded indexes of their branches;
// a branch not loaded reads them from the store when it is.
func (m *memory) added(rows []persistence.ChunkRow, vecs []persistence.VectorRow, ups []persistence.TermUpdate) {
	byChunk := make(map[messages.ChunkID][]float32, len(vecs))
	for _, v := range vecs {
		if v.Namespace == m.ns {
			byChunk[v.Chunk] = v.Vector
		}
	}
	// Indexing hands over all of a turn's chunks at once: the cache
	// holds them whole (with any it held before).
	byTurn := map[messages.TurnID][]messages.ChunkID{}
	for _, c := range rows {
		byTurn[c.SourceTurn] = append(byTurn[c.SourceTurn], c.ID)
	}
	for turn, ids := range byTurn {
		m.turnChunks.update(turn, func(old []messages.ChunkID, _ bool) []messages.ChunkID {
			out := slices.Clone(old)
			for _, id := range ids {
				if !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
			return out
		})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range rows {
		if pt, ok := m.parts[c.Branch]; ok {
			m := persistence.MetaOf(c)
			pt.p.Add(retrieval.Doc{ID: c.ID, Seq: c.Seq, Terms: c.Terms, Len: c.TermCount, Vector: byChunk[c.ID],
				Time: m.Time, Role: m.Role, Speaker: m.Speaker})
		}
	}
	for _, u := range ups {
		if pt, ok := m.parts[u.Branch]; ok {
			pt.p.AddTerms(u.Chunk, u.Add, u.Count)
		}
	}
}

// embedChunks embeds the texts of rows and returns their vector rows.
func (m *memory) embedChunks(ctx context.Context, rows []persistence.ChunkRow) ([]persistence.VectorRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	texts := make([]string, len(rows))
	for i, r := range rows {
		texts[i] = r.Text
	}
	vecs, err := m.embed.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed %d chunks with %s: %w", len(rows), m.ns, err)
	}
	if len(vecs) != len(rows) {
		return nil, fmt.Errorf("embed %d chunks with %s: %d vectors", len(rows), m.ns, len(vecs))
	}
	out := make([]persistence.VectorRow, len(rows))
	for i, r := range rows {
		out[i] = persistence.VectorRow{Namespace: m.ns, Chunk: r.ID, Vector: vecs[i]}
	}
	return out, nil
}

// Hit is a chunk a search found: its row and how it ranked.
type Hit struct {
	Chunk persistence.ChunkRow `json:"chunk"`
	// Score is the final score; Vector and Text the normalized scores
	// of the two searches, Relevance their weighted sum (before the
	// recency boost).
	Score     float64 `json:"score"`
	Vector    float64 `json:"vector"`
	Text      float64 `json:"text"`
	Relevance float64 `json:"relevance"`
}

// scopes returns what a query on branch may see: its own partition, and
// each ancestor's up to the seq it was forked at; with wait, once each is
// loaded whole (partition).
func (m *memory) scopes(ctx context.Context, branch messages.BranchID, wait bool) ([]retrieval.Scope, error) {
	out, _, err := m.scopesWith(ctx, branch, wait)
	return out, err
}

// scopesWith is scopes, with the index of each scope (parts[i] is
// scopes[i]'s).
func (m *memory) scopesWith(ctx context.Context, branch messages.BranchID, wait bool) (scopes []retrieval.Scope, parts []*partition, err error) {
	var out []retrieval.Scope
	maxSeq := uint64(math.MaxUint64)
	lineage := []messages.BranchID{branch}
	for b, depth := branch, 0; !b.IsZero(); depth++ {
		if depth > 1000 {
			return nil, nil, fmt.Errorf("branch %s: more than 1000 ancestors", branch)
		}
		pt, err := m.index(ctx, b, wait)
		if err != nil {
			return nil, nil, fmt.Errorf("load the index of branch %s: %w", b, err)
		}
		out = append(out, retrieval.Scope{Part: pt.p, MaxSeq: maxSeq})
		parts = append(parts, pt)
		fp, ok := m.parents.get(b)
		if !ok {
			row, err := m.db.BranchRow(ctx, b)
			if err != nil {
				return nil, nil, err
			}
			fp = forkPoint{parent: row.Parent, seq: row.ForkSeq}
			m.parents.put(b, fp)
		}
		if fp.parent.IsZero() {
			break
		}
		b, maxSeq = fp.parent, min(maxSeq, fp.seq)
		lineage = append(lineage, b)
	}
	m.mu.Lock()
	m.use(branch, lineage)
	m.mu.Unlock()
	return out, parts, nil
}

// holding returns the index of the scope that holds chunk id within its
// seq, if any.
func holding(scopes []retrieval.Scope, parts []*partition, id messages.ChunkID) *partition {
	for i, s := range scopes {
		if seq, ok := s.Part.Seq(id); ok && seq <= s.MaxSeq {
			return parts[i]
		}
	}
	return nil
}

// search runs the hybrid search for text on branch (its partition and
// its ancestors' up to the fork points), leaving out the chunks whose
// source turn exclude holds (they are in the prompt verbatim), and
// returns the hits with their chunk rows.
//
// filter keeps only the chunks it accepts, as the search looks.
//
// took, if not nil, gets the time spent embedding text and searching.
func (m *memory) search(ctx context.Context, branch messages.BranchID, text string, opts retrieval.RankOptions,
	filter retrieval.Filter, exclude map[messages.TurnID]bool, took *searchTook) ([]Hit, error) {
	scopes, parts, err := m.scopesWith(ctx, branch, false)
	if err != nil {
		return nil, err
	}
	t0 := markNow()
	vecs, err := m.embed.Embed(ctx, []string{text})
	if took != nil {
		took.embed = t0.elapsed()
		defer func() { took.search = t0.elapsed() - took.embed }()
	}
	if err != nil {
		return nil, fmt.Errorf("embed the query with %s: %w", m.ns, err)
	}
	q := retrieval.Query{Text: text, Scopes: scopes, Filter: filter}
	if len(vecs) == 1 {
		q.Vector = vecs[0]
	}
	var excluded map[messages.ChunkID]bool
	if len(exclude) > 0 {
		excluded = map[messages.ChunkID]bool{}
		q.Exclude = func(id retrieval.DocID) bool { return excluded[id] }
		// Chunk ids begin with their turn's timestamp but are not
		// derived from the turn id alone: find them through the rows.
		for turn := range exclude {
			ids, err := m.chunksOf(ctx, turn)
			if err != nil {
				return nil, err
			}
			for _, id := range ids {
				excluded[id] = true
			}
		}
	}
	ranked, err := retrieval.Search(ctx, q, opts)
	if err != nil {
		return nil, err
	}
	out := make([]Hit, 0, len(ranked))
	for _, r := range ranked {
		row, err := m.chunk(ctx, holding(scopes, parts, r.Doc), r.Doc)
		if errors.Is(err, persistence.ErrNotFound) {
			continue // indexed but its row is gone: not expected; skip it
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Hit{Chunk: row, Score: r.Score, Vector: r.Vector, Text: r.Text, Relevance: r.Relevance})
	}
	return out, nil
}

// chunksOf returns the ids of turn's chunks. A turn not indexed yet has
// none, and is cached so: chunks reach the store only through commits
// that then call added (index results, reindexing), which adds them to
// the cache too. (The turns in the verbatim window, excluded from every
// search, are mostly not indexed yet: each used to cost a store scan.)
func (m *memory) chunksOf(ctx context.Context, turn messages.TurnID) ([]messages.ChunkID, error) {
	if ids, ok := m.turnChunks.get(turn); ok {
		return ids, nil
	}
	rows, err := m.db.Chunks(ctx, turn)
	if err != nil {
		return nil, err
	}
	ids := make([]messages.ChunkID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	// Merged with what added put meanwhile, if it did.
	m.turnChunks.update(turn, func(old []messages.ChunkID, _ bool) []messages.ChunkID {
		for _, id := range old {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return ids
	})
	return ids, nil
}

// Search runs the hybrid retrieval of branch for query (SRD §8): the
// chunks of the branch's own turns and of its ancestors' up to the fork
// points, best first, at most opts.TopK (zero opts: the runtime's).
func (r *Runtime) Search(ctx context.Context, branch messages.BranchID, query string, opts *retrieval.RankOptions) ([]Hit, error) {
	return r.SearchWith(ctx, branch, query, opts, retrieval.Filter{})
}

// SearchWith is Search of the chunks filter keeps only: said by a role
// or a participant, within a time (retrieval.Filter). The filter applies
// as the search looks, so that it returns up to opts' count of those.
func (r *Runtime) SearchWith(ctx context.Context, branch messages.BranchID, query string, opts *retrieval.RankOptions, filter retrieval.Filter) ([]Hit, error) {
	if query == "" {
		return nil, fmt.Errorf("%w: query is empty", persistence.ErrInvalidArgument)
	}
	if err := CheckFilter(filter); err != nil {
		return nil, err
	}
	if _, err := r.db.BranchRow(ctx, branch); err != nil {
		return nil, err
	}
	if err := r.placed(ctx, branch, messages.SessionID{}); err != nil {
		return nil, err // its indexes are its owner's
	}
	o := r.mem.opts
	if opts != nil {
		o = *opts
	}
	// The indexes searched are loaded first, within the caller's time
	// (a large branch's from the store takes seconds): the search's own
	// budget starts once they are.
	scopes, err := r.mem.scopes(ctx, branch, true)
	if err != nil {
		return nil, err
	}
	if err := checkSpeakerIn(filter.Speaker, scopes); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return r.mem.search(ctx, branch, query, o, filter, nil, nil)
}

// checkSpeakerIn refuses a filter's speaker that is neither a role nor
// a participant the scopes' chunks name, naming those it could be.
func checkSpeakerIn(speaker string, scopes []retrieval.Scope) error {
	switch speaker {
	case "", retrieval.RoleUser, retrieval.RoleAssistant, retrieval.RoleTool:
		return nil
	}
	var names []string
	for _, s := range scopes {
		for _, n := range s.Part.Speakers() {
			if strings.EqualFold(n, speaker) {
				return nil
			}
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	known := "its turns name none"
	if len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	return fmt.Errorf("%w: speaker: %q, want user, assistant, tool or a participant of the branch's turns (%s)",
		persistence.ErrInvalidArgument, speaker, known)
}

// CheckFilter reports what is wrong with f as a search's filter, naming
// the field: a speaker that is no name (messages.CheckSpeaker), a time
// range that ends before it starts.
func CheckFilter(f retrieval.Filter) error {
	if err := messages.CheckSpeaker(f.Speaker); err != nil {
		return fmt.Errorf("%w: speaker: %w", persistence.ErrInvalidArgument, err)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return fmt.Errorf("%w: from: %s is not before to: %s", persistence.ErrInvalidArgument,
			f.From.Format(time.RFC3339), f.To.Format(time.RFC3339))
	}
	return nil
}

// SearchAndForce is Search for query (none when it is empty) and then,
// with force, ForceChunks of its hits followed by chunks: what `ctxinf
// search` and the HTTP API's search do. It returns the hits and how many
// chunks were forced.
func (r *Runtime) SearchAndForce(ctx context.Context, branch messages.BranchID, query string, opts *retrieval.RankOptions,
	filter retrieval.Filter, force bool, chunks []messages.ChunkID) ([]Hit, int, error) {
	var hits []Hit
	var ids []messages.ChunkID
	if query != "" {
		var err error
		if hits, err = r.SearchWith(ctx, branch, query, opts, filter); err != nil {
			return nil, 0, err
		}
		for _, h := range hits {
			ids = append(ids, h.Chunk.ID)
		}
	}
	ids = append(ids, chunks...)
	if !force || len(ids) == 0 {
		return hits, 0, nil
	}
	if err := r.ForceChunks(ctx, branch, ids); err != nil {
		return nil, 0, err
	}
	return hits, len(ids), nil
}

type forceReq struct{ chunks []messages.ChunkID }

// ForceChunks makes chunks part of the retrieved memory of branch's next
// turn, ahead of the search's hits (ForcedScore), still within the
// retrieval budget. Each must be retrievable on branch: a chunk of its
// own turns or of its ancestors' up to the fork points. The choice is a
// durable event (messages.ChunksForced); at most core.ForcedMax chunks
// wait for a turn.
func (r *Runtime) ForceChunks(ctx context.Context, branch messages.BranchID, chunks []messages.ChunkID) error {
	if len(chunks) == 0 || len(chunks) > 64 {
		return fmt.Errorf("%w: chunks: %d, want 1 to 64", persistence.ErrInvalidArgument, len(chunks))
	}
	if err := r.placed(ctx, branch, messages.SessionID{}); err != nil {
		return err
	}
	scopes, err := r.mem.scopes(ctx, branch, true)
	if err != nil {
		return err
	}
	for _, id := range chunks {
		visible := false
		for _, s := range scopes {
			if seq, ok := s.Part.Seq(id); ok && seq <= s.MaxSeq {
				visible = true
				break
			}
		}
		if !visible {
			return fmt.Errorf("%w: chunk %s is not retrievable on branch %s", persistence.ErrNotFound, id, branch)
		}
	}
	_, err = r.ask(ctx, branch, &forceReq{chunks: chunks})
	return err
}

// Settle folds every pending turn of branch into its summary now and
// waits until every turn of the branch is indexed (searchable), or ctx
// is done.
func (r *Runtime) Settle(ctx context.Context, branch messages.BranchID) error {
	if err := r.CommitPending(ctx, branch); err != nil {
		return err
	}
	wait := 200 * time.Microsecond
	for {
		info, err := r.Inspect(ctx, branch)
		if err != nil {
			return err
		}
		if len(info.Turns) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("settle branch %s: %d turns not indexed yet: %w", branch, len(info.Turns), ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Millisecond)
	}
}

// RankOptions returns the hybrid ranker's settings the runtime uses.
func (r *Runtime) RankOptions() retrieval.RankOptions { return r.mem.opts }

// Embed embeds texts with the runtime's embedder (retrieval.embedder),
// returning its name with the vectors.
func (r *Runtime) Embed(ctx context.Context, texts []string) (string, [][]float32, error) {
	vs, err := r.mem.embed.Embed(ctx, texts)
	return r.mem.embed.Name(), vs, err
}

// Embedder names the runtime's embedder (retrieval.embedder: its model
// and dimension) and the length of the vectors it gives.
func (r *Runtime) Embedder() (name string, dim int) {
	return r.mem.embed.Name(), r.mem.embed.Dim()
}

// force forces chunks into the retrieved memory of the branch's next
// turn (ForceChunks).
func (a *branchActor) force(ctx actor.Context, chunks []messages.ChunkID) error {
	evs, err := a.b.Force(chunks, a.now())
	if err == nil {
		a.persistAll(ctx, evs)
	}
	return err
}

// searchTook is where a search spent its time: embedding the query, and
// the rest (the search, reading the hits' rows).
type searchTook struct{ embed, search time.Duration }
