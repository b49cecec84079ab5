package frame

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// ErrPublicBind is returned by ListenAndServe for an address that is not
// loopback when the server has no Authenticate function: without one,
// anyone who reaches the port reads and writes the store.
var ErrPublicBind = errors.New("frame: refusing to listen beyond loopback without authentication")

// TokenAuth returns an Authenticate function (Options.Authenticate) that
// accepts exactly the given tokens, or nil when there are none (no
// authentication). Tokens are compared in constant time, through their
// SHA-256 digests so that neither a token's bytes nor its length show in
// the time a check takes, and every token is compared each time. The
// principal is the token's position in tokens ("token 1", "token 2",
// ...), for logs: never the token itself.
func TokenAuth(tokens []string) func(token string) (principal string, ok bool) {
	if len(tokens) == 0 {
		return nil
	}
	sums := make([][sha256.Size]byte, len(tokens))
	for i, t := range tokens {
		sums[i] = sha256.Sum256([]byte(t))
	}
	return func(token string) (string, bool) {
		if token == "" {
			return "", false
		}
		got := sha256.Sum256([]byte(token))
		match := -1
		for i := range sums {
			if subtle.ConstantTimeCompare(got[:], sums[i][:]) == 1 && match < 0 {
				match = i
			}
		}
		if match < 0 {
			return "", false
		}
		return "token " + strconv.Itoa(match+1), true
	}
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
