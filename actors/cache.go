package actors

import "sync"

// maxCached bounds each generation of a genCache.
const maxCached = 1 << 16

// genCache is a bounded map in two generations of at most limit
// (default maxCached) entries: when the current one is full it becomes
// the old one (the older is dropped), and an entry found only in the old
// one moves back.
// The entries in use stay; the rest age out. It is safe for concurrent
// use; the zero value is ready.
type genCache[K comparable, V any] struct {
	mu       sync.Mutex
	cur, old map[K]V
	limit    int // entries per generation; zero is maxCached
}

func (c *genCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.cur[k]; ok {
		return v, true
	}
	v, ok := c.old[k]
	if ok {
		c.putLocked(k, v)
	}
	return v, ok
}

func (c *genCache[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, v)
}

// update sets k to f of its value (and whether it had one), at once.
func (c *genCache[K, V]) update(k K, f func(V, bool) V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.cur[k]
	if !ok {
		v, ok = c.old[k]
	}
	c.putLocked(k, f(v, ok))
}

func (c *genCache[K, V]) putLocked(k K, v V) {
	limit, hint := c.limit, 0
	if limit <= 0 {
		// A large cache starts at a size it soon reaches; a small one
		// (one a branch's index holds) at the size of what it holds.
		limit, hint = maxCached, 1024
	}
	if c.cur == nil || len(c.cur) >= limit {
		c.old, c.cur = c.cur, make(map[K]V, hint)
	}
	c.cur[k] = v
}

// clear drops every entry.
func (c *genCache[K, V]) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur, c.old = nil, nil
}
