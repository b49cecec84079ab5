// Package pgdb is the PostgreSQL engine of the store: the context store
// (OpenPostgres) and the Database above it (PGDB, OpenPostgresDB), with
// the semantics of persistence's Badger engine, the same rows and the same
// errors; several runtimes may share one database (docs/STORE.md,
// "PostgreSQL"; docs/CLUSTER.md).
package pgdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/commit"
)

// PGDB is the Database on PostgreSQL: the PostgreSQL Store plus the
// lifecycle rows (sessions, branches, turn rows, states, steps, jobs),
// the retrieval rows (chunks, partition entries, vectors), the actor
// logs (events, snapshots; pg_db_actor.go), the idempotency keys and the
// proxy index (pg_db_index.go), the tenants of branches and roots
// (pg_db_tenancy.go), the imports under way, session activity and
// retention (pg_db_retention.go), Commit for every part of a Tx, and hard
// delete (pg_db_purge.go). A Tx's context-store parts (NewBranches, Appends) and
// its rows are committed by the store's group committer in one SQL
// transaction, as Badger's group commits them in one batch.
//
// It implements Database: the runtime opens it for store.backend
// postgres (actors.Config.Postgres); its stream journals are
// ctx_journals rows (Journals, pg_journal.go).
type PGDB struct{ *pgStore }

var _ persistence.Database = (*PGDB)(nil)

// OpenPostgresDB connects to the database at opts.URL, creates the
// tables of the store and of the lifecycle rows if they are missing and
// starts the committer.
func OpenPostgresDB(ctx context.Context, opts PGOptions) (*PGDB, error) {
	s, err := openPostgres(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &PGDB{s}, nil
}

// pgMaxSeq is the largest turn or state seq PostgreSQL's BIGINT holds.
// The seqs are counters from 0; one beyond it is refused, not wrapped, so
// that the rows' order stays Badger's (unsigned).
const pgMaxSeq = math.MaxInt64

// Commit writes tx atomically, with the semantics of DB.Commit: either
// every part is committed or none, and a part that breaks a rule fails
// the whole Tx with an error naming it. It returns once the transaction's
// COMMIT has returned; ErrOutcomeUnknown when its answer never came.
func (d *PGDB) Commit(ctx context.Context, tx *persistence.Tx) (persistence.TxResult, error) {
	if err := tx.Check(d.opts.Limits); err != nil {
		return persistence.TxResult{}, err
	}
	if err := checkPGSeqs(tx); err != nil {
		return persistence.TxResult{}, err
	}
	if err := d.alive(); err != nil {
		return persistence.TxResult{}, err
	}
	o := d.txOp(tx)
	if err := d.submit(ctx, o); err != nil {
		return persistence.TxResult{}, err
	}
	return o.res.tx, nil
}

// txOp prepares tx's appends and returns tx's op.
func (d *PGDB) txOp(tx *persistence.Tx) *op {
	o := &op{kind: opTx, tx: tx}
	for _, a := range tx.Appends {
		// Hash and compress on the caller's goroutine, as Append does.
		o.parts = append(o.parts, &op{kind: opAppend, branch: a.Branch, append: a.Req,
			hash: persistence.HashOf(a.Req.Payload), blob: persistence.EncodeBlob(a.Req.Payload, d.opts.Compress)})
	}
	return o
}

// ---- the lifecycle rows in the group committer ----

// pgKey is a row's key: an id and a number (branch and seq, turn and
// step index, job type code and turn).
type pgKey struct {
	id [16]byte
	n  uint64
}

func (k pgKey) compare(o pgKey) int {
	if c := bytes.Compare(k.id[:], o.id[:]); c != 0 {
		return c
	}
	return cmpUint(k.n, o.n)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pgRow is a row to write: its JSON (nil: delete it), the id it names
// (a turn row's turn, a step's id) and its other indexed column.
type pgRow struct {
	data   []byte
	id     [16]byte
	aux    [16]byte // a branch row's session
	tenant string   // a session row's tenant
}

// pgRead is what the group read at a key: whether a row is there, and
// the id it names.
type pgRead struct {
	ok bool
	id [16]byte
}

// pgRowSet is the rows a group (or one Tx of it) writes, the last value
// at each key.
type pgRowSet struct {
	sessions map[pgKey]pgRow
	branches map[pgKey]pgRow
	turns    map[pgKey]pgRow
	states   map[pgKey]pgRow
	steps    map[pgKey]pgRow
	jobs     map[pgKey]pgRow
	imports  map[pgKey]pgRow // by session; nil data: deleted
}

func newPGRowSet() pgRowSet {
	return pgRowSet{sessions: map[pgKey]pgRow{}, branches: map[pgKey]pgRow{}, turns: map[pgKey]pgRow{},
		states: map[pgKey]pgRow{}, steps: map[pgKey]pgRow{}, jobs: map[pgKey]pgRow{},
		imports: map[pgKey]pgRow{}}
}

func (s pgRowSet) tables() []map[pgKey]pgRow {
	return []map[pgKey]pgRow{s.sessions, s.branches, s.turns, s.states, s.steps, s.jobs, s.imports}
}

// pgRows is the lifecycle side of a group: what it read of the keys its
// Txs check, and what it writes.
type pgRows struct {
	turnsRead  map[pgKey]pgRead // (branch, seq) of NewTurns
	statesRead map[pgKey]pgRead // (branch, seq) of States
	stepsRead  map[pgKey]pgRead // (turn, index) of Steps
	w          pgRowSet
	xr         pgExtraReads // chunks, partition entries and events read
	x          pgExtra      // retrieval rows and actor logs written
}

func newPGRows() *pgRows {
	return &pgRows{turnsRead: map[pgKey]pgRead{}, statesRead: map[pgKey]pgRead{}, stepsRead: map[pgKey]pgRead{},
		w: newPGRowSet(), xr: newPGExtraReads(), x: newPGExtra()}
}

// prefetchRows reads, in one round trip, the rows at the keys that the
// group's Txs must find free (NewTurns, States, Steps).
func (g *pgGroup) prefetchRows(batch []*op) error {
	var txs []*persistence.Tx
	for _, o := range batch {
		if o.kind == opTx {
			txs = append(txs, o.tx)
		}
	}
	if len(txs) == 0 {
		return nil
	}
	r := newPGRows()
	g.rows = r
	// Each query selects one BYTEA column of at most one row; set
	// records it when there is one (its key was recorded absent first).
	type query struct {
		what string
		set  func(v []byte) error
	}
	var qs []query
	b := &pgx.Batch{}
	add := func(into map[pgKey]pgRead, k pgKey, sql string) {
		if _, ok := into[k]; ok {
			return
		}
		into[k] = pgRead{}
		qs = append(qs, query{fmt.Sprintf("row at %x/%d", k.id, k.n), func(id []byte) error {
			if len(id) != 16 {
				return fmt.Errorf("%w: row at %x/%d names an id of %d bytes", persistence.ErrCorrupt, k.id, k.n, len(id))
			}
			rd := pgRead{ok: true}
			copy(rd.id[:], id)
			into[k] = rd
			return nil
		}})
		b.Queue(sql, k.id[:], int64(k.n))
	}
	addX := func(what string, set func([]byte) error, sql string, args ...any) {
		qs = append(qs, query{what, set})
		b.Queue(sql, args...)
	}
	for _, tx := range txs {
		for _, t := range tx.NewTurns {
			add(r.turnsRead, pgKey{t.Branch, t.Seq}, `SELECT id FROM ctx_turn_rows WHERE branch = $1 AND seq = $2`)
		}
		for _, s := range tx.States {
			add(r.statesRead, pgKey{s.Branch, s.Seq}, `SELECT branch FROM ctx_states WHERE branch = $1 AND seq = $2`)
		}
		for _, s := range tx.Steps {
			add(r.stepsRead, pgKey{s.Turn, uint64(s.Index)}, `SELECT id FROM ctx_steps WHERE turn = $1 AND idx = $2`)
		}
		r.xr.prefetch(tx, addX)
		r.xr.prefetchKeyed(tx, addX)
	}
	if len(qs) == 0 {
		return nil
	}
	br := g.tx.SendBatch(g.ctx, b)
	defer br.Close()
	for _, q := range qs {
		var v []byte
		err := br.QueryRow().Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("postgres: read rows (%s): %w", q.what, err)
		}
		if err := q.set(v); err != nil {
			return err
		}
	}
	return br.Close()
}

// pgTxSave is what a Tx's context-store parts may change in a group, as
// it was before them: applyTx puts it back when the Tx fails.
type pgTxSave struct {
	heads    map[messages.BranchID]*pgHead // nil: the group had no entry
	blobs    map[persistence.Hash]*pgBlob
	newTurns int
	branches int
	roots    int
	st       commit.GroupStats
}

func (g *pgGroup) saveTx(o *op) pgTxSave {
	sv := pgTxSave{heads: map[messages.BranchID]*pgHead{}, blobs: map[persistence.Hash]*pgBlob{},
		newTurns: len(g.newTurns), branches: len(g.newBranches), roots: len(g.rootTenants), st: g.st}
	for i, a := range o.tx.Appends {
		if _, ok := sv.heads[a.Branch]; !ok {
			sv.heads[a.Branch] = clonePtr(g.heads[a.Branch])
		}
		if h := o.parts[i].hash; sv.blobs[h] == nil {
			sv.blobs[h] = clonePtr(g.blobs[h])
		}
	}
	for _, spec := range o.tx.NewBranches {
		if !spec.ID.IsZero() {
			if _, ok := sv.heads[spec.ID]; !ok {
				sv.heads[spec.ID] = clonePtr(g.heads[spec.ID])
			}
		}
	}
	return sv
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// restoreTx undoes the context-store parts of a failed Tx.
func (g *pgGroup) restoreTx(sv pgTxSave) {
	for _, r := range g.newTurns[sv.newTurns:] {
		delete(g.turns, r.ID)
	}
	g.newTurns = g.newTurns[:sv.newTurns]
	for _, id := range g.newBranches[sv.branches:] {
		if _, saved := sv.heads[id]; !saved {
			delete(g.heads, id) // a branch the Tx made with a new id
		}
	}
	g.newBranches = g.newBranches[:sv.branches]
	g.rootTenants = g.rootTenants[:sv.roots]
	for id, h := range sv.heads {
		if h == nil {
			delete(g.heads, id)
		} else {
			g.heads[id] = h
		}
	}
	for h, b := range sv.blobs {
		if b == nil {
			delete(g.blobs, h)
		} else {
			g.blobs[h] = b
		}
	}
	g.st = sv.st
}

// applyTx validates a Tx against what the group read and what the writes
// before it changed, and records its changes; a Tx that fails changes
// nothing of the group (its error is the write's own, in the result).
func (g *pgGroup) applyTx(o *op) (result, error) {
	sv := g.saveTx(o)
	res, err := g.applyTxParts(o)
	if err != nil {
		g.restoreTx(sv)
		if isWriteError(err) {
			return result{err: err}, nil
		}
		return result{}, err
	}
	return result{tx: res}, nil
}

func (g *pgGroup) applyTxParts(o *op) (persistence.TxResult, error) {
	var res persistence.TxResult
	tx := o.tx
	for i, spec := range tx.NewBranches {
		if _, err := g.newBranch(spec); err != nil {
			return res, fmt.Errorf("new branch %d: %w", i, err)
		}
	}
	for i, a := range tx.Appends {
		if _, err := g.appendNode(o.parts[i], a.ID); err != nil {
			return res, fmt.Errorf("append %d: %w", i, err)
		}
	}
	rows := g.rows
	if rows == nil { // a Tx without rows to check
		rows = newPGRows()
		g.rows = rows
	}
	own := newPGRowSet() // this Tx's rows, merged into the group's if it commits
	// at returns the row this Tx would find at k: its own, the group's,
	// or the one read.
	at := func(table func(pgRowSet) map[pgKey]pgRow, read map[pgKey]pgRead, k pgKey) (pgRead, error) {
		for _, s := range []pgRowSet{own, rows.w} {
			if r, ok := table(s)[k]; ok {
				return pgRead{ok: r.data != nil, id: r.id}, nil
			}
		}
		r, ok := read[k]
		if !ok {
			return pgRead{}, fmt.Errorf("persistence: row %x/%d was not read by its group", k.id, k.n)
		}
		return r, nil
	}
	encode := func(v any) ([]byte, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: encode row: %v", persistence.ErrInvalidArgument, err)
		}
		return b, nil
	}
	for _, r := range tx.Sessions {
		b, err := encode(r)
		if err != nil {
			return res, err
		}
		own.sessions[pgKey{id: r.ID}] = pgRow{data: b, tenant: r.TenantName()}
	}
	for _, r := range tx.Branches {
		b, err := encode(r)
		if err != nil {
			return res, err
		}
		own.branches[pgKey{id: r.ID}] = pgRow{data: b, aux: r.Session}
	}
	ownX := newPGExtra()
	if err := g.applyRetention(tx, rows, own, &ownX); err != nil {
		return res, err
	}
	// Imports are upserted, then DoneImports deleted (an absent one is
	// nothing), as applyTx does.
	for _, r := range tx.Imports {
		b, err := encode(r)
		if err != nil {
			return res, err
		}
		own.imports[pgKey{id: r.Session}] = pgRow{data: b}
	}
	for _, id := range tx.DoneImports {
		own.imports[pgKey{id: id}] = pgRow{} // deleted
	}
	// DropBranches delete branch rows (and so their place in their
	// session's list), after the Tx's own Branches, as applyTx does.
	for _, r := range tx.DropBranches {
		own.branches[pgKey{id: r.ID}] = pgRow{} // deleted
	}
	turns := func(s pgRowSet) map[pgKey]pgRow { return s.turns }
	for _, r := range tx.NewTurns {
		k := pgKey{r.Branch, r.Seq}
		prev, err := at(turns, rows.turnsRead, k)
		if err != nil {
			return res, err
		}
		if prev.ok && messages.TurnID(prev.id) != r.ID {
			return res, fmt.Errorf("%w: turn_seq %d of branch %s is turn %s, not %s", persistence.ErrDuplicate, r.Seq, r.Branch, messages.TurnID(prev.id), r.ID)
		}
		b, err := encode(r)
		if err != nil {
			return res, err
		}
		own.turns[k] = pgRow{data: b, id: r.ID}
	}
	for _, r := range tx.Turns {
		b, err := encode(r)
		if err != nil {
			return res, err
		}
		own.turns[pgKey{r.Branch, r.Seq}] = pgRow{data: b, id: r.ID}
	}
	states := func(s pgRowSet) map[pgKey]pgRow { return s.states }
	for _, r := range tx.States {
		k := pgKey{r.Branch, r.Seq}
		if prev, err := at(states, rows.statesRead, k); err != nil {
			return res, err
		} else if prev.ok {
			return res, fmt.Errorf("%w: state_seq %d of branch %s is already committed", persistence.ErrDuplicate, r.Seq, r.Branch)
		}
		b, err := encode(r)
		if err != nil {
			return res, err
		}
		own.states[k] = pgRow{data: b}
	}
	for _, j := range tx.Jobs {
		c, ok := persistence.JobTypeCode(j.Type)
		if !ok {
			return res, fmt.Errorf("%w: job type %q", persistence.ErrInvalidArgument, j.Type)
		}
		b, err := encode(j)
		if err != nil {
			return res, err
		}
		own.jobs[pgKey{j.Turn, uint64(c)}] = pgRow{data: b}
	}
	for _, j := range tx.DoneJobs {
		c, ok := persistence.JobTypeCode(j.Type)
		if !ok {
			return res, fmt.Errorf("%w: job type %q", persistence.ErrInvalidArgument, j.Type)
		}
		own.jobs[pgKey{j.Turn, uint64(c)}] = pgRow{} // deleted
	}
	if err := g.applyRetrieval(tx, rows, &ownX, &res); err != nil {
		return res, err
	}
	steps := func(s pgRowSet) map[pgKey]pgRow { return s.steps }
	for _, r := range tx.Steps {
		k := pgKey{r.Turn, uint64(r.Index)}
		if prev, err := at(steps, rows.stepsRead, k); err != nil {
			return res, err
		} else if prev.ok && messages.StepID(prev.id) != r.ID {
			return res, fmt.Errorf("%w: step %d of turn %s is step %s, not %s", persistence.ErrDuplicate, r.Index, r.Turn, messages.StepID(prev.id), r.ID)
		}
		b, err := persistence.EncodeStepRow(r)
		if err != nil {
			return res, fmt.Errorf("%w: encode row: %v", persistence.ErrInvalidArgument, err)
		}
		own.steps[k] = pgRow{data: b, id: r.ID}
	}
	if err := g.applyActorLog(tx, rows, &ownX); err != nil {
		return res, err
	}
	if err := g.applyKeyed(tx, rows, &ownX); err != nil {
		return res, err
	}
	rows.x.merge(ownX)
	for i, t := range own.tables() {
		dst := rows.w.tables()[i]
		for k, r := range t {
			dst[k] = r
		}
	}
	return res, nil
}

// queue adds the group's row writes to b, in key order (so that two
// runtimes writing the same rows take their locks in one order). A row at
// a key the group read free is inserted, so that another runtime's
// insert there meanwhile fails the transaction (23505 or 40001, retried:
// the retry reads that row); the others are upserted.
func (r *pgRows) queue(b *pgx.Batch, checks []pgCheck) []pgCheck {
	sorted := func(m map[pgKey]pgRow) []pgKey {
		ks := make([]pgKey, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		slices.SortFunc(ks, pgKey.compare)
		return ks
	}
	free := func(read map[pgKey]pgRead, k pgKey) bool {
		rd, ok := read[k]
		return ok && !rd.ok
	}
	for _, k := range sorted(r.w.sessions) {
		w := r.w.sessions[k]
		b.Queue(`INSERT INTO ctx_sessions (id, tenant, data) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, data = excluded.data`, k.id[:], w.tenant, w.data)
		checks = append(checks, pgCheck{fmt.Sprintf("write session %s", messages.SessionID(k.id)), false})
	}
	for _, k := range sorted(r.w.branches) {
		w := r.w.branches[k]
		if w.data == nil {
			b.Queue(`DELETE FROM ctx_branches WHERE id = $1`, k.id[:])
		} else {
			b.Queue(`INSERT INTO ctx_branches (id, session_id, data) VALUES ($1, $2, $3)
				ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, data = excluded.data`, k.id[:], w.aux[:], w.data)
		}
		checks = append(checks, pgCheck{fmt.Sprintf("write branch row %s", messages.BranchID(k.id)), false})
	}
	for _, k := range sorted(r.w.turns) {
		w := r.w.turns[k]
		q := `INSERT INTO ctx_turn_rows (branch, seq, id, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (branch, seq) DO UPDATE SET id = excluded.id, data = excluded.data`
		if free(r.turnsRead, k) {
			q = `INSERT INTO ctx_turn_rows (branch, seq, id, data) VALUES ($1, $2, $3, $4)`
		}
		b.Queue(q, k.id[:], int64(k.n), w.id[:], w.data)
		checks = append(checks, pgCheck{fmt.Sprintf("write turn row %d of branch %s", k.n, messages.BranchID(k.id)), false})
	}
	for _, k := range sorted(r.w.states) {
		b.Queue(`INSERT INTO ctx_states (branch, seq, data) VALUES ($1, $2, $3)`, k.id[:], int64(k.n), r.w.states[k].data)
		checks = append(checks, pgCheck{fmt.Sprintf("insert state %d of branch %s", k.n, messages.BranchID(k.id)), false})
	}
	for _, k := range sorted(r.w.steps) {
		w := r.w.steps[k]
		q := `INSERT INTO ctx_steps (turn, idx, id, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (turn, idx) DO UPDATE SET id = excluded.id, data = excluded.data`
		if free(r.stepsRead, k) {
			q = `INSERT INTO ctx_steps (turn, idx, id, data) VALUES ($1, $2, $3, $4)`
		}
		b.Queue(q, k.id[:], int64(k.n), w.id[:], w.data)
		checks = append(checks, pgCheck{fmt.Sprintf("write step %d of turn %s", k.n, messages.TurnID(k.id)), false})
	}
	for _, k := range sorted(r.w.jobs) {
		w := r.w.jobs[k]
		if w.data == nil {
			b.Queue(`DELETE FROM ctx_jobs WHERE kind = $1 AND turn = $2`, int16(k.n), k.id[:])
		} else {
			b.Queue(`INSERT INTO ctx_jobs (kind, turn, data) VALUES ($1, $2, $3)
				ON CONFLICT (kind, turn) DO UPDATE SET data = excluded.data`, int16(k.n), k.id[:], w.data)
		}
		checks = append(checks, pgCheck{fmt.Sprintf("write job %c of turn %s", byte(k.n), messages.TurnID(k.id)), false})
	}
	for _, k := range sorted(r.w.imports) {
		w := r.w.imports[k]
		if w.data == nil {
			b.Queue(`DELETE FROM ctx_imports WHERE session = $1`, k.id[:])
		} else {
			b.Queue(`INSERT INTO ctx_imports (session, data) VALUES ($1, $2)
				ON CONFLICT (session) DO UPDATE SET data = excluded.data`, k.id[:], w.data)
		}
		checks = append(checks, pgCheck{fmt.Sprintf("write import of session %s", messages.SessionID(k.id)), false})
	}
	return r.x.queue(b, checks)
}

// ---- reads ----

// pgGetRow reads the one row sql selects (its data column) into a T;
// notFound when there is none.
func pgGetRow[T any](ctx context.Context, d *PGDB, what string, notFound error, sql string, args ...any) (T, error) {
	var v T
	if err := d.alive(); err != nil {
		return v, err
	}
	var data []byte
	err := d.pool.QueryRow(ctx, sql, args...).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, notFound
	}
	if err != nil {
		return v, d.readErr(what, err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("%w: %s: %v", persistence.ErrCorrupt, what, err)
	}
	return v, nil
}

// pgScanRows reads every row sql selects (their data column), in order.
func pgScanRows[T any](ctx context.Context, d *PGDB, what string, sql string, args ...any) ([]T, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, d.readErr(what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, d.readErr(what, err)
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("%w: %s: row %d: %v", persistence.ErrCorrupt, what, len(out), err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, d.readErr(what, err)
	}
	return out, nil
}

// Session returns a session's row.
func (d *PGDB) Session(ctx context.Context, id messages.SessionID) (persistence.SessionRow, error) {
	return pgGetRow[persistence.SessionRow](ctx, d, "read session "+id.String(), fmt.Errorf("%w: session %s", persistence.ErrRowNotFound, id),
		`SELECT data FROM ctx_sessions WHERE id = $1`, id[:])
}

// Sessions returns every session's row, in the order of their ids.
func (d *PGDB) Sessions(ctx context.Context) ([]persistence.SessionRow, error) {
	return pgScanRows[persistence.SessionRow](ctx, d, "read sessions", `SELECT data FROM ctx_sessions ORDER BY id`)
}

// SessionPage returns a page of a tenant's sessions (ctx_sessions_tenant).
func (d *PGDB) SessionPage(ctx context.Context, q persistence.SessionQuery) ([]persistence.SessionRow, error) {
	if err := persistence.CheckPageSize(q.Limit); err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		return []persistence.SessionRow{}, nil
	}
	query := `SELECT data FROM ctx_sessions WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3`
	after := q.After[:]
	if q.Newest {
		query = `SELECT data FROM ctx_sessions WHERE tenant = $1 AND id < $2 ORDER BY id DESC LIMIT $3`
		if q.After.IsZero() {
			after = bytes.Repeat([]byte{0xff}, 17) // above every 16-byte id
		}
	}
	out, err := pgScanRows[persistence.SessionRow](ctx, d, "read sessions of tenant "+q.TenantName(), query, q.TenantName(), after, q.Limit)
	if out == nil && err == nil {
		out = []persistence.SessionRow{}
	}
	return out, err
}

// BranchPage returns up to limit of session's branch rows whose ids
// follow after, in id order.
func (d *PGDB) BranchPage(ctx context.Context, session messages.SessionID, after messages.BranchID, limit int) ([]persistence.BranchRow, error) {
	if err := persistence.CheckPageSize(limit); err != nil {
		return nil, err
	}
	if limit == 0 {
		return []persistence.BranchRow{}, nil
	}
	out, err := pgScanRows[persistence.BranchRow](ctx, d, "read branches of session "+session.String(),
		`SELECT data FROM ctx_branches WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3`, session[:], after[:], limit)
	if out == nil && err == nil {
		out = []persistence.BranchRow{}
	}
	return out, err
}

// BranchRow returns a branch's row.
func (d *PGDB) BranchRow(ctx context.Context, id messages.BranchID) (persistence.BranchRow, error) {
	return pgGetRow[persistence.BranchRow](ctx, d, "read branch row "+id.String(), fmt.Errorf("%w: branch %s", persistence.ErrRowNotFound, id),
		`SELECT data FROM ctx_branches WHERE id = $1`, id[:])
}

// Branches returns the rows of a session's branches, in the order of
// their ids.
func (d *PGDB) Branches(ctx context.Context, session messages.SessionID) ([]persistence.BranchRow, error) {
	out, err := pgScanRows[persistence.BranchRow](ctx, d, "read branches of session "+session.String(),
		`SELECT data FROM ctx_branches WHERE session_id = $1 ORDER BY id`, session[:])
	if out == nil && err == nil {
		out = []persistence.BranchRow{} // as DB.Branches
	}
	return out, err
}

// TurnRows returns up to limit turn rows of branch from fromSeq on, in
// seq order.
func (d *PGDB) TurnRows(ctx context.Context, branch messages.BranchID, fromSeq uint64, limit int) ([]persistence.TurnRow, error) {
	if err := persistence.CheckPageSize(limit); err != nil {
		return nil, err
	}
	if limit == 0 || fromSeq > pgMaxSeq {
		return nil, nil
	}
	return pgScanRows[persistence.TurnRow](ctx, d, "read turn rows of branch "+branch.String(),
		`SELECT data FROM ctx_turn_rows WHERE branch = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, branch[:], int64(fromSeq), limit)
}

// TurnRow returns the row of turn on branch, found by its id (a turn of
// branch's parent, which a fork sees, is not on branch).
func (d *PGDB) TurnRow(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (persistence.TurnRow, error) {
	return pgGetRow[persistence.TurnRow](ctx, d, "read turn row "+turn.String(), fmt.Errorf("%w: %s on branch %s", persistence.ErrNodeNotFound, turn, branch),
		`SELECT data FROM ctx_turn_rows WHERE id = $1 AND branch = $2 ORDER BY seq DESC LIMIT 1`, turn[:], branch[:])
}

// pgEachPage is how many turn rows EachTurnRow reads per query.
var pgEachPage = 512

// EachTurnRow calls fn for every turn row of branch in seq order, and
// stops at fn's first error, which it returns. It reads the rows a page
// at a time and holds no connection while fn runs, so the pages are not
// one snapshot: a row written meanwhile at a later seq is seen.
func (d *PGDB) EachTurnRow(ctx context.Context, branch messages.BranchID, fn func(persistence.TurnRow) error) error {
	var from uint64
	for {
		rows, err := pgScanRows[persistence.TurnRow](ctx, d, "read turn rows of branch "+branch.String(),
			`SELECT data FROM ctx_turn_rows WHERE branch = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, branch[:], int64(from), pgEachPage)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(rows) < pgEachPage {
			return nil
		}
		last := rows[len(rows)-1].Seq
		if last >= pgMaxSeq {
			return nil
		}
		from = last + 1
	}
}

// TurnBranches returns the branches that have a lifecycle row of turn, in
// the order of their ids.
func (d *PGDB) TurnBranches(ctx context.Context, turn messages.TurnID) ([]messages.BranchID, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	what := "read branches of turn " + turn.String()
	rows, err := d.pool.Query(ctx, `SELECT DISTINCT branch FROM ctx_turn_rows WHERE id = $1 ORDER BY branch`, turn[:])
	if err != nil {
		return nil, d.readErr(what, err)
	}
	defer rows.Close()
	var out []messages.BranchID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, d.readErr(what, err)
		}
		id, err := messages.IDFromBytes[messages.BranchID](b)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", persistence.ErrCorrupt, what, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, d.readErr(what, err)
	}
	return out, nil
}

// StateRow returns the state committed on branch at seq.
func (d *PGDB) StateRow(ctx context.Context, branch messages.BranchID, seq uint64) (persistence.StateRow, error) {
	notFound := fmt.Errorf("%w: state %d of branch %s", persistence.ErrRowNotFound, seq, branch)
	if seq > pgMaxSeq {
		return persistence.StateRow{}, notFound
	}
	return pgGetRow[persistence.StateRow](ctx, d, fmt.Sprintf("read state %d of branch %s", seq, branch), notFound,
		`SELECT data FROM ctx_states WHERE branch = $1 AND seq = $2`, branch[:], int64(seq))
}

// StateRows returns the states committed on branch from seq on, in order.
func (d *PGDB) StateRows(ctx context.Context, branch messages.BranchID, fromSeq uint64, limit int) ([]persistence.StateRow, error) {
	if err := persistence.CheckPageSize(limit); err != nil {
		return nil, err
	}
	if limit == 0 || fromSeq > pgMaxSeq {
		return nil, nil
	}
	return pgScanRows[persistence.StateRow](ctx, d, "read states of branch "+branch.String(),
		`SELECT data FROM ctx_states WHERE branch = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, branch[:], int64(fromSeq), limit)
}

// StepRow returns the row of step, found by its id.
func (d *PGDB) StepRow(ctx context.Context, step messages.StepID) (persistence.StepRow, error) {
	return pgGetRow[persistence.StepRow](ctx, d, "read step "+step.String(), fmt.Errorf("%w: step %s", persistence.ErrRowNotFound, step),
		`SELECT data FROM ctx_steps WHERE id = $1 ORDER BY turn, idx LIMIT 1`, step[:])
}

// Steps returns the provider steps of turn, in order.
func (d *PGDB) Steps(ctx context.Context, turn messages.TurnID) ([]persistence.StepRow, error) {
	return pgScanRows[persistence.StepRow](ctx, d, "read steps of turn "+turn.String(),
		`SELECT data FROM ctx_steps WHERE turn = $1 ORDER BY idx`, turn[:])
}

// Import returns the import under way of session.
func (d *PGDB) Import(ctx context.Context, session messages.SessionID) (persistence.ImportRow, error) {
	return pgGetRow[persistence.ImportRow](ctx, d, "read import of session "+session.String(),
		fmt.Errorf("%w: import of session %s", persistence.ErrRowNotFound, session), `SELECT data FROM ctx_imports WHERE session = $1`, session[:])
}

// Imports returns the imports under way (or cut short by a crash), in
// the order of their sessions.
func (d *PGDB) Imports(ctx context.Context) ([]persistence.ImportRow, error) {
	return pgScanRows[persistence.ImportRow](ctx, d, "read imports", `SELECT data FROM ctx_imports ORDER BY session`)
}

// Jobs returns every pending job, in branch order and then creation order
// (the order the reconciler re-enqueues them in).
func (d *PGDB) Jobs(ctx context.Context) ([]persistence.Job, error) {
	js, err := pgScanRows[persistence.Job](ctx, d, "read jobs", `SELECT data FROM ctx_jobs ORDER BY kind, turn`)
	if err != nil {
		return nil, err
	}
	persistence.SortJobs(js)
	return js, nil
}
