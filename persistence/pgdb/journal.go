package pgdb

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The stream journals on PostgreSQL: the rows of ctx_journals, one per
// sync of a step's journal, keyed by the step and the offset of their
// first byte in the journal, which is their bytes concatenated in offset
// order. A journal's bytes are durable once their row is committed, so a
// runtime that dies mid-stream leaves, in the database every member
// shares, everything its journal had synced: another member recovers the
// step's partial output from there.
//
// A sink's writes wait in its memory; its Sync commits them as one row
// (one INSERT, retried on 40001 and 40P01). An INSERT whose answer never
// came (the connection broke) may have committed: it is tried again, and
// a row already at its (step, off) that holds the same bytes is taken for
// its own, so a range is never stored or counted twice. Any other row
// there is another writer's: at offset 0 an error wrapping fs.ErrExist
// (the step's journal was created twice), later ErrCorrupt.

// Journals returns the store's stream journals: the rows of ctx_journals,
// shared by every runtime on the database.
func (d *PGDB) Journals() persistence.JournalStore { return pgJournals{d.pgStore} }

type pgJournals struct{ s *pgStore }

func (j pgJournals) Name(step messages.StepID) string {
	return "postgres ctx_journals step " + step.String()
}

func (j pgJournals) Sink(step messages.StepID) persistence.JournalSink {
	return &pgJournalSink{s: j.s, step: step}
}

// Open reads the step's rows, checking that each starts where the one
// before ended.
func (j pgJournals) Open(ctx context.Context, step messages.StepID) (io.ReadCloser, error) {
	if err := j.s.alive(); err != nil {
		return nil, err
	}
	rows, err := j.s.pool.Query(ctx, `SELECT off, bytes FROM ctx_journals WHERE step = $1 ORDER BY off`, step[:])
	if err != nil {
		return nil, j.s.readErr("read journal "+step.String(), err)
	}
	var (
		data  []byte
		found bool
		off   int64
		chunk []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&off, &chunk}, func() error {
		if off != int64(len(data)) {
			return fmt.Errorf("%w: journal of step %s: a row at offset %d after %d bytes", persistence.ErrCorrupt, step, off, len(data))
		}
		found = true
		data = append(data, chunk...)
		return nil
	})
	if err != nil {
		return nil, j.s.readErr("read journal "+step.String(), err)
	}
	if !found {
		return nil, fmt.Errorf("journal of step %s: %w", step, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (j pgJournals) List(ctx context.Context) ([]messages.StepID, error) {
	ids, err := pgScanIDs(ctx, j.s, "list journals", `SELECT DISTINCT step FROM ctx_journals`)
	if err != nil {
		return nil, err
	}
	return sortSteps(ids), nil
}

// Remove deletes the steps' rows in one statement.
func (j pgJournals) Remove(ctx context.Context, steps []messages.StepID) (int, error) {
	if len(steps) == 0 {
		return 0, nil
	}
	keys := make([][]byte, len(steps))
	for i := range steps {
		keys[i] = steps[i][:]
	}
	ids, err := pgScanIDs(ctx, j.s, "remove journals", `DELETE FROM ctx_journals WHERE step = ANY($1) RETURNING step`, keys)
	if err != nil {
		return 0, err
	}
	return len(sortSteps(ids)), nil
}

// pgScanIDs runs a query whose rows are one step id each.
func pgScanIDs(ctx context.Context, s *pgStore, what, sql string, args ...any) ([]messages.StepID, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.readErr(what, err)
	}
	var (
		ids []messages.StepID
		b   []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&b}, func() error {
		id, err := messages.IDFromBytes[messages.StepID](b)
		if err != nil {
			return fmt.Errorf("%w: journal step %x: %v", persistence.ErrCorrupt, b, err)
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, s.readErr(what, err)
	}
	return ids, nil
}

// pgJournalSink is the rows of one step's journal, from one owner.
type pgJournalSink struct {
	s       *pgStore
	step    messages.StepID
	created bool   // Create was called
	failed  bool   // a commit failed: Close commits nothing more
	rows    int    // rows committed
	off     int64  // bytes committed
	pending []byte // bytes written, not yet committed
}

// Create does no I/O: the journal's first row, at offset 0, is its
// exclusive creation.
func (k *pgJournalSink) Create() error {
	if err := k.s.alive(); err != nil {
		return err
	}
	k.created = true
	return nil
}

func (k *pgJournalSink) Write(p []byte) (int, error) {
	k.pending = append(k.pending, p...)
	return len(p), nil
}

// Sync commits the pending bytes as a row.
func (k *pgJournalSink) Sync() error {
	if len(k.pending) == 0 {
		return nil
	}
	return k.commit()
}

// Close commits the pending bytes, or an empty row for a journal that
// has none yet.
func (k *pgJournalSink) Close() error {
	if !k.created || k.failed || len(k.pending) == 0 && k.rows > 0 {
		k.pending = nil
		return nil
	}
	err := k.commit()
	k.pending = nil
	return err
}

// commit inserts the pending bytes at offset off.
func (k *pgJournalSink) commit() error {
	ctx, cancel := context.WithTimeout(context.Background(), k.s.opts.GroupTimeout)
	defer cancel()
	err := k.insert(ctx)
	if err != nil {
		k.failed = true
		return err
	}
	k.off += int64(len(k.pending))
	k.pending = k.pending[:0]
	k.rows++
	return nil
}

func (k *pgJournalSink) insert(ctx context.Context) error {
	unknown := false // an attempt's outcome never came back
	row := k.pending
	if row == nil {
		row = []byte{} // an empty journal's row: nil would be NULL
	}
	var err error
	for attempt := range max(k.s.opts.MaxRetries, 1) {
		if attempt > 0 {
			backoff(attempt)
		}
		if err = k.s.alive(); err != nil {
			return err
		}
		var tag pgconn.CommandTag
		tag, err = k.s.pool.Exec(ctx, `INSERT INTO ctx_journals (step, off, bytes) VALUES ($1, $2, $3)
			ON CONFLICT (step, off) DO NOTHING`, k.step[:], k.off, row)
		switch {
		case err == nil && tag.RowsAffected() == 1:
			return nil
		case err == nil:
			return k.taken(ctx, unknown)
		case ctx.Err() != nil:
			return fmt.Errorf("%w: postgres: journal %s: %w", ErrOutcomeUnknown, k.step, err)
		case retryablePG(err):
		case pgCode(err) == "":
			// No answer from the server: the row may be in. The retry
			// finds it there if so.
			unknown = unknown || !pgconn.SafeToRetry(err)
		default:
			return fmt.Errorf("postgres: journal %s: insert at offset %d: %w", k.step, k.off, err)
		}
	}
	if unknown {
		return unavailable(fmt.Errorf("%w: postgres: journal %s: %w", ErrOutcomeUnknown, k.step, err))
	}
	return unavailable(fmt.Errorf("postgres: journal %s: insert at offset %d: %w", k.step, k.off, err))
}

// taken explains a row already at the sink's offset: its own, from an
// attempt whose answer was lost (unknown), if it holds the same bytes;
// another writer's otherwise.
func (k *pgJournalSink) taken(ctx context.Context, unknown bool) error {
	if unknown {
		var b []byte
		err := k.s.pool.QueryRow(ctx, `SELECT bytes FROM ctx_journals WHERE step = $1 AND off = $2`, k.step[:], k.off).Scan(&b)
		if err != nil {
			return fmt.Errorf("postgres: journal %s: read back offset %d: %w", k.step, k.off, err)
		}
		if bytes.Equal(b, k.pending) {
			return nil
		}
	}
	if k.off == 0 {
		return fmt.Errorf("postgres: journal of step %s: %w", k.step, fs.ErrExist)
	}
	return fmt.Errorf("%w: postgres: journal %s: another writer's row at offset %d", persistence.ErrCorrupt, k.step, k.off)
}

// sortSteps sorts steps and drops the duplicates.
func sortSteps(steps []messages.StepID) []messages.StepID {
	slices.SortFunc(steps, messages.StepID.Compare)
	return slices.Compact(steps)
}
