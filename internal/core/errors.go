package core

import (
	"errors"
	"fmt"

	"github.com/contextinfinity/ctxinf/messages"
)

// The errors of the branch state machine. Commands return them wrapped with
// the turn or field at fault; Apply wraps every error in ErrInvalid, since
// an event that cannot apply means a corrupt log.
var (
	// ErrNotCreated is returned by every command but Create on a branch
	// that has no BranchCreated event yet.
	ErrNotCreated = errors.New("core: branch not created")
	// ErrExists is returned by Create on a branch created already.
	ErrExists = errors.New("core: branch exists")
	// ErrBusy is returned by Submit while a turn is in flight; the error is
	// a *BusyError naming the turn.
	ErrBusy = errors.New("core: busy")
	// ErrInvalid is returned for a command that does not fit the branch
	// (an unknown turn, a turn in the wrong phase, a bad field) and by
	// Apply for an event that cannot apply.
	ErrInvalid = errors.New("core: invalid")
	// ErrStaleEpoch is returned by Commit when the summary was computed
	// for an older epoch: a state was committed or a fact pinned since.
	// Nothing is committed; the shell drops the summary and waits for the
	// next Summarize effect.
	ErrStaleEpoch = errors.New("core: stale epoch")
	// ErrDuplicate is returned by Commit for a state_seq committed already,
	// and by Submit for a turn accepted already.
	ErrDuplicate = errors.New("core: duplicate")
)

// BusyError is returned by Submit when turn Turn is in flight (SRD §6.2:
// the next user message is accepted only once the prior turn reached
// ResponseFinalized). errors.Is(err, ErrBusy) holds.
type BusyError struct {
	Turn  messages.TurnID
	Phase messages.TurnPhase
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%v: turn %s is %s", ErrBusy, e.Turn, e.Phase)
}

// Unwrap returns ErrBusy.
func (e *BusyError) Unwrap() error { return ErrBusy }

// invalid returns an error wrapping ErrInvalid.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
