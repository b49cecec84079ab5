package actors

import (
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// journalSyncWait bounds how long a finalized step's journal holds its
// closing work back for the branch's commit (finishJournal): a branch
// that never takes the step's end (it crashed first) does not leave the
// journal unwritten.
const journalSyncWait = 100 * time.Millisecond

// finishJournal runs the closing work of a finalized step's journal
// (Journal.CloseDeferred: its file's creation, last write and fsync) on
// a goroutine of its own, which Close waits for, once committed is
// closed (the branch committed what the step leads to: TX-A, which
// holds the same output), for journalSyncWait at most. Until then the
// work would compete with the step's way to that commit: for the CPU
// (a file's creation) and on the device (the fsync beside the commit's
// flush). A failure is only logged: nothing waits for this work to
// acknowledge the step.
func (r *Runtime) finishJournal(step messages.StepID, finish func() error, committed <-chan struct{}) {
	done := r.finishing.start(step)
	r.journalSyncs.Go(func() {
		defer done()
		t := time.NewTimer(journalSyncWait)
		select {
		case <-committed:
		case <-t.C:
		case <-r.closing:
		}
		t.Stop()
		if err := finish(); err != nil {
			r.log.Warn().Err(err).Str("step", step.String()).Msg("stream journal: closing write and fsync")
		}
	})
}

// journalKeeper is a Database that keeps the stream journals itself
// (PGDB.Journals: rows of the database the cluster's members share, so
// that a member recovers the journal of a step another was streaming).
type journalKeeper interface {
	Journals() persistence.JournalStore
}

// journalStore returns where the journals of db's runtime live: db's
// own journals if it keeps them, the segment files of streams otherwise
// (Badger's runtime; persistence.SegmentJournals, which also reads the
// journals of earlier versions, a file a step). The caller closes it
// with closeJournals.
func journalStore(db persistence.Database, streams string) persistence.JournalStore {
	if k, ok := db.(journalKeeper); ok {
		return k.Journals()
	}
	return persistence.NewSegmentJournals(streams)
}

// closeJournals closes a journal store that journalStore opened, if it
// has something to close (the segment being written).
func closeJournals(js persistence.JournalStore) error {
	if c, ok := js.(*persistence.SegmentJournals); ok {
		return c.Close()
	}
	return nil
}

// openJournals holds the journal store of each runtime open in this
// process, by its streams directory: a report on a running runtime
// (the server's) reads the runtime's store, and does not read every
// segment again into an index of its own.
var openJournals sync.Map // streams dir -> persistence.JournalStore

// reportJournals returns the journal store a report of db reads: the
// store of the runtime open on streams if there is one, a store of its
// own otherwise, and what ends the caller's use of it.
func reportJournals(db persistence.Database, streams string) (persistence.JournalStore, func()) {
	if _, ok := db.(journalKeeper); !ok {
		if js, ok := openJournals.Load(streams); ok {
			return js.(persistence.JournalStore), func() {}
		}
	}
	js := journalStore(db, streams)
	return js, func() { closeJournals(js) }
}
