package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// contextFigures are the figures of `ctxinf bench context --json`.
type contextFigures struct {
	AssemblyP50us1k        float64 `json:"assembly_p50_us_1k"`
	AssemblyP99us1k        float64 `json:"assembly_p99_us_1k"`
	AssemblyP50us100k      float64 `json:"assembly_p50_us_100k"`
	AssemblyP99us100k      float64 `json:"assembly_p99_us_100k"`
	WorkingSetTokensMean   float64 `json:"working_set_tokens_mean"`
	FullHistoryTokens      int     `json:"full_history_tokens"`
	TokenSavingRatio       float64 `json:"token_saving_ratio"`
	SmallTurns, LargeTurns int     `json:"-"`
}

// Context drives one branch through a long conversation (local
// provider at zero delay, the default fold policy and token counting) and
// measures how long each turn's context takes to assemble, retrieval
// excluded, over the last --sample turns before the history reaches
// --small and --large turns; and, over the first --small turns, the
// tokens of the working set each turn sends against the tokens of the
// whole history (what sending everything would cost at the end).
func Context(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("context", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	small := fs.Int("small", 1000, "history length of the first measurement, in turns")
	large := fs.Int("large", 100_000, "history length of the second measurement, in turns")
	sample := fs.Int("sample", 200, "turns measured at each length")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	memProfile := fs.String("memprofile", "", "write a heap profile taken at the end to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sample < 1 || *small < *sample || *large < *small {
		return errors.New("bench context: want 1 <= --sample <= --small <= --large")
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-bench-context-")
	if err != nil {
		return err
	}
	defer done()
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.WarnLevel))
	e.Config.DataDir = filepath.Join(path, "data")
	e.Config.DefaultModel = ""
	e.Config.Local.Delay = 0
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return err
	}
	// Building 100,000 turns of history is not what is measured: no
	// fsync on the way (the assembly reads memory and the store either way).
	cfg.SkipFinalizedFsync = true
	// The figure excludes retrieval (bench retrieval measures it): no
	// search per turn; the turns are still chunked, embedded and indexed.
	cfg.NoRetrieval = true
	var mu sync.Mutex
	var took []time.Duration
	var totals []int
	recording := false
	cfg.ObserveAssembly = func(_ messages.BranchID, d time.Duration, rep core.AssemblyReport) {
		mu.Lock()
		defer mu.Unlock()
		totals = append(totals, rep.Total)
		if recording {
			took = append(took, d)
		}
	}
	ctx := context.Background()
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg, Relaxed: true})
	if err != nil {
		return err
	}
	defer rt.Close()
	_, b, err := rt.CreateSession(ctx, "bench-context")
	if err != nil {
		return err
	}
	count := tokens.ForModel("local", "local")
	full := 0
	turn := 0
	var f contextFigures
	runTo := func(n int) ([]time.Duration, error) {
		for ; turn < n; turn++ {
			mu.Lock()
			recording = turn >= n-*sample
			mu.Unlock()
			text := "Turn " + strconv.Itoa(turn) + ": we keep notes on the deployment, the config file /etc/app/" +
				strconv.Itoa(turn%97) + ".yaml and the decision to use port " + strconv.Itoa(8000+turn%50) + "."
			reply, last, err := rt.Ask(ctx, b, text)
			if err != nil {
				return nil, err
			}
			if last.Phase != messages.PhaseResponseFinalized {
				return nil, fmt.Errorf("turn %d ended %s: %s", turn, last.Phase, last.Err)
			}
			if turn < *small {
				full += count.Count(text) + count.Count(reply) + 2*core.MessageOverhead
			}
			if (turn+1)%10_000 == 0 {
				e.Log.Warn().Int("turns", turn+1).Msg("history")
			}
		}
		mu.Lock()
		defer mu.Unlock()
		out := took
		took = nil
		return out, nil
	}
	lat, err := runTo(*small)
	if err != nil {
		return err
	}
	f.AssemblyP50us1k, f.AssemblyP99us1k = micros(percentile(lat, 50)), micros(percentile(lat, 99))
	mu.Lock()
	sum := 0
	for _, t := range totals[:min(*small, len(totals))] {
		sum += t
	}
	f.WorkingSetTokensMean = float64(sum) / float64(min(*small, len(totals)))
	mu.Unlock()
	f.FullHistoryTokens = full
	f.TokenSavingRatio = float64(full) / f.WorkingSetTokensMean
	if lat, err = runTo(*large); err != nil {
		return err
	}
	f.AssemblyP50us100k, f.AssemblyP99us100k = micros(percentile(lat, 50)), micros(percentile(lat, 99))
	if *memProfile != "" {
		fh, err := os.Create(*memProfile)
		if err != nil {
			return err
		}
		runtime.GC()
		err = pprof.WriteHeapProfile(fh)
		fh.Close()
		if err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(f)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "assembly_p50_us_1k\t%.0f\t(history of %d turns)\n", f.AssemblyP50us1k, *small)
	fmt.Fprintf(tw, "assembly_p99_us_1k\t%.0f\t<= 2000\n", f.AssemblyP99us1k)
	fmt.Fprintf(tw, "assembly_p50_us_100k\t%.0f\t(history of %d turns)\n", f.AssemblyP50us100k, *large)
	fmt.Fprintf(tw, "assembly_p99_us_100k\t%.0f\t<= 2000, flat in history length\n", f.AssemblyP99us100k)
	fmt.Fprintf(tw, "working_set_tokens_mean\t%.0f\t(per turn, first %d turns)\n", f.WorkingSetTokensMean, *small)
	fmt.Fprintf(tw, "full_history_tokens\t%d\t(all %d turns)\n", f.FullHistoryTokens, *small)
	fmt.Fprintf(tw, "token_saving_ratio\t%.1f\t(full history / working set)\n", f.TokenSavingRatio)
	return tw.Flush()
}
