// Package core is the deterministic heart of ContextInfinity: the state
// machine of one branch. It does no I/O, reads no clock, starts no
// goroutines and draws no random numbers; time and ids come in as
// arguments.
//
// The shell (the branch actor) drives it in three steps, as raft's RawNode
// is driven:
//
//  1. A command method (Submit, Start, Finalize, Commit, …) decides: it
//     checks the request against the branch and returns the events to
//     record, or an error. It never mutates the branch.
//  2. The shell persists the events, then calls Apply for each; Apply is
//     the only mutator and returns the effects the event calls for
//     (PrepareContext, Summarize, Index, TurnDone).
//  3. The shell executes the effects.
//
// After a restart the shell replays the log through Apply, ignoring the
// effects, and calls Recover for the events and effects still owed. A
// Branch encodes to JSON exactly, for snapshots.
package core

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// WindowMax is the most transcript nodes Branch.Window holds.
const WindowMax = 12

// Turn is a turn the branch still tracks (SRD §5.6): from acceptance until
// it is indexed (Done) or has failed.
type Turn struct {
	ID          messages.TurnID    `json:"id"` // also the transcript node of the user message
	Seq         uint64             `json:"seq"`
	Phase       messages.TurnPhase `json:"phase"`
	StateBefore messages.StateID   `json:"state_before"`
	StateAfter  messages.StateID   `json:"state_after"` // set at StateCommitted
	Step        messages.StepID    `json:"step"`        // the provider step, set at ResponseStarted
	Reply       messages.NodeID    `json:"reply"`       // the assistant message node, set at ResponseFinalized
	// Outcome is how the step ended, set at ResponseFinalized; zero for a
	// pending turn carried into a fork.
	Outcome messages.StepOutcome `json:"outcome,omitzero"`
	// Loop holds, within a tool loop (SRD §12.2), what the turn's earlier
	// steps produced and the tool outputs answering their calls, in
	// order: the continuation of the next step, and the start of the
	// reply once the response is finalized.
	Loop messages.Items `json:"loop,omitempty"`
	// Steps counts the provider steps started for the turn.
	Steps uint32 `json:"steps,omitempty"`
	// System, Tools, ToolChoice and Params are what an API client sent
	// with the turn (TurnAccepted; see Client): every provider step of
	// the turn uses them, and a call of one of Tools is the client's to
	// run (the turn awaits its result: Awaiting). They are dropped once
	// the response is finalized.
	System     string              `json:"system,omitempty"`
	Tools      []messages.Tool     `json:"tools,omitempty"`
	ToolChoice messages.ToolChoice `json:"tool_choice,omitzero"`
	Params     messages.GenParams  `json:"params,omitzero"`
	// MemoryTools is the branch's memory tools setting when the turn was
	// accepted: every step of the turn, one resumed after a restart
	// too, is offered the tools it says, whatever the branch selects
	// after.
	MemoryTools messages.MemoryTools `json:"memory_tools,omitempty"`
	// Reason is why the turn failed. Apply stops tracking a failed turn as
	// it reports it (TurnDone), so a tracked turn has none yet.
	Reason string    `json:"reason"`
	At     time.Time `json:"at"` // when the turn entered its phase
}

// Branch is the state of one branch, rebuilt by applying its events in
// order. Its fields are exported so that it encodes as a snapshot; only
// Apply changes them.
type Branch struct {
	ID      messages.BranchID  `json:"id"`
	Session messages.SessionID `json:"session"`
	Parent  messages.BranchID  `json:"parent"`
	Created bool               `json:"created"`
	// Tip is the last transcript node on the branch: the user message of
	// the latest turn, or its reply once finalized.
	Tip messages.NodeID `json:"tip"`
	// State is the head state. Its pinned facts may be newer than the
	// stored checkpoint State.ID: they are folded in by the next commit.
	State messages.StateCheckpoint `json:"state"`
	// Epoch is the summary epoch, bumped by every StateCommitted,
	// FactPinned, FactUnpinned and FactEdited: a summary computed for an
	// older epoch is stale.
	Epoch   uint64 `json:"epoch"`
	TurnSeq uint64 `json:"turn_seq"` // the seq of the latest accepted turn
	// Turns holds, in seq order, the turns neither indexed nor failed:
	// committed ones awaiting their index, pending ones (finalized, not
	// committed) and at most one in flight.
	Turns     []Turn `json:"turns"`
	Committed uint64 `json:"committed"` // turns folded into a state
	Failed    uint64 `json:"failed"`
	Indexed   uint64 `json:"indexed"`
	// Window holds the transcript nodes (user message, reply) of the most
	// recently committed turns, oldest first, at most WindowMax: the
	// verbatim window of the next context.
	Window []messages.TurnID `json:"window"`
	// PinSeq is the id of the latest fact pinned on the branch (pins are
	// numbered 1, 2, … as they are pinned; a fork keeps its parent's).
	PinSeq uint64 `json:"pin_seq,omitempty"`
	// Pins is the pin history: every version of every fact pinned on the
	// branch since it was created, in the order recorded, with the
	// turn_seq range it was in effect (PinsAt). The live ones are
	// State.Pinned, by id.
	Pins []Pin `json:"pins,omitempty"`
	// Model is the name in config of the model the branch's turns use;
	// "" is the runtime's default.
	Model string `json:"model,omitempty"`
	// MemoryTools is the branch's memory tools setting for its next
	// turns (MemoryToolsSelected); a fork starts with its parent's.
	MemoryTools messages.MemoryTools `json:"memory_tools,omitempty"`
	// Forced are retrieval chunks chosen for the next turn's first
	// context (ChunksForced), cleared when its first step starts.
	Forced []messages.ChunkID `json:"forced,omitempty"`
	Events uint64             `json:"events"` // events applied
	// Policy decides when pending turns are folded into the summary. It
	// is configuration, not state: the shell sets it, and it is not part
	// of a snapshot.
	Policy Policy `json:"-"`
}

// OpenCalls returns the tool calls of t's loop that no output answers
// yet, in order.
func (t Turn) OpenCalls() []messages.ToolCall {
	answered := map[string]bool{}
	for _, it := range t.Loop {
		if o, ok := it.(messages.ToolOutput); ok {
			answered[o.CallID] = true
		}
	}
	var open []messages.ToolCall
	for _, it := range t.Loop {
		if c, ok := it.(messages.ToolCall); ok && !answered[c.CallID] {
			open = append(open, c)
		}
	}
	return open
}

// RuntimeToolSteps counts the steps of t's loop that called a tool
// other than the client's: the steps whose calls the runtime answers
// (runs them, or says it cannot), which tools.max_steps bounds. A step
// that called the client's tools only is not counted: a client's tool
// loop goes on as long as the client sends results.
func (t Turn) RuntimeToolSteps() int {
	n, counted := 0, false
	for _, it := range t.Loop {
		switch it := it.(type) {
		case messages.ToolOutput:
			counted = false // the step's outputs: the next item starts a step
		case messages.ToolCall:
			if !counted && !t.ClientTool(it.Name) {
				n, counted = n+1, true
			}
		}
	}
	return n
}

// ClientTool reports whether name is one of the client's tools of t
// (Turn.Tools): a call of it is run by the client, not the runtime.
func (t Turn) ClientTool(name string) bool {
	return slices.ContainsFunc(t.Tools, func(c messages.Tool) bool { return c.Name == name })
}

// Awaiting reports whether t waits for the results of client tool calls:
// it is responding, has open calls, and every one of them calls a client
// tool. Nothing runs for such a turn; Recover leaves it waiting.
func (t Turn) Awaiting() bool {
	if t.Phase != messages.PhaseResponding {
		return false
	}
	open := t.OpenCalls()
	return len(open) > 0 && !slices.ContainsFunc(open, func(c messages.ToolCall) bool { return !t.ClientTool(c.Name) })
}

// splitCalls splits calls into the runtime's and the client's.
func (t Turn) splitCalls(calls []messages.ToolCall) (runtime, client []messages.ToolCall) {
	for _, c := range calls {
		if t.ClientTool(c.Name) {
			client = append(client, c)
		} else {
			runtime = append(runtime, c)
		}
	}
	return runtime, client
}

// inFlight reports whether a turn in phase p awaits its response.
func inFlight(p messages.TurnPhase) bool {
	return p == messages.PhaseAccepted || p == messages.PhaseResponding
}

// Pending returns the turns whose response is finalized but not yet folded
// into a state, in order (SRD §6.2): they go into the next assembled
// context verbatim.
func (b *Branch) Pending() []Turn {
	n := 0
	for _, t := range b.Turns {
		if t.Phase == messages.PhaseResponseFinalized {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	ts := make([]Turn, 0, n) // sized once: a Turn is large
	for _, t := range b.Turns {
		if t.Phase == messages.PhaseResponseFinalized {
			ts = append(ts, t)
		}
	}
	return ts
}

// PendingRef names a pending turn as an assembled context does: its id
// (its user message's node) and its reply's node.
type PendingRef struct {
	ID    messages.TurnID
	Reply messages.NodeID
}

// PendingRefs returns the turns Pending returns, in order, by their
// PendingRef: without copying the turns, for each context assembled.
func (b *Branch) PendingRefs() []PendingRef {
	var out []PendingRef
	for _, t := range b.Turns {
		if t.Phase == messages.PhaseResponseFinalized {
			out = append(out, PendingRef{t.ID, t.Reply})
		}
	}
	return out
}

// InFlight returns the turn awaiting its response (Accepted or
// Responding), if any. There is at most one.
func (b *Branch) InFlight() (Turn, bool) {
	for _, t := range b.Turns {
		if inFlight(t.Phase) {
			return t, true
		}
	}
	return Turn{}, false
}

// Awaiting returns the turn in flight if it awaits the results of client
// tool calls (Turn.Awaiting).
func (b *Branch) Awaiting() (Turn, bool) {
	if t, ok := b.InFlight(); ok && t.Awaiting() {
		return t, true
	}
	return Turn{}, false
}

// Turn returns the tracked turn id. Turns indexed or failed are no longer
// tracked.
func (b *Branch) Turn(id messages.TurnID) (Turn, bool) {
	if i := b.find(id); i >= 0 {
		return b.Turns[i], true
	}
	return Turn{}, false
}

func (b *Branch) find(id messages.TurnID) int {
	return slices.IndexFunc(b.Turns, func(t Turn) bool { return t.ID == id })
}

// lookup returns the index of tracked turn id, or an error naming it.
func (b *Branch) lookup(id messages.TurnID) (int, error) {
	if id.IsZero() {
		return -1, invalid("turn: required")
	}
	i := b.find(id)
	if i < 0 {
		return -1, invalid("turn %s: not tracked by the branch", id)
	}
	return i, nil
}

// summarize returns the Summarize effect the policy calls for now, if
// any: see Policy.
func (b *Branch) summarize() []Effect {
	if s, ok := b.FoldDue(FoldAuto); ok {
		return []Effect{s}
	}
	return nil
}

// Apply applies ev, the only way a Branch changes, and returns the effects
// it calls for. It is deterministic: the same events applied in the same
// order to a zero Branch give the same branch and effects. It fails,
// leaving b unchanged, only for an event that cannot apply, which means a
// corrupt log; the error wraps ErrInvalid.
func (b *Branch) Apply(ev messages.BranchEvent) ([]Effect, error) {
	if err := b.check(ev); err != nil {
		if !errors.Is(err, ErrInvalid) {
			err = fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return nil, fmt.Errorf("apply %T: %w", ev, err)
	}
	b.Events++
	switch ev := ev.(type) {
	case messages.BranchCreated:
		b.ID, b.Session, b.Parent, b.Created = ev.Branch, ev.Session, ev.Parent, true
		b.Tip, b.State, b.TurnSeq, b.MemoryTools = ev.Tip, cloneState(ev.State), ev.TurnSeq, ev.MemoryTools
		b.Window = cloneList(ev.Window)
		b.createPins(ev)
		for _, p := range ev.Pending {
			b.Turns = append(b.Turns, Turn{ID: p.Turn, Seq: p.Seq, Phase: messages.PhaseResponseFinalized,
				StateBefore: ev.State.ID, Reply: p.Reply, At: ev.At.UTC()})
		}
		return b.summarize(), nil
	case messages.TurnAccepted:
		b.Turns = append(b.Turns, Turn{ID: ev.Turn, Seq: ev.Seq, Phase: messages.PhaseAccepted,
			StateBefore: ev.StateBefore, System: ev.System, Tools: cloneTools(ev.Tools), ToolChoice: ev.ToolChoice,
			Params: ev.Params.Clone(), MemoryTools: b.MemoryTools, At: ev.At.UTC()})
		b.TurnSeq, b.Tip = ev.Seq, ev.Turn
		return []Effect{PrepareContext{Turn: ev.Turn}}, nil
	case messages.TurnRecorded:
		b.Turns = append(b.Turns, Turn{ID: ev.Turn, Seq: ev.Seq, Phase: messages.PhaseResponseFinalized,
			StateBefore: b.State.ID, Reply: ev.Reply, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted},
			At: ev.At.UTC()})
		b.TurnSeq, b.Tip = ev.Seq, ev.Reply
		return b.summarize(), nil
	case messages.ResponseStarted:
		t := &b.Turns[b.find(ev.Turn)]
		t.Phase, t.Step, t.At = messages.PhaseResponding, ev.Step, ev.At.UTC()
		t.Steps++
		b.Forced = nil // offered to this turn's context
		return nil, nil
	case messages.ToolCallsIssued:
		t := &b.Turns[b.find(ev.Turn)]
		t.Loop = append(slices.Clone(t.Loop), ev.Items...)
		t.At = ev.At.UTC()
		// The runtime's calls run first; the client's are handed out
		// once no call of the runtime is open.
		runtime, client := t.splitCalls(t.OpenCalls())
		if len(runtime) > 0 {
			return []Effect{RunTools{Turn: ev.Turn, Step: ev.Step, Calls: runtime}}, nil
		}
		return []Effect{AwaitResults{Turn: ev.Turn, Step: ev.Step, Calls: client}}, nil
	case messages.ToolResultsRecorded:
		t := &b.Turns[b.find(ev.Turn)]
		t.Loop = append(slices.Clone(t.Loop), ev.Outputs...)
		t.At = ev.At.UTC()
		if ev.Next.IsZero() {
			if open := t.OpenCalls(); len(open) > 0 { // the client's (check)
				return []Effect{AwaitResults{Turn: ev.Turn, Step: t.Step, Calls: open}}, nil
			}
			return nil, nil
		}
		t.Step = ev.Next
		t.Steps++
		return []Effect{ContinueLoop{Turn: ev.Turn, Step: ev.Next}}, nil
	case messages.ModelSelected:
		b.Model = ev.Model
		return nil, nil
	case messages.MemoryToolsSelected:
		b.MemoryTools = ev.Setting
		return nil, nil
	case messages.ChunksForced:
		b.Forced = append(slices.Clone(b.Forced), ev.Chunks...)
		return nil, nil
	case messages.StepRetried:
		t := &b.Turns[b.find(ev.Turn)]
		t.Step, t.At = ev.Next, ev.At.UTC()
		t.Steps++
		return []Effect{RetryStep{Turn: ev.Turn, Step: ev.Next}}, nil
	case messages.ResponseFinalized:
		t := &b.Turns[b.find(ev.Turn)]
		t.Phase, t.Reply, t.Outcome, t.At = messages.PhaseResponseFinalized, ev.Reply, ev.Outcome, ev.At.UTC()
		t.Loop = nil
		t.System, t.Tools, t.ToolChoice, t.Params = "", nil, messages.ToolChoice{}, messages.GenParams{}
		b.Tip = ev.Reply
		return append([]Effect{TurnDone{Turn: ev.Turn, Phase: messages.PhaseResponseFinalized}}, b.summarize()...), nil
	case messages.TurnFailed:
		// The user message stays in the transcript: Tip keeps pointing
		// at it. The turn is reported (TurnDone) and no longer tracked.
		b.remove(b.find(ev.Turn))
		b.Failed++
		return []Effect{TurnDone{Turn: ev.Turn, Phase: messages.PhaseFailed}}, nil
	case messages.StateCommitted:
		b.State = cloneState(ev.State)
		b.Epoch++
		effects := make([]Effect, 0, len(ev.Turns)+1)
		for _, id := range ev.Turns {
			t := &b.Turns[b.find(id)]
			t.Phase, t.StateAfter, t.At = messages.PhaseStateCommitted, ev.State.ID, ev.At.UTC()
			b.Window = append(b.Window, t.ID, t.Reply)
			effects = append(effects, Index{Turn: id})
		}
		if n := len(b.Window); n > WindowMax {
			b.Window = slices.Clone(b.Window[n-WindowMax:])
		}
		b.Committed += uint64(len(ev.Turns))
		return append(effects, b.summarize()...), nil
	case messages.TurnIndexed:
		b.remove(b.find(ev.Turn))
		b.Indexed++
		return nil, nil
	case messages.FactPinned, messages.FactUnpinned, messages.FactEdited:
		b.applyPin(ev)
		return b.summarize(), nil
	}
	panic("unreachable: check accepted an unknown event")
}

// remove stops tracking the turn at index i. An empty list becomes nil,
// so that a snapshot decodes to an equal Branch.
func (b *Branch) remove(i int) {
	if b.Turns = slices.Delete(b.Turns, i, i+1); len(b.Turns) == 0 {
		b.Turns = nil
	}
}

// check reports whether ev can apply to b, with the error a command
// returns when it cannot.
func (b *Branch) check(ev messages.BranchEvent) error {
	if ev == nil {
		return invalid("nil event")
	}
	if _, ok := ev.(messages.BranchCreated); !ok && !b.Created {
		return ErrNotCreated
	}
	switch ev := ev.(type) {
	case messages.BranchCreated:
		return b.checkCreated(ev)
	case messages.TurnAccepted:
		if ev.Turn.IsZero() {
			return invalid("turn: required")
		}
		if b.find(ev.Turn) >= 0 {
			return fmt.Errorf("%w: turn %s is accepted already", ErrDuplicate, ev.Turn)
		}
		if t, ok := b.InFlight(); ok {
			return &BusyError{Turn: t.ID, Phase: t.Phase}
		}
		if ev.Seq != b.TurnSeq+1 {
			return invalid("turn %s: seq %d, want %d", ev.Turn, ev.Seq, b.TurnSeq+1)
		}
		if ev.StateBefore != b.State.ID {
			return invalid("turn %s: state_before %s, want the head state %s", ev.Turn, ev.StateBefore, b.State.ID)
		}
		return checkClient(Client{System: ev.System, Tools: ev.Tools, ToolChoice: ev.ToolChoice, Params: ev.Params})
	case messages.TurnRecorded:
		switch {
		case ev.Turn.IsZero():
			return invalid("turn: required")
		case ev.Reply.IsZero():
			return invalid("reply: required")
		case ev.Reply == ev.Turn:
			return invalid("reply: %s is the turn's own node", ev.Reply)
		case b.find(ev.Turn) >= 0:
			return fmt.Errorf("%w: turn %s is accepted already", ErrDuplicate, ev.Turn)
		case ev.Seq != b.TurnSeq+1:
			return invalid("turn %s: seq %d, want %d", ev.Turn, ev.Seq, b.TurnSeq+1)
		}
		if t, ok := b.InFlight(); ok {
			return &BusyError{Turn: t.ID, Phase: t.Phase}
		}
	case messages.ResponseStarted:
		i, err := b.lookup(ev.Turn)
		if err != nil {
			return err
		}
		if p := b.Turns[i].Phase; p != messages.PhaseAccepted {
			return invalid("turn %s is %s, want accepted", ev.Turn, p)
		}
		if ev.Step.IsZero() {
			return invalid("turn %s: step: required", ev.Turn)
		}
	case messages.ResponseFinalized:
		i, err := b.lookup(ev.Turn)
		if err != nil {
			return err
		}
		t := b.Turns[i]
		switch {
		case t.Phase != messages.PhaseResponding:
			return invalid("turn %s is %s, want responding", ev.Turn, t.Phase)
		case ev.Step != t.Step:
			return invalid("turn %s: step %s is not the running step %s", ev.Turn, ev.Step, t.Step)
		case ev.Reply.IsZero():
			return invalid("turn %s: reply: required", ev.Turn)
		case ev.Reply == ev.Turn:
			return invalid("turn %s: reply: must differ from the turn", ev.Turn)
		}
		switch ev.Outcome.Kind {
		case messages.OutcomeCompleted, messages.OutcomeIncomplete, messages.OutcomePaused:
		default:
			return invalid("turn %s: outcome %s does not finalize a response (fail the turn instead)", ev.Turn, ev.Outcome.Kind)
		}
		if open := t.OpenCalls(); len(open) > 0 {
			return invalid("turn %s: tool call %s has no output: record the tool results first", ev.Turn, open[0].CallID)
		}
	case messages.ToolCallsIssued:
		return b.checkCallsIssued(ev)
	case messages.ToolResultsRecorded:
		return b.checkResults(ev)
	case messages.StepRetried:
		i, err := b.responding(ev.Turn)
		if err != nil {
			return err
		}
		switch t := b.Turns[i]; {
		case ev.Step != t.Step:
			return invalid("turn %s: step %s is not the running step %s", ev.Turn, ev.Step, t.Step)
		case ev.Next.IsZero() || ev.Next == ev.Step:
			return invalid("turn %s: next: required, distinct from the step", ev.Turn)
		case len(t.OpenCalls()) > 0:
			return invalid("turn %s: tool calls are open", ev.Turn)
		}
	case messages.ChunksForced:
		switch n := len(b.Forced) + len(ev.Chunks); {
		case len(ev.Chunks) == 0:
			return invalid("chunks: required")
		case n > ForcedMax:
			return invalid("chunks: %d forced for the next turn, limit %d", n, ForcedMax)
		}
		for i, c := range ev.Chunks {
			if c.IsZero() {
				return invalid("chunks[%d]: required", i)
			}
		}
	case messages.ModelSelected:
		if len(ev.Model) > ModelNameMax {
			return invalid("model: %d bytes, limit %d", len(ev.Model), ModelNameMax)
		}
	case messages.MemoryToolsSelected:
		if !ev.Setting.Valid() {
			return invalid("memory_tools: %s, want default, on or off", ev.Setting)
		}
	case messages.TurnFailed:
		i, err := b.lookup(ev.Turn)
		if err != nil {
			return err
		}
		t := b.Turns[i]
		if !inFlight(t.Phase) {
			return invalid("turn %s is %s: only a turn in flight can fail", ev.Turn, t.Phase)
		}
		if ev.Step != t.Step {
			return invalid("turn %s: step %s is not the running step %s", ev.Turn, ev.Step, t.Step)
		}
	case messages.StateCommitted:
		return b.checkCommitted(ev)
	case messages.TurnIndexed:
		i, err := b.lookup(ev.Turn)
		if err != nil {
			return err
		}
		if p := b.Turns[i].Phase; p != messages.PhaseStateCommitted {
			return invalid("turn %s is %s, want state_committed", ev.Turn, p)
		}
		if ev.Chunks < 0 {
			return invalid("turn %s: chunks: %d is negative", ev.Turn, ev.Chunks)
		}
	case messages.FactPinned:
		if ev.Fact == "" {
			return invalid("fact: required")
		}
	case messages.FactUnpinned:
		return b.checkPin(ev.Pin)
	case messages.FactEdited:
		if err := b.checkPin(ev.Pin); err != nil {
			return err
		}
		if ev.Fact == "" {
			return invalid("fact: required")
		}
	default:
		return invalid("unsupported event %T", ev)
	}
	return nil
}

// ForcedMax is the most chunks forced into one turn.
const ForcedMax = 64

// ModelNameMax is the longest model name a branch records, in bytes.
const ModelNameMax = 128

// responding returns the index of turn, which must be responding.
func (b *Branch) responding(turn messages.TurnID) (int, error) {
	i, err := b.lookup(turn)
	if err != nil {
		return -1, err
	}
	if p := b.Turns[i].Phase; p != messages.PhaseResponding {
		return -1, invalid("turn %s is %s, want responding", turn, p)
	}
	return i, nil
}

func (b *Branch) checkCallsIssued(ev messages.ToolCallsIssued) error {
	i, err := b.responding(ev.Turn)
	if err != nil {
		return err
	}
	t := b.Turns[i]
	switch {
	case ev.Step != t.Step:
		return invalid("turn %s: step %s is not the running step %s", ev.Turn, ev.Step, t.Step)
	case len(t.OpenCalls()) > 0:
		return invalid("turn %s: tool calls are open already", ev.Turn)
	}
	seen := map[string]bool{}
	for _, it := range t.Loop {
		if c, ok := it.(messages.ToolCall); ok {
			seen[c.CallID] = true
		}
	}
	calls := 0
	for j, it := range ev.Items {
		switch it := it.(type) {
		case nil:
			return invalid("items[%d]: nil", j)
		case messages.ToolOutput:
			return invalid("items[%d]: a tool output (record outputs as tool results)", j)
		case messages.ToolCall:
			if it.CallID == "" || it.Name == "" {
				return invalid("items[%d]: tool call needs a call_id and a name", j)
			}
			if seen[it.CallID] {
				return invalid("items[%d]: call_id %q is used already in this turn", j, it.CallID)
			}
			seen[it.CallID] = true
			calls++
		}
	}
	if calls == 0 {
		return invalid("turn %s: items: no tool call", ev.Turn)
	}
	return nil
}

func (b *Branch) checkResults(ev messages.ToolResultsRecorded) error {
	i, err := b.responding(ev.Turn)
	if err != nil {
		return err
	}
	t := b.Turns[i]
	open := t.OpenCalls()
	if len(open) == 0 {
		return invalid("turn %s: no tool call is open", ev.Turn)
	}
	if len(ev.Outputs) == 0 {
		return invalid("turn %s: outputs: required", ev.Turn)
	}
	want := map[string]bool{}
	for _, c := range open {
		want[c.CallID] = true
	}
	for j, it := range ev.Outputs {
		o, ok := it.(messages.ToolOutput)
		if !ok {
			return invalid("outputs[%d]: %T, want a tool output", j, it)
		}
		if !want[o.CallID] {
			return invalid("outputs[%d]: call_id %q answers no open tool call", j, o.CallID)
		}
		delete(want, o.CallID)
	}
	// Calls of the client's tools may stay open, awaiting the client,
	// when the loop does not go on yet: the runtime's calls of a step
	// are answered before the client's.
	for _, c := range open {
		if want[c.CallID] && (!ev.Next.IsZero() || !t.ClientTool(c.Name)) {
			return invalid("outputs: tool call %s has no output", c.CallID)
		}
	}
	if !ev.Next.IsZero() && ev.Next == t.Step {
		return invalid("turn %s: next: %s is the step that just ended", ev.Turn, ev.Next)
	}
	return nil
}

func (b *Branch) checkCreated(ev messages.BranchCreated) error {
	switch {
	case b.Created:
		return fmt.Errorf("%w: branch %s", ErrExists, b.ID)
	case ev.Branch.IsZero():
		return invalid("branch: required")
	case ev.Session.IsZero():
		return invalid("session: required")
	case ev.Parent.IsZero() != ev.ForkAt.IsZero():
		return invalid("parent and fork_at: set both for a fork, neither for a new branch")
	case !ev.MemoryTools.Valid():
		return invalid("memory_tools: %s, want default, on or off", ev.MemoryTools)
	}
	var prev uint64
	for i, p := range ev.Pending {
		switch {
		case p.Turn.IsZero():
			return invalid("pending[%d].turn: required", i)
		case p.Reply.IsZero() || p.Reply == p.Turn:
			return invalid("pending[%d].reply: required, distinct from the turn", i)
		case p.Seq <= prev:
			return invalid("pending[%d].seq: %d, want more than %d", i, p.Seq, prev)
		case p.Seq > ev.TurnSeq:
			return invalid("pending[%d].seq: %d is after the fork point's turn_seq %d", i, p.Seq, ev.TurnSeq)
		case slices.ContainsFunc(ev.Pending[:i], func(q messages.PendingTurn) bool { return q.Turn == p.Turn }):
			return invalid("pending[%d].turn: %s is listed twice", i, p.Turn)
		}
		prev = p.Seq
	}
	switch {
	case len(ev.Window) > WindowMax:
		return invalid("window: %d nodes, want at most %d", len(ev.Window), WindowMax)
	case len(ev.Window)%2 != 0:
		return invalid("window: %d nodes, want pairs of a user message and its reply", len(ev.Window))
	case ev.Tip.IsZero() && len(ev.Window) > 0:
		return invalid("window: %d nodes on a branch with no tip", len(ev.Window))
	}
	for i, n := range ev.Window {
		if n.IsZero() {
			return invalid("window[%d]: required", i)
		}
	}
	return checkCreatedPins(ev)
}

// checkCommitted checks a commit: first whether its state_seq exists
// already (a commit delivered twice), then the epoch compare-and-swap,
// then the rest.
func (b *Branch) checkCommitted(ev messages.StateCommitted) error {
	s := ev.State
	if s.Seq <= b.State.Seq && b.State.Seq > 0 {
		return fmt.Errorf("%w: state_seq %d is committed already (head is %d)", ErrDuplicate, s.Seq, b.State.Seq)
	}
	if ev.Epoch != b.Epoch {
		return fmt.Errorf("%w: summary computed for epoch %d, the branch is at epoch %d", ErrStaleEpoch, ev.Epoch, b.Epoch)
	}
	switch {
	case s.Seq != b.State.Seq+1:
		return invalid("state.seq: %d, want %d", s.Seq, b.State.Seq+1)
	case s.ID.IsZero():
		return invalid("state.id: required")
	case s.ID == b.State.ID:
		return invalid("state.id: %s is the head already", s.ID)
	case !slices.Equal(s.Pinned, b.State.Pinned):
		return invalid("state.pinned: %q, want the head's pinned facts %q", s.Pinned, b.State.Pinned)
	}
	if ev.Shrunk {
		switch {
		case len(ev.Turns) > 0:
			return invalid("turns: %d turns in a shrunk state, want none (it folds no turn)", len(ev.Turns))
		case len(s.Summary) >= len(b.State.Summary):
			return invalid("state.summary: %d bytes in a shrunk state, want fewer than the head's %d", len(s.Summary), len(b.State.Summary))
		}
		return nil
	}
	pending := b.Pending()
	if len(ev.Turns) == 0 || len(ev.Turns) > len(pending) {
		return invalid("turns: %d turns, want 1 to %d (a prefix of the pending turns)", len(ev.Turns), len(pending))
	}
	for i, id := range ev.Turns {
		if id != pending[i].ID {
			return invalid("turns[%d]: %s, want %s (a prefix of the pending turns, in order)", i, id, pending[i].ID)
		}
	}
	return nil
}

// Client is what an API client sends with a turn beside its message
// (Branch.SubmitFor): its system prompt, its own tools, its tool choice
// and its generation settings (carried as they are: the runtime checks
// them before submitting, and a replayed log must not fail on a rule
// made later).
type Client struct {
	System     string
	Tools      []messages.Tool
	ToolChoice messages.ToolChoice
	Params     messages.GenParams
}

// checkClient checks what a client sent with a turn: its tools named,
// each name once, and a known tool choice naming one of the tools when
// it names one.
func checkClient(c Client) error {
	for i, t := range c.Tools {
		if t.Name == "" {
			return invalid("tools[%d].name: required", i)
		}
		if j := slices.IndexFunc(c.Tools[:i], func(u messages.Tool) bool { return u.Name == t.Name }); j >= 0 {
			return invalid("tools[%d].name: %q is tools[%d]'s already", i, t.Name, j)
		}
	}
	switch ch := c.ToolChoice; ch.Mode {
	case "", messages.ToolChoiceAuto, messages.ToolChoiceNone, messages.ToolChoiceRequired:
		if ch.Name != "" {
			return invalid("tool_choice.name: only with mode %q", messages.ToolChoiceTool)
		}
	case messages.ToolChoiceTool:
		if ch.Name == "" {
			return invalid("tool_choice.name: required with mode %q", messages.ToolChoiceTool)
		}
	default:
		return invalid("tool_choice.mode: %q, want auto, none, required or tool", ch.Mode)
	}
	return nil
}

// cloneTools returns a copy of tools, nil when empty, with empty input
// schemas nil, as they decode.
func cloneTools(tools []messages.Tool) []messages.Tool {
	out := cloneList(tools)
	for i := range out {
		if len(out[i].InputSchema) == 0 {
			out[i].InputSchema = nil
		} else {
			out[i].InputSchema = slices.Clone(out[i].InputSchema)
		}
	}
	return out
}

// cloneState returns s with its own copy of Pinned; an empty list becomes
// nil, as it decodes.
func cloneState(s messages.StateCheckpoint) messages.StateCheckpoint {
	s.Pinned = cloneList(s.Pinned)
	return s
}

// cloneList returns a copy of s, nil when s is empty.
func cloneList[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
