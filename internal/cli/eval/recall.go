package eval

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// Recall is `ctxinf-bench eval recall --data FILE`: the LoCoMo
// evaluation of eval serve run in one process, and beside the recall of
// the search (R@5, R@10, scored as ../shared/eval/locomo-eval scores
// them) the recall of what the model would see: for each question, the
// context the runtime assembles for it as the branch's next user turn
// (Runtime.DebugNextContext: the assembler a turn runs, at the
// configured budgets: summary, window, pending turns, retrieved memory),
// and whether each gold evidence turn's text is in it. Conversations are
// imported as eval serve imports them. With --curve KEY=V1,V2,… it runs
// once per value of a configuration key and prints the curve of context
// recall against the context's tokens.
func Recall(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("eval recall", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	data := fs.String("data", "../shared/datasets/locomo-dev/locomo-dev.json", "the LoCoMo file (JSON)")
	curve := fs.String("curve", "", "KEY=V1,V2,…: one run per value of configuration key KEY ("+strings.Join(slices.Sorted(keysOf(curveKeys)), ", ")+")")
	out := fs.String("out", "", "write each question's result here (JSON lines)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	convs, err := loadLocomo(*data)
	if err != nil {
		return err
	}
	if *curve == "" {
		res, err := recallRun(e, convs, *out)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.Stdout).Encode(res)
		}
		res.print(e.Stdout)
		return nil
	}
	key, values, ok := strings.Cut(*curve, "=")
	set := curveKeys[key]
	if !ok || set == nil || values == "" {
		return fmt.Errorf("eval recall: --curve %q: want KEY=V1,V2,… with KEY one of %s", *curve, strings.Join(slices.Sorted(keysOf(curveKeys)), ", "))
	}
	base := e.Config
	var points []curvePoint
	for v := range strings.SplitSeq(values, ",") {
		e.Config = base
		if err := set(&e.Config, strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("eval recall: --curve %s=%s: %w", key, v, err)
		}
		if err := e.Config.Validate(); err != nil {
			return fmt.Errorf("eval recall: --curve %s=%s: %w", key, v, err)
		}
		res, err := recallRun(e, convs, "")
		if err != nil {
			return err
		}
		points = append(points, curvePoint{Key: key, Value: strings.TrimSpace(v), Result: res})
	}
	e.Config = base
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(points)
	}
	printCurve(e.Stdout, points)
	return nil
}

func keysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// curveKeys are the configuration keys --curve can vary.
var curveKeys = map[string]func(*config.Config, string) error{
	"retrieval.top_k": func(c *config.Config, v string) error { // max_k follows it up
		n, err := strconv.Atoi(v)
		c.Retrieval.TopK, c.Retrieval.MaxK = n, max(n, c.Retrieval.MaxK)
		return err
	},
	"retrieval.max_k":              intKey(func(c *config.Config) *int { return &c.Retrieval.MaxK }),
	"retrieval.neighbours":         intKey(func(c *config.Config) *int { return &c.Retrieval.Neighbours }),
	"retrieval.neighbours_before":  intKey(func(c *config.Config) *int { return &c.Retrieval.NeighboursBefore }),
	"retrieval.overfetch":          intKey(func(c *config.Config) *int { return &c.Retrieval.Overfetch }),
	"context.retrieval_max_tokens": intKey(func(c *config.Config) *int { return &c.Context.RetrievalMaxTokens }),
	"context.window_messages":      intKey(func(c *config.Config) *int { return &c.Context.WindowMessages }),
	"retrieval.vector_weight": floatKey(func(c *config.Config, v float64) {
		c.Retrieval.VectorWeight, c.Retrieval.TextWeight = v, 1-v
	}),
	"retrieval.mmr_lambda":    floatKey(func(c *config.Config, v float64) { c.Retrieval.MMRLambda = v }),
	"retrieval.time_boost":    floatKey(func(c *config.Config, v float64) { c.Retrieval.TimeBoost = v }),
	"retrieval.speaker_boost": floatKey(func(c *config.Config, v float64) { c.Retrieval.SpeakerBoost = v }),
	"retrieval.threshold":     floatKey(func(c *config.Config, v float64) { c.Retrieval.Threshold = v }),
}

func intKey(field func(*config.Config) *int) func(*config.Config, string) error {
	return func(c *config.Config, v string) error {
		n, err := strconv.Atoi(v)
		*field(c) = n
		return err
	}
}

func floatKey(set func(*config.Config, float64)) func(*config.Config, string) error {
	return func(c *config.Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		set(c, f)
		return err
	}
}

// questionResult is one question's figures.
type questionResult struct {
	QID      string   `json:"qid"`
	Category int      `json:"category"`
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	IDs      []string `json:"ids"` // the search's best turns, at most 10
	// Found names, for each evidence turn, the section of the context
	// its text is in ("" when it is in none).
	Found           []string `json:"found"`
	Tokens          int      `json:"tokens"`           // the whole context, as the assembler counts it
	SentTokens      int      `json:"sent_tokens"`      // the text the adapters send, counted
	RetrievedTokens int      `json:"retrieved_tokens"` // its retrieved memory
	RetrievedChunks int      `json:"retrieved_chunks"`
}

// categoryFigures are the means over a category's questions.
type categoryFigures struct {
	Category        string  `json:"category"`
	N               int     `json:"n"`
	R5              float64 `json:"recall_at_5"`
	R10             float64 `json:"recall_at_10"`
	ContextRecall   float64 `json:"context_recall"`
	Tokens          float64 `json:"tokens"`
	SentTokens      float64 `json:"sent_tokens"`
	RetrievedTokens float64 `json:"retrieved_tokens"`
	RetrievedChunks float64 `json:"retrieved_chunks"`
}

// recallResult is a run's figures: per category (1 to 5), overall
// (categories 1 to 4, the micro-average, as the evaluator's), where the
// evidence found was, and the latencies.
type recallResult struct {
	Categories []categoryFigures `json:"categories"`
	Overall    categoryFigures   `json:"overall"`
	// FoundIn is the share of the evidence turns of categories 1 to 4
	// found in each section (a turn in several counts in the first of
	// window, pending, retrieved, summary, pinned, system).
	FoundIn       map[string]float64 `json:"found_in"`
	SearchP50us   float64            `json:"search_p50_us"`
	AssembleP50us float64            `json:"assemble_p50_us"`
	Budget        core.Budget        `json:"budget"`
	Settings      string             `json:"settings"`
}

type curvePoint struct {
	Key    string       `json:"key"`
	Value  string       `json:"value"`
	Result recallResult `json:"result"`
}

// recallRun imports convs into a fresh runtime configured by e and
// scores every question with evidence.
func recallRun(e *cli.Env, convs []*locomoConv, outPath string) (recallResult, error) {
	var res recallResult
	s, done, err := openEval(e, "", 64)
	if err != nil {
		return res, err
	}
	defer done()
	var out io.Writer = io.Discard
	if outPath != "" {
		fh, err := os.Create(outPath)
		if err != nil {
			return res, err
		}
		defer fh.Close()
		out = fh
	}
	enc := json.NewEncoder(out)
	r := s.opts
	res.Settings = fmt.Sprintf("vector %.2f / text %.2f, mmr %.2f, threshold %.2f, overfetch %d, top_k %d, max_k %d, neighbours %d after and %d before, time boost %.2f, speaker boost %.2f, retrieval_max_tokens %d, window %d",
		r.VectorWeight, r.TextWeight, r.MMRLambda, r.Threshold, r.Overfetch, r.TopK, r.MaxK, r.Neighbours, r.NeighboursBefore, r.TimeBoost, r.SpeakerBoost,
		e.Config.Context.RetrievalMaxTokens, e.Config.Context.WindowMessages)
	ctx := context.Background()
	var results []questionResult
	var searchLat, assembleLat []time.Duration
	for _, c := range convs {
		for i, t := range c.Turns {
			req := evalRequest{Op: "append", Conv: c.ID, ID: t.ID, Seq: i, Speaker: t.Speaker, Text: t.Text,
				Meta: map[string]string{"session": strconv.Itoa(t.Session), "session_date": t.SessionDate}}
			if !t.TS.IsZero() {
				req.TS = t.TS.Format(time.RFC3339)
			}
			if t.BlipCaption != "" {
				req.Meta["blip_caption"] = t.BlipCaption
			}
			if _, err := s.handle(ctx, req); err != nil {
				return res, fmt.Errorf("%s: append %s: %w", c.ID, t.ID, err)
			}
		}
		if _, err := s.handle(ctx, evalRequest{Op: "flush", Conv: c.ID}); err != nil {
			return res, fmt.Errorf("%s: flush: %w", c.ID, err)
		}
		ec := s.convs[c.ID]
		for _, q := range c.QAs {
			if len(q.Evidence) == 0 {
				continue
			}
			t0 := time.Now()
			ids, _, err := s.rank(ctx, ec, q.Question, 10)
			if err != nil {
				return res, fmt.Errorf("%s: search: %w", q.QID, err)
			}
			searchLat = append(searchLat, time.Since(t0))
			t0 = time.Now()
			d, err := s.rt.DebugNextContext(ctx, ec.branch, q.Question)
			if err != nil {
				return res, fmt.Errorf("%s: assemble: %w", q.QID, err)
			}
			assembleLat = append(assembleLat, time.Since(t0))
			res.Budget = d.Report.Budget
			qr := questionResult{QID: q.QID, Category: q.Category, Question: q.Question, Evidence: q.Evidence, IDs: ids,
				Tokens: d.Report.Total, RetrievedChunks: len(d.Context.Retrieved)}
			for _, sec := range d.Report.Sections {
				if sec.Name == core.SectionRetrieved {
					qr.RetrievedTokens = sec.Tokens
				}
			}
			qr.SentTokens = s.count(sentText(d.Context))
			sections := contextSections(d.Context)
			for _, id := range q.Evidence {
				qr.Found = append(qr.Found, foundIn(sections, c.turn(id).Text))
			}
			results = append(results, qr)
			if err := enc.Encode(qr); err != nil {
				return res, err
			}
		}
	}
	res.score(results)
	res.SearchP50us, res.AssembleP50us = p50us(searchLat), p50us(assembleLat)
	return res, nil
}

// sentText is the text of ac the provider adapters send: the system
// prompt (providers.SystemText), the window's and pending turns'
// messages, and the user message, which starts with the retrieved
// memory (providers.MemoryText).
func sentText(ac messages.AssembledContext) string {
	parts := []string{providers.SystemText(ac)}
	for _, m := range slices.Concat(ac.Window, ac.Pending) {
		parts = append(parts, m.RenderedText)
	}
	return strings.Join(append(parts, providers.MemoryText(ac), ac.User.RenderedText), "\n")
}

// section is a part of an assembled context as the model gets it, its
// text normalized (normalizeSpace).
type section struct{ name, text string }

// contextSections are the sections of ac in the text the provider
// adapters send (providers.SystemParts, the messages' rendered text,
// providers.MemoryText), leaving out the user's own words: the question.
func contextSections(ac messages.AssembledContext) []section {
	msgs := func(ms []messages.Message) string {
		var b strings.Builder
		for _, m := range ms {
			b.WriteString(m.RenderedText)
			b.WriteString("\n")
		}
		return b.String()
	}
	pinned := messages.AssembledContext{PinnedFacts: ac.PinnedFacts}
	stable, _ := providers.SystemParts(pinned)
	out := []section{
		{core.SectionWindow, msgs(ac.Window)},
		{core.SectionPending, msgs(ac.Pending)},
		{core.SectionRetrieved, providers.MemoryText(ac)},
		{core.SectionSummary, ac.Summary},
		{core.SectionPinned, stable},
		{core.SectionSystem, ac.SystemInstructions},
	}
	for i := range out {
		out[i].text = normalizeSpace(out[i].text)
	}
	return out
}

// foundIn names the first section that holds text (every line of it,
// space normalized: a turn cut into chunks at its paragraphs is found
// when all of them are there), or "" when none does.
func foundIn(sections []section, text string) string {
	var lines []string
	for l := range strings.SplitSeq(text, "\n") {
		if l = normalizeSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	for _, s := range sections {
		all := true
		for _, l := range lines {
			if !strings.Contains(s.text, l) {
				all = false
				break
			}
		}
		if all {
			return s.name
		}
	}
	return ""
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// score fills r's figures from the questions' results.
func (r *recallResult) score(results []questionResult) {
	byCat := map[int]*categoryFigures{}
	overall := &categoryFigures{Category: "overall (1-4)"}
	r.FoundIn = map[string]float64{}
	evidence := 0
	for _, q := range results {
		f := byCat[q.Category]
		if f == nil {
			f = &categoryFigures{Category: fmt.Sprintf("%d %s", q.Category, locomoCategory(q.Category))}
			byCat[q.Category] = f
		}
		r5, r10, ctx := recallAt(q.Evidence, q.IDs, 5), recallAt(q.Evidence, q.IDs, 10), 0.0
		for _, s := range q.Found {
			if s != "" {
				ctx++
			}
			if q.Category != 5 {
				evidence++
				if s != "" {
					r.FoundIn[s]++
				}
			}
		}
		ctx /= float64(len(q.Evidence))
		for _, f := range []*categoryFigures{f, overall} {
			if f == overall && q.Category == 5 {
				continue
			}
			f.N++
			f.R5 += r5
			f.R10 += r10
			f.ContextRecall += ctx
			f.Tokens += float64(q.Tokens)
			f.SentTokens += float64(q.SentTokens)
			f.RetrievedTokens += float64(q.RetrievedTokens)
			f.RetrievedChunks += float64(q.RetrievedChunks)
		}
	}
	mean := func(f *categoryFigures) categoryFigures {
		if n := float64(f.N); n > 0 {
			f.R5, f.R10, f.ContextRecall, f.Tokens, f.SentTokens, f.RetrievedTokens, f.RetrievedChunks =
				f.R5/n, f.R10/n, f.ContextRecall/n, f.Tokens/n, f.SentTokens/n, f.RetrievedTokens/n, f.RetrievedChunks/n
		}
		return *f
	}
	for _, c := range slices.Sorted(keysOf(byCatNames(byCat))) {
		n, _ := strconv.Atoi(c)
		r.Categories = append(r.Categories, mean(byCat[n]))
	}
	r.Overall = mean(overall)
	for s := range r.FoundIn {
		r.FoundIn[s] /= float64(max(evidence, 1))
	}
}

func byCatNames(m map[int]*categoryFigures) map[string]bool {
	out := map[string]bool{}
	for c := range m {
		out[strconv.Itoa(c)] = true
	}
	return out
}

// recallAt is the share of gold in the first k of ids (the evaluator's
// recall@k).
func recallAt(gold, ids []string, k int) float64 {
	top := ids[:min(k, len(ids))]
	found := 0
	for _, g := range gold {
		if slices.Contains(top, g) {
			found++
		}
	}
	return float64(found) / float64(len(gold))
}

func p50us(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)-1)/2].Nanoseconds()) / 1e3
}

func (r recallResult) print(w io.Writer) {
	fmt.Fprintf(w, "settings: %s\n", r.Settings)
	fmt.Fprintf(w, "budget: input %d tokens (context limit %d), retrieval at most %d\n\n", r.Budget.Input(), r.Budget.ContextLimit, r.Budget.RetrievalMax)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "category\tn\tR@5\tR@10\tcontext recall\ttokens\tsent tokens\tretrieved tokens\texcerpts\t")
	row := func(f categoryFigures) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t%.1f\t\n", f.Category, f.N, f.R5, f.R10, f.ContextRecall, f.Tokens, f.SentTokens, f.RetrievedTokens, f.RetrievedChunks)
	}
	for _, f := range r.Categories {
		row(f)
	}
	row(r.Overall)
	tw.Flush()
	var found []string
	for _, s := range slices.Sorted(keysOf(r.FoundIn)) {
		found = append(found, fmt.Sprintf("%s %.3f", s, r.FoundIn[s]))
	}
	fmt.Fprintf(w, "\nevidence of categories 1-4 found in: %s\n", strings.Join(found, ", "))
	fmt.Fprintf(w, "search p50 %.0f µs, assembly p50 %.0f µs\n", r.SearchP50us, r.AssembleP50us)
}

func printCurve(w io.Writer, points []curvePoint) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tR@10\tcontext recall\tmulti-hop\ttemporal\ttokens\tsent tokens\tretrieved tokens\t\n", points[0].Key)
	for _, p := range points {
		o := p.Result.Overall
		cat := func(n int) float64 {
			for _, f := range p.Result.Categories {
				if strings.HasPrefix(f.Category, strconv.Itoa(n)+" ") {
					return f.ContextRecall
				}
			}
			return 0
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t\n", p.Value, o.R10, o.ContextRecall, cat(1), cat(2), o.Tokens, o.SentTokens, o.RetrievedTokens)
	}
	tw.Flush()
}
