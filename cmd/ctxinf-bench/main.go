// Command ctxinf-bench holds this project's own benchmark harnesses and
// its evaluation server, which do not ship in the product binary
// (cmd/ctxinf): the store's figures against the SRD's targets, the
// streaming path against a fake model API, context assembly, retrieval
// and import on generated conversations. Their flags and output are
// those of the ctxinf bench commands they were; docs/BENCHMARKS.md has
// the figures.
package main

import (
	"io"
	"os"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/cli/bench"
	"github.com/contextinfinity/ctxinf/internal/cli/eval"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `ctxinf-bench: ContextInfinity's own benchmark harnesses.

Usage:
  ctxinf-bench [--config FILE] <command> [flags]

Commands:
  eval serve [--data-dir D] [--batch N]
                 a retriever speaking ctxeval/1 on stdin/stdout (for
                 ../shared/eval/locomo-eval) through the product's paths:
                 conversations are sessions, utterances imported turns,
                 flush folds and indexes, query is the hybrid retrieval
  eval recall [--data FILE] [--curve KEY=V1,V2,...] [--out F] [--json]
                 the LoCoMo evaluation in one process: R@5/R@10 of the
                 search and context recall (is each evidence turn's text
                 in the context the next turn would get) with the
                 context's tokens, per category; --curve runs once per
                 value of a configuration key
  eval memtools [--data FILE] [--questions N] [--json]
                 the memory tools on the LoCoMo conversations: each
                 question asked of a scripted model without and with
                 search_memory (used when the evidence is not in the
                 context): answer rates, and per turn that searched the
                 extra steps, input tokens and latency
  context [--small N] [--large M] [--sample S] [--json]
                 context assembly latency at N and M turns of history;
                 working-set tokens per turn against the full history
  retrieval [--turns N] [--ingest M] [--json]
                 retrieval through the runtime: ingest turns/s until
                 searchable, flush latency, query latency with N turns
                 in one conversation
  import [--turns N,M,...] [--runs R] [--format F] [--json]
                 POST /v1/sessions/import over loopback of a generated
                 session of N turns (format 2 with its states, or 1):
                 import time, a turn sent at once after it, and the time
                 until every imported turn is indexed (medians of R runs)
  mcp [--turns N] [--calls C] [--k K] [--json]
                 search_memory and get_context over stdio (ctxinf mcp's
                 server on OS pipes, the Go SDK's client) on a branch of
                 N generated turns, each beside the runtime call it makes
                 (Runtime.Search, DebugNextContext), alternated: p50, p99
  stream [--branches N] [--turns T] [--deltas D] [--api A] [--json]
                 deltas/s from a fake model API on loopback through the
                 adapter, journal and branch to a subscriber; journal bytes
                 per displayed byte; latency added per delta
  store [--dir D] [--json] [--quick] [--encrypted]
                 measure the context store (durable appends, group commit,
                 reads, forks, depth ranges, dedup, bytes on disk);
                 --encrypted: encrypted at rest under a generated key
  version        print the version

The load tests a user runs on a deployment (bench turns, serve, cluster)
and chaos are ctxinf's.

Global flags:
  --config FILE  configuration file (default ./config.yaml if present);
                 CTX_* environment variables override it
`

// commands are the project's own harnesses, each with why it does not ship:
var commands = []cli.Command{
	{Name: "store", Run: bench.Store},              // the store's figures against the SRD's targets
	{Name: "stream", Run: bench.Stream},            // the streaming path, against a fake model API
	{Name: "context", Run: bench.Context},          // context assembly and its token savings on generated histories
	{Name: "retrieval", Run: bench.Retrieval},      // ingest and query latency on generated conversations
	{Name: "import", Run: bench.Import},            // import of generated sessions
	{Name: "mcp", Run: bench.MCP},                  // the MCP tools' latency over stdio on a long branch
	{Name: "eval serve", Run: eval.Serve},          // the retriever of the project's LoCoMo evaluation (ctxeval/1)
	{Name: "eval recall", Run: eval.Recall},        // what reaches the model: the LoCoMo evaluation of context recall
	{Name: "eval memtools", Run: eval.MemoryTools}, // what the memory tools add: answer rate and cost, with a scripted model
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Main("ctxinf-bench", version, usage, commands, args, stdin, stdout, stderr)
}
