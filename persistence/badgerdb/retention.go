package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/dgraph-io/badger/v4"
)

func retentionJobKey() []byte { return metaKey("retention_job") }

func (g *group) applyRetention(tx *persistence.Tx) error {
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
		row, ok, err := groupRow[persistence.SessionRow](g, k)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: session %s", persistence.ErrRowNotFound, r.Session)
		}
		if r.Idle != nil && *r.Idle < 0 {
			return fmt.Errorf("%w: retention of session %s: %v is negative", persistence.ErrInvalidArgument, r.Session, *r.Idle)
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
func (d *DB) SetSessionRetention(ctx context.Context, id messages.SessionID, idle *time.Duration) (persistence.SessionRow, error) {
	if _, err := d.Commit(ctx, &persistence.Tx{Retention: []persistence.SessionRetention{{Session: id, Idle: idle}}}); err != nil {
		return persistence.SessionRow{}, fmt.Errorf("set the retention of session %s: %w", id, err)
	}
	return d.Session(ctx, id)
}

// RetentionJob returns the retention job's record (the zero record if
// the job never ran).
func (d *DB) RetentionJob(ctx context.Context) (persistence.RetentionJob, error) {
	var j persistence.RetentionJob
	err := d.read(func(txn *badger.Txn) error {
		v, ok, err := txnRow[persistence.RetentionJob](txn, retentionJobKey())
		if ok {
			j = v
		}
		return err
	})
	return j, err
}

// SessionActivity returns session id's row, its last activity and
// whether a turn of it is in flight, read at one timestamp.
func (d *DB) SessionActivity(ctx context.Context, id messages.SessionID) (persistence.SessionActivity, error) {
	var a persistence.SessionActivity
	err := d.read(func(txn *badger.Txn) error {
		sess, ok, err := txnRow[persistence.SessionRow](txn, id16(tableSession, id))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: session %s", persistence.ErrRowNotFound, id)
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
					return fmt.Errorf("%w: activity row of session %s is %d bytes", persistence.ErrCorrupt, id, len(v))
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
			row, ok, err := txnRow[persistence.BranchRow](txn, id16(tableBranchRow, b))
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
				var t persistence.TurnRow
				if err := json.Unmarshal(v, &t); err != nil {
					return fmt.Errorf("%w: turn row of branch %s: %v", persistence.ErrCorrupt, b, err)
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
		return persistence.SessionActivity{}, fmt.Errorf("activity of session %s: %w", id, err)
	}
	return a, nil
}
