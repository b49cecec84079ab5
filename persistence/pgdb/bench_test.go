package pgdb

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/persistence"
)

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

// BenchmarkPostgresAppend is BenchmarkAppend and BenchmarkGroupAppend on
// the PostgreSQL store (a throwaway local server, fsync on): one writer
// waiting for each commit, and concurrent writers sharing commits.
func BenchmarkPostgresAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 10 << 10} {
		b.Run(fmt.Sprintf("writers=1/size=%d", size), func(b *testing.B) {
			s := openPG(b, pgtest.Start(b))
			h, _ := s.CreateBranch(bg, persistence.BranchSpec{})
			rng := rand.New(rand.NewPCG(3, 4))
			base := textPayload(rng, size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				p := binary.BigEndian.AppendUint64(base[:size-8:size-8], uint64(i))
				if _, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: p}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, writers := range []int{16, 256} {
		b.Run(fmt.Sprintf("writers=%d/size=10240", writers), func(b *testing.B) {
			s := openPG(b, pgtest.Start(b))
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
			before := s.Stats()
			start := time.Now()
			var total int
			for b.Loop() {
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
			st := s.Stats()
			b.ReportMetric(float64(st.Appends-before.Appends)/float64(max(st.Groups-before.Groups, 1)), "appends/group")
		})
	}
}
