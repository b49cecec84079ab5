package persistence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// segmentFiles returns the segment files of dir, in order.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// viewBytes returns the bytes of step's journal as s shows them.
func viewBytes(t *testing.T, s JournalStore, step messages.StepID) []byte {
	t.Helper()
	r, err := s.Open(context.Background(), step)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A journal in the segments is, byte for byte, the file of its own that
// one journal per file writes, whatever other steps append meanwhile.
func TestSegmentJournalViewIsTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := FileJournals(filepath.Join(dir, "files"))
	segs := NewSegmentJournals(filepath.Join(dir, "segments"))
	defer segs.Close()
	step, other := newJournalStep(t), newJournalStep(t)
	clk := newJournalClock()
	policy := JournalPolicy{FlushInterval: time.Hour, FlushBytes: 1, FsyncInterval: time.Hour} // every append written
	var journals []*Journal
	for _, s := range []JournalStore{files, segs, segs} {
		st := step
		if len(journals) == 2 {
			st = other
		}
		j, err := CreateJournalIn(s, st, "openai", policy, clk.now)
		if err != nil {
			t.Fatal(err)
		}
		journals = append(journals, j)
	}
	for i := range 5 {
		for _, j := range journals {
			payload := json.RawMessage(fmt.Sprintf(`{"delta":"word %d\nline"}`, i))
			if _, err := j.AppendText("response.output_text.delta", payload, fmt.Sprintf("word %d ", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, j := range journals {
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(JournalPath(filepath.Join(dir, "files"), step))
	if err != nil {
		t.Fatal(err)
	}
	if got := viewBytes(t, segs, step); !bytes.Equal(got, want) {
		t.Errorf("segment view =\n%s\nwant the file's\n%s", got, want)
	}
	if got := journals[1].Counters(); got.Displayed != uint64(len(want)) || got.Durable != got.Displayed {
		t.Errorf("counters = %+v, want %d displayed and durable", got, len(want))
	}
	if n := len(segmentFiles(t, filepath.Join(dir, "segments"))); n != 1 {
		t.Errorf("%d segment files, want 1", n)
	}
}

// A crash mid-append leaves its step's last record without its newline:
// a new store (the next process) finds the step's torn final line and
// the other steps whole, and appends to a segment of its own.
func TestSegmentJournalCrashLeavesATornLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewSegmentJournals(dir)
	cut, whole := newJournalStep(t), newJournalStep(t)
	for _, step := range []messages.StepID{cut, whole} {
		k := s.Sink(step)
		if err := k.Create(); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Write([]byte(journalLineText(1) + journalLineText(2))); err != nil {
			t.Fatal(err)
		}
		if err := k.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	files := segmentFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("segments %v, want 1", files)
	}
	// What a kill -9 during a write leaves (a write cut between pages),
	// then what a power loss leaves past the last fdatasync: zeros.
	f, err := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := cut.String() + " " + `{"ts":"2025-03-01T11:0`
	if _, err := f.WriteString(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, tail := range []string{"", "\x00\x00\x00\x00\n\x00\x00"} {
		if tail != "" {
			f, err := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			// A torn record with zeros after it still ends its step.
			if _, err := f.WriteString("\n" + tail); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		next := NewSegmentJournals(dir)
		lines := uint64(len(journalLineText(1) + journalLineText(2)))
		r, err := RecoverJournalIn(context.Background(), next, cut, nil)
		tornBytes := uint64(len(torn) - stepIDLen - 1)
		if tail != "" {
			tornBytes++ // its newline: still not a line that decodes
		}
		if err != nil || !r.Torn || len(r.Entries) != 2 || r.Valid != lines || r.Size != lines+tornBytes {
			t.Fatalf("tail %q: the cut step = %d entries, torn %v, valid %d, size %d, %v; want 2, true, %d, %d",
				tail, len(r.Entries), r.Torn, r.Valid, r.Size, err, lines, lines+tornBytes)
		}
		if r, err := RecoverJournalIn(context.Background(), next, whole, nil); err != nil || r.Torn || len(r.Entries) != 2 {
			t.Fatalf("tail %q: the other step = %d entries, torn %v, %v; want 2 whole", tail, len(r.Entries), r.Torn, err)
		}
		if got, err := next.List(context.Background()); err != nil || !slices.Contains(got, cut) || !slices.Contains(got, whole) {
			t.Fatalf("List = %v, %v; want %v and %v among them", got, err, cut, whole)
		}
		// The next process appends to a segment of its own.
		j, err := CreateJournalIn(next, newJournalStep(t), "p", anyTestPolicy, nil)
		if err != nil {
			t.Fatal(err)
		}
		appendDeltas(t, j, 1)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		next.Close()
	}
	if n := len(segmentFiles(t, dir)); n != 3 {
		t.Errorf("%d segments after two more processes, want 3", n)
	}
}

var anyTestPolicy = JournalPolicy{FlushInterval: time.Second, FlushBytes: 4096, FsyncInterval: time.Second}

// Appends move to a new segment past the segment size; a journal across
// segments reads whole. Remove deletes a segment left with no step's
// records, and erases a removed step's records from one that keeps
// another's: no file holds them after.
func TestSegmentJournalRotationAndRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewSegmentJournals(dir)
	s.size = 600
	defer s.Close()
	c := testCipher(t, testKey(32, 3))
	policy := anyTestPolicy
	policy.Cipher = c
	policy.FlushBytes = 1
	const marker = "QUOKKA-7731"
	long, short := newJournalStep(t), newJournalStep(t)
	jl, err := CreateJournalIn(s, long, "p", policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	js, err := CreateJournalIn(s, short, "p", policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := jl.AppendText("delta", json.RawMessage(`{}`), fmt.Sprintf("%s %d ", marker, i)); err != nil {
			t.Fatal(err)
		}
		if i == 6 {
			if _, err := js.AppendText("delta", json.RawMessage(`{}`), marker); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, j := range []*Journal{jl, js} {
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want the journal across at least 3", len(segs))
	}
	entries, torn, err := ReadJournalIn(context.Background(), s, long, c)
	if err != nil || torn || len(entries) != 12 || JournalText(entries) == "" {
		t.Fatalf("the long journal = %d entries, torn %v, %v; want 12", len(entries), torn, err)
	}
	if _, _, err := ReadJournalIn(context.Background(), s, long, nil); !errors.Is(err, ErrEncrypted) {
		t.Errorf("read without the key = %v, want ErrEncrypted", err)
	}
	// The plain text is in no file, sealed; after the removal the
	// sealed records are not either.
	sealed := viewBytes(t, s, short)
	if n, err := s.Remove(context.Background(), []messages.StepID{short}); err != nil || n != 1 {
		t.Fatalf("Remove = %d, %v; want 1", n, err)
	}
	if found := scanFiles(t, dir, sealed[:40]); len(found) != 0 {
		t.Errorf("the removed journal's records are still in %v", found)
	}
	if entries, _, err := ReadJournalIn(context.Background(), s, long, c); err != nil || len(entries) != 12 {
		t.Fatalf("the journal kept = %d entries, %v; want 12", len(entries), err)
	}
	if n, err := s.Remove(context.Background(), []messages.StepID{long}); err != nil || n != 1 {
		t.Fatalf("Remove = %d, %v; want 1", n, err)
	}
	// Every segment but the one appends go to is gone.
	if left := segmentFiles(t, dir); len(left) != 1 || left[0] != segs[len(segs)-1] {
		t.Errorf("segments left %v, want only the active %s", left, segs[len(segs)-1])
	}
	if got, err := s.List(context.Background()); err != nil || len(got) != 0 {
		t.Errorf("List = %v, %v; want none", got, err)
	}
	// What a new store reads: nothing.
	again := NewSegmentJournals(dir)
	if got, err := again.List(context.Background()); err != nil || len(got) != 0 {
		t.Errorf("List of a new store = %v, %v; want none", got, err)
	}
}

// The journals an earlier version wrote, a file a step, are read, listed
// and removed beside the segments.
func TestSegmentJournalsReadFileJournals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := newJournalStep(t)
	j, err := CreateJournal(dir, old, "p", anyTestPolicy, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendDeltas(t, j, 3)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	s := NewSegmentJournals(dir)
	defer s.Close()
	recent := newJournalStep(t)
	jn, err := CreateJournalIn(s, recent, "p", anyTestPolicy, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendDeltas(t, jn, 1)
	if err := jn.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.List(context.Background()); err != nil || !slices.Equal(got, []messages.StepID{old, recent}) {
		t.Fatalf("List = %v, %v; want [%v %v]", got, err, old, recent)
	}
	if entries, _, err := ReadJournalIn(context.Background(), s, old, nil); err != nil || len(entries) != 3 {
		t.Fatalf("the file journal = %d entries, %v; want 3", len(entries), err)
	}
	if n, err := s.Remove(context.Background(), []messages.StepID{old, recent}); err != nil || n != 2 {
		t.Fatalf("Remove = %d, %v; want 2", n, err)
	}
	if _, err := os.Stat(JournalPath(dir, old)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the file journal after Remove: %v, want gone", err)
	}
	if _, err := RecoverJournalIn(context.Background(), s, recent, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a removed journal = %v, want fs.ErrNotExist", err)
	}
}

// Journals written and synced at once from many goroutines share the
// segment and its fdatasyncs, and each reads back whole.
func TestSegmentJournalsConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewSegmentJournals(dir)
	s.size = 8 << 10 // a few rotations under way too
	defer s.Close()
	const writers, events = 16, 40
	steps := make([]messages.StepID, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		steps[w] = newJournalStep(t)
		wg.Go(func() {
			j, err := NewJournalIn(s, steps[w], "p", JournalPolicy{FlushInterval: time.Hour, FlushBytes: 1, FsyncInterval: time.Nanosecond}, nil)
			if err != nil {
				errs <- err
				return
			}
			for i := range events {
				if _, err := j.AppendText("delta", json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)), fmt.Sprintf("%d.%d ", w, i)); err != nil {
					errs <- err
					return
				}
			}
			errs <- j.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, reader := range []*SegmentJournals{s, NewSegmentJournals(dir)} {
		for w, step := range steps {
			entries, torn, err := ReadJournalIn(context.Background(), reader, step, nil)
			if err != nil || torn || len(entries) != events {
				t.Fatalf("journal %d = %d entries, torn %v, %v; want %d", w, len(entries), torn, err, events)
			}
			var want bytes.Buffer
			for i := range events {
				fmt.Fprintf(&want, "%d.%d ", w, i)
			}
			if got := JournalText(entries); got != want.String() {
				t.Fatalf("journal %d text = %q, want %q", w, got, want.String())
			}
		}
	}
}
