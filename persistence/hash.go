package persistence

import (
	"encoding/hex"
	"fmt"

	"github.com/zeebo/blake3"
)

// Hash is the BLAKE3-256 digest of a payload's exact bytes: the key of the
// blob store.
type Hash [32]byte

// HashOf returns the BLAKE3-256 digest of p.
func HashOf(p []byte) Hash { return blake3.Sum256(p) }

// IsZero reports whether h is the zero hash ("no payload").
func (h Hash) IsZero() bool { return h == Hash{} }

// String returns h in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash parses 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("%w: hash %q is %d characters, want 64 hex digits", ErrInvalidArgument, s, len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("%w: hash %q: %v", ErrInvalidArgument, s, err)
	}
	return h, nil
}
