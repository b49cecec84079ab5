package persistence

import (
	"context"
	"sync"
	"testing"
)

// A crash after a delete's value-log GC rewrote a file and before Badger
// deleted it: the next open finishes the delete, and no file holds the
// deleted values.
func TestPurgeCrashBetweenRewriteAndDelete(t *testing.T) {
	dir := t.TempDir()
	var crashed string // the crash image: the files at that moment (see copyDir)
	var once sync.Once
	purgeGCHook = func(d string) {
		if d == dir {
			once.Do(func() { crashed = copyDir(t, dir) })
		}
	}
	defer func() { purgeGCHook = nil }()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	gone, kept := "CRASH-GONE", "CRASH-KEPT"
	fk := writeSession(t, d, kept, 1)
	appendBig(t, d, fk, 2, bigPayload(kept, 100<<10))
	fg := writeSession(t, d, gone, 1)
	appendBig(t, d, fg, 2, bigPayload(gone, 100<<10))
	if _, err := d.Purge(context.Background(), PurgeSpec{Session: fg.session, DeleteSession: true, Actors: []string{fg.actor}}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if crashed == "" {
		t.Fatal("the delete ran no value-log GC")
	}
	if got := filesHolding(t, crashed, []byte(gone)); len(got) == 0 {
		t.Fatal("the crash image holds no deleted value: the crash is not between the rewrite and the delete")
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
