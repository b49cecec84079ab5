//go:build unix

package persistence

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// BenchmarkJournalStep runs a step's journal from its creation to its
// closing fsync (20 text events of about 150 bytes, closed as the
// runtime closes a finalized step's: CloseDeferred, then the work it
// hands back), eight steps at a time per CPU, in a journal store of
// each kind on the test's temporary directory. cpu-µs/step is the
// process's user and system CPU time per step, the kernel's file
// creation and fsyncs included.
func BenchmarkJournalStep(b *testing.B) {
	stores := []struct {
		name string
		open func(dir string) JournalStore
	}{
		{"files", func(dir string) JournalStore { return FileJournals(dir) }},
		{"segments", func(dir string) JournalStore { return NewSegmentJournals(dir) }},
	}
	payload := json.RawMessage(`{"type":"response.output_text.delta","item_id":"msg_0","output_index":0,"content_index":0,"delta":" word"}`)
	policy := JournalPolicy{FlushInterval: 250 * time.Millisecond, FlushBytes: 8 << 10, FsyncInterval: 2 * time.Second}
	for _, st := range stores {
		b.Run("store="+st.name, func(b *testing.B) {
			js := st.open(filepath.Join(b.TempDir(), "streams"))
			if c, ok := js.(*SegmentJournals); ok {
				defer c.Close()
			}
			b.ReportAllocs()
			b.SetParallelism(8)
			before := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					step := messages.NewID[messages.StepID](time.Now())
					j, err := NewJournalIn(js, step, "openai", policy, nil)
					if err != nil {
						b.Error(err)
						return
					}
					for i := range 20 {
						if _, err := j.AppendText("response.output_text.delta", payload, fmt.Sprint(" word", i)); err != nil {
							b.Error(err)
							return
						}
					}
					finish, err := j.CloseDeferred(true)
					if err == nil {
						err = finish()
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/step")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
