package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Retention: a session idle longer than its retention is
// deleted for good, as DeleteSession deletes it, by a job the runtime
// runs at start and every RetentionPolicy.Interval.
//
// A session's retention is its own (SessionRow.Retention, set with
// SetRetention), else its tenant's (RetentionPolicy.Tenants), else the
// runtime's (RetentionPolicy.Idle); 0 keeps it forever. It is idle since
// its last activity (persistence.SessionActivity: a turn accepted,
// answered, failed or folded, a fork, a pin), and a session with a turn
// in flight is never idle.
//
// The job is durable. A run first records the sessions it chose in the
// store (persistence.RetentionJob.Pending), then deletes them in batches
// of RetentionPolicy.Batch, each batch one purge (one drop of the store:
// its writes wait once per batch, not once per session), and records
// after each batch what is left. A purge is all or nothing (its marker
// finishes it at the next open if a crash cuts it short), so a session
// is deleted fully and once; a run cut short resumes at the next start
// with the sessions it had chosen and not deleted, each checked again: a
// session active since it was chosen is kept.

// RetentionPolicy is the runtime's retention (Config.Retention).
type RetentionPolicy struct {
	// Idle is the retention of a session of a tenant without one of its
	// own: how long it may stay idle; 0 keeps it forever.
	Idle time.Duration
	// Tenants are tenants' retentions (by tenant name), each overriding
	// Idle for its sessions; 0 keeps them forever.
	Tenants map[string]time.Duration
	// Interval is how often the job runs; it runs at start too.
	// Negative: never (RunRetention still works).
	Interval time.Duration
	// Batch is how many sessions one purge deletes; required when the
	// job runs.
	Batch int
	// Deleted, if set, is called with the sessions each batch deleted.
	// It must not block.
	Deleted func(ids []messages.SessionID)
}

// Retention sources: where a session's retention comes from.
const (
	RetentionFromSession = "session"
	RetentionFromTenant  = "tenant"
	RetentionFromDefault = "default"
)

// retentionOf returns session s's retention and where it comes from.
func (p RetentionPolicy) retentionOf(s persistence.SessionRow) (time.Duration, string) {
	if s.Retention != nil {
		return *s.Retention, RetentionFromSession
	}
	if d, ok := p.Tenants[s.TenantName()]; ok {
		return d, RetentionFromTenant
	}
	return p.Idle, RetentionFromDefault
}

// RetentionInfo is what the runtime knows of a session's retention.
type RetentionInfo struct {
	Session messages.SessionID
	// Own is the session's own retention (nil: none, its tenant's
	// applies); Idle the one that applies, Source where it comes from.
	Own    *time.Duration
	Idle   time.Duration
	Source string
	// LastActivity is the session's last activity; Expires when it
	// becomes idle past its retention (zero when it is kept forever).
	LastActivity time.Time
	Expires      time.Time
	InFlight     bool
}

// SetRetention sets session id's own retention (nil: its tenant's
// applies again; 0: kept forever) and returns what applies now.
func (r *Runtime) SetRetention(ctx context.Context, id messages.SessionID, idle *time.Duration) (RetentionInfo, error) {
	if idle != nil && *idle < 0 {
		return RetentionInfo{}, fmt.Errorf("%w: retention: %v is negative", persistence.ErrInvalidArgument, *idle)
	}
	if _, err := r.purger.SetSessionRetention(ctx, id, idle); err != nil {
		return RetentionInfo{}, err
	}
	return r.Retention(ctx, id)
}

// Retention returns session id's retention and last activity.
func (r *Runtime) Retention(ctx context.Context, id messages.SessionID) (RetentionInfo, error) {
	a, err := r.purger.SessionActivity(ctx, id)
	if err != nil {
		return RetentionInfo{}, err
	}
	return r.retentionInfo(a), nil
}

func (r *Runtime) retentionInfo(a persistence.SessionActivity) RetentionInfo {
	idle, src := r.cfg.Retention.retentionOf(a.Session)
	in := RetentionInfo{Session: a.Session.ID, Own: a.Session.Retention, Idle: idle, Source: src,
		LastActivity: a.Last, InFlight: a.InFlight}
	if idle > 0 {
		in.Expires = a.Last.Add(idle)
	}
	return in
}

// expired says whether a session is idle past its retention at now.
func (in RetentionInfo) expired(now time.Time) bool {
	return in.Idle > 0 && !in.InFlight && !now.Before(in.Expires)
}

// RetentionRun says what one run of the retention job did.
type RetentionRun struct {
	Resumed int                  // sessions chosen by a run cut short, taken up
	Chosen  int                  // sessions chosen (the resumed ones included)
	Deleted []messages.SessionID // sessions deleted
	Kept    int                  // chosen but active again (or gone) when their turn came
}

// retentionHook, when set (tests), is called by a run after it recorded
// its choice (stage "chosen") and after each batch ("batch"); an error
// ends the run there, as a crash would.
var retentionHook func(stage string) error

// RunRetention runs the retention job once: it takes up the sessions a
// run cut short had chosen, chooses the sessions idle past their
// retention, and deletes them in batches (see above). A failed batch is
// logged and the run goes on with the next.
func (r *Runtime) RunRetention(ctx context.Context) (RetentionRun, error) {
	r.retentionMu.Lock()
	defer r.retentionMu.Unlock()
	var run RetentionRun
	job, err := r.purger.RetentionJob(ctx)
	if err != nil {
		return run, fmt.Errorf("retention: %w", err)
	}
	now := r.cfg.Now()
	// In a cluster a member takes up only its own sessions of a run cut
	// short (whichever member ran it): its owner's next run chooses the
	// others again if they are still idle.
	var chosen []messages.SessionID
	for _, id := range job.Pending {
		if r.owns(id) {
			chosen = append(chosen, id)
		}
	}
	run.Resumed = len(chosen)
	if run.Resumed > 0 {
		r.log.Warn().Int("sessions", run.Resumed).Time("started", job.Started).
			Msg("retention: taking up the sessions a run cut short had chosen")
	}
	sessions, err := r.purger.Sessions(ctx)
	if err != nil {
		return run, fmt.Errorf("retention: %w", err)
	}
	for _, s := range sessions {
		if slices.Contains(job.Pending, s.ID) {
			continue
		}
		if !r.owns(s.ID) {
			continue // its owner's job (in a cluster, each member deletes its own sessions)
		}
		if idle, _ := r.cfg.Retention.retentionOf(s); idle <= 0 || now.Sub(s.Created) < idle {
			continue // kept forever, or too young to be idle that long
		}
		a, err := r.purger.SessionActivity(ctx, s.ID)
		if errors.Is(err, persistence.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return run, fmt.Errorf("retention: %w", err)
		}
		if r.retentionInfo(a).expired(now) {
			chosen = append(chosen, s.ID)
		}
	}
	run.Chosen = len(chosen)
	if run.Chosen == 0 {
		return run, nil // nothing to record
	}
	job.Pending, job.Started = chosen, now
	if err := r.saveRetentionJob(ctx, job); err != nil {
		return run, err
	}
	if err := hook("chosen"); err != nil {
		return run, err
	}
	batch := r.cfg.Retention.Batch
	for len(job.Pending) > 0 {
		if err := ctx.Err(); err != nil {
			return run, err
		}
		n := min(batch, len(job.Pending))
		deleted, kept, err := r.deleteIdle(ctx, job.Pending[:n])
		if err != nil {
			if ctx.Err() != nil {
				return run, err
			}
			// The batch's sessions stay chosen for the next run.
			r.log.Warn().Err(err).Int("sessions", n).Msg("retention: a batch failed; its sessions are tried again at the next run")
			job.Pending = append(slices.Clone(job.Pending[n:]), job.Pending[:n]...)
			if err := r.saveRetentionJob(ctx, job); err != nil {
				return run, err
			}
			break
		}
		run.Deleted = append(run.Deleted, deleted...)
		run.Kept += kept
		job.Pending = slices.Clone(job.Pending[n:])
		job.Deleted += uint64(len(deleted))
		if err := r.saveRetentionJob(ctx, job); err != nil {
			return run, err
		}
		if len(deleted) > 0 {
			ids := make([]string, len(deleted))
			for i, id := range deleted {
				ids[i] = id.String()
			}
			r.log.Info().Strs("sessions", ids).Msg("retention: deleted sessions idle past their retention")
			if f := r.cfg.Retention.Deleted; f != nil {
				f(deleted)
			}
		}
		if err := hook("batch"); err != nil {
			return run, err
		}
	}
	if len(job.Pending) == 0 {
		job.Finished = r.cfg.Now()
		if iv := r.cfg.Retention.Interval; iv > 0 {
			job.NextRun = job.Finished.Add(iv)
		}
		if err := r.saveRetentionJob(ctx, job); err != nil {
			return run, err
		}
	}
	return run, nil
}

func hook(stage string) error {
	if retentionHook != nil {
		return retentionHook(stage)
	}
	return nil
}

func (r *Runtime) saveRetentionJob(ctx context.Context, j persistence.RetentionJob) error {
	if _, err := r.purger.Commit(context.WithoutCancel(ctx), &persistence.Tx{RetentionJob: &j}); err != nil {
		return fmt.Errorf("retention: record the job: %w", err)
	}
	return nil
}

// deleteIdle deletes those of ids still idle past their retention, in
// one purge, and returns them and how many it kept. Each is checked
// before its branches are marked deleted, and again once their actors
// have stopped (a turn that came in between keeps its session).
func (r *Runtime) deleteIdle(ctx context.Context, ids []messages.SessionID) ([]messages.SessionID, int, error) {
	type victim struct {
		id       messages.SessionID
		branches []messages.BranchID
		undo     func()
	}
	check := func(id messages.SessionID) (bool, error) {
		a, err := r.purger.SessionActivity(ctx, id)
		if errors.Is(err, persistence.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return r.retentionInfo(a).expired(r.cfg.Now()), nil
	}
	var vs []victim
	undoAll := func() {
		for _, v := range vs {
			v.undo()
		}
	}
	kept := 0
	for _, id := range ids {
		ok, err := check(id)
		if err != nil {
			undoAll()
			return nil, 0, err
		}
		if !ok {
			kept++
			continue
		}
		bs, err := r.purger.Branches(ctx, id)
		if err != nil {
			undoAll()
			return nil, 0, err
		}
		v := victim{id: id}
		for _, b := range bs {
			v.branches = append(v.branches, b.ID)
		}
		v.undo = r.markDeleted(v.branches)
		vs = append(vs, v)
	}
	var specs []persistence.PurgeSpec
	var left []victim
	for _, v := range vs {
		for _, b := range v.branches {
			if err := r.stopBranch(ctx, b); err != nil {
				undoAll()
				return nil, 0, err
			}
		}
		if ok, err := check(v.id); err != nil || !ok {
			if err != nil {
				undoAll()
				return nil, 0, err
			}
			v.undo()
			kept++
			continue
		}
		spec := persistence.PurgeSpec{Session: v.id, DeleteSession: true}
		for _, b := range v.branches {
			spec.Actors = append(spec.Actors, r.actorName(b))
		}
		specs = append(specs, spec)
		left = append(left, v)
	}
	if len(specs) == 0 {
		return nil, kept, nil
	}
	prs, err := r.purger.PurgeSessions(ctx, specs)
	if err != nil {
		for _, v := range left {
			v.undo() // nothing was deleted (or the store failed: a reopen finishes it)
		}
		return nil, 0, err
	}
	deleted := make([]messages.SessionID, 0, len(left))
	for i, v := range left {
		if _, err := r.purged(prs[i], v.id, v.branches); err != nil {
			return deleted, kept, err
		}
		deleted = append(deleted, v.id)
	}
	return deleted, kept, nil
}

// retentionLoop runs the job at start and then every Interval until the
// runtime closes, which also ends a run under way between batches.
func (r *Runtime) retentionLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(r.cfg.Retention.Interval)
	defer t.Stop()
	for {
		run, err := r.RunRetention(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn().Err(err).Int("deleted", len(run.Deleted)).Msg("retention")
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// MaxRetention is the longest retention: 36500 days.
const MaxRetention = 36500 * 24 * time.Hour

// ParseRetention parses a retention: a whole number of days ("30d"), a
// Go duration ("36h", "90s") or "0" (kept forever); one other than 0 is
// 1s to 36500d.
func ParseRetention(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 0 || days > 36500 {
			return 0, fmt.Errorf("%w: %q is not a whole number of days from 0 to 36500", persistence.ErrInvalidArgument, s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%w: %q is not a duration: write days (\"30d\"), a Go duration (\"36h\") or 0", persistence.ErrInvalidArgument, s)
		}
	}
	if d != 0 && (d < time.Second || d > MaxRetention) {
		return 0, fmt.Errorf("%w: %q is out of range: 0 (kept forever) or 1s to 36500d", persistence.ErrInvalidArgument, s)
	}
	return d, nil
}

// FormatRetention writes d as ParseRetention reads it: whole days as
// "30d", 0 as "0", others as Go durations.
func FormatRetention(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}
