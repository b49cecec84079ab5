package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// writeSegmentJournals writes n journals of a few lines each, their
// appends interleaved, into a store of small segments, and returns
// their steps and their bytes as the store shows them.
func writeSegmentJournals(t *testing.T, s *SegmentJournals, n int) ([]messages.StepID, map[messages.StepID][]byte) {
	t.Helper()
	steps := make([]messages.StepID, n)
	sinks := make([]JournalSink, n)
	for i := range steps {
		steps[i] = newJournalStep(t)
		sinks[i] = s.Sink(steps[i])
		if err := sinks[i].Create(); err != nil {
			t.Fatal(err)
		}
	}
	for line := range 6 {
		for i, k := range sinks {
			if i == n-1 && line > 0 {
				break // the last journal holds one line
			}
			if _, err := k.Write([]byte(journalLineText(line + i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range sinks {
		if err := k.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
	views := map[messages.StepID][]byte{}
	for _, step := range steps {
		views[step] = viewBytes(t, s, step)
	}
	return steps, views
}

// sameJournals fails t unless s lists exactly steps, each with its view.
func sameJournals(t *testing.T, s *SegmentJournals, steps []messages.StepID, views map[messages.StepID][]byte) {
	t.Helper()
	got, err := s.List(context.Background())
	want := slices.SortedFunc(slices.Values(steps), messages.StepID.Compare)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List = %v, %v; want %v", got, err, want)
	}
	for _, step := range steps {
		if b := viewBytes(t, s, step); !bytes.Equal(b, views[step]) {
			t.Fatalf("step %s reads %q, want %q", step, b, views[step])
		}
	}
}

// copyDir copies the files of dir into a new temporary directory, with
// their modification times.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(to, de.Name())
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// A sealed segment gets an index: a new store reads the indexes, not the
// segments, and finds every journal as it was. A segment whose index is
// missing, torn, corrupt or older than the segment is read as before,
// and nothing is lost.
func TestSegmentJournalIndexes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewSegmentJournals(dir)
	s.size = 700
	steps, views := writeSegmentJournals(t, s, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	for _, seg := range segs { // the last one too: Close sealed it
		if _, err := os.Stat(segmentIndexPath(seg)); err != nil {
			t.Fatalf("segment %s has no index: %v", seg, err)
		}
	}
	again := NewSegmentJournals(dir)
	sameJournals(t, again, steps, views)
	if again.scanned != 0 {
		t.Errorf("a new store scanned %d segments, want none (all indexed)", again.scanned)
	}
	again.Close()

	victim := segs[1]
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, seg string)
	}{
		{"missing", func(t *testing.T, seg string) {
			if err := os.Remove(segmentIndexPath(seg)); err != nil {
				t.Fatal(err)
			}
		}},
		{"torn", func(t *testing.T, seg string) {
			fi, err := os.Stat(segmentIndexPath(seg))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(segmentIndexPath(seg), fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty", func(t *testing.T, seg string) {
			if err := os.Truncate(segmentIndexPath(seg), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"a bit flipped", func(t *testing.T, seg string) {
			b, err := os.ReadFile(segmentIndexPath(seg))
			if err != nil {
				t.Fatal(err)
			}
			b[segIndexHeader+20] ^= 1 // an offset
			if err := os.WriteFile(segmentIndexPath(seg), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment modified after", func(t *testing.T, seg string) {
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(seg, later, later); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment longer", func(t *testing.T, seg string) {
			f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte{0, 0, 0}); err != nil { // a power loss's zeros
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := copyDir(t, dir)
			tc.spoil(t, filepath.Join(cp, filepath.Base(victim)))
			s := NewSegmentJournals(cp)
			defer s.Close()
			sameJournals(t, s, steps, views)
			if s.scanned != 1 {
				t.Errorf("scanned %d segments, want 1 (the one whose index is not to be trusted)", s.scanned)
			}
		})
	}
}

// A store that stops without Close (a crash) leaves its active segment
// without an index: the next store scans that one and reads the indexes
// of the sealed ones, and finds every synced journal.
func TestSegmentJournalIndexesAfterACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewSegmentJournals(dir)
	s.size = 700
	steps, views := writeSegmentJournals(t, s, 5)
	// No Close: the process died. (The files are closed at the end of
	// the test, after the next store read them.)
	defer s.Close()
	segs := segmentFiles(t, dir)
	last := segs[len(segs)-1]
	if _, err := os.Stat(segmentIndexPath(last)); err == nil {
		t.Fatalf("the active segment %s has an index", last)
	}
	next := NewSegmentJournals(dir)
	defer next.Close()
	sameJournals(t, next, steps, views)
	if next.scanned != 1 {
		t.Errorf("scanned %d segments, want 1 (the one being written)", next.scanned)
	}
}

// Remove writes again the index of a segment it erased records in: a new
// store reads no segment, and lists no removed step. The index of a
// segment it deleted goes with it.
func TestSegmentJournalIndexesAfterRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewSegmentJournals(dir)
	s.size = 700
	steps, views := writeSegmentJournals(t, s, 5)
	gone := []messages.StepID{steps[1], steps[4]}
	if n, err := s.Remove(context.Background(), gone); err != nil || n != len(gone) {
		t.Fatalf("Remove = %d, %v; want %d", n, err, len(gone))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	idx, err := filepath.Glob(filepath.Join(dir, "*"+segmentIndexExt+"*"))
	if err != nil {
		t.Fatal(err)
	}
	if segs := segmentFiles(t, dir); len(idx) != len(segs) {
		t.Errorf("indexes %v for segments %v, want one each", idx, segs)
	}
	kept := slices.DeleteFunc(slices.Clone(steps), func(s messages.StepID) bool { return slices.Contains(gone, s) })
	again := NewSegmentJournals(dir)
	defer again.Close()
	sameJournals(t, again, kept, views)
	if again.scanned != 0 {
		t.Errorf("scanned %d segments, want none", again.scanned)
	}
}

// decodeSegmentIndex takes only a whole index of the segment as it is.
func TestDecodeSegmentIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewSegmentJournals(dir)
	g := newSegment(1, filepath.Join(dir, segmentName(1)))
	steps := []messages.StepID{newJournalStep(t), newJournalStep(t)}
	s.steps = map[messages.StepID][]segPart{}
	s.addPart(steps[1], g, 0, 40)
	s.addPart(steps[0], g, 40, 100)
	b := s.encodeSegmentIndex(g, 100, 7)
	got, err := decodeSegmentIndex(b, 100, 7)
	want := []segIndexEntryOf{{steps[1], 0, 40}, {steps[0], 40, 100}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("decodeSegmentIndex(encodeSegmentIndex) = %v, %v; want %v", got, err, want)
	}
	resum := func(b []byte) []byte {
		b = b[:len(b)-4]
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	}
	for name, tc := range map[string]struct {
		b           []byte
		size, mtime int64
	}{
		"another size":          {b, 101, 7},
		"another time":          {b, 100, 8},
		"torn":                  {b[:len(b)-1], 100, 7},
		"no entries, one count": {resum(slices.Clone(b[:segIndexHeader+4])), 100, 7},
		"past the end": {resum(func() []byte {
			c := slices.Clone(b)
			binary.LittleEndian.PutUint64(c[segIndexHeader+segIndexEntry+24:], 101)
			return c
		}()), 100, 7},
		"empty range": {resum(func() []byte {
			c := slices.Clone(b)
			binary.LittleEndian.PutUint64(c[segIndexHeader+24:], 0)
			return c
		}()), 100, 7},
		"another magic": {resum(append([]byte("CTXJIDX2"), b[8:]...)), 100, 7},
	} {
		if got, err := decodeSegmentIndex(tc.b, tc.size, tc.mtime); err == nil {
			t.Errorf("%s: decodeSegmentIndex = %v, want an error", name, got)
		}
	}
}
