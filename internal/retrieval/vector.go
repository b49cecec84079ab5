package retrieval

import (
	"math"

	"github.com/kelindar/search"
)

// Vectors is an exact cosine index (github.com/kelindar/search) over one
// partition's chunk vectors, all of one embedder. It is a cache: the
// store keeps every vector, and a Vectors is rebuilt from them on load.
// It is not safe for concurrent use.
type Vectors struct {
	dim  int
	idx  *search.Index[DocID] // nil until the first vector
	byID map[DocID][]float32
	// arena holds the vectors back to back, so that a search reads
	// memory in order (vectors allocated one by one among the runtime's
	// other objects made a 100,000-vector scan several times slower).
	// Its blocks grow with the index, from minArenaVectors vectors to
	// maxArenaVectors, each twice the one before: the memory an index
	// holds follows its vectors (at most about twice theirs), and an
	// empty index holds none.
	arena []float32
	held  int // float32s allocated in arena blocks
}

// The sizes of an arena block, in vectors.
const (
	minArenaVectors = 4
	maxArenaVectors = 4096
)

// NewVectors returns an empty index of dim-dimensional vectors.
func NewVectors(dim int) *Vectors {
	return &Vectors{dim: dim}
}

// Len returns the number of vectors indexed.
func (v *Vectors) Len() int { return len(v.byID) }

// Bytes is the memory v's vectors take: its arena blocks (the blocks
// allocated, used or not).
func (v *Vectors) Bytes() int { return 4 * v.held }

// Add indexes a copy of vec under id. A vector of the wrong dimension, or
// zero, or not finite, is not indexed (false), nor is an id present
// already.
func (v *Vectors) Add(id DocID, vec []float32) bool {
	if _, ok := v.byID[id]; ok || len(vec) != v.dim || !usable(vec) {
		return false
	}
	if v.idx == nil {
		v.idx, v.byID = search.NewIndex[DocID](), map[DocID][]float32{}
	}
	if len(v.arena)+v.dim > cap(v.arena) {
		n := min(max(minArenaVectors, 2*cap(v.arena)/v.dim), maxArenaVectors)
		v.arena = make([]float32, 0, n*v.dim)
		v.held += n * v.dim
	}
	n := len(v.arena)
	v.arena = append(v.arena, vec...)
	c := v.arena[n : n+v.dim : n+v.dim]
	v.idx.Add(c, id) // normalizes c in place and keeps it
	v.byID[id] = c
	return true
}

// Vector returns the unit vector indexed under id, or nil.
func (v *Vectors) Vector(id DocID) []float32 { return v.byID[id] }

// Search returns the k vectors most similar to query (cosine, best
// first) among those keep passes (nil keeps all). It asks the exact
// index for more than k until k pass or every vector was looked at.
func (v *Vectors) Search(query []float32, k int, keep func(DocID) bool) []Hit {
	if k <= 0 || v.Len() == 0 || len(query) != v.dim || !usable(query) {
		return nil
	}
	q := append([]float32(nil), query...)
	for want := k; ; want *= 4 {
		want = min(want, v.idx.Len())
		res := v.idx.Search(append([]float32(nil), q...), want)
		out := make([]Hit, 0, k)
		for _, r := range res {
			if keep == nil || keep(r.Value) {
				out = append(out, Hit{Doc: r.Value, Score: r.Relevance})
				if len(out) == k {
					return out
				}
			}
		}
		if want == v.idx.Len() {
			return out
		}
	}
}

// usable reports whether vec can be normalized: finite and not zero.
func usable(vec []float32) bool {
	var n float64
	for _, x := range vec {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
		n += float64(x) * float64(x)
	}
	return n > 0
}

// cosine returns the dot product of two unit vectors (0 if either is nil).
// It sums in four lanes (the products are exact in float64, only the
// order of the additions differs from one sum): one running sum waits
// on each addition before the next, four keep the CPU's adders busy.
func cosine(a, b []float32) float64 {
	if len(a) == 0 || len(a) != len(b) {
		return 0
	}
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i]) * float64(b[i])
		s1 += float64(a[i+1]) * float64(b[i+1])
		s2 += float64(a[i+2]) * float64(b[i+2])
		s3 += float64(a[i+3]) * float64(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i]) * float64(b[i])
	}
	return (s0 + s1) + (s2 + s3)
}
