package cli

import (
	"runtime"
	"testing"
	"time"
)

func TestMemoryLimitFor(t *testing.T) {
	t.Parallel()
	m := &memoryLimit{configured: 768 << 20}
	for _, tc := range []struct {
		live uint64
		want int64
	}{
		{0, 768 << 20},
		{100 << 20, 768 << 20},
		{512 << 20, 768 << 20}, // two thirds of the limit: as configured
		{600 << 20, 900 << 20},
		{2 << 30, 3 << 30},
		{1 << 63, 3 << 60}, // no overflow
	} {
		if got := m.limitFor(tc.live); got != tc.want {
			t.Errorf("limitFor(%d) = %d, want %d", tc.live, got, tc.want)
		}
	}
}

// After each collection the limit follows the live heap; stop restores
// the configured one.
func TestMemoryLimitFollowsTheLiveHeap(t *testing.T) {
	t.Parallel()
	set := make(chan int64, 16)
	live := make(chan uint64, 1)
	live <- 0
	m := &memoryLimit{configured: 100,
		set: func(n int64) int64 { set <- n; return 0 },
		live: func() uint64 {
			v := <-live
			live <- v
			return v
		}}
	m.watch()
	if got := <-set; got != 100 {
		t.Fatalf("watch set %d, want the configured 100", got)
	}
	<-live
	live <- 1000 // a heap that outgrew the limit
	deadline := time.After(time.Minute)
	for got := int64(0); got != 1500; {
		runtime.GC()
		select {
		case got = <-set:
		case <-deadline:
			t.Fatal("no limit set after a collection of a live heap of 1000 bytes, want 1500")
		default:
		}
	}
	m.stop()
	if got := <-set; got != 100 {
		t.Fatalf("stop set %d, want the configured 100", got)
	}
	if m.afterGC() {
		t.Error("afterGC after stop = true, want false (the watch ends)")
	}
}
