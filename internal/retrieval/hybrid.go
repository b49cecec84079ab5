package retrieval

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
)

// RankOptions are the hybrid ranker's settings (SRD §8.2). Their
// defaults are the configuration's retrieval section (internal/config;
// config.yaml says why full text leads), which internal/wiring maps onto
// them.
type RankOptions struct {
	// VectorWeight and TextWeight weigh the normalized vector and
	// full-text scores; they sum to 1.
	VectorWeight float64
	TextWeight   float64
	// RecencyWeight is added, times 2^(-age/RecencyHalfLife), to the
	// score of a chunk age turns older than the newest one searched.
	RecencyWeight   float64
	RecencyHalfLife float64
	// Threshold is the relevance floor: past the first TopK results, a
	// candidate whose combined relevance (before the recency boost) is
	// below it is not picked.
	Threshold float64
	// MMRLambda trades relevance (1) against diversity (0) when picking
	// the results from the candidates (maximal marginal relevance).
	MMRLambda float64
	// Overfetch is how many candidates each search returns. TopK is the
	// floor: the best TopK candidates are results whatever their
	// relevance. MaxK is the ceiling: more results are picked while their
	// relevance reaches Threshold, up to MaxK (0: TopK), for the
	// assembler to pack by score within its token budget.
	Overfetch int
	TopK      int
	MaxK      int
	// TimeBoost is added to the score of a candidate said within the
	// time the query names (ParseWhen, against the newest chunk's time
	// searched). A candidate said by a participant the query names (one
	// its chunks name: Doc.Speaker), or, when it names none, by the user
	// when it speaks of "I" and by the assistant when it speaks of "you"
	// (addressedRole), scores its relevance times 1 + SpeakerBoost: a
	// share of what it is worth, so that the named participant's weak
	// candidates do not pass the other's strong ones (a question may
	// name one participant and be answered by the other). 0: none.
	TimeBoost    float64
	SpeakerBoost float64
	// Neighbours is how many chunks after each result, in the order of
	// the conversation, the runtime adds to the retrieved memory it
	// offers a context (not Search), while they fit in its budget (a
	// question's answer), and NeighboursBefore how many before it (an
	// answer's question). Chunks that touch are merged into one excerpt.
	Neighbours       int
	NeighboursBefore int
}

// MaxNeighbours bounds RankOptions.Neighbours and NeighboursBefore.
const MaxNeighbours = 8

// Max is the most results o picks: MaxK, or TopK when MaxK is 0.
func (o RankOptions) Max() int {
	if o.MaxK == 0 {
		return o.TopK
	}
	return o.MaxK
}

// Validate reports the first setting out of range, naming it and its
// limits.
func (o RankOptions) Validate() error {
	switch {
	case o.VectorWeight < 0 || o.VectorWeight > 1:
		return fmt.Errorf("retrieval: vector_weight: %g, want 0 to 1", o.VectorWeight)
	case o.TextWeight < 0 || o.TextWeight > 1:
		return fmt.Errorf("retrieval: text_weight: %g, want 0 to 1", o.TextWeight)
	case math.Abs(o.VectorWeight+o.TextWeight-1) > 1e-6:
		return fmt.Errorf("retrieval: vector_weight + text_weight: %g, want 1", o.VectorWeight+o.TextWeight)
	case o.RecencyWeight < 0 || o.RecencyWeight > 1:
		return fmt.Errorf("retrieval: recency_weight: %g, want 0 to 1", o.RecencyWeight)
	case o.RecencyWeight > 0 && o.RecencyHalfLife <= 0:
		return fmt.Errorf("retrieval: recency_half_life: %g, want more than 0 turns", o.RecencyHalfLife)
	case o.Threshold < 0 || o.Threshold > 1:
		return fmt.Errorf("retrieval: threshold: %g, want 0 to 1", o.Threshold)
	case o.MMRLambda < 0 || o.MMRLambda > 1:
		return fmt.Errorf("retrieval: mmr_lambda: %g, want 0 to 1", o.MMRLambda)
	case o.Overfetch < 1 || o.Overfetch > 1000:
		return fmt.Errorf("retrieval: overfetch: %d, want 1 to 1000", o.Overfetch)
	case o.TopK < 1 || o.TopK > o.Overfetch:
		return fmt.Errorf("retrieval: top_k: %d, want 1 to overfetch (%d)", o.TopK, o.Overfetch)
	case o.TimeBoost < 0 || o.TimeBoost > 1:
		return fmt.Errorf("retrieval: time_boost: %g, want 0 to 1", o.TimeBoost)
	case o.SpeakerBoost < 0 || o.SpeakerBoost > 1:
		return fmt.Errorf("retrieval: speaker_boost: %g, want 0 to 1", o.SpeakerBoost)
	case o.Neighbours < 0 || o.Neighbours > MaxNeighbours:
		return fmt.Errorf("retrieval: neighbours: %d, want 0 to %d", o.Neighbours, MaxNeighbours)
	case o.NeighboursBefore < 0 || o.NeighboursBefore > MaxNeighbours:
		return fmt.Errorf("retrieval: neighbours_before: %d, want 0 to %d", o.NeighboursBefore, MaxNeighbours)
	case o.MaxK != 0 && (o.MaxK < o.TopK || o.MaxK > o.Overfetch):
		return fmt.Errorf("retrieval: max_k: %d, want top_k (%d) to overfetch (%d)", o.MaxK, o.TopK, o.Overfetch)
	}
	return nil
}

// Ranked is a result of a hybrid search.
type Ranked struct {
	Doc   DocID
	Seq   uint64  // the turn seq of the chunk's source
	Score float64 // final: relevance with its boosts (who said it, when, recency)
	// Vector and Text are the normalized scores combined (0 when that
	// search did not find the chunk); Relevance their weighted sum.
	Vector, Text, Relevance float64
}

// Doc is one chunk as a Partition indexes it.
type Doc struct {
	ID     DocID
	Seq    uint64             // the turn seq of its source, for recency and fork cut-offs
	Terms  map[string]float32 // TermFreqs of its text, plus its neighbours' context
	Len    float32            // the sum of Terms
	Vector []float32          // its embedding; nil if it has none
	// Time is when its text was said, in Unix milliseconds (0: not
	// known, when its id's time stands for it); Role the role of the
	// message it is from (RoleUser, RoleAssistant, RoleTool; "" not
	// known); Speaker the participant who said it, when its
	// conversation names one.
	Time    int64
	Role    string
	Speaker string
}

// Partition is the in-memory index of one branch's chunks: full text
// and vectors, safe for concurrent use.
type Partition struct {
	mu     sync.RWMutex
	text   *FullText
	vec    *Vectors
	seq    map[DocID]uint64
	bySeq  map[uint64][]DocID // the chunks of each turn
	newest uint64
	// Who said each chunk and when (meta.go): the names of the
	// participants its chunks name, the newest time of each turn and of
	// all.
	meta       map[DocID]docMeta
	names      []string
	nameIdx    map[string]uint32
	seqTime    map[uint64]int64
	newestTime int64
}

// NewPartition returns an empty partition for dim-dimensional vectors.
func NewPartition(dim int) *Partition {
	return &Partition{text: NewFullText(), vec: NewVectors(dim), seq: map[DocID]uint64{}, bySeq: map[uint64][]DocID{},
		meta: map[DocID]docMeta{}, nameIdx: map[string]uint32{}, seqTime: map[uint64]int64{}}
}

// Add indexes d; a chunk present already is left as it is (false),
// but gains d's vector if it had none (embedded again after a switch of
// embedder).
func (p *Partition) Add(d Doc) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.seq[d.ID]; ok {
		if d.Vector != nil {
			p.vec.Add(d.ID, d.Vector)
		}
		return false
	}
	p.seq[d.ID] = d.Seq
	p.bySeq[d.Seq] = append(p.bySeq[d.Seq], d.ID)
	p.newest = max(p.newest, d.Seq)
	p.addMeta(d)
	p.text.Add(d.ID, d.Terms, d.Len)
	if d.Vector != nil {
		p.vec.Add(d.ID, d.Vector)
	}
	return true
}

// AddTerms adds a later turn's context to chunk id's full-text entry.
func (p *Partition) AddTerms(id DocID, tf map[string]float32, n float32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.text.AddTerms(id, tf, n)
}

// Seq returns the turn seq of chunk id, and whether it is indexed.
func (p *Partition) Seq(id DocID) (uint64, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.seq[id]
	return s, ok
}

// AtSeq returns the chunks indexed of the turn at seq, in the order
// they were added.
func (p *Partition) AtSeq(seq uint64) []DocID {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.bySeq[seq])
}

// Len returns the number of chunks indexed.
func (p *Partition) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.seq)
}

// Scope is a partition and the newest turn seq of it a query may see: a
// fork sees its parent's chunks up to the fork point only.
type Scope struct {
	Part   *Partition
	MaxSeq uint64 // math.MaxUint64: all
}

// Query is a hybrid search over scopes (the branch's own partition and
// its ancestors', cut at the fork points).
type Query struct {
	Text   string
	Vector []float32 // the query's embedding; nil searches full text only
	Scopes []Scope
	// Exclude leaves chunks out (those already in the prompt verbatim).
	Exclude func(DocID) bool
	// Filter keeps only the chunks it accepts, as the searches look:
	// they return up to their count of those.
	Filter Filter
}

// parallelSearchDocs is the number of chunks in a query's scopes from
// which Search runs its searches on goroutines of their own.
const parallelSearchDocs = 8192

// Search runs the full-text and vector searches of every scope (in
// parallel over parallelSearchDocs chunks), normalizes each signal to
// [0, 1] over the candidates (min to max), combines them with the
// weights, adds the recency boost, drops what is under the threshold and
// picks TopK by maximal marginal relevance. Ties are broken by score,
// then recency, then id.
func Search(ctx context.Context, q Query, o RankOptions) ([]Ranked, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	type found struct {
		text, vec []Hit
		seq       map[DocID]uint64
		vectors   map[DocID][]float32
		boost     map[DocID]gain
		newest    uint64
	}
	res := make([]found, len(q.Scopes))
	terms := QueryTerms(q.Text)
	var stats Stats
	for _, s := range q.Scopes {
		s.Part.mu.RLock()
		s.Part.text.AddStats(&stats, terms)
	}
	b := boostsOf(q, o)
	// The full-text and vector searches of each scope run side by side
	// when there is enough to search (about 80 ns a chunk); below that a
	// goroutine's wait for a CPU costs more than it saves.
	docs := 0
	for _, s := range q.Scopes {
		docs += len(s.Part.seq)
	}
	run := func(f func()) { f() }
	var wg sync.WaitGroup
	if docs >= parallelSearchDocs {
		run = wg.Go
	}
	// A time the query names: its chunks are candidates too, found by
	// searches of that time alone (they need not be among the best of
	// the whole conversation to be boosted).
	timed := make([]found, len(q.Scopes))
	for i, s := range q.Scopes {
		filter := q.Filter.keeps(s.Part)
		keep := func(id DocID) bool {
			return s.Part.seq[id] <= s.MaxSeq && (q.Exclude == nil || !q.Exclude(id)) && (filter == nil || filter(id))
		}
		run(func() {
			res[i].text = s.Part.text.SearchTerms(terms, stats, o.Overfetch, keep)
		})
		run(func() {
			if q.Vector != nil && o.VectorWeight > 0 {
				res[i].vec = s.Part.vec.Search(q.Vector, o.Overfetch, keep)
			}
		})
		if b.timed {
			inTime := func(id DocID) bool { return keep(id) && b.inTime(s.Part.meta[id]) }
			run(func() {
				timed[i].text = s.Part.text.SearchTerms(terms, stats, o.Overfetch, inTime)
			})
			run(func() {
				if q.Vector != nil && o.VectorWeight > 0 {
					timed[i].vec = s.Part.vec.Search(q.Vector, o.Overfetch, inTime)
				}
			})
		}
	}
	wg.Wait()
	for i, s := range q.Scopes {
		r := &res[i]
		r.text, r.vec = append(r.text, timed[i].text...), append(r.vec, timed[i].vec...)
		n := len(r.text) + len(r.vec)
		r.seq, r.vectors = make(map[DocID]uint64, n), make(map[DocID][]float32, n)
		var named map[uint32]bool
		if b.any() {
			r.boost, named = make(map[DocID]gain, n), b.speakersIn(s.Part)
		}
		for _, h := range slices.Concat(r.text, r.vec) {
			r.seq[h.Doc] = s.Part.seq[h.Doc]
			r.vectors[h.Doc] = s.Part.vec.Vector(h.Doc)
			if r.boost != nil {
				r.boost[h.Doc] = b.of(named, s.Part.meta[h.Doc])
			}
		}
		r.newest = min(s.Part.newest, s.MaxSeq)
		s.Part.mu.RUnlock()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := 0
	for i := range res {
		n += len(res[i].text) + len(res[i].vec)
	}
	cands := make(map[DocID]*Ranked, n)
	vectors := make(map[DocID][]float32, n)
	boosts := make(map[DocID]gain)
	var newest uint64
	add := func(hits []Hit, r *found, vector bool) {
		for _, h := range hits {
			c := cands[h.Doc]
			if c == nil {
				c = &Ranked{Doc: h.Doc, Seq: r.seq[h.Doc], Vector: math.NaN(), Text: math.NaN()}
				cands[h.Doc] = c
				vectors[h.Doc] = r.vectors[h.Doc]
				if x := r.boost[h.Doc]; x != (gain{}) {
					boosts[h.Doc] = x
				}
			}
			if vector {
				c.Vector = math.Max(nanTo(c.Vector, -2), h.Score)
			} else {
				c.Text = math.Max(nanTo(c.Text, -1), h.Score)
			}
		}
	}
	for i := range res {
		add(res[i].text, &res[i], false)
		add(res[i].vec, &res[i], true)
		newest = max(newest, res[i].newest)
	}
	list := make([]*Ranked, 0, len(cands))
	for _, c := range cands {
		list = append(list, c)
	}
	normalize(list, func(r *Ranked) *float64 { return &r.Vector }, false)
	normalize(list, func(r *Ranked) *float64 { return &r.Text }, true)
	kept := list[:0]
	for _, c := range list {
		c.Relevance = o.VectorWeight*c.Vector + o.TextWeight*c.Text
		if q.Vector == nil || o.VectorWeight == 0 {
			c.Relevance = c.Text
		}
		c.Score = boosts[c.Doc].score(c.Relevance)
		if o.RecencyWeight > 0 {
			age := float64(newest - min(c.Seq, newest))
			c.Score += o.RecencyWeight * math.Exp2(-age/o.RecencyHalfLife)
		}
		kept = append(kept, c)
	}
	slices.SortFunc(kept, byScore)
	kept = kept[:min(len(kept), o.Overfetch)]
	return mmr(kept, vectors, o), nil
}

func nanTo(x, v float64) float64 {
	if math.IsNaN(x) {
		return v
	}
	return x
}

// normalize maps one signal of the candidates to [0, 1], min to max (or
// 0 to max when fromZero: BM25 scores start at 0 for a document without
// the query's terms, which the candidates, the best few, do not show); a
// candidate the signal did not find gets 0, and when all found are equal
// they get 1.
func normalize(list []*Ranked, field func(*Ranked) *float64, fromZero bool) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range list {
		if v := *field(c); !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if fromZero && lo > 0 {
		lo = 0
	}
	for _, c := range list {
		f := field(c)
		switch {
		case math.IsNaN(*f):
			*f = 0
		case hi > lo:
			*f = (*f - lo) / (hi - lo)
		default:
			*f = 1
		}
	}
}

func byScore(a, b *Ranked) int {
	switch {
	case a.Score > b.Score:
		return -1
	case a.Score < b.Score:
		return 1
	case a.Seq > b.Seq:
		return -1
	case a.Seq < b.Seq:
		return 1
	}
	return bytes.Compare(a.Doc[:], b.Doc[:])
}

// mmr picks up to o.Max() of the candidates (sorted by score) one at a
// time, each the one with the best λ·score − (1−λ)·(greatest cosine
// similarity to one picked already); candidates without a vector are
// similar to none. Past TopK, only candidates whose relevance reaches
// the threshold are picked.
//
// A candidate's similarities to the picks are computed lazily: its
// greatest similarity only grows as picks are added, so its value
// computed from the picks it was compared with so far bounds its value
// from above, and a candidate whose bound does not beat the best found
// in this round is passed over without being compared with the new
// picks. The picks are those of comparing every candidate with every
// pick, bit for bit (the same cosines, maxed in the same order), in far
// fewer cosines: the candidates come best first, so the first few
// usually decide a round.
func mmr(cands []*Ranked, vectors map[DocID][]float32, o RankOptions) []Ranked {
	limit := o.Max()
	out := make([]Ranked, 0, min(limit, len(cands)))
	if o.MMRLambda == 1 { // relevance only: the order they are in
		for _, c := range cands {
			if len(out) == limit || (len(out) >= o.TopK && c.Relevance < o.Threshold) {
				continue
			}
			out = append(out, *c)
		}
		return out
	}
	vecs := make([][]float32, len(cands))
	for i, c := range cands {
		vecs[i] = vectors[c.Doc]
	}
	picked := make([]bool, len(cands))
	// maxSim[i] is candidate i's greatest similarity to the first
	// compared[i] picks.
	maxSim := make([]float64, len(cands))
	compared := make([]int, len(cands))
	picks := make([][]float32, 0, cap(out))
	for len(out) < limit && len(out) < len(cands) {
		best, bestVal := -1, math.Inf(-1)
		for i, c := range cands {
			if picked[i] || (len(out) >= o.TopK && c.Relevance < o.Threshold) {
				continue
			}
			v := o.MMRLambda*c.Score - (1-o.MMRLambda)*maxSim[i]
			if v <= bestVal {
				continue // its value is no more than this bound: it cannot win
			}
			if compared[i] < len(picks) {
				for _, pv := range picks[compared[i]:] {
					maxSim[i] = math.Max(maxSim[i], cosine(vecs[i], pv))
				}
				compared[i] = len(picks)
				v = o.MMRLambda*c.Score - (1-o.MMRLambda)*maxSim[i]
			}
			if v > bestVal {
				best, bestVal = i, v
			}
		}
		if best < 0 {
			break // none left reaches the threshold
		}
		picked[best] = true
		out = append(out, *cands[best])
		picks = append(picks, vecs[best])
	}
	return out
}
