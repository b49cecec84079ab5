package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"

	"context"
	"slices"
	"strings"
	"testing"
)

// TestPurgeValueLogAfterReopen: values written into the value log before a
// clean close, then deleted after a
// reopen, leave no file holding them, and the delete says the value log is
// rewritten only when none does.
func TestPurgeValueLogAfterReopen(t *testing.T) {
	for _, name := range []string{"close"} {
		t.Run(name, func(t *testing.T) { // a crash: TestServeDeleteAfterRestartLeavesNoByte
			t.Parallel()
			dir := t.TempDir()
			d, err := Open(TestOptions(dir))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			gone, kept := "VLOG-GONE-"+name, "VLOG-KEPT-"+name
			fk := storetest.WriteSession(t, d, kept, 1)
			appendBig(t, d, fk, 2, bigPayload(kept, 100<<10))
			fg := storetest.WriteSession(t, d, gone, 1)
			appendBig(t, d, fg, 2, bigPayload(gone, 100<<10))
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if got := filesHolding(t, dir, []byte(gone)); !slices.ContainsFunc(got, func(f string) bool { return strings.HasSuffix(f, ".vlog") }) {
				t.Fatalf("before the delete no value-log file holds %s (files: %v)", gone, got)
			}
			if d, err = Open(TestOptions(dir)); err != nil {
				t.Fatal(err)
			}
			defer func() { d.Close() }()
			res, err := d.Purge(ctx, persistence.PurgeSpec{Session: fg.Session, DeleteSession: true, Actors: []string{fg.Actor}})
			if err != nil {
				t.Fatal(err)
			}
			if got := filesHolding(t, dir, []byte(gone)); len(got) > 0 {
				t.Errorf("after the delete (value log pending %v) %s is in %v", res.ValueLogPending, gone, got)
			}
			if got := filesHolding(t, dir, []byte(kept)); len(got) == 0 {
				t.Errorf("the kept marker is in no file")
			}
		})
	}
}
