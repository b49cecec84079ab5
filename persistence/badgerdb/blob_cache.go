package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"sync"
	"sync/atomic"
)

// blobCache keeps decompressed payloads of recent blobs within a byte
// budget (spec §10: "a small LRU of recent turns and decompressed blobs").
// Blobs are immutable, so an entry is only ever wrong after a purge deletes
// its blob; purges bump gen and drop the entry, and a reader puts what it
// read only if gen did not move meanwhile. A full shard drops entries at
// random (map order) until it fits.
type blobCache struct {
	shards   [64]blobShard
	perShard int64
	gen      atomic.Uint64
}

type blobShard struct {
	mu    sync.Mutex
	m     map[persistence.Hash][]byte
	bytes int64
}

func newBlobCache(budget int64) *blobCache {
	c := &blobCache{perShard: budget / 64}
	for i := range c.shards {
		c.shards[i].m = make(map[persistence.Hash][]byte)
	}
	return c
}

// get returns a copy of the cached payload of h.
func (c *blobCache) get(h persistence.Hash) ([]byte, bool) {
	if c.perShard <= 0 {
		return nil, false
	}
	s := &c.shards[h[0]&63]
	s.mu.Lock()
	p, ok := s.m[h]
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	return append([]byte(nil), p...), true
}

// put caches p (which the cache now owns) unless a purge happened since gen
// was read; entries over a quarter of a shard are not cached.
func (c *blobCache) put(h persistence.Hash, p []byte, gen uint64) {
	n := int64(len(p))
	if c.perShard <= 0 || n > c.perShard/4 {
		return
	}
	s := &c.shards[h[0]&63]
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	if _, ok := s.m[h]; ok {
		return
	}
	for k, v := range s.m {
		if s.bytes+n <= c.perShard {
			break
		}
		delete(s.m, k)
		s.bytes -= int64(len(v))
	}
	s.m[h] = p
	s.bytes += n
}

// drop forgets h; the caller bumps gen first (see blobCache).
func (c *blobCache) drop(h persistence.Hash) {
	s := &c.shards[h[0]&63]
	s.mu.Lock()
	if v, ok := s.m[h]; ok {
		delete(s.m, h)
		s.bytes -= int64(len(v))
	}
	s.mu.Unlock()
}
