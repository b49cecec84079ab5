package core

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// mayDecide must never reject a text that decisionRE or constraintRE
// matches.
func TestMayDecideIsNecessary(t *testing.T) {
	t.Parallel()
	words := []string{"we", "will", "We'll", "DECIDED", "must", "not", "Never", "always", "don't", "do",
		"prefers", "deadline", "Requirement", "constraint", "agreed", "let's", "should", "the", "plan", "is",
		"use", "go", "with", "I'm", "going", "to", "switch", "Only", "avoid", "at", "most", "from", "now", "on",
		"x1", "mustard", "undecided", "ſ", "muſt", "K", "’", ".", "\n", ",", "'"}
	rng := rand.New(rand.NewPCG(1, 2))
	matched := 0
	for range 20000 {
		var b strings.Builder
		for n := rng.IntN(8); n >= 0; n-- {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(3) > 0 {
				b.WriteByte(' ')
			}
		}
		s := b.String()
		if l := strings.ToLower(s); decisionRE.MatchString(l) || constraintRE.MatchString(l) {
			matched++
			if !mayDecide(s) {
				t.Fatalf("mayDecide(%q) = false, but a cue matches", s)
			}
		}
	}
	if matched < 100 {
		t.Fatalf("%d generated texts matched a cue; the test proves little", matched)
	}
	if mayDecide("the weather is nice today") {
		t.Error("mayDecide on text with no decision word = true, want false")
	}
}

// fitSummaryNaive is fitSummary as it was: render, drop a line, render
// again.
func fitSummaryNaive(statements, facts, artifacts, said, excerpt []string) string {
	for {
		out := render(statements, facts, artifacts, said, excerpt)
		if len(out) <= FallbackSummaryMaxBytes {
			return out
		}
		switch {
		case len(said) > 0:
			said = said[1:]
		case len(facts) > 0:
			facts = facts[1:]
		case len(artifacts) > 0 && len(artifacts) >= len(statements):
			artifacts = artifacts[1:]
		case len(statements) > 0:
			statements = statements[1:]
		default:
			return clip(out, FallbackSummaryMaxBytes)
		}
	}
}

// fitSummary gives what rendering after each line dropped gave, for
// sections of any size, lines with newlines and empty lines included.
func TestFitSummaryMatchesNaive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	line := func() string {
		switch rng.IntN(20) {
		case 0:
			return ""
		case 1:
			return "- fact: two\nlines"
		case 2:
			return "- fact: ends\n"
		}
		return "- said: " + strings.Repeat("x", rng.IntN(400))
	}
	lines := func() []string {
		out := make([]string, rng.IntN(40))
		for i := range out {
			out[i] = line()
		}
		return out
	}
	for i := range 200 {
		in := [5][]string{lines(), lines(), lines(), lines(), lines()}
		if i%2 == 0 { // mostly plain: the fast path
			for _, l := range in {
				for j := range l {
					l[j] = "- said: " + strings.Repeat("y", rng.IntN(300)+1)
				}
			}
		}
		got := fitSummary(in[0], in[1], in[2], in[3], in[4])
		want := fitSummaryNaive(in[0], in[1], in[2], in[3], in[4])
		if got != want {
			t.Fatalf("fitSummary(%d, %d, %d, %d, %d lines) = %d bytes, want %d bytes (the naive loop's)",
				len(in[0]), len(in[1]), len(in[2]), len(in[3]), len(in[4]), len(got), len(want))
		}
	}
}
