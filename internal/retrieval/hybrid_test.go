package retrieval

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
)

func doc(n byte) DocID { return DocID{15: n} }

func TestTerms(t *testing.T) {
	t.Parallel()
	got := Terms("We're DEPLOYING the new deployment to eu-west-1; Zoë's café — it's deployed!")
	// "We're" splits at the apostrophe into two stop words; "s" too.
	want := []string{"deploy", "new", "deploy", "eu", "west", "1", "zoë", "café", "deploy"}
	if !slices.Equal(got, want) {
		t.Errorf("Terms() = %q, want %q", got, want)
	}
	if long := Terms(strings.Repeat("x", 200)); len(long) != 1 || len(long[0]) != MaxTermBytes {
		t.Errorf("a 200-byte run gave %q", long)
	}
}

func TestFullTextRanksRareTermsFirst(t *testing.T) {
	t.Parallel()
	f := NewFullText()
	texts := []string{
		"the weather is nice and the weather is warm",
		"we moved the database to postgres last week",
		"weather again: rain tomorrow",
		"postgres replication lag alarms fired",
	}
	for i, s := range texts {
		tf, n := TermFreqs(s)
		if !f.Add(doc(byte(i)), tf, n) {
			t.Fatalf("Add(%d) = false", i)
		}
	}
	if tf, n := TermFreqs("again"); f.Add(doc(0), tf, n) || f.Len() != 4 {
		t.Error("a document added twice was indexed again")
	}
	hits := f.Search("postgres replication", 10, nil)
	if len(hits) != 2 || hits[0].Doc != doc(3) || hits[1].Doc != doc(1) || hits[0].Score <= hits[1].Score {
		t.Errorf("Search = %+v, want doc 3 then doc 1", hits)
	}
	hits = f.Search("postgres", 10, func(d DocID) bool { return d != doc(3) })
	if len(hits) != 1 || hits[0].Doc != doc(1) {
		t.Errorf("filtered Search = %+v, want doc 1 only", hits)
	}
	if hits := f.Search("the and is", 10, nil); len(hits) != 0 {
		t.Errorf("a query of stop words found %+v", hits)
	}
}

// TestFullTextFilterAsksLittle: many documents tied on a common term
// (ties go to the newer) each used to enter the heap in turn, and keep
// was asked of every one; the result must still be the unfiltered
// ranking with the refused documents taken out, whatever keep refuses.
func TestFullTextFilterAsksLittle(t *testing.T) {
	t.Parallel()
	f := NewFullText()
	for i := range 2000 {
		text := "question about the deployment"
		if i%7 == 0 {
			text = "question about the deployment and the question again"
		}
		tf, n := TermFreqs(text)
		f.Add(DocID{0: byte(i >> 8), 1: byte(i), 15: 1}, tf, n)
	}
	all := f.Search("question", f.Len(), nil)
	if len(all) != f.Len() {
		t.Fatalf("unfiltered Search found %d of %d", len(all), f.Len())
	}
	for _, tc := range []struct {
		name    string
		refuse  func(i int) bool
		maxAsks int // 0: no bound
	}{
		{"a few refused", func(i int) bool { return i%10 == 3 }, 40},
		{"the newest refused", func(i int) bool { return i >= 1990 }, 40},
		{"most refused", func(i int) bool { return i%50 != 0 }, 0},
		{"all refused", func(int) bool { return true }, 0},
	} {
		asks := 0
		keep := func(d DocID) bool {
			asks++
			return !tc.refuse(int(d[0])<<8 | int(d[1]))
		}
		got := f.Search("question", 10, keep)
		var want []Hit
		for _, h := range all {
			if len(want) < 10 && !tc.refuse(int(h.Doc[0])<<8|int(h.Doc[1])) {
				want = append(want, h)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: Search = %v, want %v", tc.name, got, want)
		}
		if tc.maxAsks > 0 && asks > tc.maxAsks {
			t.Errorf("%s: keep was asked %d times, want at most %d", tc.name, asks, tc.maxAsks)
		}
	}
}

func TestVectorsSearchFilters(t *testing.T) {
	t.Parallel()
	v := NewVectors(2)
	for i := range 50 {
		a := float64(i) * math.Pi / 100 // angles 0 .. π/2
		v.Add(doc(byte(i)), []float32{float32(math.Cos(a)), float32(math.Sin(a))})
	}
	if v.Add(doc(99), []float32{1, 2, 3}) || v.Add(doc(98), []float32{0, 0}) || v.Add(doc(0), []float32{1, 0}) {
		t.Error("a vector of the wrong dimension, a zero vector or a duplicate id was indexed")
	}
	// The nearest to angle 0 that are odd-numbered: 1, 3, 5.
	hits := v.Search([]float32{1, 0}, 3, func(d DocID) bool { return d[15]%2 == 1 })
	if len(hits) != 3 || hits[0].Doc != doc(1) || hits[1].Doc != doc(3) || hits[2].Doc != doc(5) {
		t.Errorf("Search = %+v", hits)
	}
	if hits := v.Search([]float32{1, 0}, 3, func(DocID) bool { return false }); len(hits) != 0 {
		t.Errorf("nothing passes, yet %+v", hits)
	}
}

// testRank is the ranker's settings the tests start from: full text
// leading, MMR at 0.9, 16 candidates, the top 6 kept.
func testRank() RankOptions {
	return RankOptions{VectorWeight: 0.3, TextWeight: 0.7, RecencyHalfLife: 500, MMRLambda: 0.9, Overfetch: 16, TopK: 6}
}

func TestRankOptionsValidate(t *testing.T) {
	t.Parallel()
	if err := testRank().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*RankOptions)
		want string
	}{
		{func(o *RankOptions) { o.VectorWeight = 0.8 }, "vector_weight + text_weight: 1.5, want 1"},
		{func(o *RankOptions) { o.TextWeight = -0.3; o.VectorWeight = 1.3 }, "vector_weight: 1.3, want 0 to 1"},
		{func(o *RankOptions) { o.MMRLambda = 2 }, "mmr_lambda: 2, want 0 to 1"},
		{func(o *RankOptions) { o.TopK = 17 }, "top_k: 17, want 1 to overfetch (16)"},
		{func(o *RankOptions) { o.MaxK = 17 }, "max_k: 17, want top_k (6) to overfetch (16)"},
		{func(o *RankOptions) { o.Neighbours = 9 }, "neighbours: 9, want 0 to 8"},
		{func(o *RankOptions) { o.Overfetch = 0 }, "overfetch: 0, want 1 to 1000"},
		{func(o *RankOptions) { o.RecencyWeight, o.RecencyHalfLife = 0.1, 0 }, "recency_half_life"},
		{func(o *RankOptions) { o.TimeBoost = 1.5 }, "time_boost: 1.5, want 0 to 1"},
		{func(o *RankOptions) { o.SpeakerBoost = -0.1 }, "speaker_boost: -0.1, want 0 to 1"},
	} {
		o := testRank()
		tc.edit(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
}

// A fork's query sees its parent's chunks only up to the fork point, and
// its own.
func TestSearchRespectsScopes(t *testing.T) {
	t.Parallel()
	parent, fork := NewPartition(2), NewPartition(2)
	add := func(p *Partition, id byte, seq uint64, text string, vec []float32) {
		tf, n := TermFreqs(text)
		p.Add(Doc{ID: doc(id), Seq: seq, Terms: tf, Len: n, Vector: vec})
	}
	add(parent, 1, 1, "the launch date is March", []float32{1, 0})
	add(parent, 2, 5, "the launch date moved to June", []float32{1, 0.1})
	add(fork, 3, 4, "on the fork the launch date is July", []float32{1, 0.2})
	q := Query{Text: "launch date", Vector: []float32{1, 0},
		Scopes: []Scope{{Part: fork, MaxSeq: math.MaxUint64}, {Part: parent, MaxSeq: 3}}}
	got, err := Search(context.Background(), q, testRank())
	if err != nil {
		t.Fatal(err)
	}
	var ids []byte
	for _, r := range got {
		ids = append(ids, r.Doc[15])
	}
	if slices.Contains(ids, 2) || !slices.Contains(ids, 1) || !slices.Contains(ids, 3) {
		t.Errorf("the fork found %v, want 1 and 3 and never 2 (after the fork point)", ids)
	}
	q.Exclude = func(d DocID) bool { return d == doc(3) }
	if got, _ := Search(context.Background(), q, testRank()); len(got) != 1 || got[0].Doc != doc(1) {
		t.Errorf("excluding 3: %+v", got)
	}
}

// The same inputs give the same ranking; hybrid weights and MMR do what
// they say.
func TestSearchRanking(t *testing.T) {
	t.Parallel()
	p := NewPartition(2)
	add := func(id byte, seq uint64, text string, vec []float32) {
		tf, n := TermFreqs(text)
		p.Add(Doc{ID: doc(id), Seq: seq, Terms: tf, Len: n, Vector: vec})
	}
	add(1, 1, "kubernetes cluster upgrade plan", []float32{0, 1})  // words match, vector far
	add(2, 2, "we talked about containers", []float32{1, 0})       // vector matches
	add(3, 3, "we talked about containers again", []float32{1, 0}) // the same vector
	add(4, 4, "unrelated note about lunch", []float32{0.7, 0.7})   // half way
	q := Query{Text: "kubernetes upgrade", Vector: []float32{1, 0}, Scopes: []Scope{{Part: p, MaxSeq: math.MaxUint64}}}
	o := testRank()
	o.VectorWeight, o.TextWeight, o.RecencyWeight, o.MMRLambda, o.TopK = 0.7, 0.3, 0, 1, 4
	first, _ := Search(context.Background(), q, o)
	again, _ := Search(context.Background(), q, o)
	if !slices.Equal(first, again) || len(first) != 4 {
		t.Fatalf("two runs differ or are short: %+v / %+v", first, again)
	}
	// Vector-heavy: the two container chunks first, the newer ahead on
	// the tie.
	if first[0].Doc != doc(3) || first[1].Doc != doc(2) {
		t.Errorf("0.7 vector: %+v", first)
	}
	o.VectorWeight, o.TextWeight = 0.2, 0.8
	if got, _ := Search(context.Background(), q, o); got[0].Doc != doc(1) {
		t.Errorf("0.8 text: %+v, want the kubernetes chunk first", got)
	}
	// Diversity: the second container chunk is a duplicate of the first.
	o.VectorWeight, o.TextWeight, o.MMRLambda, o.TopK = 0.7, 0.3, 0.5, 2
	if got, _ := Search(context.Background(), q, o); got[0].Doc != doc(3) || got[1].Doc == doc(2) {
		t.Errorf("MMR 0.5: %+v, want a second pick other than the duplicate", got)
	}
	// The relevance floor: past top_k, up to max_k, only the best reach
	// it, with or without MMR; the first top_k are kept whatever their
	// relevance.
	for _, lambda := range []float64{1, 0.9} {
		o.MMRLambda, o.Threshold, o.TopK, o.MaxK = lambda, 0.69, 1, 4
		if got, _ := Search(context.Background(), q, o); len(got) != 2 {
			t.Errorf("MMR %g, threshold 0.69, top_k 1, max_k 4 kept %+v, want 2", lambda, got)
		}
		o.TopK = 3
		if got, _ := Search(context.Background(), q, o); len(got) != 3 {
			t.Errorf("MMR %g, threshold 0.69, top_k 3, max_k 4 kept %+v, want the floor of 3", lambda, got)
		}
		o.Threshold = 0
		if got, _ := Search(context.Background(), q, o); len(got) != 4 {
			t.Errorf("MMR %g, no threshold, max_k 4 kept %+v, want 4", lambda, got)
		}
	}
	o.MaxK = 2
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "max_k: 2, want top_k (3)") {
		t.Errorf("max_k under top_k: %v", err)
	}
}
