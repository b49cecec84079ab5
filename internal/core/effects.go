package core

import "github.com/contextinfinity/ctxinf/messages"

// Effect is what the shell must do after an event applied: PrepareContext,
// RunTools, AwaitResults, ContinueLoop, Abandon, RetryStep, Summarize, Index or
// TurnDone; or what a decision of the branch calls for: Branch.EndStep's
// RetryForSize, StallForClient, EndLoop, FinalizeStep or IssueCalls,
// Branch.RunCalls' AnswerCalls, and Branch.ShrinkDue's AskShrink. The
// set is closed. Effects are not persisted: replaying the log gives them
// again, and Recover gives the ones still owed after a restart.
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

// Abandon comes from Recover for a turn whose tool loop a crash cut off,
// and from RunCalls for a turn past its limit of tool steps:
// the shell answers its open calls with errors (Branch.AbandonOutputs),
// then finalizes the response with what the loop recorded, outcome
// incomplete for Reason. Nothing the loop did is dropped, and the next
// request is valid for any provider.
type Abandon struct {
	Turn   messages.TurnID
	Reason string
	// Text, if set, is the error output each open call gets; Recover's
	// leave it to the shell (the runtime stopped while the call was
	// open).
	Text string
}

// RetryStep follows StepRetried: the shell runs provider step Step of
// Turn again on a smaller context (the provider rejected the last one
// for its size, SRD §7.2).
type RetryStep struct {
	Turn messages.TurnID
	Step messages.StepID
}

// RetryForSize comes from EndStep for a step the provider rejected for
// its context's size: the shell records it (Branch.RetryStep, naming the
// next step, for Reason), which runs the step again on a smaller
// context (RetryStep).
type RetryForSize struct {
	Turn   messages.TurnID
	Step   messages.StepID
	Reason string
}

// StallForClient comes from EndStep for a step that failed after the
// client's tool results: nothing is recorded; the shell tells the
// turn's stream it failed with Code for Reason, and the turn waits, in
// flight, for the client to send the same results again (which runs
// the step again) or for the turn to be abandoned.
type StallForClient struct {
	Turn         messages.TurnID
	Step         messages.StepID
	Code, Reason string
}

// EndLoop comes from EndStep for a step that ends its turn: a turn with
// no tool loop fails with Code for Reason (Branch.Fail); one inside a
// loop is abandoned, so that what its tools did stays in the
// conversation (the open calls answered with errors, the response
// finalized incomplete for Reason).
type EndLoop struct {
	Turn         messages.TurnID
	Step         messages.StepID
	Code, Reason string
}

// FinalizeStep comes from EndStep for a step whose response is final:
// the shell records the reply (the turn's loop, then the step's items)
// with Outcome (Branch.Finalize).
type FinalizeStep struct {
	Turn    messages.TurnID
	Step    messages.StepID
	Outcome messages.StepOutcome
}

// IssueCalls comes from EndStep for a step whose tool calls run: the
// shell records them (Branch.IssueToolCalls), which gives RunTools or
// AwaitResults.
type IssueCalls struct {
	Turn messages.TurnID
	Step messages.StepID
}

// AskShrink comes from ShrinkDue for a context over budget once the
// head summary was shrunk deterministically: the shell asks a librarian
// to rewrite Summary, the head summary of Epoch, in at most Target
// tokens, and Turn waits, accepted, until the answer is committed as a
// new state (Branch.CommitShrunk, compare-and-swap on Epoch) or refused;
// then its context is prepared again. Each head summary is asked once.
type AskShrink struct {
	Turn    messages.TurnID
	Epoch   uint64
	Summary string
	Target  int
}

// AnswerCalls comes from RunCalls for calls of the runtime's tools that
// do not run: the shell records Outputs, an error answering each, as
// their results, as if the tools had run; StepLimit says the turn
// reached its limit of tool steps (its answer says so).
type AnswerCalls struct {
	Turn      messages.TurnID
	Step      messages.StepID
	Outputs   messages.Items
	StepLimit bool
}

func (AnswerCalls) effect()    {}
func (AskShrink) effect()      {}
func (RetryForSize) effect()   {}
func (StallForClient) effect() {}
func (EndLoop) effect()        {}
func (FinalizeStep) effect()   {}
func (IssueCalls) effect()     {}
func (RetryStep) effect()      {}
func (PrepareContext) effect() {}
func (RunTools) effect()       {}
func (AwaitResults) effect()   {}
func (ContinueLoop) effect()   {}
func (Abandon) effect()        {}
func (Summarize) effect()      {}
func (Index) effect()          {}
func (TurnDone) effect()       {}
