package actors

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
)

// keeperDB is a Database that keeps the stream journals itself, as PGDB
// does.
type keeperDB struct {
	persistence.Database
	js persistence.JournalStore
}

func (k keeperDB) Journals() persistence.JournalStore { return k.js }

// The runtime's journals are its store's when the store keeps them, the
// files of {data_dir}/streams otherwise.
func TestJournalStoreOfTheDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	streams := filepath.Join(dir, "streams")
	db, err := badgerdb.Open(badgerdb.TestOptions(filepath.Join(dir, "store")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	step := messages.NewID[messages.StepID](time.Now())
	js := journalStore(db, streams)
	defer closeJournals(js)
	if _, ok := js.(*persistence.SegmentJournals); !ok {
		t.Errorf("Badger's runtime: journals %T, want the segments of streams", js)
	}
	if got, want := js.Name(step), persistence.JournalPath(streams, step); got != want {
		t.Errorf("Badger's runtime: journal of a step at %q, want the file %q", got, want)
	}
	kept := persistence.FileJournals(filepath.Join(dir, "elsewhere"))
	if got, want := journalStore(keeperDB{db, kept}, streams).Name(step), kept.Name(step); got != want {
		t.Errorf("a store keeping the journals: journal of a step at %q, want the store's %q", got, want)
	}
}

// hasJournal reports whether step has a journal in the streams
// directory, as a store that reads the directory now finds it.
func hasJournal(t testing.TB, streams string, step messages.StepID) bool {
	t.Helper()
	js := persistence.NewSegmentJournals(streams)
	defer js.Close()
	r, err := js.Open(bg, step)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	return true
}

// journalViews returns the bytes of every journal in the streams
// directory, by step.
func journalViews(t testing.TB, streams string) map[messages.StepID][]byte {
	t.Helper()
	js := persistence.NewSegmentJournals(streams)
	defer js.Close()
	steps, err := js.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	views := map[messages.StepID][]byte{}
	for _, step := range steps {
		r, err := js.Open(bg, step)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		views[step] = b
	}
	return views
}
