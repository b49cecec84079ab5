package actors

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// The conversation the summarizer tests fold.
var (
	libPinned    = []string{"The API listens on port 8080."}
	libPrevious  = "## Key Artifacts\n- internal/store/sqlite.go"
	libExchanges = []core.Exchange{
		{User: "Let's go with eu-west-1 for the deploy target.", Assistant: "Noted: deploy target eu-west-1, config in deploy/prod.yaml."},
		{User: "Set the cache to 512 MiB.", Assistant: "Done."},
	}
)

// libSummary is a summary of the conversation above, with its lines
// changed by the replacer.
func libSummary(r *strings.Replacer) string {
	s := "## Facts / Constraints\n- The API listens on port 8080.\n- Cache: 512 MiB\n" +
		"## Decisions\n- Deploy target: eu-west-1\n## Key Artifacts\n- internal/store/sqlite.go\n- deploy/prod.yaml"
	if r != nil {
		s = r.Replace(s)
	}
	return s
}

var (
	goodSummary    = libSummary(nil)
	droppedPinned  = libSummary(strings.NewReplacer("- The API listens on port 8080.\n", ""))
	droppedPath    = libSummary(strings.NewReplacer("\n- deploy/prod.yaml", ""))
	alteredNumbers = libSummary(strings.NewReplacer("8080", "8081", "512 MiB", "256 MiB"))
)

// testLibrarian returns a Librarian on p whose info-level logs go to a
// buffer.
func testLibrarian(p providers.Provider) (Librarian, *bytes.Buffer) {
	var logs bytes.Buffer
	return Librarian{Provider: p, Model: "librarian-1", MaxOutputTokens: 700,
		Log: zerolog.New(&logs).Level(zerolog.InfoLevel)}, &logs
}

func userText(req providers.Request) string { return req.Context.User.RenderedText }

func TestSummarize(t *testing.T) {
	t.Parallel()
	fallback := core.FallbackSummary(libPrevious, libExchanges)
	tests := []struct {
		name  string
		steps []fake.Step
		want  string
		calls int
		// retryNames are what the retry prompt must name as missing.
		retryNames []string
		logs       string
	}{
		{name: "good summary", steps: []fake.Step{{Reply: goodSummary}}, want: goodSummary, calls: 1},
		{name: "fenced summary", steps: []fake.Step{{Reply: "```markdown\n" + goodSummary + "\n```"}}, want: goodSummary, calls: 1},
		{name: "pinned fact dropped, then fixed", steps: []fake.Step{{Reply: droppedPinned}, {Reply: goodSummary}},
			want: goodSummary, calls: 2, retryNames: []string{"- pinned fact: The API listens on port 8080."},
			logs: `"attempt":1`},
		{name: "artifact dropped, then fixed", steps: []fake.Step{{Reply: droppedPath}, {Reply: goodSummary}},
			want: goodSummary, calls: 2, retryNames: []string{"- path: deploy/prod.yaml"}},
		{name: "keeps dropping: fallback", steps: []fake.Step{{Reply: droppedPinned}, {Reply: droppedPinned}},
			want: fallback, calls: 2, logs: "deterministic fallback"},
		{name: "altered numbers detected", steps: []fake.Step{{Reply: alteredNumbers}, {Reply: alteredNumbers}},
			want: fallback, calls: 2,
			retryNames: []string{"- pinned fact: The API listens on port 8080.", "- number: 512 MiB"},
			logs:       `1 pinned fact, 1 number`},
		{name: "provider error: fallback without retry",
			steps: []fake.Step{{Err: &providers.Error{Provider: "fake", StatusCode: 500, Message: "server error"}}},
			want:  fallback, calls: 1, logs: "status 500"},
		{name: "connection dropped: fallback", steps: []fake.Step{{Reply: goodSummary, FailAfter: 3}}, want: fallback, calls: 1},
		{name: "cut at the output bound: fallback",
			steps: []fake.Step{{Reply: goodSummary, Outcome: messages.StepOutcome{Kind: messages.OutcomeIncomplete}}},
			want:  fallback, calls: 1, logs: "incomplete"},
		{name: "empty answer: fallback", steps: []fake.Step{{Reply: "  \n"}}, want: fallback, calls: 1, logs: "no text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New(tt.steps...)
			l, logs := testLibrarian(p)
			got, err := l.Summarize(WithPinnedFacts(bg, libPinned), libPrevious, libExchanges)
			if err != nil {
				t.Fatalf("Summarize() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("Summarize() =\n%s\nwant\n%s", got, tt.want)
			}
			reqs := p.Requests()
			if len(reqs) != tt.calls {
				t.Fatalf("provider calls = %d, want %d", len(reqs), tt.calls)
			}
			system, user := core.SummaryPrompt(libPrevious, libExchanges, libPinned)
			if r := reqs[0]; r.Model != "librarian-1" || r.MaxOutputTokens != 700 ||
				r.Context.SystemInstructions != system || userText(r) != user {
				t.Errorf("first request = model %q, max %d, system %.40q, user %.40q; want the summary prompt",
					r.Model, r.MaxOutputTokens, r.Context.SystemInstructions, userText(r))
			}
			for _, name := range tt.retryNames {
				if !strings.Contains(userText(reqs[1]), name+"\n") {
					t.Errorf("retry prompt does not name %q:\n%s", name, userText(reqs[1]))
				}
			}
			if !strings.Contains(logs.String(), tt.logs) {
				t.Errorf("logs lack %q:\n%s", tt.logs, logs.String())
			}
			// Info-level logs say why, never what the conversation holds.
			for _, secret := range []string{"API listens", "eu-west-1", "prod.yaml", "MiB"} {
				if strings.Contains(logs.String(), secret) {
					t.Errorf("logs hold conversation text %q:\n%s", secret, logs.String())
				}
			}
		})
	}
}

// Without pinned facts in the context, a summary is not asked to restate
// any (the state keeps them anyway).
func TestSummarizeWithoutPinnedFacts(t *testing.T) {
	t.Parallel()
	p := fake.New(fake.Step{Reply: droppedPinned})
	l, _ := testLibrarian(p)
	got, err := l.Summarize(bg, libPrevious, libExchanges)
	if err != nil || got != droppedPinned || p.Calls() != 1 {
		t.Fatalf("Summarize() = %q, %v after %d calls; want the model's summary at once", got, err, p.Calls())
	}
	if !strings.Contains(userText(p.Requests()[0]), "Pinned facts: none.") {
		t.Error("the prompt does not say there are no pinned facts")
	}
}

func TestSummarizeStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	p := fake.New(fake.Step{Hang: true})
	l, _ := testLibrarian(p)
	if _, err := l.Summarize(ctx, libPrevious, libExchanges); !errors.Is(err, context.Canceled) {
		t.Fatalf("Summarize(cancelled) error = %v, want context.Canceled", err)
	}
	// A call that hangs is cut by the librarian's own timeout: fallback.
	l.Timeout = 10 * time.Millisecond
	got, err := l.Summarize(bg, libPrevious, libExchanges)
	if err != nil || got != core.FallbackSummary(libPrevious, libExchanges) {
		t.Fatalf("Summarize(hanging provider) = %q, %v; want the fallback", got, err)
	}
}

func TestLLMSummarizerPlugsIntoConfig(t *testing.T) {
	t.Parallel()
	cfg := Config{Summarize: LLMSummarizer(fake.New(fake.Step{Reply: goodSummary}), "m", 0, zerolog.Nop())}
	got, err := cfg.Summarize(WithPinnedFacts(bg, libPinned), libPrevious, libExchanges)
	if err != nil || got != goodSummary {
		t.Fatalf("Summarize() = %q, %v", got, err)
	}
	if PinnedFacts(bg) != nil || len(PinnedFacts(WithPinnedFacts(bg, libPinned))) != 1 {
		t.Error("PinnedFacts does not return what WithPinnedFacts stored")
	}
}

func TestShrink(t *testing.T) {
	t.Parallel()
	summary := goodSummary + "\n## Open Items\n- Review the wording of the onboarding page some day, when there is time left."
	target := 40 // tokens; summary is about 70
	short := "## Facts / Constraints\n- API port 8080; cache 512 MiB\n## Decisions\n- Deploy: eu-west-1\n" +
		"## Key Artifacts\n- internal/store/sqlite.go\n- deploy/prod.yaml"
	tooLong := short + "\n## Open Items\n- Review the wording of the onboarding page some day."
	lost := strings.Replace(short, "eu-west-1", "eu-west", 1)
	count := func(s string) int { return (len(s) + 3) / 4 }
	tests := []struct {
		name  string
		steps []fake.Step
		want  string
		calls int
	}{
		{"shrunk", []fake.Step{{Reply: short}}, short, 1},
		{"too long, then shrunk", []fake.Step{{Reply: tooLong}, {Reply: short}}, short, 2},
		{"loses an id twice: deterministic", []fake.Step{{Reply: lost}}, core.ShrinkSummary(summary, target, count), 2},
		{"too long twice: the model's answer, cut", []fake.Step{{Reply: tooLong}}, core.ShrinkSummary(tooLong, target, count), 2},
		{"provider error: deterministic", []fake.Step{{Err: errors.New("boom")}}, core.ShrinkSummary(summary, target, count), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New(tt.steps...)
			l, _ := testLibrarian(p)
			l.Count = count
			got, err := l.Shrink(bg, summary, target)
			if err != nil || got != tt.want {
				t.Errorf("Shrink() = %v\n%s\nwant\n%s", err, got, tt.want)
			}
			if p.Calls() != tt.calls {
				t.Errorf("provider calls = %d, want %d", p.Calls(), tt.calls)
			}
			if miss := core.MissingEntities(got, core.RequiredEntities(nil, summary, nil)); len(miss) > 0 {
				t.Errorf("Shrink() lost %v", miss)
			}
		})
	}
	// A summary that fits is not sent anywhere.
	p := fake.New()
	l, _ := testLibrarian(p)
	if got, err := l.Shrink(bg, short, 1000); got != short || err != nil || p.Calls() != 0 {
		t.Errorf("Shrink(fitting) = %q, %v after %d calls", got, err, p.Calls())
	}
	// LLMShrinker is Librarian.Shrink.
	shrink := LLMShrinker(fake.New(fake.Step{Reply: short}), "m", 0, zerolog.Nop())
	if got, err := shrink(bg, summary, 40); got != short || err != nil {
		t.Errorf("LLMShrinker() = %q, %v", got, err)
	}
}

// flakyLibrarian is a librarian model that knows what the conversation
// holds so far (the test sets pinned and artifacts before each call) and
// writes a complete summary of it, except that with probability p it
// drops one bullet or alters the number in one (a final 7 becomes 8, a
// value no true fact has).
type flakyLibrarian struct {
	rng               *rand.Rand
	p                 float64
	pinned, artifacts []string
	altered           []string // every altered bullet written
	calls             int
}

func (f *flakyLibrarian) Name() string                                        { return "flaky" }
func (f *flakyLibrarian) ContextLimit(string) int                             { return 1 << 20 }
func (f *flakyLibrarian) EstimatePromptTokens(providers.Request) (int, error) { return 0, nil }

func (f *flakyLibrarian) Stream(_ context.Context, _ providers.Request, _ func(providers.Event) error) (providers.Response, error) {
	f.calls++
	var bullets []string
	for _, p := range f.pinned {
		bullets = append(bullets, "- "+p)
	}
	nPinned := len(bullets)
	for _, a := range f.artifacts {
		bullets = append(bullets, "- "+a)
	}
	if len(bullets) > 0 && f.rng.Float64() < f.p {
		i := f.rng.IntN(len(bullets))
		if f.rng.IntN(2) == 0 {
			bullets = append(bullets[:i:i], bullets[i+1:]...)
			if i < nPinned {
				nPinned--
			}
		} else if j := strings.LastIndexByte(bullets[i], '7'); j >= 0 {
			bullets[i] = bullets[i][:j] + "8" + bullets[i][j+1:]
			f.altered = append(f.altered, strings.TrimPrefix(bullets[i], "- "))
		}
	}
	var b strings.Builder
	if nPinned > 0 {
		b.WriteString("## Facts / Constraints\n" + strings.Join(bullets[:nPinned], "\n") + "\n")
	}
	if len(bullets) > nPinned {
		b.WriteString("## Key Artifacts\n" + strings.Join(bullets[nPinned:], "\n"))
	}
	text := b.String()
	return providers.Response{
		Items:   messages.Items{messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: text}}}},
		Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted},
	}, nil
}

var thousandTurnsSeed = flag.Uint64("thousand-turns-seed", 0, "replay TestThousandTurnsLoseNothing with this seed (0: a new one)")

// TestThousandTurnsLoseNothing is SRD §20's "pinned facts: zero loss
// over 1,000 turns": a synthetic conversation pins 20 facts and brings up
// 50 artifacts along the way, folded every 5 turns by a librarian that
// drops or alters a fact in 30 % of its answers. After every fold the
// summary holds every artifact so far, a summary the model wrote holds
// every pinned fact, no altered fact is ever accepted, and the pinned
// set keeps every pinned fact verbatim.
func TestThousandTurnsLoseNothing(t *testing.T) {
	t.Parallel()
	const (
		turns     = 1000
		foldEvery = 5
	)
	seed := *thousandTurnsSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -thousand-turns-seed=%d)", seed, seed)
	lib := &flakyLibrarian{rng: rand.New(rand.NewPCG(seed, 7)), p: 0.30}
	l := Librarian{Provider: lib, Model: "flaky", Log: zerolog.Nop()}

	var pinned, artifacts []string
	var artifactEntities []core.Entity
	var pending []core.Exchange
	summary := ""
	retries, fallbacks, checked := 0, 0, 0
	kinds := []func(i int) string{
		func(i int) string { return fmt.Sprintf("services/svc%03d7/main.go", i) },
		func(i int) string { return fmt.Sprintf("https://example.com/runbooks/%d7", i) },
		func(i int) string { return fmt.Sprintf("TICKET-%d7", i) },
		func(i int) string { return fmt.Sprintf("%d7 MiB", 100+i) },
		func(i int) string { return fmt.Sprintf("cfg.Limit%d7", i) },
	}
	for turn := 1; turn <= turns; turn++ {
		if turn%50 == 0 { // the user pins a fact between two turns
			pinned = append(pinned, fmt.Sprintf("Rule %d: the quota of region r%d is %d7 requests.", len(pinned)+1, turn, turn))
		}
		ex := core.Exchange{User: "Let me think about the overall design for a moment.", Assistant: "Sure, take your time."}
		if turn%20 == 0 {
			a := kinds[len(artifacts)%len(kinds)](len(artifacts) + 1)
			artifacts = append(artifacts, a)
			artifactEntities = append(artifactEntities, core.ExtractEntities(a)...)
			ex = core.Exchange{User: "Please keep " + a + " in mind for later.", Assistant: "Noted."}
		}
		pending = append(pending, ex)
		if len(pending) < foldEvery {
			continue
		}
		lib.pinned, lib.artifacts = pinned, artifacts
		before := lib.calls
		out, err := l.Summarize(WithPinnedFacts(bg, pinned), summary, pending)
		if err != nil {
			t.Fatalf("turn %d: Summarize() error = %v", turn, err)
		}
		if lib.calls-before == 2 {
			retries++
		}
		fellBack := out == core.FallbackSummary(summary, pending)
		if fellBack {
			fallbacks++
		}
		want := artifactEntities
		if !fellBack {
			want = slices.Clone(want)
			for _, p := range pinned {
				want = append(want, core.Entity{Kind: core.EntityPinned, Text: p})
			}
		}
		if miss := core.MissingEntities(out, want); len(miss) > 0 {
			t.Fatalf("turn %d: the summary lost %v:\n%s", turn, miss, out)
		}
		for _, a := range lib.altered[checked:] {
			if len(core.MissingEntities(out, []core.Entity{{Kind: core.EntityID, Text: a}})) == 0 {
				t.Fatalf("turn %d: an altered fact %q was accepted:\n%s", turn, a, out)
			}
		}
		// An alteration rejected once cannot come back: the next summary
		// is written from the accepted one.
		checked = len(lib.altered)
		summary, pending = out, nil
	}
	if len(pinned) != 20 || len(artifacts) != 50 {
		t.Fatalf("the conversation pinned %d facts and brought up %d artifacts, want 20 and 50", len(pinned), len(artifacts))
	}
	// The final state: the summary plus the pinned set the state keeps.
	final := summary + "\n" + strings.Join(pinned, "\n")
	var all []core.Entity
	for _, p := range pinned {
		all = append(all, core.Entity{Kind: core.EntityPinned, Text: p})
	}
	all = append(all, artifactEntities...)
	if len(artifactEntities) != len(artifacts) {
		t.Fatalf("the %d artifacts are %d entities: %v", len(artifacts), len(artifactEntities), artifactEntities)
	}
	if miss := core.MissingEntities(final, all); len(miss) > 0 {
		t.Fatalf("after %d turns the state lost %v", turns, miss)
	}
	t.Logf("%d folds: %d retried, %d fell back; %d alterations rejected", turns/foldEvery, retries, fallbacks, len(lib.altered))
	if retries == 0 || fallbacks == 0 || len(lib.altered) == 0 {
		t.Errorf("the run exercised too little: %d retries, %d fallbacks, %d alterations", retries, fallbacks, len(lib.altered))
	}
}

// A summary request lost without a word (no answer, no workLost) does
// not leave the branch's pending turns unfolded: a commit asked for after
// commitReask asks for the summary again, and so does the deadline
// (summaryDeadline) with nobody asking.
func TestLostSummaryIsAskedAgain(t *testing.T) {
	t.Parallel()
	for _, byDeadline := range []bool{false, true} {
		ev := newEvents()
		r := openRuntime(t, testConfig(t, t.TempDir(), ev))
		defer r.Close()
		r.commitReask, r.summaryDeadline = 0, time.Hour
		if byDeadline {
			r.commitReask, r.summaryDeadline = time.Hour, 20*time.Millisecond
		}
		_, b, err := r.CreateSession(bg, "lost summary")
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"one", "two"} {
			runTurn(t, r, b.ID, text)
		}
		r.dropSummaries.Store(1)
		if err := r.CommitPending(bg, b.ID); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			info, err := r.Inspect(bg, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if info.Pending == 0 && r.dropSummaries.Load() <= 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("byDeadline=%v: %d turns still pending after a lost summary", byDeadline, info.Pending)
			}
			if !byDeadline {
				if err := r.CommitPending(bg, b.ID); err != nil { // as a client asking again
					t.Fatal(err)
				}
			}
			time.Sleep(5 * time.Millisecond) // polling the branch
		}
	}
}
