package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// TestSessionActivity: the last activity is the latest of the session's
// creation, a fork, a turn row and a touch; a turn without a final
// response is in flight.
func testSessionActivity(t *testing.T, d DB) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := messages.NewID[messages.SessionID](t0)
	b1, b2 := messages.NewID[messages.BranchID](t0), messages.NewID[messages.BranchID](t0)
	commit := func(tx *persistence.Tx) {
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
	commit(&persistence.Tx{NewBranches: []persistence.BranchSpec{{ID: b1}}, Sessions: []persistence.SessionRow{{ID: s, ActiveBranch: b1, Created: t0}},
		Branches: []persistence.BranchRow{{ID: b1, Session: s, Created: t0}}})
	want(t0, false)
	t1 := t0.Add(time.Hour)
	commit(&persistence.Tx{NewTurns: []persistence.TurnRow{{Branch: b1, Seq: 1, ID: messages.NewID[messages.TurnID](t1), Phase: messages.PhaseDone, Updated: t1}}})
	want(t1, false)
	t2 := t1.Add(time.Hour)
	turn := messages.NewID[messages.TurnID](t2)
	commit(&persistence.Tx{NewTurns: []persistence.TurnRow{{Branch: b1, Seq: 2, ID: turn, Phase: messages.PhaseResponding, Updated: t2}}})
	want(t2, true)
	commit(&persistence.Tx{Turns: []persistence.TurnRow{{Branch: b1, Seq: 2, ID: turn, Phase: messages.PhaseFailed, Updated: t2}}})
	want(t2, false)
	t3 := t2.Add(time.Hour)
	commit(&persistence.Tx{NewBranches: []persistence.BranchSpec{{ID: b2}}, Branches: []persistence.BranchRow{{ID: b2, Session: s, Parent: b1, Created: t3}}})
	want(t3, false)
	t4 := t3.Add(time.Hour)
	commit(&persistence.Tx{Touched: []persistence.SessionTouch{{Session: s, At: t4}}})
	commit(&persistence.Tx{Touched: []persistence.SessionTouch{{Session: s, At: t1}}}) // an earlier touch changes nothing
	want(t4, false)

	if _, err := d.SetSessionRetention(ctx, messages.NewID[messages.SessionID](t0), nil); !errors.Is(err, persistence.ErrNotFound) {
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
	j := persistence.RetentionJob{Pending: []messages.SessionID{s}, Started: t4, Deleted: 3}
	commit(&persistence.Tx{RetentionJob: &j})
	if got, err := d.RetentionJob(ctx); err != nil || len(got.Pending) != 1 || got.Deleted != 3 || !got.Started.Equal(t4) {
		t.Errorf("RetentionJob = %+v, %v", got, err)
	}
}
