package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// snapshotLog drives an ActorLog as protoactor's persistence middleware
// does, with snapshots that are "readable" when they start with "ok" and
// are not listed in unreadable.
type snapshotLog struct {
	t          *testing.T
	d          DB
	l          *persistence.ActorLog
	actor      string
	unreadable map[string]bool
	reported   []uint64 // indexes of the snapshots reported unreadable
}

func newSnapshotLog(t *testing.T, d DB, actor string) *snapshotLog {
	s := &snapshotLog{t: t, d: d, actor: actor, unreadable: map[string]bool{}}
	s.l = s.d.ActorLog(4)
	s.l.CheckSnapshots(func(actor string, data []byte) error {
		if actor != s.actor {
			t.Errorf("check of actor %q, want %q", actor, s.actor)
		}
		if !strings.HasPrefix(string(data), "ok") || s.unreadable[string(data)] {
			return fmt.Errorf("cannot decode %q", data)
		}
		return nil
	}, func(actor string, index uint64, err error) { s.reported = append(s.reported, index) })
	return s
}

// persist writes events from..to-1 as the middleware does: event i, then
// a snapshot at i (the state before it) when i is a multiple of 4.
func (s *snapshotLog) persist(from, to int) {
	for i := from; i < to; i++ {
		s.l.PersistEvent(s.actor, i, wrapperspb.Bytes(fmt.Appendf(nil, "e%d", i)))
		if i%4 == 0 {
			s.l.PersistSnapshot(s.actor, i, wrapperspb.Bytes(fmt.Appendf(nil, "ok%d", i)))
		}
	}
}

// recover returns what a recovery replays: the snapshot (or "") and its
// index, then the events from there.
func (s *snapshotLog) recover() (string, int, []string) {
	s.t.Helper()
	snap, index, ok := s.l.GetSnapshot(s.actor)
	data := ""
	if ok {
		data = string(snap.(*wrapperspb.BytesValue).Value)
	} else {
		index = 0
	}
	var evs []string
	s.l.GetEvents(s.actor, index, 0, func(e any) { evs = append(evs, string(e.(*wrapperspb.BytesValue).Value)) })
	return data, index, evs
}

// stored returns the indexes of the events the log holds.
func (s *snapshotLog) stored() []uint64 {
	var out []uint64
	if err := s.d.Events(bg, s.actor, 0, func(i uint64, _ []byte) error { out = append(out, i); return nil }); err != nil {
		s.t.Fatal(err)
	}
	return out
}

func events(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("e%d", i))
	}
	return out
}

func indexes(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// A snapshot compacts only the events before the snapshot before it, once
// that one was read back readable: an unreadable latest snapshot falls
// back to the previous one and the events after it, to the same state.
func testActorLogFallsBackToPreviousSnapshot(t *testing.T, d DB) {
	s := newSnapshotLog(t, d, "branch-1")
	s.persist(0, 10) // snapshots at 0, 4, 8
	if got := s.stored(); !slices.Equal(got, indexes(4, 10)) {
		t.Fatalf("events kept = %v, want 4..9 (from the previous snapshot on)", got)
	}
	if data, index, evs := s.recover(); data != "ok8" || index != 8 || !slices.Equal(evs, events(8, 10)) {
		t.Fatalf("recovery = %q at %d + %v, want ok8 at 8 + e8, e9", data, index, evs)
	}

	// The latest snapshot's bytes are damaged on disk.
	if err := s.d.CorruptSnapshot(bg, s.actor); err != nil {
		t.Fatal(err)
	}
	data, index, evs := s.recover()
	if data != "ok4" || index != 4 || !slices.Equal(evs, events(4, 10)) {
		t.Fatalf("recovery with the latest snapshot corrupt = %q at %d + %v, want ok4 at 4 + e4..e9", data, index, evs)
	}
	if !slices.Equal(s.reported, []uint64{8}) {
		t.Fatalf("reported unreadable: %v, want [8]", s.reported)
	}

	// The next snapshot finds the latest unreadable: it does not become
	// the fallback, and nothing is compacted.
	s.reported = nil
	s.persist(10, 13) // snapshot at 12
	prev, ok, err := s.d.PrevSnapshot(bg, s.actor)
	if err != nil || !ok || prev.Index != 4 || string(prev.Data) != "ok4" {
		t.Fatalf("previous snapshot = %+v, %v, %v, want ok4 at 4", prev, ok, err)
	}
	if got := s.stored(); !slices.Equal(got, indexes(4, 13)) {
		t.Fatalf("events kept = %v, want 4..12", got)
	}
	if !slices.Equal(s.reported, []uint64{8}) {
		t.Fatalf("reported unreadable: %v, want [8]", s.reported)
	}
	// The one after it, readable, does: the store is bounded again.
	s.persist(13, 17) // snapshot at 16
	if got := s.stored(); !slices.Equal(got, indexes(12, 17)) {
		t.Fatalf("events kept = %v, want 12..16", got)
	}
	if data, index, evs := s.recover(); data != "ok16" || index != 16 || !slices.Equal(evs, events(16, 17)) {
		t.Fatalf("recovery = %q at %d + %v, want ok16 at 16 + e16", data, index, evs)
	}
}

// With no readable snapshot the actor replays every event, which are all
// there while no snapshot has had a readable successor; when they are not,
// recovery fails rather than build a state without them.
func testActorLogReplaysAllWithoutReadableSnapshot(t *testing.T, d DB) {
	s := newSnapshotLog(t, d, "branch-1")
	s.persist(0, 3) // one snapshot, at 0
	s.unreadable["ok0"] = true
	if data, index, evs := s.recover(); data != "" || index != 0 || !slices.Equal(evs, events(0, 3)) {
		t.Fatalf("recovery = %q at %d + %v, want every event", data, index, evs)
	}

	s = newSnapshotLog(t, d, "branch-2") // a fresh log
	s.persist(0, 10)                     // snapshots at 0, 4, 8; events from 4 on
	s.unreadable["ok8"], s.unreadable["ok4"] = true, true
	defer func() {
		var pe *persistence.PersistError
		if err, _ := recover().(error); !errors.As(err, &pe) || !errors.Is(err, persistence.ErrNoReadableSnapshot) || !errors.Is(err, persistence.ErrCorrupt) {
			t.Fatalf("recovery without a readable snapshot nor the first events panicked with %v, want ErrNoReadableSnapshot", err)
		}
		if !slices.Equal(s.reported, []uint64{8, 4}) {
			t.Fatalf("reported unreadable: %v, want [8 4]", s.reported)
		}
	}()
	s.recover()
}
