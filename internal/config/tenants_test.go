package config

import (
	"reflect"
	"strings"
	"testing"
)

// server.tenants is read from the file (a list of name and tokens_env)
// and from CTX_SERVER_TENANTS ("name=ENV,…"), and defaults to none.
func TestLoadTenants(t *testing.T) {
	want := []TenantConfig{{Name: "acme", TokensEnv: "CTX_ACME_TOKENS"}, {Name: "globex-2", TokensEnv: "CTX_GLOBEX_TOKENS"}}
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       []TenantConfig
	}{
		{"none", "", nil, []TenantConfig{}},
		{"file", "server:\n  tenants:\n    - {name: acme, tokens_env: CTX_ACME_TOKENS}\n    - name: globex-2\n      tokens_env: CTX_GLOBEX_TOKENS\n", nil, want},
		{"env", "", map[string]string{"CTX_SERVER_TENANTS": " acme=CTX_ACME_TOKENS, globex-2=CTX_GLOBEX_TOKENS ,"}, want},
		{"env over file", "server:\n  tenants: [{name: other, tokens_env: X}]\n", map[string]string{"CTX_SERVER_TENANTS": "acme=CTX_ACME_TOKENS,globex-2=CTX_GLOBEX_TOKENS"}, want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			t.Chdir(t.TempDir())
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			path := ""
			if tc.file != "" {
				path = writeFile(t, tc.file)
			}
			c, err := Load(path)
			if err != nil {
				t.Fatalf("Load = %v", err)
			}
			if !reflect.DeepEqual(c.Server.Tenants, tc.want) {
				t.Errorf("server.tenants = %+v, want %+v", c.Server.Tenants, tc.want)
			}
		})
	}
}

// Bad tenants are refused, each problem naming its key and what it wants.
func TestTenantsRejected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tenants []TenantConfig
		want    []string
	}{
		{"upper case", []TenantConfig{{Name: "Acme", TokensEnv: "A"}}, []string{`server.tenants[0].name: "Acme": want 1 to 64 bytes, a lower-case letter`}},
		{"empty", []TenantConfig{{Name: "", TokensEnv: "A"}}, []string{`server.tenants[0].name: "": want 1 to 64 bytes`}},
		{"too long", []TenantConfig{{Name: strings.Repeat("a", 65), TokensEnv: "A"}}, []string{`server.tenants[0].name: "aaaa`, "want 1 to 64 bytes"}},
		{"digit first", []TenantConfig{{Name: "1acme", TokensEnv: "A"}}, []string{`server.tenants[0].name: "1acme"`}},
		{"default", []TenantConfig{{Name: "default", TokensEnv: "A"}}, []string{`server.tenants[0].name: "default" is the tenant of server.tokens_env's tokens`}},
		{"twice", []TenantConfig{{Name: "acme", TokensEnv: "A"}, {Name: "acme", TokensEnv: "B"}}, []string{`server.tenants[1].name: "acme" is server.tenants[0]'s too`}},
		{"no tokens_env", []TenantConfig{{Name: "acme"}}, []string{`server.tenants[0].tokens_env: must name the environment variable`}},
		{"shared tokens_env", []TenantConfig{{Name: "acme", TokensEnv: "A"}, {Name: "beta", TokensEnv: "A"}},
			[]string{`server.tenants[1].tokens_env: "A" is server.tenants[0].tokens_env's too`}},
		{"the default's tokens_env", []TenantConfig{{Name: "acme", TokensEnv: "CTX_SERVER_TOKENS"}},
			[]string{`server.tenants[0].tokens_env: "CTX_SERVER_TOKENS" is server.tokens_env's too`}},
	} {
		c := Default()
		c.Server.Tenants = tc.tenants
		err := c.Validate()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %v, want %q", tc.name, err, w)
			}
		}
	}
	c := Default()
	c.Server.Tenants = []TenantConfig{{Name: "acme", TokensEnv: "CTX_ACME_TOKENS"}, {Name: "b_2-x", TokensEnv: "CTX_B_TOKENS"}}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(good tenants) = %v", err)
	}
	// A bad CTX_SERVER_TENANTS names the key.
	clearEnv(t)
	t.Chdir(t.TempDir())
	t.Setenv("CTX_SERVER_TENANTS", "acme")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "server.tenants") || !strings.Contains(err.Error(), "name=ENV_VAR") {
		t.Errorf("Load with CTX_SERVER_TENANTS=acme = %v, want an error naming server.tenants and the form", err)
	}
}
