package core

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/golden"
	"github.com/contextinfinity/ctxinf/messages"
)

// mayDecide must never reject a text that decisionRE or constraintRE
// matches.
func TestMayDecideIsNecessary(t *testing.T) {
	t.Parallel()
	words := []string{"we", "will", "We'll", "DECIDED", "must", "not", "Never", "always", "don't", "do",
		"prefers", "deadline", "Requirement", "constraint", "agreed", "let's", "should", "the", "plan", "is",
		"use", "go", "with", "I'm", "going", "to", "switch", "Only", "avoid", "at", "most", "from", "now", "on",
		"x1", "mustard", "undecided", "ſ", "muſt", "K", "’", ".", "\n", ",", "'"}
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
		if l := strings.ToLower(s); decisionRE.MatchString(l) || constraintRE.MatchString(l) {
			matched++
			if !mayDecide(s) {
				t.Fatalf("mayDecide(%q) = false, but a cue matches", s)
			}
		}
	}
	if matched < 100 {
		t.Fatalf("%d generated texts matched a cue; the test proves little", matched)
	}
	if mayDecide("the weather is nice today") {
		t.Error("mayDecide on text with no decision word = true, want false")
	}
}

// conversationTemplates are the lines a generated conversation is made
// of: facts and goals of the user, decisions and their revisions,
// constraints, artifacts, chit-chat, questions, escaped line breaks.
var conversationTemplates = []Exchange{
	{"I live in {a} and I work as a nurse at {b} hospital.", "Good to know you work at {b}."},
	{"My sister {a} is a teacher in {b}.", "Nice, a teacher in {b}."},
	{"I want to run a marathon in {a} next year.", "I'll draft a training plan for {a}."},
	{"We decided to deploy to eu-west-{n} instead of us-east-1.", "Noted: eu-west-{n}."},
	{"Let's go with PostgreSQL {n} for the ledger.", "PostgreSQL {n} it is."},
	{"Actually, switch to SQLite for the ledger.", "Switched the ledger to SQLite."},
	{"The API must never return more than {n} items per page.", "Understood: at most {n} items."},
	{"Put the config in config/{a}.yaml and the key in KEY_{n}.", "See https://example.com/docs/{n} for the format."},
	{"haha that's funny", "Glad you liked it!"},
	{"What time is it in {a}?", "It is about {n}:00 there."},
	{"ok\\nYou said the order is {n}\\nright?", "Yes, order {n} ships on Friday."},
	{"I prefer short answers, please.", "Sure."},
	{"The meeting with {a} is on 2024-05-{n} at 10:30.", "I'll remind you on 2024-05-{n}."},
}

var cities = []string{"Lyon", "Porto", "Oslo", "Kyoto", "Quito", "Tunis", "Riga", "Perth"}

// generatedExchange is exchange i of a generated conversation.
func generatedExchange(r *rand.Rand) Exchange {
	t := conversationTemplates[r.IntN(len(conversationTemplates))]
	fill := strings.NewReplacer("{n}", fmt.Sprint(10+r.IntN(89)), "{a}", cities[r.IntN(len(cities))],
		"{b}", cities[r.IntN(len(cities))])
	return Exchange{User: fill.Replace(t.User), Assistant: fill.Replace(t.Assistant)}
}

// Over a 1,000-turn conversation folded turn by turn, with facts pinned,
// edited and unpinned along the way: the summary stays within its
// budget and each section within its cap, holds no dialogue, and every
// pinned fact is in every context the branch assembles (SRD §20: no
// pinned fact lost).
func TestFallbackSummaryProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	var b Branch
	clock := t0
	n := 0
	newID := func(prefix string) string { n++; return fmt.Sprintf("%s%d", prefix, n) }
	texts := map[messages.TurnID]Exchange{}
	var pending []Effect
	apply := func(evs []messages.BranchEvent, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			effs, err := b.Apply(ev)
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, effs...)
		}
	}
	apply(b.Create(messages.BranchCreated{Session: id[messages.SessionID]("se"), Branch: id[messages.BranchID]("b"), At: clock}))
	lim := PinLimits{}.orDefault()
	pinned := 0
	for turn := range 1000 {
		clock = clock.Add(time.Minute)
		switch k := r.IntN(40); {
		case k == 0 || pinned < 2:
			apply(b.Pin(fmt.Sprintf("pinned fact %d: the budget is %d EUR", turn, r.IntN(1000)), lim, clock))
			pinned++
		case k == 1 && len(b.LivePins()) > 0:
			live := b.LivePins()
			apply(b.Unpin(live[r.IntN(len(live))].ID, clock))
		case k == 2 && len(b.LivePins()) > 0:
			live := b.LivePins()
			apply(b.EditPin(live[r.IntN(len(live))].ID, fmt.Sprintf("edited fact %d", turn), lim, clock))
		}
		tid := id[messages.TurnID](newID("t"))
		step := id[messages.StepID](newID("s"))
		texts[tid] = generatedExchange(r)
		apply(b.Submit(tid, clock))
		apply(b.Start(tid, step, clock))
		apply(b.Finalize(tid, step, id[messages.NodeID](newID("r")), messages.StepOutcome{Kind: messages.OutcomeCompleted}, 10, 10, clock))
		for len(pending) > 0 {
			eff := pending[0]
			pending = pending[1:]
			sum, ok := eff.(Summarize)
			if !ok || sum.Epoch != b.Epoch {
				continue
			}
			var ex []Exchange
			for _, tt := range sum.Turns {
				ex = append(ex, texts[tt])
			}
			summary := FallbackSummary(b.State.Summary, ex)
			checkFallbackSummary(t, summary)
			apply(b.Commit(messages.StateCheckpoint{ID: id[messages.StateID](newID("st")), Seq: b.State.Seq + 1,
				Summary: summary, Pinned: b.State.Pinned}, sum.Turns, sum.Epoch, clock))
		}
		ctx, _ := Assemble(AssembleInput{Pinned: b.State.Pinned, Summary: b.State.Summary,
			User: messages.Message{Role: messages.RoleUser, RenderedText: "next"}},
			Budget{ContextLimit: 32768, ResponseReserve: 4096, SafetyMargin: 600, RetrievalMax: 6000}, quarterRunes)
		for _, p := range b.LivePins() {
			if !slices.Contains(ctx.PinnedFacts, p.Fact) {
				t.Fatalf("turn %d: pinned fact %q is not in the assembled context (pinned: %q)", turn, p.Fact, ctx.PinnedFacts)
			}
		}
	}
	if b.State.Seq < 900 {
		t.Fatalf("%d commits over 1,000 turns: the test folded too little", b.State.Seq)
	}
	t.Logf("final summary (%d bytes):\n%s", len(b.State.Summary), b.State.Summary)
}

// checkFallbackSummary fails t unless summary keeps the contract's shape.
func checkFallbackSummary(t *testing.T, summary string) {
	t.Helper()
	if len(summary) > FallbackSummaryMaxBytes {
		t.Fatalf("summary of %d bytes, over FallbackSummaryMaxBytes %d:\n%s", len(summary), FallbackSummaryMaxBytes, summary)
	}
	sec, lines := -1, [numSections]int{}
	for _, line := range strings.Split(summary, "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sec = slices.Index(SummaryHeadings, h)
			if sec < 0 {
				t.Fatalf("heading %q is not one of SummaryHeadings:\n%s", line, summary)
			}
			continue
		}
		if sec < 0 || !strings.HasPrefix(line, "- ") {
			t.Fatalf("line %q is not a bullet under a heading:\n%s", line, summary)
		}
		lines[sec]++
		for _, dialogue := range []string{"user said", "- user:", "- assistant:", "haha", "Glad you liked it", "nYou"} {
			if strings.Contains(line, dialogue) {
				t.Fatalf("line %q holds dialogue or a fragment (%q):\n%s", line, dialogue, summary)
			}
		}
	}
	for s, n := range lines {
		if n > sectionCaps[s] {
			t.Fatalf("section %q has %d lines, over its cap %d", SummaryHeadings[s], n, sectionCaps[s])
		}
	}
}

// goldenConversation is a conversation a person had with an assistant,
// folded in three batches.
var goldenConversation = [][]Exchange{
	{
		{User: "Hi! I'm Dana, I work at Acme as a backend engineer and I live in Lisbon.",
			Assistant: "Nice to meet you, Dana. How can I help?"},
		{User: "We're moving the billing service off the monolith. The deploy target is eu-west-1.",
			Assistant: "Got it: billing moves to its own service, deployed in eu-west-1."},
		{User: "Let's go with PostgreSQL 16 for the ledger. It must never lose a committed payment.",
			Assistant: "PostgreSQL 16 it is; I'll sketch the schema in db/ledger.sql."},
	},
	{
		{User: "haha ok. What's a good name for the queue?",
			Assistant: "How about \"payments-outbox\"?"},
		{User: "I prefer short answers, please. And the p99 latency must stay under 200 ms.",
			Assistant: "Understood."},
		{User: "Actually, we switched to CockroachDB instead of PostgreSQL for the ledger.",
			Assistant: "Switched: the ledger runs on CockroachDB. I'll update db/ledger.sql."},
	},
	{
		{User: "My manager Priya wants a demo on 2024-06-14 at 10:30.",
			Assistant: "I'll prepare the demo script for 2024-06-14. See https://wiki.acme.test/billing/demo for the template."},
		{User: "thanks!\\nYou rock", Assistant: "Anytime!"},
	},
}

// The summary of a real-looking conversation, as the fallback writes it,
// is one a person would accept: facts of the user in the third person,
// the decision that replaced another and not the replaced one, open
// items, artifacts with their context, and no dialogue.
func TestFallbackSummaryGolden(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	summary := ""
	for i, batch := range goldenConversation {
		summary = FallbackSummary(summary, batch)
		checkFallbackSummary(t, summary)
		fmt.Fprintf(&b, "# after fold %d\n%s\n\n", i+1, summary)
	}
	got := b.String()
	path := "testdata/fallback_summary.golden"
	if golden.Rewrite() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestFallbackSummaryGolden -rewrite to write it)", err)
	}
	if got != string(want) {
		t.Errorf("FallbackSummary of the golden conversation changed; got:\n%s\nwant:\n%s", got, want)
	}
}

func TestThirdPerson(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, who, want string }{
		{"I live in Lyon.", userSubject, "The user lives in Lyon."},
		{"I'm a nurse and my sister is a teacher.", userSubject, "The user is a nurse and the user's sister is a teacher."},
		{"Yesterday I went to a support group with my mom.", userSubject, "Yesterday the user went to a support group with the user's mom."},
		{"I really enjoy hiking, I've done it for years.", userSubject, "The user really enjoys hiking, the user has done it for years."},
		{"I don't eat meat.", userSubject, "The user does not eat meat."},
		{"I watch movies and I try new recipes.", userSubject, "The user watches movies and the user tries new recipes."},
		{"I'll send you the draft of your report.", "The assistant", "The assistant will send the user the draft of the user's report."},
	} {
		if got := thirdPerson(tc.in, tc.who); got != tc.want {
			t.Errorf("thirdPerson(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAround(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ sentence, what, want string }{
		{"The order is 2835.", "2835", "The order is 2835"},
		{`How about "payments-outbox"?`, "payments-outbox", `How about "payments-outbox"?`},
		{"one two three four five six seven eight 42 a b c d e f g h", "42", "…three four five six seven eight 42 a b c d e f…"},
		{"no match here", "42", ""},
	} {
		if got := around(tc.sentence, tc.what, 6); got != tc.want {
			t.Errorf("around(%q, %q) = %q, want %q", tc.sentence, tc.what, got, tc.want)
		}
	}
}
