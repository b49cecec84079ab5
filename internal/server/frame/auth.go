package frame

import (
	"errors"
	"fmt"
	"net"

	"github.com/contextinfinity/ctxinf/internal/auth"
)

// ErrPublicBind is returned by ListenAndServe for an address that is not
// loopback when the server has no Authenticate function: without one,
// anyone who reaches the port reads and writes the store.
var ErrPublicBind = errors.New("frame: refusing to listen beyond loopback without authentication")

// Principal is who a connection authenticated as: its tenant, and a
// name for logs that never shows the token.
type Principal = auth.Principal

// TokenAuth returns an Authenticate function (Options.Authenticate) that
// accepts exactly the given tokens, all of persistence.DefaultTenant, or
// nil when there are none (no authentication). TableAuth does the same
// for a table of several tenants' tokens; see auth.Table for how they
// are compared. The principal's name is the token's position in tokens
// ("token 1", "token 2", ...), for logs: never the token itself.
func TokenAuth(toks []string) func(token string) (Principal, bool) {
	t, _ := auth.New(toks, nil)
	return TableAuth(t)
}

// TableAuth returns an Authenticate function that accepts the tokens of
// t, each as its tenant's principal, or nil when t has none.
func TableAuth(t *auth.Table) func(token string) (Principal, bool) {
	if t.Len() == 0 {
		return nil
	}
	return t.Lookup
}

// checkBind refuses an address beyond loopback (":7070" and "0.0.0.0:7070"
// included) when auth is false; "localhost" counts as loopback.
func checkBind(addr string, auth bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("frame: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); !auth && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%w: %s", ErrPublicBind, addr)
	}
	return nil
}
