package retrieval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkSearch100k is one hybrid query over a partition of 100,000
// chunks of synthetic text with random 100-dimensional vectors (`go test
// -run X -bench Search100k ./internal/retrieval`: about 8 ms a query on
// the dev VM; building the index takes a few seconds).
func BenchmarkSearch100k(b *testing.B) { benchSearch(b, 100_000) }

// BenchmarkSearch1k is the same over 1,000 chunks, a conversation of a
// few hundred turns: the search of every turn's context.
func BenchmarkSearch1k(b *testing.B) { benchSearch(b, 1000) }

func benchSearch(b *testing.B, chunks int) {
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(r, 1.1, 2, 999)
	words := make([]string, 1000)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx", i)
	}
	text := func(n int) string {
		s := ""
		for range n {
			s += words[zipf.Uint64()] + " "
		}
		return s
	}
	p := NewPartition(100)
	for i := range chunks {
		tf, n := TermFreqs(text(20))
		v := make([]float32, 100)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		var id DocID
		id[0], id[1], id[2] = byte(i), byte(i>>8), byte(i>>16)
		p.Add(Doc{ID: id, Seq: uint64(i), Terms: tf, Len: n, Vector: v})
	}
	q := Query{Text: text(6), Vector: make([]float32, 100), Scopes: []Scope{{Part: p, MaxSeq: math.MaxUint64}}}
	for j := range q.Vector {
		q.Vector[j] = float32(r.NormFloat64())
	}
	o := testRank()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Search(context.Background(), q, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPartitionMemory is the memory a branch's index allocates for
// its first chunks=N chunks, with dims=D-dimensional vectors (512: the
// hash embedder; 100: GloVe).
func BenchmarkPartitionMemory(b *testing.B) {
	for _, dim := range []int{DefaultHashDims, 100} {
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("dims=%d/chunks=%d", dim, n), func(b *testing.B) {
				vec := make([]float32, dim)
				vec[0] = 1
				b.ReportAllocs()
				for b.Loop() {
					p := NewPartition(dim)
					for i := range n {
						p.Add(Doc{ID: DocID{byte(i), byte(i >> 8)}, Seq: uint64(i + 1), Terms: map[string]float32{"word": 1}, Len: 1, Vector: vec})
					}
				}
			})
		}
	}
}
