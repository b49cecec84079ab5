package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/messages"
)

// retrievalFigures are the figures of `ctxinf bench retrieval --json`.
type retrievalFigures struct {
	Embedder        string  `json:"embedder"`
	IngestTurnsPerS float64 `json:"ingest_turns_per_s"`
	FlushP50us      float64 `json:"flush_p50_us"`
	FlushP99us      float64 `json:"flush_p99_us"`
	Chunks          int     `json:"chunks"`
	QueryP50us      float64 `json:"query_p50_us"`
	QueryP95us      float64 `json:"query_p95_us"`
	QueryP99us      float64 `json:"query_p99_us"`
	// Context* time the same questions' contexts as a turn assembles
	// them (Runtime.DebugNextContext: the search, the neighbours of its
	// hits, packing within the budget, and the rest of the context).
	ContextP50us     float64 `json:"context_p50_us"`
	ContextP95us     float64 `json:"context_p95_us"`
	IngestTurns      int     `json:"-"`
	FlushTurns       int     `json:"-"`
	QueriesMeasured  int     `json:"-"`
	ConversationSize int     `json:"-"`
}

// Retrieval measures retrieval through the runtime, on synthetic
// English-like turns (a few hundred common words, Zipf-distributed, and
// rare names and numbers): ingest (turns imported in batches of --batch,
// durable, until all are folded, indexed and searchable), flush (the
// time from importing --flush-turns turns until they are searchable),
// and query latency (Runtime.Search, and the next turn's context with
// its retrieval, Runtime.DebugNextContext) once one conversation holds
// --turns turns.
func Retrieval(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("retrieval", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	turns := fs.Int("turns", 100_000, "turns in the conversation queried (one chunk each)")
	ingest := fs.Int("ingest", 5000, "turns of the ingest measurement")
	batch := fs.Int("batch", 64, "turns per import (as eval serve)")
	flushes := fs.Int("flushes", 50, "flush measurements")
	flushTurns := fs.Int("flush-turns", 16, "turns imported before each flush")
	queries := fs.Int("queries", 300, "queries measured")
	dir := fs.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the query phase to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *turns < *ingest || *ingest < *batch || *batch < 1 || *batch > actors.MaxImport || *flushes < 1 || *flushTurns < 1 || *queries < 1 {
		return errors.New("bench retrieval: want 1 <= --batch <= --ingest <= --turns, --batch <= 1000, and positive counts")
	}
	path, done, err := cli.WorkDir(*dir, "ctxinf-bench-retrieval-")
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
	f := retrievalFigures{Embedder: cfg.Embedder.Name(), IngestTurns: *ingest, FlushTurns: *flushTurns,
		QueriesMeasured: *queries, ConversationSize: *turns}
	gen := newTurnText(1)
	importN := func(b messages.BranchID, n int) error {
		for n > 0 {
			k := min(n, *batch)
			xs := make([]actors.Exchange, k)
			for i := range xs {
				xs[i] = actors.Exchange{User: messages.NewMessage(messages.RoleUser, messages.Text{Text: gen.turn()}),
					Reply: messages.NewMessage(messages.RoleAssistant)}
			}
			if _, err := rt.Import(ctx, b, xs); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
	settle := func(b messages.BranchID) error {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		return rt.Settle(sctx, b)
	}

	// Ingest: a fresh conversation, until everything is searchable.
	_, b, err := rt.CreateSession(ctx, "bench-retrieval")
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := importN(b.ID, *ingest); err != nil {
		return err
	}
	if err := settle(b.ID); err != nil {
		return err
	}
	f.IngestTurnsPerS = float64(*ingest) / time.Since(t0).Seconds()

	// Flush: a few turns, then until they are searchable.
	var fl []time.Duration
	for range *flushes {
		t := time.Now()
		if err := importN(b.ID, *flushTurns); err != nil {
			return err
		}
		if err := settle(b.ID); err != nil {
			return err
		}
		fl = append(fl, time.Since(t))
	}
	f.FlushP50us, f.FlushP99us = micros(percentile(fl, 50)), micros(percentile(fl, 99))

	// Query: the conversation grown to --turns.
	have := *ingest + *flushes**flushTurns
	for have < *turns {
		n := min(*turns-have, 10_000)
		if err := importN(b.ID, n); err != nil {
			return err
		}
		if err := settle(b.ID); err != nil {
			return err
		}
		have += n
		e.Log.Warn().Int("turns", have).Msg("conversation")
	}
	if _, err := rt.Search(ctx, b.ID, gen.question(), nil); err != nil { // loads the index
		return err
	}
	if *cpuProfile != "" {
		fh, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(fh); err != nil {
			return err
		}
		defer fh.Close()
		defer pprof.StopCPUProfile()
	}
	var ql []time.Duration
	for range *queries {
		q := gen.question()
		t := time.Now()
		if _, err := rt.Search(ctx, b.ID, q, nil); err != nil {
			return err
		}
		ql = append(ql, time.Since(t))
	}
	f.QueryP50us, f.QueryP95us, f.QueryP99us = micros(percentile(ql, 50)), micros(percentile(ql, 95)), micros(percentile(ql, 99))
	var cl []time.Duration
	for range *queries {
		q := gen.question()
		t := time.Now()
		if _, err := rt.DebugNextContext(ctx, b.ID, q); err != nil {
			return err
		}
		cl = append(cl, time.Since(t))
	}
	f.ContextP50us, f.ContextP95us = micros(percentile(cl, 50)), micros(percentile(cl, 95))
	f.Chunks = have
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(f)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "embedder\t%s\t\n", f.Embedder)
	fmt.Fprintf(tw, "ingest_turns_per_s\t%.0f\t>= 1000 (%d turns, imported %d at a time, until searchable)\n", f.IngestTurnsPerS, *ingest, *batch)
	fmt.Fprintf(tw, "flush_p50_us\t%.0f\t(%d turns, then searchable; %d runs)\n", f.FlushP50us, *flushTurns, *flushes)
	fmt.Fprintf(tw, "flush_p99_us\t%.0f\t<= 200000\n", f.FlushP99us)
	fmt.Fprintf(tw, "query_p50_us\t%.0f\t(%d turns in the conversation, %d queries)\n", f.QueryP50us, have, *queries)
	fmt.Fprintf(tw, "query_p95_us\t%.0f\t<= 20000\n", f.QueryP95us)
	fmt.Fprintf(tw, "query_p99_us\t%.0f\t\n", f.QueryP99us)
	fmt.Fprintf(tw, "context_p50_us\t%.0f\t(the next turn's context: search, neighbours, assembly)\n", f.ContextP50us)
	fmt.Fprintf(tw, "context_p95_us\t%.0f\t\n", f.ContextP95us)
	return tw.Flush()
}

// turnText makes synthetic conversational text: common English words
// drawn with a Zipf distribution, names, places and numbers.
type turnText struct {
	r    *rand.Rand
	zipf *rand.Zipf
}

var chatWords = strings.Fields(`the I you we it to and a of in that is was for on with my this have
be at but so just like what about they do not are your can all me it's get know if think
really one time out when there going up would been from had yeah more good well how some
now people day go back week last work new make want see because right got too also still
thing things home love great trip family friends weekend plan plans looking forward feel
felt happy excited busy tired kids dog cat garden house car job team project meeting boss
school class teacher book books reading read music song concert guitar piano painting art
photo picture camping hiking beach mountains lake park city country travel flight hotel
restaurant dinner lunch breakfast coffee cooking recipe cake birthday party wedding gift
doctor health running yoga gym race marathon soccer game games movie movies show series
news money budget rent sister brother mom dad parents wife husband friend neighbour
support group community volunteer charity event festival holiday summer winter spring
autumn morning evening night yesterday tomorrow today month year years ago soon later
started finished learned learning trying tried decided decision moved moving visited
visit remember remembered told said asked talked called wrote bought sold found lost
won gave took made built fixed painted cooked baked planted adopted`)

var benchNames = strings.Fields(`Caroline Melanie Jon Gina Maria John Priya Tomás Aiko Olu Sven Lena
Paris Lisbon Oslo Kyoto Denver Nairobi Austin Boston Seattle Toronto`)

func newTurnText(seed uint64) *turnText {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &turnText{r: r, zipf: rand.NewZipf(r, 1.1, 2, uint64(len(chatWords)-1))}
}

func (g *turnText) words(n int) []string {
	out := make([]string, 0, n+2)
	for range n {
		out = append(out, chatWords[g.zipf.Uint64()])
	}
	out = append(out, benchNames[g.r.IntN(len(benchNames))])
	if g.r.IntN(3) == 0 {
		out = append(out, fmt.Sprint(g.r.IntN(100_000)))
	}
	g.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (g *turnText) turn() string {
	return benchNames[g.r.IntN(len(benchNames))] + ": " + strings.Join(g.words(12+g.r.IntN(20)), " ") + "."
}

func (g *turnText) question() string {
	return "When did " + benchNames[g.r.IntN(len(benchNames))] + " " + strings.Join(g.words(4+g.r.IntN(4)), " ") + "?"
}
