package actors

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// A branch whose latest snapshot no longer decodes is not stopped for
// good: it replays from the snapshot before it and the events after that
// (kept until a later snapshot proved readable), reaching the same state,
// and takes turns as before.
func TestBranchReplaysPastAnUnreadableSnapshot(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.SnapshotEvery = 4
	cfg.Fold = &core.Policy{} // every turn folded and indexed: many events, many snapshots
	r, b := branchOn(t, cfg)
	const turns = 4
	for i := range turns {
		if _, last, _ := runTurn(t, r, b, "turn number "+string(rune('a'+i))); last.Phase != messages.PhaseResponseFinalized {
			t.Fatalf("turn %d ended %+v", i, last)
		}
	}
	ev.waitFor(t, "TurnIndexed", turns, isType[messages.TurnIndexed])
	before, err := r.Inspect(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := r.pid(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(bg, b); err != nil {
		t.Fatal(err)
	}
	<-r.goneChan(pid)
	latest, ok, err := r.db.Snapshot(bg, pid.Id)
	if err != nil || !ok {
		t.Fatalf("no snapshot of %s: %v", pid.Id, err)
	}
	prev, ok, err := r.db.PrevSnapshot(bg, pid.Id)
	if err != nil || !ok || prev.Index >= latest.Index {
		t.Fatalf("previous snapshot %+v, %v, %v; latest at %d", prev, ok, err, latest.Index)
	}
	// A fault a test injects: not part of persistence.Database.
	corrupter, ok := r.db.(interface {
		CorruptSnapshot(ctx context.Context, actor string) error
	})
	if !ok {
		t.Fatalf("%T cannot corrupt a snapshot", r.db)
	}
	if err := corrupter.CorruptSnapshot(bg, pid.Id); err != nil {
		t.Fatal(err)
	}

	after, err := r.Inspect(bg, b) // activates the branch: replay
	if err != nil {
		t.Fatalf("Inspect after the latest snapshot was corrupted: %v", err)
	}
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("state replayed past the corrupt snapshot:\n%+v\nwant\n%+v", after, before)
	}
	text, last, _ := runTurn(t, r, b, "and one more")
	if last.Phase != messages.PhaseResponseFinalized || !strings.Contains(text, "[local]") {
		t.Fatalf("turn after recovery ended %+v with %q", last, text)
	}
	ev.waitFor(t, "TurnIndexed", turns+1, isType[messages.TurnIndexed])
	// Snapshots taken since replace the corrupt one; the branch
	// activates from them again.
	for range 2 * cfg.SnapshotEvery {
		if _, err := r.Pin(bg, b, "a fact"); err != nil {
			t.Fatal(err)
		}
	}
	want, err := r.Inspect(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ = r.pid(bg, b)
	if err := r.Stop(bg, b); err != nil {
		t.Fatal(err)
	}
	<-r.goneChan(pid)
	if s, _, _ := r.db.Snapshot(bg, pid.Id); s.Index <= latest.Index {
		t.Fatalf("latest snapshot still at %d, want after %d", s.Index, latest.Index)
	}
	if got, err := r.Inspect(bg, b); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("state after more snapshots: %+v, %v\nwant %+v", got, err, want)
	}
}
