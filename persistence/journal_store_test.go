package persistence_test

import (
	"path/filepath"
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

// TestJournalStore runs the journal store's conformance tests on the
// journals as files, one a step, and as segments.
func TestJournalStore(t *testing.T) {
	storetest.RunJournalStore(t, storetest.JournalEngine{
		Name: "files",
		Open: func(t *testing.T) persistence.JournalStore {
			return persistence.FileJournals(filepath.Join(t.TempDir(), "streams"))
		},
	}, storetest.JournalEngine{
		Name: "segments",
		Open: func(t *testing.T) persistence.JournalStore {
			s := persistence.NewSegmentJournals(filepath.Join(t.TempDir(), "streams"))
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
