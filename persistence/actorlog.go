package persistence

import (
	"context"
	"fmt"
	"math"

	ppersist "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Envelope is the message a persistent actor hands to the persistence
// middleware's PersistReceive: its own encoding of the event, and the Tx
// to commit atomically with it (context-store appends, lifecycle rows,
// jobs). Replay returns only the event bytes, as a *wrapperspb.BytesValue.
type Envelope struct {
	*wrapperspb.BytesValue
	Tx *Tx
}

// NewEnvelope wraps event bytes and the writes that go with them.
func NewEnvelope(event []byte, tx *Tx) *Envelope {
	return &Envelope{BytesValue: wrapperspb.Bytes(event), Tx: tx}
}

// ActorLog is protoactor-go's persistence provider on this database:
// actor events and snapshots in Badger, written through the group
// committer. Its API returns no errors, so a failed write panics with an
// error wrapping the cause; the actor's supervisor decides what follows.
type ActorLog struct {
	db    *DB
	every int
}

// ActorLog returns the persistence provider; actors snapshot every
// snapshotEvery events (0: never), and a snapshot compacts the events
// before it.
func (d *DB) ActorLog(snapshotEvery int) *ActorLog {
	if snapshotEvery <= 0 {
		snapshotEvery = math.MaxInt
	}
	return &ActorLog{db: d, every: snapshotEvery}
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

func eventBytes(msg proto.Message) ([]byte, *Tx, error) {
	switch m := msg.(type) {
	case *Envelope:
		return m.Value, m.Tx, nil
	case *wrapperspb.BytesValue:
		return m.Value, nil, nil
	default:
		b, err := proto.Marshal(msg)
		return b, nil, err
	}
}

func (l *ActorLog) PersistEvent(actor string, index int, msg proto.Message) {
	data, tx, err := eventBytes(msg)
	if err == nil {
		if tx == nil {
			tx = &Tx{}
		}
		tx.Event = &EventRecord{Actor: actor, Index: uint64(index), Data: data}
		_, err = l.db.Commit(context.Background(), tx)
	}
	if err != nil {
		panic(&PersistError{Actor: actor, Index: index, Err: err})
	}
}

func (l *ActorLog) PersistSnapshot(actor string, index int, msg proto.Message) {
	data, _, err := eventBytes(msg)
	if err == nil {
		_, err = l.db.Commit(context.Background(), &Tx{Snapshot: &EventRecord{Actor: actor, Index: uint64(index), Data: data}})
	}
	if err != nil {
		panic(&PersistError{Actor: actor, Index: index, Err: err})
	}
}

func (l *ActorLog) GetSnapshot(actor string) (any, int, bool) {
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
