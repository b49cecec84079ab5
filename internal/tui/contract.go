// Package tui is ctxinf's terminal UI (SRD §17): a conversation with a
// live header, and screens for the history, the branch tree, pins,
// chunks and retrieval, pending turns, a turn's steps and the model. It
// runs on the embedded runtime or as a client of a running server: both
// are a Backend (internal/cli/chat implements the two, and its line mode
// runs on the same).
package tui

import (
	"context"
	"errors"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// Backend is what the TUI and the chat's line mode need of a runtime:
// the embedded one, or a server's API. Every method may block on
// I/O: the TUI calls them from commands (tea.Cmd), never from Update.
type Backend interface {
	// Names are the default model's provider and id.
	Names(ctx context.Context) (provider, model string, err error)
	// Session returns a session by id.
	Session(ctx context.Context, id messages.SessionID) (api.Session, error)
	// LatestSession returns the newest session; false if there is none.
	LatestSession(ctx context.Context) (api.Session, bool, error)
	// CreateSession makes a session and returns its first branch.
	CreateSession(ctx context.Context, title string) (api.Branch, error)
	BranchRow(ctx context.Context, id messages.BranchID) (api.Branch, error)
	Branches(ctx context.Context, session messages.SessionID) ([]api.Branch, error)
	// Info is the branch's live state: head state, turn counts, pending
	// turns, the turn in flight, the model.
	Info(ctx context.Context, branch messages.BranchID) (api.BranchInfo, error)

	// Submit runs a turn, calling show with each update as it streams;
	// it returns the turn's number and its last update.
	Submit(ctx context.Context, branch messages.BranchID, text string, show func(Update)) (uint64, Update, error)
	// Cancel cancels the branch's turn in flight.
	Cancel(ctx context.Context, branch messages.BranchID) error
	// History returns up to n messages of the branch ending before the
	// turn before (zero: the newest), oldest first, and the turn to pass
	// as before for the page older than it (zero: none older).
	History(ctx context.Context, branch messages.BranchID, before messages.NodeID, n int) ([]Entry, messages.NodeID, error)
	// TurnAt returns the row of the branch's turn number seq.
	TurnAt(ctx context.Context, branch messages.BranchID, seq uint64) (api.Turn, error)
	// Turn returns a turn with its provider steps (tools calls are in
	// the transcript items of its history entries).
	Turn(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (api.TurnInfo, error)
	Pending(ctx context.Context, branch messages.BranchID) ([]messages.PendingTurn, error)
	// CommitPending folds the pending turns into the summary now.
	CommitPending(ctx context.Context, branch messages.BranchID) error

	// Fork makes a branch continuing after turn at (zero: the head).
	Fork(ctx context.Context, branch messages.BranchID, at messages.NodeID, label string) (api.Branch, error)
	// DeleteBranch deletes a branch for good.
	DeleteBranch(ctx context.Context, branch messages.BranchID) (api.Deleted, error)

	Pin(ctx context.Context, branch messages.BranchID, fact string) (messages.PinnedFact, error)
	Pins(ctx context.Context, branch messages.BranchID) ([]messages.PinnedFact, error)
	Unpin(ctx context.Context, branch messages.BranchID, id uint64) error
	EditPin(ctx context.Context, branch messages.BranchID, id uint64, fact string) (messages.PinnedFact, error)

	ModelNames(ctx context.Context) ([]string, error)
	SelectModel(ctx context.Context, branch messages.BranchID, name string) error

	// Search runs retrieval on the branch for query (manual retrieval):
	// up to k chunks with their scores.
	Search(ctx context.Context, branch messages.BranchID, query string, k int) ([]api.Hit, error)
	// Context is the context debug view of the branch's turn number seq
	// (what was sent, which chunks retrieval offered and which were
	// packed); seq 0: the context the next turn would get for text.
	Context(ctx context.Context, branch messages.BranchID, seq uint64, text string) (api.ContextDebug, error)
	// Recovered returns the output recovered from the turn's
	// interrupted step, if any.
	Recovered(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (string, bool, error)
}

// Update is a streaming turn's progress, as Submit shows it: text or a
// tool item as they stream, the journal's byte counts, and with Done how
// the turn ended.
type Update struct {
	Delta string // streamed text (may be empty)
	// Item is a tool call as it is issued, or a tool output as it is
	// recorded; nil otherwise.
	Item      messages.TranscriptItem
	Displayed uint64 // journal bytes shown so far
	Durable   uint64 // journal bytes fsynced so far
	// TextDisplayed is the bytes of text shown so far, TextDurable those
	// whose journal records are fsynced: the header's "Stream:
	// durable/displayed" (SRD §13.3).
	TextDisplayed, TextDurable uint64

	Done  bool               // the turn reached its end (finalized or failed)
	Phase messages.TurnPhase // with Done: ResponseFinalized or Failed
	// Outcome, with Done, is how the turn ended: the final step's
	// outcome, or for Phase Failed kind failed or cancelled, with the
	// code and why.
	Outcome messages.StepOutcome
	Err     string // with Done and Phase Failed: why (Outcome.Message)
}

// ErrNoContext is returned by Backend.Context for a turn that recorded
// no context (it failed before its first step ran, or predates context
// recipes).
var ErrNoContext = errors.New("tui: no context recorded for this turn")

// Entry is a message of the history, with the output recovered for its
// reply when a crash cut that off.
type Entry struct {
	// Turn is the turn the message belongs to: its user message's id,
	// for the reply and the tool steps of the turn too. (History's
	// before takes the cursor it returns, not a Turn.)
	Turn    messages.TurnID
	Depth   uint64
	Role    messages.Role
	Text    string
	Items   []messages.TranscriptItem // tool calls and outputs, if any
	Partial *string
}

// State is what every screen shares: the backend and where the user is.
// The shell owns it; screens read it and change it only by returning
// the messages below.
type State struct {
	Ctx     context.Context
	Backend Backend
	Branch  api.Branch     // the current branch
	Info    api.BranchInfo // its live state, as last read
	Width   int            // the terminal's size
	Height  int
}

// Screen is a pane opened over the conversation (history, branches,
// pins, chunks, pending, steps, models). The shell shows one at a time
// below the header, passes it every message while it is shown, and
// closes it on Esc.
type Screen interface {
	// Name is the screen's title in the header and the help.
	Name() string
	// Open is called each time the screen is shown; it returns the
	// command that loads its data.
	Open(s *State) tea.Cmd
	// Update handles a message while the screen is shown: keys, window
	// sizes, and the results of its own commands.
	Update(s *State, msg tea.Msg) tea.Cmd
	// View renders the screen in width×height cells.
	View(s *State, width, height int) string
	// Keys are the screen's key bindings, for the help line.
	Keys() []key.Binding
}

// Messages a screen returns (as a tea.Cmd's result) to act on the shell.
type (
	// SwitchMsg makes Branch the current branch (and its session the
	// current session) and shows the conversation.
	SwitchMsg struct{ Branch api.Branch }
	// StatusMsg shows Text (Err set: as an error) on the status line.
	StatusMsg struct {
		Text string
		Err  error
	}
	// RefreshMsg re-reads the current branch's live state (the header).
	RefreshMsg struct{}
	// CloseMsg closes the screen and shows the conversation.
	CloseMsg struct{}
)
