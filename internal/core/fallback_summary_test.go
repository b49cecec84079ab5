package core

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// mayDecide must never reject a text that decisionRE matches.
func TestMayDecideIsNecessary(t *testing.T) {
	words := []string{"we", "will", "We'll", "DECIDED", "must", "not", "Never", "always", "don't", "do",
		"prefers", "deadline", "Requirement", "constraint", "agreed", "let's", "should", "the", "plan",
		"x1", "mustard", "undecided", "ſ", "muſt", "K", ".", "\n", ",", "'"}
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
		if decisionRE.MatchString(s) {
			matched++
			if !mayDecide(s) {
				t.Fatalf("mayDecide(%q) = false, but decisionRE matches", s)
			}
		}
	}
	if matched == 0 {
		t.Fatal("no generated text matched decisionRE; the test proves nothing")
	}
	if mayDecide("the plan is to ship on time") {
		t.Error("mayDecide on text with no decision word = true, want false")
	}
}
