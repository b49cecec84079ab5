package export

import (
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Branch is a branch of a session, in creation order: a parent comes
// before its forks.
type Branch struct {
	ID      messages.BranchID // on export only: the branch's id
	Label   string
	Created time.Time
	// Parent is the index of the parent among the session's branches
	// (-1 for the session's first branch, which has none). A fork
	// starts after the parent's transcript node at ForkAtDepth (its
	// fork point) with its tip at TipDepth (the same node, or the reply
	// after it), at the parent's turn seq ForkSeq, from state Base,
	// carrying the parent's finalized turns Carried (seqs) as pending.
	Parent      int
	ForkAtDepth uint64
	TipDepth    uint64
	ForkSeq     uint64
	Base        State
	Carried     []uint64
}

// Turn is a turn of a branch: a user message and its reply, or, for a
// failed turn (Failed), the user message, the code and the reason.
type Turn struct {
	Seq    uint64
	User   messages.Message
	Reply  messages.Message
	Failed bool
	Code   string
	Reason string
}

// State is a committed state: its summary, its pinned facts, and the
// turns (seqs) it folded, none for a shrunk summary.
type State struct {
	Seq     uint64
	Summary string
	Pinned  []string
	Turns   []uint64
}

// Head is the end of a branch: its head's pinned facts (newer than its
// last state's when facts were pinned since) and its model.
type Head struct {
	Pinned      []string
	Model       string
	MemoryTools messages.MemoryTools
}

// Item is one part of an export: exactly one field is set.
type Item struct {
	Branch *Branch
	Turn   *Turn
	State  *State
	Head   *Head
}
