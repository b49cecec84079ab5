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

// TestSessionActivity: the last activity is the latest of the session's
// creation, a fork, a turn row and a touch; a turn without a final
// response is in flight.
func TestSessionActivity(t *testing.T) { forEachDB(t, testSessionActivity) }

func testSessionActivity(t *testing.T, d lifecycleDB) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := messages.NewID[messages.SessionID](t0)
	b1, b2 := messages.NewID[messages.BranchID](t0), messages.NewID[messages.BranchID](t0)
	commit := func(tx *Tx) {
		t.Helper()
		if _, err := d.Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	want := func(last time.Time, inFlight bool) {
		t.Helper()
		a, err := d.SessionActivity(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Last.Equal(last) || a.InFlight != inFlight {
			t.Errorf("SessionActivity = last %v, in flight %v; want %v, %v", a.Last, a.InFlight, last, inFlight)
		}
	}
	commit(&Tx{NewBranches: []BranchSpec{{ID: b1}}, Sessions: []SessionRow{{ID: s, ActiveBranch: b1, Created: t0}},
		Branches: []BranchRow{{ID: b1, Session: s, Created: t0}}})
	want(t0, false)
	t1 := t0.Add(time.Hour)
	commit(&Tx{NewTurns: []TurnRow{{Branch: b1, Seq: 1, ID: messages.NewID[messages.TurnID](t1), Phase: messages.PhaseDone, Updated: t1}}})
	want(t1, false)
	t2 := t1.Add(time.Hour)
	turn := messages.NewID[messages.TurnID](t2)
	commit(&Tx{NewTurns: []TurnRow{{Branch: b1, Seq: 2, ID: turn, Phase: messages.PhaseResponding, Updated: t2}}})
	want(t2, true)
	commit(&Tx{Turns: []TurnRow{{Branch: b1, Seq: 2, ID: turn, Phase: messages.PhaseFailed, Updated: t2}}})
	want(t2, false)
	t3 := t2.Add(time.Hour)
	commit(&Tx{NewBranches: []BranchSpec{{ID: b2}}, Branches: []BranchRow{{ID: b2, Session: s, Parent: b1, Created: t3}}})
	want(t3, false)
	t4 := t3.Add(time.Hour)
	commit(&Tx{Touched: []SessionTouch{{Session: s, At: t4}}})
	commit(&Tx{Touched: []SessionTouch{{Session: s, At: t1}}}) // an earlier touch changes nothing
	want(t4, false)

	if _, err := d.SetSessionRetention(ctx, messages.NewID[messages.SessionID](t0), nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetSessionRetention(missing) = %v, want ErrNotFound", err)
	}
	week := 7 * 24 * time.Hour
	row, err := d.SetSessionRetention(ctx, s, &week)
	if err != nil || row.Retention == nil || *row.Retention != week || row.ActiveBranch != b1 {
		t.Fatalf("SetSessionRetention = %+v, %v", row, err)
	}
	if row, err = d.SetSessionRetention(ctx, s, nil); err != nil || row.Retention != nil {
		t.Errorf("SetSessionRetention(nil) = %+v, %v", row, err)
	}
	j := RetentionJob{Pending: []messages.SessionID{s}, Started: t4, Deleted: 3}
	commit(&Tx{RetentionJob: &j})
	if got, err := d.RetentionJob(ctx); err != nil || len(got.Pending) != 1 || got.Deleted != 3 || !got.Started.Equal(t4) {
		t.Errorf("RetentionJob = %+v, %v", got, err)
	}
}
