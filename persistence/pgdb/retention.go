package pgdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Retention on PostgreSQL, as retention.go on Badger: a session's last
// touch (ctx_activity, unix nanoseconds, only ever moved later), its own
// retention (in its row), and the retention job's record (ctx_meta).

const pgRetentionJob = "retention_job"

// applyRetention applies tx's touches, retentions and job record, after
// its sessions (own.sessions) and before its imports, as applyTx does.
func (g *pgGroup) applyRetention(tx *persistence.Tx, rows *pgRows, own pgRowSet, ownX *pgExtra) error {
	for _, t := range tx.Touched {
		at := t.At.UnixNano()
		if prev, ok := ownX.touched[t.Session]; !ok || at > prev {
			ownX.touched[t.Session] = at
		}
	}
	for _, r := range tx.Retention {
		k := pgKey{id: r.Session}
		var data []byte
		if w, ok := own.sessions[k]; ok {
			data = w.data
		} else if w, ok := rows.w.sessions[k]; ok {
			data = w.data
		} else if err := g.readOne(func(v []byte) error { data = v; return nil },
			`SELECT data FROM ctx_sessions WHERE id = $1`, r.Session[:]); err != nil {
			return err
		}
		if data == nil {
			return fmt.Errorf("%w: session %s", persistence.ErrRowNotFound, r.Session)
		}
		if r.Idle != nil && *r.Idle < 0 {
			return fmt.Errorf("%w: retention of session %s: %v is negative", persistence.ErrInvalidArgument, r.Session, *r.Idle)
		}
		var row persistence.SessionRow
		if err := json.Unmarshal(data, &row); err != nil {
			return fmt.Errorf("%w: session %s: %v", persistence.ErrCorrupt, r.Session, err)
		}
		row.Retention = r.Idle
		b, err := encodeJSONRow(row)
		if err != nil {
			return err
		}
		own.sessions[k] = pgRow{data: b, tenant: row.TenantName()}
	}
	if j := tx.RetentionJob; j != nil {
		b, err := encodeJSONRow(j)
		if err != nil {
			return err
		}
		ownX.retentionJob = b
	}
	return nil
}

// queueRetention adds x's touches (in session order) and job record to b.
func (x *pgExtra) queueRetention(b *pgx.Batch, checks []pgCheck) []pgCheck {
	ss := make([]messages.SessionID, 0, len(x.touched))
	for s := range x.touched {
		ss = append(ss, s)
	}
	slices.SortFunc(ss, func(a, b messages.SessionID) int { return pgKey{id: a}.compare(pgKey{id: b}) })
	for _, s := range ss {
		b.Queue(`INSERT INTO ctx_activity (session, at) VALUES ($1, $2)
			ON CONFLICT (session) DO UPDATE SET at = GREATEST(ctx_activity.at, excluded.at)`, s[:], x.touched[s])
		checks = append(checks, pgCheck{"touch session " + s.String(), false})
	}
	if x.retentionJob != nil {
		b.Queue(`INSERT INTO ctx_meta (name, data) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data`, pgRetentionJob, x.retentionJob)
		checks = append(checks, pgCheck{"write the retention job's record", false})
	}
	return checks
}

// SetSessionRetention sets session id's own retention (nil: its
// tenant's; 0: forever) and returns its row.
func (d *PGDB) SetSessionRetention(ctx context.Context, id messages.SessionID, idle *time.Duration) (persistence.SessionRow, error) {
	if _, err := d.Commit(ctx, &persistence.Tx{Retention: []persistence.SessionRetention{{Session: id, Idle: idle}}}); err != nil {
		return persistence.SessionRow{}, fmt.Errorf("set the retention of session %s: %w", id, err)
	}
	return d.Session(ctx, id)
}

// RetentionJob returns the retention job's record (the zero record if
// the job never ran).
func (d *PGDB) RetentionJob(ctx context.Context) (persistence.RetentionJob, error) {
	j, err := pgGetRow[persistence.RetentionJob](ctx, d, "read the retention job's record", errNoRow,
		`SELECT data FROM ctx_meta WHERE name = $1`, pgRetentionJob)
	if errors.Is(err, errNoRow) {
		return persistence.RetentionJob{}, nil
	}
	return j, err
}

var errNoRow = errors.New("persistence: no row")

// SessionActivity returns session id's row, its last activity and
// whether a turn of it is in flight, read in one statement (one
// snapshot).
func (d *PGDB) SessionActivity(ctx context.Context, id messages.SessionID) (persistence.SessionActivity, error) {
	if err := d.alive(); err != nil {
		return persistence.SessionActivity{}, err
	}
	// The session row, its touch, and for each of its branches (in id
	// order) its row and its last turn row.
	rows, err := d.pool.Query(ctx, `
		SELECT 0, s.data, (SELECT at FROM ctx_activity WHERE session = $1), NULL::BYTEA
			FROM ctx_sessions s WHERE s.id = $1
		UNION ALL
		SELECT 1, b.data, NULL::BIGINT,
			(SELECT t.data FROM ctx_turn_rows t WHERE t.branch = b.id ORDER BY t.seq DESC LIMIT 1)
			FROM ctx_branches b WHERE b.session_id = $1
		ORDER BY 1`, id[:])
	what := "activity of session " + id.String()
	if err != nil {
		return persistence.SessionActivity{}, d.readErr(what, err)
	}
	defer rows.Close()
	var (
		a     persistence.SessionActivity
		found bool
	)
	later := func(t time.Time) {
		if t.After(a.Last) {
			a.Last = t
		}
	}
	for rows.Next() {
		var (
			kind      int
			data, tr  []byte
			touchedAt *int64
		)
		if err := rows.Scan(&kind, &data, &touchedAt, &tr); err != nil {
			return persistence.SessionActivity{}, d.readErr(what, err)
		}
		if kind == 0 {
			found = true
			if err := json.Unmarshal(data, &a.Session); err != nil {
				return persistence.SessionActivity{}, fmt.Errorf("%s: %w: %v", what, persistence.ErrCorrupt, err)
			}
			later(a.Session.Created)
			if touchedAt != nil {
				later(time.Unix(0, *touchedAt))
			}
			continue
		}
		var b persistence.BranchRow
		if err := json.Unmarshal(data, &b); err != nil {
			return persistence.SessionActivity{}, fmt.Errorf("%s: %w: %v", what, persistence.ErrCorrupt, err)
		}
		later(b.Created)
		if tr != nil {
			var t persistence.TurnRow
			if err := json.Unmarshal(tr, &t); err != nil {
				return persistence.SessionActivity{}, fmt.Errorf("%s: %w: turn row of branch %s: %v", what, persistence.ErrCorrupt, b.ID, err)
			}
			later(t.Updated)
			if t.Phase < messages.PhaseResponseFinalized {
				a.InFlight = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return persistence.SessionActivity{}, d.readErr(what, err)
	}
	if !found {
		return persistence.SessionActivity{}, fmt.Errorf("%s: %w: session %s", what, persistence.ErrRowNotFound, id)
	}
	return a, nil
}
