package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

// fakeFree makes s's space guard measure free as the free space.
func fakeFree(s *badgerStore, free *atomic.Int64) {
	s.space.mu.Lock()
	s.space.statfs = func(string) (int64, error) { return free.Load(), nil }
	s.space.at = time.Time{} // measure again at the next check
	s.space.mu.Unlock()
}

// setFree sets the free space s's guard measures (see fakeFree), at once:
// the guard's last measure is forgotten.
func setFree(s *badgerStore, free *atomic.Int64, n int64) {
	s.space.mu.Lock()
	free.Store(n)
	s.space.at = time.Time{}
	s.space.mu.Unlock()
}

func TestSpaceGuardMeasures(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var free int64
	calls := 0
	g := &spaceGuard{dir: "/data", reserve: 1000, now: func() time.Time { return now },
		statfs: func(string) (int64, error) { calls++; return free, nil }}
	steps := []struct {
		name      string
		free      int64 // on disk now
		advance   time.Duration
		wrote     int64
		admit     bool // admit() succeeds
		floor     bool // floor() succeeds
		wantCalls int  // statfs calls so far
	}{
		{"first check measures", 5000, 0, 0, true, true, 1},
		{"far above: trusted", 0, time.Microsecond, 0, true, true, 1},
		{"stale: measured again", 0, spaceRecheck, 0, false, false, 3},
		{"near the reserve: every check of it", 1500, time.Microsecond, 0, true, true, 4},
		{"space back", 50_000, 0, 0, true, true, 5},
		{"writes count", 0, time.Microsecond, 1000, true, true, 5},
		{"writes bring it near: measured", 900, time.Microsecond, 48_500, false, true, 7},
	}
	for _, st := range steps {
		free = st.free
		now = now.Add(st.advance)
		g.wrote(st.wrote)
		if err := g.admit(); (err == nil) != st.admit {
			t.Errorf("%s: admit() = %v, want ok %v", st.name, err, st.admit)
		}
		if err := g.floor(); (err == nil) != st.floor {
			t.Errorf("%s: floor() = %v, want ok %v", st.name, err, st.floor)
		}
		if calls != st.wantCalls {
			t.Errorf("%s: %d statfs calls, want %d", st.name, calls, st.wantCalls)
		}
	}

	free, now = 300, now.Add(time.Hour)
	err := g.admit()
	var se *persistence.SpaceError
	if !errors.As(err, &se) || !errors.Is(err, persistence.ErrNoSpace) || se.Free != 300 || se.Need != 1000 {
		t.Fatalf("admit() = %#v, want a *SpaceError of 300 free, 1000 needed", err)
	}
	want := "the file system of /data has 300 bytes free, and new work needs 1000 (store.min_free_bytes): free at least 700 bytes"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("admit() = %q, want it to say %q", err, want)
	}
	want = "has 300 bytes free, and any write needs 500 (half of store.min_free_bytes, 1000): free at least 200 bytes"
	if err := g.floor(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("floor() = %v, want it to say %q", err, want)
	}

	// A file system that cannot be measured refuses nothing.
	g.statfs = func(string) (int64, error) { return 0, errors.New("statfs: not supported") }
	now = now.Add(time.Hour)
	if err := g.admit(); err != nil {
		t.Errorf("admit() without a measure = %v, want nil", err)
	}
}

// Short of space, the store refuses new work under the reserve and every
// write under half of it, writes nothing then and stays usable: reads go
// on, and writes resume once space is back, with no reopen.
func TestStoreRefusesWritesShortOfSpace(t *testing.T) {
	o := TestOptions(t.TempDir())
	o.MinFreeBytes = 1 << 20
	d, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	var free atomic.Int64
	free.Store(1 << 30)
	fakeFree(d.badgerStore, &free)
	t.Cleanup(func() { free.Store(1 << 30); d.Close() })
	ctx := context.Background()
	h, err := d.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t1, err := d.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("acknowledged")})
	if err != nil {
		t.Fatal(err)
	}

	// Under the reserve: new work is refused, work under way is written.
	setFree(d.badgerStore, &free, 700<<10)
	if err := d.CheckSpace(); !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("CheckSpace with 700 KiB free of a 1 MiB reserve = %v, want ErrNoSpace", err)
	}
	if err := persistence.CheckSpace(d); !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("CheckSpace(d) = %v, want ErrNoSpace", err)
	}
	t2, err := d.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("finishing")})
	if err != nil {
		t.Fatalf("append over half the reserve: %v", err)
	}

	// Under half of it: every write is refused, whole, and nothing changes.
	setFree(d.badgerStore, &free, 100<<10)
	_, err = d.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("refused")})
	var se *persistence.SpaceError
	if !errors.As(err, &se) || se.Need != 512<<10 || se.Free != 100<<10 || se.Dir != o.Dir {
		t.Fatalf("append with 100 KiB free = %v, want a *SpaceError of 102400 free, 524288 needed", err)
	}
	if _, err := d.Commit(ctx, &persistence.Tx{Events: []persistence.EventRecord{{Actor: "a", Index: 1, Data: []byte("e")}}}); !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("commit with 100 KiB free = %v, want ErrNoSpace", err)
	}
	if _, err := d.CreateBranch(ctx, persistence.BranchSpec{}); !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("create branch with 100 KiB free = %v, want ErrNoSpace", err)
	}
	p, err := d.Last(ctx, h.Branch, 10)
	if err != nil || len(p.Nodes) != 2 || p.Nodes[0].ID != t1.ID || p.Nodes[1].ID != t2.ID {
		t.Fatalf("read while short of space: %+v, %v; want the two acknowledged turns", p.Nodes, err)
	}
	if _, ok, err := d.Snapshot(ctx, "a"); err != nil || ok {
		t.Fatalf("snapshot of a: ok %v, %v", ok, err)
	}

	// Space is back: writes resume.
	setFree(d.badgerStore, &free, 1<<30)
	if err := d.CheckSpace(); err != nil {
		t.Fatalf("CheckSpace once space is back = %v", err)
	}
	t3, err := d.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("resumed")})
	if err != nil || t3.Parent != t2.ID {
		t.Fatalf("append once space is back: %+v, %v; want a child of %s", t3, err, t2.ID)
	}
}

// A write of an actor that the store refuses for lack of space waits for
// the space, rather than failing the actor; after StopWaiting it panics
// as other failed writes do.
func TestActorLogWaitsForSpace(t *testing.T) {
	o := TestOptions(t.TempDir())
	o.MinFreeBytes = 1 << 20
	d, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	var free atomic.Int64
	free.Store(0)
	fakeFree(d.badgerStore, &free)
	t.Cleanup(func() { free.Store(1 << 30); d.Close() })
	l := d.ActorLog(0)

	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		l.PersistEvent("branch-1", 1, wrapperspb.Bytes([]byte("event 1")))
	}()
	// It is still waiting once the store has refused it a few times.
	deadline := time.Now().Add(10 * time.Second)
	for d.space.refusals() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the event was not tried again while short of space")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("PersistEvent returned while short of space: %v", r)
	default:
	}
	free.Store(1 << 30)
	select {
	case r := <-done:
		if r != nil {
			t.Fatalf("PersistEvent once space is back panicked: %v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("PersistEvent still waits once space is back")
	}
	var got []string
	err = d.Events(context.Background(), "branch-1", 0, func(_ uint64, data []byte) error {
		got = append(got, string(data))
		return nil
	})
	if err != nil || fmt.Sprint(got) != "[event 1]" {
		t.Fatalf("events = %v, %v; want [event 1]", got, err)
	}

	setFree(d.badgerStore, &free, 0)
	var wg sync.WaitGroup
	wg.Add(1)
	var r any
	go func() {
		defer wg.Done()
		defer func() { r = recover() }()
		l.PersistEvent("branch-1", 2, wrapperspb.Bytes([]byte("event 2")))
	}()
	l.StopWaiting()
	wg.Wait()
	var pe *persistence.PersistError
	if err, _ := r.(error); !errors.As(err, &pe) || !errors.Is(err, persistence.ErrNoSpace) || pe.Index != 2 {
		t.Fatalf("after StopWaiting, PersistEvent panicked with %v, want a *PersistError of event 2 wrapping ErrNoSpace", r)
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// at cleanup; it skips the test where the OS refuses the mount.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// A redo log that the file system has no room for stops the open with an
// error naming the file, its size and the free bytes, and is left empty:
// before, the store opened with a shorter log than it was asked for.
func TestRedoLogThatCannotBeAllocated(t *testing.T) {
	dir := mountTmpfs(t, 8<<20)
	o := TestOptions(filepath.Join(dir, "store"))
	o.RedoLogBytes = 16 << 20
	o.MinFreeBytes = 0
	s, err := OpenBadger(o)
	if err == nil {
		s.Close()
		t.Fatal("the store opened with a 16 MiB redo log on an 8 MiB file system")
	}
	path := filepath.Join(o.Dir, redoFileName)
	for _, want := range []string{path, "cannot allocate its 16777216 bytes (store.redo_log_bytes)", "bytes free"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("open: %v\nwant it to say %q", err, want)
		}
	}
	if !errors.Is(err, persistence.ErrNoSpace) {
		t.Errorf("open: %v, want ErrNoSpace", err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 0 {
		t.Errorf("the redo log left behind: %v, %v; want an empty file", st, err)
	}

	// With room for it, the same directory opens.
	o.RedoLogBytes = 1 << 20
	s, err = OpenBadger(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 1<<20 {
		t.Errorf("the redo log: %v, %v; want 1 MiB", st, err)
	}
}
