package retrieval

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kljensen/snowball/english"
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

// The memo of stems gives what the stemmer gives, the first time and
// after, and holds at most two generations of maxStems words.
func TestStemCacheIsTheStemmer(t *testing.T) {
	t.Parallel()
	var c stemCache
	words := strings.Fields("deploying deployed deploys running ran runs generously generous happily caresses " +
		"ponies cats sky skies dying lying news proceed exceeded succeeding national nationality")
	r := rand.New(rand.NewPCG(1, 2))
	for range 3 * maxStems {
		b := make([]byte, 3+r.IntN(8))
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		words = append(words, string(b)+[]string{"", "ing", "ed", "s", "ly", "ness"}[r.IntN(6)])
	}
	for round := range 2 {
		for _, w := range words {
			if got, want := c.stem(w), english.Stem(w, true); got != want {
				t.Fatalf("round %d: stem(%q) = %q, want %q", round, w, got, want)
			}
		}
	}
	if n := len(c.cur) + len(c.old); n > 2*maxStems {
		t.Errorf("the memo holds %d words, want at most %d", n, 2*maxStems)
	}
}

// BenchmarkTermFreqs indexes a turn's text as bench turns writes it (a
// user message and the local provider's report), its words seen before.
func BenchmarkTermFreqs(b *testing.B) {
	text := `turn 7 of a load test [local] I received your message (6 words): "turn 7 of a load test". ` +
		`Context: 0 pinned facts, summary of 103 tokens, 8 window messages, 2 pending turns, 0 retrieved chunks. ` +
		`Pending turns: #1 "turn 8 of a load test" #2 "turn 9 of a load test".`
	b.ReportAllocs()
	for b.Loop() {
		TermFreqs(text)
	}
}
