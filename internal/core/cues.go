package core

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// A cued expression is a regular expression with cues: substrings, in
// lower case, one of which every match holds once the text is folded
// (cueFold). The summarizer's expressions are tried on every sentence
// and most sentences hold none of their cues: looking for the cues
// costs a fraction of running the expression, which then runs only on
// the sentences that hold one (a test checks each list of cues against
// its expression).
type cued struct {
	re   *regexp.Regexp
	cues []string
}

// match reports whether c's expression matches s; folded is cueFold(s).
func (c cued) match(s, folded string) bool {
	return hasCue(folded, c.cues) && c.re.MatchString(s)
}

// hasCue reports whether folded holds one of cues.
func hasCue(folded string, cues []string) bool {
	for _, w := range cues {
		if strings.Contains(folded, w) {
			return true
		}
	}
	return false
}

// cueFold is s as the cues are looked for in it: ASCII letters in lower
// case; every run of the white space \s matches ([\t\n\f\r ]) one space;
// the runes outside ASCII that can match an ASCII letter or apostrophe
// of an expression as that letter or apostrophe (İ and K, which
// strings.ToLower makes i and k; K and ſ, which (?i) folds to k and s;
// ’, which the expressions accept for ') and every other rune (invalid
// bytes too) a zero byte, which no cue holds. s itself is returned when
// it is already so.
func cueFold(s string) string {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' || c == '\t' || c == '\n' || c == '\f' || c == '\r' ||
			c == ' ' && i+1 < len(s) && isCueSpace(s[i+1]) {
			break
		}
	}
	if i == len(s) {
		return s
	}
	out := make([]byte, i, len(s))
	copy(out, s[:i])
	for i < len(s) {
		c := s[i]
		switch {
		case c < utf8.RuneSelf:
			i++
			switch {
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			case isCueSpace(c):
				if len(out) > 0 && out[len(out)-1] == ' ' {
					continue
				}
				c = ' '
			}
			out = append(out, c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			switch r {
			case 'İ':
				c = 'i'
			case 'K':
				c = 'k'
			case 'ſ':
				c = 's'
			case '’':
				c = '\''
			default:
				c = 0
			}
			out = append(out, c)
		}
	}
	return string(out)
}

// isCueSpace reports whether c is white space as \s matches it.
func isCueSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}
