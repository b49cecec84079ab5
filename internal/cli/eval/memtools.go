package eval

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// MemoryTools is `ctxinf-bench eval memtools`: what the memory tools
// (search_memory) add, measured on the LoCoMo conversations with a
// scripted model. The conversations are imported as eval recall imports
// them; then each question of categories 1 to 4 is asked twice, as a
// real turn on its own fork of the conversation: once on a model without
// the memory tools, once on the same model with them
// (memory.tools_models). The scripted model answers when every evidence
// turn's text is in what it was sent (the context, and the results of
// its tool calls); when it is not, and it is offered search_memory, it
// calls search_memory with the question as its query for --k hits (20,
// the most, by default: the best few are those automatic retrieval put
// in the context already), then answers from what that returned. So "answered" is an upper bound for a real model:
// the evidence reached it.
//
// It reports the answer rate with and without the tools, over every
// question and over those whose evidence was outside the assembled
// context; and, per turn that used the tool, the extra provider steps,
// the extra input tokens (counted with the runtime's counter, over what
// each request carries: the context, the tools' definitions, the calls
// and results so far) and the extra latency of the turn in the runtime
// (the scripted model answers at once: a real model's extra round trip
// comes on top).
func MemoryTools(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("eval memtools", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	data := fs.String("data", "../shared/datasets/locomo-dev/locomo-dev.json", "the LoCoMo file (JSON)")
	perConv := fs.Int("questions", 0, "ask at most this many questions of each conversation (0: all)")
	k := fs.Int("k", actors.MaxMemorySearchK, "the hits the scripted model asks search_memory for")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *perConv < 0 {
		return fmt.Errorf("eval memtools: --questions %d, want 0 (all) or more", *perConv)
	}
	if *k < 1 || *k > actors.MaxMemorySearchK {
		return fmt.Errorf("eval memtools: --k %d, want 1 to %d", *k, actors.MaxMemorySearchK)
	}
	convs, err := loadLocomo(*data)
	if err != nil {
		return err
	}
	res, err := memToolsRun(e, convs, *perConv, *k)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(res)
	}
	res.print(e.Stdout)
	return nil
}

// The models the questions are asked of: the same scripted model,
// without and with the memory tools.
const (
	plainModel = "scripted"
	toolsModel = "scripted-memory-tools"
)

// memToolsResult is a run's figures.
type memToolsResult struct {
	K         int `json:"k"`         // the hits the scripted model asks for
	Questions int `json:"questions"` // asked, categories 1 to 4
	// Outside is how many had evidence outside the context the turn
	// assembled (automatic retrieval, window, summary).
	Outside int `json:"outside_context"`
	// The share of questions answered (the evidence reached the model),
	// of all and of those outside the context, without and with the tools.
	PlainRate        float64 `json:"answer_rate_plain"`
	ToolsRate        float64 `json:"answer_rate_tools"`
	PlainRateOutside float64 `json:"answer_rate_outside_plain"`
	ToolsRateOutside float64 `json:"answer_rate_outside_tools"`
	// The mean share of a question's evidence turns that reached the
	// model (eval recall's context recall, over the turn's requests).
	PlainEvidence        float64 `json:"evidence_plain"`
	ToolsEvidence        float64 `json:"evidence_tools"`
	PlainEvidenceOutside float64 `json:"evidence_outside_plain"`
	ToolsEvidenceOutside float64 `json:"evidence_outside_tools"`
	// Searched is how many turns with the tools called search_memory.
	Searched int `json:"searched"`
	// Per turn that searched, against the same question without tools:
	// the extra provider steps (mean), input tokens and latency.
	ExtraSteps        float64 `json:"extra_steps"`
	ExtraTokensP50    int     `json:"extra_input_tokens_p50"`
	ExtraTokensP99    int     `json:"extra_input_tokens_p99"`
	ExtraTokensMean   float64 `json:"extra_input_tokens_mean"`
	PlainTokensP50    int     `json:"plain_input_tokens_p50"` // the same questions without tools
	ExtraLatencyP50us float64 `json:"extra_latency_p50_us"`
	ExtraLatencyP99us float64 `json:"extra_latency_p99_us"`
	PlainLatencyP50us float64 `json:"plain_latency_p50_us"`
	// DefinitionTokens is what offering the memory tools costs every
	// request, used or not: their definitions.
	DefinitionTokens int `json:"definition_tokens"`
	// UnusedExtraTokensP50 is the extra input tokens of a turn with the
	// tools that did not search (their definitions alone).
	UnusedExtraTokensP50 int `json:"unused_extra_input_tokens_p50"`
}

// memQuestionRun is one question asked on one model.
type memQuestionRun struct {
	steps    int
	input    int // tokens, over the turn's requests
	searched bool
	answered bool
	inFirst  bool   // the evidence was in the first request's context
	reached  []bool // each evidence turn: whether it reached the model
	took     time.Duration
}

// share is the share of the evidence turns that reached the model.
func (r memQuestionRun) share() float64 {
	n := 0
	for _, in := range r.reached {
		if in {
			n++
		}
	}
	return float64(n) / float64(max(len(r.reached), 1))
}

func memToolsRun(e *cli.Env, convs []*locomoConv, perConv, k int) (memToolsResult, error) {
	res := memToolsResult{K: k}
	model := &scriptedModel{Provider: fake.New().WithContextLimit(e.Config.Local.ContextLimit), k: k}
	s, done, err := openEvalWith(e, "", 64, func(cfg *actors.Config) {
		model.count = cfg.Counter(cfg.Provider.Name(), cfg.Model)
		cfg.Models = map[string]actors.Model{
			plainModel: {Provider: model, ID: plainModel, MemoryTools: new(false)},
			toolsModel: {Provider: model, ID: toolsModel, MemoryTools: new(true)},
		}
	})
	if err != nil {
		return res, err
	}
	defer done()
	ctx := context.Background()
	ask := func(ec *evalConv, at messages.NodeID, name, question string, evidence []string) (memQuestionRun, error) {
		b, err := s.rt.Fork(ctx, ec.branch, at, name)
		if err != nil {
			return memQuestionRun{}, err
		}

		if err := s.rt.SelectModel(ctx, b.ID, name); err != nil {
			return memQuestionRun{}, err
		}
		model.begin(evidence)
		t0 := time.Now()
		st, err := s.rt.Submit(ctx, b.ID, question)
		if err != nil {
			return memQuestionRun{}, err
		}
		_, last := st.Wait(nil)
		took := time.Since(t0)

		if last.Phase == messages.PhaseFailed {
			return memQuestionRun{}, fmt.Errorf("turn failed: %s", last.Err)
		}
		r := model.end()
		r.took = took
		return r, nil
	}
	var extraTok, plainTok, unusedTok []int
	var extraLat, plainLat []time.Duration
	var extraSteps int
	plainOK, toolsOK, plainOut, toolsOut := 0, 0, 0, 0
	for _, c := range convs {
		for i, t := range c.Turns {
			req := evalRequest{Op: "append", Conv: c.ID, ID: t.ID, Seq: i, Speaker: t.Speaker, Text: t.Text}
			if !t.TS.IsZero() {
				req.TS = t.TS.Format(time.RFC3339)
			}
			if _, err := s.handle(ctx, req); err != nil {
				return res, fmt.Errorf("%s: append %s: %w", c.ID, t.ID, err)
			}
		}
		if _, err := s.handle(ctx, evalRequest{Op: "flush", Conv: c.ID}); err != nil {
			return res, fmt.Errorf("%s: flush: %w", c.ID, err)
		}
		ec := s.convs[c.ID]
		// A turn's retrieval takes a branch's index as loaded so far
		// rather than wait for its load from the store: a search that
		// waits loads it first, as a server that has run a while has it.
		if _, err := s.rt.Search(ctx, ec.branch, "warm up", nil); err != nil {
			return res, fmt.Errorf("%s: search: %w", c.ID, err)
		}
		var at messages.NodeID // the branch's head
		asked := 0
		for _, q := range c.QAs {
			if len(q.Evidence) == 0 || q.Category == 5 || (perConv > 0 && asked == perConv) {
				continue
			}
			asked++
			var evidence []string
			for _, id := range q.Evidence {
				evidence = append(evidence, c.turn(id).Text)
			}
			plain, err := ask(ec, at, plainModel, q.Question, evidence)
			if err != nil {
				return res, fmt.Errorf("%s without tools: %w", q.QID, err)
			}
			tools, err := ask(ec, at, toolsModel, q.Question, evidence)
			if err != nil {
				return res, fmt.Errorf("%s with tools: %w", q.QID, err)
			}
			res.Questions++
			res.PlainEvidence += plain.share()
			res.ToolsEvidence += tools.share()
			if plain.answered {
				plainOK++
			}
			if tools.answered {
				toolsOK++
			}
			if !plain.inFirst {
				res.Outside++
				res.PlainEvidenceOutside += plain.share()
				res.ToolsEvidenceOutside += tools.share()
				if plain.answered {
					plainOut++
				}
				if tools.answered {
					toolsOut++
				}
			}
			if !tools.searched {
				unusedTok = append(unusedTok, tools.input-plain.input)
				continue
			}
			res.Searched++
			extraSteps += tools.steps - plain.steps
			extraTok = append(extraTok, tools.input-plain.input)
			plainTok = append(plainTok, plain.input)
			extraLat = append(extraLat, tools.took-plain.took)
			plainLat = append(plainLat, plain.took)
		}
	}
	model.mu.Lock()
	res.DefinitionTokens = model.defs
	model.mu.Unlock()
	rate := func(n, of int) float64 { return float64(n) / float64(max(of, 1)) }
	res.PlainRate, res.ToolsRate = rate(plainOK, res.Questions), rate(toolsOK, res.Questions)
	res.PlainRateOutside, res.ToolsRateOutside = rate(plainOut, res.Outside), rate(toolsOut, res.Outside)
	res.PlainEvidence, res.ToolsEvidence = res.PlainEvidence/float64(max(res.Questions, 1)), res.ToolsEvidence/float64(max(res.Questions, 1))
	res.PlainEvidenceOutside /= float64(max(res.Outside, 1))
	res.ToolsEvidenceOutside /= float64(max(res.Outside, 1))
	res.ExtraSteps = rate(extraSteps, res.Searched)
	res.ExtraTokensP50, res.ExtraTokensP99 = quantileInt(extraTok, 0.5), quantileInt(extraTok, 0.99)
	sum := 0
	for _, n := range extraTok {
		sum += n
	}
	res.ExtraTokensMean = rate(sum, len(extraTok))
	res.PlainTokensP50 = quantileInt(plainTok, 0.5)
	res.UnusedExtraTokensP50 = quantileInt(unusedTok, 0.5)
	res.ExtraLatencyP50us, res.ExtraLatencyP99us = quantileUs(extraLat, 0.5), quantileUs(extraLat, 0.99)
	res.PlainLatencyP50us = quantileUs(plainLat, 0.5)
	return res, nil
}

func quantileInt(xs []int, q float64) int {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func quantileUs(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Nanoseconds()) / 1e3
}

func (r memToolsResult) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "questions\tanswered\t\tevidence reached\t\t")
	fmt.Fprintln(tw, "\twithout tools\twith tools\twithout tools\twith tools\t")
	fmt.Fprintf(tw, "all (%d)\t%.3f\t%.3f\t%.3f\t%.3f\t\n", r.Questions, r.PlainRate, r.ToolsRate, r.PlainEvidence, r.ToolsEvidence)
	fmt.Fprintf(tw, "evidence outside the context (%d)\t%.3f\t%.3f\t%.3f\t%.3f\t\n", r.Outside, r.PlainRateOutside, r.ToolsRateOutside,
		r.PlainEvidenceOutside, r.ToolsEvidenceOutside)
	tw.Flush()
	fmt.Fprintf(w, "\nturns that called search_memory (k %d): %d; per turn, against the same question without tools:\n", r.K, r.Searched)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tp50\tp99\tmean\twithout tools (p50)\t")
	fmt.Fprintf(tw, "extra provider steps\t\t\t%.2f\t1 step\t\n", r.ExtraSteps)
	fmt.Fprintf(tw, "extra input tokens\t%d\t%d\t%.0f\t%d\t\n", r.ExtraTokensP50, r.ExtraTokensP99, r.ExtraTokensMean, r.PlainTokensP50)
	fmt.Fprintf(tw, "extra latency in the runtime (µs)\t%.0f\t%.0f\t\t%.0f\t\n", r.ExtraLatencyP50us, r.ExtraLatencyP99us, r.PlainLatencyP50us)
	tw.Flush()
	fmt.Fprintf(w, "\nthe memory tools' definitions: %d tokens in every request that offers them (a turn that did not search: +%d tokens, p50)\n",
		r.DefinitionTokens, r.UnusedExtraTokensP50)
}

// scriptedModel is the model of eval memtools: for the question being
// asked (begin), it answers when every evidence text is in what it was
// sent; else, offered search_memory and not having called it yet, it
// calls it with the question for k hits; else it says it does not know. It records
// the turn's steps (end). One question is asked at a time.
type scriptedModel struct {
	*fake.Provider
	count core.Counter
	k     int // the hits it asks search_memory for

	mu       sync.Mutex
	evidence []string
	run      memQuestionRun
	defs     int // the tokens of the tools' definitions, when offered
}

func (m *scriptedModel) begin(evidence []string) {
	m.mu.Lock()
	m.evidence, m.run = evidence, memQuestionRun{}
	m.mu.Unlock()
}

func (m *scriptedModel) end() memQuestionRun {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.run
}

func (m *scriptedModel) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	c := req.Context
	sections := contextSections(c)
	var results strings.Builder
	for _, it := range c.Continuation {
		if out, ok := it.(messages.ToolOutput); ok {
			var text string
			_ = json.Unmarshal(out.Output, &text)
			results.WriteString(text)
			results.WriteString("\n")
		}
	}
	sections = append(sections, section{"tool results", normalizeSpace(results.String())})
	m.mu.Lock()
	evidence := m.evidence
	m.mu.Unlock()
	found := true
	var reached []bool // each evidence turn's, in this request
	for _, text := range evidence {
		in := foundIn(sections, text) != ""
		reached = append(reached, in)
		found = found && in
	}
	offered := slices.ContainsFunc(c.Tools, func(t messages.Tool) bool { return t.Name == actors.SearchMemoryTool })
	var step fake.Step
	searched := false
	switch {
	case found:
		step.Reply = "Answered from what I was given."
	case offered && len(c.Continuation) == 0:
		args, _ := json.Marshal(map[string]any{"query": c.User.RenderedText, "k": m.k})
		step = fake.Step{Items: messages.Items{messages.ToolCall{CallID: "search-1", Name: actors.SearchMemoryTool, Arguments: args}},
			Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}}
		searched = true
	default:
		step.Reply = "I do not know."
	}
	input := m.count(requestText(req))
	defs := 0
	if offered {
		data, _ := json.Marshal(c.Tools)
		defs = m.count(string(data))
	}
	m.mu.Lock()
	m.defs = max(m.defs, defs)
	if m.run.steps == 0 {
		m.run.inFirst = found
	}
	m.run.steps++
	m.run.input += input
	m.run.searched = m.run.searched || searched
	m.run.answered = m.run.answered || found
	if m.run.reached == nil {
		m.run.reached = make([]bool, len(evidence))
	}
	for i, in := range reached {
		m.run.reached[i] = m.run.reached[i] || in
	}
	m.mu.Unlock()
	step.Usage = &providers.Usage{InputTokens: input, OutputTokens: m.count(step.Reply)}
	return fake.New(step).Stream(ctx, req, emit)
}

// requestText is what a request carries, as text: the context as the
// adapters send it, the tools' definitions, and the calls and results
// of the turn's steps so far.
func requestText(req providers.Request) string {
	c := req.Context
	parts := []string{sentText(c)}
	if len(c.Tools) > 0 {
		defs, _ := json.Marshal(c.Tools)
		parts = append(parts, string(defs))
	}
	for _, it := range c.Continuation {
		switch it := it.(type) {
		case messages.ToolCall:
			parts = append(parts, it.Name, string(it.Arguments))
		case messages.ToolOutput:
			var text string
			_ = json.Unmarshal(it.Output, &text)
			parts = append(parts, text)
		case messages.AssistantMessage:
			parts = append(parts, it.Blocks.RenderedText())
		}
	}
	return strings.Join(parts, "\n")
}
