// Package faults is how `ctxinf chaos` injects failures into a runtime
// it opens: workers and steps killed at their kill points, branch actors
// panicked. It is internal so that the runtime's public API carries no
// chaos hooks: a runtime opened without an Injector (actors.Config.Faults)
// kills nothing.
package faults

import (
	"context"
	"errors"
	"sync"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/supervision"
)

// Injector injects failures into the runtime opened with it. Kills arms
// the kill points of the runtime's actors (supervision.KillSwitch);
// KillBranch panics a branch actor at once.
type Injector struct {
	Kills supervision.KillSwitch

	mu     sync.Mutex
	branch func(ctx context.Context, b messages.BranchID) error
}

// ErrNotAttached is returned by KillBranch before a runtime is opened
// with the injector.
var ErrNotAttached = errors.New("faults: no runtime was opened with this injector")

// Attach is called by the runtime opened with the injector, with the
// function that panics one of its branch actors.
func (in *Injector) Attach(killBranch func(ctx context.Context, b messages.BranchID) error) {
	in.mu.Lock()
	in.branch = killBranch
	in.mu.Unlock()
}

// KillBranch makes branch b's actor panic: supervision restarts it and
// it rebuilds its state by replay.
func (in *Injector) KillBranch(ctx context.Context, b messages.BranchID) error {
	in.mu.Lock()
	kill := in.branch
	in.mu.Unlock()
	if kill == nil {
		return ErrNotAttached
	}
	return kill(ctx, b)
}
