package persistence

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/contextinfinity/ctxinf/messages"
)

// Retention: sessions idle longer than their retention are
// deleted by a job of the runtime (actors/retention.go). The store keeps
// what the job decides on and what lets it resume:
//
//   - a session's own retention (SessionRow.Retention, Tx.Retention);
//   - its last activity (SessionActivity): read from the rows a turn or a
//     fork writes, and from a per-session activity row for what writes
//     none (a pin: Tx.Touched);
//   - the job's record (RetentionJob): the sessions a run chose and has
//     not deleted yet, so that a run cut short by a crash resumes with
//     them. Each delete is a Purge, all or nothing by its own marker.

// SessionTouch is activity on a session at At (Tx.Touched).
type SessionTouch struct {
	Session messages.SessionID
	At      time.Time
}

// SessionRetention sets a session's own retention (Tx.Retention): Idle
// nil returns it to its tenant's; 0 keeps it forever.
type SessionRetention struct {
	Session messages.SessionID
	Idle    *time.Duration
}

// RetentionJob is the retention job's record in the store.
type RetentionJob struct {
	// Pending are the sessions the run under way chose to delete and has
	// not deleted yet (empty between runs): a run cut short resumes with
	// them, each checked again (one active since is kept).
	Pending []messages.SessionID `json:"pending,omitempty"`
	// Started is when the run under way (or the last) started; Finished
	// when the last run ended, NextRun when the next is due.
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	NextRun  time.Time `json:"next_run,omitzero"`
	// Deleted counts the sessions the job has deleted, over all runs.
	Deleted uint64 `json:"deleted,omitempty"`
}

// SessionActivity is what DB.SessionActivity knows of a session.
type SessionActivity struct {
	Session SessionRow
	// Last is the session's latest activity: the latest of its creation,
	// its branches' creation (forks), its turn rows' last writes (a turn
	// accepted, answered, failed, folded) and its touches (pins).
	Last time.Time
	// InFlight: a turn of the session has no final response yet
	// (accepted, context prepared or responding).
	InFlight bool
}

func retentionJobKey() []byte { return metaKey("retention_job") }

func (g *group) applyRetention(tx *Tx) error {
	for _, t := range tx.Touched {
		k := id16(tableActivity, t.Session)
		at := t.At.UnixNano()
		prev, ok := g.lastEntry(k)
		if !ok {
			item, err := g.txn.Get(k)
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
			case err != nil:
				return err
			default:
				if prev, err = item.ValueCopy(nil); err != nil {
					return err
				}
			}
		}
		if len(prev) == 8 && int64(binary.BigEndian.Uint64(prev)) >= at {
			continue
		}
		g.setRow(k, binary.BigEndian.AppendUint64(nil, uint64(at)))
	}
	for _, r := range tx.Retention {
		k := id16(tableSession, r.Session)
		row, ok, err := groupRow[SessionRow](g, k)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: session %s", ErrRowNotFound, r.Session)
		}
		if r.Idle != nil && *r.Idle < 0 {
			return fmt.Errorf("%w: retention of session %s: %v is negative", ErrInvalidArgument, r.Session, *r.Idle)
		}
		row.Retention = r.Idle
		if err := g.setJSON(k, row); err != nil {
			return err
		}
	}
	if j := tx.RetentionJob; j != nil {
		if err := g.setJSON(retentionJobKey(), j); err != nil {
			return err
		}
	}
	return nil
}

// SetSessionRetention sets session id's own retention (nil: its
// tenant's; 0: forever) and returns its row.
func (d *DB) SetSessionRetention(ctx context.Context, id messages.SessionID, idle *time.Duration) (SessionRow, error) {
	if _, err := d.Commit(ctx, &Tx{Retention: []SessionRetention{{Session: id, Idle: idle}}}); err != nil {
		return SessionRow{}, fmt.Errorf("set the retention of session %s: %w", id, err)
	}
	return d.Session(ctx, id)
}

// RetentionJob returns the retention job's record (the zero record if
// the job never ran).
func (d *DB) RetentionJob(ctx context.Context) (RetentionJob, error) {
	var j RetentionJob
	err := d.read(func(txn *badger.Txn) error {
		v, ok, err := txnRow[RetentionJob](txn, retentionJobKey())
		if ok {
			j = v
		}
		return err
	})
	return j, err
}

// SessionActivity returns session id's row, its last activity and
// whether a turn of it is in flight, read at one timestamp.
func (d *DB) SessionActivity(ctx context.Context, id messages.SessionID) (SessionActivity, error) {
	var a SessionActivity
	err := d.read(func(txn *badger.Txn) error {
		sess, ok, err := txnRow[SessionRow](txn, id16(tableSession, id))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: session %s", ErrRowNotFound, id)
		}
		a.Session, a.Last = sess, sess.Created
		later := func(t time.Time) {
			if t.After(a.Last) {
				a.Last = t
			}
		}
		item, err := txn.Get(id16(tableActivity, id))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			err := item.Value(func(v []byte) error {
				if len(v) != 8 {
					return fmt.Errorf("%w: activity row of session %s is %d bytes", ErrCorrupt, id, len(v))
				}
				later(time.Unix(0, int64(binary.BigEndian.Uint64(v))))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return eachRow(txn, id16(tableSessBranch, id), false, func(k, _ []byte) error {
			b := messages.BranchID(k[17:33])
			row, ok, err := txnRow[BranchRow](txn, id16(tableBranchRow, b))
			if err != nil {
				return err
			}
			if ok {
				later(row.Created)
			}
			// The branch's last turn row: turns run in seq order, so a
			// turn in flight is the last or before one still queued.
			pre := id16(tableTurnRow, b)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: pre, Reverse: true, PrefetchValues: false})
			defer it.Close()
			it.Seek(append(append([]byte{}, pre...), 0xff))
			if !it.Valid() {
				return nil
			}
			return it.Item().Value(func(v []byte) error {
				var t TurnRow
				if err := json.Unmarshal(v, &t); err != nil {
					return fmt.Errorf("%w: turn row of branch %s: %v", ErrCorrupt, b, err)
				}
				later(t.Updated)
				if t.Phase < messages.PhaseResponseFinalized {
					a.InFlight = true
				}
				return nil
			})
		})
	})
	if err != nil {
		return SessionActivity{}, fmt.Errorf("activity of session %s: %w", id, err)
	}
	return a, nil
}
