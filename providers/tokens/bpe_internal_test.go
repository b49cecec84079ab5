package tokens

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// tiktoken-go is the reference the hand-written pre-tokenizers and merge
// are checked against; it reads the same embedded rank files.
func init() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) }

var (
	refMu   sync.Mutex
	refEncs = map[string]*tiktoken.Tiktoken{}
)

func reference(t testing.TB, e *encoding) *tiktoken.Tiktoken {
	t.Helper()
	refMu.Lock()
	defer refMu.Unlock()
	if tk := refEncs[e.name]; tk != nil {
		return tk
	}
	tk, err := tiktoken.GetEncoding(e.name)
	if err != nil {
		t.Fatal(err)
	}
	refEncs[e.name] = tk
	return tk
}

// The encodings' split patterns, as tiktoken (and tiktoken-go) define them.
var patterns = map[string]string{
	CL100KBase: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	O200KBase: strings.Join([]string{
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`\p{N}{1,3}`,
		` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
		`\s*[\r\n]+`,
		`\s+(?!\S)`,
		`\s+`,
	}, "|"),
}

// regexPieces splits s (valid UTF-8) with the regexp engine tiktoken-go
// uses, returning the pieces' byte ends.
func regexPieces(t testing.TB, re *regexp2.Regexp, s string) []int {
	t.Helper()
	runes := []rune(s)
	var ends []int
	m, err := re.FindRunesMatch(runes)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		ends = append(ends, len(string(runes[:m.Index+m.Length])))
	}
	if err != nil {
		t.Fatal(err)
	}
	return ends
}

func handPieces(e *encoding, s string) []int {
	var ends []int
	for i := 0; i < len(s); {
		i = e.piece(s, i)
		ends = append(ends, i)
	}
	return ends
}

// A rune alphabet that reaches every branch of both patterns: cased and
// uncased letters of each category, marks, numbers of each kind, the
// white space \s knows, line breaks, apostrophes and case-folding
// look-alikes, punctuation and a slash, emoji and a joiner.
var alphabet = []rune{
	'a', 'b', 's', 't', 'r', 'e', 'v', 'm', 'l', 'd', 'S', 'T', 'R', 'E', 'V', 'M', 'L', 'D', 'X',
	'é', 'ß', 'ω', 'À', 'Ω', 'ǅ', 'ʰ', 'א', '好', 'お', 'ſ', 'K', 'İ',
	'\u0301', '\u0308', '\u093f',
	'0', '7', '٠', 'Ⅻ', '½',
	' ', ' ', ' ', '\t', '\n', '\n', '\r', '\v', '\f', '\u0085', '\u00a0', '\u2028', '\u3000',
	'\'', '\'', '.', ',', '!', '?', '/', '-', '_', '(', '"', '👍', '\u200d',
}

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func corpus(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %v", err)
	}
	var texts []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(data))
	}
	return texts
}

// The hand-written pre-tokenizers cut exactly where the patterns do, and
// the counts equal tiktoken-go's, on the corpus and on generated text.
func TestPiecesMatchTiktoken(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	texts := corpus(t)
	for range 4000 {
		texts = append(texts, randomText(rng, 1+rng.IntN(32)))
	}
	for _, e := range []*encoding{cl100k, o200k} {
		e.load()
		re := regexp2.MustCompile(patterns[e.name], regexp2.None)
		ref := reference(t, e)
		for _, text := range texts {
			want, got := regexPieces(t, re, text), handPieces(e, text)
			if !equalInts(got, want) {
				t.Fatalf("%s: pieces of %q:\n got %v\nwant %v", e.name, text, cuts(text, got), cuts(text, want))
			}
			if got, want := countPieces(text, e.piece, e.ranks), len(ref.EncodeOrdinary(text)); got != want {
				t.Fatalf("%s: count of %q = %d, tiktoken-go %d", e.name, text, got, want)
			}
		}
	}
}

// Invalid UTF-8 is counted as tiktoken-go counts it.
func TestInvalidUTF8CountsLikeTiktoken(t *testing.T) {
	for _, text := range []string{"\xff", "ab\xffcd", "\xe2\x82", "héllo\xc3", " \xff\xfe world"} {
		for _, e := range []*encoding{cl100k, o200k} {
			e.load()
			if got, want := countPieces(text, e.piece, e.ranks), len(reference(t, e).EncodeOrdinary(text)); got != want {
				t.Errorf("%s: count of %q = %d, tiktoken-go %d", e.name, text, got, want)
			}
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func cuts(s string, ends []int) []string {
	var out []string
	start := 0
	for _, e := range ends {
		if e < start || e > len(s) || !utf8.ValidString(s[start:e]) {
			out = append(out, "<bad cut>")
			break
		}
		out = append(out, s[start:e])
		start = e
	}
	return out
}
