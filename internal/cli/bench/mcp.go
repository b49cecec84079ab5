package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/mcpserver"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/messages"
)

// mcpFigures are the figures of `ctxinf-bench mcp --json`: the latency
// of search_memory and get_context over stdio, and of the runtime's
// calls they make (the baseline), measured alternately.
type mcpFigures struct {
	Turns           int     `json:"turns"`
	Calls           int     `json:"calls"`
	Embedder        string  `json:"embedder"`
	SearchP50us     float64 `json:"search_memory_p50_us"`
	SearchP99us     float64 `json:"search_memory_p99_us"`
	BaseSearchP50us float64 `json:"runtime_search_p50_us"`
	BaseSearchP99us float64 `json:"runtime_search_p99_us"`
	ContextP50us    float64 `json:"get_context_p50_us"`
	ContextP99us    float64 `json:"get_context_p99_us"`
	BaseContextP50  float64 `json:"runtime_next_context_p50_us"`
	BaseContextP99  float64 `json:"runtime_next_context_p99_us"`
	ContextTokens   int     `json:"get_context_tokens"`
}

// MCP is `ctxinf-bench mcp [--turns N] [--calls C] [--json]`: a branch
// of N generated turns (imported, folded and indexed), then C rounds of
// search_memory and get_context through the MCP server of `ctxinf mcp`
// (its server code, over the HTTP API's handler in process on the
// runtime) on one end of a pair of OS pipes and the Go SDK's client on
// the other, each beside the runtime's own call that the tool makes
// (Runtime.Search, Runtime.DebugNextContext): the baseline, alternated
// with it so that both see the same machine.
func MCP(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	turns := fs.Int("turns", 10_000, "turns on the branch searched")
	calls := fs.Int("calls", 300, "rounds measured (each: both tools and both baselines)")
	k := fs.Int("k", 8, "search_memory's k (its default)")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *turns < 1 || *calls < 1 || *k < 1 || *k > mcpserver.MaxSearchK {
		return fmt.Errorf("bench mcp: want --turns and --calls >= 1, --k 1 to %d", mcpserver.MaxSearchK)
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-bench-mcp-")
	if err != nil {
		return err
	}
	defer done()
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.WarnLevel))
	e.Config.DataDir = filepath.Join(path, "data")
	e.Config.DefaultModel = ""
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return err
	}
	ctx := context.Background()
	rt, err := ctxinf.Open(ctx, ctxinf.Options{Config: &cfg})
	if err != nil {
		return err
	}
	defer rt.Close()
	_, b, err := rt.CreateSession(ctx, "bench-mcp")
	if err != nil {
		return err
	}
	gen := newTurnText(1)
	for n := *turns; n > 0; {
		xs := make([]actors.Exchange, min(n, actors.MaxImport))
		for i := range xs {
			xs[i] = actors.Exchange{User: messages.NewMessage(messages.RoleUser, messages.Text{Text: gen.turn()}),
				Reply: messages.NewMessage(messages.RoleAssistant, messages.Text{Text: gen.turn()})}
		}
		if _, err := rt.Import(ctx, b.ID, xs); err != nil {
			return err
		}
		n -= len(xs)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err = rt.Settle(sctx, b.ID)
	cancel()
	if err != nil {
		return err
	}

	// `ctxinf mcp`'s server on one end of two pipes, the SDK's client on
	// the other.
	serverOpts := server.OptionsOf(e.Config.Server)
	serverOpts.Log = e.Log
	hs, err := server.New(rt.Runtime, serverOpts)
	if err != nil {
		return err
	}
	api := mcpserver.InProcess(hs, nil)
	s := mcpserver.New(mcpserver.Options{Version: e.Version, Client: func(http.Header) *client.Client { return api }})
	serverIn, clientOut, err := os.Pipe()
	if err != nil {
		return err
	}
	clientIn, serverOut, err := os.Pipe()
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.MCP().Run(sctx, &sdk.IOTransport{Reader: serverIn, Writer: serverOut}) }()
	defer func() { stop(); <-served }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "ctxinf-bench", Version: e.Version}, nil).
		Connect(ctx, &sdk.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	tool := func(name string, args map[string]any) (map[string]any, error) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, fmt.Errorf("%s: tool error %v", name, res.Content)
		}
		out, _ := res.StructuredContent.(map[string]any)
		return out, nil
	}
	branch := b.ID.String()
	opts := server.SearchK(rt.Runtime, *k)
	f := mcpFigures{Turns: *turns, Calls: *calls, Embedder: cfg.Embedder.Name()}
	var search, baseSearch, next, baseNext []time.Duration
	for i := range *calls + 1 { // the first round warms up, and is not counted
		q := gen.question()
		t0 := time.Now()
		if _, err := rt.Search(ctx, b.ID, q, opts); err != nil {
			return err
		}
		t1 := time.Now()
		hits, err := tool("search_memory", map[string]any{"branch": branch, "query": q, "k": *k})
		if err != nil {
			return err
		}
		t2 := time.Now()
		if _, err := rt.DebugNextContext(ctx, b.ID, q); err != nil {
			return err
		}
		t3 := time.Now()
		cx, err := tool("get_context", map[string]any{"branch": branch, "message": q})
		if err != nil {
			return err
		}
		t4 := time.Now()
		if h, _ := hits["hits"].([]any); len(h) == 0 {
			return errors.New("bench mcp: search_memory found nothing")
		}
		if i == 0 {
			continue
		}
		if n, ok := cx["total_tokens"].(float64); ok {
			f.ContextTokens = int(n)
		}
		baseSearch, search = append(baseSearch, t1.Sub(t0)), append(search, t2.Sub(t1))
		baseNext, next = append(baseNext, t3.Sub(t2)), append(next, t4.Sub(t3))
	}
	f.SearchP50us, f.SearchP99us = micros(percentile(search, 50)), micros(percentile(search, 99))
	f.BaseSearchP50us, f.BaseSearchP99us = micros(percentile(baseSearch, 50)), micros(percentile(baseSearch, 99))
	f.ContextP50us, f.ContextP99us = micros(percentile(next, 50)), micros(percentile(next, 99))
	f.BaseContextP50, f.BaseContextP99 = micros(percentile(baseNext, 50)), micros(percentile(baseNext, 99))
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(f)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%d turns, %d calls each, embedder %s\tp50 µs\tp99 µs\tp50 / runtime's\n", f.Turns, f.Calls, f.Embedder)
	fmt.Fprintf(tw, "search_memory (k %d) over stdio\t%.0f\t%.0f\t%.2f\n", *k, f.SearchP50us, f.SearchP99us, f.SearchP50us/f.BaseSearchP50us)
	fmt.Fprintf(tw, "  Runtime.Search\t%.0f\t%.0f\t\n", f.BaseSearchP50us, f.BaseSearchP99us)
	fmt.Fprintf(tw, "get_context over stdio (%d tokens)\t%.0f\t%.0f\t%.2f\n", f.ContextTokens, f.ContextP50us, f.ContextP99us, f.ContextP50us/f.BaseContextP50)
	fmt.Fprintf(tw, "  Runtime.DebugNextContext\t%.0f\t%.0f\t\n", f.BaseContextP50, f.BaseContextP99)
	return tw.Flush()
}
