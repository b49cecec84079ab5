package api

import (
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Chunk is a retrieval unit of a committed turn, as a search hit carries
// it.
type Chunk struct {
	ID         messages.ChunkID   `json:"id"`
	Session    messages.SessionID `json:"session"`
	Branch     messages.BranchID  `json:"branch"` // the branch that indexed it first
	SourceTurn messages.TurnID    `json:"source_turn"`
	// Seq is the source turn's turn_seq; Node the transcript node (the
	// user message or the reply) the text is from, and Start and End its
	// byte offsets in that message's rendered text (0 and 0 for a tool's
	// result, which the rendered text does not hold).
	Seq      uint64             `json:"seq"`
	Node     messages.NodeID    `json:"node,omitzero"`
	Start    int                `json:"start"`
	End      int                `json:"end"`
	Type     messages.ChunkType `json:"type"`
	Text     string             `json:"text"`
	Summary  string             `json:"summary"`
	TokenEst int                `json:"token_est"`
	Hash     [32]byte           `json:"hash"` // the BLAKE3-256 digest of its text, as 32 numbers
	Created  time.Time          `json:"created"`
	// Speaker and Time are who said it and when, when its message says
	// (an imported conversation's participant and date); absent
	// otherwise.
	Speaker string    `json:"speaker,omitempty"`
	Time    time.Time `json:"time,omitzero"`
}

// Hit is a chunk retrieval found, with its scores.
type Hit struct {
	Chunk Chunk `json:"chunk"`
	// Score is the final score; Vector and Text the normalized scores
	// of the two searches, Relevance their weighted sum (before the
	// recency boost).
	Score     float64 `json:"score"`
	Vector    float64 `json:"vector"`
	Text      float64 `json:"text"`
	Relevance float64 `json:"relevance"`
}

// SearchRequest is the body of POST /v1/branches/{id}/search: K hits
// (0: the server's default) for Query; with Force the hits, or the
// Chunks named by their ids (with no query), go into the branch's next
// turn. Speaker, From and To keep only what a speaker said ("user",
// "assistant", "tool", or a participant's name as its turns give it) and
// what was said from From until To (RFC 3339 times), as the search looks:
// it returns up to K of those.
type SearchRequest struct {
	Query   string   `json:"query"`
	K       int      `json:"k"`
	Force   bool     `json:"force"`
	Chunks  []string `json:"chunks,omitempty"`
	Speaker string   `json:"speaker,omitempty"`
	From    string   `json:"from,omitempty"`
	To      string   `json:"to,omitempty"`
}

// SearchResult is the answer to a search: the hits, and how many chunks
// were forced into the next turn.
type SearchResult struct {
	Forced int   `json:"forced"`
	Hits   []Hit `json:"hits"`
}

// ContextDebug is the context debug view of a turn (GET
// /v1/branches/{id}/context): the context that was sent, rebuilt from
// what the turn's step recorded, with the arithmetic of its assembly.
type ContextDebug struct {
	Turn     messages.TurnID           `json:"turn,omitempty"` // zero: the next turn
	Step     messages.StepID           `json:"step,omitempty"`
	Provider string                    `json:"provider,omitempty"`
	Model    string                    `json:"model,omitempty"`
	Context  messages.AssembledContext `json:"context"`
	Report   AssemblyReport            `json:"report"`
	// SentHash is the hash recorded when the step ran, RebuiltHash the
	// rebuild's; Matches says they agree (the rebuild is what was sent).
	SentHash    string `json:"sent_hash,omitempty"`
	RebuiltHash string `json:"rebuilt_hash"`
	Matches     bool   `json:"matches"`
	// Retrieved are the chunks retrieval offered, with their scores (the
	// report's Chunks says which were packed); RetrievalError why it
	// failed, if it did.
	Retrieved      []RetrievedRef `json:"retrieved,omitempty"`
	RetrievalError string         `json:"retrieval_error,omitempty"`
	// ClientSystem is an API client's system prompt, which starts
	// Context.SystemInstructions (the runtime's instructions follow);
	// Params its generation settings. Empty for other turns.
	ClientSystem string             `json:"client_system,omitempty"`
	Params       messages.GenParams `json:"params,omitzero"`
}

// RetrievedRef is a chunk offered to a context and its score.
type RetrievedRef struct {
	Chunk messages.ChunkID `json:"chunk"`
	Score float64          `json:"score"`
	// Forced: chosen by the user for this turn.
	Forced bool `json:"forced,omitempty"`
}

// AssemblyReport is the arithmetic of an assembled context: the budget,
// each section's tokens, the shrink steps taken, and what is still over.
type AssemblyReport struct {
	Budget   Budget         `json:"budget"`
	Sections []SectionUsage `json:"sections"`
	Total    int            `json:"total"`
	Shrink   []ShrinkStep   `json:"shrink,omitempty"`
	// Over is how many tokens the context still exceeds the input budget
	// by; 0 when it fits.
	Over int `json:"over"`
	// Chunks are the retrieved chunks included, by score, and whether as
	// their summary.
	Chunks []ChunkUse `json:"chunks,omitempty"`
}

// Budget is the token budget of a context.
type Budget struct {
	ContextLimit    int `json:"context_limit"`    // the model's context window
	ResponseReserve int `json:"response_reserve"` // the step's max output tokens
	SafetyMargin    int `json:"safety_margin"`    // kept free for estimation error
	RetrievalMax    int `json:"retrieval_max"`    // at most this many tokens of retrieved memory
	ChunkMax        int `json:"chunk_max"`        // a retrieved chunk above this is sent as its summary when shrinking
}

// Input is the tokens the assembled input may use.
func (b Budget) Input() int { return b.ContextLimit - b.ResponseReserve - b.SafetyMargin }

// SectionUsage is a section of a context (system, pinned, summary,
// window, pending, retrieved, user): its tokens and items.
type SectionUsage struct {
	Name   string `json:"name"`
	Tokens int    `json:"tokens"`
	Items  int    `json:"items"`
}

// ShrinkStep is a step the shrinker took to make a context fit: Step is
// drop_chunk, chunk_summary, drop_window_message, drop_pending_turn or
// shrink_summary.
type ShrinkStep struct {
	Step   string `json:"step"`
	Detail string `json:"detail"`
	Saved  int    `json:"saved_tokens"`
	// Target is, for shrink_summary, the tokens the summary had to fit in.
	Target int `json:"target_tokens,omitempty"`
}

// ChunkUse is a retrieved chunk in an assembled context.
type ChunkUse struct {
	Chunk   messages.ChunkID `json:"chunk"`
	Score   float64          `json:"score"`
	Tokens  int              `json:"tokens"`
	Summary bool             `json:"summary"` // sent as its summary
}
