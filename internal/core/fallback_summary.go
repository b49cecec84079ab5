package core

import "strings"

// Exchange is one user turn as the summarizer sees it: what the user said
// and what the assistant answered.
type Exchange struct {
	User, Assistant string
}

// FallbackSummaryMaxBytes bounds the deterministic fallback summary.
const FallbackSummaryMaxBytes = 6000

// FallbackSummary is the deterministic summarizer the librarian uses when
// no model is configured or the model fails (SRD §10.3). It rewrites the
// summary from the previous one and the new exchanges: it keeps every
// artifact (paths, URLs, symbols, ids, numbers, short quotes; see
// ExtractEntities), every decision and constraint sentence, the other
// lines of a previous summary written by a model (as facts), and a short
// line of what the user said in each turn; it appends an excerpt of the
// last exchange, and trims to FallbackSummaryMaxBytes, dropping the
// oldest lines first (user lines, then facts, then artifacts and
// decisions). Pinned facts are not part of the summary: the state keeps
// them verbatim.
func FallbackSummary(previous string, exchanges []Exchange) string {
	var statements, facts, artifacts, said, excerpt []string
	seen := map[string]bool{}
	add := func(list *[]string, key, line string) {
		if !seen[key] {
			seen[key] = true
			*list = append(*list, line)
		}
	}
	addEntity := func(e Entity) {
		switch {
		case e.Kind.isStatement():
			add(&statements, dedupKey(e), "- "+e.Kind.String()+": "+clip(e.Text, 240))
		case e.Kind.IsArtifact():
			add(&artifacts, dedupKey(e), "- artifact: "+clip(e.Text, 120))
		}
	}
	// Lines of the previous summary in this function's format are kept
	// as they are; the others (a summary a model wrote) are read for
	// their entities, and kept as facts.
	var foreign []string
	for _, line := range strings.Split(previous, "\n") {
		line = strings.TrimSpace(line)
		label, rest, _ := strings.Cut(line, ": ")
		switch label {
		case "- decision", "- constraint":
			add(&statements, dedupKey(Entity{Kind: EntityDecision, Text: rest}), line)
		case "- artifact":
			add(&artifacts, dedupKey(Entity{Kind: EntityPath, Text: rest}), line)
		case "- user said":
			add(&said, "u"+line, line)
		case "- fact":
			add(&facts, "f"+normalize(rest), line)
		case "- user", "- assistant":
			// the previous last exchange, folded already
		default:
			if line != "" && !fallbackHeadings[line] {
				foreign = append(foreign, line)
			}
		}
	}
	if len(foreign) > 0 {
		for _, e := range ExtractEntities(strings.Join(foreign, "\n")) {
			addEntity(e)
		}
		for _, line := range foreign {
			if h := bulletRE.FindString(line); strings.HasPrefix(h, "#") {
				continue
			}
			body := strings.TrimSpace(line[len(bulletRE.FindString(line)):])
			n := normalize(body)
			if n != " " && !seen["s"+n] {
				add(&facts, "f"+n, "- fact: "+clip(oneLine(body), 240))
			}
		}
	}
	for _, ex := range exchanges {
		add(&said, "u- user said: "+clip(oneLine(ex.User), 200), "- user said: "+clip(oneLine(ex.User), 200))
		for _, text := range []string{ex.User, ex.Assistant} {
			for _, e := range ExtractEntities(text) {
				addEntity(e)
			}
		}
	}
	if n := len(exchanges); n > 0 {
		last := exchanges[n-1]
		excerpt = append(excerpt, "- user: "+clip(oneLine(last.User), 300), "- assistant: "+clip(oneLine(last.Assistant), 300))
	}
	return fitSummary(statements, facts, artifacts, said, excerpt)
}

// fitSummary renders the sections, dropping the oldest lines (user lines,
// then facts, then artifacts and decisions) until the summary is at most
// FallbackSummaryMaxBytes, and cuts it if they are all dropped.
func fitSummary(statements, facts, artifacts, said, excerpt []string) string {
	// While no line is empty or holds a newline, the rendered length is
	// the sum of the lines' and headings' (render trims only the last
	// newline): it is kept up to date as lines are dropped, and the
	// summary rendered once, not once per line dropped (hundreds of
	// renders of a long summary for a fold of many turns).
	lists := []*[]string{&statements, &facts, &artifacts, &said, &excerpt}
	headings := []string{headingStatements, headingFacts, headingArtifacts, headingSaid, headingLast}
	size, plain := 0, true
	for i, l := range lists {
		if len(*l) > 0 {
			size += len(headings[i]) + 1
		}
		for _, line := range *l {
			size += len(line) + 1
			plain = plain && line != "" && !strings.Contains(line, "\n")
		}
	}
	drop := func(l *[]string, heading string) {
		size -= len((*l)[0]) + 1
		if *l = (*l)[1:]; len(*l) == 0 {
			size -= len(heading) + 1
		}
	}
	for plain && size-1 > FallbackSummaryMaxBytes {
		switch {
		case len(said) > 0:
			drop(&said, headingSaid)
		case len(facts) > 0:
			drop(&facts, headingFacts)
		case len(artifacts) > 0 && len(artifacts) >= len(statements):
			drop(&artifacts, headingArtifacts)
		case len(statements) > 0:
			drop(&statements, headingStatements)
		default:
			plain = false
		}
	}
	for {
		out := render(statements, facts, artifacts, said, excerpt)
		if len(out) <= FallbackSummaryMaxBytes {
			return out
		}
		switch {
		case len(said) > 0:
			said = said[1:]
		case len(facts) > 0:
			facts = facts[1:]
		case len(artifacts) > 0 && len(artifacts) >= len(statements):
			artifacts = artifacts[1:]
		case len(statements) > 0:
			statements = statements[1:]
		default:
			return clip(out, FallbackSummaryMaxBytes)
		}
	}
}

// The section headings of FallbackSummary, in order.
const (
	headingStatements = "## Decisions and constraints"
	headingFacts      = "## Facts"
	headingArtifacts  = "## Key artifacts"
	headingSaid       = "## What the user said"
	headingLast       = "## Last exchange"
)

var fallbackHeadings = map[string]bool{headingStatements: true, headingFacts: true, headingArtifacts: true,
	headingSaid: true, headingLast: true}

func render(statements, facts, artifacts, said, excerpt []string) string {
	var b strings.Builder
	section := func(heading string, lines []string) {
		if len(lines) == 0 {
			return
		}
		b.WriteString(heading + "\n")
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	section(headingStatements, statements)
	section(headingFacts, facts)
	section(headingArtifacts, artifacts)
	section(headingSaid, said)
	section(headingLast, excerpt)
	return strings.TrimRight(b.String(), "\n")
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
