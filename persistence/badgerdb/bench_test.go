package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// The store's micro-benchmarks. `ctxinf bench store` measures the store's
// figures and targets end to end (docs/BENCHMARKS.md); these keep the hot
// paths profiled and compiling.

func benchStore(b *testing.B, d persistence.Durability) *badgerStore {
	b.Helper()
	o := DefaultOptions(b.TempDir())
	o.MemTableSize = 16 << 20
	o.BlockCacheSize = 32 << 20
	o.ValueLogFileSize = 64 << 20
	o.Durability = d
	s, err := openBadger(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// textPayload returns n bytes of word text that compresses like prose.
func textPayload(rng *rand.Rand, n int) []byte {
	words := []string{"the", "branch", "summary", "turn", "of", "a", "model", "context", "store", "and",
		"error", "value", "request", "to", "is", "memory", "token", "we", "function", "file"}
	out := make([]byte, 0, n+16)
	for len(out) < n {
		out = append(out, words[rng.IntN(len(words))]...)
		out = append(out, ' ')
		if rng.IntN(12) == 0 {
			out = fmt.Appendf(out, "%d. ", rng.IntN(1e6))
		}
	}
	return out[:n]
}

func benchChain(b *testing.B, s persistence.Store, n, size int) (persistence.Head, []persistence.Node) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	h, err := s.CreateBranch(bg, persistence.BranchSpec{})
	if err != nil {
		b.Fatal(err)
	}
	ts := make([]persistence.Node, 0, n)
	for range n {
		t, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: textPayload(rng, size)})
		if err != nil {
			b.Fatal(err)
		}
		ts = append(ts, t)
	}
	h, _ = s.Head(bg, h.Branch)
	return h, ts
}

func BenchmarkAppend(b *testing.B) {
	for _, d := range []struct {
		name string
		d    persistence.Durability
	}{{"sync", persistence.DurabilitySync}, {"relaxed", persistence.DurabilityRelaxed}} {
		for _, size := range []int{1 << 10, 10 << 10} {
			b.Run(fmt.Sprintf("durability=%s/size=%d", d.name, size), func(b *testing.B) {
				s := benchStore(b, d.d)
				h, _ := s.CreateBranch(bg, persistence.BranchSpec{})
				rng := rand.New(rand.NewPCG(3, 4))
				base := textPayload(rng, size)
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for i := 0; b.Loop(); i++ {
					// A distinct payload each time (so every append
					// writes a blob) without generating text in the loop.
					p := binary.BigEndian.AppendUint64(base[:size-8:size-8], uint64(i))
					if _, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: p}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkGroupAppend(b *testing.B) {
	for _, writers := range []int{16, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := benchStore(b, persistence.DurabilitySync)
			heads := make([]persistence.Head, writers)
			for i := range heads {
				heads[i], _ = s.CreateBranch(bg, persistence.BranchSpec{})
			}
			rng := rand.New(rand.NewPCG(5, 6))
			payloads := make([][]byte, 64)
			for i := range payloads {
				payloads[i] = textPayload(rng, 10<<10)
			}
			b.ReportAllocs()
			start := time.Now()
			var total int
			for b.Loop() {
				// One iteration: every writer appends once, concurrently.
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						p := append(payloads[w%len(payloads)][:10<<10:10<<10], fmt.Sprint(total, w)...)
						if _, err := s.Append(bg, heads[w].Branch, persistence.AppendRequest{Payload: p}); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				total += writers
			}
			b.ReportMetric(float64(total)/time.Since(start).Seconds(), "appends/s")
		})
	}
}

func BenchmarkLast64(b *testing.B) {
	s := benchStore(b, persistence.DurabilityRelaxed)
	h, _ := benchChain(b, s, 1000, 1<<10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Last(bg, h.Branch, 64); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHistory400 reads a 400-turn history of 10 KB payloads: warm
// (served by the turn and blob caches) and cold (caches off, every turn
// and blob from Badger, every blob decompressed).
func BenchmarkHistory400(b *testing.B) {
	for _, cache := range []string{"warm", "cold"} {
		b.Run("cache="+cache, func(b *testing.B) {
			s := benchStore(b, persistence.DurabilityRelaxed)
			h, _ := benchChain(b, s, 400, 10<<10)
			if cache == "cold" {
				s.turns, s.blobs = persistence.NewNodeCache(0), newBlobCache(0)
			}
			b.ReportAllocs()
			for b.Loop() {
				ts, err := s.Chain(bg, h.Node)
				if err != nil {
					b.Fatal(err)
				}
				for _, t := range ts {
					if _, err := s.Blob(bg, t.PayloadHash); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func BenchmarkRange64(b *testing.B) {
	for _, cache := range []int{0, 1 << 18} {
		b.Run(fmt.Sprintf("cache=%d", cache), func(b *testing.B) {
			s := benchStore(b, persistence.DurabilityRelaxed)
			s.turns = persistence.NewNodeCache(cache)
			h, _ := benchChain(b, s, 20_000, 64)
			rng := rand.New(rand.NewPCG(7, 8))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Range(bg, h.Branch, rng.Uint64N(h.Depth-63), 64); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFork: a fork is one read and one small durable write, whatever
// the depth; relaxed durability shows its cost without the sync.
func BenchmarkFork(b *testing.B) {
	for _, d := range []struct {
		name string
		d    persistence.Durability
	}{{"sync", persistence.DurabilitySync}, {"relaxed", persistence.DurabilityRelaxed}} {
		b.Run("durability="+d.name, func(b *testing.B) {
			s := benchStore(b, d.d)
			_, ts := benchChain(b, s, 100, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.CreateBranch(bg, persistence.BranchSpec{At: ts[len(ts)-1].ID}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBlobCodec(b *testing.B) {
	p := textPayload(rand.New(rand.NewPCG(9, 10)), 10<<10)
	h := persistence.HashOf(p)
	rec := persistence.EncodeBlob(p, persistence.CompressZstd)
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			persistence.EncodeBlob(p, persistence.CompressZstd)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if _, err := persistence.DecodeBlob(h, rec, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTurnRowLookup finds the row of a branch's last turn among 10k:
// by its id (the index), and by scanning the branch's rows, as the API's
// turn lookup and fork did before the index.
func BenchmarkTurnRowLookup(b *testing.B) {
	d, err := Open(TestOptions(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	now := time.UnixMilli(1_700_000_000_000)
	br := messages.NewID[messages.BranchID](now)
	var last messages.TurnID
	for start := uint64(1); start <= 10000; start += 1000 {
		tx := &persistence.Tx{}
		for seq := start; seq < start+1000; seq++ {
			last = messages.NewID[messages.TurnID](now)
			tx.NewTurns = append(tx.NewTurns, persistence.TurnRow{Branch: br, Seq: seq, ID: last, Phase: messages.PhaseStateCommitted, Reply: last, Updated: now})
		}
		if _, err := d.Commit(bg, tx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("by-id", func(b *testing.B) {
		for b.Loop() {
			if r, err := d.TurnRow(bg, br, last); err != nil || r.ID != last {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			found := false
			_ = d.EachTurnRow(bg, br, func(r persistence.TurnRow) error {
				found = found || r.ID == last
				return nil
			})
			if !found {
				b.Fatal("not found")
			}
		}
	})
}
