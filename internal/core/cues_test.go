package core

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// randomText joins n to 1+max words of words, mostly a space apart,
// sometimes with no space or another white space.
func randomText(r *rand.Rand, words []string, max int) string {
	var b strings.Builder
	for n := r.IntN(max); n >= 0; n-- {
		b.WriteString(words[r.IntN(len(words))])
		switch r.IntN(8) {
		case 0:
		case 1:
			b.WriteString([]string{"\t", "  ", "\n", " \r\n"}[r.IntN(4)])
		default:
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// The words the cued expressions are made of, in other letter cases and
// with the runes that fold to ASCII letters, and words near them.
var cueTestWords = append(strings.Fields(`I i İ we We WE we're we’re our Our my My MY me you your yours you're name is Dana
	am 'm I'm i’m I’m was 've I've have had own owned live lived work moved grew up studied teach was born got married
	joined started founded use used just finally went got made took walked saw met bought ran kept a an the from in at
	based married allergic vegan 5 two sister are has wants needs run 'd would really also still want wanna like to
	liKe love need prefer hope plan intend aim planning trying hoping going enjoy hate dislike don't can't stand
	goal dream favourite favorite preference The goal the 'll will shall todo to-do next step follow up follow-up
	remind still not done yet left do I'll i'll We'll ſo uſe K Kelvin x1 . , ! ? — … " ' ’ ( )
	decided DECIDED decision chose agreed settled on opted go with went let's lets let’s must mustn't never always
	should shouldn't required deadline at most please avoid only Only switched migrated Dana Lyon Dana Priya`),
	"I'm Dana", "I am Priya", "my name is", "My name is", "I’m Lyon", "I am  Dana", "i am Dana", "İ'm Dana")

// Every match of a cued expression holds one of its cues in the folded
// text: the cues never keep an expression from matching.
func TestCuesAreNecessary(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]cued{"fact": factCues, "name": nameCues, "goal": goalCues, "open": openCues,
		"decision": {decisionRE, cueWords}, "constraint": {constraintRE, cueWords}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(5, uint64(len(name))))
			matched, cueless := 0, 0
			for range 40000 {
				s := randomText(r, cueTestWords, 6)
				in := s
				if c.re == decisionRE || c.re == constraintRE {
					in = strings.ToLower(s) // as classifyStatement matches them
				}
				folded := cueFold(s)
				if !c.re.MatchString(in) {
					if !hasCue(folded, c.cues) {
						cueless++
					}
					continue
				}
				matched++
				if !hasCue(folded, c.cues) {
					t.Fatalf("%s matches %q, but its folding %q holds none of its cues", c.re, s, folded)
				}
				if got := c.match(in, cueFold(in)); !got {
					t.Fatalf("match(%q) = false, want true", in)
				}
			}
			if matched < 100 || cueless < 100 {
				t.Fatalf("%d generated texts matched, %d held no cue: the test proves little", matched, cueless)
			}
		})
	}
}

func TestCueFold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain text", "plain text"},
		{"I Will\t\tgo  Now\r\n", "i will go now "},
		{"İ liKe it’s ſo … é", "i like it's so \x00 \x00"},
		{"bad \xff byte", "bad \x00 byte"},
	} {
		if got := cueFold(tc.in); got != tc.want {
			t.Errorf("cueFold(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// sentenceEnds finds what sentenceEndRE finds.
func TestSentenceEndsMatchesTheExpression(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	parts := []string{"a", "b.go", ".", "!", "?", "...", `"`, "'", "”", "’", ")", "]", " ", "\t", "\n", "\v", "é", "\xe2", "x"}
	for range 50000 {
		var b strings.Builder
		for n := r.IntN(16); n >= 0; n-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		s := b.String()
		var want []int
		for _, m := range sentenceEndRE.FindAllStringIndex(s, -1) {
			want = append(want, m[1])
		}
		if got := sentenceEnds(s); !slices.Equal(got, want) {
			t.Fatalf("sentenceEnds(%q) = %v, want %v (sentenceEndRE)", s, got, want)
		}
	}
}

// wholeArtifact skips artifactRE on a text with more than one white
// space character and gives what running it gives.
func TestWholeArtifactMatchesTheExpression(t *testing.T) {
	t.Parallel()
	slow := func(s string) (EntityKind, string) {
		loc := artifactRE.FindStringIndex(s)
		if loc == nil || loc[0] != 0 || loc[1] != len(s) || s[0] == '"' || s[0] == '`' || strings.HasPrefix(s, "“") {
			return 0, ""
		}
		k, text := classifyArtifact(s)
		if text != s {
			return 0, ""
		}
		return k, text
	}
	r := rand.New(rand.NewPCG(11, 12))
	words := strings.Fields(`5 30 MiB ms % s 1.5 v1.2.3 eu-west-1 x.go config/app.yaml https://a.test/x #12 --flag
		foo_bar fooBar FooBar a@b.test f() 01ARZ3NDEKTSV4RRFFQ69G5FAV deadbeef12 turn of a load test € $5 °C`)
	seps := []string{" ", "", "\t", "  ", "\n"}
	found := 0
	for range 30000 {
		var b strings.Builder
		for n := r.IntN(3); n >= 0; n-- {
			if b.Len() > 0 {
				b.WriteString(seps[r.IntN(len(seps))])
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		s := b.String()
		k, text := wholeArtifact(s)
		if wk, wtext := slow(s); k != wk || text != wtext {
			t.Fatalf("wholeArtifact(%q) = %v %q, want %v %q", s, k, text, wk, wtext)
		}
		if k != 0 && strings.ContainsAny(s, " \t\n") {
			found++
		}
	}
	if found < 100 {
		t.Fatalf("%d generated texts with white space were artifacts: the test proves little", found)
	}
	// No match of artifactRE over any text holds two white space
	// characters.
	for range 20000 {
		s := randomText(r, words, 12)
		for _, m := range artifactRE.FindAllString(s, -1) {
			if n := len(regexp.MustCompile(`\s`).FindAllString(m, -1)); n > 1 {
				t.Fatalf("artifactRE matched %q in %q: %d white space characters", m, s, n)
			}
		}
	}
}
