package actors

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// fakeClock is a clock a test moves by hand (Config.Now).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const day = 24 * time.Hour

// retentionRuntime opens a runtime on dir with clock and policy p; its
// job runs only when the test calls RunRetention.
func retentionRuntime(t *testing.T, dir string, clock *fakeClock, p RetentionPolicy) *Runtime {
	t.Helper()
	cfg := testConfig(t, dir, newEvents())
	cfg.Now = clock.Now
	p.Interval = -1
	cfg.Retention = p
	return openRuntime(t, cfg)
}

// sessionWithTurn makes a session of tenant with one answered turn.
func sessionWithTurn(t *testing.T, r *Runtime, tenant, text string) (persistence.SessionRow, persistence.BranchRow) {
	t.Helper()
	s, b, err := r.CreateSessionFor(bg, tenant, text)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := r.Submit(bg, b.ID, text)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, ts)
	return s, b
}

func exists(t *testing.T, r *Runtime, id messages.SessionID) bool {
	t.Helper()
	_, err := r.db.Session(bg, id)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestRetentionDeletesIdleSessions: with a default of 30 days, a session
// idle 31 days goes and one active 10 days ago stays; a tenant's
// retention and a session's own override the default (0: forever); a
// pin, a fork and a turn are activity.
func TestRetentionDeletesIdleSessions(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	var reported []messages.SessionID
	r := retentionRuntime(t, t.TempDir(), clock, RetentionPolicy{
		Idle:    30 * day,
		Tenants: map[string]time.Duration{"acme": 5 * day, "forever": 0},
		Batch:   2,
		Deleted: func(ids []messages.SessionID) { reported = append(reported, ids...) },
	})
	defer r.Close()
	old, _ := sessionWithTurn(t, r, "", "old")                    // default 30d, idle 31d: goes
	pinned, pb := sessionWithTurn(t, r, "", "pinned")             // pinned 20 days ago: stays
	forked, fb := sessionWithTurn(t, r, "", "forked")             // forked 20 days ago: stays
	acme, _ := sessionWithTurn(t, r, "acme", "acme")              // tenant 5d: goes
	forever, _ := sessionWithTurn(t, r, "forever", "forever")     // tenant forever: stays
	own, _ := sessionWithTurn(t, r, "", "own")                    // its own 40d: stays
	ownShort, _ := sessionWithTurn(t, r, "forever", "own-short")  // its own 1d beats its tenant's forever: goes
	ownForever, _ := sessionWithTurn(t, r, "acme", "own-forever") // its own forever beats its tenant's 5d: stays
	fortyDays := 40 * day
	oneDay := day
	zero := time.Duration(0)
	for id, d := range map[messages.SessionID]*time.Duration{own.ID: &fortyDays, ownShort.ID: &oneDay, ownForever.ID: &zero} {
		if _, err := r.SetRetention(bg, id, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.SetRetention(bg, old.ID, &[]time.Duration{-day}[0]); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Errorf("SetRetention(negative) = %v, want ErrInvalidArgument", err)
	}
	clock.Add(11 * day)
	if _, err := r.Pin(bg, pb.ID, "a fact"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fork(bg, fb.ID, [16]byte{}, "later"); err != nil {
		t.Fatal(err)
	}
	recent, rb := sessionWithTurn(t, r, "", "recent")
	clock.Add(20 * day)                          // 31 days after the first turns, 20 after the pin and the fork
	ts, err := r.Submit(bg, rb.ID, "still here") // recent: active now
	if err != nil {
		t.Fatal(err)
	}
	drain(t, ts)

	if in, err := r.Retention(bg, acme.ID); err != nil || in.Idle != 5*day || in.Source != RetentionFromTenant || !in.expired(clock.Now()) {
		t.Errorf("Retention(acme) = %+v, %v", in, err)
	}
	run, err := r.RunRetention(bg)
	if err != nil {
		t.Fatal(err)
	}
	gone := map[messages.SessionID]string{old.ID: "old", acme.ID: "acme", ownShort.ID: "own-short"}
	kept := map[messages.SessionID]string{pinned.ID: "pinned", forked.ID: "forked", forever.ID: "forever", own.ID: "own",
		ownForever.ID: "own-forever", recent.ID: "recent"}
	for id, name := range gone {
		if exists(t, r, id) {
			t.Errorf("session %s (%s) idle past its retention was kept", name, id)
		}
	}
	for id, name := range kept {
		if !exists(t, r, id) {
			t.Errorf("session %s (%s) was deleted", name, id)
		}
	}
	if len(run.Deleted) != 3 || run.Chosen != 3 || len(reported) != 3 {
		t.Errorf("RunRetention = %+v, reported %v; want 3 chosen and deleted", run, reported)
	}
	j, err := r.db.RetentionJob(bg)
	if err != nil || len(j.Pending) != 0 || j.Deleted != 3 || !j.Finished.Equal(clock.Now()) {
		t.Errorf("RetentionJob = %+v, %v; want none pending, 3 deleted", j, err)
	}
	// A second run finds nothing more.
	if run, err := r.RunRetention(bg); err != nil || run.Chosen != 0 {
		t.Errorf("second RunRetention = %+v, %v", run, err)
	}
}

// TestRetentionResumesAfterCrash: a run that recorded its choice and
// stopped before deleting (a crash) is taken up at the next start, whose
// job deletes the chosen session; one active since it was chosen is kept.
func TestRetentionResumesAfterCrash(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := RetentionPolicy{Idle: 7 * day}
	r := retentionRuntime(t, dir, clock, p)
	a, _ := sessionWithTurn(t, r, "", "a")
	b, bb := sessionWithTurn(t, r, "", "b")
	clock.Add(8 * day)
	crash := errors.New("crash")
	retentionHook = func(stage string) error {
		if stage == "chosen" {
			return crash
		}
		return nil
	}
	defer func() { retentionHook = nil }()
	if _, err := r.RunRetention(bg); !errors.Is(err, crash) {
		t.Fatalf("RunRetention = %v, want the crash", err)
	}
	retentionHook = nil
	if !exists(t, r, a.ID) || !exists(t, r, b.ID) {
		t.Fatal("a session was deleted before the crash point")
	}
	j, err := r.db.RetentionJob(bg)
	if err != nil || len(j.Pending) != 2 {
		t.Fatalf("RetentionJob after the crash = %+v, %v; want 2 pending", j, err)
	}
	// b gets a turn before the restart: chosen, but active again.
	ts, err := r.Submit(bg, bb.ID, "back")
	if err != nil {
		t.Fatal(err)
	}
	drain(t, ts)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// The restart takes up the run's choice: a is deleted, b checked
	// again and kept.
	r = retentionRuntime(t, dir, clock, p)
	defer r.Close()
	run, err := r.RunRetention(bg)
	if err != nil {
		t.Fatal(err)
	}
	if run.Resumed != 2 || run.Chosen != 2 || len(run.Deleted) != 1 || run.Deleted[0] != a.ID || run.Kept != 1 {
		t.Errorf("RunRetention after the restart = %+v; want 2 resumed, a deleted, b kept", run)
	}
	if exists(t, r, a.ID) {
		t.Error("session a, chosen before the crash, was not deleted after the restart")
	}
	if !exists(t, r, b.ID) {
		t.Error("session b, active again since it was chosen, was deleted")
	}
	if j, err = r.db.RetentionJob(bg); err != nil || len(j.Pending) != 0 || j.Deleted != 1 {
		t.Errorf("RetentionJob = %+v, %v; want none pending, 1 deleted", j, err)
	}
}

// TestRetentionRunsAtStart: the runtime runs the job when it opens, and
// records when it runs next.
func TestRetentionRunsAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	r := retentionRuntime(t, dir, clock, RetentionPolicy{})
	a, _ := sessionWithTurn(t, r, "", "a")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * day)
	cfg := testConfig(t, dir, newEvents())
	cfg.Now = clock.Now
	cfg.Retention = RetentionPolicy{Idle: day, Interval: time.Hour}
	r = openRuntime(t, cfg)
	defer r.Close()
	deadline := time.Now().Add(10 * time.Second)
	for exists(t, r, a.ID) {
		if time.Now().After(deadline) {
			t.Fatal("the job at start did not delete the idle session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		j, err := r.db.RetentionJob(bg)
		if err != nil {
			t.Fatal(err)
		}
		if !j.Finished.IsZero() {
			if j.Deleted != 1 || !j.NextRun.Equal(j.Finished.Add(time.Hour)) {
				t.Errorf("RetentionJob = %+v; want 1 deleted, the next run an hour after", j)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not finish: %+v", j)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
