package api

// The list routes (GET /v1/sessions, /v1/sessions/{session}/branches,
// /v1/branches/{branch}/pins, /v1/branches/{branch}/pending, /v1/inspect,
// /v1/models) answer a page at a time:
// ?limit=N (DefaultListLimit when absent, 1 to MaxListLimit) rows, and
// Next, an opaque cursor, when there are more; ?cursor=NEXT asks for the
// page after it. A cursor is valid only for the listing that gave it.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// SessionList is the answer to GET /v1/sessions: a page of the tenant's
// sessions, oldest first (?order=newest: newest first).
type SessionList struct {
	Sessions []Session `json:"sessions"`
	// Next is the cursor of the next page; absent on the last.
	Next string `json:"next,omitempty"`
}

// BranchList is the answer to GET /v1/sessions/{session}/branches: a page
// of the session's branches, in the order of their ids.
type BranchList struct {
	Branches []Branch `json:"branches"`
	Next     string   `json:"next,omitempty"`
}

// PinList is the answer to GET /v1/branches/{branch}/pins: a page of the
// branch's pinned facts, in the order of their ids.
type PinList struct {
	Pins []Pin  `json:"pins"`
	Next string `json:"next,omitempty"`
}

// PendingList is the answer to GET /v1/branches/{branch}/pending: a page
// of the branch's pending turns (finalized, not folded into its summary
// yet), oldest first.
type PendingList struct {
	Pending []PendingTurn `json:"pending"`
	Next    string        `json:"next,omitempty"`
}

// ModelList is the answer to GET /v1/models in the OpenAI API's shape: a
// page of the models a branch can select, "default" first, then the
// configured ones by name.
type ModelList struct {
	Object string  `json:"object"` // "list"
	Data   []Model `json:"data"`
	Next   string  `json:"next,omitempty"`
}
