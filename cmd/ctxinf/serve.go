package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/contextinfinity/ctxinf/internal/server"
)

// serve is `ctxinf serve [--addr A]`: the HTTP API over the runtime on
// the data directory, until SIGINT or SIGTERM, then a graceful shutdown.
func serve(e *env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	addr := fs.String("addr", e.cfg.Server.Addr, "HTTP address (server.addr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := e.cfg.Server
	var tokens []string
	if c.TokensEnv != "" {
		for _, t := range strings.Split(os.Getenv(c.TokensEnv), ",") {
			if t = strings.TrimSpace(t); t != "" {
				tokens = append(tokens, t)
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := runtimeConfig(e)
	if err != nil {
		return err
	}
	metrics := server.NewMetrics()
	metrics.Hook(&cfg)
	rt, err := openRuntimeWith(ctx, e, cfg)
	if err != nil {
		return err
	}
	defer rt.Close()
	metrics.Runtime(rt.Runtime)
	s := server.New(rt.Runtime, server.Options{Addr: *addr, Tokens: tokens, MaxBodyBytes: c.MaxBodyBytes,
		MaxInFlight: c.MaxInFlight, ReadHeaderTimeout: c.ReadHeaderTimeout, IdleTimeout: c.IdleTimeout,
		Log: e.log, Metrics: metrics})
	l, err := s.Listen()
	if err != nil {
		return err
	}
	e.log.Info().Str("addr", l.Addr().String()).Bool("auth", len(tokens) > 0).Str("data_dir", e.cfg.DataDir).Msg("serving")
	fmt.Fprintf(e.stdout, "ctxinf serve: http://%s (GET /openapi.json), data in %s\n", l.Addr(), e.cfg.DataDir)
	err = s.Serve(ctx, l, c.Drain)
	e.log.Info().Msg("stopped")
	return err
}
