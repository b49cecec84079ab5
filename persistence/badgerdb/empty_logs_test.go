package badgerdb

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

// A process killed between Badger's creating a memtable log or a
// value-log file and its sizing leaves the file empty; the store opens
// anyway, with what it held before.
func TestOpenAfterEmptyLogsLeftByACrash(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	h, ts := storetest.Chain(t, s, 5)
	s.Close()
	for _, name := range []string{"00042.mem", "000042.vlog"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err = OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatalf("open with empty logs a crash left: %v", err)
	}
	defer s.Close()
	rp, err := s.Range(bg, h.Branch, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameIDs(t, "Range after the open", rp.Nodes, ts)
	if _, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
}

// While another process holds the store, an open leaves its files alone.
func TestEmptyLogsOfAnOpenStoreStay(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	empty := filepath.Join(dir, "00042.mem")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBadger(TestOptions(dir)); err == nil {
		t.Fatal("a second open of a store in use succeeded")
	}
	if _, err := os.Stat(empty); err != nil {
		t.Fatalf("the empty file of the store in use: %v", err)
	}
}
