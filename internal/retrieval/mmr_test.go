package retrieval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// mmrEager is the model mmr is checked against: every candidate not
// picked is compared with every new pick.
func mmrEager(cands []*Ranked, vectors map[DocID][]float32, o RankOptions) []Ranked {
	limit := o.Max()
	var out []Ranked
	picked := make([]bool, len(cands))
	maxSim := make([]float64, len(cands))
	for len(out) < limit && len(out) < len(cands) {
		best, bestVal := -1, math.Inf(-1)
		for i, c := range cands {
			if picked[i] || (len(out) >= o.TopK && c.Relevance < o.Threshold) {
				continue
			}
			if v := o.MMRLambda*c.Score - (1-o.MMRLambda)*maxSim[i]; v > bestVal {
				best, bestVal = i, v
			}
		}
		if best < 0 {
			break
		}
		picked[best] = true
		out = append(out, *cands[best])
		pv := vectors[cands[best].Doc]
		for i, c := range cands {
			if !picked[i] {
				maxSim[i] = math.Max(maxSim[i], cosine(vectors[c.Doc], pv))
			}
		}
	}
	return out
}

// mmrCase makes n candidates sorted by score, with dim-dimensional unit
// vectors drawn from a few directions (near-duplicates and exact ties
// are common), some without a vector, and scores from a few values.
func mmrCase(r *rand.Rand, n, dim int) ([]*Ranked, map[DocID][]float32) {
	dirs := make([][]float32, 1+r.IntN(6))
	for d := range dirs {
		dirs[d] = make([]float32, dim)
		for j := range dirs[d] {
			dirs[d][j] = float32(r.NormFloat64())
		}
	}
	cands := make([]*Ranked, n)
	vectors := map[DocID][]float32{}
	for i := range cands {
		var id DocID
		id[0], id[1] = byte(i), byte(i>>8)
		rel := float64(r.IntN(8)) / 7
		cands[i] = &Ranked{Doc: id, Seq: uint64(i), Relevance: rel, Score: rel + float64(r.IntN(3))/10}
		if r.IntN(8) == 0 {
			continue // no vector
		}
		v := slices.Clone(dirs[r.IntN(len(dirs))])
		if r.IntN(2) == 0 {
			for j := range v {
				v[j] += float32(r.NormFloat64()) / 4
			}
		}
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		for j := range v {
			v[j] = float32(float64(v[j]) / math.Sqrt(norm))
		}
		vectors[id] = v
	}
	slices.SortFunc(cands, byScore)
	return cands, vectors
}

// mmr picks what comparing every candidate with every pick picks, bit
// for bit, whatever the lambda, floor and sizes.
func TestMMRLazyMatchesEager(t *testing.T) {
	t.Parallel()
	seed := uint64(rand.Uint32())
	r := rand.New(rand.NewPCG(seed, 7))
	for k := range 3000 {
		cands, vectors := mmrCase(r, r.IntN(60), 1+r.IntN(16))
		o := RankOptions{MMRLambda: []float64{0, 0.3, 0.5, 0.9, 0.99}[r.IntN(5)], Threshold: float64(r.IntN(5)) / 5,
			TopK: 1 + r.IntN(6)}
		if r.IntN(2) == 0 {
			o.MaxK = o.TopK + r.IntN(20)
		}
		got, want := mmr(cands, vectors, o), mmrEager(cands, vectors, o)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d case %d: mmr(%d candidates, %+v) = %v, want %v", seed, k, len(cands), o, docs(got), docs(want))
		}
	}
}

func docs(rs []Ranked) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%d/%d", r.Doc[0], r.Doc[1])
	}
	return out
}

// BenchmarkMMR picks max_k=24 of 48 candidates (the configured
// overfetch and max_k) with the hash embedder's 512 dimensions.
func BenchmarkMMR(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	cands, vectors := mmrCase(r, 48, DefaultHashDims)
	o := RankOptions{MMRLambda: 0.9, Threshold: 0.3, TopK: 4, MaxK: 24}
	for _, impl := range []struct {
		name string
		f    func([]*Ranked, map[DocID][]float32, RankOptions) []Ranked
	}{{"lazy", mmr}, {"eager", mmrEager}} {
		b.Run("mmr="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				impl.f(cands, vectors, o)
			}
		})
	}
}

// cosine's four lanes sum what one running sum does, to rounding, at
// every length (the lanes' tail included).
func TestCosineLanes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 40 {
		a, b := make([]float32, n), make([]float32, n)
		var want float64
		for i := range a {
			a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			want += float64(a[i]) * float64(b[i])
		}
		if got := cosine(a, b); math.Abs(got-want) > 1e-9*(1+math.Abs(want)) {
			t.Errorf("cosine(%d dims) = %v, want %v", n, got, want)
		}
	}
	if got := cosine([]float32{1, 2}, []float32{1}); got != 0 {
		t.Errorf("cosine of different lengths = %v, want 0", got)
	}
}
