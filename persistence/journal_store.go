package persistence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// JournalStore is where the bytes of the stream journals live: shared
// segment files of a directory (SegmentJournals, Badger's runtime), a
// file a step (FileJournals, what earlier versions wrote) or a table of the
// database several runtimes share (pgdb.PGDB.Journals), so that the journal
// of a step a dead member was streaming is recovered by another. The
// Journal above it writes the same lines, encrypted the same way, and
// counts the same bytes whichever it is.
type JournalStore interface {
	// Sink returns the sink of the new journal of step. It does no I/O:
	// the journal is created by the sink's Create.
	Sink(step messages.StepID) JournalSink
	// Open returns the bytes of step's journal as a reader can see them
	// (what was written to a file, what was committed to a table), for
	// recovery. A step without a journal is an error wrapping
	// fs.ErrNotExist.
	Open(ctx context.Context, step messages.StepID) (io.ReadCloser, error)
	// List returns the steps that have a journal, in id order.
	List(ctx context.Context) ([]messages.StepID, error)
	// Remove removes the journals of steps, durably, and returns how many
	// of them had one. A step without a journal is not an error.
	Remove(ctx context.Context, steps []messages.StepID) (int, error)
	// Name names step's journal in messages: its file's path, or its
	// table.
	Name(step messages.StepID) string
}

// JournalSink takes the bytes of one step's journal, from one owner.
type JournalSink interface {
	// Create makes the journal exist, exclusively: a step that has one
	// already is an error wrapping fs.ErrExist (reported by Create for a
	// file, by the first Sync or Close for a table).
	Create() error
	// Write hands bytes on (the journal's flush): to the OS for a file,
	// to the sink's memory for a table. A failed Write may have taken
	// part of p.
	Write(p []byte) (int, error)
	// Sync makes every byte written durable (the journal's fsync): an
	// fsync for a file, a committed row for a table.
	Sync() error
	// Close releases the sink. A file's unsynced bytes stay with the OS;
	// a table's are committed, and a journal that committed nothing gets
	// an empty row, so that every journal closed exists.
	Close() error
}

// FileJournals is the journals as files in dir, {dir}/{step_id}.jsonl
// (the runtime's {data_dir}/streams before SegmentJournals, which reads
// them still). A journal's file is created at its
// first write, exclusively, making dir if it is missing; its directory
// entry is made durable by its first fsync, shared with the other
// journals of dir that sync meanwhile.
func FileJournals(dir string) JournalStore { return fileJournals{dir: dir} }

type fileJournals struct{ dir string }

func (s fileJournals) Name(step messages.StepID) string { return JournalPath(s.dir, step) }

func (s fileJournals) Sink(step messages.StepID) JournalSink {
	return &fileSink{dir: s.dir, path: JournalPath(s.dir, step), syncer: groupSyncerFor(s.dir)}
}

func (s fileJournals) Open(_ context.Context, step messages.StepID) (io.ReadCloser, error) {
	return os.Open(JournalPath(s.dir, step))
}

func (s fileJournals) List(context.Context) ([]messages.StepID, error) { return ListJournals(s.dir) }

// Remove removes the files and then, if it removed any, fsyncs dir.
func (s fileJournals) Remove(ctx context.Context, steps []messages.StepID) (int, error) {
	n := 0
	if err := removeJournalFiles(ctx, s.dir, steps, func(_ messages.StepID, removed bool) {
		if removed {
			n++
		}
	}); err != nil {
		return n, err
	}
	if n > 0 {
		if err := syncDir(s.dir); err != nil {
			return n, fmt.Errorf("remove stream journals: %w", err)
		}
	}
	return n, nil
}

// removeJournalFiles removes the files of steps' journals in dir, one by
// one, and calls done with each step it got through and whether its file
// was there; it does not fsync dir. It stops at ctx's end or at the first
// file it could not remove.
func removeJournalFiles(ctx context.Context, dir string, steps []messages.StepID, done func(step messages.StepID, removed bool)) error {
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := os.Remove(JournalPath(dir, step))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the stream journal of step %s: %w", step, err)
		}
		done(step, err == nil)
	}
	return nil
}

// fileSink is the file of one journal.
type fileSink struct {
	dir, path string
	syncer    *groupSyncer // of dir
	f         *os.File     // nil until Create
	gen       uint64       // the generation of the file's directory entry
	dirSafe   bool         // the directory entry is durable
}

// Create creates the file, making its directory if missing.
func (s *fileSink) Create() error {
	// Journals hold conversation content: owner-only permissions.
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	// One creator at a time per directory: concurrent creates contend on
	// the directory's lock in the kernel, which spins burning CPU; parked
	// goroutines cost nothing.
	s.syncer.createMu.Lock()
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	s.syncer.createMu.Unlock()
	if err != nil {
		return err
	}
	// The new directory entry is made durable with the file's first sync,
	// by a sync shared with every journal of dir meanwhile.
	s.f, s.gen = f, s.syncer.next()
	return nil
}

func (s *fileSink) Write(p []byte) (int, error) { return s.f.Write(p) }

// Sync fsyncs the file and, the first time, its directory entry.
func (s *fileSink) Sync() error {
	if err := s.syncer.syncFile(s.f, s.gen, !s.dirSafe); err != nil {
		return err
	}
	s.dirSafe = true
	return nil
}

func (s *fileSink) Close() error {
	if s.f == nil {
		return nil
	}
	f := s.f
	s.f = nil
	return f.Close()
}

// NewJournalIn is NewJournal for a journal of store s.
func NewJournalIn(s JournalStore, step messages.StepID, provider string, p JournalPolicy, now func() time.Time) (*Journal, error) {
	if s == nil {
		return nil, fmt.Errorf("create journal %s: %w: journal store is nil", step, ErrInvalidArgument)
	}
	return newJournal(s, step, provider, p, now)
}

// CreateJournalIn is CreateJournal for a journal of store s.
func CreateJournalIn(s JournalStore, step messages.StepID, provider string, p JournalPolicy, now func() time.Time) (*Journal, error) {
	j, err := NewJournalIn(s, step, provider, p, now)
	if err != nil {
		return nil, err
	}
	if err := j.open(); err != nil {
		return nil, err
	}
	return j, nil
}

// RecoverJournalIn is RecoverJournal for the journal of step in store s.
func RecoverJournalIn(ctx context.Context, s JournalStore, step messages.StepID, c *Cipher) (RecoveredJournal, error) {
	r, err := s.Open(ctx, step)
	if err != nil {
		return RecoveredJournal{}, fmt.Errorf("read journal: %w", err)
	}
	defer r.Close()
	return recoverJournal(r, step.String(), s.Name(step), c)
}

// ReadJournalIn is ReadJournal for the journal of step in store s.
func ReadJournalIn(ctx context.Context, s JournalStore, step messages.StepID, c *Cipher) (entries []JournalEntry, torn bool, err error) {
	j, err := RecoverJournalIn(ctx, s, step, c)
	return j.Entries, j.Torn, err
}

// journalStem is the step of a journal file's name, its key's label.
func journalStem(name string) string { return strings.TrimSuffix(name, journalExt) }
