package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"

	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// copyDir copies the files of dir (no subdirectories) into a new one.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		copyFile(t, filepath.Join(dir, e.Name()), filepath.Join(out, e.Name()))
	}
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// redoOffsets returns the offsets of the records of the redo log's last lap
// (the lap's own first record included).
func redoOffsets(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int
	for off := 0; off+redoHeader <= len(data); {
		n := redoHeader + int(binary.LittleEndian.Uint32(data[off+4:]))
		if n > len(data)-off {
			return offs
		}
		if _, _, _, ok := decodeRedo(data[off : off+n]); !ok {
			return offs
		}
		offs = append(offs, off)
		off += n
	}
	return offs
}

// A power loss keeps what was synced and may drop the rest. The redo log is
// all a durable store syncs for most groups, so a store whose Badger files
// lack the groups acknowledged since (here: copied before they were
// written) gets them back from the log; a torn last record is left out,
// and so is everything after it.
func TestRedoLogRestoresAcknowledgedGroups(t *testing.T) {
	t.Run("encryption=off", func(t *testing.T) { testRedoLogRestoresAcknowledgedGroups(t, nil) })
	t.Run("encryption=on", func(t *testing.T) { testRedoLogRestoresAcknowledgedGroups(t, storetest.EncryptionKey(32, 1)) })
}

// testRedoLogRestoresAcknowledgedGroups runs on stores encrypted with key
// (nil: not encrypted).
func testRedoLogRestoresAcknowledgedGroups(t *testing.T, key []byte) {
	TestOptions := func(dir string) Options {
		o := TestOptions(dir)
		o.EncryptionKey = key
		return o
	}
	dir := t.TempDir()
	s, err := OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	h, before := storetest.Chain(t, s, 5)
	s.Close()
	lost := copyDir(t, dir) // Badger's files without what follows

	s, err = OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	var after []persistence.Node
	for i := range 6 {
		tr, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "after %d", i), TypeTag: 7})
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, tr)
	}
	other, _ := storetest.Chain(t, s, 3)
	s.Close()
	redo := filepath.Join(dir, redoFileName)
	offs := redoOffsets(t, redo)
	if len(offs) != 1+6+1+3 {
		t.Fatalf("redo log holds %d records, want the lap's and 10 groups", len(offs))
	}
	// The payloads are in the log in the clear, or not at all.
	if raw, err := os.ReadFile(redo); err != nil {
		t.Fatal(err)
	} else if found := bytes.Contains(raw, []byte("after 3")); found != (key == nil) {
		t.Errorf("redo log holds a payload in the clear: %v, want %v", found, key == nil)
	}

	// Without the log, the copy lacks them.
	without := copyDir(t, lost)
	s, err = OpenBadger(TestOptions(without))
	if err != nil {
		t.Fatal(err)
	}
	if rp, err := s.Range(bg, h.Branch, 0, 20); err != nil || len(rp.Nodes) != len(before) {
		t.Fatalf("the copy holds %d turns, %v; want the %d before", len(rp.Nodes), err, len(before))
	}
	s.Close()

	// With it, every group of the lap comes back.
	whole := copyDir(t, lost)
	copyFile(t, redo, filepath.Join(whole, redoFileName))
	s, err = OpenBadger(TestOptions(whole))
	if err != nil {
		t.Fatal(err)
	}
	rp, err := s.Range(bg, h.Branch, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameIDs(t, "the branch after the redo log", rp.Nodes, append(before, after...))
	for i, tr := range rp.Nodes[5:] {
		if p, err := s.Blob(bg, tr.PayloadHash); err != nil || string(p) != fmt.Sprintf("after %d", i) {
			t.Errorf("payload of turn %d = %q, %v", 5+i, p, err)
		}
	}
	if got, err := s.Head(bg, other.Branch); err != nil || got != other {
		t.Errorf("second branch = %+v, %v, want %+v", got, err, other)
	}
	// And the store goes on from there.
	if _, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("next")}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A store opened without a redo log (relaxed here) applies the lap it
	// finds all the same, and removes the log, which a later open would
	// otherwise apply again over what was written since.
	relaxed := copyDir(t, lost)
	copyFile(t, redo, filepath.Join(relaxed, redoFileName))
	ro := TestOptions(relaxed)
	ro.Durability = persistence.DurabilityRelaxed
	if s, err = OpenBadger(ro); err != nil {
		t.Fatal(err)
	}
	if rp, err := s.Range(bg, h.Branch, 0, 20); err != nil || len(rp.Nodes) != len(before)+len(after) {
		t.Errorf("relaxed open: %d turns, %v; want %d", len(rp.Nodes), err, len(before)+len(after))
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(relaxed, redoFileName)); !os.IsNotExist(err) {
		t.Errorf("the redo log after a relaxed open: %v, want it removed", err)
	}

	// A torn record ends the lap: the last three appends (the second
	// branch's chain) and the one before them are not applied.
	torn := copyDir(t, lost)
	data, _ := os.ReadFile(redo)
	data[offs[7]+redoHeader+1] ^= 0xff // the second branch's creation
	if err := os.WriteFile(filepath.Join(torn, redoFileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = OpenBadger(TestOptions(torn))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rp, err = s.Range(bg, h.Branch, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameIDs(t, "the branch after a torn record", rp.Nodes, append(before, after...))
	if _, err := s.Head(bg, other.Branch); err == nil {
		t.Errorf("the second branch, created by the torn record, exists")
	}
}

// The log is overwritten lap after lap; a record of a lap before is never
// read as one of the last lap, even where it follows the last lap's
// records with the right sizes and timestamps.
func TestRedoLogReadsTheLastLapOnly(t *testing.T) {
	dir := t.TempDir()
	type rec struct {
		ts  uint64
		key string
	}
	var recs []rec
	apply := func(ts uint64, entries []entry) error {
		recs = append(recs, rec{ts, string(entries[0].key)})
		return nil
	}
	l, n, err := openRedo(dir, 1<<16, nil, apply)
	if err != nil || n != 0 {
		t.Fatalf("new log: %v, %d records", err, n)
	}
	if err := l.prepare(); err != nil {
		t.Fatal(err)
	}
	e := func(k string) []entry { return []entry{{key: []byte(k), val: bytes.Repeat([]byte("v"), 10)}} }
	if err := l.startLap(); err != nil {
		t.Fatal(err)
	}
	for ts, k := range []string{"a", "b", "c"} {
		if err := l.append(uint64(10+ts), e(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.startLap(); err != nil {
		t.Fatal(err)
	}
	// Same size as "a"'s record, and newer than "b"'s, which follows it.
	if err := l.append(5, []entry{{key: []byte("z"), val: bytes.Repeat([]byte("v"), 10)}}); err != nil {
		t.Fatal(err)
	}
	if err := l.sync(); err != nil {
		t.Fatal(err)
	}
	l.close()
	l, n, err = openRedo(dir, 1<<16, nil, apply)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if n != 1 || len(recs) != 1 || recs[0] != (rec{5, "z"}) {
		t.Fatalf("last lap read as %+v, want only z at 5", recs)
	}
}

// A store writes through laps: each full lap checkpoints Badger's logs
// and starts the log over, and reopening keeps everything.
func TestRedoLogLaps(t *testing.T) {
	dir := t.TempDir()
	opts := TestOptions(dir)
	opts.RedoLogBytes = 64 << 10
	s, err := OpenBadger(opts)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.CreateBranch(bg, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	var ts []persistence.Node
	r := rand.New(rand.NewPCG(1, 2))
	for range 60 { // about 180 KB of records (incompressible): several laps
		p := make([]byte, 3000)
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		tr, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tr)
	}
	s.Close()
	if n := len(redoOffsets(t, filepath.Join(dir, redoFileName))); n >= 61 {
		t.Fatalf("the log's last lap holds %d records: it never started over", n)
	}
	s, err = OpenBadger(opts)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := s.Range(bg, h.Branch, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameIDs(t, "after laps and a reopen", rp.Nodes, ts)
	s.Close()

	// Another size: the log is rewritten at open, after its last lap is
	// applied.
	opts.RedoLogBytes = 2 << 20
	if s, err = OpenBadger(opts); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, redoFileName)); err != nil || st.Size() != opts.RedoLogBytes {
		t.Fatalf("redo log after a resize: %v, %v", st, err)
	}
	tr, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("after the resize")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = OpenBadger(opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rp, err = s.Range(bg, h.Branch, 0, 100); err != nil {
		t.Fatal(err)
	}
	storetest.SameIDs(t, "after a resize", rp.Nodes, append(ts, tr))
}

// BenchmarkRedoRecord encodes the record of a group of 2,000 entries of
// about 1.5 KB (3 MB, a group commit of bench turns' busiest), with and
// without encryption: the bytes allocated per record are about its size
// (its buffers are not kept past redoZeroChunk).
func BenchmarkRedoRecord(b *testing.B) {
	entries := make([]entry, 2000)
	for i := range entries {
		entries[i] = entry{key: fmt.Appendf(nil, "key-%08d", i), val: bytes.Repeat([]byte{byte(i)}, 1000+i%1000)}
	}
	for _, sealed := range []bool{false, true} {
		b.Run(fmt.Sprintf("sealed=%v", sealed), func(b *testing.B) {
			l := &redoLog{lap: 1}
			if sealed {
				c, err := persistence.NewCipher(bytes.Repeat([]byte{7}, 32))
				if err != nil {
					b.Fatal(err)
				}
				if l.aead, err = c.RedoAEAD(l.lap); err != nil {
					b.Fatal(err)
				}
				l.c = c
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n = len(l.encode(1, entries))
				l.buf, l.plain = nil, nil // as append does after a big record
			}
			b.ReportMetric(float64(n), "record-bytes")
		})
	}
}
