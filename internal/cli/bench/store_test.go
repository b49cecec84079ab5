package bench

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/cli"
)

// settleSink keeps settle's test allocations on the heap.
var settleSink []byte

// settle reads until the heap has been collected twice meanwhile, stops
// at its limit when the reads allocate too little to start a collection,
// and returns the first error of a read.
func TestBenchSettle(t *testing.T) {
	b := &storeBench{e: &cli.Env{Log: zerolog.Nop()}}

	start, n := gcCycles(), 0
	err := b.settle("allocating", 1<<14, func() error {
		n++
		settleSink = make([]byte, 1<<20)
		return nil
	})
	if err != nil {
		t.Fatalf("settle(allocating) = %v, want nil", err)
	}
	if got := gcCycles() - start; got < 2 || n == 1<<14 {
		t.Errorf("settle(allocating) ran %d reads over %d collections, want it to stop after 2 collections", n, got)
	}

	start, n = gcCycles(), 0
	if err := b.settle("idle", 5, func() error { n++; return nil }); err != nil {
		t.Fatalf("settle(idle) = %v, want nil", err)
	}
	if n != 5 && gcCycles()-start < 2 {
		t.Errorf("settle(idle) ran %d reads, want its limit of 5", n)
	}

	errRead := errors.New("read failed")
	n = 0
	err = b.settle("failing", 5, func() error { n++; return errRead })
	if !errors.Is(err, errRead) || n != 1 {
		t.Errorf("settle(failing) = %v after %d reads, want %v after 1", err, n, errRead)
	}
}
