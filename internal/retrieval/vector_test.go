package retrieval

import (
	"testing"
)

// An index's memory follows its vectors: none when empty, at most about
// twice theirs (and one smallest block) however many, and every vector
// stays searchable across the arena's blocks.
func TestVectorsMemoryFollowsData(t *testing.T) {
	t.Parallel()
	const dim = 512
	v := NewVectors(dim)
	if b := v.Bytes(); b != 0 {
		t.Fatalf("empty index: Bytes() = %d, want 0", b)
	}
	vec := func(i int) []float32 {
		x := make([]float32, dim)
		x[i%dim], x[(i*7+1)%dim] = 1, float32(i%13+1)
		return x
	}
	for n := 1; n <= 10_000; n++ {
		if !v.Add(DocID{byte(n), byte(n >> 8), 1}, vec(n)) {
			t.Fatalf("Add(%d) = false", n)
		}
		data := 4 * dim * n
		if b := v.Bytes(); b > 2*data+4*dim*minArenaVectors {
			t.Fatalf("%d vectors (%d bytes): Bytes() = %d, want at most twice theirs plus a %d-vector block", n, data, b, minArenaVectors)
		}
	}
	for _, n := range []int{1, 16, 17, 4000, 10_000} {
		hits := v.Search(vec(n), 1, func(d DocID) bool { return d == DocID{byte(n), byte(n >> 8), 1} })
		if len(hits) != 1 || hits[0].Score < 0.999 {
			t.Fatalf("Search(vector %d) = %+v, want it, at cosine 1", n, hits)
		}
	}
	if b, most := v.Bytes(), 4*dim*(10_000+maxArenaVectors); b > most {
		t.Fatalf("10,000 vectors: Bytes() = %d, want at most %d", b, most)
	}
}
