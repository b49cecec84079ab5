package cli

import (
	"runtime"
	"runtime/metrics"
	"sync"
)

// memoryLimit keeps the binary's soft memory limit (runtime.
// memory_limit_bytes) where it bounds the garbage collector's headroom,
// and lifts it where it would only burn CPU. Under the limit the
// collector lets the heap grow to (1 + GOGC/100) times its live bytes;
// at the limit it collects as often as it must to stay under it. Once
// the live heap itself nears the limit (a long conversation's index, a
// large import's table builders in Badger) that is a collection every
// few megabytes allocated, each marking the whole heap: a turn's cost
// then grows with the heap, not with the turn, up to the collector's
// cap of half the CPU, and the limit bounds nothing, the live heap
// being live. So after each collection the limit is set to the larger
// of the configured one and the live heap and half as much again: the
// collector then runs once per half the live heap allocated at the
// most often, a cost per byte allocated that does not grow with the
// heap, and a process whose live heap is under two thirds of its limit
// keeps the limit as configured.
type memoryLimit struct {
	configured int64
	set        func(int64) int64 // debug.SetMemoryLimit
	live       func() uint64     // the live heap's bytes after the last collection

	mu      sync.Mutex
	current int64
	stopped bool
}

// limitFor returns the limit to set for a live heap of live bytes: at
// least half of it above it.
func (m *memoryLimit) limitFor(live uint64) int64 {
	live = min(live, 1<<61)
	return max(m.configured, int64(live+live/2))
}

// afterGC sets the limit for the live heap the last collection left.
func (m *memoryLimit) afterGC() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return false
	}
	if l := m.limitFor(m.live()); l != m.current {
		m.set(l)
		m.current = l
	}
	return true
}

// stop ends the adjustments at the next collection, and restores the
// configured limit.
func (m *memoryLimit) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	m.set(m.configured)
	m.current = m.configured
}

// watch sets the configured limit and calls afterGC after every
// collection until stop: a finalizer on an object dropped at once runs
// after the cycle that finds it unreachable, and drops the next one.
func (m *memoryLimit) watch() {
	m.mu.Lock()
	m.set(m.configured)
	m.current = m.configured
	m.mu.Unlock()
	arm(m)
}

// gcTick is the object whose finalizer marks a collection; it holds a
// pointer, so that it is never batched with other tiny allocations
// (whose finalizers may not run).
type gcTick struct{ m *memoryLimit }

func arm(m *memoryLimit) {
	runtime.SetFinalizer(&gcTick{m}, func(t *gcTick) {
		if t.m.afterGC() {
			arm(t.m)
		}
	})
}

// liveHeap returns the bytes of the heap the last collection marked live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
