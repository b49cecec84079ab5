package retrieval

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// metaPartition holds a conversation of two participants over three
// days, each turn saying "the plan", and one turn a day about the plan's
// budget (the best full-text match).
func metaPartition() (*Partition, time.Time) {
	p := NewPartition(2)
	day0 := time.Date(2023, 5, 1, 10, 0, 0, 0, time.UTC)
	for i := range 30 {
		speaker, text := "Caroline", "about the plan"
		if i%2 == 1 {
			speaker = "Melanie Smith"
		}
		if i%10 == 0 {
			text = "the plan and its budget"
		}
		tf, n := TermFreqs(text)
		at := day0.Add(time.Duration(i/10) * 24 * time.Hour)
		p.Add(Doc{ID: doc(byte(i + 1)), Seq: uint64(i + 1), Terms: tf, Len: n,
			Time: at.UnixMilli(), Role: RoleUser, Speaker: speaker})
	}
	return p, day0
}

func ids(rs []Ranked) []int {
	var out []int
	for _, r := range rs {
		out = append(out, int(r.Doc[15]))
	}
	return out
}

// A filter applies as the searches look: a filtered search returns up
// to its count of the chunks it keeps, not the few of the unfiltered
// best that pass it.
func TestSearchFilter(t *testing.T) {
	t.Parallel()
	p, day0 := metaPartition()
	o := testRank()
	o.TopK, o.Overfetch = 5, 5
	q := Query{Text: "plan budget", Scopes: []Scope{{Part: p, MaxSeq: math.MaxUint64}}}
	for _, tc := range []struct {
		name string
		f    Filter
		keep func(i int) bool // of the docs, by their number
	}{
		{"a participant, any case", Filter{Speaker: "melanie smith"}, func(i int) bool { return i%2 == 0 }},
		{"a time", Filter{From: day0.Add(24 * time.Hour), To: day0.Add(48 * time.Hour)}, func(i int) bool { return i > 10 && i <= 20 }},
		{"both", Filter{Speaker: "Caroline", From: day0.Add(48 * time.Hour)}, func(i int) bool { return i > 20 && i%2 == 1 }},
		{"a role", Filter{Speaker: RoleUser}, func(int) bool { return true }},
	} {
		q.Filter = tc.f
		got, err := Search(context.Background(), q, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 || slices.ContainsFunc(ids(got), func(i int) bool { return !tc.keep(i) }) {
			t.Errorf("%s: %v, want 5 the filter keeps", tc.name, ids(got))
		}
	}
	for name, f := range map[string]Filter{"no such participant": {Speaker: "Bob"}, "the assistant": {Speaker: RoleAssistant},
		"another year": {To: day0.AddDate(-1, 0, 0)}} {
		q.Filter = f
		if got, _ := Search(context.Background(), q, o); len(got) != 0 {
			t.Errorf("%s: %v, want none", name, ids(got))
		}
	}
}

// The boosts: a chunk said by the participant the query names, or at the
// time it names, comes first; a chunk of that time is found even when it
// is not among the best of the whole conversation.
func TestSearchBoosts(t *testing.T) {
	t.Parallel()
	p, _ := metaPartition()
	o := testRank()
	o.TopK, o.Overfetch, o.MMRLambda = 3, 3, 1
	search := func(text string, o RankOptions) []int {
		got, err := Search(context.Background(), Query{Text: text, Scopes: []Scope{{Part: p, MaxSeq: math.MaxUint64}}}, o)
		if err != nil {
			t.Fatal(err)
		}
		return ids(got)
	}
	// Unboosted: the budget turns (1, 11, 21: Caroline's, one a day),
	// the newest first.
	if got := search("the plan's budget on 2 May", o); !slices.Equal(got, []int{21, 11, 1}) {
		t.Fatalf("no boosts: %v", got)
	}
	o.TimeBoost = 0.5
	if got := search("the plan's budget on 2 May", o); got[0] != 11 {
		t.Errorf("time boost, 2 May: %v, want 11 (of 2 May) first", got)
	}
	// The 2 May turns that are not the budget's are candidates too.
	if got := search("the plan on 2 May 2023", o); slices.ContainsFunc(got, func(i int) bool { return i <= 10 || i > 20 }) {
		t.Errorf("time boost, the plan on 2 May: %v, want turns of 2 May (11 to 20) only", got)
	}
	o.TimeBoost, o.SpeakerBoost, o.Overfetch = 0, 0.5, 30
	if got := search("what did Melanie say about the plan", o); slices.ContainsFunc(got, func(i int) bool { return i%2 != 0 }) {
		t.Errorf("speaker boost, Melanie: %v, want Melanie Smith's (even) only", got)
	}
	if got := search("Caroline's budget", o); !slices.Equal(got, []int{21, 11, 1}) {
		t.Errorf("speaker boost, Caroline: %v", got)
	}
	if got := search("the plan's budget on 2 May", o); !slices.Equal(got, []int{21, 11, 1}) {
		t.Errorf("speaker boost, no one named: %v", got)
	}
	if got := p.Speakers(); !slices.Equal(got, []string{"Caroline", "Melanie Smith"}) {
		t.Errorf("Speakers() = %q", got)
	}
}

// The speaker boost multiplies relevance: the named participant's chunk
// comes first among chunks about as relevant, but a weak match of theirs
// does not pass the other participant's strong one (a question may name
// one participant and be answered by the other). Added, the same boost
// would put it first.
func TestSpeakerBoostScalesRelevance(t *testing.T) {
	t.Parallel()
	p := NewPartition(2)
	for i, d := range []struct{ speaker, text string }{
		{"Ann", "the lamp"},
		{"Bob", "the lighthouse keeper mended the lamp"},
		{"Ann", "the lighthouse keeper mended the lamp"},
		{"Bob", "the lighthouse keeper mended the lamp"},
		{"Ann", "about the weather"},
		{"Bob", "about the harbour"},
	} {
		tf, n := TermFreqs(d.text)
		p.Add(Doc{ID: doc(byte(i + 1)), Seq: uint64(i + 1), Terms: tf, Len: n, Role: RoleUser, Speaker: d.speaker})
	}
	o := testRank()
	o.TopK, o.MMRLambda, o.SpeakerBoost = 6, 1, 0.8
	search := func(q string) []Ranked {
		got, err := Search(context.Background(), Query{Text: q, Scopes: []Scope{{Part: p, MaxSeq: math.MaxUint64}}}, o)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := search("what did Ann say about the lighthouse keeper's lamp")
	if first := ids(got)[0]; first != 3 {
		t.Errorf("equal matches: %v, want Ann's (3) first", ids(got))
	}
	pos := func(rs []Ranked, i int) int { return slices.Index(ids(rs), i) }
	if pos(got, 1) < pos(got, 4) || pos(got, 1) < pos(got, 2) {
		t.Errorf("Ann's weak match (1) passes Bob's strong ones (2, 4): %v", ids(got))
	}
	for _, r := range got {
		if r.Doc[15]%2 == 1 && math.Abs(r.Score-1.8*r.Relevance) > 1e-9 {
			t.Errorf("Ann's %d: score %g, want 1.8 × relevance %g", r.Doc[15], r.Score, r.Relevance)
		}
	}
	// Added rather than multiplied, 0.8 would lift the weak match over
	// the strong ones: its relevance is under 1 − 0.8 short of theirs.
	if w, s := got[pos(got, 1)].Relevance, got[pos(got, 2)].Relevance; w+0.8 <= s {
		t.Errorf("relevance %g (weak) and %g (strong): the test does not tell adding from multiplying", w, s)
	}
}

// "I" and "you": the user's turns, the assistant's.
func TestSearchBoostsRoles(t *testing.T) {
	t.Parallel()
	p := NewPartition(2)
	for i, role := range []string{RoleUser, RoleAssistant, RoleUser, RoleAssistant} {
		tf, n := TermFreqs("the deploy target")
		p.Add(Doc{ID: doc(byte(i + 1)), Seq: uint64(i/2 + 1), Terms: tf, Len: n, Role: role})
	}
	o := testRank()
	o.TopK, o.SpeakerBoost = 1, 0.5
	for q, want := range map[string]string{
		"what deploy target did I choose":             RoleUser,
		"which deploy target did you suggest to me":   RoleAssistant,
		"can you remind me of my deploy target":       RoleUser,
		"do you remember the deploy target you named": RoleAssistant,
	} {
		got, err := Search(context.Background(), Query{Text: q, Scopes: []Scope{{Part: p, MaxSeq: math.MaxUint64}}}, o)
		if err != nil || len(got) != 1 {
			t.Fatalf("%q: %v, %v", q, got, err)
		}
		if role := map[byte]string{1: RoleUser, 2: RoleAssistant, 3: RoleUser, 4: RoleAssistant}[got[0].Doc[15]]; role != want {
			t.Errorf("%q: %v first, of the %s; want the %s's", q, got[0].Doc[15], role, want)
		}
	}
}

// An entry stored without a time has its id's: a chunk id begins with
// its turn's time in milliseconds.
func TestDocTimeFromID(t *testing.T) {
	t.Parallel()
	p := NewPartition(2)
	at := time.Date(2024, 2, 3, 4, 5, 6, 7_000_000, time.UTC)
	ms := at.UnixMilli()
	id := DocID{byte(ms >> 40), byte(ms >> 32), byte(ms >> 24), byte(ms >> 16), byte(ms >> 8), byte(ms), 15: 1}
	tf, n := TermFreqs("x")
	p.Add(Doc{ID: id, Seq: 1, Terms: tf, Len: n})
	q := Query{Text: "x", Scopes: []Scope{{Part: p, MaxSeq: math.MaxUint64}}, Filter: Filter{From: at, To: at.Add(time.Millisecond)}}
	if got, _ := Search(context.Background(), q, testRank()); len(got) != 1 {
		t.Errorf("a chunk without a time, filtered at its id's time: %v", got)
	}
}
