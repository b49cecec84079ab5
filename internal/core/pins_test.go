package core

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

// A snapshot written before pins had ids numbers its pinned facts 1, 2,
// … in order, as replaying the log that wrote it does, and pins made
// after it take the next ids.
func TestSnapshotBeforePinIDs(t *testing.T) {
	t.Parallel()
	s := newScript(t).run(`create`, `pin "a"`, `pin "b"`, `submit T1`, `start T1 S1`, `finalize T1 S1 R1 completed`)
	data, err := json.Marshal(&s.b)
	if err != nil {
		t.Fatal(err)
	}
	var old map[string]any // the snapshot as written before pins had ids
	if err := json.Unmarshal(data, &old); err != nil {
		t.Fatal(err)
	}
	delete(old, "pins")
	delete(old, "pin_seq")
	data, _ = json.Marshal(old)
	var b Branch
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	want := []messages.PinnedFact{{ID: 1, Fact: "a"}, {ID: 2, Fact: "b"}}
	if got := b.LivePins(); !reflect.DeepEqual(got, want) || b.PinSeq != 2 {
		t.Fatalf("pins of an old snapshot: %+v (pin_seq %d), want %+v", got, b.PinSeq, want)
	}
	evs, err := b.Pin("c", PinLimits{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(evs[0]); err != nil {
		t.Fatal(err)
	}
	evs, err = b.Unpin(1, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(evs[0]); err != nil {
		t.Fatal(err)
	}
	if got := b.LivePins(); len(got) != 2 || got[0].ID != 2 || got[1].ID != 3 || got[1].Fact != "c" || got[1].Seq != 1 {
		t.Errorf("after pinning c and unpinning 1: %+v", got)
	}
}
