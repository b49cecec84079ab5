package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/auth"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Tenants. A token belongs to one tenant (Options.Tokens to
// persistence.DefaultTenant, each Options.Tenants' to its own); a session
// belongs to the tenant whose token created it (persistence.SessionRow's
// Tenant), and its branches, turns, pins, chunks and proxy conversations
// with it. A request sees its tenant's sessions only: another tenant's
// id is answered exactly as an id that does not exist (404), so that a
// tenant learns nothing of another's, not even that an id is taken.
//
// The check is made in one place per kind of id: ownSession for a
// session id, ownBranch for a branch id (every /v1/branches/{branch}
// route, through Server.branch, and the proxy's X-Ctx-Branch); a turn,
// a pin or a chunk is only ever looked up on a branch checked so. The
// lists (GET /v1/sessions, /v1/inspect) keep the tenant's sessions, and
// the proxy's conversation index is the tenant's (persistence.ProxyEntry).

// Tenant is a tenant of the server: its name and its bearer tokens.
type Tenant = auth.Tenant

// TenantNamePattern is what a tenant's name looks like: a lower-case
// letter, then lower-case letters, digits, '-' and '_', at most
// persistence.MaxTenantName bytes in all.
var TenantNamePattern = auth.TenantNamePattern

// ErrTenants is returned by Server.Listen for tenants that are not
// usable: a bad name, a name twice, or a token of two tenants.
var ErrTenants = auth.ErrTenants

// CheckTenantName refuses a name that does not match TenantNamePattern
// or is longer than persistence.MaxTenantName bytes.
func CheckTenantName(name string) error { return auth.CheckTenantName(name) }

// TokenTable returns the table of opts' tokens (the one the frame
// protocol shares), and the problems of its tenants (see ErrTenants).
func TokenTable(opts Options) (*auth.Table, error) {
	return auth.New(opts.Tokens, opts.Tenants)
}

// tenantOfRequest returns the tenant of r's token (a bearer token, or
// x-api-key as the Anthropic SDKs send their key), and whether it has
// one of the table's.
func tenantOfRequest(tt *auth.Table, r *http.Request) (string, bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
		if p, ok := tt.Lookup(tok); ok {
			return p.Tenant, true
		}
	}
	if key := r.Header.Get("X-Api-Key"); key != "" {
		p, ok := tt.Lookup(key)
		return p.Tenant, ok
	}
	return "", false
}

type tenantKey struct{}

// withTenant returns ctx carrying tenant, the tenant of its request.
func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// tenantOf is the tenant of ctx's request: its token's, set by
// ServeHTTP; persistence.DefaultTenant without authentication.
func tenantOf(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok {
		return t
	}
	return persistence.DefaultTenant
}

// owns reports whether ctx's tenant owns session s.
func owns(ctx context.Context, s persistence.SessionRow) bool {
	return s.TenantName() == tenantOf(ctx)
}

// ownSession returns session id if ctx's tenant owns it; another
// tenant's is not found, in the words of an id that does not exist.
func (s *Server) ownSession(ctx context.Context, id messages.SessionID) (persistence.SessionRow, error) {
	row, err := s.rt.DB().Session(ctx, id)
	switch {
	case errors.Is(err, persistence.ErrNotFound) || err == nil && !owns(ctx, row):
		return persistence.SessionRow{}, notFound("session %s", id)
	case err != nil:
		return persistence.SessionRow{}, err
	}
	return row, nil
}

// ownBranch returns branch id if ctx's tenant owns its session; another
// tenant's is not found, in the words of an id that does not exist.
func (s *Server) ownBranch(ctx context.Context, id messages.BranchID) (persistence.BranchRow, error) {
	row, err := s.rt.DB().BranchRow(ctx, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return row, notFound("branch %s", id)
	}
	if err != nil {
		return row, err
	}
	if _, err := s.ownSession(ctx, row.Session); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Code == api.CodeNotFound {
			return persistence.BranchRow{}, notFound("branch %s", id)
		}
		return persistence.BranchRow{}, err
	}
	return row, nil
}
