package persistence

import (
	"os"
	"sync"
)

// groupSyncer makes the new directory entries of one directory durable
// with as few directory fsyncs as it can. Every entry takes a generation;
// one fsync started after generation g was taken covers g and every
// generation before it, so callers that arrive while an fsync is under
// way wait for the next one and share it: a thousand journals syncing for
// the first time at once cost a handful of directory fsyncs, not a
// thousand. (Each file's own data is fsynced by its owner.)
type groupSyncer struct {
	dir  string
	mu   sync.Mutex
	cond *sync.Cond
	gen  uint64 // generations handed out
	done uint64 // every generation <= done is durable
	busy bool   // a sync is under way

	createMu sync.Mutex // serializes file creation in dir
}

var groupSyncers sync.Map // dir -> *groupSyncer

func groupSyncerFor(dir string) *groupSyncer {
	if d, ok := groupSyncers.Load(dir); ok {
		return d.(*groupSyncer)
	}
	d := &groupSyncer{dir: dir}
	d.cond = sync.NewCond(&d.mu)
	v, _ := groupSyncers.LoadOrStore(dir, d)
	return v.(*groupSyncer)
}

// next returns a new generation: a sync that covers it covers every
// write done before the call.
func (d *groupSyncer) next() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	return d.gen
}

// syncFile makes f's written data durable, and with newEntry also its
// directory entry, whose generation is entryGen.
func (d *groupSyncer) syncFile(f *os.File, entryGen uint64, newEntry bool) error {
	if newEntry {
		if err := d.through(entryGen, syncDir); err != nil {
			return err
		}
	}
	return f.Sync()
}

// through returns once a sync(d.dir) started after generation g was taken
// has succeeded.
func (d *groupSyncer) through(g uint64, sync func(dir string) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.done < g {
		if d.busy {
			d.cond.Wait()
			continue
		}
		d.busy = true
		target := d.gen
		d.mu.Unlock()
		err := sync(d.dir)
		d.mu.Lock()
		d.busy = false
		d.cond.Broadcast()
		if err != nil {
			return err
		}
		d.done = max(d.done, target)
	}
	return nil
}
