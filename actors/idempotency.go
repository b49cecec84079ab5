package actors

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// ErrKeyReused is returned for a request sent with an idempotency key
// that an earlier request, with another body, was sent with.
var ErrKeyReused = errors.New("actors: idempotency key reused for another request")

// Acceptance says what became of a request whose answer did not come in
// time (TimeoutError).
type Acceptance int8

// The acceptances of a request that timed out.
const (
	// AcceptedUnknown: the branch was carrying the request out when the
	// wait ended; whether it committed is not known yet (a turn's row,
	// GET .../turns/{turn}, tells later; a repeat with the same
	// idempotency key is safe).
	AcceptedUnknown Acceptance = iota
	// AcceptedNo: the branch never read the request, and never will:
	// nothing was stored, and sending it again is safe.
	AcceptedNo
	// AcceptedYes: the request was carried out and is durable (a turn:
	// its acceptance, TX-0, is committed).
	AcceptedYes
)

func (a Acceptance) String() string {
	switch a {
	case AcceptedNo:
		return "not accepted: nothing was stored, send it again"
	case AcceptedYes:
		return "accepted: it is stored"
	}
	return "accepted or not is unknown yet"
}

// TimeoutError is the error of a request to a branch that was not answered
// in time (Config.RequestTimeout; a request the branch has begun to carry
// out is waited for once more as long): it is ErrTimeout, and says
// whether the request was carried out. For a turn, Turn is its id when it
// was accepted, or when that is unknown and the turn was sent without an
// idempotency key (its row tells later).
type TimeoutError struct {
	Branch   messages.BranchID
	Accepted Acceptance
	Turn     messages.TurnID
	what     string // the turn, the branch, the import, the request
}

func (e *TimeoutError) Error() string {
	what := e.what
	if what == "" {
		what = "the request"
	}
	msg := fmt.Sprintf("%v: branch %s did not answer in time; ", ErrTimeout, e.Branch)
	switch {
	case e.Accepted == AcceptedNo:
		return msg + what + " was not accepted and nothing was stored: send it again"
	case e.Accepted == AcceptedYes:
		return msg + what + " was accepted and is stored"
	case !e.Turn.IsZero():
		return msg + "whether the turn was accepted is not known yet: its row (GET /v1/branches/" + e.Branch.String() +
			"/turns/" + e.Turn.String() + ") tells"
	}
	return msg + "whether " + what + " was accepted is not known yet: send it again with the same idempotency key"
}

// Unwrap makes a TimeoutError ErrTimeout.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// claim is how a request that may store something is taken by the branch
// actor, or abandoned by its caller that stopped waiting, never both: an
// abandoned request is dropped unread, so a caller told that nothing was
// stored was told the truth.
type claim struct{ state atomic.Int32 } // claimQueued, claimTaken or claimAbandoned

const (
	claimQueued int32 = iota
	claimTaken
	claimAbandoned
)

// take is the branch actor's: it reports whether to carry the request out.
func (c *claim) take() bool { return c.state.CompareAndSwap(claimQueued, claimTaken) }

// abandon is the caller's: it reports whether the request will never be
// carried out.
func (c *claim) abandon() bool { return c.state.CompareAndSwap(claimQueued, claimAbandoned) }

func (c *claim) taken() bool { return c.state.Load() == claimTaken }

func (c *claim) claimed() *claim { return c }

// claimable is a request with a claim.
type claimable interface{ claimed() *claim }

// keyHash is the hash of a request made of parts, stored with its
// idempotency key.
func keyHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkKey checks an idempotency key given to the runtime.
func checkKey(key string) error { return persistence.CheckIdempotencyKey(key) }

// keyLocks serializes the requests made under one idempotency key in
// this process (ClaimKey); the key's row makes them idempotent across
// restarts.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	ch chan struct{}
	n  int // holders and waiters
}

func (k *keyLocks) lock(ctx context.Context, name string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[name]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.locks[name] = l
	}
	l.n++
	k.mu.Unlock()
	done := func() {
		k.mu.Lock()
		if l.n--; l.n == 0 {
			delete(k.locks, name)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	return func() { <-l.ch; done() }, nil
}

// ClaimKey holds idempotency key key of scope and owner for the caller
// until it calls release: another request under the key waits for it.
// If a request under the key was carried out already, it returns the
// key's row and found; one whose hash differs is ErrKeyReused (hash ""
// leaves the comparison to the caller, who knows its request's hash only
// once it has read it). The
// caller that finds nothing carries the request out with the key's row
// in its final commit (ImportOptions.Key), then releases.
func (r *Runtime) ClaimKey(ctx context.Context, scope persistence.KeyScope, owner messages.BranchID, key, hash string) (
	row persistence.IdempotencyRow, found bool, release func(), err error) {
	if err := checkKey(key); err != nil {
		return row, false, nil, err
	}
	name := string(rune(scope)) + owner.String() + key
	release, err = r.keys.lock(ctx, name)
	if err != nil {
		return row, false, nil, err
	}
	row, err = r.db.IdempotencyKey(ctx, scope, owner, key)
	switch {
	case errors.Is(err, persistence.ErrKeyNotFound):
		return row, false, release, nil
	case err != nil:
		release()
		return row, false, nil, err
	case row.Hash != hash && hash != "":
		release()
		return row, false, nil, fmt.Errorf("%w: key %q was first sent with another request (made %s); use a new key",
			ErrKeyReused, key, row.Created.UTC().Format(time.RFC3339))
	}
	return row, true, release, nil
}

// keyed returns the stream of the turn submitted on this branch under
// idempotency key key, if there is one: the live turn's (a follower), or
// one that tells how the turn ended. A key of another request is
// ErrKeyReused.
func (l *turnLoop) keyed(key, hash string) (*TurnStream, bool, error) {
	row, ok := l.keys[key]
	if !ok {
		var err error
		row, err = l.rows.IdempotencyKey(context.Background(), persistence.ScopeTurn, l.id, key)
		if errors.Is(err, persistence.ErrKeyNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	if row.Hash != hash {
		return nil, false, fmt.Errorf("%w: key %q was first sent for turn %s with another text or model; use a new key",
			ErrKeyReused, key, row.Turn)
	}
	s, err := l.answerOf(row.Turn)
	return s, true, err
}

// answerOf returns a stream of turn for a repeat of the request that
// made it: a follower of the live stream while the turn runs, else one
// that holds its reply (from the store) and how it ended.
func (l *turnLoop) answerOf(turn messages.TurnID) (*TurnStream, error) {
	if s := l.streams[turn]; s != nil {
		return s.follow(), nil
	}
	if t, ok := l.b.Turn(turn); ok && t.Awaiting() {
		return l.awaitingStream(t), nil
	}
	row, err := l.queries.turnRow(turn)
	if err != nil {
		return nil, err
	}
	phase, reply, reason := row.Phase, row.Reply, row.Reason
	var out messages.StepOutcome
	if t, ok := l.b.Turn(turn); ok {
		phase, reply, reason, out = t.Phase, t.Reply, t.Reason, t.Outcome
	} else if phase == messages.PhaseFailed {
		out = messages.FailedOutcome(row.Code, reason)
	} else if out.Kind.UnmarshalText([]byte(row.Outcome)) != nil {
		out.Kind = messages.OutcomeCompleted
	}
	s := newTurnStream(l.id, turn, row.Seq)
	if phase < messages.PhaseResponseFinalized {
		l.streams[turn] = s // in flight with no reader: it ends with the turn
		return s, nil
	}
	done := Update{Done: true, Phase: phase, Outcome: out, Err: reason, Repeat: true}
	if phase == messages.PhaseFailed && done.Err == "" {
		done.Err = out.Message
	}
	if steps, err := l.rows.Steps(context.Background(), turn); err == nil {
		for _, st := range steps {
			done.Displayed += st.Displayed
			done.Durable += st.Durable
		}
	}
	if !reply.IsZero() && phase != messages.PhaseFailed {
		m, err := l.msgs.get(reply)
		if err != nil {
			return nil, err
		}
		// The reply is committed: all its text is durable.
		n := uint64(len(m.RenderedText))
		done.TextDisplayed, done.TextDurable = n, n
		s.push(Update{Delta: m.RenderedText}.withCounters(done.counters()))
	}
	s.push(done)
	return s, nil
}
