package persistence

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// Idempotency keys. A client that may send a request again (its answer
// lost, or a time-out that left it unsure) names the request with a key;
// the key's row is committed in the same transaction as what the request
// stored (a turn's TX-0, a fork's new branch, an import's turns), so a
// repeat finds it, across a crash or a restart, and is answered with what
// the first one made instead of storing it again. Rows are kept as long
// as the store: a key names one request for good.
const IdempotencyRowPrefix byte = 'D' // D | scope(1) | owner(16) | key → IdempotencyRow

// MaxIdempotencyKey is the longest idempotency key, in bytes.
const MaxIdempotencyKey = 255

// KeyScope says what an idempotency key names; a key is unique within its
// scope and owner.
type KeyScope byte

// The scopes of idempotency keys.
const (
	ScopeTurn   KeyScope = 't' // a turn submitted on a branch: Owner is the branch
	ScopeFork   KeyScope = 'f' // a fork of a branch: Owner is the parent branch
	ScopeImport KeyScope = 'i' // a session imported: Owner is TenantOwner(the importer's tenant)
)

// TenantOwner is the owner of a tenant's ScopeImport keys: zero for
// DefaultTenant ("" too: the keys stored before tenants), else the
// first 16 bytes of a SHA-256 of the name, so that one tenant's import
// key never names another tenant's import.
func TenantOwner(tenant string) messages.BranchID {
	var o messages.BranchID
	if tenant == "" || tenant == DefaultTenant {
		return o
	}
	sum := sha256.Sum256([]byte("ctxinf tenant\x00" + tenant))
	copy(o[:], sum[:])
	return o
}

// IdempotencyRow is what an idempotency key names: the request's hash
// (the same key sent with another request is an error, not a repeat) and
// what the request made: a turn (ScopeTurn), a branch (ScopeFork), or a
// session, its branch and the count of turns imported (ScopeImport).
type IdempotencyRow struct {
	Scope   KeyScope           `json:"scope"`
	Owner   messages.BranchID  `json:"owner,omitzero"`
	Key     string             `json:"key"`
	Hash    string             `json:"hash"`
	Turn    messages.TurnID    `json:"turn,omitzero"`
	Branch  messages.BranchID  `json:"branch,omitzero"`
	Session messages.SessionID `json:"session,omitzero"`
	Count   int                `json:"count,omitempty"`
	Created time.Time          `json:"created"`
}

// SameTarget reports whether r and o name the same request and result.
func (r IdempotencyRow) SameTarget(o IdempotencyRow) bool {
	return r.Hash == o.Hash && r.Turn == o.Turn && r.Branch == o.Branch && r.Session == o.Session && r.Count == o.Count
}

// CheckIdempotencyKey refuses a key that is empty, longer than
// MaxIdempotencyKey bytes, or holds a byte that is not printable ASCII.
func CheckIdempotencyKey(key string) error {
	if len(key) == 0 || len(key) > MaxIdempotencyKey {
		return fmt.Errorf("%w: idempotency key: %d bytes, want 1 to %d", ErrInvalidArgument, len(key), MaxIdempotencyKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: idempotency key: byte %d is 0x%02x, want printable ASCII (0x20 to 0x7e)", ErrInvalidArgument, i, c)
		}
	}
	return nil
}

// Check refuses a scope that is not one of the KeyScope constants.
func (s KeyScope) Check() error {
	switch s {
	case ScopeTurn, ScopeFork, ScopeImport:
		return nil
	}
	return fmt.Errorf("%w: idempotency key scope %q", ErrInvalidArgument, byte(s))
}

// IdempotencyRowKey is the key of the row of key in scope and owner, on
// every engine (PostgreSQL keeps it in ctx_keyed).
func IdempotencyRowKey(scope KeyScope, owner messages.BranchID, key string) []byte {
	k := make([]byte, 0, 2+16+len(key))
	k = append(k, IdempotencyRowPrefix, byte(scope))
	k = append(k, owner[:]...)
	return append(k, key...)
}

// ErrKeyNotFound is returned by IdempotencyKey for a key not stored.
var ErrKeyNotFound = fmt.Errorf("%w: idempotency key", ErrNotFound)

// checkKeys checks the idempotency rows of a Tx before it is committed.
func checkKeys(rows []IdempotencyRow) error {
	for i, r := range rows {
		if err := r.Scope.Check(); err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
		if err := CheckIdempotencyKey(r.Key); err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
	}
	return nil
}
