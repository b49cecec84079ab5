package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
)

// storeFigures are the context store's figures (docs/BENCHMARKS.md, "Context
// store"), in microseconds unless named.
type storeFigures struct {
	Fsync10kP50us    float64 `json:"fsync_10k_p50_us"`
	AppendP50us      float64 `json:"append_p50_us"`
	AppendP99us      float64 `json:"append_p99_us"`
	GroupAppendsPerS float64 `json:"group_appends_per_s"`
	GetLast64P50us   float64 `json:"get_last64_p50_us"`
	GetLast64P99us   float64 `json:"get_last64_p99_us"`
	ForkP50us        float64 `json:"fork_p50_us"`
	DepthRangeP50us  float64 `json:"depth_range_p50_us"`
	FullHistory400ms float64 `json:"full_history_400_ms"`
	DedupBytesRatio  float64 `json:"dedup_bytes_ratio"`
	BytesPer1kTurn   float64 `json:"bytes_per_1k_turn"`
}

// benchScale sets the sizes of one run; --quick shrinks them for tests.
type benchScale struct {
	samples      int // latency samples per figure
	groupEach    int // appends per branch in the group run
	deepChain    int // depth of the chain for fork and depth-range
	historyRuns  int
	bytesTurns   int // turns for bytes_per_1k_turn
	dedupAppends int
}

var (
	fullScale  = benchScale{samples: 2000, groupEach: 80, deepChain: 100_000, historyRuns: 30, bytesTurns: 10_000, dedupAppends: 1000}
	quickScale = benchScale{samples: 50, groupEach: 2, deepChain: 3000, historyRuns: 3, bytesTurns: 300, dedupAppends: 100}
)

const groupBranches = 256

// Store is `ctxinf-bench store`: the context store's figures (durable
// appends against the disk's fsync floor, group commit, reads, forks,
// depth ranges, dedup, bytes on disk) against their targets.
func Store(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("store", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	dir := fs.String("dir", "", "directory for the stores (default: a temporary directory, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	quick := fs.Bool("quick", false, "small sizes: checks that everything runs; the figures mean little")
	encrypted := fs.Bool("encrypted", false, "encrypt the stores at rest under a generated AES-256 key (store.encryption), to compare with a run without")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *encrypted {
		e.StoreKey = make([]byte, 32)
		_, _ = rand.Read(e.StoreKey) // crypto/rand: never fails
	}
	root, done, err := cli.WorkDir(*dir, "ctxinf-bench-store-")
	if err != nil {
		return err
	}
	defer done()
	sc := fullScale
	if *quick {
		sc = quickScale
	}
	b := &storeBench{e: e, root: root, sc: sc, text: newTextSource(1)}
	f, err := b.run()
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.Stdout)
		return enc.Encode(f)
	}
	enc := "off"
	if e.StoreKey != nil {
		enc = fmt.Sprintf("AES-%d", 8*len(e.StoreKey))
	}
	fmt.Fprintf(e.Stdout, "encryption at rest: %s\n", enc)
	printStoreFigures(e, f)
	return nil
}

type storeBench struct {
	e    *cli.Env
	root string
	sc   benchScale
	text *textSource
	step int
}

func (b *storeBench) progress(what string) {
	b.step++
	b.e.Log.Info().Int("step", b.step).Msg(what)
}

// open opens a fresh store in its own subdirectory with the configured
// options, durability forced as asked.
func (b *storeBench) open(name string, d persistence.Durability) (persistence.Store, string, error) {
	dir := filepath.Join(b.root, name)
	o := b.e.StoreOptions(dir)
	o.Durability = d
	s, err := badgerdb.OpenBadger(o)
	return s, dir, err
}

func (b *storeBench) run() (storeFigures, error) {
	var f storeFigures
	steps := []func(*storeFigures) error{b.fsyncFloor, b.appends, b.deep, b.bytes}
	for _, step := range steps {
		if err := step(&f); err != nil {
			return f, err
		}
	}
	return f, nil
}

// fsyncFloor: a raw 10 KB append + fsync to a file in the same directory.
func (b *storeBench) fsyncFloor(f *storeFigures) error {
	b.progress("fsync floor")
	lat, err := fsyncLatencies(b.root, b.text.payload(10<<10), b.sc.samples)
	if err != nil {
		return err
	}
	f.Fsync10kP50us = micros(percentile(lat, 50))
	return nil
}

// fsyncLatencies times n appends of buf, each fsynced, to a file of its
// own in dir (removed afterwards): the disk's floor under whatever else
// the machine is doing.
func fsyncLatencies(dir string, buf []byte, n int) ([]time.Duration, error) {
	return syncLatencies(dir, buf, n, false)
}

// fillZeros writes size zero bytes to f and syncs them: a file whose
// blocks are written, as the store's redo log is, so that later writes
// into it allocate nothing.
func fillZeros(f *os.File, size int) error {
	if _, err := f.Write(make([]byte, size)); err != nil {
		return err
	}
	return f.Sync()
}

// syncLatencies is fsyncLatencies, or with overwrite the same writes into
// a file written full of zeros and synced first, each followed by an
// fdatasync: the floor of the store's redo log, whose syncs flush data
// into blocks written before and need no file-system journal commit.
func syncLatencies(dir string, buf []byte, n int, overwrite bool) ([]time.Duration, error) {
	path := filepath.Join(dir, "fsync.floor")
	flag := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if overwrite {
		flag = os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	}
	file, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	defer file.Close()
	sync := file.Sync
	if overwrite {
		if err := fillZeros(file, n*len(buf)); err != nil {
			return nil, err
		}
		sync = func() error { return persistence.Fdatasync(file) }
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		var err error
		if overwrite {
			_, err = file.WriteAt(buf, int64(i*len(buf)))
		} else {
			_, err = file.Write(buf)
		}
		if err != nil {
			return nil, err
		}
		if err := sync(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// appends: durable 10 KB appends to one branch, then from 256 branches at
// once, then reads of that history.
func (b *storeBench) appends(f *storeFigures) error {
	ctx := context.Background()
	s, _, err := b.open("appends", persistence.DurabilitySync)
	if err != nil {
		return err
	}
	defer s.Close()

	b.progress("durable 10 KB appends, one branch")
	h, err := s.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		return err
	}
	for range 50 { // warm up
		if _, err := s.Append(ctx, h.Branch, persistence.AppendRequest{Payload: b.text.payload(10 << 10)}); err != nil {
			return err
		}
	}
	var p []byte
	lat, err := timed(b.sc.samples, func() { p = b.text.payload(10 << 10) }, func() error {
		_, err := s.Append(ctx, h.Branch, persistence.AppendRequest{Payload: p})
		return err
	})
	if err != nil {
		return err
	}
	f.AppendP50us, f.AppendP99us = micros(percentile(lat, 50)), micros(percentile(lat, 99))

	b.progress("get last 64")
	last64 := func() error {
		p, err := s.Last(ctx, h.Branch, 64)
		if err == nil && len(p.Nodes) != 64 {
			err = fmt.Errorf("Last(64) returned %d turns", len(p.Nodes))
		}
		return err
	}
	if err := b.settle("get last 64", 100*b.sc.samples, last64); err != nil {
		return err
	}
	if lat, err = timed(b.sc.samples, nil, last64); err != nil {
		return err
	}
	f.GetLast64P50us, f.GetLast64P99us = micros(percentile(lat, 50)), micros(percentile(lat, 99))

	b.progress("full history of 400 turns")
	hist, err := s.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		return err
	}
	var last persistence.Node
	for range 400 {
		if last, err = s.Append(ctx, hist.Branch, persistence.AppendRequest{Payload: b.text.payload(10 << 10)}); err != nil {
			return err
		}
	}
	history := func() error {
		turns, err := s.Chain(ctx, last.ID)
		if err != nil {
			return err
		}
		for _, t := range turns {
			if _, err := s.Blob(ctx, t.PayloadHash); err != nil {
				return err
			}
		}
		return nil
	}
	if err := b.settle("full history", 20*b.sc.historyRuns, history); err != nil {
		return err
	}
	if lat, err = timed(b.sc.historyRuns, nil, history); err != nil {
		return err
	}
	f.FullHistory400ms = float64(percentile(lat, 50)) / float64(time.Millisecond)

	b.progress("durable 10 KB appends from 256 branches at once")
	payloads := make([][]byte, groupBranches*b.sc.groupEach)
	for i := range payloads {
		payloads[i] = b.text.payload(10 << 10)
	}
	var wg sync.WaitGroup
	errs := make(chan error, groupBranches)
	start := time.Now()
	for g := range groupBranches {
		wg.Go(func() {
			h, err := s.CreateBranch(ctx, persistence.BranchSpec{})
			for i := 0; err == nil && i < b.sc.groupEach; i++ {
				_, err = s.Append(ctx, h.Branch, persistence.AppendRequest{Payload: payloads[g*b.sc.groupEach+i]})
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	f.GroupAppendsPerS = float64(len(payloads)) / elapsed.Seconds()
	return nil
}

// deep: fork and depth-range on a chain as deep as the scale says. The
// chain is loaded without fsync; the store is then reopened durable.
func (b *storeBench) deep(f *storeFigures) error {
	ctx := context.Background()
	b.progress(fmt.Sprintf("building a %d-turn chain", b.sc.deepChain+1))
	s, _, err := b.open("deep", persistence.DurabilityRelaxed)
	if err != nil {
		return err
	}
	h, err := s.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		s.Close()
		return err
	}
	var tip persistence.Node
	for range b.sc.deepChain + 1 {
		if tip, err = s.Append(ctx, h.Branch, persistence.AppendRequest{Payload: b.text.payload(200)}); err != nil {
			s.Close()
			return err
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	s, _, err = b.open("deep", persistence.DurabilitySync)
	if err != nil {
		return err
	}
	defer s.Close()

	b.progress(fmt.Sprintf("fork at depth %d", tip.Depth))
	lat, err := timed(min(b.sc.samples, 500), nil, func() error {
		_, err := s.CreateBranch(ctx, persistence.BranchSpec{At: tip.ID})
		return err
	})
	if err != nil {
		return err
	}
	f.ForkP50us = micros(percentile(lat, 50))

	b.progress("64 turns at random depths")
	rng := mrand.New(mrand.NewPCG(2, 3))
	var start uint64
	lat, err = timed(b.sc.samples, func() { start = rng.Uint64N(tip.Depth - 63) }, func() error {
		rp, err := s.Range(ctx, h.Branch, start, 64)
		if err == nil && (len(rp.Nodes) != 64 || rp.Nodes[0].Depth != start) {
			err = fmt.Errorf("Range(%d, 64) returned %d turns from depth %d", start, len(rp.Nodes), rp.Nodes[0].Depth)
		}
		return err
	})
	if err != nil {
		return err
	}
	f.DepthRangeP50us = micros(percentile(lat, 50))
	return nil
}

// bytes: on-disk size after dedup-heavy and distinct-text workloads, each
// measured after compaction and close.
func (b *storeBench) bytes(f *storeFigures) error {
	b.progress("dedup: 10 distinct 10 KB payloads, cycled")
	distinct := make([][]byte, 10)
	for i := range distinct {
		distinct[i] = b.text.payload(10 << 10)
	}
	n, err := b.onDisk("dedup", b.sc.dedupAppends, func(i int) []byte { return distinct[i%10] })
	if err != nil {
		return err
	}
	f.DedupBytesRatio = float64(n) / float64(10*10<<10)

	b.progress("distinct 1 KB text turns")
	n, err = b.onDisk("bytes", b.sc.bytesTurns, func(int) []byte { return b.text.payload(1 << 10) })
	if err != nil {
		return err
	}
	f.BytesPer1kTurn = float64(n) / float64(b.sc.bytesTurns)
	return nil
}

// onDisk appends count payloads to one branch of a fresh store, compacts
// and closes it, and returns the bytes its files occupy.
func (b *storeBench) onDisk(name string, count int, payload func(int) []byte) (int64, error) {
	ctx := context.Background()
	s, dir, err := b.open(name, persistence.DurabilityRelaxed)
	if err != nil {
		return 0, err
	}
	h, err := s.CreateBranch(ctx, persistence.BranchSpec{})
	for i := 0; err == nil && i < count; i++ {
		_, err = s.Append(ctx, h.Branch, persistence.AppendRequest{Payload: payload(i)})
	}
	if err == nil {
		err = persistence.Compact(s)
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	return diskUsage(dir)
}

// diskUsage sums the blocks allocated to the files under dir (what du
// reports), so that sparse, preallocated files count for what they use.
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// settle runs read, untimed, until the Go heap has completed two garbage
// collections meanwhile, or limit times, and logs how many reads that
// took. The read figures are then those of the store on a heap in its
// steady state, as in a server that has run for a while. A heap growing
// past its high-water mark takes each new page from the kernel: a minor
// fault, about 17 µs per 4 KiB page on the dev VM, so 400 payloads of
// 10 KB copied into fresh pages cost some 17 ms instead of 0.5 ms. Which
// timed samples fall on such a stretch depends on where the collector is
// in its cycle, which the work before (a different store, or the same one
// encrypted) moves; after two cycles during the loop the heap has reached
// the goal set by its current live size, and the loop's allocations reuse
// pages it has touched before.
func (b *storeBench) settle(what string, limit int, read func() error) error {
	start, n := gcCycles(), 0
	for ; n < limit && gcCycles() < start+2; n++ {
		if err := read(); err != nil {
			return err
		}
	}
	b.e.Log.Info().Int("reads", n).Uint64("gc_cycles", gcCycles()-start).Msg(what + ": warm-up done")
	return nil
}

// gcCycles returns the number of garbage collections the process has
// completed.
// timed runs op n times and returns how long each run took; prepare, if
// not nil, runs before each, untimed.
func timed(n int, prepare func(), op func() error) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for range n {
		if prepare != nil {
			prepare()
		}
		t0 := time.Now()
		if err := op(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func printStoreFigures(e *cli.Env, f storeFigures) {
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\ttarget\t")
	row := func(name string, v float64, unit, target string, ok bool) {
		mark := "ok"
		if !ok {
			mark = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%.1f %s\t%s\t%s\n", name, v, unit, target, mark)
	}
	row("fsync_10k_p50_us", f.Fsync10kP50us, "µs", "(the floor)", true)
	row("append_p50_us", f.AppendP50us, "µs", fmt.Sprintf("<= 3 x floor = %.0f µs", 3*f.Fsync10kP50us), f.AppendP50us <= 3*f.Fsync10kP50us)
	row("append_p99_us", f.AppendP99us, "µs", "<= 3000 µs", f.AppendP99us <= 3000)
	row("group_appends_per_s", f.GroupAppendsPerS, "/s", ">= 20000 /s", f.GroupAppendsPerS >= 20000)
	row("get_last64_p50_us", f.GetLast64P50us, "µs", "<= 100 µs", f.GetLast64P50us <= 100)
	row("get_last64_p99_us", f.GetLast64P99us, "µs", "", true)
	row("fork_p50_us", f.ForkP50us, "µs", "<= 200 µs", f.ForkP50us <= 200)
	row("depth_range_p50_us", f.DepthRangeP50us, "µs", "<= 200 µs", f.DepthRangeP50us <= 200)
	row("full_history_400_ms", f.FullHistory400ms, "ms", "<= 5 ms", f.FullHistory400ms <= 5)
	row("dedup_bytes_ratio", f.DedupBytesRatio, "", "<= 1.5", f.DedupBytesRatio <= 1.5)
	row("bytes_per_1k_turn", f.BytesPer1kTurn, "B", "<= 1500 B", f.BytesPer1kTurn <= 1500)
	tw.Flush()
}

// textSource makes deterministic, English-like text, so that payloads
// compress about as conversation text does.
type textSource struct {
	rng *mrand.Rand
}

func newTextSource(seed uint64) *textSource {
	return &textSource{rng: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// payload returns n bytes of fresh text.
func (t *textSource) payload(n int) []byte {
	out := make([]byte, 0, n+16)
	for len(out) < n {
		words := 6 + t.rng.IntN(14)
		for w := range words {
			word := benchWords[int(float64(len(benchWords))*t.rng.Float64()*t.rng.Float64())]
			if w == 0 && len(word) > 0 {
				out = append(out, word[0]-'a'+'A')
				out = append(out, word[1:]...)
			} else {
				out = append(out, word...)
			}
			if w < words-1 {
				out = append(out, ' ')
			}
		}
		if t.rng.IntN(5) == 0 {
			out = fmt.Appendf(out, " (%d)", t.rng.IntN(100000))
		}
		out = append(out, ". "...)
	}
	return out[:n]
}

// benchWords is a vocabulary for textSource; lower indexes are drawn more
// often, roughly as word frequencies fall off in English.
var benchWords = []string{
	"the", "to", "and", "a", "of", "is", "in", "that", "it", "you", "for", "this", "we", "be", "on",
	"with", "as", "are", "can", "not", "if", "or", "have", "will", "so", "but", "at", "from", "by",
	"your", "an", "what", "do", "should", "would", "there", "which", "all", "one", "use", "they",
	"function", "file", "error", "value", "return", "test", "code", "data", "model", "context",
	"branch", "turn", "summary", "request", "response", "server", "client", "memory", "store",
	"config", "update", "change", "issue", "because", "when", "then", "also", "more", "need",
	"time", "make", "new", "like", "just", "about", "how", "some", "into", "than", "only", "other",
	"first", "after", "before", "each", "where", "these", "those", "could", "still", "here",
	"write", "read", "call", "list", "string", "number", "index", "query", "result", "build",
	"deploy", "version", "module", "package", "type", "field", "method", "interface", "struct",
	"channel", "goroutine", "actor", "message", "event", "state", "commit", "journal", "stream",
	"retry", "timeout", "latency", "budget", "token", "chunk", "vector", "search", "rank", "score",
	"user", "assistant", "system", "tool", "call_id", "argument", "output", "input", "prompt",
	"decision", "constraint", "goal", "preference", "artifact", "path", "symbol", "identifier",
	"Berlin", "Tuesday", "invoice", "customer", "meeting", "schedule", "project", "deadline",
	"database", "migration", "schema", "table", "column", "row", "transaction", "lock", "cache",
	"kubernetes", "container", "cluster", "node", "pod", "service", "endpoint", "certificate",
	"alpha", "beta", "gamma", "delta", "quickly", "carefully", "probably", "exactly", "almost",
}
