package actors

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// memoryModel plays a model that uses the memory tools: asked a
// question holding ask, it calls search_memory for query; given the
// tool's output, it answers with the code it names; any
// other message it echoes. It records every request.
type memoryModel struct {
	*fake.Provider
	ask, query string
	mu         sync.Mutex
	reqs       []providers.Request
}

var codeIs = regexp.MustCompile(`code is (\d+)`)

func (m *memoryModel) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	c := req.Context
	var step fake.Step
	switch {
	case len(c.Continuation) > 0:
		out, _ := c.Continuation[len(c.Continuation)-1].(messages.ToolOutput)
		var text string
		_ = json.Unmarshal(out.Output, &text)
		step.Reply = "I do not know."
		if n := codeIs.FindStringSubmatch(text); n != nil {
			step.Reply = "The code is " + n[1] + "."
		}
	case strings.Contains(c.User.RenderedText+c.User.Blocks.RenderedText(), m.ask):
		args, _ := json.Marshal(map[string]string{"query": m.query})
		step = fake.Step{Items: messages.Items{messages.ToolCall{CallID: "m1", Name: SearchMemoryTool, Arguments: args}}, Outcome: pausedForTools}
	default:
		return m.Provider.Stream(ctx, req, emit)
	}
	return fake.New(step).Stream(ctx, req, emit)
}

func (m *memoryModel) requests() []providers.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// contextText is everything a request shows the model, as text.
func contextText(c messages.AssembledContext) string {
	b, _ := json.Marshal(c)
	return string(b)
}

// With memory.tools on (and tools.mode disabled), a fact that automatic
// retrieval leaves out of the context is found by the model through
// search_memory and used in its answer: one extra provider step, with
// its step row, and the search's output fenced as untrusted memory.
func TestSearchMemoryToolFindsFactOutsideContext(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := FillConfig(indexedConfig(t, ev))
	cfg.Fold = &core.Policy{K: 2, B: 0}
	rank := *cfg.Rank
	rank.TopK, rank.MaxK, rank.Neighbours = 1, 1, 0
	cfg.Rank = &rank
	cfg.MemoryTools = true
	// A summary keeps the gist, not every detail.
	cfg.Summarize = func(context.Context, string, []core.Exchange) (string, error) {
		return "The user described their office.", nil
	}
	m := &memoryModel{Provider: fake.New(), ask: "at the door", query: "vault code"}
	cfg.Provider = m
	r, b := branchOn(t, cfg)
	history := []string{
		"The vault code is 7319.",
		"The front door of the office is blue.",
		"At the door, the guard asks for your badge.",
		"The back door at the office is locked at night.",
		"Lunch is at noon.",
		"The printer is on the second floor.",
	}
	for _, h := range history {
		runTurn(t, r, b, h)
	}
	waitIndexed(t, r, b, ev, len(history)-2) // all but the window's two
	before := len(m.requests())

	s, err := r.Submit(bg, b, "What do I type at the door?")
	if err != nil {
		t.Fatal(err)
	}
	text, last, all := drain(t, s)
	if last.Phase != messages.PhaseResponseFinalized || text != "The code is 7319." {
		t.Fatalf("answer %q (%+v), want the code found through search_memory", text, last)
	}
	reqs := m.requests()[before:]
	if len(reqs) != 2 {
		t.Fatalf("%d provider steps, want 2 (the search, the answer)", len(reqs))
	}
	first := reqs[0].Context
	if strings.Contains(contextText(first), "7319") {
		t.Fatalf("the assembled context holds the fact already: the test shows nothing")
	}
	var names []string
	for _, tool := range first.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "pin_fact,search_memory,unpin_fact" || first.ToolMode != messages.ToolsEnabled {
		t.Fatalf("offered tools %v in mode %q, want the memory tools, enabled", names, first.ToolMode)
	}
	out, _ := reqs[1].Context.Continuation[len(reqs[1].Context.Continuation)-1].(messages.ToolOutput)
	var result string
	_ = json.Unmarshal(out.Output, &result)
	if out.IsError || !strings.Contains(result, `trust="untrusted"`) || !strings.Contains(result, "The vault code is 7319.") ||
		!strings.Contains(result, `seq="1"`) {
		t.Fatalf("search_memory output %s, want the fact fenced as untrusted memory with its turn", out.Output)
	}
	// The call and its result are in the turn's updates and steps.
	if !slices.ContainsFunc(all, func(u Update) bool { c, ok := u.Item.(messages.ToolCall); return ok && c.Name == SearchMemoryTool }) {
		t.Errorf("the stream did not show the search_memory call")
	}
	steps, err := r.Steps(bg, s.Turn)
	if err != nil || len(steps) != 2 {
		t.Fatalf("Steps = %d rows, %v; want 2", len(steps), err)
	}
}

// pin_fact and unpin_fact curate the branch's pins within the pin
// limits; a bad argument is an error output naming the field, and
// nothing is pinned.
func TestPinFactTools(t *testing.T) {
	t.Parallel()
	cfg := FillConfig(testConfig(t, t.TempDir(), newEvents()))
	cfg.MemoryTools = true
	cfg.Pins = core.PinLimits{MaxPins: 1, MaxBytes: 64}
	r, b := branchOn(t, cfg)
	runTurn(t, r, b, "hello")
	ctx := withBranch(bg, b)
	pin := func(args string) (string, error) { return r.pinFactTool(ctx, json.RawMessage(args)) }
	if out, err := pin(`{"fact":"The deploy target is eu-west-1."}`); err != nil || out != "pinned as id 1" {
		t.Fatalf("pin_fact = %q, %v", out, err)
	}
	if _, err := pin(`{"fact":"A second fact."}`); err == nil {
		t.Fatalf("pin_fact past the pin limit succeeded")
	}
	if _, err := pin(`{"fact":"` + strings.Repeat("x", 65) + `"}`); err == nil {
		t.Fatalf("pin_fact past the size limit succeeded")
	}
	if _, err := pin(`{}`); err == nil || !strings.Contains(err.Error(), "fact") {
		t.Fatalf("pin_fact without a fact = %v, want an error naming fact", err)
	}
	if _, err := r.unpinFactTool(ctx, json.RawMessage(`{"id":9}`)); err == nil || !strings.Contains(err.Error(), "id") {
		t.Fatalf("unpin_fact of no pin = %v", err)
	}
	if out, err := r.unpinFactTool(ctx, json.RawMessage(`{"id":1}`)); err != nil || out != "unpinned id 1" {
		t.Fatalf("unpin_fact = %q, %v", out, err)
	}
	if pins, _ := r.Pins(bg, b); len(pins) != 0 {
		t.Fatalf("pins after unpin_fact: %+v", pins)
	}
	if _, err := r.searchMemoryTool(ctx, json.RawMessage(`{"query":"x","speaker":"bot"}`)); err == nil || !strings.Contains(err.Error(), "speaker") {
		t.Fatalf("search_memory with a bad speaker = %v", err)
	}
	if _, err := r.searchMemoryTool(ctx, json.RawMessage(`{"query":"x","from":"yesterday"}`)); err == nil || !strings.Contains(err.Error(), "from") {
		t.Fatalf("search_memory with a bad from = %v", err)
	}
}

// With memory.tools off (the default), no memory tool is offered.
func TestMemoryToolsOffByDefault(t *testing.T) {
	t.Parallel()
	f := fake.New(fake.Step{Reply: "ok"})
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = f
	r, b := branchOn(t, cfg)
	runTurn(t, r, b, "hello")
	if c := f.Requests()[0].Context; len(c.Tools) != 0 || c.ToolMode != messages.ToolsDisabled {
		t.Fatalf("tools %v mode %q offered with memory.tools off", c.Tools, c.ToolMode)
	}
}

// A model's own setting (Model.MemoryTools, memory.tools_models) decides
// for the branches on it: with the memory tools off for the runtime, a
// branch that selected a model opted in is offered them, one on the
// default model is not; and a model opted out is not offered them when
// the runtime's setting is on.
func TestMemoryToolsPerModel(t *testing.T) {
	t.Parallel()
	for _, runtimeOn := range []bool{false, true} {
		def, named := fake.New(fake.Step{Reply: "ok"}), fake.New(fake.Step{Reply: "ok"})
		cfg := testConfig(t, t.TempDir(), newEvents())
		cfg.Provider, cfg.MemoryTools = def, runtimeOn
		cfg.Models = map[string]Model{"named": {Provider: named, ID: "named-1", MemoryTools: new(!runtimeOn)}}
		r, b := branchOn(t, cfg)
		_, other, err := r.CreateSession(bg, "other")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SelectModel(bg, other.ID, "named"); err != nil {
			t.Fatal(err)
		}
		runTurn(t, r, b, "hello")
		runTurn(t, r, other.ID, "hello")
		offered := func(p *fake.Provider) bool {
			return slices.ContainsFunc(p.Requests()[0].Context.Tools, func(tool messages.Tool) bool { return tool.Name == SearchMemoryTool })
		}
		if got := offered(def); got != runtimeOn {
			t.Errorf("runtime setting %v: the default model's branch offered the memory tools: %v", runtimeOn, got)
		}
		if got := offered(named); got != !runtimeOn {
			t.Errorf("runtime setting %v, model's %v: the named model's branch offered the memory tools: %v", runtimeOn, !runtimeOn, got)
		}
	}
}
