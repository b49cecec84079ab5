package core

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// mayDecide must never reject a text that decisionRE or constraintRE
// matches.
func TestMayDecideIsNecessary(t *testing.T) {
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
