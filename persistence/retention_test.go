package persistence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// TestPurgeSessionsInOneDrop deletes two sessions in one call: neither's
// marker is left in any file (any table), a kept session's is; a batch naming a
// session that does not exist deletes nothing.
func TestPurgeSessionsInOneDrop(t *testing.T) { forEachPurgeDB(t, testPurgeSessionsInOneDrop) }

func testPurgeSessionsInOneDrop(t *testing.T, d lifecycleDB, e purgeEnv) {
	ctx := context.Background()
	a, b, kept := "MARKER-RET-A-19c0", "MARKER-RET-B-7e22", "MARKER-RET-KEPT-3d11"
	fa := writeSession(t, d, a, 2)
	fb := writeSession(t, d, b, 3)
	fk := writeSession(t, d, kept, 1)
	// An activity row each, which goes with its session.
	for _, f := range []purgeFixture{fa, fb} {
		if _, err := d.Commit(ctx, &Tx{Touched: []SessionTouch{{Session: f.session, At: time.Now()}}}); err != nil {
			t.Fatal(err)
		}
	}
	missing := messages.NewID[messages.SessionID](time.Now())
	_, err := d.PurgeSessions(ctx, []PurgeSpec{{Session: fa.session, DeleteSession: true}, {Session: missing, DeleteSession: true}})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("PurgeSessions(with a missing session) = %v, want ErrNotFound", err)
	}
	if _, err := d.Session(ctx, fa.session); err != nil {
		t.Fatalf("a failed batch deleted session a: %v", err)
	}
	if _, err := d.PurgeSessions(ctx, []PurgeSpec{{Session: fa.session, DeleteSession: true}, {Session: fa.session, DeleteSession: true}}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("PurgeSessions(a twice) = %v, want ErrInvalidArgument", err)
	}
	res, err := d.PurgeSessions(ctx, []PurgeSpec{
		{Session: fa.session, DeleteSession: true, Actors: []string{fa.actor}},
		{Session: fb.session, DeleteSession: true, Actors: []string{fb.actor}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Turns != 2 || res[1].Turns != 3 || res[0].Blobs != 5 {
		t.Errorf("PurgeSessions = %+v, want 2 and 3 turns, 5 blobs on the first", res)
	}
	for _, m := range []string{a, b} {
		if got := e.holding(t, m); len(got) > 0 {
			t.Errorf("after the delete %s is still in %v", m, got)
		}
	}
	for _, f := range []purgeFixture{fa, fb} {
		if _, err := d.SessionActivity(ctx, f.session); !errors.Is(err, ErrNotFound) {
			t.Errorf("SessionActivity(deleted) = %v, want ErrNotFound", err)
		}
	}
	if got := e.holding(t, kept); len(got) == 0 {
		t.Errorf("no file holds the kept session's %s", kept)
	}
	if _, err := d.Session(ctx, fk.session); err != nil {
		t.Errorf("kept session: %v", err)
	}
}
