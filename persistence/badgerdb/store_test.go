package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"

	"errors"
	"fmt"
	"math/bits"
	"strings"
	"testing"
	"time"
)

func TestBadgerReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	h, ts := storetest.Chain(t, s, 40)
	ov, err := s.PutOverlay(bg, ts[3].ID, persistence.OverlayRequest{Payload: []byte("patched")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Head(bg, h.Branch)
	if err != nil || got != h {
		t.Fatalf("Head after reopen = %+v, %v, want %+v", got, err, h)
	}
	rp, _ := s.Range(bg, h.Branch, 30, 10)
	storetest.SameIDs(t, "Range after reopen", rp.Nodes, ts[30:])
	if tr, _ := s.Node(bg, ts[3].ID); tr.OverlaySeq != ov.Seq {
		t.Fatalf("overlay lost on reopen: %+v", tr)
	}
	next, err := s.PutOverlay(bg, ts[4].ID, persistence.OverlayRequest{Tombstone: true})
	if err != nil || next.Seq != ov.Seq+1 {
		t.Fatalf("overlay seq after reopen = %d, %v, want %d", next.Seq, err, ov.Seq+1)
	}
	if _, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
}

func TestBadgerCorruptBlob(t *testing.T) {
	o := TestOptions(t.TempDir())
	o.BlobCacheBytes = 0 // read from disk, not from what the append cached
	s, err := openBadger(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, ts := storetest.Chain(t, s, 1)
	h := ts[0].PayloadHash
	// Flip one bit of the stored record behind the store's back.
	rec := persistence.EncodeBlob([]byte("p0"), persistence.CompressNone)
	rec[len(rec)-5] ^= 0x20
	txn := s.db.NewTransactionAt(s.lastTs, true)
	if err := txn.Set(blobKey(h), rec); err != nil {
		t.Fatal(err)
	}
	if err := txn.CommitAt(s.lastTs+1, nil); err != nil {
		t.Fatal(err)
	}
	s.lastTs++
	s.readTs.Store(s.lastTs)
	_, err = s.Blob(bg, h)
	if !errors.Is(err, persistence.ErrCorrupt) || !strings.Contains(err.Error(), h.String()) {
		t.Fatalf("Blob(corrupt) error = %v, want ErrCorrupt naming %s", err, h)
	}
}

func TestConcurrentAppendsShareSyncs(t *testing.T) {
	s, err := OpenBadger(TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const branches, each = 32, 20
	errs := make(chan error, branches)
	for b := range branches {
		go func() {
			h, err := s.CreateBranch(bg, persistence.BranchSpec{})
			for i := 0; err == nil && i < each; i++ {
				_, err = s.Append(bg, h.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "%d/%d", b, i)})
			}
			errs <- err
		}()
	}
	for range branches {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Appends != branches*each {
		t.Fatalf("Appends = %d, want %d", st.Appends, branches*each)
	}
	if st.Syncs >= st.Appends+branches {
		t.Fatalf("%d syncs for %d writes: no group commit happened", st.Syncs, st.Appends+branches)
	}
	var timed uint64
	for _, n := range st.SyncTimes {
		timed += n
	}
	if timed != st.Syncs {
		t.Errorf("SyncTimes %v hold %d syncs, want Syncs = %d", st.SyncTimes, timed, st.Syncs)
	}
}

func TestSyncTimeBuckets(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {249 * time.Microsecond, 0}, {250 * time.Microsecond, 1}, {3 * time.Millisecond, 4},
		{4 * time.Millisecond, 5}, {64*time.Millisecond - 1, 8}, {64 * time.Millisecond, 9}, {time.Hour, 9},
	} {
		if got := persistence.SyncTimeBucket(tc.d); got != tc.want {
			t.Errorf("SyncTimeBucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	times := [len(persistence.SyncTimeBounds) + 1]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := persistence.SyncsOver(times, 4*time.Millisecond); got != 6+7+8+9+10 {
		t.Errorf("SyncsOver(4ms) = %d, want %d", got, 6+7+8+9+10)
	}
	if got := persistence.SyncsOver(times, 0); got != 55 {
		t.Errorf("SyncsOver(0) = %d, want 55", got)
	}
}

func TestSkipPointerHops(t *testing.T) {
	// From every depth d to every target, the walk by nextHop lands exactly
	// on the target within 2·log2(d)+2 hops.
	for d := uint64(1); d <= 2048; d++ {
		limit := 2*bits.Len64(d) + 2
		for target := uint64(0); target <= d; target++ {
			at, hops := d, 0
			for at > target {
				k := persistence.NextHop(at, target)
				if k > persistence.SkipLevels(at) {
					t.Fatalf("nextHop(%d, %d) = %d beyond the %d levels stored", at, target, k, persistence.SkipLevels(at))
				}
				at -= 1 << k
				hops++
			}
			if at != target || hops > limit {
				t.Fatalf("walk %d -> %d ended at %d after %d hops (limit %d)", d, target, at, hops, limit)
			}
		}
	}
}

func TestDeepRangeUsesSkips(t *testing.T) {
	s, err := openBadger(TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, ts := storetest.Chain(t, s, 1000)
	for _, start := range []uint64{0, 1, 255, 256, 511, 700, 999} {
		rp, err := s.Range(bg, h.Branch, start, 7)
		if err != nil {
			t.Fatal(err)
		}
		storetest.SameIDs(t, fmt.Sprintf("Range(%d, 7)", start), rp.Nodes, ts[start:min(int(start)+7, len(ts))])
	}
}
