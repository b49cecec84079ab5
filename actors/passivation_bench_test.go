package actors

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// BenchmarkPassivationBoundary sends turns to branches just as they
// passivate: each of 8 branches gets its next turn IdleAfter (10 ms) after
// its last ended, give or take 1 ms, b.N turns in all. It reports the
// share of turns that ended failed (interrupted/turn), which passivation
// must keep at 0.
func BenchmarkPassivationBoundary(b *testing.B) {
	cfg := testConfig(b, b.TempDir(), newEvents())
	cfg.IdleAfter = 10 * time.Millisecond
	cfg.Provider = local.New(local.Options{Delay: time.Millisecond})
	r := openRuntime(b, cfg)
	b.Cleanup(func() { r.Close() })
	const branches = 8
	ids := make([]messages.BranchID, branches)
	for i := range ids {
		_, br, err := r.CreateSession(bg, "boundary")
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = br.ID
	}
	var failed, sent atomic.Int64
	var first atomic.Value
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, id := range ids {
		n := b.N / branches
		if i < b.N%branches {
			n++
		}
		wg.Go(func() {
			for range n {
				time.Sleep(cfg.IdleAfter + time.Duration(rand.Int64N(int64(2*time.Millisecond))) - time.Millisecond)
				s, err := r.Submit(bg, id, "at the boundary")
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err.Error())
					continue
				}
				if _, last := s.Wait(nil); last.Err != "" {
					failed.Add(1)
					first.CompareAndSwap(nil, last.Err)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(failed.Load())/float64(max(sent.Load(), 1)), "failed/turn")
	b.ReportMetric(float64(failed.Load()), "failed")
	if f := first.Load(); f != nil {
		b.Logf("first failure: %s", f)
	}
}
