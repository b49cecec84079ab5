package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/messages"
)

// importFigures are the figures of `ctxinf bench import --json`, one per
// history size: medians over the runs.
type importFigures struct {
	Turns  int    `json:"turns"`
	Format int    `json:"format"`
	Runs   int    `json:"runs"`
	Error  string `json:"error,omitempty"`
	// ImportS is the time of POST /v1/sessions/import, from its first
	// byte sent to its answer.
	ImportS float64 `json:"import_s"`
	// FirstTurnMs is the latency of a turn sent on the imported branch
	// as soon as the import answers (the local model, no delay).
	FirstTurnMs float64 `json:"first_turn_ms"`
	// SearchableS is the time from the import's answer until every
	// folded turn is indexed; BacklogAtAnswer the turns the import left
	// to index when it answered (Inspect: committed, not indexed).
	SearchableS     float64 `json:"searchable_s"`
	BacklogAtAnswer float64 `json:"backlog_at_answer"`
	// DiskBytesPerTurn is the data directory's size once the runtime is
	// closed (blocks allocated, as du counts them), less the redo log's
	// fixed ring (ctxinf.redo, 64 MiB whatever the data), over the turns.
	DiskBytesPerTurn float64 `json:"disk_bytes_per_turn"`
}

// Import measures POST /v1/sessions/import on the server over
// loopback, each run on a fresh data directory: the import of a
// generated session of N turns (format 2, a state folding every
// --fold-every turns as an exported session has, or format 1, messages
// only), a turn sent at once after it, and the time until the imported
// turns are all indexed.
func Import(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	sizes := fs.String("turns", "1000,10000,100000", "history sizes, comma-separated")
	runs := fs.Int("runs", 3, "runs per size (the figures are medians)")
	format := fs.Int("format", 2, "export format: 2 (turns and states, as exported) or 1 (messages only)")
	foldEvery := fs.Int("fold-every", 5, "format 2: a state folds this many turns")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object per size")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the last run's import (until it answers) to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile of the last run, taken when its import answers, to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("bench import: --turns: %q, want positive counts separated by commas", s)
		}
		ns = append(ns, n)
	}
	if *runs < 1 || *foldEvery < 1 || (*format != 1 && *format != 2) {
		return errors.New("bench import: want --runs and --fold-every at least 1, --format 1 or 2")
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-bench-import-")
	if err != nil {
		return err
	}
	defer done()
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.WarnLevel))
	e.Config.Local.Delay = 0
	e.Config.DefaultModel = "" // the local provider, whatever keys are set
	var all []importFigures
	for _, n := range ns {
		f := importFigures{Turns: n, Format: *format, Runs: *runs}
		var imp, first, searchable, backlog, disk []time.Duration
		for run := range *runs {
			var prof profiles
			if run == *runs-1 {
				prof = profiles{*cpuProfile, *memProfile}
			}
			r, err := benchImportRun(e, filepath.Join(path, fmt.Sprintf("n%d-r%d", n, run)), n, *format, *foldEvery, prof)
			if err != nil {
				f.Error = err.Error()
				e.Log.Warn().Err(err).Int("turns", n).Msg("bench import")
				break
			}
			imp, first, searchable = append(imp, r.imp), append(first, r.first), append(searchable, r.searchable)
			backlog = append(backlog, time.Duration(r.backlog))
			disk = append(disk, time.Duration(r.disk))
		}
		if len(imp) > 0 {
			f.ImportS, f.FirstTurnMs = percentile(imp, 50).Seconds(), micros(percentile(first, 50))/1e3
			f.SearchableS, f.BacklogAtAnswer = percentile(searchable, 50).Seconds(), float64(percentile(backlog, 50))
			f.DiskBytesPerTurn = float64(percentile(disk, 50)) / float64(n)
		}
		all = append(all, f)
		if *asJSON {
			if err := json.NewEncoder(e.Stdout).Encode(f); err != nil {
				return err
			}
		}
	}
	if *asJSON {
		return nil
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "turns\tformat\timport_s\tturns_per_s\tfirst_turn_ms\tsearchable_s\tbacklog_at_answer\tdisk_bytes_per_turn\n")
	for _, f := range all {
		if f.Error != "" {
			fmt.Fprintf(tw, "%d\t%d\terror: %s\n", f.Turns, f.Format, f.Error)
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.0f\t%.1f\t%.2f\t%.0f\t%.0f\n", f.Turns, f.Format, f.ImportS, float64(f.Turns)/f.ImportS,
			f.FirstTurnMs, f.SearchableS, f.BacklogAtAnswer, f.DiskBytesPerTurn)
	}
	return tw.Flush()
}

type importRun struct {
	imp, first, searchable time.Duration
	backlog                uint64
	disk                   int64 // the data directory's bytes once closed
}

// benchImportRun serves a runtime on dir and imports a generated session
// of n turns into it.
func benchImportRun(e *cli.Env, dir string, n, format, foldEvery int, prof profiles) (importRun, error) {
	r, err := benchImportServe(e, dir, n, format, foldEvery, prof)
	if err != nil {
		return r, err
	}
	if r.disk, err = diskUsage(dir); err != nil {
		return r, err
	}
	if st, err := os.Stat(filepath.Join(dir, "store", "ctxinf.redo")); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			r.disk -= sys.Blocks * 512
		}
	}
	return r, nil
}

func benchImportServe(e *cli.Env, dir string, n, format, foldEvery int, prof profiles) (importRun, error) {
	var r importRun
	ctx := context.Background()
	e.Config.DataDir = dir
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return r, err
	}
	cfg.IdleAfter = time.Hour
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg})
	if err != nil {
		return r, err
	}
	defer rt.Close()
	opts := server.OptionsOf(e.Config.Server)
	opts.Addr, opts.MaxInFlight, opts.ReadBodyTimeout = "127.0.0.1:0", 1<<20, time.Hour
	s, err := server.New(rt.Runtime, opts)
	if err != nil {
		return r, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		_ = s.Serve(sctx, l, 10*time.Second)
		close(served)
	}()
	defer func() {
		cancel()
		<-served
	}()
	c := client.New("http://" + l.Addr().String())

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeExport(pw, n, format, foldEvery)) }()
	stop := func() {}
	if prof.cpu != "" {
		if stop, err = cli.StartCPUProfile(prof.cpu); err != nil {
			return r, err
		}
	}
	t0 := time.Now()
	imp, err := c.Import(ctx, pr)
	r.imp = time.Since(t0)
	stop()
	pr.Close()
	if err != nil {
		return r, fmt.Errorf("import of %d turns: %w", n, err)
	}
	if prof.mem != "" {
		if err := writeHeapProfile(prof.mem); err != nil {
			return r, err
		}
	}
	b := imp.Branch.ID
	info, err := rt.Inspect(ctx, b)
	if err != nil {
		return r, err
	}
	r.backlog = info.Committed - info.Indexed
	t1 := time.Now()
	if _, err := c.Send(ctx, b, "What did Caroline say about the garden?"); err != nil {
		return r, fmt.Errorf("the first turn after the import: %w", err)
	}
	r.first = time.Since(t1)
	for {
		info, err := rt.Inspect(ctx, b)
		if err != nil {
			return r, err
		}
		// Folded as the policy wants (format 1 folds after the import)
		// and every folded turn indexed.
		if info.Indexed == info.Committed && info.Pending <= 2*max(cfg.Fold.K+cfg.Fold.B, cfg.Fold.SafetyTurns) {
			break
		}
		if time.Since(t1) > 30*time.Minute {
			return r, fmt.Errorf("%d turns not indexed after 30 minutes", info.Committed-info.Indexed)
		}
		time.Sleep(2 * time.Millisecond) // polling the branch's index counter
	}
	r.searchable = time.Since(t1)
	return r, nil
}

// writeExport writes a generated session of n turns in the export's
// format 2 (see internal/server/export.go) or format 1.
func writeExport(w io.Writer, n, format, foldEvery int) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	sum := sha256.New()
	gen := newTurnText(7)
	put := func(v any) error {
		line, err := json.Marshal(v)
		if err != nil {
			return err
		}
		line = append(line, '\n')
		sum.Write(line)
		_, err = bw.Write(line)
		return err
	}
	msg := func(role messages.Role, text string) messages.Message {
		return messages.NewMessage(role, messages.Text{Text: text})
	}
	if format == 1 {
		if err := put(map[string]any{"type": "session", "title": "bench import"}); err != nil {
			return err
		}
		for range n {
			if err := put(map[string]any{"type": "message", "message": msg(messages.RoleUser, gen.turn())}); err != nil {
				return err
			}
			if err := put(map[string]any{"type": "message", "message": msg(messages.RoleAssistant, gen.turn())}); err != nil {
				return err
			}
		}
		return bw.Flush()
	}
	if err := put(map[string]any{"type": "session", "format": 2, "title": "bench import"}); err != nil {
		return err
	}
	if err := put(map[string]any{"type": "branch", "label": "main", "parent": -1, "base": map[string]any{"seq": 0, "summary": ""}}); err != nil {
		return err
	}
	states := 0
	var folded []uint64
	summary := ""
	for seq := 1; seq <= n; seq++ {
		if err := put(map[string]any{"type": "turn", "seq": seq, "user": msg(messages.RoleUser, gen.turn()),
			"reply": msg(messages.RoleAssistant, gen.turn())}); err != nil {
			return err
		}
		folded = append(folded, uint64(seq))
		// The newest turns stay pending, as the fold policy leaves them.
		if len(folded) == foldEvery && n-seq >= foldEvery {
			states++
			summary = clipSummary(summary + " " + gen.turn())
			if err := put(map[string]any{"type": "state", "seq": states, "summary": summary, "turns": folded}); err != nil {
				return err
			}
			folded = folded[:0]
		}
	}
	if err := put(map[string]any{"type": "head"}); err != nil {
		return err
	}
	end := map[string]any{"type": "end", "branches": 1, "turns": n, "states": states, "active_branch": 0,
		"sha256": hex.EncodeToString(sum.Sum(nil))}
	if err := put(end); err != nil {
		return err
	}
	return bw.Flush()
}

// clipSummary keeps a generated summary at most 2,000 bytes, its newest
// part, as a summary stays bounded.
func clipSummary(s string) string {
	if len(s) <= 2000 {
		return s
	}
	s = s[len(s)-2000:]
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// writeHeapProfile writes a heap profile to path, after a collection, so
// that it shows what is live.
func writeHeapProfile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(fh, 0)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}
