package api

import (
	"encoding/json"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Turn is a user turn's lifecycle (GET /v1/branches/{id}/turns/{turn},
// the turns of an inspect report): (Branch, Seq) always names the same
// turn.
type Turn struct {
	Branch     messages.BranchID  `json:"branch"`
	Seq        uint64             `json:"seq"`
	ID         messages.TurnID    `json:"id"` // also the transcript node of the user message
	Phase      messages.TurnPhase `json:"phase"`
	Step       messages.StepID    `json:"step,omitempty"`
	Reply      messages.NodeID    `json:"reply,omitempty"`   // transcript node of the assistant message
	Outcome    string             `json:"outcome,omitempty"` // a messages.OutcomeKind, once the response is final or the turn failed
	Code       string             `json:"code,omitempty"`    // why a failed turn failed: one of messages' Fail* codes
	Reason     string             `json:"reason,omitempty"`
	StateAfter messages.StateID   `json:"state_after,omitempty"`
	StateSeq   uint64             `json:"state_seq,omitempty"`
	Updated    time.Time          `json:"updated"`
}

// TurnResult is how a turn ended (POST /v1/branches/{id}/turns, not
// streamed).
type TurnResult struct {
	Turn    messages.TurnID      `json:"turn"`
	Seq     uint64               `json:"seq"`
	Reply   string               `json:"reply"`
	Phase   messages.TurnPhase   `json:"phase"`
	Outcome messages.StepOutcome `json:"outcome"`
	Error   string               `json:"error,omitempty"`
	// Displayed and Durable are the bytes of the turn's stream
	// journals shown and fsynced; TextDisplayed and TextDurable those of
	// its text (SRD §13.3).
	Displayed     uint64 `json:"displayed"`
	Durable       uint64 `json:"durable"`
	TextDisplayed uint64 `json:"text_displayed"`
	TextDurable   uint64 `json:"text_durable"`
}

// Event is one event of a streamed turn (POST /v1/branches/{id}/turns
// with "stream": true, as server-sent events): Type "turn", "delta",
// "item" or "done", with the fields that type carries.
type Event struct {
	Type      string
	Turn      messages.TurnID
	Text      string          // delta
	Item      json.RawMessage // item: a tool call or output
	Displayed uint64          // delta, item, done: the turn's journal bytes shown so far
	Durable   uint64          // and of those, fsynced
	// TextDisplayed is the bytes of the turn's text shown so far,
	// TextDurable those whose journal records are fsynced: the TUI's
	// "Stream: durable/displayed" (SRD §13.3).
	TextDisplayed, TextDurable uint64

	Phase   messages.TurnPhase   // done
	Outcome messages.StepOutcome // done
	Error   string               // done, of a failed turn: why
	Code    string               // done, of a failed turn: the outcome's code (CodeContextTooLarge…)
}

// TurnInfo is a turn's lifecycle, its provider steps and the chunks it
// was indexed into (GET /v1/branches/{id}/turns/{turn}).
type TurnInfo struct {
	Turn
	Steps []StepInfo `json:"steps"`
	// Chunks are the retrieval chunks the turn was cut into, in reading
	// order (its message's, then its reply's; tool results after the
	// text of their message). Empty until the turn is indexed, which
	// comes after its state commits: a pending turn has none yet.
	Chunks []ChunkInfo `json:"chunks"`
	// Partial is set when a crash cut the turn's step off: the output
	// recovered for it, to show labeled incomplete.
	Partial *PartialOutput `json:"partial,omitempty"`
	// Latency is where the turn's time went, in milliseconds; a part
	// not known is left out (see TurnLatency).
	Latency TurnLatency `json:"latency"`
	// System, Tools, ToolMode, ToolChoice and Params are what the turn's
	// model was given beside the messages, as its first provider step
	// recorded it: an API client's system prompt (the runtime's
	// instructions follow it; "" for a turn of the runtime's own), the
	// tools offered (the runtime's, then the client's), the tool mode
	// and choice, and the client's generation settings. None for a turn
	// whose first step recorded nothing (it failed before one ran).
	System     string              `json:"system,omitempty"`
	Tools      []messages.Tool     `json:"tools,omitempty"`
	ToolMode   messages.ToolMode   `json:"tool_mode,omitempty"`
	ToolChoice messages.ToolChoice `json:"tool_choice,omitzero"`
	Params     messages.GenParams  `json:"params,omitzero"`
}

// PartialOutput is the output of a provider step a crash cut off,
// recovered from its stream journal (SRD §13.4). Incomplete is always
// true: a client shows it labeled so. It is not in the transcript.
type PartialOutput struct {
	Step       messages.StepID `json:"step"`
	Text       string          `json:"text"`
	Incomplete bool            `json:"incomplete"`
	// Displayed is the journal's bytes on disk (at least these were
	// shown), Durable those of its complete lines.
	Displayed uint64 `json:"displayed"`
	Durable   uint64 `json:"durable"`
}

// ChunkInfo is a retrieval chunk of a turn: its text, where the text is
// from (the message Node, bytes Start to End of its rendered text; 0 and
// 0 for a tool's result, which that text does not hold) and what the
// indexer made of it.
type ChunkInfo struct {
	ID       messages.ChunkID   `json:"id"`
	Seq      uint64             `json:"seq"` // the turn's number on the branch that indexed it
	Node     messages.NodeID    `json:"node"`
	Start    int                `json:"start"`
	End      int                `json:"end"`
	Type     messages.ChunkType `json:"type"`
	Text     string             `json:"text"`
	Summary  string             `json:"summary"`
	TokenEst int                `json:"token_est"`
}

// StepInfo is one provider step of a turn: what it ran on, how it ended,
// the tokens the provider reported and the journal's byte counts.
type StepInfo struct {
	ID           messages.StepID      `json:"id"`
	Index        uint32               `json:"index"`
	Provider     string               `json:"provider"`
	Model        string               `json:"model"`
	Outcome      messages.StepOutcome `json:"outcome"`
	InputTokens  int                  `json:"input_tokens,omitempty"`
	OutputTokens int                  `json:"output_tokens,omitempty"`
	// CacheReadTokens and CacheWriteTokens are the part of InputTokens
	// the provider read from and wrote to its prompt cache.
	CacheReadTokens  int    `json:"cache_read_input_tokens,omitempty"`
	CacheWriteTokens int    `json:"cache_creation_input_tokens,omitempty"`
	Displayed        uint64 `json:"displayed"`
	Durable          uint64 `json:"durable"`
	// Interrupted: a crash cut the step off; recovery wrote its row.
	Interrupted bool `json:"interrupted,omitempty"`
}

// PendingTurn is a turn whose response is final but not yet folded into
// the branch's summary: the next contexts carry it verbatim.
type PendingTurn struct {
	Turn  messages.TurnID    `json:"turn"`
	Seq   uint64             `json:"seq"`
	Phase messages.TurnPhase `json:"phase"`
	Reply messages.NodeID    `json:"reply,omitzero"`
}

// HistoryEntry is one message of a transcript.
type HistoryEntry struct {
	Node    messages.NodeID  `json:"node"`
	Depth   uint64           `json:"depth"`
	Message messages.Message `json:"message"`
	// PartialReply, on a user message whose turn a crash interrupted, is
	// the output recovered for its reply: incomplete, not in the
	// transcript.
	PartialReply *PartialOutput `json:"partial_reply,omitempty"`
}

// History is a page of a branch's transcript (GET
// /v1/branches/{id}/history): its messages, oldest first, and the cursor
// of the page before them (none at the start).
type History struct {
	Entries []HistoryEntry   `json:"entries"`
	Before  *messages.NodeID `json:"before,omitempty"`
}

// TurnLatency is where a turn's time went (SRD §15.1), in milliseconds:
// building its first provider step's context (embedding the retrieval
// query, the search, the whole assembly, which holds both), its provider
// steps from start to end, the summarizer's call that folded it and the
// chunking and embedding that indexed it. A part not known is left out:
// the context's parts of a turn recorded or imported rather than run;
// summarize and index before the turn is folded and indexed (or for a
// turn folded or indexed before they were stored with its row, or
// whose summary came with an imported session).
type TurnLatency struct {
	EmbedMs     float64 `json:"embed_ms,omitempty"`
	SearchMs    float64 `json:"search_ms,omitempty"`
	AssembleMs  float64 `json:"assemble_ms,omitempty"`
	StreamMs    float64 `json:"stream_ms,omitempty"`
	SummarizeMs float64 `json:"summarize_ms,omitempty"`
	IndexMs     float64 `json:"index_ms,omitempty"`
}
