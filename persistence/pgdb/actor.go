package pgdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The retrieval rows (chunks, partition entries, vectors) and the actor
// logs (events, snapshots) of PGDB, with the semantics of group.applyTx:
// putChunk, putVector, addTerms, and the events and snapshots parts.

// Snapshot kinds of ctx_snapshots: the table bytes of Badger's keys of
// the latest snapshot and of the one before it, as the rows were written.
const (
	pgSnapLatest int16 = 'P'
	pgSnapPrev   int16 = 'F'
)

type pgChunkKey struct {
	turn [16]byte
	typ  uint8
	hash persistence.Hash
}

func (k pgChunkKey) compare(o pgChunkKey) int {
	if c := bytes.Compare(k.turn[:], o.turn[:]); c != 0 {
		return c
	}
	if c := cmpUint(uint64(k.typ), uint64(o.typ)); c != 0 {
		return c
	}
	return bytes.Compare(k.hash[:], o.hash[:])
}

type pgMemberKey struct {
	branch [16]byte
	seq    uint64
	chunk  [16]byte
}

func (k pgMemberKey) compare(o pgMemberKey) int {
	if c := bytes.Compare(k.branch[:], o.branch[:]); c != 0 {
		return c
	}
	if c := cmpUint(k.seq, o.seq); c != 0 {
		return c
	}
	return bytes.Compare(k.chunk[:], o.chunk[:])
}

type pgVecKey struct {
	ns    [8]byte // the first 8 bytes of the namespace's hash, as Badger's key
	chunk [16]byte
}

func (k pgVecKey) compare(o pgVecKey) int {
	if c := bytes.Compare(k.ns[:], o.ns[:]); c != 0 {
		return c
	}
	return bytes.Compare(k.chunk[:], o.chunk[:])
}

type pgEventKey struct {
	actor string
	idx   uint64
}

// pgDoc is a partition entry as read: whether there is one, its bytes.
type pgDoc struct {
	ok   bool
	data []byte
}

// pgExtraReads is what a group read of the chunks, partition entries and
// events its Txs check. A key missing here is read when a Tx needs it.
type pgExtraReads struct {
	chunks  map[pgChunkKey]pgRead // the stored chunk's id
	members map[pgMemberKey]pgDoc
	events  map[pgEventKey]bool
	keyed   map[string]pgDoc // idempotency keys and proxy entries (pg_db_index.go)
}

func newPGExtraReads() pgExtraReads {
	return pgExtraReads{chunks: map[pgChunkKey]pgRead{}, members: map[pgMemberKey]pgDoc{}, events: map[pgEventKey]bool{},
		keyed: map[string]pgDoc{}}
}

func chunkKeyOf(c persistence.ChunkRow) pgChunkKey {
	return pgChunkKey{c.SourceTurn, uint8(c.Type), c.Hash}
}

// prefetch queues, with add, the reads of the keys tx checks that are
// known before it runs.
func (r *pgExtraReads) prefetch(tx *persistence.Tx, add func(what string, set func([]byte) error, sql string, args ...any)) {
	member := func(k pgMemberKey) {
		if _, ok := r.members[k]; ok || k.seq > pgMaxSeq {
			return
		}
		r.members[k] = pgDoc{}
		add(fmt.Sprintf("partition entry %x/%d/%x", k.branch, k.seq, k.chunk), func(v []byte) error {
			r.members[k] = pgDoc{ok: true, data: v}
			return nil
		}, `SELECT data FROM ctx_chunk_members WHERE branch = $1 AND seq = $2 AND chunk = $3`, k.branch[:], int64(k.seq), k.chunk[:])
	}
	for _, c := range tx.Chunks {
		k := chunkKeyOf(c)
		if _, ok := r.chunks[k]; !ok {
			r.chunks[k] = pgRead{}
			add("chunk "+c.ID.String(), r.setChunk(k), `SELECT id FROM ctx_chunks WHERE source_turn = $1 AND type = $2 AND hash = $3`,
				k.turn[:], int16(k.typ), k.hash[:])
		}
		member(pgMemberKey{c.Branch, c.Seq, c.ID}) // the stored chunk's id is almost always c's
	}
	for _, u := range tx.TermUpdates {
		member(pgMemberKey{u.Branch, u.Seq, u.Chunk})
	}
	for _, e := range tx.Events {
		k := pgEventKey{e.Actor, e.Index}
		if _, ok := r.events[k]; ok {
			continue
		}
		r.events[k] = false
		add(fmt.Sprintf("event %d of %s", e.Index, e.Actor), func([]byte) error {
			r.events[k] = true
			return nil
		}, `SELECT actor FROM ctx_events WHERE actor = $1 AND idx = $2`, []byte(e.Actor), int64(e.Index))
	}
}

func (r *pgExtraReads) setChunk(k pgChunkKey) func([]byte) error {
	return func(id []byte) error {
		if len(id) != 16 {
			return fmt.Errorf("%w: chunk of turn %x names an id of %d bytes", persistence.ErrCorrupt, k.turn, len(id))
		}
		rd := pgRead{ok: true}
		copy(rd.id[:], id)
		r.chunks[k] = rd
		return nil
	}
}

// pgActorOp is a write to an actor's log, in the order of the group's
// Txs: an event inserted, the events before idx deleted, or a snapshot
// record written (snap: pgSnapLatest or pgSnapPrev).
type pgActorOp struct {
	kind  pgActorOpKind
	snap  int16
	actor string
	idx   uint64
	data  []byte
}

type pgActorOpKind uint8

const (
	pgOpEvent pgActorOpKind = iota
	pgOpCompact
	pgOpSnapshot
)

// pgCompaction is a pgOpCompact: the events of its actor before below
// are deleted by the op at position at.
type pgCompaction struct {
	below uint64
	at    int
}

// pgExtra is the retrieval rows and actor log writes of a group (or of
// one Tx of it, merged into the group's when it commits).
type pgExtra struct {
	chunks       map[pgChunkKey]pgRow // inserted: id and JSON
	members      map[pgMemberKey][]byte
	vectors      map[pgVecKey][]byte
	events       map[pgEventKey]int // the position in ops of the event's insert
	compactions  map[string][]pgCompaction
	ops          []pgActorOp
	keyed        map[string][]byte            // idempotency keys and proxy entries, inserted
	touched      map[messages.SessionID]int64 // the latest touch of each session (pg_db_retention.go)
	retentionJob []byte                       // the retention job's record; nil: not written
}

func newPGExtra() pgExtra {
	return pgExtra{chunks: map[pgChunkKey]pgRow{}, members: map[pgMemberKey][]byte{}, vectors: map[pgVecKey][]byte{},
		events: map[pgEventKey]int{}, compactions: map[string][]pgCompaction{}, keyed: map[string][]byte{},
		touched: map[messages.SessionID]int64{}}
}

func (x *pgExtra) merge(o pgExtra) {
	for k, v := range o.chunks {
		x.chunks[k] = v
	}
	for k, v := range o.members {
		x.members[k] = v
	}
	for k, v := range o.vectors {
		x.vectors[k] = v
	}
	for k, v := range o.events {
		x.events[k] = v
	}
	for a, cs := range o.compactions {
		x.compactions[a] = append(x.compactions[a], cs...)
	}
	x.ops = append(x.ops, o.ops...)
	for k, v := range o.keyed {
		x.keyed[k] = v
	}
	for s, at := range o.touched {
		if prev, ok := x.touched[s]; !ok || at > prev {
			x.touched[s] = at
		}
	}
	if o.retentionJob != nil {
		x.retentionJob = o.retentionJob
	}
}

// event says whether x's ops leave event k stored (1), deleted (-1), or
// do not touch it (0).
func (x *pgExtra) event(k pgEventKey) int {
	pos, written := x.events[k]
	for _, c := range x.compactions[k.actor] {
		if k.idx < c.below && (!written || c.at > pos) {
			return -1
		}
	}
	if written {
		return 1
	}
	return 0
}

// applyRetrieval applies tx's retrieval rows (putChunk, putVector,
// addTerms), recording them in own: the group's writes are rows.x, what
// it read rows.xr (completed here by reads in g.tx).
func (g *pgGroup) applyRetrieval(tx *persistence.Tx, rows *pgRows, own *pgExtra, res *persistence.TxResult) error {
	for _, c := range tx.Chunks {
		if c.ID.IsZero() || c.Branch.IsZero() || c.SourceTurn.IsZero() {
			return fmt.Errorf("%w: chunk: id, branch and source_turn are required", persistence.ErrInvalidArgument)
		}
		k := chunkKeyOf(c)
		prev, err := g.chunkAt(rows, own, k)
		if err != nil {
			return err
		}
		if prev.ok {
			res.ChunksSkipped++
			c.ID = messages.ChunkID(prev.id) // the partition names the stored chunk
		} else {
			b, err := encodeJSONRow(c)
			if err != nil {
				return err
			}
			own.chunks[k] = pgRow{data: b, id: c.ID}
		}
		mk := pgMemberKey{c.Branch, c.Seq, c.ID}
		doc, err := g.memberAt(rows, own, mk)
		if err != nil {
			return err
		}
		if !doc.ok { // in the partition already, maybe with later context: kept
			own.members[mk] = persistence.EncodeDoc(c.Terms, c.TermCount, persistence.MetaOf(c))
		}
	}
	for _, v := range tx.Vectors {
		switch {
		case v.Namespace == "":
			return fmt.Errorf("%w: vector: namespace is required", persistence.ErrInvalidArgument)
		case len(v.Vector) == 0 || len(v.Vector) > persistence.MaxVectorDims:
			return fmt.Errorf("%w: vector: %d dimensions, want 1 to %d", persistence.ErrInvalidArgument, len(v.Vector), persistence.MaxVectorDims)
		}
		b := make([]byte, 0, 4*len(v.Vector))
		for _, f := range v.Vector {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
		h := persistence.HashOf([]byte(v.Namespace))
		var k pgVecKey
		copy(k.ns[:], h[:8])
		k.chunk = v.Chunk
		own.vectors[k] = b
	}
	for _, u := range tx.TermUpdates {
		k := pgMemberKey{u.Branch, u.Seq, u.Chunk}
		doc, err := g.memberAt(rows, own, k)
		if err != nil {
			return err
		}
		if !doc.ok {
			continue
		}
		terms, n, meta, err := persistence.DecodeDoc(doc.data)
		if err != nil {
			return fmt.Errorf("%w: partition entry %x/%d/%x: %v", persistence.ErrCorrupt, k.branch, k.seq, k.chunk, err)
		}
		for t, w := range u.Add {
			terms[t] += w
		}
		own.members[k] = persistence.EncodeDoc(terms, n+u.Count, meta)
	}
	return nil
}

// applyActorLog applies tx's events and snapshots, as applyRetrieval.
func (g *pgGroup) applyActorLog(tx *persistence.Tx, rows *pgRows, own *pgExtra) error {
	base := len(rows.x.ops)
	for _, e := range tx.Events {
		k := pgEventKey{e.Actor, e.Index}
		ok, err := g.eventAt(rows, own, k)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%w: event %d of %s already exists", persistence.ErrDuplicate, e.Index, e.Actor)
		}
		own.events[k] = base + len(own.ops)
		own.ops = append(own.ops, pgActorOp{kind: pgOpEvent, actor: e.Actor, idx: e.Index, data: e.Data})
	}
	if e := tx.Snapshot; e != nil {
		own.ops = append(own.ops, pgActorOp{kind: pgOpSnapshot, snap: pgSnapLatest, actor: e.Actor,
			data: append(binary.AppendUvarint(nil, e.Index), e.Data...)})
	}
	if p := tx.PrevSnapshot; p != nil {
		own.ops = append(own.ops, pgActorOp{kind: pgOpSnapshot, snap: pgSnapPrev, actor: p.Actor,
			data: append(binary.AppendUvarint(nil, p.Index), p.Data...)})
		// Compact: the events before the previous snapshot go, as Badger
		// deletes them (those of this group included).
		own.compactions[p.Actor] = append(own.compactions[p.Actor], pgCompaction{below: p.Index, at: base + len(own.ops)})
		own.ops = append(own.ops, pgActorOp{kind: pgOpCompact, actor: p.Actor, idx: p.Index})
	}
	return nil
}

func encodeJSONRow(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode row: %v", persistence.ErrInvalidArgument, err)
	}
	return b, nil
}

// chunkAt is the chunk a Tx finds at k: its own, the group's, the stored.
func (g *pgGroup) chunkAt(rows *pgRows, own *pgExtra, k pgChunkKey) (pgRead, error) {
	for _, x := range []*pgExtra{own, &rows.x} {
		if r, ok := x.chunks[k]; ok {
			return pgRead{ok: true, id: r.id}, nil
		}
	}
	if r, ok := rows.xr.chunks[k]; ok {
		return r, nil
	}
	rows.xr.chunks[k] = pgRead{}
	err := g.readOne(rows.xr.setChunk(k), `SELECT id FROM ctx_chunks WHERE source_turn = $1 AND type = $2 AND hash = $3`,
		k.turn[:], int16(k.typ), k.hash[:])
	return rows.xr.chunks[k], err
}

// memberAt is the partition entry a Tx finds at k.
func (g *pgGroup) memberAt(rows *pgRows, own *pgExtra, k pgMemberKey) (pgDoc, error) {
	for _, x := range []*pgExtra{own, &rows.x} {
		if d, ok := x.members[k]; ok {
			return pgDoc{ok: true, data: d}, nil
		}
	}
	if k.seq > pgMaxSeq {
		return pgDoc{}, nil // never stored
	}
	if d, ok := rows.xr.members[k]; ok {
		return d, nil
	}
	rows.xr.members[k] = pgDoc{}
	err := g.readOne(func(v []byte) error {
		rows.xr.members[k] = pgDoc{ok: true, data: v}
		return nil
	}, `SELECT data FROM ctx_chunk_members WHERE branch = $1 AND seq = $2 AND chunk = $3`, k.branch[:], int64(k.seq), k.chunk[:])
	return rows.xr.members[k], err
}

// eventAt says whether a Tx finds event k stored.
func (g *pgGroup) eventAt(rows *pgRows, own *pgExtra, k pgEventKey) (bool, error) {
	for _, x := range []*pgExtra{own, &rows.x} {
		switch x.event(k) {
		case 1:
			return true, nil
		case -1:
			return false, nil
		}
	}
	if ok, read := rows.xr.events[k]; read {
		return ok, nil
	}
	rows.xr.events[k] = false
	err := g.readOne(func([]byte) error {
		rows.xr.events[k] = true
		return nil
	}, `SELECT actor FROM ctx_events WHERE actor = $1 AND idx = $2`, []byte(k.actor), int64(k.idx))
	return rows.xr.events[k], err
}

// readOne reads, in the group's transaction, the one BYTEA column of at
// most one row, and calls set with it if there is one.
func (g *pgGroup) readOne(set func([]byte) error, sql string, args ...any) error {
	var v []byte
	err := g.tx.QueryRow(g.ctx, sql, args...).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		if pgCode(err) == "" {
			err = fmt.Errorf("%w: %w", errConnLost, err)
		}
		return fmt.Errorf("postgres: read rows: %w", err)
	}
	return set(v)
}

// queue adds x's writes to b: the chunks, partition entries and vectors
// in key order, then the actor log writes in the order of their Txs.
func (x *pgExtra) queue(b *pgx.Batch, checks []pgCheck) []pgCheck {
	ck := make([]pgChunkKey, 0, len(x.chunks))
	for k := range x.chunks {
		ck = append(ck, k)
	}
	slices.SortFunc(ck, pgChunkKey.compare)
	for _, k := range ck {
		w := x.chunks[k]
		b.Queue(`INSERT INTO ctx_chunks (source_turn, type, hash, id, data) VALUES ($1, $2, $3, $4, $5)`,
			k.turn[:], int16(k.typ), k.hash[:], w.id[:], w.data)
		checks = append(checks, pgCheck{fmt.Sprintf("insert chunk %s", messages.ChunkID(w.id)), false})
	}
	mk := make([]pgMemberKey, 0, len(x.members))
	for k := range x.members {
		mk = append(mk, k)
	}
	slices.SortFunc(mk, pgMemberKey.compare)
	for _, k := range mk {
		b.Queue(`INSERT INTO ctx_chunk_members (branch, seq, chunk, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (branch, seq, chunk) DO UPDATE SET data = excluded.data`, k.branch[:], int64(k.seq), k.chunk[:], x.members[k])
		checks = append(checks, pgCheck{fmt.Sprintf("write partition entry %d/%s of branch %s", k.seq, messages.ChunkID(k.chunk), messages.BranchID(k.branch)), false})
	}
	vk := make([]pgVecKey, 0, len(x.vectors))
	for k := range x.vectors {
		vk = append(vk, k)
	}
	slices.SortFunc(vk, pgVecKey.compare)
	for _, k := range vk {
		b.Queue(`INSERT INTO ctx_vectors (namespace, chunk, data) VALUES ($1, $2, $3)
			ON CONFLICT (namespace, chunk) DO UPDATE SET data = excluded.data`, k.ns[:], k.chunk[:], x.vectors[k])
		checks = append(checks, pgCheck{fmt.Sprintf("write vector of chunk %s", messages.ChunkID(k.chunk)), false})
	}
	for _, o := range x.ops {
		switch o.kind {
		case pgOpEvent:
			b.Queue(`INSERT INTO ctx_events (actor, idx, data) VALUES ($1, $2, $3)`, []byte(o.actor), int64(o.idx), o.data)
			checks = append(checks, pgCheck{fmt.Sprintf("insert event %d of %s", o.idx, o.actor), false})
		case pgOpCompact:
			if o.idx > pgMaxSeq {
				b.Queue(`DELETE FROM ctx_events WHERE actor = $1`, []byte(o.actor))
			} else {
				b.Queue(`DELETE FROM ctx_events WHERE actor = $1 AND idx < $2`, []byte(o.actor), int64(o.idx))
			}
			checks = append(checks, pgCheck{fmt.Sprintf("compact events of %s before %d", o.actor, o.idx), false})
		case pgOpSnapshot:
			b.Queue(`INSERT INTO ctx_snapshots (kind, actor, data) VALUES ($1, $2, $3)
				ON CONFLICT (kind, actor) DO UPDATE SET data = excluded.data`, o.snap, []byte(o.actor), o.data)
			checks = append(checks, pgCheck{fmt.Sprintf("write snapshot of %s", o.actor), false})
		}
	}
	return x.queueRetention(b, x.queueKeyed(b, checks))
}

// checkPGSeqs refuses the seqs and event indexes of tx that PostgreSQL's
// BIGINT cannot hold (Tx.Check has checked the rest).
func checkPGSeqs(tx *persistence.Tx) error {
	for _, s := range []struct {
		field string
		rows  []persistence.TurnRow
	}{{"new turn", tx.NewTurns}, {"turn", tx.Turns}} {
		for i, r := range s.rows {
			if r.Seq > pgMaxSeq {
				return fmt.Errorf("%w: %s %d: seq %d is over %d, the largest PostgreSQL's BIGINT holds",
					persistence.ErrInvalidArgument, s.field, i, r.Seq, uint64(pgMaxSeq))
			}
		}
	}
	for i, r := range tx.States {
		if r.Seq > pgMaxSeq {
			return fmt.Errorf("%w: state %d: seq %d is over %d, the largest PostgreSQL's BIGINT holds",
				persistence.ErrInvalidArgument, i, r.Seq, uint64(pgMaxSeq))
		}
	}
	for i, e := range tx.Events {
		if e.Index > pgMaxSeq {
			return fmt.Errorf("%w: event %d: index %d is over %d, the largest PostgreSQL's BIGINT holds",
				persistence.ErrInvalidArgument, i, e.Index, uint64(pgMaxSeq))
		}
	}
	for i, c := range tx.Chunks {
		if c.Seq > pgMaxSeq {
			return fmt.Errorf("%w: chunk %d: seq %d is over %d, the largest PostgreSQL's BIGINT holds",
				persistence.ErrInvalidArgument, i, c.Seq, uint64(pgMaxSeq))
		}
	}
	return nil
}

// ---- reads ----

// Chunks returns the chunk rows of turn, in (type, hash) order.
func (d *PGDB) Chunks(ctx context.Context, turn messages.TurnID) ([]persistence.ChunkRow, error) {
	return pgScanRows[persistence.ChunkRow](ctx, d, "read chunks of turn "+turn.String(),
		`SELECT data FROM ctx_chunks WHERE source_turn = $1 ORDER BY type, hash`, turn[:])
}

// ChunkByID returns the chunk row of id (ErrNotFound if none).
func (d *PGDB) ChunkByID(ctx context.Context, id messages.ChunkID) (persistence.ChunkRow, error) {
	return pgGetRow[persistence.ChunkRow](ctx, d, "read chunk "+id.String(), fmt.Errorf("%w: chunk %s", persistence.ErrRowNotFound, id),
		`SELECT data FROM ctx_chunks WHERE id = $1 ORDER BY source_turn, type, hash LIMIT 1`, id[:])
}

// BranchChunks calls fn with every chunk of branch's partition, in seq
// order, and stops at fn's first error, which it returns. It reads a page
// at a time and holds no connection while fn runs (see EachTurnRow).
func (d *PGDB) BranchChunks(ctx context.Context, branch messages.BranchID, fn func(persistence.ChunkDoc) error) error {
	return d.branchChunks(ctx, branch, "", func(doc persistence.ChunkDoc, _ []float32) error { return fn(doc) })
}

// BranchChunkVectors calls fn with every chunk of branch's partition, in
// seq order, and its vector in namespace ns (nil if it has none), and
// stops at fn's first error, which it returns: BranchChunks and Vector
// of each chunk, read a page of chunks with their vectors per query (a
// join), holding no connection while fn runs.
func (d *PGDB) BranchChunkVectors(ctx context.Context, ns string, branch messages.BranchID, fn func(persistence.ChunkDoc, []float32) error) error {
	if ns == "" {
		return fmt.Errorf("%w: branch chunk vectors: namespace is required", persistence.ErrInvalidArgument)
	}
	return d.branchChunks(ctx, branch, ns, fn)
}

// branchChunks is BranchChunks, with each chunk's vector in namespace ns
// unless ns is "". Pages are keyed on the partition's primary key
// (branch, seq, chunk); the vectors join on theirs (namespace, chunk).
func (d *PGDB) branchChunks(ctx context.Context, branch messages.BranchID, ns string, fn func(persistence.ChunkDoc, []float32) error) error {
	what := "read partition of branch " + branch.String()
	// The vector column is NULL where the chunk has none, and always
	// without a namespace.
	sel, args := `SELECT m.seq, m.chunk, m.data, NULL::BYTEA FROM ctx_chunk_members m WHERE m.branch = $1`, []any{branch[:]}
	if ns != "" {
		h := persistence.HashOf([]byte(ns))
		sel = `SELECT m.seq, m.chunk, m.data, v.data FROM ctx_chunk_members m
			LEFT JOIN ctx_vectors v ON v.namespace = $2 AND v.chunk = m.chunk
			WHERE m.branch = $1`
		args = append(args, h[:8])
	}
	n := len(args)
	type entry struct {
		doc persistence.ChunkDoc
		vec []float32
	}
	var after *persistence.ChunkDoc
	for {
		if err := d.alive(); err != nil {
			return err
		}
		var rows pgx.Rows
		var err error
		if after == nil {
			rows, err = d.pool.Query(ctx, sel+fmt.Sprintf(` ORDER BY m.seq, m.chunk LIMIT $%d`, n+1), append(args[:n:n], pgEachPage)...)
		} else {
			rows, err = d.pool.Query(ctx, sel+fmt.Sprintf(` AND (m.seq, m.chunk) > ($%d, $%d) ORDER BY m.seq, m.chunk LIMIT $%d`, n+1, n+2, n+3),
				append(args[:n:n], int64(after.Seq), after.Chunk[:], pgEachPage)...)
		}
		if err != nil {
			return d.readErr(what, err)
		}
		var page []entry
		for rows.Next() {
			var seq int64
			var chunk, data, vec []byte
			if err := rows.Scan(&seq, &chunk, &data, &vec); err != nil {
				rows.Close()
				return d.readErr(what, err)
			}
			e := entry{doc: persistence.ChunkDoc{Seq: uint64(seq)}}
			if len(chunk) != 16 {
				rows.Close()
				return fmt.Errorf("%w: %s: chunk id of %d bytes", persistence.ErrCorrupt, what, len(chunk))
			}
			copy(e.doc.Chunk[:], chunk)
			if e.doc.Terms, e.doc.TermCount, e.doc.Meta, err = persistence.DecodeDoc(data); err != nil {
				rows.Close()
				return fmt.Errorf("%w: partition entry %d/%s of branch %s: %v", persistence.ErrCorrupt, e.doc.Seq, e.doc.Chunk, branch, err)
			}
			if vec != nil {
				if e.vec, err = persistence.DecodeVector(vec, e.doc.Chunk); err != nil {
					rows.Close()
					return err
				}
			}
			page = append(page, e)
		}
		if err := rows.Err(); err != nil {
			return d.readErr(what, err)
		}
		for _, e := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(e.doc, e.vec); err != nil {
				return err
			}
		}
		if len(page) < pgEachPage {
			return nil
		}
		after = &page[len(page)-1].doc
	}
}

// Vector returns the vector of chunk in namespace ns, or nil if it has
// none.
func (d *PGDB) Vector(ctx context.Context, ns string, chunk messages.ChunkID) ([]float32, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	h := persistence.HashOf([]byte(ns))
	var b []byte
	err := d.pool.QueryRow(ctx, `SELECT data FROM ctx_vectors WHERE namespace = $1 AND chunk = $2`, h[:8], chunk[:]).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, d.readErr("read vector of chunk "+chunk.String(), err)
	}
	return persistence.DecodeVector(b, chunk)
}

// Events calls fn for every event of actor from index on, in order. It
// reads a page at a time and holds no connection while fn runs.
func (d *PGDB) Events(ctx context.Context, actor string, from uint64, fn func(index uint64, data []byte) error) error {
	if err := persistence.CheckActor(actor); err != nil {
		return err
	}
	what := "read events of " + actor
	for from <= pgMaxSeq {
		if err := d.alive(); err != nil {
			return err
		}
		rows, err := d.pool.Query(ctx, `SELECT idx, data FROM ctx_events WHERE actor = $1 AND idx >= $2 ORDER BY idx LIMIT $3`,
			[]byte(actor), int64(from), pgEachPage)
		if err != nil {
			return d.readErr(what, err)
		}
		type ev struct {
			idx  uint64
			data []byte
		}
		var page []ev
		for rows.Next() {
			var idx int64
			var data []byte
			if err := rows.Scan(&idx, &data); err != nil {
				rows.Close()
				return d.readErr(what, err)
			}
			page = append(page, ev{uint64(idx), data})
		}
		if err := rows.Err(); err != nil {
			return d.readErr(what, err)
		}
		for _, e := range page {
			if err := fn(e.idx, e.data); err != nil {
				return err
			}
		}
		if len(page) < pgEachPage {
			return nil
		}
		from = page[len(page)-1].idx + 1
	}
	return nil
}

// Snapshot returns actor's latest snapshot, if it has one. A record
// whose index cannot be read is ErrCorrupt.
func (d *PGDB) Snapshot(ctx context.Context, actor string) (persistence.EventRecord, bool, error) {
	return d.snapshotAt(ctx, actor, pgSnapLatest)
}

// PrevSnapshot returns the snapshot actor had before its latest (see
// DB.PrevSnapshot).
func (d *PGDB) PrevSnapshot(ctx context.Context, actor string) (persistence.EventRecord, bool, error) {
	return d.snapshotAt(ctx, actor, pgSnapPrev)
}

func (d *PGDB) snapshotAt(ctx context.Context, actor string, kind int16) (persistence.EventRecord, bool, error) {
	if err := persistence.CheckActor(actor); err != nil {
		return persistence.EventRecord{}, false, err
	}
	if err := d.alive(); err != nil {
		return persistence.EventRecord{}, false, err
	}
	var v []byte
	err := d.pool.QueryRow(ctx, `SELECT data FROM ctx_snapshots WHERE kind = $1 AND actor = $2`, kind, []byte(actor)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.EventRecord{}, false, nil
	}
	if err != nil {
		return persistence.EventRecord{}, false, d.readErr("read snapshot of "+actor, err)
	}
	idx, n := binary.Uvarint(v)
	if n <= 0 {
		return persistence.EventRecord{}, false, fmt.Errorf("%w: snapshot of %s", persistence.ErrCorrupt, actor)
	}
	return persistence.EventRecord{Actor: actor, Index: idx, Data: v[n:]}, true, nil
}

// CorruptSnapshot overwrites the data of actor's latest snapshot, keeping
// its index, as DB.CorruptSnapshot does: for tests of recovery.
func (d *PGDB) CorruptSnapshot(ctx context.Context, actor string) error {
	rec, ok, err := d.Snapshot(ctx, actor)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: snapshot of %s", persistence.ErrNotFound, actor)
	}
	if _, err := d.pool.Exec(ctx, `UPDATE ctx_snapshots SET data = $1 WHERE kind = $2 AND actor = $3`,
		persistence.CorruptSnapshotData(rec.Index), pgSnapLatest, []byte(actor)); err != nil {
		return d.readErr("corrupt snapshot of "+actor, err)
	}
	return nil
}

// ActorLog returns the persistence provider on this database (see
// DB.ActorLog).
func (d *PGDB) ActorLog(snapshotEvery int) *persistence.ActorLog {
	return persistence.NewActorLog(d, d.log, snapshotEvery)
}
