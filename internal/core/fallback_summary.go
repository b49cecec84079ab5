package core

import (
	"bytes"
	"regexp"
	"strings"
)

// Exchange is one user turn as the summarizer sees it: what the user said
// and what the assistant answered.
type Exchange struct {
	User, Assistant string
}

// FallbackSummaryMaxBytes bounds the deterministic fallback summary.
const FallbackSummaryMaxBytes = 6000

var (
	artifactRE = regexp.MustCompile("(?:https?://[^\\s)\"'>]+)|(?:[\\w.-]*/[\\w./-]+\\.\\w+)|(?:`[^`\\n]{2,80}`)|(?:\\b[A-Z][A-Z0-9_]{2,}\\b)|(?:\\b\\d[\\d.,:/-]*\\d\\b)|(?:\\b[A-Za-z]+\\d*(?:[-_][A-Za-z0-9]+)*[-_]\\d+\\b)")
	decisionRE = regexp.MustCompile(`(?i)\b(decid\w*|agreed|we will|we'll|let's|must|must not|never|always|should not|don't|do not|prefer\w*|deadline|requirement|constraint)\b`)
	sentenceRE = regexp.MustCompile(`[.!?\n]+\s*`)
)

// FallbackSummary is the deterministic summarizer the librarian uses when
// no model is configured or the model fails (SRD §10.3). It rewrites the
// summary from the previous one and the new exchanges: it keeps every
// artifact (paths, URLs, code spans, identifiers, numbers), every sentence
// that reads as a decision or constraint, and a short line of what the
// user said in each turn; it appends an excerpt of the last exchange, and
// trims to FallbackSummaryMaxBytes, dropping the oldest lines first (user
// lines, then artifacts and decisions). Pinned facts are not part of the
// summary: the state keeps them verbatim.
func FallbackSummary(previous string, exchanges []Exchange) string {
	var decisions, artifacts, said, excerpt []string
	seen := map[string]bool{}
	for _, line := range strings.Split(previous, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "- decision: "):
			decisions = appendNew(decisions, seen, line)
		case strings.HasPrefix(line, "- artifact: "):
			artifacts = appendNew(artifacts, seen, line)
		case strings.HasPrefix(line, "- user said: "):
			said = appendNew(said, seen, line)
		}
	}
	for _, ex := range exchanges {
		said = appendNew(said, seen, "- user said: "+clip(oneLine(ex.User), 200))
		for _, text := range []string{ex.User, ex.Assistant} {
			// A sentence is a substring bounded by separators, so where the
			// whole text has no decision word no sentence has one.
			if mayDecide(text) && decisionRE.MatchString(text) {
				for _, s := range sentences(text) {
					if decisionRE.MatchString(s) {
						decisions = appendNew(decisions, seen, "- decision: "+clip(s, 240))
					}
				}
			}
			for _, a := range artifactRE.FindAllString(text, -1) {
				artifacts = appendNew(artifacts, seen, "- artifact: "+clip(a, 120))
			}
		}
	}
	if n := len(exchanges); n > 0 {
		last := exchanges[n-1]
		excerpt = append(excerpt, "- user: "+clip(oneLine(last.User), 300), "- assistant: "+clip(oneLine(last.Assistant), 300))
	}
	for {
		out := render(decisions, artifacts, said, excerpt)
		if len(out) <= FallbackSummaryMaxBytes {
			return out
		}
		switch {
		case len(said) > 0:
			said = said[1:]
		case len(artifacts) > 0 && len(artifacts) >= len(decisions):
			artifacts = artifacts[1:]
		case len(decisions) > 0:
			decisions = decisions[1:]
		default:
			return clip(out, FallbackSummaryMaxBytes)
		}
	}
}

// decisionWords are substrings every decisionRE match contains, lower
// case.
var decisionWords = []string{"decid", "agreed", "we will", "we'll", "let's", "must", "never", "always",
	"should not", "don't", "do not", "prefer", "deadline", "requirement", "constraint"}

// mayDecide is a cheap necessary condition for decisionRE to match text:
// false only for ASCII text holding none of decisionWords in any case
// (non-ASCII text may match through Unicode case folding: always true).
func mayDecide(text string) bool {
	lower := make([]byte, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= 0x80 {
			return true
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	for _, w := range decisionWords {
		if bytes.Contains(lower, []byte(w)) {
			return true
		}
	}
	return false
}

func render(decisions, artifacts, said, excerpt []string) string {
	var b strings.Builder
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		b.WriteString("## " + title + "\n")
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	section("Decisions and constraints", decisions)
	section("Key artifacts", artifacts)
	section("What the user said", said)
	section("Last exchange", excerpt)
	return strings.TrimRight(b.String(), "\n")
}

func appendNew(lines []string, seen map[string]bool, l string) []string {
	if seen[l] {
		return lines
	}
	seen[l] = true
	return append(lines, l)
}

func sentences(text string) []string {
	var out []string
	for _, s := range sentenceRE.Split(text, -1) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}
