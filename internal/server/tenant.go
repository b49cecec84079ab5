package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

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
type Tenant struct {
	Name   string
	Tokens []string
}

// TenantNamePattern is what a tenant's name looks like: a lower-case
// letter, then lower-case letters, digits, '-' and '_', at most
// persistence.MaxTenantName bytes in all.
var TenantNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// ErrTenants is returned by Server.Listen for tenants that are not
// usable: a bad name, a name twice, or a token of two tenants.
var ErrTenants = errors.New("server: tenants")

// CheckTenantName refuses a name that does not match TenantNamePattern
// or is longer than persistence.MaxTenantName bytes.
func CheckTenantName(name string) error {
	if len(name) == 0 || len(name) > persistence.MaxTenantName || !TenantNamePattern.MatchString(name) {
		return fmt.Errorf("%w: name %q: want 1 to %d bytes matching %s", ErrTenants, name, persistence.MaxTenantName, TenantNamePattern)
	}
	return nil
}

// tokenTable maps a token's SHA-256 to its tenant: a lookup's time
// tells nothing of the tokens (it depends on the hash, not on how much
// of a token matched).
type tokenTable map[[32]byte]string

// newTokenTable returns the table of opts' tokens, and the problems of
// its tenants (see ErrTenants).
func newTokenTable(opts Options) (tokenTable, error) {
	tt := tokenTable{}
	var errs []error
	add := func(tenant string, tokens []string) {
		for _, tok := range tokens {
			if tok == "" {
				continue
			}
			h := sha256.Sum256([]byte(tok))
			if prev, ok := tt[h]; ok && prev != tenant {
				errs = append(errs, fmt.Errorf("%w: a token of tenant %q is also one of tenant %q's", ErrTenants, tenant, prev))
				continue
			}
			tt[h] = tenant
		}
	}
	add(persistence.DefaultTenant, opts.Tokens)
	seen := map[string]bool{persistence.DefaultTenant: true}
	for _, t := range opts.Tenants {
		if err := CheckTenantName(t.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[t.Name] {
			errs = append(errs, fmt.Errorf("%w: name %q: twice (%q is the tenant of the server's own tokens)", ErrTenants, t.Name, persistence.DefaultTenant))
			continue
		}
		seen[t.Name] = true
		add(t.Name, t.Tokens)
	}
	return tt, errors.Join(errs...)
}

// tenant returns the tenant of r's token (a bearer token, or x-api-key
// as the Anthropic SDKs send their key), and whether it has one of the
// table's.
func (tt tokenTable) tenant(r *http.Request) (string, bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
		if t, ok := tt[sha256.Sum256([]byte(tok))]; ok {
			return t, true
		}
	}
	if key := r.Header.Get("X-Api-Key"); key != "" {
		t, ok := tt[sha256.Sum256([]byte(key))]
		return t, ok
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
		if errors.As(err, &ae) && ae.Code == CodeNotFound {
			return persistence.BranchRow{}, notFound("branch %s", id)
		}
		return persistence.BranchRow{}, err
	}
	return row, nil
}
