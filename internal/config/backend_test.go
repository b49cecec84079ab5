package config

import (
	"strings"
	"testing"
)

// store.backend picks badger (the default) or postgres; the URL comes
// from the environment variable store.postgres_url_env names, never from
// the file; postgres refuses store.encryption and a payload limit over
// one BYTEA value.
func TestStoreBackend(t *testing.T) {
	load := func(t *testing.T, file string, env map[string]string) (Config, error) {
		t.Helper()
		clearEnv(t)
		t.Chdir(t.TempDir())
		for k, v := range env {
			t.Setenv(k, v)
		}
		return Load(writeFile(t, file))
	}
	const url = "postgres://u:secret@db:5432/ctx"

	c, err := load(t, "", nil)
	if err != nil || c.Store.Backend != BackendBadger || c.Store.PostgresURLEnv != "CTX_STORE_POSTGRES_URL" || c.Store.PostgresMaxConns != 16 {
		t.Fatalf("defaults: %+v, %v", c.Store, err)
	}
	if u, err := c.PostgresURL(); u != "" || err != nil {
		t.Fatalf("PostgresURL on badger = %q, %v", u, err)
	}

	c, err = load(t, "", map[string]string{"CTX_STORE_BACKEND": "postgres", "CTX_STORE_POSTGRES_URL": url,
		"CTX_STORE_POSTGRES_MAX_CONNS": "4"})
	if err != nil || c.Store.Backend != BackendPostgres || c.Store.PostgresMaxConns != 4 {
		t.Fatalf("from the environment: %+v, %v", c.Store, err)
	}
	if u, err := c.PostgresURL(); u != url || err != nil {
		t.Fatalf("PostgresURL = %q, %v", u, err)
	}

	c, err = load(t, "store:\n  backend: postgres\n  postgres_url_env: PGURL\n", map[string]string{"PGURL": url})
	if u, uerr := c.PostgresURL(); err != nil || u != url || uerr != nil {
		t.Fatalf("from PGURL: %q, %v, %v", u, err, uerr)
	}
	c, err = load(t, "store:\n  backend: postgres\n", nil)
	if _, uerr := c.PostgresURL(); err != nil || uerr == nil ||
		!strings.Contains(uerr.Error(), "environment variable CTX_STORE_POSTGRES_URL (store.postgres_url_env) is not set") {
		t.Fatalf("no URL: %v, %v", err, uerr)
	}

	for _, tc := range []struct{ file, want string }{
		{"store:\n  backend: sqlite\n", `store.backend: "sqlite" is not one of badger|postgres`},
		{"store:\n  postgres_url: " + url + "\n", "store.postgres_url: the PostgreSQL URL (it may hold a password) is never read"},
		{"store:\n  postgres_url_env: " + url + "\n", "store.postgres_url_env: names the environment variable that holds the URL, and this looks like a URL"},
		{"store:\n  postgres_url_env: 9X\n", `store.postgres_url_env: "9X" is not an environment variable name`},
		{"store:\n  postgres_max_conns: 1\n", "store.postgres_max_conns: 1 is out of range [2, 1000]"},
		{"store:\n  backend: postgres\n  encryption: true\n", "store.encryption: true is not supported with store.backend: postgres"},
		{"store:\n  backend: postgres\n  max_payload_bytes: 1073741824\n  value_log_file_bytes: 2147483648\n",
			"store.max_payload_bytes: 1073741824 is over 1073676288, the most store.backend: postgres holds"},
	} {
		_, err := load(t, tc.file, map[string]string{"CTX_STORE_KEY": strings.Repeat("ab", 32)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.file, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the URL's password: %v", tc.file, err)
		}
	}
	// Badger takes the payload limit postgres refuses.
	if _, err := load(t, "store:\n  max_payload_bytes: 1073741824\n  value_log_file_bytes: 2147483648\n", nil); err != nil {
		t.Fatalf("badger with a 1 GiB payload limit: %v", err)
	}
}
