package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLogTailFollowsNumbers(t *testing.T) {
	dir := t.TempDir()
	touch(t, filepath.Join(dir, "00002.mem"))
	touch(t, filepath.Join(dir, "00007.mem"))
	touch(t, filepath.Join(dir, "000009.vlog"))
	tail, err := openLogTail(dir, ".mem", 5)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.close()
	if tail.fid != 7 {
		t.Fatalf("opened at %d, want the newest, 7", tail.fid)
	}
	if err := tail.sync(); err != nil || tail.fid != 7 {
		t.Fatalf("sync with no rotation: fid %d, %v", tail.fid, err)
	}
	touch(t, filepath.Join(dir, "00008.mem"))
	touch(t, filepath.Join(dir, "00009.mem"))
	if err := os.Remove(filepath.Join(dir, "00007.mem")); err != nil { // flushed into a table
		t.Fatal(err)
	}
	if err := tail.sync(); err != nil || tail.fid != 9 {
		t.Fatalf("sync after two rotations: fid %d, %v; want 9", tail.fid, err)
	}
	if err := tail.syncAll(); err != nil {
		t.Fatal(err)
	}

	empty, err := openLogTail(t.TempDir(), ".vlog", 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.sync(); err != nil || empty.fid != 0 {
		t.Fatalf("sync with no file: fid %d, %v", empty.fid, err)
	}
}

// newestLog is the highest number among dir's files ending in ext.
func newestLog(t *testing.T, dir, ext string) int {
	t.Helper()
	fids, err := logFids(dir, ext)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Max(append(fids, 0))
}

// smallLogs opens a durable store whose memtables and value-log files fill
// after a few hundred kilobytes of 4 KiB values.
func smallLogs(t *testing.T) *badgerStore {
	t.Helper()
	o := TestOptions(t.TempDir())
	o.MemTableSize = 1 << 20
	o.ValueLogFileSize = 1 << 20
	o.Limits.MaxPayloadBytes = 256 << 10
	o.ValueThreshold = 1 << 10
	o.Compress = persistence.CompressNone
	s, err := openBadger(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writeValues writes keys prefix00000... with random values of size bytes
// after the one-byte tag, one group each.
func writeValues(t *testing.T, s *badgerStore, prefix string, keys, size int, tag string) {
	t.Helper()
	for i := range keys {
		v := make([]byte, size)
		rand.Read(v)
		if err := s.write([]entry{{key: fmt.Appendf(nil, "%s%05d", prefix, i), val: append([]byte(tag), v...)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// The store syncs the newest WAL and value-log files after each group;
// Badger starts new ones as they fill, and the store must follow.
func TestStoreSyncsTheNewestLogs(t *testing.T) {
	s := smallLogs(t)
	mem0, vlog0 := s.walTail.fid, s.vlogTail.fid
	writeValues(t, s, "k", 500, 4<<10, "a") // to the value log
	writeValues(t, s, "w", 2000, 900, "a")  // to the WAL
	if mem, vlog := newestLog(t, s.opts.Dir, ".mem"), newestLog(t, s.opts.Dir, ".vlog"); mem <= mem0 || vlog <= vlog0 {
		t.Fatalf("no rotation to follow: WAL %d -> %d, value log %d -> %d", mem0, mem, vlog0, vlog)
	}
	if got, want := s.walTail.fid, newestLog(t, s.opts.Dir, ".mem"); got != want {
		t.Errorf("WAL synced is %d, newest is %d", got, want)
	}
	if got, want := s.vlogTail.fid, newestLog(t, s.opts.Dir, ".vlog"); got != want {
		t.Errorf("value log synced is %d, newest is %d", got, want)
	}
}

// A group is written as one Badger transaction; one too big for a
// transaction (here 360 KB against a 1 MiB memtable's limit of about
// 150 KB) goes through a WriteBatch instead, whole.
func TestStoreWritesGroupsTooBigForOneTransaction(t *testing.T) {
	s := smallLogs(t)
	var es []entry
	for i := range 400 {
		v := make([]byte, 900)
		rand.Read(v)
		es = append(es, entry{key: fmt.Appendf(nil, "big%05d", i), val: v})
	}
	if err := s.write(es); err != nil {
		t.Fatalf("write of %d entries: %v", len(es), err)
	}
	txn := s.db.NewTransactionAt(s.lastTs, false)
	defer txn.Discard()
	for _, e := range es {
		item, err := txn.Get(e.key)
		if err != nil {
			t.Fatalf("%s: %v", e.key, err)
		}
		if v, _ := item.ValueCopy(nil); !bytes.Equal(v, e.val) {
			t.Fatalf("%s: value differs", e.key)
		}
	}
}
