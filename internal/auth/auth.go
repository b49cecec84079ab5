// Package auth is the server's table of bearer tokens and the tenants
// they belong to, shared by the HTTP API (internal/server) and the frame
// protocol (internal/server/frame): one token means one tenant on both.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/contextinfinity/ctxinf/persistence"
)

// Tenant is a tenant of the server: its name and its bearer tokens.
type Tenant struct {
	Name   string
	Tokens []string
}

// Principal is who a token authenticates: its tenant, and a name for
// logs that never shows the token ("token 2", "acme token 1": the
// token's position among its tenant's).
type Principal struct {
	Tenant string
	Name   string
}

// TenantNamePattern is what a tenant's name looks like: a lower-case
// letter, then lower-case letters, digits, '-' and '_', at most
// persistence.MaxTenantName bytes in all.
var TenantNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// ErrTenants is returned for tenants that are not usable: a bad name, a
// name twice, or a token of two tenants.
var ErrTenants = errors.New("server: tenants")

// CheckTenantName refuses a name that does not match TenantNamePattern
// or is longer than persistence.MaxTenantName bytes.
func CheckTenantName(name string) error {
	if len(name) == 0 || len(name) > persistence.MaxTenantName || !TenantNamePattern.MatchString(name) {
		return fmt.Errorf("%w: name %q: want 1 to %d bytes matching %s", ErrTenants, name, persistence.MaxTenantName, TenantNamePattern)
	}
	return nil
}

// Table maps tokens to their principals. Lookups compare the token's
// SHA-256 with every token's, in constant time, so that neither a
// token's bytes nor its length nor its position show in the time a
// lookup takes. The zero Table (and nil) holds no token.
type Table struct {
	sums       [][sha256.Size]byte
	principals []Principal
}

// New returns the table of defaultTokens (the tenant
// persistence.DefaultTenant's) and each tenant's, and the problems of
// the tenants (ErrTenants); the table holds the usable ones even then.
// Empty tokens are skipped.
func New(defaultTokens []string, tenants []Tenant) (*Table, error) {
	t := &Table{}
	var errs []error
	index := map[[sha256.Size]byte]string{}
	add := func(tenant string, tokens []string) {
		n := 0
		for _, tok := range tokens {
			if tok == "" {
				continue
			}
			h := sha256.Sum256([]byte(tok))
			if prev, ok := index[h]; ok {
				if prev != tenant {
					errs = append(errs, fmt.Errorf("%w: a token of tenant %q is also one of tenant %q's", ErrTenants, tenant, prev))
				}
				continue
			}
			index[h] = tenant
			n++
			name := "token " + strconv.Itoa(n)
			if tenant != persistence.DefaultTenant {
				name = tenant + " " + name
			}
			t.sums = append(t.sums, h)
			t.principals = append(t.principals, Principal{Tenant: tenant, Name: name})
		}
	}
	add(persistence.DefaultTenant, defaultTokens)
	seen := map[string]bool{persistence.DefaultTenant: true}
	for _, tn := range tenants {
		if err := CheckTenantName(tn.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[tn.Name] {
			errs = append(errs, fmt.Errorf("%w: name %q: twice (%q is the tenant of the server's own tokens)", ErrTenants, tn.Name, persistence.DefaultTenant))
			continue
		}
		seen[tn.Name] = true
		add(tn.Name, tn.Tokens)
	}
	return t, errors.Join(errs...)
}

// Len is the number of tokens in the table: 0 means no authentication.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.sums)
}

// Lookup returns the principal of token, and whether the table has it.
func (t *Table) Lookup(token string) (Principal, bool) {
	if t == nil || token == "" {
		return Principal{}, false
	}
	got := sha256.Sum256([]byte(token))
	match := -1
	for i := range t.sums {
		if subtle.ConstantTimeCompare(got[:], t.sums[i][:]) == 1 && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return Principal{}, false
	}
	return t.principals[match], true
}
