package persistence

import (
	"sync"

	"github.com/contextinfinity/ctxinf/messages"
)

// TurnCache keeps decoded turn records. Turns are immutable, so entries are
// never invalidated; only durable turns are ever put in. A full shard drops
// about half of its entries (map order is random), which is cheap and good
// enough for the access pattern of walking recent chains.
type TurnCache struct {
	shards   [64]turnShard
	perShard int
}

type turnShard struct {
	mu sync.RWMutex
	m  map[messages.TurnID]TurnRecord
}

// NewTurnCache returns a cache of about entries turn records (0: none).
func NewTurnCache(entries int) *TurnCache {
	c := &TurnCache{perShard: max(entries/64, 1)}
	if entries <= 0 {
		c.perShard = 0
	}
	for i := range c.shards {
		c.shards[i].m = make(map[messages.TurnID]TurnRecord)
	}
	return c
}

func (c *TurnCache) shard(id messages.TurnID) *turnShard {
	// The last ULID byte is random (or a monotonic counter's low bits).
	return &c.shards[id[15]&63]
}

// Get returns the cached record of id.
func (c *TurnCache) Get(id messages.TurnID) (TurnRecord, bool) {
	if c.perShard == 0 {
		return TurnRecord{}, false
	}
	s := c.shard(id)
	s.mu.RLock()
	r, ok := s.m[id]
	s.mu.RUnlock()
	return r, ok
}

// Put caches r, a durable turn.
func (c *TurnCache) Put(r TurnRecord) {
	if c.perShard == 0 {
		return
	}
	s := c.shard(r.ID)
	s.mu.Lock()
	if len(s.m) >= c.perShard {
		n := len(s.m) / 2
		for k := range s.m {
			if n == 0 {
				break
			}
			delete(s.m, k)
			n--
		}
	}
	s.m[r.ID] = r
	s.mu.Unlock()
}

// Drop forgets id: a turn deleted for good (purge.go).
func (c *TurnCache) Drop(id messages.TurnID) {
	if c.perShard == 0 {
		return
	}
	s := c.shard(id)
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}
