package retrieval

import (
	"context"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Embedder turns texts into vectors. Vectors are L2-normalised float32 of
// Dim() entries.
//
// The embedders of this package (HashEmbedder, StaticEmbedder) never
// return a zero vector: a text with nothing they know falls back to a
// deterministic hash of its words or, with no words at all, of its bytes
// (see each type), so every text can be indexed and every query asked.
// Remote embedders (providers/openai) fail instead when a server answers
// with a zero vector. Implementations are safe for concurrent use.
type Embedder interface {
	// Name is the model and dimension, e.g. "hash-256", "glove-100d",
	// "openai/text-embedding-3-small-1536". Indexes are namespaced by it
	// (Namespace): vectors of two names are never compared.
	Name() string
	// Dim is the length of every vector Embed returns.
	Dim() int
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Namespace returns the key under which vectors of e are stored and
// indexed: e.Name() with every byte outside [a-z0-9._-] replaced by '_'
// (so "openai/text-embedding-3-small-1536" is
// "openai_text-embedding-3-small-1536"), and "-<dim>" appended when the
// name does not already carry the dimension, so that a model served with
// two dimensions never shares an index.
func Namespace(e Embedder) string {
	name := strings.ToLower(e.Name())
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	ns := string(b)
	if ns == "" {
		ns = "unnamed"
	}
	if d := strconv.Itoa(e.Dim()); !hasNumber(ns, d) {
		ns += "-" + d
	}
	return ns
}

// hasNumber reports whether the digits d stand alone in s, not inside a
// longer number ("glove-100d" has "100", not "10").
func hasNumber(s, d string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], d)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(d)
		if (start == 0 || !isDigit(s[start-1])) && (end == len(s) || !isDigit(s[end])) {
			return true
		}
		i = start + 1
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// L2Normalize scales v in place to unit length and reports whether it
// could: a vector that is zero, or has a NaN or infinite entry, is left
// as it is and L2Normalize returns false. The norm is summed in float64.
func L2Normalize(v []float32) bool {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return false
	}
	inv := 1 / math.Sqrt(s)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return true
}

// Dot returns the dot product of a and b (the cosine similarity of two
// unit vectors), over the shorter of the two.
func Dot(a, b []float32) float32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// embedStopWords are English function words. HashEmbedder leaves them
// out of its features unless a text has nothing else; StaticEmbedder
// leaves out those of its StopWords field (default: none, SIF weights
// already make frequent words count little). Contractions are written
// with a straight apostrophe, as the tokenizer normalises them.
var embedStopWords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are aren't as at be
because been before being below between both but by can can't could couldn't did didn't do does doesn't doing
don't down during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her
here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
just let's me more most my myself no nor not of off on once only or other ought our ours ourselves out over
own same shan't she she'd she'll she's should shouldn't so some such than that that's the their theirs them
themselves then there there's these they they'd they'll they're they've this those through to too under until
up very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your yours yourself
yourselves`) {
		m[w] = struct{}{}
	}
	return m
}()

// EnglishStopWords returns a new set of common English function words
// (the set HashEmbedder leaves out), e.g. for StaticEmbedder.StopWords.
func EnglishStopWords() map[string]struct{} {
	m := make(map[string]struct{}, len(embedStopWords))
	for w := range embedStopWords {
		m[w] = struct{}{}
	}
	return m
}

// isStopWord reports whether the lower-cased word w is in embedStopWords.
func isStopWord(w []byte) bool {
	_, ok := embedStopWords[string(w)]
	return ok
}

// forEachWord calls fn with each word of s, lower-cased, in order, and
// returns buf (grown) for reuse. A word is a run of letters, digits and
// combining marks, with the connectors - _ . ' (’ is written ') kept
// inside it when a word character stands on both sides ("e-mail",
// "node.js", "don't", "max_words"); callers split on them as they need
// (wordParts). fn must not keep w: it is overwritten by the next word.
func forEachWord(s string, buf []byte, fn func(w []byte)) []byte {
	w := buf[:0]
	pendingConn := byte(0) // a connector seen after a word character
	flush := func() {
		if len(w) > 0 {
			fn(w)
		}
		w = w[:0]
		pendingConn = 0
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			case c == '-' || c == '_' || c == '.' || c == '\'':
				if len(w) > 0 && pendingConn == 0 {
					pendingConn = c
				} else {
					flush()
				}
				continue
			default:
				flush()
				continue
			}
			if pendingConn != 0 {
				w = append(w, pendingConn)
				pendingConn = 0
			}
			w = append(w, c)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == '’' || r == 'ʼ' {
			if len(w) > 0 && pendingConn == 0 {
				pendingConn = '\''
			} else {
				flush()
			}
			continue
		}
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r) {
			flush()
			continue
		}
		if pendingConn != 0 {
			w = append(w, pendingConn)
			pendingConn = 0
		}
		w = utf8.AppendRune(w, unicode.ToLower(r))
	}
	flush()
	return w
}

// isConnector reports whether c joins the parts of a word (forEachWord).
func isConnector(c byte) bool { return c == '-' || c == '_' || c == '.' || c == '\'' }

// hasConnector reports whether the word w has parts.
func hasConnector(w []byte) bool {
	for _, c := range w {
		if isConnector(c) {
			return true
		}
	}
	return false
}

// wordParts calls fn with each part of w between connectors.
func wordParts(w []byte, fn func(part []byte)) {
	start := 0
	for i, c := range w {
		if isConnector(c) {
			if i > start {
				fn(w[start:i])
			}
			start = i + 1
		}
	}
	if start < len(w) {
		fn(w[start:])
	}
}
