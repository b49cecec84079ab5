package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/contextinfinity/ctxinf/messages"
)

// The lifecycle tables (SRD §16 in Badger): sessions, branches, turns,
// states, jobs, chunks, and the actors' event logs and snapshots. They are
// written only through Tx, atomically with the context-store appends and
// the actor event that caused them, in the same group commit.
const (
	tableSession    byte = 'S' // S | session(16)               → SessionRow
	tableBranchRow  byte = 'B' // B | branch(16)                → BranchRow
	tableSessBranch byte = 'Y' // Y | session(16) | branch(16)  → empty
	tableTurnRow    byte = 'U' // U | branch(16) | seq(8)       → TurnRow  (unique (branch, turn_seq))
	tableTurnByID   byte = 'R' // R | turn(16) | branch(16)     → its TurnRow's key (U | branch | seq)
	tableStateRow   byte = 'V' // V | branch(16) | seq(8)       → StateRow (unique (branch, state_seq))
	tableJob        byte = 'J' // J | job(16)                   → Job
	tableChunkRow   byte = 'K' // K | turn(16) | type(1) | hash(32) → ChunkRow (unique)
	tableStepRow    byte = 'T' // T | turn(16) | index(4)       → StepRow (unique (turn, step_index))
	tableStepByID   byte = 'Q' // Q | step(16)                  → its StepRow's key (T | turn | index)
	tableEvent      byte = 'E' // E | actor | 0 | index(8)      → event bytes
	tableSnapshot   byte = 'P' // P | actor                     → index uvarint | snapshot bytes
	tablePrevSnap   byte = 'F' // F | actor                     → index uvarint | snapshot bytes (the one before P's)
	tableImport     byte = 'G' // G | session(16)               → ImportRow (an import under way)
	tableActivity   byte = 'A' // A | session(16)               → unix nanoseconds (8): last activity of Tx.Touched
	tableTenantSess byte = 'N' // N | len(1) | tenant | session(16) → the session row's key (a tenant's sessions, in id order)
)

// DB is the Badger store: the context store plus the lifecycle tables.
type DB struct{ *badgerStore }

// Open opens (creating if needed) the database in opts.Dir.
func Open(opts Options) (*DB, error) {
	s, err := openBadger(opts)
	if err != nil {
		return nil, err
	}
	d := &DB{s}
	if err := d.indexRows(); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
	}
	if err := d.migrateProxyTitles(); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
	}
	return d, nil
}

// Cipher is the cipher of an encrypted store, for its stream journals
// (JournalPolicy.Cipher, RecoverJournal); nil when the store is not
// encrypted.
func (d *DB) Cipher() *persistence.Cipher { return d.cipher }

// MaxPayloadBytes is the largest payload the store appends
// (store.max_payload_bytes).
func (d *DB) MaxPayloadBytes() int64 { return d.opts.Limits.MaxPayloadBytes }

// CheckPayload refuses a payload of n bytes that the store would refuse
// to append (over store.max_payload_bytes), naming field: callers check
// input before they accept it, rather than have its commit fail.
func (d *DB) CheckPayload(field string, n int) error {
	return d.opts.Limits.CheckSize(field, n)
}

// The indexes by id of the turn rows (tableTurnByID) and step rows
// (tableStepByID) came after the rows. Each has a meta key marking a store
// whose rows are all indexed: every store created since, and older ones
// once Open has indexed them.
//
// The turn index was first keyed by turn alone, and a fork's copy of a
// pending turn (a row of the same turn on the fork) took its parent's
// entry; it is keyed by turn and branch since (turn_row_index_2), and
// the entries of the first one are left unread.
const (
	turnIndexMeta = "turn_row_index_2"
	stepIndexMeta = "step_row_index"
	// tenantIndexMeta marks a store whose session rows are all in the
	// index by tenant (tableTenantSess).
	tenantIndexMeta = "tenant_session_index"
)

// tenantPrefix is the prefix of tenant's entries in the index of
// sessions by tenant ("" is DefaultTenant).
func tenantPrefix(tenant string) []byte {
	if tenant == "" {
		tenant = persistence.DefaultTenant
	}
	return append([]byte{tableTenantSess, byte(len(tenant))}, tenant...)
}

// tenantSessionKey is the index entry of session s.
func tenantSessionKey(s persistence.SessionRow) []byte {
	return append(tenantPrefix(s.TenantName()), s.ID[:]...)
}

// turnByIDKey is the index entry of the row of turn on branch.
func turnByIDKey(turn messages.TurnID, branch messages.BranchID) []byte {
	return append(id16(tableTurnByID, turn), branch[:]...)
}

// indexRows indexes the rows of a store written before the indexes.
func (d *DB) indexRows() error {
	err := d.backfillIndex(turnIndexMeta, tableTurnRow, func(v []byte) ([]byte, error) {
		var r struct {
			ID     messages.TurnID   `json:"id"`
			Branch messages.BranchID `json:"branch"`
		}
		err := json.Unmarshal(v, &r)
		return turnByIDKey(r.ID, r.Branch), err
	})
	if err != nil {
		return err
	}
	err = d.backfillIndex(stepIndexMeta, tableStepRow, func(v []byte) ([]byte, error) {
		var r struct {
			ID messages.StepID `json:"id"`
		}
		err := json.Unmarshal(v, &r)
		return id16(tableStepByID, r.ID), err
	})
	if err != nil {
		return err
	}
	return d.backfillIndex(tenantIndexMeta, tableSession, func(v []byte) ([]byte, error) {
		var r persistence.SessionRow
		err := json.Unmarshal(v, &r)
		return tenantSessionKey(r), err
	})
}

// backfillIndex writes, unless meta marks it done, an index entry (key
// from the row's value, value the row's key) for every row of table, in
// groups of indexBatch, and then sets meta; a crash on the way leaves
// meta unset, and the next Open starts again (the entries are the same
// each time).
func (d *DB) backfillIndex(meta string, table byte, key func(v []byte) ([]byte, error)) error {
	return d.read(func(txn *badger.Txn) error {
		if ok, err := hasKey(txn, metaKey(meta)); err != nil || ok {
			return err
		}
		var entries []entry
		start, n := time.Now(), 0
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{table}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var k []byte
			if err := it.Item().Value(func(v []byte) (err error) { k, err = key(v); return err }); err != nil {
				return fmt.Errorf("%w: row %x: %v", persistence.ErrCorrupt, it.Item().Key(), err)
			}
			entries = append(entries, entry{key: k, val: it.Item().KeyCopy(nil)})
			n++
			if len(entries) == indexBatch {
				if err := d.writeRaw(entries); err != nil {
					return fmt.Errorf("index rows: %w", err)
				}
				entries = nil
			}
		}
		entries = append(entries, entry{key: metaKey(meta), val: []byte{1}})
		if err := d.writeRaw(entries); err != nil {
			return fmt.Errorf("index rows: %w", err)
		}
		if n > 0 {
			d.log.Info().Str("index", meta).Int("rows", n).Dur("took", time.Since(start)).
				Msg("indexed the rows of a store written before this index (once)")
		}
		return nil
	})
}

// indexBatch is how many rows backfillIndex indexes per commit (a
// variable for tests).
var indexBatch = 10000

var (
	_ persistence.Database   = (*DB)(nil)
	_ persistence.ActorStore = (*DB)(nil)
	_ persistence.Store      = (*DB)(nil)
	_ persistence.Lifecycle  = (*DB)(nil)
)

func jobKey(t persistence.JobType, turn messages.TurnID) ([]byte, error) {
	c, ok := persistence.JobTypeCode(t)
	if !ok {
		return nil, fmt.Errorf("%w: job type %q", persistence.ErrInvalidArgument, t)
	}
	return append([]byte{tableJob, c}, turn[:]...), nil
}

func id16(t byte, a [16]byte) []byte { return append([]byte{t}, a[:]...) }

func seqKey(t byte, b messages.BranchID, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(id16(t, b), seq)
}

func eventKey(actor string, index uint64) []byte {
	k := append([]byte{tableEvent}, actor...)
	return binary.BigEndian.AppendUint64(append(k, 0), index)
}

func snapshotKey(table byte, actor string) []byte { return append([]byte{table}, actor...) }

func eventPrefix(actor string) []byte { return append(append([]byte{tableEvent}, actor...), 0) }

func chunkKey(c persistence.ChunkRow) []byte {
	k := id16(tableChunkRow, c.SourceTurn)
	k = append(k, byte(c.Type))
	return append(k, c.Hash[:]...)
}

// Commit writes tx atomically. It returns once tx is durable.
func (d *DB) Commit(ctx context.Context, tx *persistence.Tx) (persistence.TxResult, error) {
	if err := tx.Check(d.opts.Limits); err != nil {
		return persistence.TxResult{}, err
	}
	o := &op{kind: opTx, tx: tx}
	for _, a := range tx.Appends {
		part := &op{}
		d.prepareBlob(part, a.Req.Payload)
		o.parts = append(o.parts, part)
	}
	if err := d.submit(ctx, o); err != nil {
		return persistence.TxResult{}, err
	}
	return o.res.tx, nil
}

// rowKey marks a lifecycle key as written by this group.
func (g *group) claimRow(k []byte) { put(g, g.rows, string(k), true) }

func (g *group) rowExists(k []byte) (bool, error) {
	if g.rows[string(k)] || (g.prev != nil && g.prev.rows[string(k)]) {
		return true, nil
	}
	return hasKey(g.txn, k)
}

// lastEntry returns the value this group or prev last set at k.
func (g *group) lastEntry(k []byte) ([]byte, bool) {
	for _, x := range []*group{g, g.prev} {
		if x == nil || !x.rows[string(k)] {
			continue
		}
		for i := len(x.entries) - 1; i >= 0; i-- {
			if e := x.entries[i]; !e.del && string(e.key) == string(k) {
				return e.val, true
			}
		}
	}
	return nil, false
}

func (g *group) setJSON(k []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: encode row: %v", persistence.ErrInvalidArgument, err)
	}
	g.setRow(k, b)
	return nil
}

// setRow writes the encoded lifecycle row b at k.
func (g *group) setRow(k, b []byte) {
	g.set(k, b)
	g.claimRow(k)
}

func (g *group) applyTx(o *op) (persistence.TxResult, error) {
	var res persistence.TxResult
	tx := o.tx
	for i, spec := range tx.NewBranches {
		if _, err := g.newBranch(spec); err != nil {
			return res, fmt.Errorf("new branch %d: %w", i, err)
		}
	}
	for i, a := range tx.Appends {
		if _, _, err := g.appendNode(o.parts[i], a.Branch, a.ID, a.Req); err != nil {
			return res, fmt.Errorf("append %d: %w", i, err)
		}
	}
	for _, r := range tx.Sessions {
		k := id16(tableSession, r.ID)
		if err := g.setJSON(k, r); err != nil {
			return res, err
		}
		g.set(tenantSessionKey(r), k)
	}
	for _, r := range tx.Branches {
		if err := g.setJSON(id16(tableBranchRow, r.ID), r); err != nil {
			return res, err
		}
		k := append(id16(tableSessBranch, r.Session), r.ID[:]...)
		g.set(k, nil)
	}
	if err := g.applyRetention(tx); err != nil {
		return res, err
	}
	for _, r := range tx.Imports {
		if err := g.setJSON(id16(tableImport, r.Session), r); err != nil {
			return res, err
		}
	}
	for _, id := range tx.DoneImports {
		g.entries = append(g.entries, entry{key: id16(tableImport, id), del: true})
	}
	for _, r := range tx.DropBranches {
		g.entries = append(g.entries, entry{key: id16(tableBranchRow, r.ID), del: true},
			entry{key: append(id16(tableSessBranch, r.Session), r.ID[:]...), del: true})
	}
	for _, r := range tx.NewTurns {
		k := seqKey(tableTurnRow, r.Branch, r.Seq)
		if prev, ok, err := groupRow[persistence.TurnRow](g, k); err != nil {
			return res, err
		} else if ok && prev.ID != r.ID {
			return res, fmt.Errorf("%w: turn_seq %d of branch %s is turn %s, not %s", persistence.ErrDuplicate, r.Seq, r.Branch, prev.ID, r.ID)
		}
		if err := g.setJSON(k, r); err != nil {
			return res, err
		}
		g.set(turnByIDKey(r.ID, r.Branch), k)
	}
	for _, r := range tx.Turns {
		k := seqKey(tableTurnRow, r.Branch, r.Seq)
		if err := g.setJSON(k, r); err != nil {
			return res, err
		}
		g.set(turnByIDKey(r.ID, r.Branch), k)
	}
	for _, r := range tx.States {
		k := seqKey(tableStateRow, r.Branch, r.Seq)
		if ok, err := g.rowExists(k); err != nil {
			return res, err
		} else if ok {
			return res, fmt.Errorf("%w: state_seq %d of branch %s is already committed", persistence.ErrDuplicate, r.Seq, r.Branch)
		}
		if err := g.setJSON(k, r); err != nil {
			return res, err
		}
	}
	for _, j := range tx.Jobs {
		k, err := jobKey(j.Type, j.Turn)
		if err != nil {
			return res, err
		}
		if err := g.setJSON(k, j); err != nil {
			return res, err
		}
	}
	for _, j := range tx.DoneJobs {
		k, err := jobKey(j.Type, j.Turn)
		if err != nil {
			return res, err
		}
		g.entries = append(g.entries, entry{key: k, del: true})
	}
	for _, c := range tx.Chunks {
		if err := g.putChunk(c, &res); err != nil {
			return res, err
		}
	}
	for _, v := range tx.Vectors {
		if err := g.putVector(v); err != nil {
			return res, err
		}
	}
	for _, u := range tx.TermUpdates {
		if err := g.addTerms(u); err != nil {
			return res, err
		}
	}
	for _, r := range tx.Steps {
		k := binary.BigEndian.AppendUint32(id16(tableStepRow, r.Turn), r.Index)
		if prev, ok, err := groupRow[persistence.StepRow](g, k); err != nil {
			return res, err
		} else if ok && prev.ID != r.ID {
			return res, fmt.Errorf("%w: step %d of turn %s is step %s, not %s", persistence.ErrDuplicate, r.Index, r.Turn, prev.ID, r.ID)
		}
		b, err := persistence.EncodeStepRow(r)
		if err != nil {
			return res, fmt.Errorf("%w: encode row: %v", persistence.ErrInvalidArgument, err)
		}
		g.setRow(k, b)
		g.set(id16(tableStepByID, r.ID), k)
	}
	for _, e := range tx.Events {
		k := eventKey(e.Actor, e.Index)
		if ok, err := g.rowExists(k); err != nil {
			return res, err
		} else if ok {
			return res, fmt.Errorf("%w: event %d of %s already exists", persistence.ErrDuplicate, e.Index, e.Actor)
		}
		g.setRow(k, e.Data)
	}
	for i, r := range tx.Keys {
		if err := g.putKey(r); err != nil {
			return res, fmt.Errorf("key %d: %w", i, err)
		}
	}
	for i, e := range tx.Proxy {
		if err := g.putProxy(e); err != nil {
			return res, fmt.Errorf("proxy entry %d: %w", i, err)
		}
	}
	if e := tx.Snapshot; e != nil {
		g.setRow(snapshotKey(tableSnapshot, e.Actor), append(binary.AppendUvarint(nil, e.Index), e.Data...))
	}
	if p := tx.PrevSnapshot; p != nil {
		prevKey := snapshotKey(tablePrevSnap, p.Actor)
		// Compact: events before the previous snapshot are no longer
		// needed, now that it is proven readable and has a successor.
		// Those before the fallback it replaces were deleted then:
		// start there, or every snapshot would walk all the tombstones
		// of the actor's history (until compaction drops them), a cost
		// growing with it. An unreadable record only means a longer walk.
		from, err := g.snapshotIndex(prevKey)
		if errors.Is(err, persistence.ErrCorrupt) {
			from, err = 0, nil
		}
		if err != nil {
			return res, err
		}
		g.setRow(prevKey, append(binary.AppendUvarint(nil, p.Index), p.Data...))
		prefix := eventPrefix(p.Actor)
		before := func(k []byte) bool { return binary.BigEndian.Uint64(k[len(k)-8:]) < p.Index }
		it := g.txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		for it.Seek(eventKey(p.Actor, min(from, p.Index))); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			if !before(k) {
				break
			}
			g.entries = append(g.entries, entry{key: k, del: true})
		}
		it.Close()
		// Events of this group and of prev are not in txn yet.
		var recent []entry
		for _, x := range []*group{g.prev, g} {
			if x != nil {
				recent = append(recent, x.entries...)
			}
		}
		for _, x := range recent {
			if !x.del && len(x.key) == len(prefix)+8 && bytes.HasPrefix(x.key, prefix) && before(x.key) {
				g.entries = append(g.entries, entry{key: x.key, del: true})
			}
		}
	}
	return res, nil
}

// snapshotIndex is the index of the snapshot stored at key k as this group
// sees it, 0 when there is none.
func (g *group) snapshotIndex(k []byte) (uint64, error) {
	v, ok := g.lastEntry(k)
	if !ok {
		item, err := g.txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if v, err = item.ValueCopy(nil); err != nil {
			return 0, err
		}
	}
	idx, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, fmt.Errorf("%w: snapshot record of %q", persistence.ErrCorrupt, k[1:])
	}
	return idx, nil
}

// groupRow reads the row at k as this group sees it: its own writes and
// prev's first, then the store.
func groupRow[T any](g *group, k []byte) (T, bool, error) {
	var r T
	if v, ok := g.lastEntry(k); ok {
		return r, true, json.Unmarshal(v, &r)
	}
	item, err := g.txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	return r, true, item.Value(func(v []byte) error { return json.Unmarshal(v, &r) })
}

// --- reads ---

func getJSON[T any](d *DB, k []byte, notFound error) (T, error) {
	var v T
	err := d.read(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return notFound
		}
		if err != nil {
			return err
		}
		return item.Value(func(b []byte) error { return json.Unmarshal(b, &v) })
	})
	return v, err
}

// scanJSON decodes every row under prefix, in key order, up to limit (0:
// all), starting at start (nil: the prefix).
func scanJSON[T any](d *DB, prefix, start []byte, limit int) ([]T, error) {
	var out []T
	err := d.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
		defer it.Close()
		if start == nil {
			start = prefix
		}
		for it.Seek(start); it.Valid(); it.Next() {
			var v T
			if err := it.Item().Value(func(b []byte) error { return json.Unmarshal(b, &v) }); err != nil {
				return fmt.Errorf("%w: row %x: %v", persistence.ErrCorrupt, it.Item().Key(), err)
			}
			out = append(out, v)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

func (d *DB) Session(ctx context.Context, id messages.SessionID) (persistence.SessionRow, error) {
	return getJSON[persistence.SessionRow](d, id16(tableSession, id), fmt.Errorf("%w: session %s", persistence.ErrRowNotFound, id))
}

func (d *DB) Sessions(ctx context.Context) ([]persistence.SessionRow, error) {
	return scanJSON[persistence.SessionRow](d, []byte{tableSession}, nil, 0)
}

// SessionPage returns a page of a tenant's sessions, read through the
// index of sessions by tenant.
func (d *DB) SessionPage(ctx context.Context, q persistence.SessionQuery) ([]persistence.SessionRow, error) {
	if err := persistence.CheckPageSize(q.Limit); err != nil {
		return nil, err
	}
	out := []persistence.SessionRow{}
	if q.Limit == 0 {
		return out, nil
	}
	prefix := tenantPrefix(q.TenantName())
	seek := append(slices.Clip(prefix), q.After[:]...)
	if q.Newest && q.After.IsZero() {
		seek = append(slices.Clip(prefix), bytes.Repeat([]byte{0xff}, 16)...)
	}
	err := d.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: q.Newest})
		defer it.Close()
		for it.Seek(seek); it.Valid() && len(out) < q.Limit; it.Next() {
			k := it.Item().Key()
			if len(k) != len(prefix)+16 {
				return fmt.Errorf("%w: tenant index key %x", persistence.ErrCorrupt, k)
			}
			id := messages.SessionID(k[len(prefix):])
			if id == q.After {
				continue
			}
			r, ok, err := txnRow[persistence.SessionRow](txn, id16(tableSession, id))
			if err != nil {
				return err
			}
			if ok { // an entry outlives its row only until the purge that dropped the row ends
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}

// Import returns the marker of session's import, if it is under way
// (ErrNotFound otherwise).
func (d *DB) Import(ctx context.Context, session messages.SessionID) (persistence.ImportRow, error) {
	return getJSON[persistence.ImportRow](d, id16(tableImport, session), fmt.Errorf("%w: import of session %s", persistence.ErrRowNotFound, session))
}

// Imports returns the imports under way (or cut short by a crash).
func (d *DB) Imports(ctx context.Context) ([]persistence.ImportRow, error) {
	return scanJSON[persistence.ImportRow](d, []byte{tableImport}, nil, 0)
}

func (d *DB) BranchRow(ctx context.Context, id messages.BranchID) (persistence.BranchRow, error) {
	return getJSON[persistence.BranchRow](d, id16(tableBranchRow, id), fmt.Errorf("%w: branch %s", persistence.ErrRowNotFound, id))
}

// BranchPage returns up to limit of session's branch rows whose ids
// follow after, in id order.
func (d *DB) BranchPage(ctx context.Context, session messages.SessionID, after messages.BranchID, limit int) ([]persistence.BranchRow, error) {
	if err := persistence.CheckPageSize(limit); err != nil {
		return nil, err
	}
	out := []persistence.BranchRow{}
	if limit == 0 {
		return out, nil
	}
	prefix := id16(tableSessBranch, session)
	err := d.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(append(slices.Clip(prefix), after[:]...)); it.Valid() && len(out) < limit; it.Next() {
			id := messages.BranchID(it.Item().Key()[17:33])
			if id == after {
				continue
			}
			r, ok, err := txnRow[persistence.BranchRow](txn, id16(tableBranchRow, id))
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: branch %s", persistence.ErrRowNotFound, id)
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

func (d *DB) Branches(ctx context.Context, session messages.SessionID) ([]persistence.BranchRow, error) {
	var ids []messages.BranchID
	err := d.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: id16(tableSessBranch, session)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			ids = append(ids, messages.BranchID(k[17:33]))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]persistence.BranchRow, 0, len(ids))
	for _, id := range ids {
		r, err := d.BranchRow(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (d *DB) TurnRows(ctx context.Context, branch messages.BranchID, fromSeq uint64, limit int) ([]persistence.TurnRow, error) {
	if err := persistence.CheckPageSize(limit); err != nil {
		return nil, err
	}
	if limit == 0 {
		return nil, nil
	}
	return scanJSON[persistence.TurnRow](d, id16(tableTurnRow, branch), seqKey(tableTurnRow, branch, fromSeq), limit)
}

// TurnRow returns the row of turn on branch, found by its id (a turn
// of branch's parent, which a fork sees, is not on branch).
func (d *DB) TurnRow(ctx context.Context, branch messages.BranchID, turn messages.TurnID) (persistence.TurnRow, error) {
	notFound := fmt.Errorf("%w: %s on branch %s", persistence.ErrNodeNotFound, turn, branch)
	return indexedJSON[persistence.TurnRow](d, turnByIDKey(turn, branch), notFound, func(k []byte) error {
		if len(k) != 1+16+8 || k[0] != tableTurnRow {
			return fmt.Errorf("%w: turn index entry of %s is %x", persistence.ErrCorrupt, turn, k)
		}
		if messages.BranchID(k[1:17]) != branch {
			return notFound
		}
		return nil
	})
}

// StepRow returns the row of step, found by its id.
func (d *DB) StepRow(ctx context.Context, step messages.StepID) (persistence.StepRow, error) {
	return indexedJSON[persistence.StepRow](d, id16(tableStepByID, step), fmt.Errorf("%w: step %s", persistence.ErrRowNotFound, step), func(k []byte) error {
		if len(k) != 1+16+4 || k[0] != tableStepRow {
			return fmt.Errorf("%w: step index entry of %s is %x", persistence.ErrCorrupt, step, k)
		}
		return nil
	})
}

// indexedJSON reads the row an index entry points at: the entry at idx
// holds the row's key, which check may refuse; notFound is the error when
// there is no entry. A missing row is corruption: the entry and its row
// are written in one commit, and rows are never deleted.
func indexedJSON[T any](d *DB, idx []byte, notFound error, check func(rowKey []byte) error) (T, error) {
	var k []byte
	err := d.read(func(txn *badger.Txn) error {
		item, err := txn.Get(idx)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return notFound
		}
		if err == nil {
			k, err = item.ValueCopy(nil)
		}
		return err
	})
	if err == nil && check != nil {
		err = check(k)
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return getJSON[T](d, k, fmt.Errorf("%w: row %x of index entry %x is missing", persistence.ErrCorrupt, k, idx))
}

func (d *DB) StateRow(ctx context.Context, branch messages.BranchID, seq uint64) (persistence.StateRow, error) {
	return getJSON[persistence.StateRow](d, seqKey(tableStateRow, branch, seq),
		fmt.Errorf("%w: state %d of branch %s", persistence.ErrRowNotFound, seq, branch))
}

// EachTurnRow calls fn for every turn row of branch in seq order, and
// stops at fn's first error, which it returns.
func (d *DB) EachTurnRow(ctx context.Context, branch messages.BranchID, fn func(persistence.TurnRow) error) error {
	return d.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: id16(tableTurnRow, branch), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var r persistence.TurnRow
			if err := it.Item().Value(func(b []byte) error { return json.Unmarshal(b, &r) }); err != nil {
				return fmt.Errorf("%w: row %x: %v", persistence.ErrCorrupt, it.Item().Key(), err)
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// StateRows returns the states committed on branch from seq on, in order.
func (d *DB) StateRows(ctx context.Context, branch messages.BranchID, fromSeq uint64, limit int) ([]persistence.StateRow, error) {
	if err := persistence.CheckPageSize(limit); err != nil {
		return nil, err
	}
	if limit == 0 {
		return nil, nil
	}
	return scanJSON[persistence.StateRow](d, id16(tableStateRow, branch), seqKey(tableStateRow, branch, fromSeq), limit)
}

// Jobs returns every pending job, in branch order and then creation order
// (the order the reconciler re-enqueues them in).
func (d *DB) Jobs(ctx context.Context) ([]persistence.Job, error) {
	js, err := scanJSON[persistence.Job](d, []byte{tableJob}, nil, 0)
	persistence.SortJobs(js)
	return js, err
}

func (d *DB) Chunks(ctx context.Context, turn messages.TurnID) ([]persistence.ChunkRow, error) {
	return scanJSON[persistence.ChunkRow](d, id16(tableChunkRow, turn), nil, 0)
}

// Steps returns the provider steps of turn, in order.
func (d *DB) Steps(ctx context.Context, turn messages.TurnID) ([]persistence.StepRow, error) {
	return scanJSON[persistence.StepRow](d, id16(tableStepRow, turn), nil, 0)
}

// Events calls fn for every event of actor from index on, in order.
func (d *DB) Events(ctx context.Context, actor string, from uint64, fn func(index uint64, data []byte) error) error {
	if err := persistence.CheckActor(actor); err != nil {
		return err
	}
	return d.read(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: eventPrefix(actor), PrefetchValues: true})
		defer it.Close()
		for it.Seek(eventKey(actor, from)); it.Valid(); it.Next() {
			k := it.Item().Key()
			idx := binary.BigEndian.Uint64(k[len(k)-8:])
			if err := it.Item().Value(func(v []byte) error { return fn(idx, v) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// Snapshot returns actor's latest snapshot, if it has one. A record
// whose index cannot be read is ErrCorrupt.
func (d *DB) Snapshot(ctx context.Context, actor string) (persistence.EventRecord, bool, error) {
	return d.snapshotAt(actor, tableSnapshot)
}

// PrevSnapshot returns the snapshot actor had before its latest, proven
// readable when the latest was written, if it has one: the fallback of
// an unreadable latest snapshot (the events from its index on are kept).
func (d *DB) PrevSnapshot(ctx context.Context, actor string) (persistence.EventRecord, bool, error) {
	return d.snapshotAt(actor, tablePrevSnap)
}

// CorruptSnapshot overwrites the data of actor's latest snapshot, keeping
// its index, with bytes no actor decodes, as a fault of the disk or a
// snapshot an older version encoded differently would leave it: for tests
// of recovery. It is ErrNotFound when actor has no snapshot.
func (d *DB) CorruptSnapshot(ctx context.Context, actor string) error {
	rec, ok, err := d.Snapshot(ctx, actor)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: snapshot of %s", persistence.ErrNotFound, actor)
	}
	return d.writeRaw([]entry{{key: snapshotKey(tableSnapshot, actor), val: persistence.CorruptSnapshotData(rec.Index)}})
}

func (d *DB) snapshotAt(actor string, table byte) (persistence.EventRecord, bool, error) {
	if err := persistence.CheckActor(actor); err != nil {
		return persistence.EventRecord{}, false, err
	}
	var rec persistence.EventRecord
	found := false
	err := d.read(func(txn *badger.Txn) error {
		item, err := txn.Get(snapshotKey(table, actor))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			idx, n := binary.Uvarint(v)
			if n <= 0 {
				return fmt.Errorf("%w: snapshot of %s", persistence.ErrCorrupt, actor)
			}
			rec = persistence.EventRecord{Actor: actor, Index: idx, Data: append([]byte(nil), v[n:]...)}
			found = true
			return nil
		})
	})
	return rec, found, err
}

// ActorLog returns the persistence provider; actors snapshot every
// snapshotEvery events (0: never), and a snapshot compacts the events
// before the one before it.
func (d *DB) ActorLog(snapshotEvery int) *persistence.ActorLog {
	return persistence.NewActorLog(d, d.log, snapshotEvery)
}
