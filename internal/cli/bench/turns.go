package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/messages"
)

// turnFigures are the figures of `ctxinf bench turns --json`.
type turnFigures struct {
	TurnsPerS             float64 `json:"turns_per_s"`
	OverheadP50us         float64 `json:"overhead_p50_us"`
	OverheadP99us         float64 `json:"overhead_p99_us"`
	PeakRSSMB             float64 `json:"peak_rss_mb"`
	BytesPerPassiveBranch float64 `json:"bytes_per_passive_branch"`
	Replay1000EventsMs    float64 `json:"replay_1000_events_ms"`
	// SettleS is how long, after the load phase's last commit, the
	// runtime took to finish the work that phase left behind (its index
	// backlog, the store's flushes and compactions) before the paced
	// phase began; SettleCPUs the CPU it used meanwhile.
	SettleS    float64 `json:"settle_s"`
	SettleCPUs float64 `json:"settle_cpu_s"`
}

// Turns measures the runtime with the local provider at zero delay
// and durable transactions: committed turns per second from many branches
// (the newest turns of each branch, which the fold policy keeps pending,
// are folded by a manual commit at the end)
// at once, the runtime's own per-turn latency (submit to finalized
// response, with turns paced at a fraction of that throughput, once the
// work the load left behind is done), peak RSS, the memory a created-then-passivated branch costs,
// and the time to replay a branch of 1,000 events with no snapshot.
func Turns(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("bench turns", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	branches := fs.Int("branches", 1000, "branches driven at once")
	turns := fs.Int("turns", 20, "turns per branch")
	passive := fs.Int("passive", 100_000, "extra branches created and passivated, for bytes_per_passive_branch")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load phase to this file")
	pace := fs.Float64("pace", 0.5, "overhead is measured with turns arriving at this fraction of the measured throughput (0 < pace <= 1)")
	memProfile := fs.String("memprofile", "", "write a heap profile taken at the end of the load phase to this file")
	store := fs.String("store", "badger", "the store: badger (in --dir) or postgres (the database whose URL is in the variable store.postgres_url_env names, CTX_STORE_POSTGRES_URL by default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *store {
	case "badger", "postgres":
		e.Config.Store.Backend = *store
	default:
		return fmt.Errorf("bench turns: --store is %q, want badger or postgres", *store)
	}
	if *branches < 1 || *turns < 1 || *passive < 0 {
		return errors.New("bench turns: --branches and --turns must be at least 1, --passive at least 0")
	}
	if !(*pace > 0 && *pace <= 1) {
		return fmt.Errorf("bench turns: --pace is %v, want 0 < pace <= 1", *pace)
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-bench-turns-")
	if err != nil {
		return err
	}
	defer done()
	*dir = path
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.WarnLevel))
	e.Config.Local.Delay = 0
	e.Config.DefaultModel = "" // the local provider, whatever keys are set
	var f turnFigures
	if err := benchTurnThroughput(e, filepath.Join(*dir, "load"), *branches, *turns, *passive, *pace, profiles{*cpuProfile, *memProfile}, &f); err != nil {
		return err
	}
	if err := benchReplay(e, filepath.Join(*dir, "replay"), &f); err != nil {
		return err
	}
	f.PeakRSSMB = float64(procStatusKB("VmHWM")) / 1024
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(f)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "store\t%s\t\n", *store)
	fmt.Fprintf(tw, "figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "turns_per_s\t%.0f\t>= 2000 (1000 branches x 20 turns, durable)\n", f.TurnsPerS)
	fmt.Fprintf(tw, "settle_s\t%.1f\t(the load's leftover work, before the paced phase: %.1f s of CPU)\n", f.SettleS, f.SettleCPUs)
	fmt.Fprintf(tw, "overhead_p50_us\t%.0f\t(turns paced at %.2f x the measured throughput)\n", f.OverheadP50us, *pace)
	fmt.Fprintf(tw, "overhead_p99_us\t%.0f\t<= 20000\n", f.OverheadP99us)
	fmt.Fprintf(tw, "peak_rss_mb\t%.0f\t< 1024 (100,000 created, 1,000 active)\n", f.PeakRSSMB)
	fmt.Fprintf(tw, "bytes_per_passive_branch\t%.0f\t\n", f.BytesPerPassiveBranch)
	fmt.Fprintf(tw, "replay_1000_events_ms\t%.1f\t<= 50\n", f.Replay1000EventsMs)
	return tw.Flush()
}

// profiles are the files bench turns writes profiles to ("": none).
type profiles struct{ cpu, mem string }

func benchTurnThroughput(e *cli.Env, dir string, branches, turns, passive int, pace float64, prof profiles, f *turnFigures) error {
	ctx := context.Background()
	e.Config.DataDir = dir
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return err
	}
	var committed atomic.Int64
	all := int64(branches * turns)
	done := make(chan struct{})
	cfg.Observe = func(_ messages.BranchID, ev messages.BranchEvent) {
		if c, ok := ev.(messages.StateCommitted); ok && committed.Add(int64(len(c.Turns))) == all {
			close(done)
		}
	}
	cfg.IdleAfter = time.Hour
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg})
	if err != nil {
		return err
	}
	defer rt.Close()

	// Memory of passivated branches: create them from 64 writers, stop
	// their actors, and compare RSS before and after.
	if passive > 0 {
		e.Log.Warn().Int("branches", passive).Msg("creating passive branches")
		before := settledRSS()
		if err := parallel(64, passive, func(int) error {
			_, b, err := rt.CreateSession(ctx, "passive")
			if err == nil {
				err = rt.Stop(ctx, b.ID)
			}
			return err
		}); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond) // let the stops land
		f.BytesPerPassiveBranch = float64(settledRSS()-before) / float64(passive)
	}

	ids := make([]messages.BranchID, branches)
	if err := parallel(64, branches, func(i int) error {
		_, b, err := rt.CreateSession(ctx, "load")
		ids[i] = b.ID
		return err
	}); err != nil {
		return err
	}
	e.Log.Warn().Int("branches", branches).Int("turns", turns).Msg("driving turns")
	lat := make([][]time.Duration, branches)
	if prof.cpu != "" {
		stop, err := cli.StartCPUProfile(prof.cpu)
		if err != nil {
			return err
		}
		defer stop()
	}
	start := time.Now()
	if err := parallel(branches, branches, func(i int) error {
		for n := range turns {
			t0 := time.Now()
			s, err := rt.Submit(ctx, ids[i], "turn "+strconv.Itoa(n)+" of a load test")
			if err != nil {
				return err
			}
			if _, last := s.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
				return fmt.Errorf("turn ended %s: %s", last.Phase, last.Err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
		// The fold policy keeps the newest turns pending; fold them now
		// so that every turn ends committed.
		return rt.CommitPending(ctx, ids[i])
	}); err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("only %d of %d turns committed after 5 minutes", committed.Load(), all)
	}
	f.TurnsPerS = float64(all) / time.Since(start).Seconds()
	if prof.mem != "" {
		fh, err := os.Create(prof.mem)
		if err != nil {
			return err
		}
		err = pprof.Lookup("heap").WriteTo(fh, 0)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	var flat []time.Duration
	for _, l := range lat {
		flat = append(flat, l...)
	}
	e.Log.Warn().Dur("closed_loop_p50", percentile(flat, 50)).Dur("closed_loop_p99", percentile(flat, 99)).
		Msg("latency with every branch always waiting (Little's law: branches / throughput)")
	wall, cpu := settle(rt, 2*time.Minute)
	f.SettleS, f.SettleCPUs = wall.Seconds(), cpu.Seconds()
	lat2, err := pacedOverhead(ctx, rt, ids, f.TurnsPerS*pace)
	if err != nil {
		return err
	}
	f.OverheadP50us, f.OverheadP99us = micros(percentile(lat2, 50)), micros(percentile(lat2, 99))
	return nil
}

// settle waits until the runtime has finished the work the load phase
// left behind, at most max: first the turns folded and not yet indexed,
// then what the process still does on its own, seen as its CPU time
// (where known): Badger's memtable flushes and the compactions of what
// the load wrote run for tens of seconds after its last commit on two
// vCPUs, and a paced phase started meanwhile measured the two together
// (docs/BENCHMARKS.md). It returns how long
// it waited and the CPU the process used meanwhile. The process counts
// as idle after a half-second window in which it used under 5 % of a
// core.
func settle(rt *ctxinf.Runtime, max time.Duration) (wall, cpu time.Duration) {
	const window, idle = 500 * time.Millisecond, 25 * time.Millisecond
	start := time.Now()
	cpu0, known := processCPU()
	for rt.IndexBacklog() > 0 && time.Since(start) < max {
		time.Sleep(10 * time.Millisecond)
	}
	for known && time.Since(start) < max {
		c0, _ := processCPU()
		time.Sleep(window)
		if c1, _ := processCPU(); c1-c0 < idle {
			break
		}
	}
	wall = time.Since(start)
	if cpu1, ok := processCPU(); ok && known {
		cpu = cpu1 - cpu0
	}
	return wall, cpu
}

// pacedOverhead measures the runtime's per-turn overhead: turns arrive at
// a steady rate (open loop, about five seconds' worth, round robin over
// the branches), and each is timed from its scheduled arrival to its
// finalized response, so that a stall delays every turn due meanwhile
// and shows in the figures. In the closed-loop load run every branch is
// always waiting, so a turn's latency there is branches / throughput
// whatever the runtime costs; at a rate below capacity it is what a turn
// pays the runtime.
func pacedOverhead(ctx context.Context, rt *ctxinf.Runtime, ids []messages.BranchID, rate float64) ([]time.Duration, error) {
	rate = max(rate, 1)
	n := max(min(int(rate*5), 4*len(ids)), 1)
	interval := time.Duration(float64(time.Second) / rate)
	lat := make([]time.Duration, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	// A branch takes its next turn once the last one is finalized (SRD
	// §6.2): a turn due on a busy branch waits, and the wait counts.
	last := make([]chan struct{}, len(ids))
	t0 := time.Now()
	for i := range n {
		due := t0.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		before, done := last[i%len(ids)], make(chan struct{})
		last[i%len(ids)] = done
		wg.Go(func() {
			defer close(done)
			if before != nil {
				<-before
			}
			s, err := rt.Submit(ctx, ids[i%len(ids)], "a paced turn "+strconv.Itoa(i))
			if err != nil {
				errs <- err
				return
			}
			if _, last := s.Wait(nil); last.Phase != messages.PhaseResponseFinalized {
				errs <- fmt.Errorf("paced turn ended %s: %s", last.Phase, last.Err)
				return
			}
			lat[i] = time.Since(due)
		})
	}
	wg.Wait()
	close(errs)
	return lat, <-errs
}

// benchReplay builds a branch of at least 1,000 events with snapshots off,
// then times its reactivation (a full replay) five times.
func benchReplay(e *cli.Env, dir string, f *turnFigures) error {
	ctx := context.Background()
	e.Config.DataDir = dir
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return err
	}
	cfg.SnapshotEvery = 1 << 30
	cfg.IdleAfter = time.Hour
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg, Relaxed: true})
	if err != nil {
		return err
	}
	defer rt.Close()
	_, b, err := rt.CreateSession(ctx, "replay")
	if err != nil {
		return err
	}
	for {
		info, err := rt.Inspect(ctx, b.ID)
		if err != nil {
			return err
		}
		if info.Events >= 1000 && info.Pending == 0 && len(info.Turns) == 0 {
			break
		}
		switch {
		case info.InFlight != nil:
			time.Sleep(time.Millisecond)
		case info.Events < 1000:
			if _, _, err := rt.Ask(ctx, b, "a turn to make events"); err != nil {
				return err
			}
		default: // fold what the policy keeps pending, and wait for the index
			if err := rt.CommitPending(ctx, b.ID); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	}
	var lat []time.Duration
	for range 5 {
		if err := rt.Stop(ctx, b.ID); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond) // the stop lands
		t0 := time.Now()
		if _, err := rt.Inspect(ctx, b.ID); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	f.Replay1000EventsMs = float64(percentile(lat, 50)) / float64(time.Millisecond)
	return nil
}

// parallel runs fn(0..n-1) on at most workers goroutines and returns the
// first error.
func parallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// settledRSS returns the resident set size in bytes after a GC that
// returns freed memory to the OS.
func settledRSS() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return procStatusKB("VmRSS") * 1024
}

// procStatusKB reads a kB field of /proc/self/status (0 if unavailable).
func procStatusKB(field string) int64 {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return v
		}
	}
	return 0
}
