package actors

import (
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
	if got, want := journalStore(db, streams).Name(step), persistence.JournalPath(streams, step); got != want {
		t.Errorf("Badger's runtime: journal of a step at %q, want the file %q", got, want)
	}
	kept := persistence.FileJournals(filepath.Join(dir, "elsewhere"))
	if got, want := journalStore(keeperDB{db, kept}, streams).Name(step), kept.Name(step); got != want {
		t.Errorf("a store keeping the journals: journal of a step at %q, want the store's %q", got, want)
	}
}
