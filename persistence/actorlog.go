package persistence

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	ppersist "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Envelope is the message a persistent actor hands to the persistence
// middleware's PersistReceive: its own encoding of the event, and the Tx
// to commit atomically with it (context-store appends, lifecycle rows,
// jobs). Replay returns only the event bytes, as a *wrapperspb.BytesValue.
//
// A held envelope is not written when it is persisted: ActorLog keeps it
// and commits it in one transaction with the actor's next event (or
// snapshot, or Flush). An actor holds an event when it knows it will
// persist another before it tells anyone about either, and so saves a
// synced write; nothing may be acknowledged while an event is held.
type Envelope struct {
	*wrapperspb.BytesValue
	Tx   *Tx
	Hold bool
}

// NewEnvelope wraps event bytes and the writes that go with them.
func NewEnvelope(event []byte, tx *Tx) *Envelope {
	return &Envelope{BytesValue: wrapperspb.Bytes(event), Tx: tx}
}

// ActorLog is protoactor-go's persistence provider on this database:
// actor events and snapshots in Badger, written through the group
// committer. Its API returns no errors, so a failed write panics with an
// error wrapping the cause; the actor's supervisor decides what follows.
//
// A write the store refuses for lack of free space (ErrNoSpace) is not a
// failure of the actor: the write waits, trying again every spaceRetry,
// until the space is there, so that work already accepted finishes once
// space is freed, with no restart; only after StopWaiting does it panic.
type ActorLog struct {
	db    *DB
	every int

	mu   sync.Mutex
	held map[string]*Tx // per actor: held events and their writes

	stop     chan struct{} // closed by StopWaiting
	stopOnce sync.Once
}

// spaceRetry is how often a write waiting for free space tries again.
const spaceRetry = 250 * time.Millisecond

// ActorLog returns the persistence provider; actors snapshot every
// snapshotEvery events (0: never), and a snapshot compacts the events
// before it.
func (d *DB) ActorLog(snapshotEvery int) *ActorLog {
	if snapshotEvery <= 0 {
		snapshotEvery = math.MaxInt
	}
	return &ActorLog{db: d, every: snapshotEvery, held: map[string]*Tx{}, stop: make(chan struct{})}
}

// StopWaiting makes the writes waiting for free space, and later ones the
// store refuses for it, fail (panic) at once, as other failed writes do;
// a runtime calls it before it stops its actors.
func (l *ActorLog) StopWaiting() { l.stopOnce.Do(func() { close(l.stop) }) }

// commit commits actor's tx, waiting for free space while the store
// refuses it for lack of it (see ActorLog).
func (l *ActorLog) commit(actor string, tx *Tx) error {
	warned := false
	for {
		_, err := l.db.Commit(context.Background(), tx)
		if !errors.Is(err, ErrNoSpace) {
			if warned && err == nil {
				l.db.log.Info().Str("actor", actor).Msg("free space is back: write done")
			}
			return err
		}
		if !warned {
			l.db.log.Warn().Err(err).Str("actor", actor).Msg("write waits for free space")
			warned = true
		}
		select {
		case <-l.stop:
			return err
		case <-time.After(spaceRetry):
		}
	}
}

var (
	_ ppersist.Provider      = (*ActorLog)(nil)
	_ ppersist.ProviderState = (*ActorLog)(nil)
)

// PersistError is what ActorLog panics with when a write fails.
type PersistError struct {
	Actor string
	Index int
	Err   error
}

func (e *PersistError) Error() string {
	return fmt.Sprintf("persistence: actor %s, event %d: %v", e.Actor, e.Index, e.Err)
}

func (e *PersistError) Unwrap() error { return e.Err }

func (l *ActorLog) GetState() ppersist.ProviderState { return l }
func (l *ActorLog) Restart()                         {}
func (l *ActorLog) GetSnapshotInterval() int         { return l.every }

func eventBytes(msg proto.Message) ([]byte, *Tx, bool, error) {
	switch m := msg.(type) {
	case *Envelope:
		return m.Value, m.Tx, m.Hold, nil
	case *wrapperspb.BytesValue:
		return m.Value, nil, false, nil
	default:
		b, err := proto.Marshal(msg)
		return b, nil, false, err
	}
}

// take removes and returns actor's held writes merged with tx (either may
// be nil).
func (l *ActorLog) take(actor string, tx *Tx) *Tx {
	l.mu.Lock()
	held := l.held[actor]
	delete(l.held, actor)
	l.mu.Unlock()
	switch {
	case held == nil && tx == nil:
		return &Tx{}
	case held == nil:
		return tx
	case tx != nil:
		held.merge(tx)
	}
	return held
}

func (l *ActorLog) PersistEvent(actor string, index int, msg proto.Message) {
	data, tx, hold, err := eventBytes(msg)
	if err == nil && hold {
		if tx == nil {
			tx = &Tx{}
		}
		tx.Events = append(tx.Events, EventRecord{Actor: actor, Index: uint64(index), Data: data})
		l.mu.Lock()
		if h := l.held[actor]; h != nil {
			h.merge(tx)
		} else {
			l.held[actor] = tx
		}
		l.mu.Unlock()
		return
	}
	if err == nil {
		tx = l.take(actor, tx)
		tx.Events = append(tx.Events, EventRecord{Actor: actor, Index: uint64(index), Data: data})
		err = l.commit(actor, tx)
	}
	if err != nil {
		panic(&PersistError{Actor: actor, Index: index, Err: err})
	}
}

// Flush commits actor's held events, if any.
func (l *ActorLog) Flush(actor string) {
	l.mu.Lock()
	held := l.held[actor]
	delete(l.held, actor)
	l.mu.Unlock()
	if held == nil {
		return
	}
	if err := l.commit(actor, held); err != nil {
		panic(&PersistError{Actor: actor, Index: -1, Err: err})
	}
}

func (l *ActorLog) PersistSnapshot(actor string, index int, msg proto.Message) {
	data, _, _, err := eventBytes(msg)
	if err == nil {
		tx := l.take(actor, nil)
		tx.Snapshot = &EventRecord{Actor: actor, Index: uint64(index), Data: data}
		err = l.commit(actor, tx)
	}
	if err != nil {
		panic(&PersistError{Actor: actor, Index: index, Err: err})
	}
}

// GetSnapshot starts a recovery of actor: writes it held and did not
// commit are dropped, as the crash that ends an actor drops them.
func (l *ActorLog) GetSnapshot(actor string) (any, int, bool) {
	l.mu.Lock()
	delete(l.held, actor)
	l.mu.Unlock()
	rec, ok, err := l.db.Snapshot(context.Background(), actor)
	if err != nil {
		panic(&PersistError{Actor: actor, Index: -1, Err: err})
	}
	if !ok {
		return nil, 0, false
	}
	return wrapperspb.Bytes(rec.Data), int(rec.Index), true
}

func (l *ActorLog) GetEvents(actor string, start, end int, fn func(any)) {
	err := l.db.Events(context.Background(), actor, uint64(start), func(index uint64, data []byte) error {
		if end > 0 && index >= uint64(end) {
			return errStopScan
		}
		fn(wrapperspb.Bytes(append([]byte(nil), data...)))
		return nil
	})
	if err != nil && err != errStopScan {
		panic(&PersistError{Actor: actor, Index: start, Err: err})
	}
}

var errStopScan = fmt.Errorf("stop scan")

// DeleteEvents and DeleteSnapshots are not needed: a snapshot already
// compacts the events before it. They do nothing.
func (l *ActorLog) DeleteEvents(actor string, inclusiveToIndex int)    {}
func (l *ActorLog) DeleteSnapshots(actor string, inclusiveToIndex int) {}
