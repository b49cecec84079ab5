package retrieval

import (
	"math"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// stopWords are English function words left out of the full-text index:
// they match everywhere and rank nothing.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are aren't as at be because
been before being below between both but by can could did didn't do does doesn't doing don't down during each few for
from further had has have having he her here hers herself him himself his how i i'd i'll i'm i've if in into is isn't
it it's its itself just let's me more most my myself no nor not of off on once only or other our ours ourselves out
over own same she should so some such than that that's the their theirs them themselves then there there's these they
this those through to too under until up very was wasn't we were what what's when where which while who whom why will
with would you your yours yourself yourselves s t ll ve re d m said`) {
		m[w] = true
	}
	return m
}()

// MaxTermBytes bounds one index term; longer runs (hashes, base64) are
// cut to it.
const MaxTermBytes = 64

// Terms returns the full-text index terms of text, in order: runs of
// letters and digits, lower-cased, English stop words left out, each
// stemmed with the Snowball English stemmer (so "deploying" and
// "deployed" meet at "deploy"). The same function indexes and queries.
func Terms(text string) []string {
	var out []string
	start := -1
	emit := func(end int) {
		w := strings.ToLower(text[start:end])
		start = -1
		if stopWords[w] {
			return
		}
		if isASCIIWord(w) {
			w = stems.stem(w)
		}
		if len(w) > MaxTermBytes {
			w = w[:MaxTermBytes]
			for !utf8.ValidString(w) {
				w = w[:len(w)-1]
			}
		}
		if w != "" {
			out = append(out, w)
		}
	}
	for i, r := range text {
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			emit(i)
		}
	}
	if start >= 0 {
		emit(len(text))
	}
	return out
}

// stems memoizes english.Stem of the words Terms stems: a text's words
// are mostly words seen before, and stemming one (its runes and
// suffixes) cost about a twentieth of a turn's CPU in bench turns. It
// holds two generations of at most maxStems words each.
var stems stemCache

const maxStems = 1 << 14

type stemCache struct {
	mu       sync.Mutex
	cur, old map[string]string
}

// stem returns english.Stem(w, true).
func (c *stemCache) stem(w string) string {
	c.mu.Lock()
	s, ok := c.cur[w]
	if !ok {
		if s, ok = c.old[w]; ok {
			c.putLocked(w, s)
		}
	}
	c.mu.Unlock()
	if ok {
		return s
	}
	s = english.Stem(w, true)
	c.mu.Lock()
	// Cloned: w may be a slice of a long text, which a key would keep.
	c.putLocked(strings.Clone(w), strings.Clone(s))
	c.mu.Unlock()
	return s
}

func (c *stemCache) putLocked(w, s string) {
	if c.cur == nil || len(c.cur) >= maxStems {
		c.old, c.cur = c.cur, make(map[string]string, 1024)
	}
	c.cur[w] = s
}

func isASCIIWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// TermFreqs counts the terms of text (Terms) and returns them with the
// document length in terms.
func TermFreqs(text string) (map[string]float32, float32) {
	terms := Terms(text)
	tf := make(map[string]float32, len(terms))
	for _, t := range terms {
		tf[t]++
	}
	return tf, float32(len(terms))
}

// AddWeighted adds weight times the terms of from to into, and returns
// weight times from's length: a chunk's neighbour context.
func AddWeighted(into, from map[string]float32, fromLen, weight float32) float32 {
	for t, f := range from {
		into[t] += weight * f
	}
	return weight * fromLen
}

// DocID identifies a document of an index: the caller's key (a chunk).
type DocID = [16]byte

// Hit is a document a search found, with its score.
type Hit struct {
	Doc   DocID
	Score float64
}

type ftPosting struct {
	doc int32 // index in docs
	tf  float32
}

type ftDoc struct {
	id  DocID
	len float32
}

// FullText is an in-memory Okapi BM25 index (k1 = 1.2, b = 0.75),
// updated one document at a time. The store keeps each document's term
// frequencies; a FullText is rebuilt from them on load. It is not safe
// for concurrent use: the caller serializes Add and Search.
type FullText struct {
	docs     []ftDoc
	byID     map[DocID]int32
	postings map[string][]ftPosting
	totalLen float64
}

// NewFullText returns an empty index.
func NewFullText() *FullText {
	return &FullText{byID: map[DocID]int32{}, postings: map[string][]ftPosting{}}
}

// Len returns the number of documents indexed.
func (f *FullText) Len() int { return len(f.docs) }

// Add indexes document id with term weights tf and length n (their sum,
// TermFreqs). Adding an id present already changes nothing and returns
// false.
func (f *FullText) Add(id DocID, tf map[string]float32, n float32) bool {
	if _, ok := f.byID[id]; ok {
		return false
	}
	di := int32(len(f.docs))
	f.byID[id] = di
	f.docs = append(f.docs, ftDoc{id: id, len: n})
	f.totalLen += float64(n)
	for t, c := range tf {
		f.postings[t] = append(f.postings[t], ftPosting{doc: di, tf: c})
	}
	return true
}

// AddTerms adds weighted terms (and n to the length) to document id, if
// it is indexed: the context a later turn gives it.
func (f *FullText) AddTerms(id DocID, tf map[string]float32, n float32) bool {
	di, ok := f.byID[id]
	if !ok {
		return false
	}
	f.docs[di].len += n
	f.totalLen += float64(n)
	for t, c := range tf {
		// Postings are in document order, and the document is a recent
		// one: its place is near the end. (Walking back to the first
		// posting for a term the document lacks made each call cost the
		// term's documents: quadratic in a long import.)
		ps := f.postings[t]
		i := len(ps)
		for i > 0 && ps[i-1].doc > di {
			i--
		}
		if i > 0 && ps[i-1].doc == di {
			ps[i-1].tf += c
		} else {
			f.postings[t] = slices.Insert(ps, i, ftPosting{doc: di, tf: c})
		}
	}
	return true
}

// BM25 parameters: k1 as usual; b = 0.3 rather than 0.75, as length
// normalization hurts short conversational turns that carry their
// neighbours' text (LoCoMo dev: recall@10 0.652 against 0.643 with
// stemming alone).
const (
	bm25K1 = 1.2
	bm25B  = 0.3
)

// Stats are the collection statistics BM25 weighs terms with: the
// number of documents, their total length and each query term's
// document frequency. A search over several indexes (a fork and its
// ancestors) uses the stats of all of them, so that their scores compare.
type Stats struct {
	Docs     float64
	TotalLen float64
	DF       map[string]float64
}

// QueryTerms returns the distinct terms of query, sorted.
func QueryTerms(query string) []string {
	terms := Terms(query)
	slices.Sort(terms)
	return slices.Compact(terms)
}

// AddStats adds f's statistics for terms to s.
func (f *FullText) AddStats(s *Stats, terms []string) {
	if s.DF == nil {
		s.DF = map[string]float64{}
	}
	s.Docs += float64(len(f.docs))
	s.TotalLen += f.totalLen
	for _, t := range terms {
		s.DF[t] += float64(len(f.postings[t]))
	}
}

// Search scores the documents that hold any of the query's terms
// (Terms(query)) with BM25 and returns the best k that keep passes
// (nil keeps all), best first; equal scores are ordered by document
// index, newest first.
func (f *FullText) Search(query string, k int, keep func(DocID) bool) []Hit {
	terms := QueryTerms(query)
	var s Stats
	f.AddStats(&s, terms)
	return f.SearchTerms(terms, s, k, keep)
}

// SearchTerms is Search for terms (QueryTerms) with collection stats s.
func (f *FullText) SearchTerms(terms []string, s Stats, k int, keep func(DocID) bool) []Hit {
	if k <= 0 || len(f.docs) == 0 || s.Docs == 0 {
		return nil
	}
	n := s.Docs
	avg := s.TotalLen / n
	if avg == 0 {
		avg = 1
	}
	// Scores accumulate in a dense array (a map costs ten times more per
	// posting at 100,000 documents); touched lists the documents scored.
	// Both are reused: a fresh 400 KB array per query kept the garbage
	// collector busy at 100,000 documents.
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	if cap(sc.scores) < len(f.docs) {
		sc.scores = make([]float32, len(f.docs))
	}
	scores := sc.scores[:len(f.docs)]
	touched := sc.touched[:0]
	defer func() {
		for _, d := range touched {
			scores[d] = 0
		}
		sc.touched = touched[:0]
	}()
	for _, t := range terms {
		ps := f.postings[t]
		if len(ps) == 0 {
			continue
		}
		df := max(s.DF[t], float64(len(ps)))
		idf := float32(math.Log(1 + (n-df+0.5)/(df+0.5)))
		norm := float32(bm25K1 * (1 - bm25B))
		per := float32(bm25K1 * bm25B / avg)
		for _, p := range ps {
			if scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			scores[p.doc] += idf * p.tf * (bm25K1 + 1) / (p.tf + norm + per*f.docs[p.doc].len)
		}
	}
	h := bestPassing(touched, scores, k, keep, f.docs)
	out := make([]Hit, 0, len(h))
	for _, x := range h {
		out = append(out, Hit{Doc: f.docs[x.doc].id, Score: float64(x.score)})
	}
	return out
}

// bestPassing returns the best k of the scored documents (best first)
// that keep passes. keep (for Search, two map lookups) is first asked
// only of the best 2k by score alone, in rank order; only when fewer
// than k of those pass is it asked of every document that would enter a
// heap of the best k passing. That alone asked it of nearly every
// document when many tie on a common term: ties go to the newer
// document, so each one enters in turn.
func bestPassing(touched []int32, scores []float32, k int, keep func(DocID) bool, docs []ftDoc) hitHeap {
	pre := min(len(touched), 2*k)
	if keep != nil && pre < len(touched) {
		h := topScored(touched, scores, pre, nil, docs)
		n := 0
		for _, x := range h {
			if keep(docs[x.doc].id) {
				h[n] = x
				n++
				if n == k {
					return h[:n]
				}
			}
		}
	}
	return topScored(touched, scores, k, keep, docs)
}

// topScored returns the best k of the scored documents that keep passes
// (nil passes all), best first; keep is asked only of documents that
// would enter the heap.
func topScored(touched []int32, scores []float32, k int, keep func(DocID) bool, docs []ftDoc) hitHeap {
	h := make(hitHeap, 0, k)
	for _, d := range touched {
		sc := scores[d]
		if len(h) == k && !h.better(sc, d, 0) {
			continue
		}
		if keep != nil && !keep(docs[d].id) {
			continue
		}
		if len(h) < k {
			h.push(scored{doc: d, score: sc})
		} else {
			h[0] = scored{doc: d, score: sc}
			h.down(0)
		}
	}
	slices.SortFunc(h, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return int(b.doc - a.doc)
	})
	return h
}

// scratch is a search's working memory, pooled.
type scratch struct {
	scores  []float32 // all zero between uses
	touched []int32
}

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

type scored struct {
	doc   int32
	score float32
}

// hitHeap is a min-heap of scored documents: the worst at the root
// (lower score, then older document).
type hitHeap []scored

func worse(a, b scored) bool { return a.score < b.score || (a.score == b.score && a.doc < b.doc) }

// better reports whether (score, doc) beats element i.
func (h hitHeap) better(score float32, doc int32, i int) bool {
	return worse(h[i], scored{doc: doc, score: score})
}

func (h *hitHeap) push(x scored) {
	*h = append(*h, x)
	for j := len(*h) - 1; j > 0; {
		i := (j - 1) / 2
		if !worse((*h)[j], (*h)[i]) {
			break
		}
		(*h)[i], (*h)[j] = (*h)[j], (*h)[i]
		j = i
	}
}

func (h hitHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		j := l
		if r := l + 1; r < len(h) && worse(h[r], h[l]) {
			j = r
		}
		if !worse(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
