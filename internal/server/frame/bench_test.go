package frame_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	client "github.com/contextinfinity/ctxinf/client/frame"
	"github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/persistence"
)

// textPayload returns n bytes of word-like text, compressible as chat
// turns are.
func textPayload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"the ", "context ", "store ", "turn ", "branch ", "append ", "agent ", "tool ", "result ", "{\"id\":", "42, ", "\n"}
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
	}
	return b[:n]
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// BenchmarkAppend10KB: one APPEND_TURN of 10 KB at a time over loopback,
// acknowledged only once durable (the store's default sync durability).
func BenchmarkAppend10KB(b *testing.B) {
	ctx := context.Background()
	srv := startServer(b, openDB(b), frame.Options{})
	c := dial(b, srv, client.Options{})
	h, err := c.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		b.Fatal(err)
	}
	payload := textPayload(10<<10, 1)
	lat := make([]time.Duration, 0, 1<<16)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		i++
		binary.LittleEndian.PutUint64(payload, i) // a new blob each time: no dedup
		t0 := time.Now()
		if _, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: payload}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportLatency(b, lat)
}

// BenchmarkAppendPipelined: N goroutines share one connection, each
// appending 10 KB turns to its own branch, so N requests are in flight.
func BenchmarkAppendPipelined(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("inflight=%d", n), func(b *testing.B) {
			ctx := context.Background()
			srv := startServer(b, openDB(b), frame.Options{})
			c := dial(b, srv, client.Options{})
			branches := make([]persistence.Head, n)
			for w := range branches {
				h, err := c.CreateBranch(ctx, persistence.BranchSpec{})
				if err != nil {
					b.Fatal(err)
				}
				branches[w] = h
			}
			b.SetBytes(10 << 10)
			b.ReportAllocs()
			b.ResetTimer()
			var next atomic.Int64
			var failed atomic.Pointer[error]
			var wg sync.WaitGroup
			for w := range n {
				wg.Go(func() {
					payload := textPayload(10<<10, uint64(w)+100)
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						binary.LittleEndian.PutUint64(payload, uint64(i))
						if _, err := c.Append(ctx, branches[w].Branch, persistence.AppendRequest{Payload: payload}); err != nil {
							failed.Store(&err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// BenchmarkGetLast64: GET_LAST(64) round trips on a branch of 1,000
// turns, warm; store= is the same read without the protocol.
func BenchmarkGetLast64(b *testing.B) {
	ctx := context.Background()
	db := openDB(b)
	h, err := db.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if _, err := db.Append(ctx, h.Branch, persistence.AppendRequest{Payload: textPayload(512, uint64(i))}); err != nil {
			b.Fatal(err)
		}
	}
	srv := startServer(b, db, frame.Options{})
	c := dial(b, srv, client.Options{})
	for _, via := range []string{"frame", "store"} {
		b.Run("via="+via, func(b *testing.B) {
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				var p persistence.Page
				var err error
				if via == "frame" {
					p, err = c.GetLast(ctx, h.Branch, 64)
				} else {
					p, err = db.Last(ctx, h.Branch, 64)
				}
				if err != nil || len(p.Nodes) != 64 {
					b.Fatalf("GetLast(64) = %d turns, %v", len(p.Nodes), err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat)
		})
	}
}
