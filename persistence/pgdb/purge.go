package pgdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Hard delete on PostgreSQL, on the plan Badger's follows too
// (persistence.PlanPurge, read here through pgPurgeReader): the same rows
// go (every row of the branches deleted, the transcript nodes they own
// with their overlays, the blobs no other node references any more, the
// sessions' rows, and the actors' logs), the same refusals (ErrInUse,
// nothing deleted) and the same PurgeResult. One SERIALIZABLE transaction
// reads the plan and deletes what it names, retried whole on 40001/40P01: a
// write of another runtime (or of this one's committer) that references
// a node or a blob the purge deletes, or moves a head it checks, commits
// before it (the purge's retry reads it) or after it (and finds the rows
// gone), never between its read and its delete.
//
// A DELETE leaves the row's bytes in its heap and index pages (a dead
// tuple) and in the WAL. After the commit, when PGOptions.PurgeVacuum is
// set and the server is PostgreSQL, Purge runs a plain VACUUM of the
// tables it deleted from (outside the transaction: VACUUM runs in none),
// which makes the dead tuples' space free; a VACUUM refused or failed is
// logged and the delete stands. What stays where, and what an operator
// does for strict erasure, is in docs/STORE.md.

// Purge deletes what spec names, for good, in one transaction, as
// badgerdb.DB.Purge does; it returns once the transaction committed (and the
// VACUUM after it, PurgeResult.Scrub, ran).
func (d *PGDB) Purge(ctx context.Context, spec persistence.PurgeSpec) (persistence.PurgeResult, error) {
	start := time.Now()
	if err := spec.Check(); err != nil {
		return persistence.PurgeResult{}, err
	}
	plans, scrub, err := d.purge(ctx, []persistence.PurgeSpec{spec})
	if err != nil {
		return persistence.PurgeResult{}, err
	}
	res := plans[0].Result
	res.Scrub = scrub
	res.Took = time.Since(start)
	return res, nil
}

// PurgeSessions deletes the sessions specs name (each DeleteSession, no
// two of one session) as Purge does, in one transaction: all or nothing,
// as DB.PurgeSessions. The results are in specs' order; each has the
// call's Took and Scrub, and the blobs no longer referenced are counted
// once, on the first.
func (d *PGDB) PurgeSessions(ctx context.Context, specs []persistence.PurgeSpec) ([]persistence.PurgeResult, error) {
	start := time.Now()
	if len(specs) == 0 {
		return nil, nil
	}
	if err := persistence.CheckPurgeSessions(specs); err != nil {
		return nil, err
	}
	plans, scrub, err := d.purge(ctx, specs)
	if err != nil {
		return nil, err
	}
	out := make([]persistence.PurgeResult, len(plans))
	for i, p := range plans {
		out[i] = p.Result
		out[i].Scrub = scrub
		out[i].Took = time.Since(start)
	}
	return out, nil
}

// purge runs the purge of specs as one transaction, retried whole while
// it fails for a retryable reason, then forgets what the caches hold of
// it and vacuums. The blobs it deleted are counted on the first plan.
func (d *PGDB) purge(ctx context.Context, specs []persistence.PurgeSpec) ([]*persistence.PurgePlan, time.Duration, error) {
	if err := d.alive(); err != nil {
		return nil, 0, err
	}
	var (
		plans  []*persistence.PurgePlan
		tables []string
		err    error
	)
	for attempt := 0; attempt < d.opts.MaxRetries; attempt++ {
		if attempt > 0 {
			d.stats.Retried()
			backoff(attempt)
		}
		if err = ctx.Err(); err != nil {
			return nil, 0, err // no attempt committed
		}
		plans, tables, err = d.tryPurge(ctx, specs)
		if err == nil || !retryablePG(err) {
			break
		}
		d.log.Debug().Err(err).Int("attempt", attempt).Msg("postgres purge retried")
	}
	if err != nil {
		if !errors.Is(err, ErrOutcomeUnknown) && retryablePG(err) {
			err = fmt.Errorf("postgres: purge gave up after %d attempts: %w", d.opts.MaxRetries, err)
		}
		return nil, 0, fmt.Errorf("delete: %w", err)
	}
	for _, p := range plans {
		for _, n := range p.Nodes {
			d.turns.Drop(n.ID)
		}
	}
	start := time.Now()
	d.vacuum(ctx, tables)
	return plans, time.Since(start), nil
}

// tryPurge runs one attempt: it plans every spec on the transaction's
// snapshot (as Badger plans each at one timestamp), then deletes. It
// returns the tables it deleted from or updated.
func (d *PGDB) tryPurge(ctx context.Context, specs []persistence.PurgeSpec) ([]*persistence.PurgePlan, []string, error) {
	// Once begun it runs to the end (a caller gone changes nothing), in
	// the time a group has.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.GroupTimeout)
	defer cancel()
	tx, err := d.pool.BeginTx(tctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return nil, nil, pgPurgeErr(fmt.Errorf("postgres: begin: %w", err))
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback(context.Background())
		}
	}()
	plans := make([]*persistence.PurgePlan, len(specs))
	for i, spec := range specs {
		if plans[i], err = persistence.PlanPurge(pgPurgeReader{tctx, tx}, spec); err != nil {
			return nil, nil, pgPurgeErr(err)
		}
	}
	tables, err := writePGPurge(tctx, tx, plans)
	if err != nil {
		return nil, nil, pgPurgeErr(err)
	}
	if err := tx.Commit(tctx); err != nil {
		committed = true
		return nil, nil, commitError(err)
	}
	committed = true
	return plans, tables, nil
}

// pgPurgeErr classifies an error before COMMIT: the purge's own (a
// refusal, a corrupt row) as is, a broken connection as errConnLost
// (nothing committed: retried).
func pgPurgeErr(err error) error {
	if retryablePG(err) || errors.Is(err, persistence.ErrNotFound) || errors.Is(err, persistence.ErrInvalidArgument) ||
		errors.Is(err, persistence.ErrInUse) || errors.Is(err, persistence.ErrCorrupt) {
		return err
	}
	if c := pgCode(err); c == "" || strings.HasPrefix(c, "08") || strings.HasPrefix(c, "57P") {
		return fmt.Errorf("%w: %w", errConnLost, err)
	}
	return err
}

// eachPGRow runs sql in tx and calls fn for each row it returns.
func eachPGRow(ctx context.Context, tx pgx.Tx, what, sql string, args []any, fn func(pgx.Rows) error) error {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: %s: %w", what, err)
	}
	return nil
}

func idBytes[T ~[16]byte](ids []T) [][]byte {
	out := make([][]byte, len(ids))
	for i := range ids {
		out[i] = ids[i][:]
	}
	return out
}

// pgPurgeReader reads a purge's plan in tx, the purge's transaction
// (persistence.PurgeReader).
type pgPurgeReader struct {
	ctx context.Context
	tx  pgx.Tx
}

func (r pgPurgeReader) Session(id messages.SessionID) (persistence.SessionRow, bool, error) {
	var data []byte
	err := r.tx.QueryRow(r.ctx, `SELECT data FROM ctx_sessions WHERE id = $1`, id[:]).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.SessionRow{}, false, nil
	}
	if err != nil {
		return persistence.SessionRow{}, false, fmt.Errorf("postgres: read session %s: %w", id, err)
	}
	var sess persistence.SessionRow
	if err := json.Unmarshal(data, &sess); err != nil {
		return persistence.SessionRow{}, false, fmt.Errorf("%w: session %s: %v", persistence.ErrCorrupt, id, err)
	}
	return sess, true, nil
}

func (r pgPurgeReader) SessionBranches(id messages.SessionID) ([]persistence.BranchRow, error) {
	var out []persistence.BranchRow
	err := eachPGRow(r.ctx, r.tx, "read branches of session "+id.String(),
		`SELECT data FROM ctx_branches WHERE session_id = $1`, []any{id[:]}, func(rows pgx.Rows) error {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return err
			}
			var row persistence.BranchRow
			if err := json.Unmarshal(b, &row); err != nil {
				return fmt.Errorf("%w: branch row of session %s: %v", persistence.ErrCorrupt, id, err)
			}
			out = append(out, row)
			return nil
		})
	return out, err
}

// heads reads the heads sql selects (branch, turn, base) with args.
func (r pgPurgeReader) heads(what, sql string, args ...any) ([]persistence.Head, error) {
	var out []persistence.Head
	err := eachPGRow(r.ctx, r.tx, what, sql, args, func(rows pgx.Rows) error {
		var b, t, base []byte
		if err := rows.Scan(&b, &t, &base); err != nil {
			return err
		}
		if len(b) != 16 || len(t) != 16 || len(base) != 16 {
			return fmt.Errorf("%w: head row of branch %x", persistence.ErrCorrupt, b)
		}
		out = append(out, persistence.Head{Branch: messages.BranchID(b), Node: messages.NodeID(t), Base: messages.NodeID(base)})
		return nil
	})
	return out, err
}

func (r pgPurgeReader) Heads(branches []messages.BranchID) ([]persistence.Head, error) {
	return r.heads("read heads", `SELECT branch, turn, base FROM ctx_heads WHERE branch = ANY($1)`, idBytes(branches))
}

func (r pgPurgeReader) Walk(heads []persistence.Head) ([]persistence.PurgeNode, error) {
	branches := make([]messages.BranchID, len(heads))
	for i, h := range heads {
		branches[i] = h.Branch
	}
	var out []persistence.PurgeNode
	err := eachPGRow(r.ctx, r.tx, "read the turns of the branches to delete", `WITH RECURSIVE w (id, parent, hash, base) AS (
			SELECT t.id, t.parent, t.hash, h.base FROM ctx_heads h JOIN ctx_turns t ON t.id = h.turn
			WHERE h.branch = ANY($1) AND h.turn <> h.base
			UNION ALL
			SELECT t.id, t.parent, t.hash, w.base FROM w JOIN ctx_turns t ON t.id = w.parent WHERE w.parent <> w.base
		)
		SELECT id, parent, hash, base FROM w`, []any{idBytes(branches)}, func(rows pgx.Rows) error {
		var id, parent, hash, base []byte
		if err := rows.Scan(&id, &parent, &hash, &base); err != nil {
			return err
		}
		if len(id) != 16 || len(parent) != 16 || len(hash) != 32 || len(base) != 16 {
			return fmt.Errorf("%w: turn row %x", persistence.ErrCorrupt, id)
		}
		out = append(out, persistence.PurgeNode{ID: messages.NodeID(id), Parent: messages.NodeID(parent),
			Payload: persistence.Hash(hash), Base: messages.NodeID(base)})
		return nil
	})
	return out, err
}

func (r pgPurgeReader) HeadsAt(nodes []messages.NodeID) ([]persistence.Head, error) {
	return r.heads("read the heads at the turns to delete",
		`SELECT branch, turn, base FROM ctx_heads WHERE turn = ANY($1) OR base = ANY($1) ORDER BY branch`, idBytes(nodes))
}

func (r pgPurgeReader) Children(nodes []messages.NodeID, fn func(parent, child messages.NodeID) error) error {
	return eachPGRow(r.ctx, r.tx, "read the children of the turns to delete",
		`SELECT parent, id FROM ctx_turns WHERE parent = ANY($1) ORDER BY parent, id`, []any{idBytes(nodes)}, func(rows pgx.Rows) error {
			var parent, id []byte
			if err := rows.Scan(&parent, &id); err != nil {
				return err
			}
			if len(parent) != 16 || len(id) != 16 {
				return fmt.Errorf("%w: turn row %x", persistence.ErrCorrupt, id)
			}
			return fn(messages.NodeID(parent), messages.NodeID(id))
		})
}

func (r pgPurgeReader) Overlays(nodes []messages.NodeID) ([]persistence.Overlay, error) {
	var out []persistence.Overlay
	err := eachPGRow(r.ctx, r.tx, "read overlays of the turns to delete",
		`SELECT seq, turn, tombstone, hash, purged, created_ms FROM ctx_overlays WHERE turn = ANY($1) ORDER BY seq`,
		[]any{idBytes(nodes)}, func(rows pgx.Rows) error {
			ov, err := scanOverlay(rows)
			if err != nil {
				return err
			}
			out = append(out, ov)
			return nil
		})
	return out, err
}

func (r pgPurgeReader) TurnRows(branches []messages.BranchID, fn func(persistence.TurnRow) error) error {
	return eachPGRow(r.ctx, r.tx, "read turn rows of the branches to delete",
		`SELECT data FROM ctx_turn_rows WHERE branch = ANY($1)`, []any{idBytes(branches)}, func(rows pgx.Rows) error {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return err
			}
			var t persistence.TurnRow
			if err := json.Unmarshal(b, &t); err != nil {
				return fmt.Errorf("%w: turn row: %v", persistence.ErrCorrupt, err)
			}
			return fn(t)
		})
}

// pairs calls fn with the (turn, id) pairs of 16-byte ids sql selects
// with nodes.
func (r pgPurgeReader) pairs(what, sql string, nodes []messages.NodeID, fn func(turn messages.NodeID, id [16]byte)) error {
	return eachPGRow(r.ctx, r.tx, what, sql, []any{idBytes(nodes)}, func(rows pgx.Rows) error {
		var turn, id []byte
		if err := rows.Scan(&turn, &id); err != nil {
			return err
		}
		if len(turn) != 16 || len(id) != 16 {
			return fmt.Errorf("%w: %s: ids of %d and %d bytes", persistence.ErrCorrupt, what, len(turn), len(id))
		}
		fn(messages.NodeID(turn), [16]byte(id))
		return nil
	})
}

func (r pgPurgeReader) Steps(nodes []messages.NodeID) ([]persistence.NodeStep, error) {
	var out []persistence.NodeStep
	err := r.pairs("read steps of the turns to delete", `SELECT turn, id FROM ctx_steps WHERE turn = ANY($1)`, nodes,
		func(turn messages.NodeID, id [16]byte) { out = append(out, persistence.NodeStep{Turn: turn, Step: id}) })
	return out, err
}

func (r pgPurgeReader) Chunks(nodes []messages.NodeID) ([]persistence.NodeChunk, error) {
	var out []persistence.NodeChunk
	err := r.pairs("read chunks of the turns to delete", `SELECT DISTINCT source_turn, id FROM ctx_chunks WHERE source_turn = ANY($1)`, nodes,
		func(turn messages.NodeID, id [16]byte) {
			out = append(out, persistence.NodeChunk{Turn: turn, Chunk: id})
		})
	return out, err
}

func (r pgPurgeReader) Jobs(fn func(persistence.Job) error) error {
	return eachPGRow(r.ctx, r.tx, "read jobs", `SELECT data FROM ctx_jobs`, nil, func(rows pgx.Rows) error {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return err
		}
		var j persistence.Job
		if err := json.Unmarshal(b, &j); err != nil {
			return fmt.Errorf("%w: job: %v", persistence.ErrCorrupt, err)
		}
		return fn(j)
	})
}

func (r pgPurgeReader) Keyed(fn func(k, v []byte) error) error {
	idem, proxy := persistence.IdempotencyRowPrefix, persistence.ProxyEntryPrefix
	return eachPGRow(r.ctx, r.tx, "read keyed rows",
		`SELECT key, data FROM ctx_keyed WHERE (key >= $1 AND key < $2) OR (key >= $3 AND key < $4)`,
		[]any{[]byte{idem}, []byte{idem + 1}, []byte{proxy}, []byte{proxy + 1}}, func(rows pgx.Rows) error {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				return err
			}
			return fn(k, v)
		})
}

// writePGPurge deletes what plans name, in tx, and returns the tables it
// changed. The blobs it deletes are counted on plans[0].
func writePGPurge(ctx context.Context, tx pgx.Tx, plans []*persistence.PurgePlan) ([]string, error) {
	var (
		del, nodes, chunks, keyed, sessions [][]byte
		actors                              [][]byte
		jobs                                []persistence.Job
		unref                               = map[persistence.Hash]uint64{}
	)
	b := &pgx.Batch{}
	type stmt struct{ table, what string }
	var stmts []stmt
	queue := func(table, what, sql string, args ...any) {
		b.Queue(sql, args...)
		stmts = append(stmts, stmt{table, what})
	}
	for _, p := range plans {
		del = append(del, idBytes(p.Branches)...)
		nodes = append(nodes, idBytes(p.NodeIDs())...)
		for _, c := range p.Chunks {
			chunks = append(chunks, c.Chunk[:])
		}
		keyed = append(keyed, p.Keyed...)
		jobs = append(jobs, p.Jobs...)
		for h, n := range p.Unref {
			unref[h] += n
		}
		if p.Session != nil {
			data, err := encodeJSONRow(*p.Session)
			if err != nil {
				return nil, err
			}
			queue("ctx_sessions", "move the active branch of session "+p.Session.ID.String(),
				`UPDATE ctx_sessions SET data = $2 WHERE id = $1`, p.Session.ID[:], data)
		}
	}
	for _, p := range plans {
		if p.Spec.DeleteSession {
			sessions = append(sessions, p.Spec.Session[:])
		}
		for _, a := range p.Spec.Actors {
			actors = append(actors, []byte(a))
		}
	}
	queue("ctx_sessions", "delete sessions", `DELETE FROM ctx_sessions WHERE id = ANY($1)`, sessions)
	queue("ctx_imports", "delete imports", `DELETE FROM ctx_imports WHERE session = ANY($1)`, sessions)
	queue("ctx_activity", "delete activity", `DELETE FROM ctx_activity WHERE session = ANY($1)`, sessions)
	queue("ctx_branches", "delete branch rows", `DELETE FROM ctx_branches WHERE id = ANY($1)`, del)
	queue("ctx_heads", "delete heads", `DELETE FROM ctx_heads WHERE branch = ANY($1)`, del)
	queue("ctx_branch_tenants", "delete branch owners", `DELETE FROM ctx_branch_tenants WHERE branch = ANY($1)`, del)
	queue("ctx_turn_rows", "delete turn rows", `DELETE FROM ctx_turn_rows WHERE branch = ANY($1)`, del)
	queue("ctx_states", "delete states", `DELETE FROM ctx_states WHERE branch = ANY($1)`, del)
	queue("ctx_chunk_members", "delete partition entries", `DELETE FROM ctx_chunk_members WHERE branch = ANY($1)`, del)
	queue("ctx_turns", "delete turns", `DELETE FROM ctx_turns WHERE id = ANY($1)`, nodes)
	queue("ctx_overlays", "delete overlays", `DELETE FROM ctx_overlays WHERE turn = ANY($1)`, nodes)
	queue("ctx_root_tenants", "delete root owners", `DELETE FROM ctx_root_tenants WHERE turn = ANY($1)`, nodes)
	queue("ctx_steps", "delete steps", `DELETE FROM ctx_steps WHERE turn = ANY($1)`, nodes)
	queue("ctx_chunks", "delete chunks", `DELETE FROM ctx_chunks WHERE source_turn = ANY($1)`, nodes)
	queue("ctx_vectors", "delete vectors", `DELETE FROM ctx_vectors WHERE chunk = ANY($1)`, chunks)
	queue("ctx_keyed", "delete idempotency keys and proxy entries", `DELETE FROM ctx_keyed WHERE key = ANY($1)`, keyed)
	queue("ctx_events", "delete events", `DELETE FROM ctx_events WHERE actor = ANY($1)`, actors)
	queue("ctx_snapshots", "delete snapshots", `DELETE FROM ctx_snapshots WHERE actor = ANY($1)`, actors)
	for _, j := range jobs {
		c, ok := persistence.JobTypeCode(j.Type)
		if !ok {
			return nil, fmt.Errorf("%w: job type %q", persistence.ErrCorrupt, j.Type)
		}
		queue("ctx_jobs", "delete job of turn "+j.Turn.String(), `DELETE FROM ctx_jobs WHERE kind = $1 AND turn = $2`, int16(c), j.Turn[:])
	}
	// The blobs: one reference fewer per node (and overlay) deleted; a
	// blob left with none is deleted.
	hashes := make([]persistence.Hash, 0, len(unref))
	for h := range unref {
		hashes = append(hashes, h)
	}
	slices.SortFunc(hashes, func(a, b persistence.Hash) int { return strings.Compare(string(a[:]), string(b[:])) })
	cur := map[persistence.Hash]int64{}
	hb := make([][]byte, len(hashes))
	for i := range hashes {
		hb[i] = hashes[i][:]
	}
	err := eachPGRow(ctx, tx, "read blob references", `SELECT hash, refs FROM ctx_blobs WHERE hash = ANY($1)`, []any{hb},
		func(r pgx.Rows) error {
			var h []byte
			var n int64
			if err := r.Scan(&h, &n); err != nil {
				return err
			}
			if len(h) != 32 {
				return fmt.Errorf("%w: blob hash of %d bytes", persistence.ErrCorrupt, len(h))
			}
			cur[persistence.Hash(h)] = n
			return nil
		})
	if err != nil {
		return nil, err
	}
	gone := 0
	for _, h := range hashes {
		n, ok := cur[h]
		switch {
		case !ok:
			continue
		case n > int64(unref[h]):
			queue("ctx_blobs", "release blob "+h.String(), `UPDATE ctx_blobs SET refs = $2 WHERE hash = $1 AND refs = $3`,
				h[:], n-int64(unref[h]), n)
		default:
			gone++
			queue("ctx_blobs", "delete blob "+h.String(), `DELETE FROM ctx_blobs WHERE hash = $1 AND refs = $2`, h[:], n)
		}
	}
	plans[0].Result.Blobs = gone
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	changed := map[string]bool{}
	rowsDeleted := 0
	for _, s := range stmts {
		tag, err := br.Exec()
		if err != nil {
			return nil, fmt.Errorf("postgres: %s: %w", s.what, err)
		}
		if s.table == "ctx_blobs" && tag.RowsAffected() != 1 {
			return nil, fmt.Errorf("%s: %w", s.what, errCASLost) // not under SERIALIZABLE's guard: retried
		}
		if tag.RowsAffected() > 0 {
			changed[s.table] = true
			if tag.Delete() {
				rowsDeleted += int(tag.RowsAffected())
			}
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("postgres: delete: %w", err)
	}
	// Keys: the rows deleted, counted once, on the first (the rows of
	// one plan are not told apart).
	plans[0].Result.Keys = rowsDeleted
	tables := make([]string, 0, len(changed))
	for t := range changed {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	return tables, nil
}

// vacuum runs a plain VACUUM of tables when PGOptions.PurgeVacuum is set
// and the server is PostgreSQL (CockroachDB has no VACUUM; its garbage
// collection runs on its own schedule). It is best-effort: a VACUUM
// refused (by permissions, by a YugabyteDB that ignores it) is logged.
func (d *PGDB) vacuum(ctx context.Context, tables []string) {
	if !d.opts.PurgeVacuum || len(tables) == 0 {
		return
	}
	var version string
	if err := d.pool.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		d.log.Warn().Err(err).Msg("vacuum after a delete skipped: the server's version could not be read; the deleted rows' bytes stay in dead tuples until autovacuum")
		return
	}
	if strings.Contains(version, "CockroachDB") {
		d.log.Debug().Msg("vacuum after a delete skipped: CockroachDB removes deleted rows by its own garbage collection (gc.ttlseconds)")
		return
	}
	// VACUUM runs in no transaction: the simple protocol sends it alone.
	if _, err := d.pool.Exec(ctx, "VACUUM "+strings.Join(tables, ", "), pgx.QueryExecModeSimpleProtocol); err != nil {
		d.log.Warn().Err(err).Strs("tables", tables).
			Msg("vacuum after a delete refused: the deleted rows' bytes stay in dead tuples until autovacuum")
	}
}
