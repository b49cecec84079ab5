package persistence

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/contextinfinity/ctxinf/messages"
)

// The proxy's conversation index: how the OpenAI- and Anthropic-
// compatible proxy finds the branch a request continues, and the
// Responses API's answers it gave. The kinds of entries, each naming a
// branch (and, for a prefix, the turn whose reply ends it):
//
//	p | 'k' | key              → ProxyTarget  a conversation key (X-Ctx-Conversation, the API's conversation)
//	p | 'h' | hash(32)         → ProxyTarget  a transcript as the client sends it, or its last messages (SHA-256, the server's encoding)
//	p | 't' | turn(16)         → ProxyTarget  a proxied turn (the turn a response id names)
//	p | 'i' | key              → ProxyTarget  a request's idempotency key (where a request sent again goes)
//	p | 'r' | turn(16) step(4) → ProxyTarget  a Responses answer (resp_<turn>_<step>) with its Response object, as answered
//
// An entry is written once: a second entry under the same name keeps the
// first (Tx.Proxy), so that two requests racing to make a conversation
// for one key both end up on the branch of the one committed first.
//
// The index is scoped by tenant: the entries above are the default
// tenant's (DefaultTenant, and the stores made before tenants); another
// tenant's are
//
//	p | '@' | len(tenant)(1) | tenant | kind | name
//
// so that a key, a transcript prefix, a turn or a request key of one
// tenant never finds another's conversation ('@' is no kind).
const ProxyEntryPrefix byte = 'p'

// proxyTenantMark starts the index entries of a tenant other than the
// default.
const proxyTenantMark byte = '@'

// ProxyKind is the kind of a proxy index entry.
type ProxyKind byte

// The kinds of proxy index entries.
const (
	ProxyByKey     ProxyKind = 'k' // Name is a conversation key
	ProxyByPrefix  ProxyKind = 'h' // Name is a 32-byte hash of a transcript prefix
	ProxyByTurn    ProxyKind = 't' // Name is a 16-byte turn id
	ProxyByRequest ProxyKind = 'i' // Name is a request's idempotency key
	// ProxyByResponse's Name is ProxyResponseName's: a turn and the
	// step of the turn the response answered; its target holds the
	// response (ProxyTarget.Response).
	ProxyByResponse ProxyKind = 'r'
)

// ProxyResponseName is the name of the ProxyByResponse entry of the
// response to step of turn: the turn's 16 bytes, then the step's 4, big
// endian.
func ProxyResponseName(turn messages.TurnID, step uint32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), turn[:]...), step)
}

// MaxProxyKey is the longest conversation key the index stores, in bytes.
const MaxProxyKey = 255

// ProxyTarget is where a proxy index entry leads: a branch and, for a
// prefix, the turn whose reply ends it. A ProxyByResponse entry holds
// the response, a JSON object (at most the store's payload limit), as
// the proxy answered it (its turn is Turn); no other kind holds one.
type ProxyTarget struct {
	Branch   messages.BranchID `json:"branch"`
	Turn     messages.TurnID   `json:"turn,omitzero"`
	Response json.RawMessage   `json:"response,omitempty"`
}

// ProxyEntry is one entry of the proxy index to insert (Tx.Proxy).
type ProxyEntry struct {
	// Tenant is the tenant whose index holds the entry ("" is
	// DefaultTenant).
	Tenant string
	Kind   ProxyKind
	Name   []byte
	ProxyTarget
}

// ErrProxyNotFound is returned by the proxy index's lookups for a name
// it does not hold.
var ErrProxyNotFound = fmt.Errorf("%w: proxy conversation", ErrNotFound)

// ProxyEntryKey is the key of the entry of kind named name in tenant's index.
func ProxyEntryKey(tenant string, kind ProxyKind, name []byte) []byte {
	if tenant == "" || tenant == DefaultTenant {
		k := make([]byte, 0, 2+len(name))
		return append(append(k, ProxyEntryPrefix, byte(kind)), name...)
	}
	k := make([]byte, 0, 4+len(tenant)+len(name))
	k = append(k, ProxyEntryPrefix, proxyTenantMark, byte(len(tenant)))
	k = append(append(k, tenant...), byte(kind))
	return append(k, name...)
}

// CheckTenant refuses a tenant name the index cannot hold.
func CheckTenant(tenant string) error {
	if len(tenant) > MaxTenantName {
		return fmt.Errorf("%w: tenant: %d bytes, limit %d", ErrInvalidArgument, len(tenant), MaxTenantName)
	}
	return nil
}

// check refuses an entry of an unknown kind, a name of the wrong size
// for its kind, a tenant name too long, no branch, or a response where
// its kind holds none, none where it does, or one over l.
func (e ProxyEntry) check(l Limits) error {
	if err := CheckTenant(e.Tenant); err != nil {
		return err
	}
	switch e.Kind {
	case ProxyByKey:
		if len(e.Name) == 0 || len(e.Name) > MaxProxyKey {
			return fmt.Errorf("%w: proxy conversation key: %d bytes, want 1 to %d", ErrInvalidArgument, len(e.Name), MaxProxyKey)
		}
	case ProxyByRequest:
		if err := CheckIdempotencyKey(string(e.Name)); err != nil {
			return fmt.Errorf("proxy request: %w", err)
		}
	case ProxyByPrefix:
		if len(e.Name) != 32 {
			return fmt.Errorf("%w: proxy prefix hash: %d bytes, want 32", ErrInvalidArgument, len(e.Name))
		}
	case ProxyByTurn:
		if len(e.Name) != 16 {
			return fmt.Errorf("%w: proxy turn: %d bytes, want 16", ErrInvalidArgument, len(e.Name))
		}
	case ProxyByResponse:
		if len(e.Name) != 20 {
			return fmt.Errorf("%w: proxy response: %d bytes, want 20 (a turn and a step)", ErrInvalidArgument, len(e.Name))
		}
		if !json.Valid(e.Response) || e.Response[0] != '{' {
			return fmt.Errorf("%w: proxy response: want a JSON object", ErrInvalidArgument)
		}
		if err := l.CheckSize("proxy response", len(e.Response)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: proxy index kind %q", ErrInvalidArgument, byte(e.Kind))
	}
	if e.Branch.IsZero() {
		return fmt.Errorf("%w: proxy index entry %c: branch is zero", ErrInvalidArgument, byte(e.Kind))
	}
	if e.Kind != ProxyByResponse && e.Response != nil {
		return fmt.Errorf("%w: proxy index entry %c: holds a response (only a %c entry does)", ErrInvalidArgument,
			byte(e.Kind), byte(ProxyByResponse))
	}
	return nil
}

func checkProxy(es []ProxyEntry, l Limits) error {
	for i, e := range es {
		if err := e.check(l); err != nil {
			return fmt.Errorf("proxy entry %d: %w", i, err)
		}
	}
	return nil
}
