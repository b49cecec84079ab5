package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"sync"
	"sync/atomic"
	"time"
)

// Free space. Badger writes its memtable logs, value logs and tables
// through memory maps of files it sizes first and fills later; when the
// file system has no block left for a page, the write is a SIGBUS that
// kills the process, not an error. So the store never lets its own
// writes use the last of the disk: a write of new work (a turn, a
// session; CheckSpace) is refused while the file system holds less than
// Options.MinFreeBytes free, and every write (the rest of work already
// accepted) while it holds less than half of that, which leaves Badger
// the room to flush its memtables and compact what it holds. Reads go
// on. Nothing needs to be done when space comes back: the next write
// measures again.
//
// The free space is measured with statfs (about 6 µs on the dev VM), at
// most every spaceRecheck while it is well above the limit (so at most a
// thousand times a second), and at every write once it gets near it.
//
// What this cannot prevent: another process that takes the last of the
// disk between a measure and Badger's write (at least half the reserve
// within a millisecond or two), or while Badger flushes or compacts on
// its own. Then Badger can still die of a SIGBUS; nothing acknowledged is
// lost (it is in the synced logs), but the process ends.

// spaceRecheck is how long a measure of the free space is trusted while
// it is well above the limit.
const spaceRecheck = time.Millisecond

// spaceGuard measures the free space of the store's file system.
type spaceGuard struct {
	dir     string
	reserve int64 // new work needs this much free; 0: no check
	statfs  func(dir string) (int64, error)
	now     func() time.Time

	mu      sync.Mutex
	free    int64     // as last measured
	at      time.Time // when
	written int64     // bytes written since (an estimate of what they took)

	refused atomic.Int64 // checks failed
}

// refusals returns how many checks have failed.
func (g *spaceGuard) refusals() int64 { return g.refused.Load() }

func newSpaceGuard(dir string, reserve int64) *spaceGuard {
	return &spaceGuard{dir: dir, reserve: reserve, statfs: freeBytes, now: time.Now}
}

// check returns a *SpaceError unless the file system holds at least need
// bytes free (need 0: no check).
func (g *spaceGuard) check(need int64) error {
	if g == nil || need <= 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if est := g.free - g.written; g.at.IsZero() || now.Sub(g.at) >= spaceRecheck || est < 2*need {
		free, err := g.statfs(g.dir)
		if err != nil {
			// Not knowing is no reason to refuse: the write finds out.
			return nil
		}
		g.free, g.at, g.written = free, now, 0
	}
	if free := g.free - g.written; free < need {
		g.refused.Add(1)
		return &persistence.SpaceError{Dir: g.dir, Free: max(free, 0), Need: need, MinFree: g.reserve}
	}
	return nil
}

// wrote counts n bytes written since the last measure.
func (g *spaceGuard) wrote(n int64) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.written += n
	g.mu.Unlock()
}

// admit is the check of new work: it needs the whole reserve.
func (g *spaceGuard) admit() error {
	if g == nil {
		return nil
	}
	return g.check(g.reserve)
}

// floor is the check of any write: it needs half the reserve.
func (g *spaceGuard) floor() error {
	if g == nil {
		return nil
	}
	return g.check(g.reserve / 2)
}

// CheckSpace returns a *SpaceError (errors.Is ErrNoSpace) when the store's
// file system holds less free space than Options.MinFreeBytes, the room
// new work needs; nil otherwise. The runtime asks before it accepts a
// turn; a write of work already accepted is refused only under half of
// it.
func (s *badgerStore) CheckSpace() error { return s.space.admit() }
