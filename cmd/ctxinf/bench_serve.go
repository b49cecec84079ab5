package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
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
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	openaiprov "github.com/contextinfinity/ctxinf/providers/openai"
)

// serveFigures are the figures of `ctxinf bench serve --json`.
type serveFigures struct {
	TurnsPerS          float64 `json:"turns_per_s"`
	FirstDeltaP50us    float64 `json:"first_delta_p50_us"`
	FirstDeltaP99us    float64 `json:"first_delta_p99_us"`
	FrameAppendP50us   float64 `json:"frame_append_p50_us"`
	FrameAppendP99us   float64 `json:"frame_append_p99_us"`
	FramePipelinedPerS float64 `json:"frame_append_pipelined_per_s"`
	FrameGetLast64P50  float64 `json:"frame_get_last64_p50_us"`
	ProxyOverheadP50us float64 `json:"proxy_overhead_p50_us"`
	ProxyDirectP50us   float64 `json:"-"`
	ProxyViaP50us      float64 `json:"-"`
}

// benchServe measures the server on loopback: --conversations
// conversations streaming --turns turns each through SSE at once (the
// local provider at zero delay; committed turns/s and the time from
// sending a turn to its first delta), and the OpenAI-compatible proxy's
// added latency over calling a fake upstream directly (--proxy-requests
// each way, one at a time).
func benchServe(e *env, args []string) error {
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	convs := fs.Int("conversations", 1000, "conversations streaming at once")
	turns := fs.Int("turns", 5, "turns per conversation")
	proxyN := fs.Int("proxy-requests", 300, "requests to the fake upstream, directly and through the proxy")
	frameN := fs.Int("frame-requests", 500, "APPEND_TURN and GET_LAST requests of the frame protocol, each")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the SSE phase to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *convs < 1 || *turns < 1 || *proxyN < 10 {
		return errors.New("bench serve: want --conversations and --turns >= 1, --proxy-requests >= 10")
	}
	path, done, err := workDir(*dir, "ctxinf-bench-serve-")
	if err != nil {
		return err
	}
	defer done()
	e.log = e.log.Level(max(e.log.GetLevel(), zerolog.WarnLevel))
	e.cfg.DefaultModel = ""
	e.cfg.Local.Delay = 0
	var f serveFigures
	ctx := context.Background()

	// SSE: many conversations at once.
	e.cfg.DataDir = filepath.Join(path, "sse")
	url, stop, err := benchServer(ctx, e, nil)
	if err != nil {
		return err
	}
	c := client.New(url, client.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *convs}}))
	branches := make([]client.Branch, *convs)
	for i := range branches {
		if _, branches[i], err = c.CreateSession(ctx, fmt.Sprint("bench-", i)); err != nil {
			stop()
			return err
		}
	}
	var mu sync.Mutex
	var first []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	if *cpuProfile != "" {
		fh, err := os.Create(*cpuProfile)
		if err != nil {
			stop()
			return err
		}
		if err := pprof.StartCPUProfile(fh); err != nil {
			stop()
			return err
		}
		defer fh.Close()
	}
	t0 := time.Now()
	for _, b := range branches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range *turns {
				sent := time.Now()
				var at time.Duration
				_, err := c.Stream(ctx, b.ID, fmt.Sprint("turn ", i, " of a benchmark conversation"), func(ev client.Event) error {
					if ev.Type == "delta" && ev.Text != "" && at == 0 {
						at = time.Since(sent)
					}
					return nil
				})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				first = append(first, at)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	stop()
	if firstErr != nil {
		return fmt.Errorf("bench serve: %w", firstErr)
	}
	f.TurnsPerS = float64(*convs**turns) / elapsed.Seconds()
	f.FirstDeltaP50us, f.FirstDeltaP99us = micros(percentile(first, 50)), micros(percentile(first, 99))

	// Proxy: the same streamed chat completion, directly and through ctxinf.
	up := fakeapi.New(fakeapi.ChatText("stop", "The ", "answer ", "is ", "forty-two."))
	defer up.Close()
	e.cfg.DataDir = filepath.Join(path, "proxy")
	prov := openaiprov.New(openaiprov.Options{BaseURL: up.URL + "/v1", APIKey: "bench", API: "chat"})
	url, stop, err = benchServer(ctx, e, prov)
	if err != nil {
		return err
	}
	defer stop()
	stream := func(base string, i int) (time.Duration, error) {
		cl := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("bench"), option.WithMaxRetries(0),
			option.WithHeader("X-Ctx-Conversation", "bench-proxy"))
		t := time.Now()
		s := cl.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "bench",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprint("question ", i))}})
		for s.Next() {
		}
		return time.Since(t), s.Err()
	}
	var direct, via []time.Duration
	for i := range *proxyN {
		d, err := stream(up.URL+"/v1", i)
		if err != nil {
			return fmt.Errorf("bench serve: direct: %w", err)
		}
		v, err := stream(url+"/v1", i)
		if err != nil {
			return fmt.Errorf("bench serve: via the proxy: %w", err)
		}
		direct, via = append(direct, d), append(via, v)
	}
	f.ProxyDirectP50us, f.ProxyViaP50us = micros(percentile(direct, 50)), micros(percentile(via, 50))
	f.ProxyOverheadP50us = f.ProxyViaP50us - f.ProxyDirectP50us
	if err := benchFrames(ctx, e, filepath.Join(path, "frame"), *frameN, &f); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(f)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "turns_per_s\t%.0f\t(%d conversations x %d turns over SSE, committed)\n", f.TurnsPerS, *convs, *turns)
	fmt.Fprintf(tw, "first_delta_p50_us\t%.0f\t\n", f.FirstDeltaP50us)
	fmt.Fprintf(tw, "first_delta_p99_us\t%.0f\t<= 10000\n", f.FirstDeltaP99us)
	fmt.Fprintf(tw, "proxy_overhead_p50_us\t%.0f\t<= 2000 (direct %.0f, through the proxy %.0f)\n",
		f.ProxyOverheadP50us, f.ProxyDirectP50us, f.ProxyViaP50us)
	fmt.Fprintf(tw, "frame_append_p50_us\t%.0f\t(APPEND_TURN of 10 KB, durable, one at a time)\n", f.FrameAppendP50us)
	fmt.Fprintf(tw, "frame_append_p99_us\t%.0f\t\n", f.FrameAppendP99us)
	fmt.Fprintf(tw, "frame_append_pipelined_per_s\t%.0f\t(64 in flight on one connection)\n", f.FramePipelinedPerS)
	fmt.Fprintf(tw, "frame_get_last64_p50_us\t%.0f\t<= 300\n", f.FrameGetLast64P50)
	return tw.Flush()
}

// benchServer opens a runtime on e's data dir (with provider, if not
// nil, as its model) and serves it on a loopback port; stop shuts both.
func benchServer(ctx context.Context, e *env, prov *openaiprov.Provider) (string, func(), error) {
	cfg, err := runtimeConfig(e)
	if err != nil {
		return "", nil, err
	}
	if prov != nil {
		cfg.Provider, cfg.Model, cfg.Models = prov, "bench", nil
	}
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg})
	if err != nil {
		return "", nil, err
	}
	s := server.New(rt.Runtime, server.Options{Addr: "127.0.0.1:0", MaxInFlight: 1 << 20})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rt.Close()
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		_ = s.Serve(sctx, l, 10*time.Second)
		close(served)
	}()
	return "http://" + l.Addr().String(), func() {
		cancel()
		<-served
		rt.Close()
	}, nil
}

// benchFrames measures the binary frame protocol on loopback over a store
// of its own with the configured durability: APPEND_TURN of 10 KB one at
// a time, then 64 in flight on one connection, and GET_LAST(64).
func benchFrames(ctx context.Context, e *env, dir string, n int, f *serveFigures) error {
	db, err := persistence.Open(storeOptions(e.cfg, dir, e.log))
	if err != nil {
		return err
	}
	defer db.Close()
	srv, err := frame.ListenAndServe(ctx, "127.0.0.1:0", db, frame.Options{MaxPayload: e.cfg.Store.MaxPayloadBytes, Log: e.log})
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
