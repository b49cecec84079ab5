package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/contextinfinity/ctxinf/messages"
)

// Placement says which runtime of a cluster owns a session: the branch
// actors of a session run on its owner only, so that exactly one
// activation of a branch runs at a time (docs/CLUSTER.md). The
// unit is the session because a fork reads its parent's state and a
// search reads its ancestors' indexes: a session's branches are placed
// together. A runtime without a Placement owns every session.
//
// Owner must be cheap (it is asked on every request to a branch) and
// safe for concurrent use. While membership changes two runtimes may
// both believe they own a session for a moment; the store's
// compare-and-swap on every head keeps the stale one from committing.
type Placement interface {
	// Owner returns the member that owns session (an address the
	// placement understands) and whether that member is this runtime.
	// ok is false when no member owns it yet (this member has not
	// joined a cluster).
	Owner(session messages.SessionID) (owner string, local, ok bool)
}

// ErrNotOwner is the error of a request to a branch whose session
// another member of the cluster owns (errors.As a *NotOwnerError).
var ErrNotOwner = errors.New("actors: another member owns this session")

// NotOwnerError names the member that owns the session, for the server
// to forward the request to; Owner is "" while no member owns it (the
// cluster is forming).
type NotOwnerError struct {
	Session messages.SessionID
	Owner   string
}

func (e *NotOwnerError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("%v: session %s has no owner yet (the cluster is forming)", ErrNotOwner, e.Session)
	}
	return fmt.Sprintf("%v: session %s is owned by %s", ErrNotOwner, e.Session, e.Owner)
}

// Is makes errors.Is(err, ErrNotOwner) true.
func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }

// maxOwnedIDTries bounds how many session ids CreateSession draws to
// find one this member owns: with n members a draw is owned with
// probability 1/n, so 64 draws fail with probability (1-1/n)^64 (1e-8
// for 3 members, 2e-3 for 10).
const maxOwnedIDTries = 64

// ownedSessionID returns a new session id that this runtime owns.
func (r *Runtime) ownedSessionID(now func() messages.SessionID) (messages.SessionID, error) {
	id := now()
	p := r.cfg.Placement
	if p == nil {
		return id, nil
	}
	for range maxOwnedIDTries {
		_, local, ok := p.Owner(id)
		if !ok {
			return id, &NotOwnerError{Session: id}
		}
		if local {
			return id, nil
		}
		id = now()
	}
	return id, fmt.Errorf("%w: no session id of %d drawn is this member's", ErrNotOwner, maxOwnedIDTries)
}

// placed returns a *NotOwnerError when branch's session is another
// member's; session is the branch's session when the caller knows it
// (a branch being created), zero otherwise (read from the store once
// and remembered: a branch never changes session). A branch that does
// not exist is left to the request to report.
func (r *Runtime) placed(ctx context.Context, branch messages.BranchID, session messages.SessionID) error {
	p := r.cfg.Placement
	if p == nil {
		return nil
	}
	if session.IsZero() {
		if v, ok := r.sessionOf.get(branch); ok {
			session = v
		} else {
			row, err := r.db.BranchRow(ctx, branch)
			if err != nil {
				return nil // not found (or unreadable): the request says so
			}
			session = row.Session
			r.sessionOf.put(branch, session)
		}
	} else {
		r.sessionOf.put(branch, session)
	}
	return r.sessionPlaced(session)
}

// sessionPlaced returns a *NotOwnerError when session is not this
// runtime's (nil without a Placement).
func (r *Runtime) sessionPlaced(session messages.SessionID) error {
	if r.cfg.Placement == nil {
		return nil
	}
	owner, local, _ := r.cfg.Placement.Owner(session)
	if local {
		return nil
	}
	return &NotOwnerError{Session: session, Owner: owner}
}

// owns reports whether this runtime owns session.
func (r *Runtime) owns(session messages.SessionID) bool { return r.sessionPlaced(session) == nil }

// sessionOfMsg returns the session a request names when it creates its
// branch (the branch's row is not stored yet).
func sessionOfMsg(msg any) messages.SessionID {
	if c, ok := msg.(*createReq); ok {
		if c.session != nil {
			return c.session.ID
		}
		return c.row.Session
	}
	return messages.SessionID{}
}

// Rebalance is what a member does when the cluster's membership
// changes: it stops the branch actors of sessions it no longer owns
// (their new owner activates them from the store, and drops what its
// memory held of them, which the new owner may change), then wakes the
// branches it owns that have jobs pending, as the startup reconciler
// does (a member that died left them). It returns the branches stopped
// and woken.
func (r *Runtime) Rebalance(ctx context.Context) (stopped, woken int, err error) {
	if r.cfg.Placement == nil {
		return 0, 0, nil
	}
	res, err := r.sys.Root.RequestFuture(r.root, &liveBranchesReq{}, r.cfg.RequestTimeout).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("rebalance: %w", err)
	}
	var gone []messages.BranchID
	for id, pid := range res.(map[messages.BranchID]*actor.PID) {
		if r.placed(ctx, id, messages.SessionID{}) == nil {
			continue
		}
		r.sys.Root.Send(r.root, &passivateReq{id: id, pid: pid})
		r.pids.CompareAndDelete(id, pid)
		gone = append(gone, id)
	}
	if len(gone) > 0 {
		r.mem.forget(gone)
		r.log.Info().Int("branches", len(gone)).Msg("rebalance: stopped the branches of sessions another member owns now")
	}
	woken, err = r.wakeJobs(ctx)
	return len(gone), woken, err
}

// liveBranchesReq asks root for its live branch actors.
type liveBranchesReq struct{}

// wakeJobs wakes every branch with a pending job that this runtime
// owns, and returns how many it woke.
func (r *Runtime) wakeJobs(ctx context.Context) (int, error) {
	jobs, err := r.db.Jobs(ctx)
	if err != nil {
		return 0, fmt.Errorf("reconcile: %w", err)
	}
	var last messages.BranchID
	n := 0
	for _, j := range jobs {
		if j.Branch == last {
			continue
		}
		last = j.Branch
		if errors.Is(r.placed(ctx, j.Branch, messages.SessionID{}), ErrNotOwner) {
			continue // its owner's work
		}
		if _, err := r.ask(ctx, j.Branch, &wakeReq{}); err != nil {
			r.log.Warn().Err(err).Str("branch", j.Branch.String()).Msg("reconcile")
			continue
		}
		n++
	}
	return n, nil
}
