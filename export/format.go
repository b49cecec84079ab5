package export

import (
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Format is the version of the export format written. An export is JSON
// lines (README, "Export and import"):
//
//	{"type":"session","format":2,"title":…,"created":…}
//	per branch, in creation order (a parent before its forks):
//	  {"type":"branch","label":…,"created":…,"parent":-1|index,"fork_at_depth":…,
//	   "tip_depth":…,"fork_seq":…,"base":{state},"carried":[seq…]}
//	  its turns and states, in the order they happened:
//	  {"type":"turn","seq":…,"user":{message},"reply":{message}}
//	  {"type":"turn","seq":…,"user":{message},"failed":{"code":…,"reason":…}}
//	  {"type":"state","seq":…,"summary":…,"pinned":[…],"turns":[seq…]}
//	  {"type":"head","pinned":[…],"model":…,"memory_tools":…}
//	{"type":"end","branches":…,"turns":…,"states":…,"active_branch":index,"sha256":…}
//
// Positions stand for ids (turn and state seqs, transcript depths, branch
// indexes): an import rebuilds the same branches, fork points, states
// and pins under new ids, and exporting it again gives the same bytes.
// sha256 is of every byte before the end line: an export cut short, or
// changed, is refused. Format 1 (a session line, then the active
// branch's messages, V1Line) is still read.
const Format = 2

// The lines of an export, as JSON.
type (
	// SessionLine is the first line. Format is absent (0) in format 1.
	SessionLine struct {
		Type    string    `json:"type"` // "session"
		Format  int       `json:"format"`
		Title   string    `json:"title"`
		Created time.Time `json:"created"`
	}
	// StateFields are a state's, in a state line and a branch's base.
	StateFields struct {
		Seq     uint64   `json:"seq"`
		Summary string   `json:"summary"`
		Pinned  []string `json:"pinned,omitempty"`
		Turns   []uint64 `json:"turns,omitempty"`
	}
	// BranchLine starts a branch's lines.
	BranchLine struct {
		Type        string      `json:"type"` // "branch"
		Label       string      `json:"label"`
		Created     time.Time   `json:"created"`
		Parent      int         `json:"parent"`
		ForkAtDepth uint64      `json:"fork_at_depth"`
		TipDepth    uint64      `json:"tip_depth"`
		ForkSeq     uint64      `json:"fork_seq"`
		Base        StateFields `json:"base"`
		Carried     []uint64    `json:"carried,omitempty"`
	}
	// Failure is why a turn failed.
	Failure struct {
		Code   string `json:"code"`
		Reason string `json:"reason"`
	}
	// TurnLine is a turn: its reply, or why it failed.
	TurnLine struct {
		Type   string            `json:"type"` // "turn"
		Seq    uint64            `json:"seq"`
		User   *messages.Message `json:"user"`
		Reply  *messages.Message `json:"reply,omitempty"`
		Failed *Failure          `json:"failed,omitempty"`
	}
	// StateLine is a committed state.
	StateLine struct {
		Type string `json:"type"` // "state"
		StateFields
	}
	// HeadLine ends a branch's lines.
	HeadLine struct {
		Type   string   `json:"type"` // "head"
		Pinned []string `json:"pinned,omitempty"`
		Model  string   `json:"model,omitempty"`
		// MemoryTools is the branch's memory tools setting, "on" or
		// "off"; absent for the default (its model's, or the config's).
		MemoryTools messages.MemoryTools `json:"memory_tools,omitempty"`
	}
	// EndLine is the last line: the counts, the index of the session's
	// active branch, and the SHA-256 of every byte before it.
	EndLine struct {
		Type         string `json:"type"` // "end"
		Branches     int    `json:"branches"`
		Turns        int    `json:"turns"`
		States       int    `json:"states"`
		ActiveBranch int    `json:"active_branch"`
		SHA256       string `json:"sha256"`
	}
	// V1Line is a line of format 1: a session, or a message of the
	// active branch's transcript.
	V1Line struct {
		Type    string             `json:"type"`
		Title   string             `json:"title,omitempty"`
		Session messages.SessionID `json:"session,omitzero"`
		Branch  messages.BranchID  `json:"branch,omitzero"`
		Message *messages.Message  `json:"message,omitempty"`
	}
)

// FromState is s as a line's state fields.
func FromState(s State) StateFields { return StateFields(s) }

// State is the state the fields s describe.
func (s StateFields) State() State { return State(s) }
