package config

import (
	"fmt"
	"os"
	"strings"
)

// pgMaxPayloadBytes is the largest store.max_payload_bytes the postgres
// backend takes (persistence.pgMaxPayloadBytes: a blob is one BYTEA
// value, at most 1 GiB, less 64 KiB for its header).
const pgMaxPayloadBytes = 1*GiB - 64*KiB

func (c StoreConfig) validateBackend(p *problems, prefix string) {
	p.oneOf(prefix+"backend", c.Backend, BackendBadger, BackendPostgres)
	if strings.Contains(c.PostgresURLEnv, "://") {
		p.addf("%spostgres_url_env: names the environment variable that holds the URL, and this looks like a URL: "+
			"the URL (it may hold a password) is never read from the configuration; put it in that variable",
			prefix)
	} else if !envName.MatchString(c.PostgresURLEnv) {
		p.addf("%spostgres_url_env: %q is not an environment variable name (letters, digits and '_', not starting with a digit)",
			prefix, c.PostgresURLEnv)
	}
	p.inRange(prefix+"postgres_max_conns", int64(c.PostgresMaxConns), 2, 1000)
	if c.Backend != BackendPostgres {
		return
	}
	if c.Encryption {
		p.addf("%sencryption: true is not supported with %sbackend: postgres: the PostgreSQL store has no encryption "+
			"at rest of its own; encrypt the database's storage (an encrypted volume, or the server's transparent data "+
			"encryption) and set %sencryption: false", prefix, prefix, prefix)
	}
	if c.MaxPayloadBytes > pgMaxPayloadBytes && c.MaxPayloadBytes <= 1*GiB {
		p.addf("%smax_payload_bytes: %d is over %d, the most %sbackend: postgres holds in one value (1 GiB less 64 KiB)",
			prefix, c.MaxPayloadBytes, int64(pgMaxPayloadBytes), prefix)
	}
}

// PostgresURL returns the URL of the PostgreSQL database of store.backend
// postgres, read from the environment variable store.postgres_url_env
// names; "" for the badger backend. A missing variable is an error naming
// it; the URL itself is never in an error.
func (c Config) PostgresURL() (string, error) {
	s := c.Store
	if s.Backend != BackendPostgres {
		return "", nil
	}
	v, ok := os.LookupEnv(s.PostgresURLEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("store.backend is postgres but the environment variable %s (store.postgres_url_env) is not set: "+
			"set it to the database's URL (postgres://user:password@host:port/db)", s.PostgresURLEnv)
	}
	return strings.TrimSpace(v), nil
}
