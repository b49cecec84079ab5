package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"fmt"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A hard delete of a value in Badger's value log needs the file holding it
// rewritten by value-log GC, and Badger never rewrites the file it is
// writing (value.go: pickLog skips the newest file) nor starts another
// before that one is full, except when it opens: "Don't write to the old
// log file. Always create a new one". So a purge that dropped such a
// value closes Badger and opens it again (reopenBadger), with the store's
// writes waiting (it runs on the writer) and its reads held back at the
// gate below, and then runs GC over every file but the new one.

// reopenWait bounds how long a purge waits for the reads under way to
// end before it reopens Badger. A read that outlasts it (an export of a
// large branch, or a read that reads again inside its callback and so
// waits at the gate itself) makes the purge give up the reopen: its
// result says the value log is pending, and the next open finishes it.
var reopenWait = 5 * time.Second // a variable for tests

// readGate keeps reads and a reopen of Badger apart: every read of
// badgerStore.db enters it and leaves it; shut holds back new reads and
// waits for those under way.
type readGate struct {
	mu      sync.Mutex
	readers int
	opened  chan struct{} // while shut: closed when the gate opens again
	drained chan struct{} // while shut with readers: closed when the last leaves
}

// enter waits while the gate is shut, and counts a read in.
func (g *readGate) enter() {
	g.mu.Lock()
	for g.opened != nil {
		ch := g.opened
		g.mu.Unlock()
		<-ch
		g.mu.Lock()
	}
	g.readers++
	g.mu.Unlock()
}

// leave counts a read out.
func (g *readGate) leave() {
	g.mu.Lock()
	g.readers--
	if g.readers == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
	g.mu.Unlock()
}

// shut holds back new reads and waits up to wait for those under way to
// leave. It reports whether they did; if not, the gate is open again.
// Only one goroutine (the store's writer) shuts the gate.
func (g *readGate) shut(wait time.Duration) bool {
	g.mu.Lock()
	g.opened = make(chan struct{})
	drained := make(chan struct{})
	if g.readers == 0 {
		close(drained)
	} else {
		g.drained = drained
	}
	g.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-drained:
		return true
	case <-t.C:
		g.open()
		return false
	}
}

// open lets the reads held back go on.
func (g *readGate) open() {
	g.mu.Lock()
	close(g.opened)
	g.opened, g.drained = nil, nil
	g.mu.Unlock()
}

// reopenBadger closes Badger and opens it again with the same options, so
// that value-log GC may rewrite the file it was writing. It runs on the
// writer (no write is under way) with gcMu held (no GC is). It reports
// false, having done nothing, when the reads under way did not end within
// reopenWait. A failure fails the store: Badger is closed, and every read
// and write after it returns the error.
func (s *badgerStore) reopenBadger() (bool, error) { return s.reopenBadgerWith(nil) }

// reopenBadgerWith is reopenBadger, running between (Badger closed, its
// files all on disk) what must: discardAllValueLogs writes Badger's
// DISCARD file.
func (s *badgerStore) reopenBadgerWith(closed func() error) (bool, error) {
	if !s.gate.shut(reopenWait) {
		return false, nil
	}
	defer s.gate.open()
	fail := func(err error) (bool, error) {
		err = fmt.Errorf("persistence: store failed, reopen it: reopen Badger after a delete: %w", err)
		s.failed.CompareAndSwap(nil, &err)
		return true, err
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	// The tails are opened again after: Badger numbers its files anew.
	for _, t := range []*logTail{s.walTail, s.vlogTail} {
		if t != nil {
			t.close()
		}
	}
	err := s.db.Close()
	s.db = nil
	if err == nil && closed != nil {
		err = closed()
	}
	if err != nil {
		return fail(err)
	}
	db, err := badger.OpenManaged(s.badgerOpts)
	if err != nil {
		return fail(err)
	}
	s.db = db
	db.SetDiscardTs(s.readTs.Load())
	if s.opts.Durability == persistence.DurabilitySync {
		wal, vlog, err := openLogTails(s.opts.Dir)
		if err != nil {
			return fail(err)
		}
		s.walTail, s.vlogTail = wal, vlog
	}
	return true, nil
}
