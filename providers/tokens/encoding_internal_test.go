package tokens

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

// Token ids from tiktoken's own tests (tests/test_encoding.py,
// tests/test_simple_public.py) and from OpenAI's cookbook "How to count
// tokens with tiktoken" (compare_encodings), so that the embedded
// encodings are checked token by token, not just by length.
var idVectors = []struct {
	enc  *encoding
	text string
	want []int
}{
	{cl100k, "hello world", []int{15339, 1917}},
	{cl100k, "rer", []int{38149}},
	{cl100k, "'rer", []int{2351, 81}},
	{cl100k, "today\n ", []int{31213, 198, 220}},
	{cl100k, "today\n \n", []int{31213, 27907}},
	{cl100k, "today\n  \n", []int{31213, 14211}},
	{cl100k, " \u00850", []int{220, 126, 227, 15}},
	{cl100k, "👍", []int{9468, 239, 235}},
	{cl100k, "antidisestablishmentarianism", []int{519, 85342, 34500, 479, 8997, 2191}},
	{cl100k, "2 + 2 = 4", []int{17, 489, 220, 17, 284, 220, 19}},
	{cl100k, "お誕生日おめでとう", []int{33334, 45918, 243, 21990, 9080, 33334, 62004, 16556, 78699}},
	{cl100k, "tiktoken is great!", []int{83, 1609, 5963, 374, 2294, 0}},
	{o200k, "antidisestablishmentarianism", []int{493, 129901, 376, 160388, 21203, 2367}},
	{o200k, "2 + 2 = 4", []int{17, 659, 220, 17, 314, 220, 19}},
	{o200k, "お誕生日おめでとう", []int{8930, 9697, 243, 128225, 8930, 17693, 4344, 48669}},
}

func TestEncodingIDs(t *testing.T) {
	for _, v := range idVectors {
		v.enc.load()
		if v.enc.ranks == nil {
			t.Fatalf("%s did not load: %v", v.enc.name, v.enc.err)
		}
		if got := reference(t, v.enc).EncodeOrdinary(v.text); !slices.Equal(got, v.want) {
			t.Errorf("%s.EncodeOrdinary(%q) = %v, want %v", v.enc.name, v.text, got, v.want)
		}
		if got := v.enc.Count(v.text); got != len(v.want) {
			t.Errorf("%s.Count(%q) = %d, want %d", v.enc.name, v.text, got, len(v.want))
		}
	}
}

// Long runs of one class are cut so that byte-pair merging stays linear;
// the count stays within a token per cut of the exact one.
func TestLongRunsStayClose(t *testing.T) {
	for _, unit := range []string{"a", "x y", " ", "\n", "=", "^", "0", "é", "好", "'s"} {
		s := strings.Repeat(unit, 4096/len(unit))
		for _, e := range []*encoding{cl100k, o200k} {
			e.load()
			exact := len(reference(t, e).EncodeOrdinary(s)) // quadratic, but 4 KB is quick
			got := e.Count(s)
			cuts := len(s)/maxRun + 1
			if got < exact || got > exact+cuts {
				t.Errorf("%s.Count(%q×%d) = %d, exact %d; want within %d above", e.name, unit, len(s)/len(unit), got, exact, cuts)
			}
		}
	}
}

func TestNextCut(t *testing.T) {
	long := strings.Repeat("a", maxRun+10)
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello world", 11},
		{long, maxRun},
		{"x " + long, 2 + maxRun},
		{strings.Repeat("ab1", 200), 600},     // classes alternate: never cut
		{strings.Repeat("é", maxRun), maxRun}, // 2 bytes each: cut at maxRun bytes
	}
	for _, tt := range tests {
		if got := nextCut(tt.text); got != tt.want {
			t.Errorf("nextCut(%.20q…) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

// An encoding that cannot be loaded falls back to Estimate and says
// so in its name; nothing panics.
func TestFallback(t *testing.T) {
	e := &encoding{name: "no_such_base"}
	if got := e.Name(); got != RuneEstimate {
		t.Errorf("Name() = %q, want %q", got, RuneEstimate)
	}
	if got := e.Count("hello world"); got != 3 {
		t.Errorf("Count(%q) = %d, want 3", "hello world", got)
	}
	if e.err == nil {
		t.Error("err is nil after a failed load")
	}
}

// Goroutines that race to load a fresh encoding all get it loaded once
// and count alike (run with -race).
func TestConcurrentFirstLoad(t *testing.T) {
	e := &encoding{name: CL100KBase}
	var wg sync.WaitGroup
	counts := make([]int, 8)
	for i := range counts {
		wg.Go(func() { counts[i] = e.Count("hello world") })
	}
	wg.Wait()
	for i, n := range counts {
		if n != 2 {
			t.Errorf("goroutine %d: Count(%q) = %d, want 2", i, "hello world", n)
		}
	}
	if e.Name() != CL100KBase {
		t.Errorf("Name() = %q, want %q", e.Name(), CL100KBase)
	}
}
