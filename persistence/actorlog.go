package persistence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	ppersist "github.com/asynkron/protoactor-go/persistence"
	"github.com/rs/zerolog"
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
// actor events and snapshots in the database (Badger or PostgreSQL), written through the group
// committer. Its API returns no errors, so a failed write panics with an
// error wrapping the cause; the actor's supervisor decides what follows.
//
// An actor's log keeps two snapshots: its latest, and the one before it
// with every event from that one's index on. When a snapshot is written
// the latest until then is read back and checked (CheckSnapshots): if it
// is readable it becomes the fallback and the events before it go;
// otherwise the fallback and the events stay. A recovery whose latest
// snapshot is unreadable replays from the fallback and the events after
// it, or from the first event if there is none, reaching the same state
// (an invalid snapshot means replay, Context Management v2). The log
// holds at most the events between two snapshots more than the latest
// snapshot needs.
//
// A write the store refuses for lack of free space (ErrNoSpace) is not a
// failure of the actor: the write waits, trying again every spaceRetry,
// until the space is there, so that work already accepted finishes once
// space is freed, with no restart; only after StopWaiting does it panic.
type ActorLog struct {
	db    ActorStore
	log   zerolog.Logger
	every int
	// check and report are set by CheckSnapshots.
	check  func(actor string, data []byte) error
	report func(actor string, index uint64, err error)

	mu   sync.Mutex
	held map[string]*Tx // per actor: held events and their writes

	stop     chan struct{} // closed by StopWaiting
	stopOnce sync.Once
}

// spaceRetry is how often a write waiting for free space tries again.
const spaceRetry = 250 * time.Millisecond

// ActorStore is what an ActorLog needs of its database: each engine's Database.
type ActorStore interface {
	Commit(ctx context.Context, tx *Tx) (TxResult, error)
	Events(ctx context.Context, actor string, from uint64, fn func(index uint64, data []byte) error) error
	Snapshot(ctx context.Context, actor string) (EventRecord, bool, error)
	PrevSnapshot(ctx context.Context, actor string) (EventRecord, bool, error)
}

// NewActorLog returns the persistence provider over db, an engine's
// database: each engine's ActorLog method calls it (see DB.ActorLog).
func NewActorLog(db ActorStore, log zerolog.Logger, snapshotEvery int) *ActorLog {
	if snapshotEvery <= 0 {
		snapshotEvery = math.MaxInt
	}
	return &ActorLog{db: db, log: log, every: snapshotEvery, held: map[string]*Tx{}, stop: make(chan struct{})}
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
				l.log.Info().Str("actor", actor).Msg("free space is back: write done")
			}
			return err
		}
		if !warned {
			l.log.Warn().Err(err).Str("actor", actor).Msg("write waits for free space")
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

// CheckSnapshots makes l decide with check whether a stored snapshot is
// readable (check decodes it as the actor would, and returns why not),
// and tell report of each one that is not, with the reason. Without it
// every snapshot whose record can be read is taken as readable. Call it
// before any actor starts.
func (l *ActorLog) CheckSnapshots(check func(actor string, data []byte) error, report func(actor string, index uint64, err error)) {
	l.check, l.report = check, report
}

// readable reads a snapshot of actor with get and checks it: ok is false
// when there is none, or when it is unreadable (reported). Only an error
// reading the store is returned.
func (l *ActorLog) readable(actor string, get func(context.Context, string) (EventRecord, bool, error)) (
	rec EventRecord, ok, found bool, err error) {
	rec, found, err = get(context.Background(), actor)
	if errors.Is(err, ErrCorrupt) {
		l.bad(actor, rec.Index, err)
		return rec, false, true, nil
	}
	if err != nil || !found {
		return rec, false, found, err
	}
	if l.check != nil {
		if err := l.check(actor, rec.Data); err != nil {
			l.bad(actor, rec.Index, err)
			return rec, false, true, nil
		}
	}
	return rec, true, true, nil
}

func (l *ActorLog) bad(actor string, index uint64, err error) {
	if l.report != nil {
		l.report(actor, index, err)
	}
}

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

// PersistSnapshot writes actor's snapshot at index. The snapshot it
// replaces is read back first: if readable it is kept as the new one's
// fallback, and the events before it are deleted; if not, the fallback
// and the events stay as they are.
func (l *ActorLog) PersistSnapshot(actor string, index int, msg proto.Message) {
	data, _, _, err := eventBytes(msg)
	if err == nil {
		var prev EventRecord
		var ok bool
		if prev, ok, _, err = l.readable(actor, l.db.Snapshot); err == nil {
			tx := l.take(actor, nil)
			tx.Snapshot = &EventRecord{Actor: actor, Index: uint64(index), Data: data}
			if ok && prev.Index <= uint64(index) {
				tx.PrevSnapshot = &prev
			}
			err = l.commit(actor, tx)
		}
	}
	if err != nil {
		panic(&PersistError{Actor: actor, Index: index, Err: err})
	}
}

// ErrNoReadableSnapshot is what GetSnapshot panics with (wrapped in a
// PersistError) when no snapshot of an actor is readable and the events
// a full replay needs were compacted.
var ErrNoReadableSnapshot = fmt.Errorf("%w: no readable snapshot, and the events before it were compacted", ErrCorrupt)

// GetSnapshot starts a recovery of actor: writes it held and did not
// commit are dropped, as the crash that ends an actor drops them. It
// returns the latest snapshot if it is readable, else the previous one
// (the events after it are kept), else none: the actor replays every
// event, which are all there when no snapshot was ever readable long
// enough to compact them.
func (l *ActorLog) GetSnapshot(actor string) (any, int, bool) {
	l.mu.Lock()
	delete(l.held, actor)
	l.mu.Unlock()
	rec, ok, found, err := l.readable(actor, l.db.Snapshot)
	if err == nil && !ok && found {
		rec, ok, _, err = l.readable(actor, l.db.PrevSnapshot)
		if err == nil && !ok {
			err = l.fullReplay(actor)
		}
	}
	if err != nil {
		panic(&PersistError{Actor: actor, Index: -1, Err: err})
	}
	if !ok {
		return nil, 0, false
	}
	return wrapperspb.Bytes(rec.Data), int(rec.Index), true
}

// fullReplay checks that actor's log still holds its events from the
// first on, for a replay without snapshot.
func (l *ActorLog) fullReplay(actor string) error {
	first := -1
	err := l.db.Events(context.Background(), actor, 0, func(index uint64, _ []byte) error {
		first = int(index)
		return errStopScan
	})
	if err != nil && err != errStopScan {
		return err
	}
	if first != 0 {
		return fmt.Errorf("%w (actor %s, first event %d)", ErrNoReadableSnapshot, actor, first)
	}
	return nil
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
// compacts the events before the one before it. They do nothing.
func (l *ActorLog) DeleteEvents(actor string, inclusiveToIndex int)    {}
func (l *ActorLog) DeleteSnapshots(actor string, inclusiveToIndex int) {}

// CorruptSnapshotData is a snapshot record of index whose data no actor
// decodes: what CorruptSnapshot writes, on every engine.
func CorruptSnapshotData(index uint64) []byte {
	return append(binary.AppendUvarint(nil, index), 0xff, 0x00, '{')
}
