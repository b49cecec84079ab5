package serve

import (
	"os"
	"strings"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/server"
)

// envTokens are the comma-separated tokens of the environment variable
// name ("" or unset: none).
func envTokens(name string) []string {
	var tokens []string
	if name == "" {
		return nil
	}
	for _, t := range strings.Split(os.Getenv(name), ",") {
		if t = strings.TrimSpace(t); t != "" {
			tokens = append(tokens, t)
		}
	}
	return tokens
}

// serverTenants are server.tenants with their tokens read from the
// environment; a tenant whose variable holds none is served (its
// sessions stay its own) but no request can be its, which the log says.
func serverTenants(e *cli.Env, c config.ServerConfig) []server.Tenant {
	var out []server.Tenant
	for _, t := range c.Tenants {
		tokens := envTokens(t.TokensEnv)
		if len(tokens) == 0 {
			e.Log.Warn().Str("tenant", t.Name).Str("tokens_env", t.TokensEnv).
				Msg("server.tenants: the tenant's variable holds no token: no request can be the tenant's")
		}
		out = append(out, server.Tenant{Name: t.Name, Tokens: tokens})
	}
	return out
}

// hasTokens reports whether the server authenticates: a token of the
// default tenant's or of any other's.
func hasTokens(tokens []string, tenants []server.Tenant) bool {
	for _, t := range tenants {
		if len(t.Tokens) > 0 {
			return true
		}
	}
	return len(tokens) > 0
}
