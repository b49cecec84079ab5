package persistence

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
)

// Removing journals from a segment that keeps another's frees the
// blocks of their records (a hole): a kept journal does not keep its
// segment's size on disk.
func TestSegmentJournalRemoveFreesBlocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewSegmentJournals(dir)
	defer s.Close()
	kept, gone := newJournalStep(t), newJournalStep(t)
	jk, err := CreateJournalIn(s, kept, "p", anyTestPolicy, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendDeltas(t, jk, 1)
	if err := jk.Close(); err != nil {
		t.Fatal(err)
	}
	jg, err := CreateJournalIn(s, gone, "p", anyTestPolicy, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 4000) + `"`)
	for range 64 {
		if _, err := jg.Append("delta", big); err != nil {
			t.Fatal(err)
		}
	}
	if err := jg.Close(); err != nil {
		t.Fatal(err)
	}
	// Appends go on elsewhere: the segment is an earlier one.
	s.mu.Lock()
	g := s.active
	s.active = nil
	s.retire(g)
	s.mu.Unlock()
	seg := segmentFiles(t, dir)[0]
	before := allocated(t, seg)
	if n, err := s.Remove(context.Background(), []messages.StepID{gone}); err != nil || n != 1 {
		t.Fatalf("Remove = %d, %v", n, err)
	}
	after := allocated(t, seg)
	if before < 200<<10 || after > 16<<10 {
		t.Errorf("blocks of the segment: %d bytes before the removal, %d after; want over 200 KiB, then under 16 KiB", before, after)
	}
	if entries, _, err := ReadJournalIn(context.Background(), NewSegmentJournals(dir), kept, nil); err != nil || len(entries) != 1 {
		t.Errorf("the journal kept = %d entries, %v; want 1", len(entries), err)
	}
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}
