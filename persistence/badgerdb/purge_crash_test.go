package badgerdb

import (
	"context"
	"sync"
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

// A crash in the middle of a delete: after its keys are dropped and
// before the redo log is emptied (the next open applies the log again,
// writing the dropped values anew), or after its value-log GC rewrote a
// file and before Badger deleted it. The next open finishes the delete,
// and no file holds the deleted values.
func TestPurgeCrashes(t *testing.T) {
	for _, stage := range []string{"dropped", "rewritten"} {
		t.Run(stage, func(t *testing.T) { purgeCrash(t, stage) })
	}
}

// purgeCrash runs a delete, takes the crash image at stage (a copy of
// the files then: see copyDir), opens it and looks for the deleted values.
func purgeCrash(t *testing.T, stage string) {
	dir := t.TempDir()
	var crashed string
	var once sync.Once
	purgeHook = func(at, d string) {
		if at == stage && d == dir {
			once.Do(func() { crashed = copyDir(t, dir) })
		}
	}
	defer func() { purgeHook = nil }()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	gone, kept := "CRASH-GONE-"+stage, "CRASH-KEPT-"+stage
	fk := storetest.WriteSession(t, d, kept, 1)
	appendBig(t, d, fk, 2, bigPayload(kept, 100<<10))
	fg := storetest.WriteSession(t, d, gone, 1)
	appendBig(t, d, fg, 2, bigPayload(gone, 100<<10))
	if _, err := d.Purge(context.Background(), persistence.PurgeSpec{Session: fg.Session, DeleteSession: true, Actors: []string{fg.Actor}}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if crashed == "" {
		t.Fatalf("the delete never reached %s", stage)
	}
	if got := filesHolding(t, crashed, []byte(gone)); len(got) == 0 {
		t.Fatalf("the crash image at %s holds no deleted value", stage)
	}
	d, err = Open(TestOptions(crashed))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := filesHolding(t, crashed, []byte(gone)); len(got) > 0 {
		t.Errorf("after the open that finishes the delete, %s is in %v", gone, got)
	}
	if got := filesHolding(t, crashed, []byte(kept)); len(got) == 0 {
		t.Errorf("the kept marker is in no file")
	}
}
