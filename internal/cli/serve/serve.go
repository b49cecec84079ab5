package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/cluster"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/mcpserver"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// serveFrames serves the binary frame protocol over the runtime's store
// on addr. With tokens (the HTTP API's: server.tokens_env's and each
// tenant's, one table for both), every connection must present one of
// them in HELLO before anything else, and is its token's tenant's; with
// tenants, a connection sees its tenant's branches only. Without
// tokens, addr must be loopback, as server.addr must.
func serveFrames(ctx context.Context, addr string, db persistence.Database, maxPayload int64, tokens []string, tenants []server.Tenant, e *cli.Env) (*frame.Server, error) {
	tokensEnv := e.Config.Server.TokensEnv
	check := func(key, env string, toks []string) error {
		for i, t := range toks {
			if len(t) > frame.MaxTokenLen {
				return fmt.Errorf("%s (%s): token %d is %d bytes, over the frame protocol's limit of %d (or set server.frame_addr to \"\")",
					key, env, i+1, len(t), frame.MaxTokenLen)
			}
		}
		return nil
	}
	if err := check("server.tokens_env", tokensEnv, tokens); err != nil {
		return nil, err
	}
	for i, t := range tenants {
		if err := check(fmt.Sprintf("server.tenants[%d].tokens_env", i), e.Config.Server.Tenants[i].TokensEnv, t.Tokens); err != nil {
			return nil, err
		}
	}
	table, err := server.TokenTable(server.Options{Tokens: tokens, Tenants: tenants})
	if err != nil {
		return nil, err // server.Listen refused them already
	}
	opts := frame.Options{MaxPayload: maxPayload, Log: e.Log, Authenticate: frame.TableAuth(table),
		// Its connections share the HTTP API's limits: max_in_flight of
		// them at once, closed after idle_timeout without a request.
		MaxConns: e.Config.Server.MaxInFlight, IdleTimeout: e.Config.Server.IdleTimeout}
	if len(tenants) > 0 {
		// Without tenants every branch is the default tenant's (but
		// those of tenants removed from the configuration): unscoped,
		// as before tenants.
		opts.Tenancy = db
	}
	fs, err := frame.ListenAndServe(ctx, addr, runtimeGuard{Store: db, db: db}, opts)
	if errors.Is(err, frame.ErrPublicBind) {
		set := "set them in " + tokensEnv + " (server.tokens_env)"
		if tokensEnv == "" {
			set = "set server.tokens_env to the environment variable holding them"
		}
		return nil, fmt.Errorf("server.frame_addr %q: refusing to listen beyond loopback without tokens: %s, or use a loopback address", addr, set)
	}
	if err != nil {
		return nil, fmt.Errorf("server.frame_addr %q: %w", addr, err)
	}
	return fs, nil
}

// runtimeGuard is the store as the frame protocol sees it: the branches
// the runtime owns (those with a branch row) are read-only, so that no
// append moves their heads behind their actors' backs.
type runtimeGuard struct {
	persistence.Store
	db persistence.Database
}

func (g runtimeGuard) Append(ctx context.Context, branch messages.BranchID, req persistence.AppendRequest) (persistence.Node, error) {
	if _, err := g.db.BranchRow(ctx, branch); err == nil {
		return persistence.Node{}, fmt.Errorf("%w: branch %s belongs to the runtime: append to it through the HTTP API",
			persistence.ErrInvalidArgument, branch)
	}
	return g.Store.Append(ctx, branch, req)
}

// mcpSessionIdle is how long an MCP session at /mcp lives without a
// request.
const mcpSessionIdle = 30 * time.Minute

// Run is `ctxinf serve [--addr A]`: the HTTP API over the runtime on
// the data directory, until SIGINT or SIGTERM, then a graceful shutdown.
func Run(e *cli.Env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	addr := fs.String("addr", e.Config.Server.Addr, "HTTP address (server.addr)")
	joinCluster := fs.Bool("cluster", e.Config.Cluster.Enabled, "join the cluster of cluster.peers (cluster.enabled; docs/CLUSTER.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := e.Config.Server
	tokens, tenants := envTokens(c.TokensEnv), serverTenants(e, c)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := e.RuntimeConfig()
	if err != nil {
		return err
	}
	cfg.Retention.Interval = e.Config.Retention.Interval // the retention job runs here
	metrics := server.NewMetrics()
	metrics.Hook(&cfg)
	var member *cluster.Member
	if *joinCluster {
		if member, err = joinMember(ctx, e, *addr); err != nil {
			return err
		}
		cfg.Placement = member
	}
	rt, err := e.OpenRuntimeWith(ctx, cfg)
	if err != nil {
		if member != nil {
			member.Leave()
		}
		return err
	}
	defer rt.Close()
	opts := serverOptions(c, *addr, tokens, tenants)
	opts.Log, opts.Metrics = e.Log, metrics
	if member != nil {
		member.Attach(rt.Runtime)
		defer member.Leave() // before the runtime closes: the others stop forwarding here first
		opts.Forward = member.Forward
		metrics.Cluster(member.Stats)
	}
	metrics.Runtime(rt.Runtime)
	s, err := server.New(rt.Runtime, opts)
	if err != nil {
		return err
	}
	var tenantOf func(string) (string, bool) // an MCP session is its tenant's
	if hasTokens(tokens, tenants) {
		table, err := server.TokenTable(opts)
		if err != nil {
			return err
		}
		tenantOf = func(tok string) (string, bool) { p, ok := table.Lookup(tok); return p.Tenant, ok }
	}
	s.Handle("/mcp", mcpserver.Handler(s, e.Version, mcpSessionIdle, tenantOf)) // behind the API's tokens and tenants
	l, err := s.Listen()
	if err != nil {
		return err
	}
	if c.FrameAddr != "" {
		fs, err := serveFrames(ctx, c.FrameAddr, rt.DB(), e.Config.Store.MaxPayloadBytes, tokens, tenants, e)
		if err != nil {
			l.Close()
			return err
		}
		defer fs.Close()
		fmt.Fprintf(e.Stdout, "ctxinf serve: frame protocol on %s\n", fs.Addr())
	}
	if remove, err := cli.WriteServerFile(e.Config.DataDir, "http://"+l.Addr().String()); err != nil {
		e.Log.Warn().Err(err).Msg("write " + cli.ServerFile + ": other commands on this data directory will need --server")
	} else {
		defer remove()
	}
	e.Log.Info().Str("addr", l.Addr().String()).Bool("auth", hasTokens(tokens, tenants)).Int("tenants", len(tenants)+1).
		Str("data_dir", e.Config.DataDir).Msg("serving")
	fmt.Fprintf(e.Stdout, "ctxinf serve: http://%s (GET /openapi.json), data in %s\n", l.Addr(), e.Config.DataDir)
	err = s.Serve(ctx, l, c.Drain)
	e.Log.Info().Msg("stopped")
	return err
}

// joinMember joins the cluster of e's cluster.* keys and waits (at most
// cluster.join_timeout) to see itself in it. addr is the HTTP address,
// advertised to the other members unless cluster.advertise_url says
// otherwise.
func joinMember(ctx context.Context, e *cli.Env, addr string) (*cluster.Member, error) {
	c := e.Config.Cluster
	if e.Config.Store.Backend != config.BackendPostgres {
		return nil, fmt.Errorf("serve --cluster: store.backend is %q: the members of a cluster share one PostgreSQL store "+
			"(store.backend: postgres, docs/CLUSTER.md)", e.Config.Store.Backend)
	}
	advertise := c.AdvertiseURL
	if advertise == "" {
		advertise = "http://" + addr
	}
	var mtls *cluster.MemberTLS
	if c.TLSCertFile != "" {
		var err error
		if mtls, err = cluster.LoadTLS(c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile); err != nil {
			return nil, err
		}
	}
	m, err := cluster.Join(cluster.Config{Name: c.Name, Host: c.Host, Port: c.Port, ManagePort: c.ManagePort, Peers: c.Peers,
		AdvertiseURL: advertise, Refresh: c.Refresh, TLS: mtls, Log: e.Log})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, c.JoinTimeout)
	defer cancel()
	if err := m.WaitJoined(wctx); err != nil {
		e.Log.Warn().Err(err).Msg("serving before this member joined; requests are answered 503 until it does")
	} else {
		e.Log.Info().Str("member", m.Address()).Int("members", m.Members()).Msg("joined the cluster")
	}
	return m, nil
}

// serverOptions are the HTTP server's options of the server section c,
// with the address addr (--addr) and the tokens its variables hold.
func serverOptions(c config.ServerConfig, addr string, tokens []string, tenants []server.Tenant) server.Options {
	opts := server.OptionsOf(c)
	opts.Addr, opts.Tokens, opts.Tenants = addr, tokens, tenants
	return opts
}
