package core

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// InterruptedReason is the reason of the TurnFailed events Recover decides.
const InterruptedReason = "interrupted: the runtime stopped before the response was finalized"

// The commands below decide: each checks a request against the branch and
// returns the events to persist and then Apply, or an error. None changes
// the branch. Times are recorded in UTC.

// decide returns ev as the one event to record, if it can apply.
func (b *Branch) decide(ev messages.BranchEvent) ([]messages.BranchEvent, error) {
	if err := b.check(ev); err != nil {
		return nil, err
	}
	return []messages.BranchEvent{ev}, nil
}

// Create starts the branch from ev, a new branch or a fork carrying its
// pending turns. It fails with ErrExists when the branch was created
// already, and with ErrInvalid when ev lacks its ids, sets only one of
// Parent and ForkAt, or lists pending turns out of order or past TurnSeq.
func (b *Branch) Create(ev messages.BranchCreated) ([]messages.BranchEvent, error) {
	ev.State = cloneState(ev.State)
	ev.Pending = cloneList(ev.Pending)
	ev.Pins = cloneList(ev.Pins)
	ev.Window = cloneList(ev.Window)
	ev.At = ev.At.UTC()
	return b.decide(ev)
}

// Submit accepts the user message whose transcript node is turn as the
// next turn. Input is gated (SRD §6.2): while a turn is in flight it fails
// with a *BusyError (errors.Is ErrBusy); a turn merely pending (finalized,
// not committed) does not block. A turn accepted already fails with
// ErrDuplicate.
func (b *Branch) Submit(turn messages.TurnID, now time.Time) ([]messages.BranchEvent, error) {
	return b.SubmitFor(turn, Client{}, now)
}

// SubmitFor is Submit for a turn an API client sent with c, recorded with
// the turn's acceptance: c's tools must be named, each name once, and its
// tool choice a known mode (ErrInvalid naming the field otherwise).
func (b *Branch) SubmitFor(turn messages.TurnID, c Client, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.TurnAccepted{Turn: turn, Seq: b.TurnSeq + 1, StateBefore: b.State.ID,
		System: c.System, Tools: cloneTools(c.Tools), ToolChoice: c.ToolChoice, Params: c.Params.Clone(), At: now.UTC()})
}

// Record records an exchange taken as it is (an import): the user
// message at transcript node turn and the assistant's at reply, finalized
// at once with no provider step. Like Submit it fails with a *BusyError
// while a turn is in flight.
func (b *Branch) Record(turn messages.TurnID, reply messages.NodeID, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.TurnRecorded{Turn: turn, Seq: b.TurnSeq + 1, Reply: reply, At: now.UTC()})
}

// Force records chunks chosen for the next turn's context (at most
// ForcedMax waiting, else ErrInvalid naming the limit).
func (b *Branch) Force(chunks []messages.ChunkID, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.ChunksForced{Chunks: slices.Clone(chunks), At: now.UTC()})
}

// Start records that the context of the accepted turn was prepared and
// provider step step started streaming.
func (b *Branch) Start(turn messages.TurnID, step messages.StepID, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.ResponseStarted{Turn: turn, Step: step, At: now.UTC()})
}

// Finalize records the final assistant message, transcript node reply, of
// the responding turn, whose running step must be step. outcome must be
// completed, incomplete or paused; a failed or cancelled step fails the
// turn instead (see Fail), so those outcomes return ErrInvalid. displayed
// and durable count the streamed bytes shown and journaled.
func (b *Branch) Finalize(turn messages.TurnID, step messages.StepID, reply messages.NodeID,
	outcome messages.StepOutcome, displayed, durable uint64, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.ResponseFinalized{Turn: turn, Step: step, Reply: reply, Outcome: outcome,
		Displayed: displayed, Durable: durable, At: now.UTC()})
}

// IssueToolCalls records that step, the running step of the responding
// turn, ended asking for tools: items is what it produced, with at least
// one tool call (each with a call id unused in the turn and a name) and no
// tool outputs. No call may be open already. Applying it gives RunTools
// for the calls of tools that are not the client's (Turn.Tools), if any,
// else AwaitResults for the client's.
func (b *Branch) IssueToolCalls(turn messages.TurnID, step messages.StepID, items messages.Items, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.ToolCallsIssued{Turn: turn, Step: step, Items: slices.Clone(items), At: now.UTC()})
}

// RecordToolResults records outputs, answering each open tool call of the
// responding turn exactly once, and next, the provider step that goes on
// with the loop (zero when the loop ends and the response is finalized
// next). Applying it with a next step gives ContinueLoop. Without a next
// step, calls of the client's tools (Turn.Tools) may be left open: the
// runtime's calls were answered and the turn now awaits the client's
// results (AwaitResults).
func (b *Branch) RecordToolResults(turn messages.TurnID, outputs messages.Items, next messages.StepID, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.ToolResultsRecorded{Turn: turn, Outputs: slices.Clone(outputs), Next: next, At: now.UTC()})
}

// AbandonOutputs returns error outputs holding text for the open tool
// calls of turn, in order: what answers calls that will never run (a
// step limit, a cancellation, a crash). It returns nil when none is open.
func (b *Branch) AbandonOutputs(turn messages.TurnID, text string) messages.Items {
	t, ok := b.Turn(turn)
	if !ok {
		return nil
	}
	var outs messages.Items
	for _, c := range t.OpenCalls() {
		out, _ := json.Marshal(text)
		outs = append(outs, messages.ToolOutput{CallID: c.CallID, Output: out, IsError: true})
	}
	return outs
}

// RetryStep records that step, the running step of the responding turn,
// is given up for reason and step next runs instead; applying it gives
// RetryStep.
func (b *Branch) RetryStep(turn messages.TurnID, step, next messages.StepID, reason string, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.StepRetried{Turn: turn, Step: step, Next: next, Reason: reason, At: now.UTC()})
}

// SelectModel records model, a model's name in config ("" for the
// default), for the branch's next turns. Selecting the current model
// records nothing. A name longer than ModelNameMax is ErrInvalid.
func (b *Branch) SelectModel(model string, now time.Time) ([]messages.BranchEvent, error) {
	if !b.Created {
		return nil, ErrNotCreated
	}
	if model == b.Model {
		return nil, nil
	}
	return b.decide(messages.ModelSelected{Model: model, At: now.UTC()})
}

// SelectMemoryTools records m, the memory tools setting of the branch's
// next turns (a turn in flight keeps the one it was accepted with).
// Selecting the current setting records nothing; a value that is not a
// setting is ErrInvalid.
func (b *Branch) SelectMemoryTools(m messages.MemoryTools, now time.Time) ([]messages.BranchEvent, error) {
	if !b.Created {
		return nil, ErrNotCreated
	}
	if m == b.MemoryTools {
		return nil, nil
	}
	return b.decide(messages.MemoryToolsSelected{Setting: m, At: now.UTC()})
}

// Fail records that the turn in flight failed for reason, which must not
// be empty; code is why (one of messages' Fail* codes). A turn finalized
// or failed already cannot fail: ErrInvalid.
func (b *Branch) Fail(turn messages.TurnID, code, reason string, now time.Time) ([]messages.BranchEvent, error) {
	if !b.Created {
		return nil, ErrNotCreated
	}
	i, err := b.lookup(turn)
	if err != nil {
		return nil, err
	}
	if reason == "" {
		return nil, invalid("turn %s: reason: required", turn)
	}
	return b.decide(messages.TurnFailed{Turn: turn, Step: b.Turns[i].Step, Code: code, Reason: reason, At: now.UTC()})
}

// Commit advances the head to state, which folds turns into the head
// (TX-B). It is a compare-and-swap on the summary epoch: epoch, from the
// Summarize effect the summary answers, must equal b.Epoch, else
// ErrStaleEpoch and nothing is committed. state.Seq must be State.Seq+1: a
// state_seq committed already gives ErrDuplicate, a gap ErrInvalid. turns
// must be a non-empty prefix of the pending turns, in order, and
// state.Pinned the head's pinned facts; otherwise ErrInvalid.
func (b *Branch) Commit(state messages.StateCheckpoint, turns []messages.TurnID, epoch uint64, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.StateCommitted{State: cloneState(state), Turns: slices.Clone(turns), Epoch: epoch, At: now.UTC()})
}

// CommitShrunk records state, the head summary rewritten shorter by the
// context shrinker (SRD §7.3 step 4), as the new head; it folds no turn.
// Like Commit it is a compare-and-swap on epoch: ErrStaleEpoch when the
// branch moved on since the summary was read.
func (b *Branch) CommitShrunk(state messages.StateCheckpoint, epoch uint64, now time.Time) ([]messages.BranchEvent, error) {
	return b.decide(messages.StateCommitted{State: cloneState(state), Shrunk: true, Epoch: epoch, At: now.UTC()})
}

// MarkIndexed records that the committed turn was indexed into chunks
// chunks (TX-C). Indexing is idempotent: for a turn the branch no longer
// tracks (indexed already, failed, or never accepted) there is nothing to
// record, and MarkIndexed returns no events and no error. A turn not yet
// committed gives ErrInvalid, as do negative chunks.
func (b *Branch) MarkIndexed(turn messages.TurnID, chunks int, now time.Time) ([]messages.BranchEvent, error) {
	if !b.Created {
		return nil, ErrNotCreated
	}
	if turn.IsZero() {
		return nil, invalid("turn: required")
	}
	if b.find(turn) < 0 {
		return nil, nil
	}
	return b.decide(messages.TurnIndexed{Turn: turn, Chunks: chunks, At: now.UTC()})
}

// Recover is called by the shell after replaying the log: it returns the
// events that close what a crash interrupted, and the effects still owed.
// A turn in flight (Accepted, Responding) lost its
// response with the process: it fails with InterruptedReason, applying
// those events gives their own TurnDone effects; one inside a tool loop
// gets an Abandon effect instead, so that what its tools did stays on
// record. A turn that awaits its client's tool results (Turn.Awaiting)
// had nothing running: it keeps waiting. The effects to resume are
// an Index for each committed turn not yet indexed, then a Summarize if
// turns are pending (SRD §6.4-§6.5). Recover does not change the branch.
func (b *Branch) Recover(now time.Time) (events []messages.BranchEvent, effects []Effect) {
	if !b.Created {
		return nil, nil
	}
	for _, t := range b.Turns {
		switch {
		case t.Awaiting():
			// Nothing was running: the turn waits for its client's
			// results across the restart.
		case inFlight(t.Phase) && len(t.Loop) > 0:
			effects = append(effects, Abandon{Turn: t.ID, Reason: "interrupted"})
		case inFlight(t.Phase):
			events = append(events, messages.TurnFailed{Turn: t.ID, Step: t.Step, Code: messages.FailInterrupted,
				Reason: InterruptedReason, At: now.UTC()})
		case t.Phase == messages.PhaseStateCommitted:
			effects = append(effects, Index{Turn: t.ID})
		}
	}
	return events, append(effects, b.summarize()...)
}
