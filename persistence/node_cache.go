package persistence

import (
	"sync"

	"github.com/contextinfinity/ctxinf/messages"
)

// NodeCache keeps decoded turn records. Turns are immutable, so entries are
// never invalidated; only durable turns are ever put in. A full shard drops
// about half of its entries (map order is random), which is cheap and good
// enough for the access pattern of walking recent chains.
type NodeCache struct {
	shards   [64]nodeShard
	perShard int
}

type nodeShard struct {
	mu sync.RWMutex
	m  map[messages.NodeID]NodeRecord
}

// NewNodeCache returns a cache of about entries turn records (0: none).
func NewNodeCache(entries int) *NodeCache {
	c := &NodeCache{perShard: max(entries/64, 1)}
	if entries <= 0 {
		c.perShard = 0
	}
	for i := range c.shards {
		c.shards[i].m = make(map[messages.NodeID]NodeRecord)
	}
	return c
}

func (c *NodeCache) shard(id messages.NodeID) *nodeShard {
	// The last ULID byte is random (or a monotonic counter's low bits).
	return &c.shards[id[15]&63]
}

// Get returns the cached record of id.
func (c *NodeCache) Get(id messages.NodeID) (NodeRecord, bool) {
	if c.perShard == 0 {
		return NodeRecord{}, false
	}
	s := c.shard(id)
	s.mu.RLock()
	r, ok := s.m[id]
	s.mu.RUnlock()
	return r, ok
}

// Put caches r, a durable turn.
func (c *NodeCache) Put(r NodeRecord) {
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
func (c *NodeCache) Drop(id messages.NodeID) {
	if c.perShard == 0 {
		return
	}
	s := c.shard(id)
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}
