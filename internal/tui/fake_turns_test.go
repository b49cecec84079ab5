package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// fakeTurns is the Backend of the chunks, pending, steps and models
// screens' tests: a branch "main" of three turns held in memory, with
// fixed ids and times. Turn 1 is a plain exchange,
// turn 2 ran a tool (two steps), turn 3 was cut off by a crash in its
// first step (its output recovered, incomplete); turns 1 and 2 are
// pending. Turn 1 has chunks (the browse tab's), the others none. It
// records the calls the screens make.
type fakeTurns struct {
	branch  api.Branch
	turns   []api.Turn        // turn seq i+1 at i
	entries []Entry           // the transcript, oldest first
	nodes   []messages.NodeID // each entry's node (History's cursor)
	infos   map[messages.TurnID]api.TurnInfo
	pending []messages.PendingTurn

	hits      []api.Hit
	searchErr error
	debugs    map[uint64]api.ContextDebug
	debugErrs map[uint64]error

	models    []string
	model     string
	selectErr error
	commitErr error

	calls []string
}

// fixedID is a deterministic id: n in its last byte.
func turnsID[T ~[16]byte](n byte) T {
	var id T
	id[0], id[15] = 1, n
	return id
}

var fakeTurnsTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func newFakeTurns() *fakeTurns {
	f := &fakeTurns{
		branch: api.Branch{ID: turnsID[messages.BranchID](1), Session: turnsID[messages.SessionID](2), Label: "main"},
		infos:  map[messages.TurnID]api.TurnInfo{},
		models: []string{"fast", "local", "smart"},
		model:  "smart",
	}
	user := func(n byte, text string) Entry {
		return Entry{Turn: turnsID[messages.TurnID](n), Depth: uint64(n), Role: messages.RoleUser, Text: text}
	}
	reply := func(n byte, text string, items ...messages.TranscriptItem) Entry {
		// A reply carries its turn's id: its user message's, node n-1.
		return Entry{Turn: turnsID[messages.TurnID](n - 1), Depth: uint64(n), Role: messages.RoleAssistant, Text: text, Items: items}
	}
	partial := "Roses are red,\nviolets are"
	u3 := user(15, "Write a long poem about the sea")
	u3.Partial = &partial
	f.entries = []Entry{
		user(11, "What does grep do?"),
		reply(12, "grep searches text for lines matching a pattern."),
		user(13, "Count the TODOs in main.go\nand list them"),
		reply(14, "There are 3 TODOs in main.go.",
			messages.ToolCall{CallID: "call_1", Name: "grep", Arguments: json.RawMessage(`{"pattern": "TODO", "file": "main.go"}`)},
			messages.ToolOutput{CallID: "call_1", Output: json.RawMessage(`"main.go:3: TODO\nmain.go:9: TODO\nmain.go:20: TODO"`)},
			messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "There are 3 TODOs in main.go."}}}),
		u3,
	}
	for _, e := range f.entries {
		f.nodes = append(f.nodes, turnsID[messages.NodeID](byte(e.Depth)))
	}
	done := messages.StepOutcome{Kind: messages.OutcomeCompleted}
	step := func(n byte, idx uint32, o messages.StepOutcome, in, out int, shown, durable uint64, interrupted bool) api.StepInfo {
		return api.StepInfo{ID: turnsID[messages.StepID](n), Index: idx, Provider: "openai", Model: "gpt-4o", Outcome: o,
			InputTokens: in, OutputTokens: out, Displayed: shown, Durable: durable, Interrupted: interrupted}
	}
	for i, t := range []struct {
		user, reply byte
		phase       messages.TurnPhase
		outcome     string
		code        string
		steps       []api.StepInfo
	}{
		{11, 12, messages.PhaseDone, "completed", "", []api.StepInfo{step(21, 0, done, 812, 14, 120, 120, false)}},
		{13, 14, messages.PhaseResponseFinalized, "completed", "", []api.StepInfo{
			step(22, 0, messages.StepOutcome{Kind: messages.OutcomeCompleted, Reason: "tool_calls"}, 1040, 31, 96, 96, false),
			step(23, 1, done, 1122, 12, 1536, 1536, false)}},
		{15, 0, messages.PhaseFailed, "failed", messages.FailInterrupted, []api.StepInfo{
			step(24, 0, messages.StepOutcome{}, 0, 0, 27, 14, true)}},
	} {
		row := api.Turn{Branch: f.branch.ID, Seq: uint64(i + 1), ID: turnsID[messages.TurnID](t.user),
			Phase: t.phase, Outcome: t.outcome, Code: t.code, Updated: fakeTurnsTime}
		if t.reply != 0 {
			row.Reply = turnsID[messages.NodeID](t.reply)
		}
		if t.code != "" {
			row.Reason = "the runtime stopped during the step"
		}
		f.turns = append(f.turns, row)
		info := api.TurnInfo{Turn: row, Steps: t.steps, Chunks: []api.ChunkInfo{}}
		if t.code == messages.FailInterrupted {
			info.Partial = &api.PartialOutput{Step: turnsID[messages.StepID](24), Text: partial, Incomplete: true, Displayed: 27, Durable: 14}
		}
		f.infos[row.ID] = info
	}
	// Turn 1 is indexed: its message and its reply are a chunk each (33
	// is the one search finds). Turns 2 (pending) and 3 (failed) have none.
	t1 := f.infos[f.turns[0].ID]
	t1.Chunks = []api.ChunkInfo{
		{ID: turnsID[messages.ChunkID](34), Seq: 1, Node: turnsID[messages.NodeID](11), Start: 0, End: 18,
			Type: messages.ChunkUserContext, Text: "What does grep do?", Summary: "What does grep do?", TokenEst: 5},
		{ID: turnsID[messages.ChunkID](33), Seq: 1, Node: turnsID[messages.NodeID](12), Start: 0, End: 49,
			Type: messages.ChunkExplanation, Text: "grep searches text for lines matching a pattern.",
			Summary: "grep searches text for lines matching a pattern.", TokenEst: 12},
	}
	f.infos[t1.ID] = t1
	f.pending = []messages.PendingTurn{
		{Turn: turnsID[messages.NodeID](11), Seq: 1, Reply: turnsID[messages.NodeID](12)},
		{Turn: turnsID[messages.NodeID](13), Seq: 2, Reply: turnsID[messages.NodeID](14)},
	}
	chunk := func(n byte, seq uint64, typ messages.ChunkType, text string) api.Chunk {
		return api.Chunk{ID: turnsID[messages.ChunkID](n), Session: f.branch.Session, Branch: f.branch.ID,
			SourceTurn: f.turns[seq-1].ID, Seq: seq, Type: typ, Text: text, TokenEst: len(text) / 4, Created: fakeTurnsTime}
	}
	f.hits = []api.Hit{
		{Chunk: chunk(31, 2, messages.ChunkToolResult, "main.go:3: TODO\nmain.go:9: TODO\nmain.go:20: TODO"), Score: 0.912, Vector: 0.88, Text: 0.97, Relevance: 0.907},
		{Chunk: chunk(32, 2, messages.ChunkUserContext, "Count the TODOs in main.go\nand list them"), Score: 0.803, Vector: 0.81, Text: 0.77, Relevance: 0.798},
		{Chunk: chunk(33, 1, messages.ChunkExplanation, "grep searches text for lines matching a pattern."), Score: 0.611, Vector: 0.70, Text: 0.40, Relevance: 0.610},
	}
	f.debugs = map[uint64]api.ContextDebug{3: {
		Turn: turnsID[messages.TurnID](15), Step: turnsID[messages.StepID](24), Provider: "openai", Model: "gpt-4o",
		Context: messages.AssembledContext{Retrieved: []messages.RetrievedChunk{
			{Chunk: turnsID[messages.ChunkID](31), SourceTurn: turnsID[messages.TurnID](13), Text: "main.go:3: TODO\nmain.go:9: TODO", Score: 0.912},
			{Chunk: turnsID[messages.ChunkID](32), SourceTurn: turnsID[messages.TurnID](13), Text: "Count the TODOs in main.go", Score: 0.803},
		}},
		Report: api.AssemblyReport{
			Budget: api.Budget{ContextLimit: 128000, ResponseReserve: 4096, SafetyMargin: 1024, RetrievalMax: 6000, ChunkMax: 800},
			Sections: []api.SectionUsage{{Name: core.SectionSystem, Tokens: 120, Items: 1}, {Name: core.SectionPinned, Tokens: 18, Items: 2},
				{Name: core.SectionSummary, Tokens: 0}, {Name: core.SectionWindow, Tokens: 0}, {Name: core.SectionPending, Tokens: 96, Items: 4},
				{Name: core.SectionRetrieved, Tokens: 41, Items: 2}, {Name: core.SectionUser, Tokens: 12, Items: 1}},
			Total: 287,
			Chunks: []api.ChunkUse{{Chunk: turnsID[messages.ChunkID](31), Score: 0.912, Tokens: 30},
				{Chunk: turnsID[messages.ChunkID](32), Score: 0.803, Tokens: 11, Summary: true}},
			Shrink: []api.ShrinkStep{{Step: core.StepDropChunk, Detail: "chunk 00000011 (score 0.611)", Saved: 19}},
		},
		SentHash: "9f2c4e6a8b0d1f3e5a7c9e1b3d5f7a9c", RebuiltHash: "9f2c4e6a8b0d1f3e5a7c9e1b3d5f7a9c", Matches: true,
		Retrieved: []api.RetrievedRef{{Chunk: turnsID[messages.ChunkID](31), Score: 0.912},
			{Chunk: turnsID[messages.ChunkID](32), Score: 0.803}, {Chunk: turnsID[messages.ChunkID](33), Score: 0.611}},
	}}
	// Turn 2's context had no retrieved memory: nothing was indexed yet.
	f.debugs[2] = api.ContextDebug{Turn: turnsID[messages.TurnID](13), Step: turnsID[messages.StepID](22), Provider: "openai",
		Model: "gpt-4o", Report: api.AssemblyReport{Budget: f.debugs[3].Report.Budget, Total: 150,
			Sections: []api.SectionUsage{{Name: core.SectionSystem, Tokens: 120, Items: 1}, {Name: core.SectionUser, Tokens: 30, Items: 1}}},
		SentHash: "77aa", RebuiltHash: "77aa", Matches: true}
	f.debugErrs = map[uint64]error{1: fmt.Errorf("%w: turn %s", ErrNoContext, turnsID[messages.TurnID](11))}
	return f
}

// state is the shell's State for f's branch, at f's current live state.
func (f *fakeTurns) state() *State {
	return &State{Ctx: context.Background(), Backend: f, Branch: f.branch, Info: f.info(), Width: 80, Height: 24}
}

func (f *fakeTurns) info() api.BranchInfo {
	return api.BranchInfo{TurnSeq: uint64(len(f.turns)), Pending: len(f.pending), Model: f.model,
		Tip: f.nodes[len(f.nodes)-1]}
}

var errFakeTurns = errors.New("fakeTurns: not used by these screens")

func (f *fakeTurns) call(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeTurns) checkBranch(b messages.BranchID) error {
	if b != f.branch.ID {
		return fmt.Errorf("fakeTurns: unknown branch %s", b)
	}
	return nil
}

func (f *fakeTurns) Names(context.Context) (string, string, error) {
	return "openai", "gpt-4o-mini", nil
}
func (f *fakeTurns) Session(context.Context, messages.SessionID) (api.Session, error) {
	return api.Session{}, errFakeTurns
}
func (f *fakeTurns) LatestSession(context.Context) (api.Session, bool, error) {
	return api.Session{}, false, errFakeTurns
}
func (f *fakeTurns) CreateSession(context.Context, string) (api.Branch, error) {
	return api.Branch{}, errFakeTurns
}
func (f *fakeTurns) BranchRow(context.Context, messages.BranchID) (api.Branch, error) {
	return api.Branch{}, errFakeTurns
}
func (f *fakeTurns) Branches(context.Context, messages.SessionID) ([]api.Branch, error) {
	return nil, errFakeTurns
}
func (f *fakeTurns) Info(_ context.Context, b messages.BranchID) (api.BranchInfo, error) {
	f.call("Info")
	return f.info(), f.checkBranch(b)
}
func (f *fakeTurns) Submit(context.Context, messages.BranchID, string, func(Update)) (uint64, Update, error) {
	return 0, Update{}, errFakeTurns
}
func (f *fakeTurns) Cancel(context.Context, messages.BranchID) error { return errFakeTurns }

// History pages the transcript as the contract says: up to n entries
// ending before node before (zero: the newest), and the first of them
// as the cursor of the page older than it.
func (f *fakeTurns) History(_ context.Context, b messages.BranchID, before messages.NodeID, n int) ([]Entry, messages.NodeID, error) {
	f.call("History %d", n)
	if err := f.checkBranch(b); err != nil {
		return nil, messages.TurnID{}, err
	}
	end := len(f.entries)
	if !before.IsZero() {
		end = -1
		for i, n := range f.nodes {
			if n == before {
				end = i
			}
		}
		if end < 0 {
			return nil, messages.NodeID{}, fmt.Errorf("fakeTurns: no node %s", before)
		}
	}
	start := max(0, end-n)
	var next messages.NodeID
	if start > 0 {
		next = f.nodes[start]
	}
	return append([]Entry(nil), f.entries[start:end]...), next, nil
}

func (f *fakeTurns) TurnAt(_ context.Context, b messages.BranchID, seq uint64) (api.Turn, error) {
	f.call("TurnAt %d", seq)
	if err := f.checkBranch(b); err != nil {
		return api.Turn{}, err
	}
	if seq == 0 || seq > uint64(len(f.turns)) {
		return api.Turn{}, fmt.Errorf("%w: branch %s has no turn %d", persistence.ErrNodeNotFound, b, seq)
	}
	return f.turns[seq-1], nil
}

func (f *fakeTurns) Turn(_ context.Context, b messages.BranchID, turn messages.TurnID) (api.TurnInfo, error) {
	f.call("Turn")
	if err := f.checkBranch(b); err != nil {
		return api.TurnInfo{}, err
	}
	info, ok := f.infos[turn]
	if !ok {
		return api.TurnInfo{}, persistence.ErrNodeNotFound
	}
	return info, nil
}

func (f *fakeTurns) Pending(_ context.Context, b messages.BranchID) ([]messages.PendingTurn, error) {
	f.call("Pending")
	return append([]messages.PendingTurn(nil), f.pending...), f.checkBranch(b)
}

func (f *fakeTurns) CommitPending(_ context.Context, b messages.BranchID) error {
	f.call("CommitPending")
	if err := f.checkBranch(b); err != nil {
		return err
	}
	if f.commitErr != nil {
		return f.commitErr
	}
	f.pending = nil
	return nil
}

func (f *fakeTurns) Fork(context.Context, messages.BranchID, messages.NodeID, string) (api.Branch, error) {
	return api.Branch{}, errFakeTurns
}
func (f *fakeTurns) DeleteBranch(context.Context, messages.BranchID) (api.Deleted, error) {
	return api.Deleted{}, errFakeTurns
}
func (f *fakeTurns) Pin(context.Context, messages.BranchID, string) (messages.PinnedFact, error) {
	return messages.PinnedFact{}, errFakeTurns
}
func (f *fakeTurns) Pins(context.Context, messages.BranchID) ([]messages.PinnedFact, error) {
	return nil, errFakeTurns
}
func (f *fakeTurns) Unpin(context.Context, messages.BranchID, uint64) error { return errFakeTurns }
func (f *fakeTurns) EditPin(context.Context, messages.BranchID, uint64, string) (messages.PinnedFact, error) {
	return messages.PinnedFact{}, errFakeTurns
}

func (f *fakeTurns) ModelNames(context.Context) ([]string, error) {
	f.call("ModelNames")
	return append([]string(nil), f.models...), nil
}

func (f *fakeTurns) SelectModel(_ context.Context, b messages.BranchID, name string) error {
	f.call("SelectModel %s", name)
	if err := f.checkBranch(b); err != nil {
		return err
	}
	if f.selectErr != nil {
		return f.selectErr
	}
	f.model = name
	return nil
}

func (f *fakeTurns) Search(_ context.Context, b messages.BranchID, query string, k int) ([]api.Hit, error) {
	f.call("Search %q %d", query, k)
	if err := f.checkBranch(b); err != nil {
		return nil, err
	}
	if f.searchErr != nil {
		return nil, f.searchErr
	}
	return f.hits[:min(k, len(f.hits))], nil
}

func (f *fakeTurns) Context(_ context.Context, b messages.BranchID, seq uint64, text string) (api.ContextDebug, error) {
	f.call("Context %d %q", seq, text)
	if err := f.checkBranch(b); err != nil {
		return api.ContextDebug{}, err
	}
	if err, ok := f.debugErrs[seq]; ok {
		return api.ContextDebug{}, err
	}
	d, ok := f.debugs[seq]
	if !ok {
		return api.ContextDebug{}, fmt.Errorf("%w: branch %s has no turn %d", persistence.ErrNodeNotFound, b, seq)
	}
	return d, nil
}

func (f *fakeTurns) Recovered(_ context.Context, b messages.BranchID, turn messages.TurnID) (string, bool, error) {
	f.call("Recovered")
	info, ok := f.infos[turn]
	if !ok || info.Partial == nil {
		return "", false, f.checkBranch(b)
	}
	return info.Partial.Text, true, f.checkBranch(b)
}
