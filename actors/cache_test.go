package actors

import "testing"

// A genCache keeps what is in use across generations and
// forgets the rest, within two generations of maxCached entries.
func TestCountCacheKeepsWhatIsInUse(t *testing.T) {
	t.Parallel()
	var c genCache[uint64, int]
	c.put(1, 10) // used on every round below
	for k := uint64(2); k < 2+3*maxCached; k++ {
		c.put(k, int(k))
		if k%1024 == 0 {
			if n, ok := c.get(1); !ok || n != 10 {
				t.Fatalf("after %d puts: get(1) = %d, %v; want 10, true", k, n, ok)
			}
		}
	}
	if _, ok := c.get(2); ok {
		t.Error("an entry unused for two generations is still cached")
	}
	if n, ok := c.get(1 + 3*maxCached); !ok || n != 1+3*maxCached {
		t.Errorf("the latest entry: get = %d, %v", n, ok)
	}
	if size := len(c.cur) + len(c.old); size > 2*maxCached {
		t.Errorf("the cache holds %d entries, want at most %d", size, 2*maxCached)
	}
}
