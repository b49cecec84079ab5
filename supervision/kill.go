package supervision

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// Kind names a kind of actor of the runtime.
type Kind string

// The actor kinds, each supervised and each able to be killed by a
// KillSwitch.
const (
	KindBranch    Kind = "branch"    // one per branch: its head, pending turns and event log
	KindStep      Kind = "step"      // one per provider step: the provider's stream
	KindJournal   Kind = "journal"   // one per provider step: the stream journal's flush and fsync policy
	KindLibrarian Kind = "librarian" // a pool: summaries and shrinks
	KindIndexer   Kind = "indexer"   // a pool: chunking, embedding, indexing
)

// Kinds lists every actor kind.
var Kinds = []Kind{KindBranch, KindStep, KindJournal, KindLibrarian, KindIndexer}

// ParseKinds parses a comma-separated list of kinds ("all" or "" for
// every kind).
func ParseKinds(s string) ([]Kind, error) {
	if s == "" || s == "all" {
		return slices.Clone(Kinds), nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("actor kind %q: want one of %v or all", k, Kinds)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// ErrKilled is the panic value of an actor a KillSwitch killed.
var ErrKilled = errors.New("supervision: killed by the chaos kill switch")

// KillSwitch kills actors on purpose, for chaos tests: Arm(kind) makes
// the next actor of that kind to pass a kill point (Point) panic there,
// in the middle of its work, as a bug would. Actors place their kill
// points where losing the work in hand matters: a worker as it starts a
// job, a step while it streams. The zero KillSwitch, and a nil one, kill
// nothing.
type KillSwitch struct {
	armed  [numKinds]atomic.Int64
	killed [numKinds]atomic.Int64
}

const numKinds = 5

var kindIndex = map[Kind]int{KindBranch: 0, KindStep: 1, KindJournal: 2, KindLibrarian: 3, KindIndexer: 4}

// Arm makes the next actor of kind that passes a kill point panic.
func (k *KillSwitch) Arm(kind Kind) {
	if i, ok := kindIndex[kind]; ok && k != nil {
		k.armed[i].Add(1)
	}
}

// Point panics with ErrKilled if a kill of kind is armed (taking it).
func (k *KillSwitch) Point(kind Kind) {
	if k == nil {
		return
	}
	i := kindIndex[kind]
	for {
		n := k.armed[i].Load()
		if n <= 0 {
			return
		}
		if k.armed[i].CompareAndSwap(n, n-1) {
			k.killed[i].Add(1)
			panic(fmt.Errorf("%w: %s actor", ErrKilled, kind))
		}
	}
}

// Armed returns the kills of kind armed and not yet taken.
func (k *KillSwitch) Armed(kind Kind) int64 {
	if k == nil {
		return 0
	}
	return k.armed[kindIndex[kind]].Load()
}

// Killed counts the actors of kind this switch has killed.
func (k *KillSwitch) Killed(kind Kind) int64 {
	if k == nil {
		return 0
	}
	return k.killed[kindIndex[kind]].Load()
}
