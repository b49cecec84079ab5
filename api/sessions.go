package api

import (
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Session is a session (POST /v1/sessions, GET /v1/sessions).
type Session struct {
	ID           messages.SessionID `json:"id"`
	Title        string             `json:"title,omitempty"`
	ActiveBranch messages.BranchID  `json:"active_branch"`
	Created      time.Time          `json:"created"`
	// Tenant owns the session (the tenant of the token that created
	// it); "" for a session made before tenants, the default tenant's.
	Tenant string `json:"tenant,omitempty"`
	// Retention, when set, is how long the session may stay idle before
	// the retention job deletes it (0: kept forever); nil: its
	// tenant's or the server's applies.
	Retention *time.Duration `json:"retention_ns,omitempty"`
	// Metadata labels the session, set when it is made: a proxied
	// conversation's end user, client (its User-Agent) and source
	// ("proxy"). It never changes.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Branch is a branch of a session: its parent and the turn it was forked
// at (none for a session's first branch).
type Branch struct {
	ID      messages.BranchID  `json:"id"`
	Session messages.SessionID `json:"session"`
	Parent  messages.BranchID  `json:"parent,omitempty"`
	ForkAt  messages.NodeID    `json:"fork_at,omitempty"`
	// ForkSeq is the parent's turn_seq at the fork point: the fork sees
	// the parent's turns up to it.
	ForkSeq uint64    `json:"fork_seq,omitempty"`
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
}

// CreatedSession is the answer to POST /v1/sessions: the session and its
// first branch.
type CreatedSession struct {
	Branch  Branch  `json:"branch"`
	Session Session `json:"session"`
}

// BranchInfo is a branch's live state (GET /v1/branches/{id}).
type BranchInfo struct {
	Branch    Branch                   `json:"branch"`
	Tip       messages.NodeID          `json:"tip"`
	State     messages.StateCheckpoint `json:"state"`
	Epoch     uint64                   `json:"epoch"`
	TurnSeq   uint64                   `json:"turn_seq"`
	Committed uint64                   `json:"committed"`
	Failed    uint64                   `json:"failed"`
	Indexed   uint64                   `json:"indexed"`
	Pending   int                      `json:"pending"`
	InFlight  *messages.TurnID         `json:"in_flight,omitempty"`
	Model     string                   `json:"model,omitempty"`
	// MemoryTools is the branch's memory tools setting for its next
	// turns ("default": the server's config's for its model, "on",
	// "off"); MemoryToolsOn is whether, under it, they are offered the
	// memory tools.
	MemoryTools   messages.MemoryTools `json:"memory_tools"`
	MemoryToolsOn bool                 `json:"memory_tools_on"`
}

// Imported is a session made from an export (POST /v1/sessions/import).
type Imported struct {
	Session  Session `json:"session"`
	Branch   Branch  `json:"branch"`   // the session's active branch
	Branches int     `json:"branches"` // the branches imported
	Turns    int     `json:"turns"`    // the turns imported, on all branches
	States   int     `json:"states"`   // the states imported, on all branches
}

// Deleted is what a delete removed, for good (DELETE /v1/sessions/{id}
// and /v1/branches/{id}): once it is answered, no file of the server's
// data dir holds a byte of the deleted content (docs/SECURITY.md).
type Deleted struct {
	Session  messages.SessionID  `json:"session"`
	Branches []messages.BranchID `json:"branches"` // the branches deleted
	Nodes    int                 `json:"nodes"`    // transcript nodes (messages) deleted
	Turns    int                 `json:"turns"`
	Blobs    int                 `json:"blobs"` // payloads no other turn referenced
	Chunks   int                 `json:"chunks"`
	Steps    int                 `json:"steps"`    // provider steps (requests and responses)
	Journals int                 `json:"journals"` // stream journal files removed
	Keys     int                 `json:"keys"`     // store keys dropped, every version counted
	// ValueLogPending: a deleted value of 64 KiB or more
	// (store.value_threshold_bytes) is still in the store's value log,
	// because a read under way held the store open beyond 5 s; the file
	// is rewritten at the next start.
	ValueLogPending bool    `json:"value_log_pending"`
	TookMS          float64 `json:"took_ms"`  // the whole delete
	ScrubMS         float64 `json:"scrub_ms"` // the part during which the store's writes waited
}

// Retention is a session's retention (GET and PUT
// /v1/sessions/{id}/retention): the retention job deletes the session,
// for good, once it has been idle (no turn, fork or pin) that long.
// Durations are written "30d" (whole days), as Go durations ("36h") or
// "0" (kept forever).
type Retention struct {
	Session messages.SessionID `json:"session"`
	// Own is the session's own retention; nil when it has none and its
	// tenant's (or the server's) applies.
	Own *string `json:"own"`
	// Idle is the retention that applies, from Source: "session",
	// "tenant" or "default" (the server's retention.idle).
	Idle   string `json:"idle"`
	Source string `json:"source"`
	// LastActivity is the session's last turn, fork or pin; Expires when
	// the job may delete it (absent when it is kept forever). InFlight:
	// a turn is under way (the session is not idle).
	LastActivity time.Time  `json:"last_activity"`
	Expires      *time.Time `json:"expires,omitempty"`
	InFlight     bool       `json:"in_flight"`
}

// Model is a model a branch can select (GET /v1/models, in the OpenAI
// API's shape: the fields below are those a client reads).
type Model struct {
	ID      string `json:"id"`       // its name in the server's config; "default" for the branches' default
	OwnedBy string `json:"owned_by"` // its provider
	ModelID string `json:"model_id"` // the provider's id of the model
}

// Pin is a fact pinned on a branch: ID (what DELETE and PUT
// /v1/branches/{id}/pins/{pin} take), Fact, and the branch's turn_seq
// (Seq) and time (At) when it was pinned or last edited.
type Pin = messages.PinnedFact
