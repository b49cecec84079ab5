package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/anthropic"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// streamFigures are the figures of `ctxinf bench stream --json`.
type streamFigures struct {
	DeltasPerS                   float64 `json:"deltas_per_s"`
	JournalBytesPerDisplayedByte float64 `json:"journal_bytes_per_displayed_byte"`
	DeltaLatencyP50us            float64 `json:"delta_latency_p50_us"`
	DeltaLatencyP99us            float64 `json:"delta_latency_p99_us"`
	Deltas                       int     `json:"deltas"`
	API                          string  `json:"api"`
	// The latency is measured in a second run with the fake API pacing
	// its events so that all streams together send PacedDeltasPerS, a
	// fraction (pace) of the measured throughput: at full speed every
	// delta waits behind the ones queued before it, which measures the
	// queue, not the runtime.
	PacedDeltasPerS float64 `json:"paced_deltas_per_s"`
}

// Stream measures streaming end to end: a fake model API on
// loopback streams text deltas at full speed through the real SDK and
// adapter, the step actor, the journal actor (with the configured flush
// and fsync policy) and the branch to a subscriber. It reports deltas per
// second over all branches, journal bytes written per byte of text shown,
// and the latency the runtime adds to each delta: from the adapter
// emitting it to the subscriber reading it.
func Stream(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	branches := fs.Int("branches", 4, "branches streaming at once")
	turns := fs.Int("turns", 5, "turns per branch")
	deltas := fs.Int("deltas", 5000, "text deltas per response")
	delta := fs.String("delta", "token ", "the text of each delta")
	api := fs.String("api", "responses", "the fake API streamed: responses, chat or anthropic")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the full-speed run to this file")
	pace := fs.Float64("pace", 0.5, "latency is measured with the streams together at this fraction of the measured throughput (0 < pace <= 1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *branches < 1 || *turns < 1 || *deltas < 1 || *delta == "" {
		return errors.New("bench stream: --branches, --turns and --deltas must be at least 1, --delta not empty")
	}
	if !(*pace > 0 && *pace <= 1) {
		return fmt.Errorf("bench stream: --pace is %v, want 0 < pace <= 1", *pace)
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-bench-stream-")
	if err != nil {
		return err
	}
	defer done()
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.WarnLevel))
	e.Config.DefaultModel = ""
	run := streamRun{branches: *branches, turns: *turns, deltas: *deltas, delta: *delta, api: *api}
	full, err := run.measure(e, filepath.Join(path, "full"), 0, *cpuProfile)
	if err != nil {
		return err
	}
	// Every stream sends at an equal share of pace x the throughput.
	gap := time.Duration(float64(*branches) / (*pace * full.deltasPerS) * float64(time.Second))
	paced, err := run.measure(e, filepath.Join(path, "paced"), gap, "")
	if err != nil {
		return err
	}
	f := streamFigures{
		DeltasPerS:                   full.deltasPerS,
		JournalBytesPerDisplayedByte: full.journalPerShown,
		DeltaLatencyP50us:            micros(percentile(paced.latency, 50)),
		DeltaLatencyP99us:            micros(percentile(paced.latency, 99)),
		Deltas:                       len(full.latency),
		API:                          *api,
		PacedDeltasPerS:              paced.deltasPerS,
	}
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(f)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "deltas_per_s\t%.0f\t>= 50000 (%d branches x %d turns x %d deltas, %s, full speed)\n", f.DeltasPerS, *branches, *turns, *deltas, *api)
	fmt.Fprintf(tw, "journal_bytes_per_displayed_byte\t%.1f\t(delta %q)\n", f.JournalBytesPerDisplayedByte, *delta)
	fmt.Fprintf(tw, "delta_latency_p50_us\t%.0f\t(streams paced at %.0f deltas/s in all)\n", f.DeltaLatencyP50us, f.PacedDeltasPerS)
	fmt.Fprintf(tw, "delta_latency_p99_us\t%.0f\t<= 1000\n", f.DeltaLatencyP99us)
	return tw.Flush()
}

// streamRun is one run of bench stream.
type streamRun struct {
	branches, turns, deltas int
	delta, api              string
}

// streamResult is what a run measured.
type streamResult struct {
	deltasPerS      float64
	journalPerShown float64
	latency         []time.Duration
}

// measure runs the branches' turns against a fake API that waits gap
// before each event (0: full speed), on a runtime in dir.
func (r streamRun) measure(e *cli.Env, dir string, gap time.Duration, cpuProfile string) (streamResult, error) {
	var res streamResult
	srv, prov, err := streamServer(r.api, r.deltas, r.delta, gap)
	if err != nil {
		return res, err
	}
	defer srv.Close()
	e.Config.DataDir = dir
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return streamResult{}, err
	}
	timed := &timedProvider{Provider: prov, emitted: map[string][]time.Time{}}
	cfg.Provider, cfg.Model, cfg.Models = timed, "bench", nil
	ctx := context.Background()
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg})
	if err != nil {
		return res, err
	}
	defer rt.Close()

	if cpuProfile != "" {
		pf, err := os.Create(cpuProfile)
		if err != nil {
			return res, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile()
	}
	var mu sync.Mutex
	var lat []time.Duration
	var shown int64
	start := time.Now()
	err = parallel(r.branches, r.branches, func(b int) error {
		_, br, err := rt.CreateSession(ctx, "bench-stream")
		if err != nil {
			return err
		}
		for t := range r.turns {
			key := fmt.Sprintf("branch %d turn %d", b, t)
			s, err := rt.Submit(ctx, br.ID, key)
			if err != nil {
				return err
			}
			var got []time.Time
			var n int64
			var last ctxinf.Update
			for us := s.Next(nil); us != nil; us = s.Next(nil) {
				now := time.Now()
				for _, u := range us {
					if u.Delta != "" {
						got = append(got, now)
						n += int64(len(u.Delta))
					}
					if u.Done {
						last = u
					}
				}
			}
			if last.Err != "" {
				return fmt.Errorf("turn %q failed: %s", key, last.Err)
			}
			sent := timed.take(key)
			if len(sent) != len(got) {
				return fmt.Errorf("turn %q: %d deltas emitted, %d read", key, len(sent), len(got))
			}
			mu.Lock()
			for i := range got {
				lat = append(lat, got[i].Sub(sent[i]))
			}
			shown += n
			mu.Unlock()
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return res, err
	}
	journal, err := dirBytes(filepath.Join(dir, "streams"))
	if err != nil {
		return res, err
	}
	res.deltasPerS = float64(len(lat)) / elapsed.Seconds()
	res.journalPerShown = float64(journal) / float64(max(shown, 1))
	res.latency = lat
	return res, nil
}

// streamServer starts a fake API answering every request with n deltas of
// text, gap apart, and the provider that talks to it.
func streamServer(api string, n int, text string, gap time.Duration) (*fakeapi.Server, providers.Provider, error) {
	var reply fakeapi.Reply
	switch api {
	case "responses":
		reply = fakeapi.ResponsesTextN(n, text)
	case "chat":
		reply = fakeapi.ChatTextN(n, text)
	case "anthropic":
		reply = fakeapi.AnthropicTextN(n, text)
	default:
		return nil, nil, fmt.Errorf("bench stream: --api %q: want responses, chat or anthropic", api)
	}
	reply.Delay = gap
	srv := fakeapi.New(reply)
	if api == "anthropic" {
		return srv, anthropic.New(anthropic.Options{BaseURL: srv.URL, APIKey: "bench"}), nil
	}
	return srv, openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "bench", API: api}), nil
}

// timedProvider records when its provider emitted each text delta, by
// the user message of the request.
type timedProvider struct {
	providers.Provider
	mu      sync.Mutex
	emitted map[string][]time.Time
}

func (p *timedProvider) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	key := req.Context.User.RenderedText
	var stamps []time.Time
	resp, err := p.Provider.Stream(ctx, req, func(ev providers.Event) error {
		if ev.Kind == providers.EventTextDelta && ev.Text != "" {
			stamps = append(stamps, time.Now())
		}
		return emit(ev)
	})
	p.mu.Lock()
	p.emitted[key] = stamps
	p.mu.Unlock()
	return resp, err
}

// take returns and forgets the emit times of the turn whose user message
// was key.
func (p *timedProvider) take(key string) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.emitted[key]
	delete(p.emitted, key)
	return s
}

// dirBytes is the total size of the files in dir.
func dirBytes(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, de := range entries {
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
	}
	return total, nil
}
