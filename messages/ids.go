// Package messages holds the plain data of ContextInfinity: identifiers,
// content blocks, messages, transcript items, commands, events and replies,
// with their JSON codecs. It imports nothing internal to the module.
package messages

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// ID is a 16-byte ULID tagged with the kind of thing it names, so that a
// NodeID cannot be passed where a BranchID is wanted. The zero ID means
// "none". IDs sort by creation time (millisecond) and, within one process,
// by creation order.
type ID[K any] [16]byte

// The kinds of ID. They exist only as type parameters.
type (
	sessionKind struct{}
	branchKind  struct{}
	nodeKind    struct{}
	stepKind    struct{}
	stateKind   struct{}
	chunkKind   struct{}
)

// The ID types of the data model (SRD §4.1).
type (
	SessionID = ID[sessionKind]
	BranchID  = ID[branchKind]
	NodeID    = ID[nodeKind]
	StepID    = ID[stepKind]
	StateID   = ID[stateKind]
	ChunkID   = ID[chunkKind]
)

// A transcript is a DAG of nodes: each message (a user's message, the
// assistant's reply) is a node, named by a NodeID, whose parent is the
// node before it; forks share their ancestors. A user turn (SRD §4.1) is
// named by the node of its user message: a TurnID is that NodeID, and the
// name says the value is a turn's. Where a value may be any node (a
// reply, a fork point, a branch's tip, a page cursor), it is a NodeID.
type TurnID = NodeID

// ErrInvalidID is returned when text or bytes do not hold a ULID.
var ErrInvalidID = errors.New("messages: invalid id")

var (
	entropyMu sync.Mutex
	entropy   = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a fresh ID of type T (TurnID, BranchID, ...) stamped with
// t. IDs made in one process with non-decreasing t are strictly increasing.
func NewID[T ~[16]byte](t time.Time) T {
	entropyMu.Lock()
	u, err := ulid.New(ulid.Timestamp(t), entropy)
	if err != nil {
		// The monotonic reader overflows only after 2^80 IDs in one
		// millisecond; move to the next millisecond rather than fail.
		u = ulid.MustNew(ulid.Timestamp(t)+1, entropy)
	}
	entropyMu.Unlock()
	return T(u)
}

// ParseID parses the 26-character Crockford base32 form of an ID. Its
// error says what an id looks like, not how the parser failed.
func ParseID[T ~[16]byte](s string) (T, error) {
	u, err := ulid.ParseStrict(s)
	if err != nil {
		return T{}, fmt.Errorf("%w %q: want 26 characters of Crockford base32", ErrInvalidID, s)
	}
	return T(u), nil
}

// IDFromBytes converts a 16-byte slice into an ID.
func IDFromBytes[T ~[16]byte](b []byte) (T, error) {
	var id T
	if len(b) != len(id) {
		return id, fmt.Errorf("%w: %d bytes, want 16", ErrInvalidID, len(b))
	}
	copy(id[:], b)
	return id, nil
}

// IsZero reports whether id is the zero ID ("none").
func (id ID[K]) IsZero() bool { return id == ID[K]{} }

// String returns the 26-character ULID text, or "" for the zero ID.
func (id ID[K]) String() string {
	if id.IsZero() {
		return ""
	}
	return ulid.ULID(id).String()
}

// Time returns the creation time encoded in id.
func (id ID[K]) Time() time.Time { return ulid.Time(ulid.ULID(id).Time()) }

// Compare returns -1, 0 or +1 as id sorts before, with or after o.
func (id ID[K]) Compare(o ID[K]) int { return ulid.ULID(id).Compare(ulid.ULID(o)) }

// MarshalText encodes id as ULID text; the zero ID encodes as "".
func (id ID[K]) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes ULID text; "" decodes as the zero ID.
func (id *ID[K]) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*id = ID[K]{}
		return nil
	}
	v, err := ParseID[ID[K]](string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}
