package retrieval

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// AddTerms to the recent documents (a turn's neighbour context) keeps
// every term's postings in document order, so that it finds a
// document's place near the end of the list rather than walking it all
// (quadratic in a long import), and scores as adding the same terms with
// the document would.
func TestAddTermsKeepsPostingsInOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	vocab := []string{"garden", "kyoto", "dog", "plan", "trip", "boss", "rent", "oslo", "festival", "cook"}
	doc := func() map[string]float32 {
		tf := map[string]float32{}
		for range 1 + rng.IntN(5) {
			tf[vocab[rng.IntN(len(vocab))]]++
		}
		return tf
	}
	id := func(i int) DocID { var d DocID; copy(d[:], fmt.Sprintf("doc-%08d", i)); return d }
	live, whole := NewFullText(), NewFullText()
	final := map[int]map[string]float32{}
	lens := map[int]float32{}
	const n = 400
	for i := range n {
		tf := doc()
		final[i], lens[i] = map[string]float32{}, 0
		for k, v := range tf {
			final[i][k] += v
			lens[i] += v
		}
		live.Add(id(i), tf, lens[i])
		for back := 1; back <= 2 && i-back >= 0; back++ { // the next turns' context, as the indexer adds it
			add := doc()
			var cnt float32
			for k, v := range add {
				add[k] = v / 2
				cnt += v / 2
				final[i-back][k] += v / 2
			}
			lens[i-back] += cnt
			live.AddTerms(id(i-back), add, cnt)
		}
	}
	for i := range n {
		whole.Add(id(i), final[i], lens[i])
	}
	for term, ps := range live.postings {
		if !slices.IsSortedFunc(ps, func(a, b ftPosting) int { return int(a.doc - b.doc) }) {
			t.Fatalf("postings of %q are not in document order after AddTerms", term)
		}
	}
	for _, q := range vocab {
		if got, want := live.Search(q, 20, nil), whole.Search(q, 20, nil); !reflect.DeepEqual(got, want) {
			t.Errorf("Search(%q) after AddTerms = %v, want %v (the terms added with the documents)", q, got, want)
		}
	}
}
