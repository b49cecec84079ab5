package core

import "github.com/contextinfinity/ctxinf/messages"

// Effect is what the shell must do after an event applied: PrepareContext,
// RunTools, AwaitResults, ContinueLoop, Abandon, RetryStep, Summarize, Index or
// TurnDone. The set is closed. Effects are not
// persisted: replaying the log gives them again, and Recover gives the
// ones still owed after a restart.
type Effect interface {
	effect()
}

// PrepareContext follows TurnAccepted: the shell assembles the context of
// Turn (head state, pending turns, retrieval) and calls Branch.Start once a
// provider step is under way, or Branch.Fail.
type PrepareContext struct {
	Turn messages.TurnID
}

// Summarize asks the shell to fold Turns, the oldest pending turns in
// order, into a new state after State, and to commit it with
// Branch.Commit passing Epoch. The Policy decides when it is due: it can
// follow ResponseFinalized, a fork with pending turns, StateCommitted or
// FactPinned, and Recover; Reason says which trigger fired. A later
// Summarize supersedes an earlier one; a commit computed for an old epoch
// fails with ErrStaleEpoch. The summarizer may fold a prefix of Turns.
type Summarize struct {
	Turns  []messages.TurnID
	Epoch  uint64
	State  messages.StateCheckpoint
	Reason FoldReason
}

// Index follows StateCommitted, once per folded turn: the shell chunks and
// indexes Turn, then calls Branch.MarkIndexed. Indexing is idempotent.
type Index struct {
	Turn messages.TurnID
}

// TurnDone follows ResponseFinalized and TurnFailed: Turn reached Phase
// and input is open again; the shell replies to whoever waits on the turn.
type TurnDone struct {
	Turn  messages.TurnID
	Phase messages.TurnPhase
}

// RunTools follows ToolCallsIssued: the shell runs Calls, the tool calls
// Turn's step Step asked for, and records their outputs with
// Branch.RecordToolResults, naming the next step (SRD §12.2).
type RunTools struct {
	Turn  messages.TurnID
	Step  messages.StepID
	Calls []messages.ToolCall
}

// AwaitResults follows ToolCallsIssued, or ToolResultsRecorded without
// a next step, when the open calls of Turn's step Step are all calls of
// the client's tools (Turn.Tools): the shell hands Calls to the client
// and the turn waits, in flight, until the client's results are recorded
// with Branch.RecordToolResults naming the next step, or the turn is
// abandoned (a new user turn, a cancellation).
type AwaitResults struct {
	Turn  messages.TurnID
	Step  messages.StepID
	Calls []messages.ToolCall
}

// ContinueLoop follows ToolResultsRecorded with a next step: the shell
// runs provider step Step of Turn with the turn's loop as continuation.
type ContinueLoop struct {
	Turn messages.TurnID
	Step messages.StepID
}

// Abandon comes from Recover for a turn whose tool loop a crash cut off:
// the shell answers its open calls with errors (Branch.AbandonOutputs),
// then finalizes the response with what the loop recorded, outcome
// incomplete for Reason. Nothing the loop did is dropped, and the next
// request is valid for any provider.
type Abandon struct {
	Turn   messages.TurnID
	Reason string
}

// RetryStep follows StepRetried: the shell runs provider step Step of
// Turn again on a smaller context (the provider rejected the last one
// for its size, SRD §7.2).
type RetryStep struct {
	Turn messages.TurnID
	Step messages.StepID
}

func (RetryStep) effect()      {}
func (PrepareContext) effect() {}
func (RunTools) effect()       {}
func (AwaitResults) effect()   {}
func (ContinueLoop) effect()   {}
func (Abandon) effect()        {}
func (Summarize) effect()      {}
func (Index) effect()          {}
func (TurnDone) effect()       {}
