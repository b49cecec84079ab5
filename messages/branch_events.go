package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrInvalidEvent is returned when a branch event cannot be encoded or
// decoded: it is not a JSON object, a field has the wrong type, or a
// required field is missing. An event whose "type" names no branch event
// fails with ErrUnknownValue instead.
var ErrInvalidEvent = errors.New("messages: invalid branch event")

// BranchEvent is a fact recorded in a branch's log: BranchCreated,
// TurnAccepted, ResponseStarted, ToolCallsIssued, ToolResultsRecorded,
// ResponseFinalized, TurnFailed, StateCommitted, TurnIndexed, FactPinned,
// FactUnpinned, FactEdited, ModelSelected, MemoryToolsSelected,
// StepRetried, TurnRecorded or ChunksForced. The set is closed. Events are
// persisted, then applied in order by the branch state machine; replaying
// the log rebuilds the branch.
//
// On the wire an event is a JSON object tagged by "type", with snake_case
// fields (see MarshalBranchEvent). Times are written in UTC as RFC 3339
// text and decode in UTC.
type BranchEvent interface {
	branchEvent()
}

// StateCheckpoint is a committed working state (SRD §5.5): the bounded
// summary of the turns folded so far and the facts pinned verbatim. Seq is
// the branch-local state_seq; a branch holds one checkpoint per Seq.
//
//	{"id":"01J…","seq":3,"summary":"…","pinned":["use tabs"]}
//
// Pinned is left out when empty and decodes as nil.
type StateCheckpoint struct {
	ID      StateID
	Seq     uint64
	Summary string
	Pinned  []string
}

// PinnedFact is a fact pinned on a branch, addressed by ID: the n-th fact
// pinned on the branch has ID n (a fork keeps its parent's ids). Seq is
// the branch's turn_seq when the fact was pinned or last edited, At when.
type PinnedFact struct {
	ID   uint64    `json:"id"`
	Fact string    `json:"fact"`
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
}

// PendingTurn is a finalized turn not yet folded into a state, carried into
// a fork so that it still reaches the fork's context (SRD §6.2). Reply is
// the transcript node of its assistant message.
type PendingTurn struct {
	Turn  TurnID `json:"turn"`
	Seq   uint64 `json:"seq"`
	Reply NodeID `json:"reply"`
}

// BranchCreated starts a branch: a new one (Parent and ForkAt zero) or a
// fork of Parent at turn ForkAt. Tip is the transcript node the branch
// starts at (zero for an empty branch), State its base state, Pending the
// finalized turns of the parent not folded into State, in order, and
// TurnSeq the turn_seq at the fork point. Window is the verbatim window
// at the fork point (the transcript nodes of the parent's last committed
// turns, user message and reply, oldest first), which the fork's next
// contexts show as the parent's would; a branch created without one (as
// logs written before forks carried it) starts with none. Pins, if any, are the pinned
// facts of State.Pinned with their ids, as they stood at the fork point;
// a branch created without them (as logs written before pins had ids)
// numbers State.Pinned 1, 2, … in order. MemoryTools is the branch's
// memory tools setting (a fork's is its parent's), written only when it
// is not the default, so that an event without it reads as the default.
//
//	{"type":"branch_created","session":"…","branch":"…","parent":"","fork_at":"","tip":"",
//	 "state":{…},"pins":[{"id":1,"fact":"…","seq":2,"at":"…"}],"turn_seq":0,"at":"2025-01-02T03:04:05Z"}
type BranchCreated struct {
	Session     SessionID
	Branch      BranchID
	Parent      BranchID
	ForkAt      NodeID
	Tip         NodeID
	State       StateCheckpoint
	Pins        []PinnedFact
	Pending     []PendingTurn
	Window      []NodeID
	TurnSeq     uint64
	MemoryTools MemoryTools
	At          time.Time
}

// TurnAccepted records a user message accepted as turn Seq (TX-0). Turn is
// also the transcript node of the user message; StateBefore is the head
// state at acceptance.
//
// System, Tools, ToolChoice and Params are what an API client sent with
// the turn (the proxy), empty for other turns: its system prompt, its own
// tools (the runtime does not run them: a step that calls one waits for
// the client's results), its tool choice and its generation settings.
// Every provider step of the turn uses them. Each is written only when
// set; an event written before Params existed reads as none.
//
//	{"type":"turn_accepted","turn":"…","seq":1,"state_before":"…","at":"…"}
//	{"type":"turn_accepted",…,"system":"…","tools":[{"name":"…",…}],"tool_choice":{"mode":"auto"},"params":{"temperature":0.2},"at":"…"}
type TurnAccepted struct {
	Turn        TurnID
	Seq         uint64
	StateBefore StateID
	System      string
	Tools       []Tool
	ToolChoice  ToolChoice
	Params      GenParams
	At          time.Time
}

// ResponseStarted records that the context of Turn was prepared and
// provider step Step started streaming: the turn is responding.
//
//	{"type":"response_started","turn":"…","step":"…","at":"…"}
type ResponseStarted struct {
	Turn TurnID
	Step StepID
	At   time.Time
}

// ToolCallsIssued records that provider step Step of Turn ended asking
// for tools (SRD §12.2): Items is what the step produced, its tool calls
// among them. It is recorded before any call runs, so a crash while a tool
// runs leaves the call on record, to be answered on recovery rather than
// run twice.
//
//	{"type":"tool_calls_issued","turn":"…","step":"…","items":[…],"at":"…"}
type ToolCallsIssued struct {
	Turn  TurnID
	Step  StepID
	Items Items
	At    time.Time
}

// ToolResultsRecorded records the outputs answering the tool calls Turn's
// loop has open, one each, and Next, the provider step started to go on
// with the loop; Next is zero when the loop ends here (a step limit, a
// cancellation, a crash) and the response is finalized next.
//
//	{"type":"tool_results_recorded","turn":"…","outputs":[…],"next":"…","at":"…"}
type ToolResultsRecorded struct {
	Turn    TurnID
	Outputs Items
	Next    StepID
	At      time.Time
}

// StepRetried records that provider step Step of Turn was given up (the
// provider rejected its context for size) and step Next runs instead,
// on a context assembled smaller; Reason says why.
//
//	{"type":"step_retried","turn":"…","step":"…","next":"…","reason":"context too large","at":"…"}
type StepRetried struct {
	Turn   TurnID
	Step   StepID
	Next   StepID
	Reason string
	At     time.Time
}

// ModelSelected records the model the branch's next turns use, by its
// name in config; "" goes back to the default model. History is not
// rewritten: it is stored provider-neutral.
//
//	{"type":"model_selected","model":"claude","at":"…"}
type ModelSelected struct {
	Model string
	At    time.Time
}

// MemoryToolsSelected records the branch's memory tools setting for its
// next turns: on, off, or the runtime's config's (default). A turn
// accepted before keeps the setting it was accepted with.
//
//	{"type":"memory_tools_selected","memory_tools":"on","at":"…"}
type MemoryToolsSelected struct {
	Setting MemoryTools
	At      time.Time
}

// ResponseFinalized records the final assistant message of Turn (TX-A, the
// user-visible durability boundary). Reply is the transcript node of the
// assistant message; Displayed and Durable count the streamed bytes shown
// and journaled.
//
//	{"type":"response_finalized","turn":"…","step":"…","reply":"…",
//	 "outcome":{"kind":"completed"},"displayed":120,"durable":120,"at":"…"}
type ResponseFinalized struct {
	Turn      TurnID
	Step      StepID
	Reply     NodeID
	Outcome   StepOutcome
	Displayed uint64
	Durable   uint64
	At        time.Time
}

// TurnFailed records that Turn failed before its response was finalized.
// Step is the provider step that was running, zero if none. Code is why,
// one of the Fail* codes (left out of the JSON when empty, as in events
// written before codes were recorded); Reason says it in words.
//
//	{"type":"turn_failed","turn":"…","step":"","code":"provider_error","reason":"provider: overloaded","at":"…"}
type TurnFailed struct {
	Turn   TurnID
	Step   StepID
	Code   string
	Reason string
	At     time.Time
}

// StateCommitted records a new head state (TX-B): State folds Turns, in
// order, into the previous head. Epoch is the summary epoch the state was
// computed for. A Shrunk state folds no turn: it is the previous head's
// summary rewritten shorter by the context shrinker (SRD §7.3 step 4).
//
//	{"type":"state_committed","state":{…},"turns":["…"],"epoch":0,"at":"…"}
//	{"type":"state_committed","state":{…},"shrunk":true,"epoch":3,"at":"…"}
type StateCommitted struct {
	State  StateCheckpoint
	Turns  []TurnID
	Shrunk bool
	Epoch  uint64
	At     time.Time
}

// TurnIndexed records that Turn was split into Chunks retrieval chunks and
// indexed (TX-C).
//
//	{"type":"turn_indexed","turn":"…","chunks":3,"at":"…"}
type TurnIndexed struct {
	Turn   TurnID
	Chunks int
	At     time.Time
}

// FactPinned records a fact pinned by the user: it is kept verbatim in every
// later state. It carries no id: the n-th fact pinned on a branch is pin n
// (see PinnedFact), so that logs written before pins had ids replay to the
// same ids.
//
//	{"type":"fact_pinned","fact":"answer in French","at":"…"}
type FactPinned struct {
	Fact string
	At   time.Time
}

// FactUnpinned records that pin Pin was unpinned: later contexts and
// states no longer show it.
//
//	{"type":"fact_unpinned","pin":3,"at":"…"}
type FactUnpinned struct {
	Pin uint64
	At  time.Time
}

// FactEdited records that the text of pin Pin was replaced by Fact; the
// pin keeps its id and its place among the pinned facts.
//
//	{"type":"fact_edited","pin":3,"fact":"answer in English","at":"…"}
type FactEdited struct {
	Pin  uint64
	Fact string
	At   time.Time
}

func (BranchCreated) branchEvent()       {}
func (TurnAccepted) branchEvent()        {}
func (ResponseStarted) branchEvent()     {}
func (ResponseFinalized) branchEvent()   {}
func (TurnFailed) branchEvent()          {}
func (StateCommitted) branchEvent()      {}
func (TurnIndexed) branchEvent()         {}
func (FactPinned) branchEvent()          {}
func (FactUnpinned) branchEvent()        {}
func (FactEdited) branchEvent()          {}
func (ToolCallsIssued) branchEvent()     {}
func (ToolResultsRecorded) branchEvent() {}
func (ModelSelected) branchEvent()       {}
func (MemoryToolsSelected) branchEvent() {}
func (StepRetried) branchEvent()         {}
func (TurnRecorded) branchEvent()        {}
func (ChunksForced) branchEvent()        {}

// ChunksForced records retrieval chunks the user chose for the branch's
// next turn: its first context offers them ahead of the search's hits.
//
//	{"type":"chunks_forced","chunks":["…"],"at":"…"}
type ChunksForced struct {
	Chunks []ChunkID
	At     time.Time
}

// TurnRecorded records an exchange taken as it is, with no provider step
// (an import, or an evaluation harness feeding a conversation): Turn is
// the transcript node of the user message, Reply the assistant's. The
// turn is finalized at once and then folded and indexed like any other.
//
//	{"type":"turn_recorded","turn":"…","seq":4,"reply":"…","at":"…"}
type TurnRecorded struct {
	Turn  TurnID
	Seq   uint64
	Reply NodeID
	At    time.Time
}

// MarshalBranchEvent returns the JSON form of ev, tagged by "type":
// "branch_created", "turn_accepted", "response_started",
// "tool_calls_issued", "tool_results_recorded", "step_retried", "response_finalized",
// "turn_failed", "state_committed", "turn_indexed", "fact_pinned",
// "fact_unpinned", "fact_edited", "model_selected", "memory_tools_selected",
// "turn_recorded" or "chunks_forced". Every field is written, except empty
// lists and a BranchCreated's default memory tools setting. Zero IDs
// are written as "". It fails with ErrInvalidEvent when a required field
// is zero (the ids naming what the event is about, a finalized outcome) or
// a time lies outside years 0–9999.
func MarshalBranchEvent(ev BranchEvent) ([]byte, error) {
	var w *writer
	switch ev := ev.(type) {
	case BranchCreated:
		w = newWriter(scope{ErrInvalidEvent, "branch_created"})
		writeID(w, "session", ev.Session, true)
		writeID(w, "branch", ev.Branch, true)
		writeID(w, "parent", ev.Parent, false)
		writeID(w, "fork_at", ev.ForkAt, false)
		writeID(w, "tip", ev.Tip, false)
		w.state("state", ev.State)
		if len(ev.Pins) > 0 {
			w.value("pins", ev.Pins)
		}
		if len(ev.Pending) > 0 {
			w.value("pending", ev.Pending)
		}
		if len(ev.Window) > 0 {
			w.value("window", ev.Window)
		}
		w.value("turn_seq", ev.TurnSeq)
		if ev.MemoryTools != MemoryToolsDefault {
			writeMemoryTools(w, ev.MemoryTools)
		}
		w.time("at", ev.At)
	case TurnAccepted:
		w = newWriter(scope{ErrInvalidEvent, "turn_accepted"})
		writeID(w, "turn", ev.Turn, true)
		w.value("seq", ev.Seq)
		writeID(w, "state_before", ev.StateBefore, false)
		if ev.System != "" {
			w.str("system", ev.System)
		}
		if len(ev.Tools) > 0 {
			w.value("tools", ev.Tools)
		}
		if ev.ToolChoice != (ToolChoice{}) {
			w.value("tool_choice", ev.ToolChoice)
		}
		if !ev.Params.IsZero() {
			w.value("params", ev.Params)
		}
		w.time("at", ev.At)
	case TurnRecorded:
		w = newWriter(scope{ErrInvalidEvent, "turn_recorded"})
		writeID(w, "turn", ev.Turn, true)
		w.value("seq", ev.Seq)
		writeID(w, "reply", ev.Reply, true)
		w.time("at", ev.At)
	case ResponseStarted:
		w = newWriter(scope{ErrInvalidEvent, "response_started"})
		writeID(w, "turn", ev.Turn, true)
		writeID(w, "step", ev.Step, true)
		w.time("at", ev.At)
	case ToolCallsIssued:
		w = newWriter(scope{ErrInvalidEvent, "tool_calls_issued"})
		writeID(w, "turn", ev.Turn, true)
		writeID(w, "step", ev.Step, true)
		w.value("items", ev.Items)
		w.time("at", ev.At)
	case ToolResultsRecorded:
		w = newWriter(scope{ErrInvalidEvent, "tool_results_recorded"})
		writeID(w, "turn", ev.Turn, true)
		w.value("outputs", ev.Outputs)
		writeID(w, "next", ev.Next, false)
		w.time("at", ev.At)
	case StepRetried:
		w = newWriter(scope{ErrInvalidEvent, "step_retried"})
		writeID(w, "turn", ev.Turn, true)
		writeID(w, "step", ev.Step, true)
		writeID(w, "next", ev.Next, true)
		w.str("reason", ev.Reason)
		w.time("at", ev.At)
	case ChunksForced:
		w = newWriter(scope{ErrInvalidEvent, "chunks_forced"})
		w.value("chunks", ev.Chunks)
		w.time("at", ev.At)
	case ModelSelected:
		w = newWriter(scope{ErrInvalidEvent, "model_selected"})
		w.str("model", ev.Model)
		w.time("at", ev.At)
	case MemoryToolsSelected:
		w = newWriter(scope{ErrInvalidEvent, "memory_tools_selected"})
		writeMemoryTools(w, ev.Setting)
		w.time("at", ev.At)
	case ResponseFinalized:
		w = newWriter(scope{ErrInvalidEvent, "response_finalized"})
		writeID(w, "turn", ev.Turn, true)
		writeID(w, "step", ev.Step, true)
		writeID(w, "reply", ev.Reply, true)
		if ev.Outcome.Kind == 0 && w.err == nil {
			w.err = w.errorf("outcome", "is required")
		}
		w.value("outcome", ev.Outcome)
		w.value("displayed", ev.Displayed)
		w.value("durable", ev.Durable)
		w.time("at", ev.At)
	case TurnFailed:
		w = newWriter(scope{ErrInvalidEvent, "turn_failed"})
		writeID(w, "turn", ev.Turn, true)
		writeID(w, "step", ev.Step, false)
		if ev.Code != "" {
			w.str("code", ev.Code)
		}
		w.str("reason", ev.Reason)
		w.time("at", ev.At)
	case StateCommitted:
		w = newWriter(scope{ErrInvalidEvent, "state_committed"})
		if ev.State.ID.IsZero() && w.err == nil {
			w.err = w.errorf("state", "is invalid: field %q is required", "id")
		}
		w.state("state", ev.State)
		if len(ev.Turns) > 0 {
			w.value("turns", ev.Turns)
		}
		w.boolean("shrunk", ev.Shrunk)
		w.value("epoch", ev.Epoch)
		w.time("at", ev.At)
	case TurnIndexed:
		w = newWriter(scope{ErrInvalidEvent, "turn_indexed"})
		writeID(w, "turn", ev.Turn, true)
		w.value("chunks", ev.Chunks)
		w.time("at", ev.At)
	case FactPinned:
		w = newWriter(scope{ErrInvalidEvent, "fact_pinned"})
		w.str("fact", ev.Fact)
		w.time("at", ev.At)
	case FactUnpinned:
		w = newWriter(scope{ErrInvalidEvent, "fact_unpinned"})
		writePin(w, ev.Pin)
		w.time("at", ev.At)
	case FactEdited:
		w = newWriter(scope{ErrInvalidEvent, "fact_edited"})
		writePin(w, ev.Pin)
		w.str("fact", ev.Fact)
		w.time("at", ev.At)
	case nil:
		return nil, fmt.Errorf("%w: nil event", ErrInvalidEvent)
	default:
		return nil, fmt.Errorf("%w: unsupported type %T", ErrInvalidEvent, ev)
	}
	return w.finish()
}

// UnmarshalBranchEvent decodes the JSON form of a branch event. Fields it
// does not know are ignored; absent fields read as zero, except the
// required ones. A "type" that names no branch event fails with an error
// wrapping ErrUnknownValue that names it.
func UnmarshalBranchEvent(data []byte) (BranchEvent, error) {
	r, err := readObject(scope{sentinel: ErrInvalidEvent}, data)
	if err != nil {
		return nil, err
	}
	var ev BranchEvent
	switch r.kind = r.required("type"); r.kind {
	case "":
		return nil, r.err
	case "branch_created":
		var e BranchCreated
		e.Session = readID[sessionKind](r, "session", true)
		e.Branch = readID[branchKind](r, "branch", true)
		e.Parent = readID[branchKind](r, "parent", false)
		e.ForkAt = readID[nodeKind](r, "fork_at", false)
		e.Tip = readID[nodeKind](r, "tip", false)
		e.State = r.state("state")
		if r.decode("pins", &e.Pins) && len(e.Pins) == 0 {
			e.Pins = nil
		}
		for i := range e.Pins {
			e.Pins[i].At = e.Pins[i].At.UTC()
		}
		if r.decode("pending", &e.Pending) && len(e.Pending) == 0 {
			e.Pending = nil
		}
		if r.decode("window", &e.Window) && len(e.Window) == 0 {
			e.Window = nil
		}
		r.decode("turn_seq", &e.TurnSeq)
		if _, ok := r.fields["memory_tools"]; ok {
			e.MemoryTools = readMemoryTools(r)
		}
		e.At = r.time("at")
		ev = e
	case "turn_accepted":
		var e TurnAccepted
		e.Turn = readID[nodeKind](r, "turn", true)
		r.decode("seq", &e.Seq)
		e.StateBefore = readID[stateKind](r, "state_before", false)
		e.System = r.str("system")
		if r.decode("tools", &e.Tools) && len(e.Tools) == 0 {
			e.Tools = nil
		}
		r.decode("tool_choice", &e.ToolChoice)
		r.decode("params", &e.Params)
		e.At = r.time("at")
		ev = e
	case "turn_recorded":
		var e TurnRecorded
		e.Turn = readID[nodeKind](r, "turn", true)
		r.decode("seq", &e.Seq)
		e.Reply = readID[nodeKind](r, "reply", true)
		e.At = r.time("at")
		ev = e
	case "response_started":
		var e ResponseStarted
		e.Turn = readID[nodeKind](r, "turn", true)
		e.Step = readID[stepKind](r, "step", true)
		e.At = r.time("at")
		ev = e
	case "tool_calls_issued":
		var e ToolCallsIssued
		e.Turn = readID[nodeKind](r, "turn", true)
		e.Step = readID[stepKind](r, "step", true)
		r.unmarshal("items", &e.Items)
		e.At = r.time("at")
		ev = e
	case "tool_results_recorded":
		var e ToolResultsRecorded
		e.Turn = readID[nodeKind](r, "turn", true)
		r.unmarshal("outputs", &e.Outputs)
		e.Next = readID[stepKind](r, "next", false)
		e.At = r.time("at")
		ev = e
	case "step_retried":
		var e StepRetried
		e.Turn = readID[nodeKind](r, "turn", true)
		e.Step = readID[stepKind](r, "step", true)
		e.Next = readID[stepKind](r, "next", true)
		e.Reason = r.str("reason")
		e.At = r.time("at")
		ev = e
	case "chunks_forced":
		var e ChunksForced
		r.decode("chunks", &e.Chunks)
		e.At = r.time("at")
		ev = e
	case "model_selected":
		var e ModelSelected
		e.Model = r.str("model")
		e.At = r.time("at")
		ev = e
	case "memory_tools_selected":
		var e MemoryToolsSelected
		e.Setting = readMemoryTools(r)
		e.At = r.time("at")
		ev = e
	case "response_finalized":
		var e ResponseFinalized
		e.Turn = readID[nodeKind](r, "turn", true)
		e.Step = readID[stepKind](r, "step", true)
		e.Reply = readID[nodeKind](r, "reply", true)
		if r.decode("outcome", &e.Outcome); e.Outcome.Kind == 0 && r.err == nil {
			r.err = r.errorf("outcome", "is required")
		}
		r.decode("displayed", &e.Displayed)
		r.decode("durable", &e.Durable)
		e.At = r.time("at")
		ev = e
	case "turn_failed":
		var e TurnFailed
		e.Turn = readID[nodeKind](r, "turn", true)
		e.Step = readID[stepKind](r, "step", false)
		e.Code = r.str("code")
		e.Reason = r.str("reason")
		e.At = r.time("at")
		ev = e
	case "state_committed":
		var e StateCommitted
		if e.State = r.state("state"); e.State.ID.IsZero() && r.err == nil {
			r.err = r.errorf("state", "is invalid: field %q is required", "id")
		}
		if r.decode("turns", &e.Turns) && len(e.Turns) == 0 {
			e.Turns = nil
		}
		e.Shrunk = r.boolean("shrunk")
		r.decode("epoch", &e.Epoch)
		e.At = r.time("at")
		ev = e
	case "turn_indexed":
		var e TurnIndexed
		e.Turn = readID[nodeKind](r, "turn", true)
		r.decode("chunks", &e.Chunks)
		e.At = r.time("at")
		ev = e
	case "fact_pinned":
		var e FactPinned
		e.Fact = r.str("fact")
		e.At = r.time("at")
		ev = e
	case "fact_unpinned":
		var e FactUnpinned
		e.Pin = readPin(r)
		e.At = r.time("at")
		ev = e
	case "fact_edited":
		var e FactEdited
		e.Pin = readPin(r)
		e.Fact = r.str("fact")
		e.At = r.time("at")
		ev = e
	default:
		return nil, fmt.Errorf("%w: branch event %q", ErrUnknownValue, r.kind)
	}
	if r.err != nil {
		return nil, r.err
	}
	return ev, nil
}

// MarshalJSON encodes s; summary and pinned facts are written with <, >
// and & unescaped.
func (s StateCheckpoint) MarshalJSON() ([]byte, error) {
	w := newWriter(scope{sentinel: ErrInvalidEvent})
	writeID(w, "id", s.ID, false)
	w.value("seq", s.Seq)
	w.str("summary", s.Summary)
	if len(s.Pinned) > 0 {
		w.key("pinned")
		w.buf = append(w.buf, '[')
		for i, p := range s.Pinned {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = appendString(w.buf, p)
		}
		w.buf = append(w.buf, ']')
	}
	return w.finish()
}

// UnmarshalJSON decodes s; null leaves s alone, and an empty pinned list
// decodes as nil.
func (s *StateCheckpoint) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	r, err := readObject(scope{sentinel: ErrInvalidEvent}, data)
	if err != nil {
		return err
	}
	var v StateCheckpoint
	v.ID = readID[stateKind](r, "id", false)
	r.decode("seq", &v.Seq)
	v.Summary = r.str("summary")
	if r.decode("pinned", &v.Pinned) && len(v.Pinned) == 0 {
		v.Pinned = nil
	}
	if r.err != nil {
		return r.err
	}
	*s = v
	return nil
}

// writeID writes id as field k; a required id must not be zero.
func writeID[K any](w *writer, k string, id ID[K], required bool) {
	if required && id.IsZero() && w.err == nil {
		w.err = w.errorf(k, "is required")
	}
	w.str(k, id.String())
}

// writePin writes pin id as field "pin"; it is required (ids start at 1).
func writePin(w *writer, id uint64) {
	if id == 0 && w.err == nil {
		w.err = w.errorf("pin", "is required")
	}
	w.value("pin", id)
}

// writeMemoryTools writes setting m as field "memory_tools"; it must be
// one of the three.
func writeMemoryTools(w *writer, m MemoryTools) {
	if !m.Valid() && w.err == nil {
		w.err = w.errorf("memory_tools", "is invalid: %q, want default, on or off", string(m))
	}
	w.str("memory_tools", m.String())
}

// readMemoryTools returns the setting in field "memory_tools", which must
// be present and name one: "default", "on" or "off".
func readMemoryTools(r *reader) MemoryTools {
	s := r.required("memory_tools")
	if r.err != nil {
		return MemoryToolsDefault
	}
	m, err := ParseMemoryTools(s)
	if err != nil {
		r.err = r.errorf("memory_tools", "is invalid: %w", err)
	}
	return m
}

// readPin returns the pin id in field "pin", which must be present and
// not zero.
func readPin(r *reader) uint64 {
	var id uint64
	if r.decode("pin", &id); id == 0 && r.err == nil {
		r.err = r.errorf("pin", "is required")
	}
	return id
}

// readID returns the id in field k; a required id must be present and not
// zero.
func readID[K any](r *reader, k string, required bool) ID[K] {
	var id ID[K]
	if r.decode(k, &id); required && id.IsZero() && r.err == nil {
		r.err = r.errorf(k, "is required")
	}
	return id
}

// value writes v as field k in the form json.Marshal gives it.
func (w *writer) value(k string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		if w.err == nil {
			w.err = w.errorf(k, "is invalid: %w", err)
		}
		return
	}
	w.key(k)
	w.buf = append(w.buf, b...)
}

// time writes t in UTC as RFC 3339 text; it fails for years outside
// 0–9999.
func (w *writer) time(k string, t time.Time) {
	b, err := t.UTC().MarshalText()
	if err != nil {
		if w.err == nil {
			w.err = w.errorf(k, "is invalid: %w", err)
		}
		return
	}
	w.str(k, string(b))
}

// state writes s as the object field k.
func (w *writer) state(k string, s StateCheckpoint) {
	b, err := s.MarshalJSON()
	if err != nil {
		if w.err == nil {
			w.err = w.errorf(k, "is invalid: %w", err)
		}
		return
	}
	w.key(k)
	w.buf = append(w.buf, b...)
}

// AppendJSONString appends s to buf as a JSON string, with <, > and &
// unescaped; invalid UTF-8 becomes U+FFFD, as encoding/json writes it.
func AppendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return appendString(buf, s)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// time returns the time in field k, in UTC; absent or null reads as the
// zero time. Times whose UTC year lies outside 0–9999 are rejected, since
// they could not be written back.
func (r *reader) time(k string) time.Time {
	var t time.Time
	if !r.decode(k, &t) {
		return time.Time{}
	}
	t = t.UTC()
	if y := t.Year(); (y < 0 || y > 9999) && r.err == nil {
		r.err = r.errorf(k, "is invalid: year %d is outside 0–9999", y)
	}
	return t
}

// state returns the checkpoint in object field k.
func (r *reader) state(k string) StateCheckpoint {
	var s StateCheckpoint
	r.unmarshal(k, &s)
	return s
}
