package core

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EntityKind says what an Entity is.
type EntityKind uint8

// The kinds of entity. Path to Quote are artifacts (IsArtifact).
const (
	// EntityPinned is a fact pinned by the user: a summary keeps it
	// verbatim, up to case, white space and punctuation.
	EntityPinned EntityKind = iota + 1
	// EntityPath is a file or directory path: internal/core/x.go,
	// /etc/hosts, ./data, config.yaml.
	EntityPath
	// EntityURL is a web address.
	EntityURL
	// EntitySymbol is a code symbol or literal: Foo.Bar, foo_bar(),
	// maxTokens, FallbackSummary, OPENAI_API_KEY, --data-dir, a `code`
	// span, an e-mail address.
	EntitySymbol
	// EntityID is an identifier: a ULID, a UUID, a hash, a ticket
	// (JIRA-12, #42), a name with a number (eu-west-1, gpt-4.1-mini, v2).
	EntityID
	// EntityNumber is a number of two digits or more, or any number with
	// a unit or currency: 8080, 1.5, 2024-05-01, 10:30, 30 s, 5 MiB, $40.
	EntityNumber
	// EntityQuote is a short quoted string (at most six words).
	EntityQuote
	// EntityDecision is a sentence that records a decision ("we decided
	// to…", "let's go with…"), or a bullet under a Decisions heading.
	EntityDecision
	// EntityConstraint is a sentence that states a constraint ("must",
	// "never", "always", "should not"…).
	EntityConstraint
)

var entityKindNames = [...]string{
	EntityPinned: "pinned fact", EntityPath: "path", EntityURL: "url", EntitySymbol: "symbol",
	EntityID: "id", EntityNumber: "number", EntityQuote: "quote", EntityDecision: "decision",
	EntityConstraint: "constraint",
}

// String returns k's name ("path", "pinned fact"…), or "entity(N)".
func (k EntityKind) String() string {
	if int(k) < len(entityKindNames) && entityKindNames[k] != "" {
		return entityKindNames[k]
	}
	return "entity(" + strconv.Itoa(int(k)) + ")"
}

// IsArtifact reports whether k is a kind of artifact: a path, URL,
// symbol, id, number or quoted string.
func (k EntityKind) IsArtifact() bool { return k >= EntityPath && k <= EntityQuote }

// isStatement reports whether k is a decision or a constraint.
func (k EntityKind) isStatement() bool { return k == EntityDecision || k == EntityConstraint }

// Entity is something a summary must keep (SRD §10.2): a pinned fact, an
// artifact as written, or a decision or constraint sentence.
type Entity struct {
	Kind EntityKind
	Text string
}

// String returns "kind: text".
func (e Entity) String() string { return e.Kind.String() + ": " + e.Text }

// StatementMaxBytes bounds the text of a decision or constraint entity.
const StatementMaxBytes = 300

// artifactRE finds artifact candidates in a word (quotes and code spans
// are found by quotedRE). Go's regexp is leftmost-first, so where two
// alternatives match at the same place the earlier one wins: they are
// listed most specific first. classifyArtifact then checks and classifies
// each candidate. The expression is kept small (file extensions and
// units are checked in classifyArtifact): the size of its program is
// what matching costs.
var artifactRE = regexp.MustCompile(strings.Join([]string{
	"https?://[^\\s<>\"'`]+",                                           // URL
	`\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b`,         // UUID
	`\b[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}\b`,                     // ULID
	`[\w.@+~-]*/[\w.@+-]+(?:/[\w.@+-]+)*/?`,                            // something with a slash
	`--[A-Za-z][\w-]*`,                                                 // command-line flag
	`#\d+\b`,                                                           // issue or pull request
	`\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b`,                                 // e-mail
	`\b(?:\d+[a-fA-F]|[a-fA-F]+\d)[0-9a-fA-F]{5,}\b`,                   // hash
	`\bv\d+(?:\.\d+){1,3}\b|\b\d+(?:\.\d+){2,3}(?:-[A-Za-z][\w.]*)?\b`, // version
	`\b[\w-]*[A-Za-z_][\w-]*(?:\.[\w-]+)+(?:\(\))?`,                    // file name, Foo.Bar(), gpt-4.1-mini
	`\b[A-Za-z_]\w*\(\)`,                                               // call
	`\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b`,                       // snake_case, SCREAMING_CASE
	`\b[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-\d+(?:-[A-Za-z0-9]+)*\b`, // eu-west-1
	`\b[a-z]+(?:[A-Z][a-z0-9]*)+\b`,                                    // camelCase
	`\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b`,                            // PascalCase
	`\b[A-Za-z]+\d[A-Za-z0-9]*\b`,                                      // v2, S3, ipv6
	`[$€£]?\b\d+(?:[.,:/-]\d+)*(?:\s?(?:[A-Za-zµ°]+\b|%))?`,            // number, unit
}, "|"))

// fileExtensions are the extensions that make a dotted name a file name.
var fileExtensions = wordSet(`go mod sum py pyi rs js mjs cjs ts tsx jsx json jsonl yaml yml toml ini cfg conf env md
	txt rst csv tsv sql db sqlite sh bash zsh ps1 bat cpp hpp cc cs c h java kt kts scala rb php swift lua proto html
	htm css scss xml svg png jpeg jpg gif pdf zip tar gz tgz zst log lock tf hcl gradle ipynb wasm so dll exe pem crt`)

// units are the words that may follow a number as its unit, in lower
// case; a unit of one letter must be attached ("5s", not "5 s").
var units = wordSet(`ms µs us ns sec secs second seconds min mins minute minutes hr hrs hour hours day days week
	weeks month months year years kb kib mb mib gb gib tb tib pb pib byte bytes token tokens px rem fps rps qps rpm hz
	khz mhz ghz usd eur gbp core cores cpu cpus gpu gpus turn turns message messages request requests retries user
	users item items word words line lines step steps chunk chunks fact facts file files times % s h d w m k b x`)

func wordSet(words string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(words) {
		out[w] = true
	}
	return out
}

// isUnit reports whether u, after a number (attached when attached is
// true), is its unit.
func isUnit(u string, attached bool) bool {
	u = strings.ToLower(u)
	return units[u] && (attached || utf8.RuneCountInString(u) > 1 || u == "%")
}

// unitCanon maps the spellings of a unit after a number to one form, so
// that "30 seconds" and "30s" are the same number.
var unitCanon = map[string]string{
	"s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
	"min": "min", "mins": "min", "minute": "min", "minutes": "min",
	"h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
	"d": "d", "day": "d", "days": "d", "w": "w", "week": "w", "weeks": "w",
	"ms": "ms", "millisecond": "ms", "milliseconds": "ms",
	"b": "b", "byte": "b", "bytes": "b", "token": "token", "tokens": "token",
}

var (
	// decisionRE finds the cues of a decision in a sentence in lower
	// case (case folding makes matching slower: the caller lowers).
	decisionRE = regexp.MustCompile(`\b(?:decid(?:e|ed|es|ing)|decision|chose|chosen|choose to|agreed|settled on|opted|go with|went with|going with|(?:we|i)(?:['’]ll| will| are going to|['’]re going to|['’]m going to| am going to) (?:\w+ )?(?:use|go with|switch|adopt|keep|stick|move|migrate|ship|deploy|target|store|put|call|name|build|write|implement|add|remove|drop|support|run|rely)|let['’]?s (?:go with|use|do|stick with|switch|keep|adopt|move|call|name|make|pick|choose|start with|ship|deploy|target|store|put)|(?:we|i)(?:['’]ve| have)? (?:switched|migrated) to|the plan is|from now on)\b`)
	// constraintRE finds the cues of a constraint in a sentence in
	// lower case.
	constraintRE = regexp.MustCompile(`\b(?:must|mustn['’]t|never|always|should not|shouldn['’]t|shall not|cannot be|can['’]t be|may not|not allowed|required|requirement|constraint|deadline|at most|no more than|no later than|forbidden|prohibited)\b|^(?:please\s+)?(?:do not|don['’]t|avoid|only)\b`)
	// revisionRE marks a decision that replaces an earlier one, in a
	// sentence in lower case.
	revisionRE = regexp.MustCompile(`\b(?:instead|actually|no longer|anymore|rather than|switch(?:ed|ing)? (?:to|from|back)|chang(?:e|ed|ing) (?:to|from)|replac\w*|revert\w*|scrap\w*|supersed\w*|overrid\w*|on second thought|after all|change of plan)\b`)
	// sentenceEndRE ends a sentence: closing punctuation and white space.
	sentenceEndRE = regexp.MustCompile(`[.!?]+["'”’)\]]*\s+`)
	// bulletRE is a list marker or heading mark at the start of a line.
	bulletRE = regexp.MustCompile(`^\s*(?:[-*+•]|\d{1,3}[.)]|#{1,6})\s+`)
	// labelRE is a label of the fallback summary's lines.
	labelRE = regexp.MustCompile(`^(?i)(decision|constraint|fact|artifact|user said|user|assistant):\s*`)
)

// cueWords are substrings, in lower case, of every match of decisionRE
// and constraintRE (ASCII apostrophes; a text with a typographic one is
// not ASCII).
var cueWords = []string{"decid", "decision", "chose", "agreed", "settled on", "opted", "go with",
	"went with", "going with", "switched", "migrated", "we'", "i'", "we will", "i will", "we are", "i am", "we're", "i'm", "let", "the plan is",
	"from now on", "must", "never", "always", "should not", "shouldn't", "shall not", "cannot be",
	"can't be", "may not", "not allowed", "required", "requirement", "constraint", "deadline", "at most",
	"no more than", "no later than", "forbidden", "prohibited", "do not", "don't", "avoid", "only"}

// mayDecide is a cheap necessary condition for decisionRE or
// constraintRE to match strings.ToLower(text): false only when text
// holds none of cueWords (cueFold).
func mayDecide(text string) bool { return hasCue(cueFold(text), cueWords) }

// located is an entity found in a text, with the index of the sentence
// it came from (counted across one extractor's texts).
type located struct {
	Entity
	sentence int
}

// extractor finds entities in texts fed to it in order.
type extractor struct {
	out       []located
	sentences int
	fence     bool   // inside a fenced code block
	section   string // the current heading, in lower case
}

// ExtractEntities returns the entities of text in order of appearance,
// each sentence's decision or constraint before its artifacts, without
// duplicates (by kind class and normalized text). It reads text line by
// line: list markers and headings are stripped; a line under a heading
// that names decisions is a decision; the labels of FallbackSummary's
// lines ("decision: ", "constraint: "…) are understood. Inside fenced
// code blocks only paths and URLs count: the transcript keeps the code.
// A question is never a decision or a constraint.
func ExtractEntities(text string) []Entity {
	var x extractor
	x.text(text)
	var out []Entity
	seen := map[string]bool{}
	for _, l := range x.out {
		if k := dedupKey(l.Entity); !seen[k] {
			seen[k] = true
			out = append(out, l.Entity)
		}
	}
	return out
}

// text extracts the entities of one text.
func (x *extractor) text(text string) {
	x.fence, x.section = false, ""
	for _, line := range strings.Split(text, "\n") {
		x.line(line)
	}
}

// line extracts the entities of the next line of a text.
func (x *extractor) line(line string) {
	trimmed := strings.TrimSpace(line)
	if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
		x.fence = !x.fence
		return
	}
	if trimmed == "" {
		return
	}
	x.sentences++
	if x.fence {
		x.artifacts(trimmed, true)
		return
	}
	marker := bulletRE.FindString(trimmed)
	body := trimmed[len(marker):]
	if strings.HasPrefix(marker, "#") {
		x.section = strings.ToLower(body)
		x.artifacts(body, false)
		return
	}
	kind := EntityKind(0)
	if m := labelRE.FindStringSubmatch(body); m != nil {
		body = body[len(m[0]):]
		switch strings.ToLower(m[1]) {
		case "decision":
			kind = EntityDecision
		case "constraint":
			kind = EntityConstraint
		}
	} else if strings.Contains(x.section, "decision") {
		kind = EntityDecision
	}
	if kind != 0 {
		// A labelled line or a bullet under Decisions is one statement.
		x.statement(kind, body)
		x.artifacts(body, false)
		return
	}
	// Open items get done: what they say is not a lasting decision.
	open := strings.Contains(x.section, "open") || strings.Contains(x.section, "pending")
	for i, s := range splitSentences(body) {
		if i > 0 {
			x.sentences++
		}
		if !open && mayDecide(s) {
			x.statement(classifyStatement(s), s)
		}
		x.artifacts(s, false)
	}
}

// statement records s as a statement of kind k, unless k is 0.
func (x *extractor) statement(k EntityKind, s string) {
	s = strings.TrimRight(strings.TrimSpace(s), ".;: ")
	if k == 0 || s == "" {
		return
	}
	e := Entity{Kind: k, Text: clipBytes(s, StatementMaxBytes)}
	x.out = append(x.out, located{e, x.sentences})
}

// artifacts records the artifacts of s (only paths and URLs in code).
//
// Running artifactRE over whole texts is slow (its program is large), so
// it runs on short windows only: quotes and code spans first, found by a
// small expression and then blanked out; then every word that has
// something an artifact needs (a digit, a slash, an inner dot or
// capital…), with the next word when that is a unit after a number. The
// results are as if artifactRE ran over s, in order.
func (x *extractor) artifacts(s string, code bool) {
	type found struct {
		at int
		e  Entity
	}
	var fs []found
	add := func(at int, m string) {
		k, text := classifyArtifact(m)
		if k == 0 || (code && k != EntityPath && k != EntityURL) {
			return
		}
		fs = append(fs, found{at, Entity{Kind: k, Text: text}})
	}
	if strings.ContainsAny(s, "`\"“") {
		b := []byte(s)
		for _, m := range quotedRE.FindAllStringIndex(s, -1) {
			if k, _ := classifyArtifact(s[m[0]:m[1]]); k == 0 {
				continue // a long quote: its words are read one by one
			}
			add(m[0], s[m[0]:m[1]])
			for i := m[0]; i < m[1]; i++ {
				b[i] = ' '
			}
		}
		s = string(b)
	}
	for i := 0; i < len(s); {
		start, end := nextWord(s, i)
		if start == end {
			break
		}
		i = end
		if !mayBeArtifact(s[start:end]) {
			continue
		}
		unit, unitAt := "", -1
		if hasDigit(s[start:end]) {
			// "30 seconds", "5 MiB", "75 %": the unit is the next word.
			if us, ue := nextWord(s, end); us < ue && isUnit(strings.TrimRight(s[us:ue], ".,;:!?)"), false) {
				unit, unitAt = strings.TrimRight(s[us:ue], ".,;:!?)"), us
				i = ue
			}
		}
		if w := s[start:end]; isDigit(rune(w[0])) {
			// A plain number, the commonest case, without artifactRE: the
			// same result (a unit after one space only, as \s? takes).
			if num := strings.TrimRight(w, ".,;:!?)"); allDigits(num) {
				if unitAt == end+1 && len(num) == len(w) {
					add(start, s[start:unitAt]+unit)
				} else {
					add(start, num)
				}
				continue
			}
		}
		if unitAt >= 0 {
			end = unitAt + len(unit)
		}
		for _, m := range artifactRE.FindAllStringIndex(s[start:end], -1) {
			add(start+m[0], s[start+m[0]:start+m[1]])
		}
	}
	sort.SliceStable(fs, func(a, b int) bool { return fs[a].at < fs[b].at })
	for _, f := range fs {
		x.out = append(x.out, located{f.e, x.sentences})
	}
}

// quotedRE finds code spans and quoted strings.
var quotedRE = regexp.MustCompile("`[^`\\n]{1,80}`|\"[^\"\\n]{1,60}\"|“[^”\\n]{1,60}”")

// nextWord returns the bounds of the first run of non-space bytes of s at
// or after i; start == end when there is none.
func nextWord(s string, i int) (start, end int) {
	for i < len(s) && isSpaceByte(s[i]) {
		i++
	}
	start = i
	for i < len(s) && !isSpaceByte(s[i]) {
		i++
	}
	return start, i
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// mayBeArtifact is a cheap necessary condition for artifactRE to find an
// artifact in word: it has a digit, a slash, an inner dot, an
// underscore, @, #, a hyphen, a currency or percent sign, "()", or a
// capital after a letter (camelCase); anything not ASCII may be a unit
// or currency.
func mayBeArtifact(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case '0' <= c && c <= '9', c == '/', c == '_', c == '@', c == '#', c == '-', c == '$', c == '%', c >= utf8.RuneSelf:
			return true
		case c == '.' && i+1 < len(w) && isWordByte(w[i+1]):
			return true
		case c == '(' && i+1 < len(w) && w[i+1] == ')':
			return true
		case 'A' <= c && c <= 'Z' && i > 0 && isWordByte(w[i-1]):
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

// classifyStatement returns the kind of statement sentence s is, or 0.
func classifyStatement(s string) EntityKind {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(strings.TrimRight(s, `"'”’)] `), "?") {
		return 0
	}
	s = strings.ToLower(s)
	switch {
	case decisionRE.MatchString(s):
		return EntityDecision
	case constraintRE.MatchString(s):
		return EntityConstraint
	}
	return 0
}

// splitSentences cuts a line into sentences at closing punctuation
// followed by white space (so "x.go" and "1.5" stay whole).
func splitSentences(line string) []string {
	var out []string
	start := 0
	for _, end := range sentenceEnds(line) {
		if s := strings.TrimSpace(line[start:end]); s != "" {
			out = append(out, s)
		}
		start = end
	}
	if s := strings.TrimSpace(line[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// sentenceEnds returns the end of each match of sentenceEndRE in line,
// in order, as FindAllStringIndex finds them, without running it: a
// match is a run of closing punctuation, any closing quotes or brackets
// after it, and the white space after those, which it needs; the
// expression is kept as the definition.
func sentenceEnds(line string) []int {
	var out []int
	for i := 0; i < len(line); {
		if c := line[i]; c != '.' && c != '!' && c != '?' {
			i++
			continue
		}
		for i < len(line) && (line[i] == '.' || line[i] == '!' || line[i] == '?') {
			i++
		}
		for i < len(line) {
			if c := line[i]; c == '"' || c == '\'' || c == ')' || c == ']' {
				i++
			} else if strings.HasPrefix(line[i:], "”") || strings.HasPrefix(line[i:], "’") {
				i += len("”")
			} else {
				break
			}
		}
		end := i
		for end < len(line) && isCueSpace(line[end]) {
			end++
		}
		if end > i {
			out = append(out, end)
		}
		i = end
	}
	return out
}

// classifyArtifact checks an artifactRE match and returns its kind and
// text, or 0 when it is not an artifact after all.
func classifyArtifact(m string) (EntityKind, string) {
	switch {
	case strings.HasPrefix(m, "http://") || strings.HasPrefix(m, "https://"):
		m = trimURL(m)
		if len(m) <= len("https://") {
			return 0, ""
		}
		return EntityURL, m
	case strings.HasPrefix(m, "`"):
		inner := strings.TrimSpace(strings.Trim(m, "`"))
		if !hasAlnum(inner) {
			return 0, ""
		}
		if k, text := wholeArtifact(inner); k != 0 {
			return k, text
		}
		return EntitySymbol, inner
	case strings.HasPrefix(m, `"`) || strings.HasPrefix(m, "“"):
		inner := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(m, `"`), "“"), `"`), "”")
		// A quote starts and ends with a non-space (so the text between
		// two quotes is not one) and is short: longer ones are dialogue.
		if inner == "" || inner != strings.TrimSpace(inner) || !hasAlnum(inner) || len(strings.Fields(inner)) > 6 {
			return 0, ""
		}
		if k, text := wholeArtifact(inner); k != 0 {
			return k, text // "internal/x.go" is a path
		}
		return EntityQuote, inner
	case strings.ContainsRune(m, '/'):
		return classifyPath(strings.TrimRight(m, ".,;:!?"))
	case strings.HasPrefix(m, "--"):
		return EntitySymbol, m
	case strings.HasPrefix(m, "#"):
		return EntityID, m
	case strings.ContainsRune(m, '@'):
		return EntitySymbol, m
	}
	r, _ := utf8.DecodeRuneInString(m)
	switch {
	case uuidRE.MatchString(m):
		return EntityID, m
	case r == '$' || r == '€' || r == '£':
		return EntityNumber, m
	case isDigit(r):
		return classifyNumber(m)
	case isFileName(m):
		return EntityPath, m
	case m[0] == 'v' && len(m) > 1 && isDigit(rune(m[1])), strings.ContainsRune(m, '-'):
		return EntityID, m // v1.2.3, eu-west-1, gpt-4.1-mini
	case strings.ContainsRune(m, '.'):
		short := true
		for _, seg := range strings.Split(strings.TrimSuffix(m, "()"), ".") {
			short = short && len(seg) <= 1
		}
		if short {
			return 0, "" // e.g, i.e, a.m
		}
		return EntitySymbol, m
	case strings.HasSuffix(m, "()") || strings.ContainsRune(m, '_'):
		return EntitySymbol, m
	case hasDigit(m):
		return EntityID, m
	}
	return EntitySymbol, m // camelCase, PascalCase
}

// wholeArtifact returns the kind of s when s is one artifact (not a
// quote or code span) from end to end, else 0.
func wholeArtifact(s string) (EntityKind, string) {
	// No match of artifactRE holds more than one white space character
	// (\s, the one between a number and its unit): a quote of words is
	// none, and the expression need not run.
	if spaces := strings.Count(s, " ") + strings.Count(s, "\t") + strings.Count(s, "\n") +
		strings.Count(s, "\f") + strings.Count(s, "\r"); spaces > 1 {
		return 0, ""
	}
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

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$`)

// isFileName reports whether m is a dotted name whose last part is a
// known file extension after a name with a letter: config.yaml, x.go.
func isFileName(m string) bool {
	i := strings.LastIndexByte(m, '.')
	if i <= 0 || strings.ContainsAny(m, "()/") {
		return false
	}
	return fileExtensions[strings.ToLower(m[i+1:])] && strings.IndexFunc(m[:i], unicode.IsLetter) >= 0
}

// classifyNumber accepts a number with a unit or a currency sign, or
// with two digits or more (8080, 1.5, 10:30); a word after it that is not
// a unit is left out ("3rd" is not a number). A hash or ULID that starts
// with a digit is an id.
func classifyNumber(m string) (EntityKind, string) {
	m = strings.TrimSpace(m)
	if isHashOrULID(m) {
		return EntityID, m
	}
	end := strings.IndexFunc(m, func(r rune) bool {
		return !isDigit(r) && !strings.ContainsRune("$€£.,:/-", r)
	})
	if end >= 0 {
		unit := strings.TrimLeft(m[end:], " \t")
		if !isUnit(unit, len(unit) == len(m[end:])) {
			m = m[:end]
		}
	}
	digits := 0
	for _, r := range m {
		if isDigit(r) {
			digits++
		}
	}
	if digits >= 2 || len(m) > end && end >= 0 || strings.ContainsAny(m, "$€£") {
		return EntityNumber, m
	}
	return 0, ""
}

// isHashOrULID reports whether m, seven letters and digits or more with
// at least one letter, is hexadecimal or 26 long (a ULID).
func isHashOrULID(m string) bool {
	if len(m) < 7 {
		return false
	}
	letter, hex := false, true
	for i := 0; i < len(m); i++ {
		c := m[i] | 0x20 // ASCII lower case
		switch {
		case '0' <= m[i] && m[i] <= '9':
		case 'a' <= c && c <= 'z':
			letter = true
			hex = hex && c <= 'f'
		default:
			return false
		}
	}
	return letter && (hex || len(m) == 26)
}

// classifyPath accepts a candidate with a slash as a path, a number
// (2024/05/01, 1/2) or nothing ("and/or", "TCP/IP").
func classifyPath(m string) (EntityKind, string) {
	segs := strings.FieldsFunc(m, func(r rune) bool { return r == '/' })
	if len(segs) == 0 {
		return 0, ""
	}
	numeric := true
	for _, s := range segs {
		for _, r := range s {
			numeric = numeric && (isDigit(r) || r == '.' || r == ',' || r == ':' || r == '-')
		}
	}
	if numeric {
		return classifyNumber(m)
	}
	last := segs[len(segs)-1]
	switch {
	case strings.HasPrefix(m, "/") || strings.HasPrefix(m, "~/") || strings.HasPrefix(m, "./") || strings.HasPrefix(m, "../"),
		len(segs) >= 3,
		strings.Contains(segs[0], ".") && len(segs[0]) > 3, // github.com/x
		strings.HasSuffix(m, "/") && len(last) > 1,
		pathExtRE.MatchString(last):
		return EntityPath, m
	}
	return 0, ""
}

var pathExtRE = regexp.MustCompile(`^[\w@+-]*[A-Za-z_][\w@+-]*\.[A-Za-z0-9]{1,10}$|^\.[A-Za-z][\w.-]*$`)

// trimURL drops the punctuation a sentence puts after a URL, and a
// closing parenthesis that has no opening one inside it.
func trimURL(u string) string {
	for {
		t := strings.TrimRight(u, ".,;:!?'\"")
		if strings.HasSuffix(t, ")") && strings.Count(t, "(") < strings.Count(t, ")") {
			t = t[:len(t)-1]
		}
		if strings.HasSuffix(t, "]") && strings.Count(t, "[") < strings.Count(t, "]") {
			t = t[:len(t)-1]
		}
		if t == u {
			return u
		}
		u = t
	}
}

// RequiredEntities returns what a new summary written from previous and
// exchanges must still hold (SRD §10.2): every pinned fact (the state
// keeps them verbatim anyway; the summary restates them so that it never
// contradicts them), then the decisions, constraints and artifacts of the
// previous summary and of the exchanges, in order, without duplicates.
// What counts is what ExtractEntities finds: code blocks give their paths
// and URLs only, and questions and open items are not statements.
//
// The newest explicit decision wins: a decision or constraint that reads
// as a revision ("instead", "actually", "no longer", "switch to"…)
// replaces the earlier statements it shares a topic word with, or the
// decision just before it when it shares none; the replaced statements,
// and the artifacts found only in them, are not required. Artifacts and
// statements a pinned fact already holds are left out.
func RequiredEntities(pinned []string, previous string, exchanges []Exchange) []Entity {
	var out []Entity
	seen := map[string]bool{}
	var pinnedNorm []string
	for _, f := range pinned {
		f = strings.TrimSpace(f)
		e := Entity{Kind: EntityPinned, Text: f}
		if f == "" || seen[dedupKey(e)] {
			continue
		}
		seen[dedupKey(e)] = true
		pinnedNorm = append(pinnedNorm, normalize(f))
		out = append(out, e)
	}
	var x extractor
	x.text(previous)
	for _, ex := range exchanges {
		x.text(ex.User)
		x.text(ex.Assistant)
	}
	superseded := x.superseded()
	// An artifact found in a sentence still in force is required, even
	// when it also appears in a replaced one.
	live := map[string]bool{}
	for _, l := range x.out {
		if l.Kind.IsArtifact() && !superseded[l.sentence] {
			live[dedupKey(l.Entity)] = true
		}
	}
	for _, l := range x.out {
		k := dedupKey(l.Entity)
		if seen[k] || superseded[l.sentence] && (l.Kind.isStatement() || !live[k]) {
			continue
		}
		seen[k] = true
		n := normalize(l.Text)
		covered := false
		for _, p := range pinnedNorm {
			covered = covered || strings.Contains(p, n)
		}
		if !covered {
			out = append(out, l.Entity)
		}
	}
	return out
}

// superseded returns the sentences whose statement a later revision
// replaced.
func (x *extractor) superseded() map[int]bool {
	type stmt struct {
		sentence int
		e        Entity
		topic    map[string]bool
	}
	var stmts []stmt
	for _, l := range x.out {
		if l.Kind.isStatement() {
			stmts = append(stmts, stmt{l.sentence, l.Entity, nil})
		}
	}
	out := map[int]bool{}
	for j := range stmts {
		if !isRevision(stmts[j].e.Text) {
			continue
		}
		if stmts[j].topic == nil {
			stmts[j].topic = topicStems(stmts[j].e.Text)
		}
		shared := false
		for i := 0; i < j; i++ {
			if out[stmts[i].sentence] || stmts[i].sentence == stmts[j].sentence {
				continue
			}
			if stmts[i].topic == nil {
				stmts[i].topic = topicStems(stmts[i].e.Text)
			}
			for s := range stmts[i].topic {
				if stmts[j].topic[s] {
					out[stmts[i].sentence], shared = true, true
					break
				}
			}
		}
		if !shared {
			for i := j - 1; i >= 0; i-- {
				if stmts[i].e.Kind == EntityDecision && stmts[i].sentence != stmts[j].sentence {
					out[stmts[i].sentence] = true
					break
				}
			}
		}
	}
	return out
}

// revisionWords are substrings of every revisionRE match.
var revisionWords = []string{"instead", "actually", "no longer", "anymore", "rather than", "switch", "chang",
	"replac", "revert", "scrap", "supersed", "overrid", "second thought", "after all"}

// isRevision reports whether statement s replaces an earlier one.
func isRevision(s string) bool {
	s = strings.ToLower(s)
	for _, w := range revisionWords {
		if strings.Contains(s, w) {
			return revisionRE.MatchString(s)
		}
	}
	return false
}

// topicStems are the stems of s that name what it is about: its content
// stems less revision and polarity words, four letters or more.
func topicStems(s string) map[string]bool {
	out := map[string]bool{}
	stems, _ := contentStems(s)
	for _, st := range stems {
		if len(st) >= 4 && !topicNoise[st] {
			out[st] = true
		}
	}
	return out
}

var topicNoise = map[string]bool{}

func init() {
	for _, w := range strings.Fields("instead actually longer anymore rather switch change replace revert scrap supersede override second thought after always never only") {
		topicNoise[stem(w)] = true
	}
}

// MissingEntities returns the entities of required that summary does not
// hold, in order. Pinned facts and artifacts must appear as written, up
// to case, white space, punctuation and the spelling of a unit after a
// number ("30 seconds" is "30s"): "port 8081" does not hold "8080", nor
// does "internal/core/y.go" hold "internal/core/x.go". A decision or
// constraint may be reworded: its numbers must appear (RequiredEntities
// lists its other artifacts on their own), and one line of the summary
// must hold at least two thirds of its content words
// (compared by crude stems: "logged" is "log"), and a negation if it has
// one.
func MissingEntities(summary string, required []Entity) []Entity {
	if len(required) == 0 {
		return nil
	}
	norm := normalize(summary)
	var lines []map[string]bool // the stems of each line, built on demand
	var missing []Entity
	for _, e := range required {
		if !e.Kind.isStatement() {
			if !strings.Contains(norm, normalize(e.Text)) {
				missing = append(missing, e)
			}
			continue
		}
		if lines == nil {
			lines = summaryLineStems(summary)
		}
		if !holdsStatement(norm, lines, e.Text) {
			missing = append(missing, e)
		}
	}
	return missing
}

// summaryLineStems returns the set of content stems of each line of s,
// with negationKey in the set of a line that holds a negation.
func summaryLineStems(s string) []map[string]bool {
	var out []map[string]bool
	for _, line := range strings.Split(s, "\n") {
		st, neg := contentStems(line)
		if len(st) == 0 {
			continue
		}
		set := make(map[string]bool, len(st)+1)
		for _, w := range st {
			set[w] = true
		}
		if neg {
			set[negationKey] = true
		}
		out = append(out, set)
	}
	return out
}

// negationKey marks a negated line in its stem set; no stem has a space.
const negationKey = "not "

// isNegation reports whether a normalized token is a negation: not,
// never, no, nor, without, cannot, or the t of n't.
func isNegation(tok string) bool {
	switch tok {
	case "not", "never", "no", "nor", "without", "cannot", "t":
		return true
	}
	return false
}

// holdsStatement reports whether a summary (normalized as norm, with the
// stems of its lines) holds the statement text.
func holdsStatement(norm string, lines []map[string]bool, text string) bool {
	for _, tok := range strings.Fields(normalize(text)) {
		if isNumberToken(tok) && !strings.Contains(norm, " "+tok+" ") {
			return false
		}
	}
	stems, neg := contentStems(text)
	if len(stems) == 0 {
		return true
	}
	uniq := map[string]bool{}
	for _, s := range stems {
		uniq[s] = true
	}
	need := (2*len(uniq) + 2) / 3
	for _, set := range lines {
		if neg && !set[negationKey] {
			continue
		}
		n := 0
		for s := range uniq {
			if set[s] {
				n++
			}
		}
		if n >= need {
			return true
		}
	}
	return false
}

// normalize returns s in lower case as tokens of letters or digits,
// each surrounded by single spaces (" port 8080 "), so that a normalized
// entity is in a normalized summary exactly when its tokens appear there
// in a row. Letters and digits are separate tokens ("30s" is "30 s"), a
// thousands separator between digits is dropped ("1,000" is "1000"), and
// a unit after a number takes its canonical form ("30 seconds" is "30 s").
func normalize(s string) string {
	out := make([]byte, 1, len(s)+2)
	out[0] = ' '
	const (
		none = iota
		letters
		digits
	)
	cur, prev := none, none // the kind of the token being written, of the one before
	start := 1              // where the current token starts in out
	end := func() {
		if cur == none {
			return
		}
		if cur == letters && prev == digits {
			if c, ok := unitCanon[string(out[start:])]; ok {
				out = append(out[:start], c...)
			}
		}
		out = append(out, ' ')
		prev, cur, start = cur, none, len(out)
	}
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case '0' <= r && r <= '9' || r >= utf8.RuneSelf && unicode.IsDigit(r):
			if cur == letters {
				end()
			}
			cur = digits
			out = utf8.AppendRune(out, r)
		case 'a' <= r && r <= 'z':
			if cur == digits {
				end()
			}
			cur = letters
			out = append(out, byte(r))
		case 'A' <= r && r <= 'Z':
			if cur == digits {
				end()
			}
			cur = letters
			out = append(out, byte(r)+'a'-'A')
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsMark(r) && cur == letters):
			if cur == digits {
				end()
			}
			cur = letters
			out = utf8.AppendRune(out, unicode.ToLower(r))
		case (r == ',' || r == '_') && cur == digits && thousands(s[i+1:]):
			// 1,000 and 1_000 are 1000
		default:
			end()
		}
		i += size
	}
	end()
	return string(out)
}

func isNumberToken(tok string) bool {
	r, _ := utf8.DecodeRuneInString(tok)
	return unicode.IsDigit(r)
}

// thousands reports whether s starts with exactly three ASCII digits.
func thousands(s string) bool {
	return len(s) >= 3 && isDigit(rune(s[0])) && isDigit(rune(s[1])) && isDigit(rune(s[2])) &&
		(len(s) == 3 || !isDigit(rune(s[3])))
}

// dedupKey identifies an entity for deduplication: pinned facts,
// statements and artifacts are kept apart; within each, entities equal
// after normalization are one.
func dedupKey(e Entity) string {
	class := "a"
	switch {
	case e.Kind == EntityPinned:
		class = "p"
	case e.Kind.isStatement():
		class = "s"
	}
	return class + normalize(e.Text)
}

// contentStems returns the stems of the words of s that carry meaning
// (letter tokens that are not stop words or decision cues), and whether s
// holds a negation.
func contentStems(s string) (stems []string, negation bool) {
	for _, tok := range strings.Fields(normalize(s)) {
		negation = negation || isNegation(tok)
		if !isLetterToken(tok) || stopWords[tok] {
			continue
		}
		if st := stem(tok); st != "" {
			stems = append(stems, st)
		}
	}
	return stems, negation
}

func isLetterToken(tok string) bool {
	r, _ := utf8.DecodeRuneInString(tok)
	return unicode.IsLetter(r)
}

// stem is a crude, deterministic English stemmer: it strips one common
// suffix (-ies → y, -ing, -ed, -s), undoubles a final consonant, keeps at
// most five letters and drops a final e, so that "stored", "storing" and
// "store" are all "stor", "logged" and "log" are "log".
func stem(w string) string {
	r := []rune(w)
	n := len(r)
	switch {
	case n > 4 && string(r[n-3:]) == "ies":
		r = append(r[:n-3], 'y')
	case n > 5 && string(r[n-3:]) == "ing":
		r = r[:n-3]
	case n > 4 && string(r[n-2:]) == "ed":
		r = r[:n-2]
	case n > 3 && r[n-1] == 's' && r[n-2] != 's' && r[n-2] != 'u' && r[n-2] != 'i':
		r = r[:n-1]
	}
	if n := len(r); n >= 4 && r[n-1] == r[n-2] && !strings.ContainsRune("aeiouls", r[n-1]) {
		r = r[:n-1]
	}
	if len(r) > 5 {
		r = r[:5]
	}
	if n := len(r); n > 3 && r[n-1] == 'e' {
		r = r[:n-1]
	}
	return string(r)
}

// stopWords carry no topic: function words, and the cue words of
// decisions and constraints (a summary files decisions under a heading
// rather than repeating "we decided"). Negations and "always", "never",
// "only" are kept: they carry meaning.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the and or but if then than so of to in on at by for from with without into onto
		as is are was were be been being am do does did done doing have has had having it its this that these those
		there here which who whom whose what when where why how i me my mine we us our ours you your yours he him his
		she her hers they them their theirs s t ll re ve d m let lets just also very really too can could would will
		shall should must may might need needs about over under up down out off again further once all any both each
		few more most other some such own same via per use used uses using go going went decide decided decides
		deciding decision decisions chose choose chosen choosing agree agreed agreement settle settled opt opted pick
		picked select selected plan planned now from please yes ok okay`) {
		stopWords[w] = true
	}
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func hasDigit(s string) bool {
	for _, r := range s {
		if isDigit(r) {
			return true
		}
	}
	return false
}

func hasAlnum(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

// clipBytes cuts s to at most n bytes on a rune boundary.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
