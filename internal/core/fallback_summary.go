package core

import (
	"regexp"
	"slices"
	"strings"
)

// Exchange is one user turn as the summarizer sees it: what the user said
// and what the assistant answered.
type Exchange struct {
	User, Assistant string
}

// FallbackSummaryMaxBytes bounds the deterministic fallback summary.
const FallbackSummaryMaxBytes = 6000

// The sections of a fallback summary, in the order of SummaryHeadings:
// the summary has the headings a model's has (summarization contract
// v2.2, §9).
const (
	secFacts     = iota // facts and constraints
	secGoals            // goals and preferences
	secDecisions        // decisions made
	secOpen             // open items and pending commitments
	secArtifacts        // artifacts no other line holds
	numSections
)

// sectionCaps bounds each section's lines: past its cap a section drops
// its oldest lines, so no section grows with every turn.
var sectionCaps = [numSections]int{secFacts: 50, secGoals: 20, secDecisions: 30, secOpen: 8, secArtifacts: 60}

// trimOrder is the order in which sections give up their oldest lines
// when the whole is over FallbackSummaryMaxBytes: what is done or
// recoverable from the transcript first, decisions last.
var trimOrder = [numSections]int{secOpen, secArtifacts, secGoals, secFacts, secDecisions}

// FallbackSummary is the deterministic summarizer the librarian uses when
// no model is configured or the model fails (SRD §10.3). It rewrites the
// summary from the previous one and the new exchanges, as the
// summarization contract (v2.2, §8–9) asks of a model, without one:
//
//   - the sections are those of a model's summary (SummaryHeadings):
//     facts and constraints, goals and preferences, decisions, open items
//     and key artifacts;
//   - what the user states about themselves ("I live in Lyon", "my
//     sister is a nurse") or that names something exact ("the deploy
//     target is eu-west-1") is a fact, what they want or prefer a goal,
//     both restated in the third person ("The user lives in Lyon"); a
//     statement of the assistant's about the world that names something
//     exact ("the database listens on port 5433") is a fact as written;
//     a decision or constraint sentence of either side is kept as
//     written; the assistant's commitments ("I'll send the draft") are
//     open items;
//   - a decision or constraint a later revision replaced is dropped (the
//     most recent explicit decision wins), and a line said again moves to
//     the end instead of repeating;
//   - every artifact (path, URL, symbol, id, number, short quote; see
//     ExtractEntities) no other line holds is listed, a number, id or
//     quote with the words around it, so that it means something; the
//     assistant's numbers and quotes only within a line kept for itself;
//   - no dialogue: no line of what either side said, no excerpt of the
//     last exchange (the contract forbids verbatim dialogue; the
//     transcript and the verbatim window keep it);
//   - bounded: each section keeps at most its cap of lines (sectionCaps)
//     and the whole at most FallbackSummaryMaxBytes, the oldest lines
//     going first (open items, then artifacts, goals, facts, decisions).
//
// Lines of a previous summary are kept under their section: a model's
// summary (its headings name the sections) and this function's own
// output alike; lines of the older labelled format ("- decision: …",
// "- user said: …") are read back into the sections. Pinned facts are not
// part of the summary: the state keeps them verbatim.
func FallbackSummary(previous string, exchanges []Exchange) string {
	s := newSummaryBuilder(previous, exchanges)
	s.readPrevious(previous)
	for _, ex := range exchanges {
		s.readText(ex.User, userSubject, true)
		s.readText(ex.Assistant, "The assistant", false)
	}
	s.addArtifacts()
	return s.fit()
}

// userSubject names the user in the third person.
const userSubject = "The user"

// summaryBuilder gathers a fallback summary's lines by section.
type summaryBuilder struct {
	lines [numSections][]string
	// where maps a line's key (normalize of its text) to where it is, so
	// that a line said again moves instead of repeating.
	where map[string]placed
	// superseded holds the keys (dedupKey) of statements a later revision
	// replaced (RequiredEntities leaves them out).
	superseded map[string]bool
	// artifacts are those found, in order, with the sentence of each.
	artifacts []foundArtifact
	seenArt   map[string]bool
}

// placed is a line and its section.
type placed struct {
	sec  int
	line string
}

type foundArtifact struct {
	e        Entity
	sentence string
}

func newSummaryBuilder(previous string, exchanges []Exchange) *summaryBuilder {
	s := &summaryBuilder{where: map[string]placed{}, superseded: map[string]bool{}, seenArt: map[string]bool{}}
	// A statement in a sentence a later revision replaced is dropped,
	// unless it is also said in a sentence still in force (the rule of
	// RequiredEntities). A statement the previous summary kept was in
	// force when it was written: only a revision among the new exchanges
	// can replace one, and without one the extractor need not run.
	revised := false
	for _, ex := range exchanges {
		revised = revised || isRevision(ex.User) || isRevision(ex.Assistant)
	}
	if !revised {
		return s
	}
	var x extractor
	x.text(previous)
	for _, ex := range exchanges {
		x.text(ex.User)
		x.text(ex.Assistant)
	}
	replaced := x.superseded()
	live := map[string]bool{}
	for _, l := range x.out {
		if l.Kind.isStatement() && !replaced[l.sentence] {
			live[dedupKey(l.Entity)] = true
		}
	}
	for _, l := range x.out {
		if l.Kind.isStatement() && !live[dedupKey(l.Entity)] {
			s.superseded[dedupKey(l.Entity)] = true
		}
	}
	return s
}

// add puts line (a bullet's text) at the end of section sec; a line with
// the same text anywhere moves there.
func (s *summaryBuilder) add(sec int, text string) {
	text = clip(oneLine(text), 300)
	key := normalize(text)
	if strings.TrimSpace(key) == "" {
		return
	}
	if old, ok := s.where[key]; ok {
		l := s.lines[old.sec]
		if i := slices.Index(l, old.line); i >= 0 {
			s.lines[old.sec] = append(l[:i:i], l[i+1:]...)
		}
	}
	line := "- " + text
	s.where[key] = placed{sec, line}
	s.lines[sec] = append(s.lines[sec], line)
	if over := len(s.lines[sec]) - sectionCaps[sec]; over > 0 {
		for _, l := range s.lines[sec][:over] {
			delete(s.where, normalize(l[2:]))
		}
		s.lines[sec] = s.lines[sec][over:]
	}
}

// statement adds a decision or constraint sentence, unless a later one
// replaced it.
func (s *summaryBuilder) statement(k EntityKind, text string) {
	text = strings.TrimSpace(text)
	if s.superseded[dedupKey(Entity{Kind: k, Text: clipBytes(strings.TrimRight(text, ".;: "), StatementMaxBytes)})] {
		return
	}
	if k == EntityDecision {
		s.add(secDecisions, text)
	} else {
		s.add(secFacts, text)
	}
}

// sectionOf returns the section a heading of a summary names, or -1 for
// the sections of the older format that held dialogue.
func sectionOf(heading string) int {
	h := strings.ToLower(heading)
	switch {
	case strings.Contains(h, "what the user said"), strings.Contains(h, "last exchange"):
		return -1
	case strings.Contains(h, "goal"), strings.Contains(h, "preference"):
		return secGoals
	case strings.Contains(h, "decision"):
		return secDecisions
	case strings.Contains(h, "open"), strings.Contains(h, "pending"), strings.Contains(h, "todo"):
		return secOpen
	case strings.Contains(h, "artifact"), strings.Contains(h, "reference"):
		return secArtifacts
	}
	return secFacts
}

// readPrevious keeps the lines of the previous summary in their sections.
func (s *summaryBuilder) readPrevious(previous string) {
	sec := secFacts
	for _, line := range strings.Split(previous, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		marker := bulletRE.FindString(line)
		body := strings.TrimSpace(line[len(marker):])
		if strings.HasPrefix(marker, "#") {
			sec = sectionOf(body)
			continue
		}
		if label, rest, ok := strings.Cut(body, ": "); ok && marker != "" {
			switch strings.ToLower(label) {
			case "decision":
				s.statement(EntityDecision, rest)
				continue
			case "constraint":
				s.statement(EntityConstraint, rest)
				continue
			case "fact":
				s.add(secFacts, rest)
				continue
			case "artifact":
				s.artifact(Entity{Kind: EntityPath, Text: rest}, rest)
				continue
			case "user said":
				s.readText(rest, userSubject, true)
				continue
			case "user", "assistant":
				continue // the older format's excerpt of the last exchange
			}
		}
		switch {
		case sec < 0:
		case sec == secArtifacts:
			s.add(secArtifacts, body)
			for _, e := range ExtractEntities(body) {
				s.seenArt[dedupKey(e)] = true
			}
		case sec == secDecisions || sec == secFacts:
			// A statement a revision among the exchanges replaced goes
			// (statements of either kind share their key).
			if s.superseded[dedupKey(Entity{Kind: EntityDecision, Text: clipBytes(strings.TrimRight(body, ".;: "), StatementMaxBytes)})] {
				continue
			}
			s.add(sec, body)
		default:
			s.add(sec, body)
		}
	}
}

var (
	// escapedBreakRE is a line break or tab written out as text ("\n"),
	// as some exports hold them: it separates words.
	escapedBreakRE = regexp.MustCompile(`\\[nrt]`)
	// factRE marks a first-person statement of something lasting about
	// the speaker: where they live or work, what they have or are, what
	// is theirs, what they (as a team) use or do.
	factRE = regexp.MustCompile(`(?i)\b(?:` +
		`i(?:'m| am| was)\s+(?:a|an|the|from|in|at|based|married|single|engaged|allergic|vegan|vegetarian|retired|\d)\b|` +
		`i(?:'ve| have| had| own| owned)\s+(?:a|an|two|three|four|five|\d|been|lived|worked|got)\b|` +
		`i\s+(?:live|lived|work|worked|moved|grew up|studied|study|teach|taught|was born|got married|joined|started|founded|use|used)\b|` +
		// something the speaker did: an event of their life
		`i\s+(?:just\s+|finally\s+|recently\s+|also\s+)?(?:\w+ed|went|got|made|took|saw|met|bought|did|ran|won|lost|left|began|came|gave|found|wrote|read|built|spent|told|felt|heard|kept|paid|sold|sent|became|drove|flew|ate|swam|sang|drew)\b|` +
		`my\s+(?:\w+\s+){0,2}(?:is|are|was|were|has|have|lives|works|wants|needs)\b|` +
		`(?:we|our\s+\w+)\s+(?:use|run|have|live|work|are|is)\b|we're\b)|` +
		`^(?:we|our\s+\w+)\s+\w+`)
	// nameRE is a speaker saying their name.
	nameRE = regexp.MustCompile(`\bI(?:'m| am) [A-Z][a-z]+\b|\b[Mm]y name is\b`)
	// goalRE marks what the speaker wants, plans or prefers.
	goalRE = regexp.MustCompile(`(?i)\b(?:i|we)(?:'d| would)? (?:really |also |still )?(?:want|wanna|like to|love to|need to|prefer|hope|plan|intend|aim|am planning|'m planning|am trying|'m trying|am hoping|'m hoping|am going to|'m going to|love|like|enjoy|hate|dislike|don't like|can't stand)\b|` +
		`\bmy (?:goal|plan|dream|aim|favou?rite|preference)\b|\bthe goal is\b`)
	// openRE marks a commitment or something left to do.
	openRE = regexp.MustCompile(`(?i)^(?:i|we)(?:'ll| will| am going to|'m going to| are going to| shall)\b|` +
		`\b(?:todo|to-do|next step|follow up|follow-up|remind me|still need to|not done yet|left to do)\b`)

	// The expressions above with their cues (cued): every match holds
	// one of them, in the text as cueFold folds it.
	factCues = cued{factRE, []string{"i ", "i'", "my ", "we ", "we'", "our "}}
	nameCues = cued{nameRE, []string{"i'm ", "i am ", "my name is"}}
	goalCues = cued{goalRE, []string{"want", "wanna", "like", "love", "need to", "prefer", "hope", "hoping", "plan",
		"intend", "aim", "trying", "going to", "enjoy", "hate", "can't stand", "my ", "the goal is"}}
	openCues = cued{openRE, []string{"'ll", " will", "going to", " shall", "todo", "to-do", "next step", "follow up",
		"follow-up", "remind me", "still need to", "not done yet", "left to do"}}
)

// readText reads the sentences of one side of an exchange: statements,
// facts and goals of the user (restated as who), commitments, and the
// artifacts of every sentence.
func (s *summaryBuilder) readText(text, who string, user bool) {
	if strings.Contains(text, `\`) {
		text = escapedBreakRE.ReplaceAllString(text, " ")
	}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = !fence
			continue
		}
		if trimmed == "" {
			continue
		}
		if fence {
			for _, e := range ExtractEntities(trimmed) {
				if e.Kind == EntityPath || e.Kind == EntityURL {
					s.artifact(e, trimmed)
				}
			}
			continue
		}
		body := trimmed[len(bulletRE.FindString(trimmed)):]
		for _, sentence := range splitSentences(body) {
			s.sentence(sentence, who, user)
		}
	}
}

func (s *summaryBuilder) sentence(sentence, who string, user bool) {
	question := strings.HasSuffix(strings.TrimRight(sentence, `"'”’)] `), "?")
	entities := ExtractEntities(sentence)
	folded := cueFold(sentence)
	if k := statementKind(sentence, folded); k != 0 {
		s.statement(k, sentence)
	} else if !question {
		switch {
		case user && goalCues.match(sentence, folded):
			s.add(secGoals, thirdPerson(sentence, who))
		case user && (factCues.match(sentence, folded) || nameCues.match(sentence, folded)):
			s.add(secFacts, thirdPerson(sentence, who))
		case user && len(strings.Fields(sentence)) >= 4 && namesExact(entities, false):
			// A statement of the user's that names something exact
			// ("The deploy target is eu-west-1.") is a fact as said.
			s.add(secFacts, thirdPerson(sentence, who))
		case !user && len(strings.Fields(sentence)) >= 5 && !strings.ContainsAny(sentence, "\"“") &&
			namesExact(entities, true) && !speakerRE.MatchString(sentence):
			// The assistant stating something exact about the world
			// ("The staging database listens on port 5433."), not about
			// itself or the user, nor quoting.
			s.add(secFacts, sentence)
		case openCues.match(sentence, folded) && len(strings.Fields(sentence)) >= 4:
			s.add(secOpen, thirdPerson(sentence, who))
		}
	}
	for _, e := range entities {
		// The assistant's numbers and quotes are mostly its own framing
		// ("5 words", the user's words quoted back): they count only in
		// a line kept for itself (a decision, an open item).
		if e.Kind.IsArtifact() && (user || e.Kind != EntityNumber && e.Kind != EntityQuote) {
			s.artifact(e, sentence)
		}
	}
}

func (s *summaryBuilder) artifact(e Entity, sentence string) {
	if k := dedupKey(e); !s.seenArt[k] {
		s.seenArt[k] = true
		s.artifacts = append(s.artifacts, foundArtifact{e, sentence})
	}
}

// addArtifacts lists the artifacts no other line holds: a number or a
// quote with the words around it, the others as written.
func (s *summaryBuilder) addArtifacts() {
	var held strings.Builder
	for sec, lines := range s.lines {
		if sec == secArtifacts {
			continue
		}
		for _, l := range lines {
			held.WriteString(l + "\n")
		}
	}
	norm := normalize(held.String())
	for _, a := range s.artifacts {
		if strings.Contains(norm, normalize(a.e.Text)) {
			continue
		}
		line := a.e.Text
		if (a.e.Kind == EntityNumber || a.e.Kind == EntityQuote || a.e.Kind == EntityID) && a.sentence != a.e.Text {
			if ctx := around(a.sentence, a.e.Text, 6); ctx != "" && ctx != a.e.Text {
				line += " (" + ctx + ")"
			}
		}
		s.add(secArtifacts, line)
	}
}

// around returns sentence from up to n words before what to up to n
// words after it, marked "…" where cut; "" if what is not in sentence.
func around(sentence, what string, n int) string {
	i := strings.Index(sentence, what)
	if i < 0 {
		return ""
	}
	// The starts of the words before what, and the ends of those after.
	var starts []int
	for j := 0; j < i; j++ {
		if sentence[j] != ' ' && (j == 0 || sentence[j-1] == ' ') {
			starts = append(starts, j)
		}
	}
	start := 0
	if len(starts) > n {
		start = starts[len(starts)-n]
	}
	end, words := i+len(what), 0
	for j := end; j < len(sentence); j++ {
		if sentence[j] != ' ' && (j+1 == len(sentence) || sentence[j+1] == ' ') {
			if words++; words == n {
				end = j + 1
				break
			}
		}
		end = j + 1
	}
	out := strings.TrimSpace(sentence[start:end])
	if start > 0 {
		out = "…" + out
	}
	if end < len(sentence) {
		out += "…"
	}
	return strings.TrimRight(out, ".,;:")
}

var (
	// The second person, in what the assistant says to the user.
	secondPersonRE = regexp.MustCompile(`\b(?:[Yy]ou(?:rs|rself|r)?)\b`)
	// The first person, as a subject with its verb, or alone.
	firstPersonVerbRE = regexp.MustCompile(`\b(?:I|i)(?:'m| am)\b|\bI(?:'ve| have)\b|\bI was\b|\bI'd\b|\bI'll\b|` +
		`\bI (?:do not|don't)\b|\bI (?:(?:really|also|just|usually|always|never|still|often|actually|now|currently) )?[a-z]+\b`)
	firstPersonRE = regexp.MustCompile(`\b(?:[Mm]y|[Mm]e|[Mm]ine|[Mm]yself)\b`)
	// pastForms are verbs in the past that do not end in -ed.
	pastForms = wordSet(`went got made took saw met bought did ran won lost left began came gave found wrote read
		built spent told felt heard kept paid sold sent became drove flew ate swam sang drew had was were thought
		knew brought caught taught said`)
	// modals take no -s in the third person.
	modals = wordSet(`will would can could should must might may shall did didn't can't won't wouldn't couldn't
		shouldn't mustn't`)
)

// thirdPerson restates sentence, said by who ("The user"), in the third
// person: "I live in Lyon" → "The user lives in Lyon", "my sister" → "the
// user's sister". Words other than the first person stay as written.
func thirdPerson(sentence, who string) string {
	lower := strings.ToLower(who[:1]) + who[1:]
	out := firstPersonVerbRE.ReplaceAllStringFunc(sentence, func(m string) string {
		switch strings.ToLower(m) {
		case "i'm", "i am":
			return lower + " is"
		case "i've", "i have":
			return lower + " has"
		case "i was":
			return lower + " was"
		case "i'd":
			return lower + " would"
		case "i'll":
			return lower + " will"
		case "i do not", "i don't":
			return lower + " does not"
		}
		words := strings.Fields(m)[1:]
		verb := words[len(words)-1]
		if !modals[verb] && !pastForms[verb] && !strings.HasSuffix(verb, "ed") {
			words[len(words)-1] = thirdPersonVerb(verb)
		}
		return lower + " " + strings.Join(words, " ")
	})
	out = firstPersonRE.ReplaceAllStringFunc(out, func(m string) string {
		switch strings.ToLower(m) {
		case "my", "mine":
			return lower + "'s"
		}
		return lower
	})
	if who != userSubject {
		out = secondPersonRE.ReplaceAllStringFunc(out, func(m string) string {
			if strings.HasPrefix(strings.ToLower(m), "your") {
				return "the user's"
			}
			return "the user"
		})
	}
	if strings.HasPrefix(out, lower) {
		out = who + out[len(lower):]
	}
	return out
}

// thirdPersonVerb inflects a verb in the present for he or she.
func thirdPersonVerb(v string) string {
	switch v {
	case "have":
		return "has"
	case "be":
		return "is"
	case "do", "go":
		return v + "es"
	}
	switch {
	case strings.HasSuffix(v, "s"), strings.HasSuffix(v, "x"), strings.HasSuffix(v, "z"),
		strings.HasSuffix(v, "ch"), strings.HasSuffix(v, "sh"):
		return v + "es"
	case len(v) > 1 && strings.HasSuffix(v, "y") && !strings.ContainsRune("aeiou", rune(v[len(v)-2])):
		return v[:len(v)-1] + "ies"
	}
	return v + "s"
}

// fit renders the sections, dropping the oldest lines in trimOrder until
// the summary is at most FallbackSummaryMaxBytes.
func (s *summaryBuilder) fit() string {
	// No line holds a newline (add makes each one line), so the rendered
	// length is the sum of the lines' and headings' plus newlines: it is
	// kept up to date as lines go, and the summary rendered once.
	size := 0
	for sec, lines := range s.lines {
		if len(lines) > 0 {
			size += len("## "+SummaryHeadings[sec]) + 1
		}
		for _, l := range lines {
			size += len(l) + 1
		}
	}
	for _, sec := range trimOrder {
		for size-1 > FallbackSummaryMaxBytes && len(s.lines[sec]) > 0 {
			size -= len(s.lines[sec][0]) + 1
			if s.lines[sec] = s.lines[sec][1:]; len(s.lines[sec]) == 0 {
				size -= len("## "+SummaryHeadings[sec]) + 1
			}
		}
	}
	var b strings.Builder
	for sec, lines := range s.lines {
		if len(lines) == 0 {
			continue
		}
		b.WriteString("## " + SummaryHeadings[sec] + "\n")
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return clip(strings.TrimRight(b.String(), "\n"), FallbackSummaryMaxBytes)
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

// statementKind is classifyStatement behind its cheap filter (mayDecide;
// folded is cueFold(s)).
func statementKind(s, folded string) EntityKind {
	if !hasCue(folded, cueWords) {
		return 0
	}
	return classifyStatement(s)
}

// speakerRE finds the first or second person: a sentence about the
// speakers, not the world.
var speakerRE = regexp.MustCompile(`(?i)\b(?:i|i'm|i've|i'll|i'd|me|my|you|your|you're|yours)\b`)

// namesExact reports whether entities (a sentence's) name something
// exact: a path, URL, symbol or id, or, with numbers, a number of two
// digits or more.
func namesExact(entities []Entity, numbers bool) bool {
	for _, e := range entities {
		switch e.Kind {
		case EntityPath, EntityURL, EntitySymbol, EntityID:
			return true
		case EntityNumber:
			digits := 0
			for _, c := range e.Text {
				if '0' <= c && c <= '9' {
					digits++
				}
			}
			if numbers && digits >= 2 {
				return true
			}
		}
	}
	return false
}
