package api

import (
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Report is what `ctxinf inspect` prints of a store (GET /v1/inspect):
// its sessions and branches, their last turns, and the pending jobs.
type Report struct {
	DataDir  string          `json:"data_dir"`
	Sessions []ReportSession `json:"sessions"`
	Jobs     []Job           `json:"jobs"`
	// Next is the cursor of the next page of sessions (GET /v1/inspect
	// pages them: api.SessionList's paging); absent on the last.
	Next string `json:"next,omitempty"`
}

// ReportSession is a session of a Report.
type ReportSession struct {
	Session
	Branches []ReportBranch `json:"branches"`
}

// ReportBranch is a branch of a Report.
type ReportBranch struct {
	Branch
	Head      messages.NodeID `json:"head"`
	HeadDepth uint64          `json:"head_depth"`
	Turns     int             `json:"turns"`
	Pending   int             `json:"pending"`
	Chunks    int             `json:"chunks"`
	Phases    map[string]int  `json:"phases"`
	States    []ReportState   `json:"states"`
	LastTurns []ReportTurn    `json:"last_turns"`
}

// ReportState is a state of a branch: its seq, id and the turns it
// folded.
type ReportState struct {
	Seq   uint64            `json:"seq"`
	ID    messages.StateID  `json:"id"`
	Turns []messages.TurnID `json:"turns,omitempty"`
}

// ReportTurn is a turn, with the recovered partial output of a turn
// that never got its final response (SRD §13.4), labeled incomplete.
type ReportTurn struct {
	Turn
	Partial string `json:"partial_output,omitempty"`
	// Torn says a torn final journal line was dropped from Partial.
	Torn  bool         `json:"partial_torn_line_dropped,omitempty"`
	Steps []ReportStep `json:"steps,omitempty"`
}

// ReportStep is a provider step of a turn: who answered, how it ended
// and its stream counters (SRD §13.3).
type ReportStep struct {
	Index     uint32               `json:"index"`
	ID        messages.StepID      `json:"id"`
	Provider  string               `json:"provider"`
	Model     string               `json:"model"`
	Outcome   messages.StepOutcome `json:"outcome"`
	Items     int                  `json:"items"`
	Displayed uint64               `json:"displayed"`
	Durable   uint64               `json:"durable"`
	// Estimated is the assembler's count of the context, InputTokens
	// the provider's (0: not reported), CacheReadTokens the part of it
	// read from the provider's prompt cache.
	Estimated       int `json:"estimated_tokens,omitempty"`
	InputTokens     int `json:"input_tokens,omitempty"`
	CacheReadTokens int `json:"cache_read_input_tokens,omitempty"`
}

// Job is background work the runtime still owes a turn: respond_turn,
// summarize_turn or index_turn.
type Job struct {
	Type     string            `json:"type"`
	Branch   messages.BranchID `json:"branch"`
	Turn     messages.TurnID   `json:"turn"`
	Attempts int               `json:"attempts,omitempty"`
	Created  time.Time         `json:"created"`
}
