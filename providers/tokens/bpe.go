package tokens

import (
	"math"
	"unicode"
	"unicode/utf8"
)

// The encodings' pre-tokenizers written out by hand. tiktoken splits text
// with a regular expression before byte-pair merging each piece; in Go
// that regexp runs on a backtracking engine at about 3 MB/s, which made
// counting the most expensive thing a turn did. These functions find the
// same pieces, alternative by alternative and with the same backtracking
// outcomes, at tens of MB/s; a differential test (TestPiecesMatchTiktoken)
// checks them against tiktoken-go on the test corpus and on generated text.
//
// Character classes are the regexp engine's: \s is unicode.IsSpace, \p{X}
// the Unicode category tables of the unicode package.

// pieceFunc returns the end (a byte offset) of the piece of s that starts
// at i < len(s). s is valid UTF-8.
type pieceFunc func(s string, i int) int

// ASCII answers from a table; the rest from the unicode package.
const (
	aLetter = 1 << iota
	aNumber
	aSpace
	aUpper
	aLower
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		switch {
		case 'A' <= r && r <= 'Z':
			t[r] = aLetter | aUpper
		case 'a' <= r && r <= 'z':
			t[r] = aLetter | aLower
		case '0' <= r && r <= '9':
			t[r] = aNumber
		case unicode.IsSpace(r):
			t[r] = aSpace
		}
	}
	return t
}()

func isL(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&aLetter != 0
	}
	return unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&aNumber != 0
	}
	return unicode.IsNumber(r)
}

func isWhite(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&aSpace != 0
	}
	return unicode.IsSpace(r)
}

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r] == 0
	}
	return !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r)
}

// isPrefix is [^\r\n\p{L}\p{N}], the optional character before a word.
func isPrefix(r rune) bool { return r != '\r' && r != '\n' && !isL(r) && !isN(r) }

// o200k's word classes: upper is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], lower is
// [\p{Ll}\p{Lm}\p{Lo}\p{M}].
func isUpper(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&aUpper != 0
	}
	return unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
}

func isLower(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r]&aLower != 0
	}
	return unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
}

func decode(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// runEnd returns the end of the run of runes in class starting at i.
func runEnd(s string, i int, class func(rune) bool) int {
	for i < len(s) {
		r, n := decode(s, i)
		if !class(r) {
			break
		}
		i += n
	}
	return i
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: it returns the
// end of the match, or i.
func contraction(s string, i int) int {
	if i >= len(s) || s[i] != '\'' {
		return i
	}
	for _, suffix := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
		j, ok := i+1, true
		for k := 0; k < len(suffix); k++ {
			if j >= len(s) {
				ok = false
				break
			}
			r, n := decode(s, j)
			if unicode.ToLower(r) != rune(suffix[k]) {
				ok = false
				break
			}
			j += n
		}
		if ok {
			return j
		}
	}
	return i
}

// spacePiece matches \s*[\r\n]+|\s+(?!\S)|\s+ at i, where s[i] is white
// space: up to the last line break of the run of white space if it holds
// one; else the whole run at the end of the text; else the run but its
// last character, so that a space stays with the word after it, unless
// the run is that one character.
func spacePiece(s string, i int) int {
	j := runEnd(s, i, isWhite)
	lastBreak, lastRune := -1, i
	for k := i; k < j; {
		r, n := decode(s, k)
		if r == '\r' || r == '\n' {
			lastBreak = k
		}
		lastRune = k
		k += n
	}
	if lastBreak >= 0 {
		return lastBreak + 1
	}
	if j == len(s) || lastRune == i {
		return j
	}
	return lastRune
}

// numberPiece matches \p{N}{1,3} at i.
func numberPiece(s string, i int) int {
	for k := 0; k < 3 && i < len(s); k++ {
		r, n := decode(s, i)
		if !isN(r) {
			break
		}
		i += n
	}
	return i
}

// cl100kPiece is the piece of cl100k_base at i:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func cl100kPiece(s string, i int) int {
	r, n := decode(s, i)
	if e := contraction(s, i); e > i {
		return e
	}
	if isPrefix(r) && i+n < len(s) {
		if r2, _ := decode(s, i+n); isL(r2) {
			return runEnd(s, i+n, isL)
		}
	}
	if isL(r) {
		return runEnd(s, i, isL)
	}
	if isN(r) {
		return numberPiece(s, i)
	}
	if e := otherPiece(s, i, r, n, false); e > i {
		return e
	}
	if isWhite(r) {
		return spacePiece(s, i)
	}
	return i + n // not reached: every rune is a letter, number, space or other
}

// otherPiece matches ` ?[^\s\p{L}\p{N}]+[\r\n]*` (with slash, `[\r\n/]*`)
// at i, whose rune is r of n bytes; it returns i when it does not match.
func otherPiece(s string, i int, r rune, n int, slash bool) int {
	j := i
	if r == ' ' {
		j = i + n
		if j >= len(s) {
			return i
		}
		r, _ = decode(s, j)
	}
	if !isOther(r) {
		return i
	}
	j = runEnd(s, j, isOther)
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || slash && s[j] == '/') {
		j++
	}
	return j
}

// o200kPiece is the piece of o200k_base at i:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func o200kPiece(s string, i int) int {
	r, n := decode(s, i)
	// The optional prefix is taken first, then left out.
	starts := [2]int{i, -1}
	if isPrefix(r) && i+n < len(s) {
		starts = [2]int{i + n, i}
	}
	for _, s0 := range starts {
		if s0 >= 0 {
			if e := o200kLowerWord(s, s0); e >= 0 {
				return e
			}
		}
	}
	for _, s0 := range starts {
		if s0 >= 0 && s0 < len(s) {
			if r0, _ := decode(s, s0); isUpper(r0) {
				e := runEnd(s, runEnd(s, s0, isUpper), isLower)
				return contraction(s, e)
			}
		}
	}
	if isN(r) {
		return numberPiece(s, i)
	}
	if e := otherPiece(s, i, r, n, true); e > i {
		return e
	}
	if isWhite(r) {
		return spacePiece(s, i)
	}
	return i + n // not reached
}

// o200kLowerWord matches upper*lower+contraction? at s0, the greedy upper
// run giving back one rune at a time until lower+ can start; it returns
// the end, or -1.
func o200kLowerWord(s string, s0 int) int {
	if s0 >= len(s) {
		return -1
	}
	a := runEnd(s, s0, isUpper)
	if a < len(s) {
		if r, _ := decode(s, a); isLower(r) {
			return contraction(s, runEnd(s, a, isLower))
		}
	}
	// Give back the upper run from its end: the last rune that is also
	// lower starts the lower run.
	for q := a; q > s0; {
		r, n := utf8.DecodeLastRuneInString(s[s0:q])
		q -= n
		if isLower(r) {
			return contraction(s, runEnd(s, q, isLower))
		}
	}
	return -1
}

// bpeCount returns how many tokens byte-pair merging makes of piece with
// ranks: tiktoken's merge (lowest rank first, leftmost on ties), counting
// the parts left.
func bpeCount(piece string, ranks map[string]int) int {
	if len(piece) <= 1 {
		return len(piece)
	}
	if _, ok := ranks[piece]; ok {
		return 1
	}
	type part struct{ start, rank int }
	var buf [64]part
	parts := buf[:0]
	for i := 0; i <= len(piece); i++ {
		parts = append(parts, part{i, math.MaxInt})
	}
	rank := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := ranks[piece[parts[i].start:parts[i+skip+2].start]]; ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rank(i, 0)
	}
	for len(parts) > 1 {
		minRank, minIdx := math.MaxInt, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < minRank {
				minRank, minIdx = parts[i].rank, i
			}
		}
		if minIdx < 0 {
			break
		}
		i := minIdx
		parts[i].rank = rank(i, 1)
		if i > 0 {
			parts[i-1].rank = rank(i-1, 1)
		}
		parts = append(parts[:i+1], parts[i+2:]...)
	}
	return len(parts) - 1
}

// countPieces counts the tokens of text with a pre-tokenizer and ranks.
// Invalid UTF-8 is first read the way tiktoken-go reads it: each bad byte
// becomes U+FFFD.
func countPieces(text string, piece pieceFunc, ranks map[string]int) int {
	if !utf8.ValidString(text) {
		text = string([]rune(text))
	}
	n := 0
	for i := 0; i < len(text); {
		e := piece(text, i)
		n += bpeCount(text[i:e], ranks)
		i = e
	}
	return n
}
