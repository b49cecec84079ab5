package auth_test

import (
	"errors"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/auth"
	"github.com/contextinfinity/ctxinf/persistence"
)

// TestTable: each token is its tenant's, named by its position among
// the tenant's; a token of two tenants and a bad name are refused.
func TestTable(t *testing.T) {
	tt, err := auth.New([]string{"d1", "", "d2"}, []auth.Tenant{{Name: "acme", Tokens: []string{"a1"}}, {Name: "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	if tt.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tt.Len())
	}
	for tok, want := range map[string]auth.Principal{
		"d1": {Tenant: persistence.DefaultTenant, Name: "token 1"},
		"d2": {Tenant: persistence.DefaultTenant, Name: "token 2"},
		"a1": {Tenant: "acme", Name: "acme token 1"},
	} {
		if p, ok := tt.Lookup(tok); !ok || p != want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", tok, p, ok, want)
		}
	}
	for _, tok := range []string{"", "d", "a1 ", "D1"} {
		if p, ok := tt.Lookup(tok); ok {
			t.Errorf("Lookup(%q) = %+v, want none", tok, p)
		}
	}
	var none *auth.Table
	if none.Len() != 0 {
		t.Error("a nil table has tokens")
	}
	if _, err := auth.New([]string{"x"}, []auth.Tenant{{Name: "acme", Tokens: []string{"x"}}}); !errors.Is(err, auth.ErrTenants) {
		t.Errorf("a token of two tenants: %v, want ErrTenants", err)
	}
	for _, name := range []string{"default", "Acme", "", "1a"} {
		if _, err := auth.New(nil, []auth.Tenant{{Name: name}}); !errors.Is(err, auth.ErrTenants) {
			t.Errorf("tenant %q: %v, want ErrTenants", name, err)
		}
	}
}
