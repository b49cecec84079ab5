package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/client"
	framec "github.com/contextinfinity/ctxinf/client/frame"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	openaiprov "github.com/contextinfinity/ctxinf/providers/openai"
)

// serveFigures are the figures of `ctxinf bench serve --json`.
type serveFigures struct {
	TurnsPerS       float64 `json:"turns_per_s"`
	FirstDeltaP50us float64 `json:"first_delta_p50_us"`
	FirstDeltaP99us float64 `json:"first_delta_p99_us"`
	// The paced phase's offered and achieved rates (first_delta_* are
	// its figures), and the saturated phase's first-delta times.
	PacedOfferedPerS float64 `json:"paced_offered_per_s"`
	PacedTurnsPerS   float64 `json:"paced_turns_per_s"`
	// The machine during the paced phase: the host's stalls (1 ms
	// sleeps that woke over 5 ms late) per second, and the share of the
	// store's group commits that took 4 ms or more.
	PacedStallsPerS     float64 `json:"paced_host_stalls_per_s"`
	PacedSlowSyncPct    float64 `json:"paced_slow_sync_pct"`
	SaturatedFirstP50us float64 `json:"saturated_first_delta_p50_us"`
	SaturatedFirstP99us float64 `json:"saturated_first_delta_p99_us"`
	FrameAppendP50us    float64 `json:"frame_append_p50_us"`
	FrameAppendP99us    float64 `json:"frame_append_p99_us"`
	FramePipelinedPerS  float64 `json:"frame_append_pipelined_per_s"`
	FrameGetLast64P50   float64 `json:"frame_get_last64_p50_us"`
	ProxyOverheadP50us  float64 `json:"proxy_overhead_p50_us"`
	// The same overhead of floorProxy, the least a proxy that makes its
	// exchanges durable can add, timed alongside as a baseline.
	ProxyFloorOverheadP50us float64 `json:"proxy_floor_overhead_p50_us"`
	// The disk's floor in the same run: a 4 KB append+fsync, timed
	// before the SSE phases.
	Fsync4kP50us float64 `json:"fsync_4k_p50_us"`
	Fsync4kP99us float64 `json:"fsync_4k_p99_us"`
	// The same writes into blocks written before, each fdatasynced: the
	// floor of the store's redo log.
	Overwrite4kP50us float64 `json:"fdatasync_4k_overwrite_p50_us"`
	Overwrite4kP99us float64 `json:"fdatasync_4k_overwrite_p99_us"`
	// The machine's scheduling in the same run (bench_machine.go): one
	// handoff between two parked threads, and how late a 1 ms sleep
	// wakes.
	HandoffP50us     float64 `json:"thread_handoff_p50_us"`
	HandoffP99us     float64 `json:"thread_handoff_p99_us"`
	SleepLateP50us   float64 `json:"sleep_1ms_late_p50_us"`
	SleepLateP99us   float64 `json:"sleep_1ms_late_p99_us"`
	ProxyDirectP50us float64 `json:"-"`
	ProxyViaP50us    float64 `json:"-"`
}

// Serve measures the server on loopback: --conversations
// conversations streaming through SSE with the local provider at zero
// delay (see benchSSE: committed turns/s when they all send at once, and
// the time from sending a turn to its first delta when they offer --rate
// turns/s together), the OpenAI-compatible proxy's added latency over
// calling a fake upstream directly, beside a floor proxy's as its
// baseline (--proxy-requests each way, one at a time), and the binary
// frame protocol. The disk's syncs and the machine's scheduling are
// timed first, as the floors the figures stand on.
func Serve(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	convs := fs.Int("conversations", 1000, "conversations streaming at once")
	turns := fs.Int("turns", 5, "turns per conversation")
	proxyN := fs.Int("proxy-requests", 300, "requests to the fake upstream, directly and through the proxy")
	frameN := fs.Int("frame-requests", 500, "APPEND_TURN and GET_LAST requests of the frame protocol, each")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	rate := fs.Float64("rate", 50, "turns/s the conversations offer together in the paced phase")
	pacedFor := fs.Duration("paced-for", 15*time.Second, "how long the paced phase offers turns")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the SSE phases to this file")
	proxyProfile := fs.String("proxy-cpuprofile", "", "write a CPU profile of the proxy phase to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *convs < 1 || *turns < 1 || *pacedFor <= 0 || *proxyN < 10 || !(*rate > 0) {
		return errors.New("bench serve: want --conversations and --turns >= 1, --rate and --paced-for > 0, --proxy-requests >= 10")
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-bench-serve-")
	if err != nil {
		return err
	}
	defer done()
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.WarnLevel))
	e.Config.DefaultModel = ""
	e.Config.Local.Delay = 0
	var f serveFigures
	ctx := context.Background()

	floor, err := fsyncLatencies(path, make([]byte, 4<<10), 500)
	if err != nil {
		return err
	}
	f.Fsync4kP50us, f.Fsync4kP99us = micros(percentile(floor, 50)), micros(percentile(floor, 99))
	if floor, err = syncLatencies(path, make([]byte, 4<<10), 500, true); err != nil {
		return err
	}
	f.Overwrite4kP50us, f.Overwrite4kP99us = micros(percentile(floor, 50)), micros(percentile(floor, 99))
	handoffs := handoffLatencies(1000, 200*time.Microsecond)
	f.HandoffP50us, f.HandoffP99us = micros(percentile(handoffs, 50)), micros(percentile(handoffs, 99))
	late := sleepLateness(1000, time.Millisecond)
	f.SleepLateP50us, f.SleepLateP99us = micros(percentile(late, 50)), micros(percentile(late, 99))

	// SSE: many conversations, paced, then saturated.
	e.Config.DataDir = filepath.Join(path, "sse")
	url, stats, stop, err := benchServer(ctx, e, nil)
	if err != nil {
		return err
	}
	if err := benchSSE(ctx, url, stats, *convs, *turns, *rate, *pacedFor, *cpuProfile, &f); err != nil {
		stop()
		return err
	}
	stop()

	// Proxy: the same streamed chat completion, directly and through ctxinf.
	up := fakeapi.New(fakeapi.ChatText("stop", "The ", "answer ", "is ", "forty-two."))
	defer up.Close()
	e.Config.DataDir = filepath.Join(path, "proxy")
	prov := openaiprov.New(openaiprov.Options{BaseURL: up.URL + "/v1", APIKey: "bench", API: "chat"})
	url, _, stop, err = benchServer(ctx, e, prov)
	if err != nil {
		return err
	}
	defer stop()
	// One client each way, kept, as an application keeps its client: a
	// client made for each request (openai.NewClient clones a transport
	// each time) would dial each request anew both ways.
	client := func(base string) openai.Client {
		return openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("bench"), option.WithMaxRetries(0),
			option.WithHeader("X-Ctx-Conversation", "bench-proxy"))
	}
	floorURL, stopFloor, err := floorProxy(up.URL, path)
	if err != nil {
		return err
	}
	defer stopFloor()
	directCl, viaCl, floorCl := client(up.URL+"/v1"), client(url+"/v1"), client(floorURL+"/v1")
	stream := func(cl openai.Client) func(int) (time.Duration, error) {
		return func(i int) (time.Duration, error) {
			t := time.Now()
			s := cl.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "bench",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprint("question ", i))}})
			for s.Next() {
			}
			return time.Since(t), s.Err()
		}
	}
	lat, err := benchProxy(*proxyN, *proxyProfile, []string{"direct", "the floor proxy", "the proxy"},
		stream(directCl), stream(floorCl), stream(viaCl))
	if err != nil {
		return err
	}
	f.ProxyDirectP50us, f.ProxyViaP50us = micros(percentile(lat[0], 50)), micros(percentile(lat[2], 50))
	f.ProxyFloorOverheadP50us = micros(percentile(lat[1], 50)) - f.ProxyDirectP50us
	f.ProxyOverheadP50us = f.ProxyViaP50us - f.ProxyDirectP50us
	if err := benchFrames(ctx, e, filepath.Join(path, "frame"), *frameN, &f); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(f)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "fsync_4k_p50_us\t%.0f\t(the disk in this run: 4 KB append+fsync; p99 %.0f)\n", f.Fsync4kP50us, f.Fsync4kP99us)
	fmt.Fprintf(tw, "fdatasync_4k_overwrite_p50_us\t%.0f\t(4 KB into blocks written before + fdatasync: the redo log's floor; p99 %.0f)\n",
		f.Overwrite4kP50us, f.Overwrite4kP99us)
	fmt.Fprintf(tw, "thread_handoff_p50_us\t%.0f\t(the machine in this run: one goroutine wakes another on a parked thread; p99 %.0f)\n",
		f.HandoffP50us, f.HandoffP99us)
	fmt.Fprintf(tw, "sleep_1ms_late_p50_us\t%.0f\t(the machine in this run: how late a 1 ms sleep wakes; p99 %.0f)\n",
		f.SleepLateP50us, f.SleepLateP99us)
	fmt.Fprintf(tw, "turns_per_s\t%.0f\t(saturated: %d conversations x %d turns over SSE at once, committed)\n", f.TurnsPerS, *convs, *turns)
	fmt.Fprintf(tw, "saturated_first_delta_p50_us\t%.0f\t(queueing: about conversations / turns_per_s)\n", f.SaturatedFirstP50us)
	fmt.Fprintf(tw, "saturated_first_delta_p99_us\t%.0f\t\n", f.SaturatedFirstP99us)
	fmt.Fprintf(tw, "first_delta_p50_us\t%.0f\t(paced: %d conversations offering %.0f turns/s, %.0f/s achieved)\n",
		f.FirstDeltaP50us, *convs, f.PacedOfferedPerS, f.PacedTurnsPerS)
	fmt.Fprintf(tw, "first_delta_p99_us\t%.0f\t<= 10000 (meanwhile %.1f host stalls/s over 5 ms; %.1f %% of commits took 4 ms or more)\n",
		f.FirstDeltaP99us, f.PacedStallsPerS, f.PacedSlowSyncPct)
	fmt.Fprintf(tw, "proxy_overhead_p50_us\t%.0f\t<= 2000 (direct %.0f, through the proxy %.0f)\n",
		f.ProxyOverheadP50us, f.ProxyDirectP50us, f.ProxyViaP50us)
	ratio := "-"
	if f.ProxyFloorOverheadP50us > 0 {
		ratio = fmt.Sprintf("%.1fx", f.ProxyOverheadP50us/f.ProxyFloorOverheadP50us)
	}
	fmt.Fprintf(tw, "proxy_floor_overhead_p50_us\t%.0f\t(baseline: net/http forwarding, one fdatasync of the exchange; the proxy adds %s)\n",
		f.ProxyFloorOverheadP50us, ratio)
	fmt.Fprintf(tw, "frame_append_p50_us\t%.0f\t(APPEND_TURN of 10 KB, durable, one at a time)\n", f.FrameAppendP50us)
	fmt.Fprintf(tw, "frame_append_p99_us\t%.0f\t\n", f.FrameAppendP99us)
	fmt.Fprintf(tw, "frame_append_pipelined_per_s\t%.0f\t(64 in flight on one connection)\n", f.FramePipelinedPerS)
	fmt.Fprintf(tw, "frame_get_last64_p50_us\t%.0f\t<= 300\n", f.FrameGetLast64P50)
	return tw.Flush()
}

// benchProxy times n requests each way (named by names), one way after
// the other, with a CPU profile of them written to cpuProfile unless it
// is "".
func benchProxy(n int, cpuProfile string, names []string, ways ...func(int) (time.Duration, error)) ([][]time.Duration, error) {
	if cpuProfile != "" {
		stop, err := cli.StartCPUProfile(cpuProfile)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	lat := make([][]time.Duration, len(ways))
	for i := range n {
		for w, way := range ways {
			d, err := way(i)
			if err != nil {
				return nil, fmt.Errorf("bench serve: %s: %w", names[w], err)
			}
			lat[w] = append(lat[w], d)
		}
	}
	return lat, nil
}

// benchServer opens a runtime on e's data dir (with provider, if not
// nil, as its model) and serves it on a loopback port; stats are its
// store's, and stop shuts both.
func benchServer(ctx context.Context, e *cli.Env, prov *openaiprov.Provider) (url string, stats func() persistence.Stats, stop func(), err error) {
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return "", nil, nil, err
	}
	if prov != nil {
		cfg.Provider, cfg.Model, cfg.Models = prov, "bench", nil
	}
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg})
	if err != nil {
		return "", nil, nil, err
	}
	opts := server.OptionsOf(e.Config.Server)
	opts.Addr, opts.MaxInFlight = "127.0.0.1:0", 1<<20
	s, err := server.New(rt.Runtime, opts)
	if err != nil {
		rt.Close()
		return "", nil, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rt.Close()
		return "", nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		_ = s.Serve(sctx, l, 10*time.Second)
		close(served)
	}()
	return "http://" + l.Addr().String(), rt.DB().Stats, func() {
		cancel()
		<-served
		rt.Close()
	}, nil
}

// benchFrames measures the binary frame protocol on loopback over a store
// of its own with the configured durability: APPEND_TURN of 10 KB one at
// a time, then 64 in flight on one connection, and GET_LAST(64).
func benchFrames(ctx context.Context, e *cli.Env, dir string, n int, f *serveFigures) error {
	db, err := badgerdb.Open(e.StoreOptions(dir))
	if err != nil {
		return err
	}
	defer db.Close()
	srv, err := frame.ListenAndServe(ctx, "127.0.0.1:0", db, frame.Options{MaxPayload: e.Config.Store.MaxPayloadBytes, Log: e.Log})
	if err != nil {
		return err
	}
	defer srv.Close()
	c, err := framec.Dial(ctx, srv.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	b := messages.NewID[messages.BranchID](time.Now())
	if _, err := c.CreateBranch(ctx, persistence.BranchSpec{ID: b}); err != nil {
		return err
	}
	payload := make([]byte, 10<<10)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	turn := func(i int) persistence.AppendRequest {
		p := append([]byte(strconv.Itoa(i)+" "), payload...) // distinct: no dedup
		return persistence.AppendRequest{Payload: p, TypeTag: 1}
	}
	var lat []time.Duration
	for i := range n {
		t := time.Now()
		if _, err := c.Append(ctx, b, turn(i)); err != nil {
			return fmt.Errorf("frame append: %w", err)
		}
		lat = append(lat, time.Since(t))
	}
	f.FrameAppendP50us, f.FrameAppendP99us = micros(percentile(lat, 50)), micros(percentile(lat, 99))
	// Pipelined: 64 goroutines share the connection, each on its own
	// branch (appends to one branch in flight together may race).
	const inFlight = 64
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	t0 := time.Now()
	for g := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gb := messages.NewID[messages.BranchID](time.Now())
			if _, err := c.CreateBranch(ctx, persistence.BranchSpec{ID: gb}); err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
				return
			}
			for i := range max(n/inFlight, 1) {
				if _, err := c.Append(ctx, gb, turn(g*n+i)); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("frame pipelined append: %w", firstErr)
	}
	f.FramePipelinedPerS = float64(inFlight*max(n/inFlight, 1)) / time.Since(t0).Seconds()
	lat = lat[:0]
	for range n {
		t := time.Now()
		if _, err := c.GetLast(ctx, b, 64); err != nil {
			return fmt.Errorf("frame get_last: %w", err)
		}
		lat = append(lat, time.Since(t))
	}
	f.FrameGetLast64P50 = micros(percentile(lat, 50))
	return nil
}

// benchSSE streams turns of convs conversations through SSE in two
// phases. Saturated: every conversation sends turns turns back to back,
// all at once; this gives the committed turns/s, and its first-delta
// times are queueing (a closed loop of n conversations waits about
// n / throughput for each turn). Paced: for the duration pacedFor the
// same conversations, all live, receive turns that arrive at random
// (Poisson) times at rate turns/s together, each on a conversation with
// no turn in flight, as people and agents send them; this gives the
// first-delta p50/p99 of a server carrying convs conversations below
// its capacity.
func benchSSE(ctx context.Context, url string, stats func() persistence.Stats, convs, turns int, rate float64, pacedFor time.Duration, cpuProfile string, f *serveFigures) error {
	c := client.New(url, client.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: convs}}))
	branches := make([]client.Branch, convs)
	for i := range branches {
		var err error
		if _, branches[i], err = c.CreateSession(ctx, fmt.Sprint("bench-", i)); err != nil {
			return err
		}
	}
	if cpuProfile != "" {
		stop, err := cli.StartCPUProfile(cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var (
		mu       sync.Mutex
		first    []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	// send streams one turn and records the time to its first delta.
	send := func(b client.Branch, text string) error {
		sent := time.Now()
		var at time.Duration
		_, err := c.Stream(ctx, b.ID, text, func(ev client.Event) error {
			if ev.Type == "delta" && ev.Text != "" && at == 0 {
				at = time.Since(sent)
			}
			return nil
		})
		mu.Lock()
		defer mu.Unlock()
		firstErr = cmp.Or(firstErr, err)
		first = append(first, at)
		return err
	}
	idle := make(chan client.Branch, convs)
	for _, b := range rand.Perm(convs) {
		idle <- branches[b]
	}
	var busy int // arrivals that found every conversation busy
	// The machine while the phase runs: the host's stalls, and the
	// store's group commits slow enough to show in a turn's first delta.
	stalls, syncs0 := countStalls(5*time.Millisecond), stats().SyncTimes
	t0 := time.Now()
	next := t0
	for n := 0; ; n++ {
		next = next.Add(time.Duration(rand.ExpFloat64() / rate * float64(time.Second)))
		if next.Sub(t0) >= pacedFor {
			break
		}
		time.Sleep(time.Until(next))
		select {
		case b := <-idle:
			wg.Go(func() {
				if send(b, fmt.Sprint("paced turn ", n, " of a benchmark conversation")) == nil {
					idle <- b
				}
			})
		default:
			busy++
		}
	}
	wg.Wait()
	paced, syncs := time.Since(t0), stats().SyncTimes
	f.PacedStallsPerS = float64(stalls()) / paced.Seconds()
	var all uint64
	for i := range syncs {
		syncs[i] -= syncs0[i]
		all += syncs[i]
	}
	if all > 0 {
		f.PacedSlowSyncPct = 100 * float64(persistence.SyncsOver(syncs, 4*time.Millisecond)) / float64(all)
	}
	if firstErr != nil {
		return fmt.Errorf("bench serve: paced: %w", firstErr)
	}
	if busy > 0 {
		return fmt.Errorf("bench serve: paced: %d turns found all %d conversations busy: lower --rate", busy, convs)
	}
	f.PacedOfferedPerS = rate
	f.PacedTurnsPerS = float64(len(first)) / time.Since(t0).Seconds()
	f.FirstDeltaP50us, f.FirstDeltaP99us = micros(percentile(first, 50)), micros(percentile(first, 99))
	first = first[:0]
	t0 = time.Now()
	for _, b := range branches {
		wg.Go(func() {
			for i := range turns {
				if send(b, fmt.Sprint("turn ", i, " of a benchmark conversation")) != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("bench serve: saturated: %w", firstErr)
	}
	f.TurnsPerS = float64(convs*turns) / time.Since(t0).Seconds()
	f.SaturatedFirstP50us, f.SaturatedFirstP99us = micros(percentile(first, 50)), micros(percentile(first, 99))

	return nil
}
