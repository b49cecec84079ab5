// Package mcp is `ctxinf mcp`: ctxinf as the memory of an MCP client
// (Claude Code, Claude Desktop, Cursor, an agent SDK) that starts it,
// over the stdio transport (internal/mcpserver).
package mcp

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/mcpserver"
	"github.com/contextinfinity/ctxinf/internal/server"
)

// Run is `ctxinf mcp [--server URL]`: the MCP server on stdin and
// stdout until the client closes stdin (or SIGINT, SIGTERM). Its tools
// run on the runtime of the data directory, embedded, through the HTTP
// API's handler in process; or, when a ctxinf serve owns the directory
// (or --server names one), on that server's API, with the token of
// server.tokens_env. The log goes to stderr: stdout is the protocol's.
func Run(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	serverURL := fs.String("server", "", "use the ctxinf serve at this URL (default: the data directory's, when one runs on it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var api *client.Client
	var err error
	if *serverURL == "" {
		rt, oerr := e.OpenRuntime(ctx)
		if err = oerr; err == nil {
			defer rt.Close()
			opts := server.OptionsOf(e.Config.Server)
			opts.Log = e.Log
			s, serr := server.New(rt.Runtime, opts)
			if serr != nil {
				return serr
			}
			api = mcpserver.InProcess(s, nil)
			e.Log.Info().Str("data_dir", e.Config.DataDir).Msg("mcp: serving stdio on the embedded runtime")
		}
	}
	if api == nil {
		if api, err = e.Remote(*serverURL, err); err != nil {
			return err
		}
		e.Log.Info().Str("server", api.URL()).Msg("mcp: serving stdio on the server's API")
	}
	s := mcpserver.New(mcpserver.Options{Version: e.Version, Client: func(http.Header) *client.Client { return api }})
	d := newDrain(e.Stdin, e.Stdout)
	err = s.MCP().Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(d), Writer: d})
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil // the client closed stdin, or a signal
	}
	return err
}
