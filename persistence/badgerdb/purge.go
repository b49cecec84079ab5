package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

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

// Hard delete (SRD §14.4) on Badger. Purge removes a session, or branches
// of one, and everything stored of them (purge_plan.go), so that no byte
// of their content is left in any file of the store once it returns:
//
//  1. The plan (PlanPurge) is read at the last durable timestamp, and
//     every key it names is listed: the branches' heads, owner rows,
//     rows, turn rows and their index entries, states, steps, chunks and
//     their partition entries and vectors, jobs, idempotency keys, proxy
//     index entries, actor event logs and snapshots, and the nodes' turns,
//     edges and overlays. A plan refused (ErrInUse) writes nothing.
//  2. One group commit releases the references (a blob whose count
//     reaches zero joins what is dropped), moves the session's active
//     branch if it was deleted, and writes a marker listing every key
//     prefix to drop (the marker included).
//  3. The writer, with every other write of the store waiting, drops
//     those prefixes from Badger (DB.DropPrefix: the memtables are
//     written into tables without them, their logs deleted, and every
//     table holding them compacted without them), then overwrites the
//     whole redo log with zeros and starts a lap, and, when a dropped
//     value was in the value log, closes and opens Badger again (the
//     reads wait at a gate: reopen.go), so that the file Badger was
//     writing may be rewritten too, and runs value-log GC until nothing
//     is left to rewrite.
//
// A crash before step 3 has finished leaves the marker (in Badger's logs
// or the redo log, which the next open applies again): Open finishes the
// drop before the store is used. The values kept (and keys dropped) are
// not written through transactions, so the drop is not a new version:
// a reader sees the data until it is dropped, and then never again.
//
// What is not removed: blocks of deleted files and overwritten bytes
// that the file system or device keeps (use encryption at rest for
// that), and, when the reads under way did not end within reopenWait of
// the reopen, the value-log file Badger was writing: it is rewritten at
// the next open, and PurgeResult.ValueLogPending says so. A value-log
// file GC rewrote is deleted once no iterator is open on it.

// purgeMeta prefixes the markers of drops not finished; purgeVlogMeta
// marks value-log files that hold dropped values and wait for GC.
const (
	purgeMeta     = "purge/"
	purgeVlogMeta = "purge_vlog"
)

// purgePlan is what a Purge drops, read before its group is applied.
type purgePlan struct {
	drop    [][]byte                    // key prefixes (many are whole keys)
	unref   map[persistence.Hash]uint64 // blob references the deleted nodes held
	nodes   []messages.NodeID
	session *persistence.SessionRow // updated, when the session stays and its active branch goes
	vlog    bool                    // a dropped value is in the value log
	res     persistence.PurgeResult
}

// Purge deletes what spec names, for good, and returns once the bytes are
// gone from the store's files (see above). It blocks the store's writes
// while it drops them (PurgeResult.Scrub); reads go on.
func (d *DB) Purge(ctx context.Context, spec persistence.PurgeSpec) (persistence.PurgeResult, error) {
	start := time.Now()
	if err := spec.Check(); err != nil {
		return persistence.PurgeResult{}, err
	}
	p, err := d.planPurge(ctx, spec)
	if err != nil {
		return persistence.PurgeResult{}, err
	}
	o := &op{kind: opPurge, purge: p}
	// Once handed over it runs to the end: a caller gone changes nothing.
	if err := d.submit(context.WithoutCancel(ctx), o); err != nil {
		return persistence.PurgeResult{}, err
	}
	res := p.res
	res.ValueLogPending = o.res.vlogPending
	res.Scrub = o.res.scrub
	res.Took = time.Since(start)
	return res, nil
}

// PurgeSessions deletes the sessions specs name (each DeleteSession, no
// two of one session) as Purge does, in one drop: the store's writes wait
// once for all of them, about as long as for one (the drop's cost is the
// size of the store, not of what it deletes). It is all or nothing: a
// session that cannot be deleted (not found, ErrInUse) fails the call
// and nothing is deleted. The results are in specs' order; each has the
// call's Took and Scrub.
func (d *DB) PurgeSessions(ctx context.Context, specs []persistence.PurgeSpec) ([]persistence.PurgeResult, error) {
	start := time.Now()
	if len(specs) == 0 {
		return nil, nil
	}
	if err := persistence.CheckPurgeSessions(specs); err != nil {
		return nil, err
	}
	all := &purgePlan{unref: map[persistence.Hash]uint64{}}
	plans := make([]*purgePlan, len(specs))
	for i, spec := range specs {
		p, err := d.planPurge(ctx, spec)
		if err != nil {
			return nil, err
		}
		plans[i] = p
		all.drop = append(all.drop, p.drop...)
		for h, n := range p.unref {
			all.unref[h] += n
		}
		all.nodes = append(all.nodes, p.nodes...)
		all.vlog = all.vlog || p.vlog
	}
	o := &op{kind: opPurge, purge: all}
	if err := d.submit(context.WithoutCancel(ctx), o); err != nil {
		return nil, err
	}
	out := make([]persistence.PurgeResult, len(plans))
	for i, p := range plans {
		out[i] = p.res
		out[i].ValueLogPending = o.res.vlogPending
		out[i].Scrub = o.res.scrub
		out[i].Took = time.Since(start)
	}
	// The blobs no longer referenced are counted once, on the first.
	out[0].Blobs = all.res.Blobs
	return out, nil
}

// txnRow decodes the JSON row at k.
func txnRow[T any](txn *badger.Txn, k []byte) (T, bool, error) {
	var v T
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	err = item.Value(func(b []byte) error { return json.Unmarshal(b, &v) })
	if err != nil {
		return v, false, fmt.Errorf("%w: row %x: %v", persistence.ErrCorrupt, k, err)
	}
	return v, true, nil
}

// eachRow calls fn with the key and value of every row under prefix.
func eachRow(txn *badger.Txn, prefix []byte, values bool, fn func(k, v []byte) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: values})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		var v []byte
		if values {
			var err error
			if v, err = it.Item().ValueCopy(nil); err != nil {
				return err
			}
		}
		if err := fn(it.Item().KeyCopy(nil), v); err != nil {
			return err
		}
	}
	return nil
}

func (d *DB) planPurge(ctx context.Context, spec persistence.PurgeSpec) (*purgePlan, error) {
	p := &purgePlan{}
	err := d.read(func(txn *badger.Txn) error {
		plan, err := persistence.PlanPurge(badgerPurgeReader{d, txn}, spec)
		if err != nil {
			return err
		}
		p.unref, p.nodes, p.session, p.res = plan.Unref, plan.NodeIDs(), plan.Session, plan.Result
		p.drop, err = purgeKeys(txn, plan)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete: %w", err)
	}
	// Every version of every key dropped is counted, and what lies in the
	// value log is noted (GC must rewrite it).
	err = d.read(func(txn *badger.Txn) error {
		for _, pre := range p.drop {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: pre, AllVersions: true})
			for it.Rewind(); it.Valid(); it.Next() {
				p.res.Keys++
				if it.Item().ValueSize() >= d.opts.ValueThreshold {
					p.vlog = true
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete: %w", err)
	}
	return p, nil
}

// purgeKeys lists the keys and key prefixes that plan drops (read in txn:
// the vectors of its chunks).
func purgeKeys(txn *badger.Txn, plan *persistence.PurgePlan) ([][]byte, error) {
	var drop [][]byte
	add := func(k []byte) { drop = append(drop, k) }
	owned := map[messages.NodeID]bool{}
	for _, n := range plan.Nodes {
		owned[n.ID] = true
	}
	for _, n := range plan.Nodes {
		add(turnKey(n.ID))
		add(id16(tableRootTenant, n.ID))
		add(childPrefix(n.ID))
		add(overlayPrefix(n.ID))
		if !owned[n.Parent] && !n.Parent.IsZero() {
			add(childKey(n.Parent, n.ID))
		}
	}
	for _, ov := range plan.Overlays {
		add(overlayOrderKey(ov.Seq, ov.Node))
	}
	for _, b := range plan.Branches {
		add(headKey(b))
		add(id16(tableBranchTenant, b))
		add(id16(tableBranchRow, b))
		add(id16(tableTurnRow, b))
		add(id16(tableStateRow, b))
		add(id16(tableMember, b))
		if !plan.Spec.DeleteSession {
			add(append(id16(tableSessBranch, plan.Spec.Session), b[:]...))
		}
	}
	// The step rows and chunk rows of a node go with a turn row of it
	// (not with a turn of the parent the fork carried as pending), with
	// their index entries.
	steps := map[messages.NodeID][]messages.StepID{}
	for _, s := range plan.Steps {
		steps[s.Turn] = append(steps[s.Turn], s.Step)
	}
	nodeChunks := map[messages.NodeID][]messages.ChunkID{}
	for _, c := range plan.Chunks {
		nodeChunks[c.Turn] = append(nodeChunks[c.Turn], c.Chunk)
	}
	chunks := map[messages.ChunkID]bool{}
	for _, t := range plan.TurnRows {
		add(turnByIDKey(t.Turn, t.Branch))
		if !owned[t.Turn] {
			continue
		}
		add(id16(tableStepRow, t.Turn))
		add(id16(tableChunkRow, t.Turn))
		for _, s := range steps[t.Turn] {
			add(id16(tableStepByID, s))
		}
		for _, c := range nodeChunks[t.Turn] {
			chunks[c] = true
			add(id16(tableChunkByID, c))
		}
	}
	if len(chunks) > 0 {
		err := eachRow(txn, []byte{tableVector}, false, func(k, _ []byte) error {
			if len(k) == 1+8+16 && chunks[messages.ChunkID(k[9:])] {
				add(k)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, j := range plan.Jobs {
		k, err := jobKey(j.Type, j.Turn)
		if err != nil {
			return nil, err
		}
		add(k)
	}
	for _, k := range plan.Keyed {
		add(k)
	}
	for _, a := range plan.Spec.Actors {
		add(eventPrefix(a))
		add(snapshotKey(tableSnapshot, a))
		add(snapshotKey(tablePrevSnap, a))
	}
	if plan.Spec.DeleteSession {
		s := plan.Spec.Session
		if row, ok, err := txnRow[persistence.SessionRow](txn, id16(tableSession, s)); err != nil {
			return nil, err
		} else if ok {
			add(tenantSessionKey(row))
		}
		add(id16(tableSession, s))
		add(id16(tableSessBranch, s))
		add(id16(tableImport, s))
		add(id16(tableActivity, s))
	}
	return drop, nil
}

// badgerPurgeReader reads a purge's plan in txn (PurgeReader).
type badgerPurgeReader struct {
	d   *DB
	txn *badger.Txn
}

func (r badgerPurgeReader) Session(id messages.SessionID) (persistence.SessionRow, bool, error) {
	return txnRow[persistence.SessionRow](r.txn, id16(tableSession, id))
}

func (r badgerPurgeReader) SessionBranches(id messages.SessionID) ([]persistence.BranchRow, error) {
	var out []persistence.BranchRow
	err := eachRow(r.txn, id16(tableSessBranch, id), false, func(k, _ []byte) error {
		row, ok, err := txnRow[persistence.BranchRow](r.txn, id16(tableBranchRow, messages.BranchID(k[17:33])))
		if err == nil && ok {
			out = append(out, row)
		}
		return err
	})
	return out, err
}

func (r badgerPurgeReader) Heads(branches []messages.BranchID) ([]persistence.Head, error) {
	var out []persistence.Head
	for _, b := range branches {
		h, err := getHead(r.txn, b)
		if errors.Is(err, persistence.ErrBranchNotFound) {
			continue // a branch row whose store branch was never made
		}
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func (r badgerPurgeReader) Walk(heads []persistence.Head) ([]persistence.PurgeNode, error) {
	var out []persistence.PurgeNode
	for _, h := range heads {
		for id := h.Node; !id.IsZero() && id != h.Base; {
			rec, err := r.d.turnRecord(r.txn, id)
			if err != nil {
				return nil, err
			}
			out = append(out, persistence.PurgeNode{ID: id, Parent: rec.Parent, Payload: rec.PayloadHash, Base: h.Base})
			id = rec.Parent
		}
	}
	return out, nil
}

func (r badgerPurgeReader) HeadsAt(nodes []messages.NodeID) ([]persistence.Head, error) {
	set := map[messages.NodeID]bool{}
	for _, id := range nodes {
		set[id] = true
	}
	var out []persistence.Head
	err := eachRow(r.txn, []byte{tableHead}, true, func(k, v []byte) error {
		h, err := decodeHead(messages.BranchID(k[1:]), v)
		if err != nil {
			return err
		}
		if set[h.Node] || set[h.Base] {
			out = append(out, h)
		}
		return nil
	})
	return out, err
}

func (r badgerPurgeReader) Children(nodes []messages.NodeID, fn func(parent, child messages.NodeID) error) error {
	for _, id := range nodes {
		err := eachRow(r.txn, childPrefix(id), false, func(k, _ []byte) error {
			return fn(id, messages.NodeID(k[17:33]))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (r badgerPurgeReader) Overlays(nodes []messages.NodeID) ([]persistence.Overlay, error) {
	var out []persistence.Overlay
	r.d.overlayMu.RLock()
	defer r.d.overlayMu.RUnlock()
	for _, id := range nodes {
		out = append(out, r.d.overlays[id]...)
	}
	return out, nil
}

func (r badgerPurgeReader) TurnRows(branches []messages.BranchID, fn func(persistence.TurnRow) error) error {
	for _, b := range branches {
		err := eachRow(r.txn, id16(tableTurnRow, b), true, func(_, v []byte) error {
			var t persistence.TurnRow
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("%w: turn row of branch %s: %v", persistence.ErrCorrupt, b, err)
			}
			t.Branch = b // the row's key names its branch
			return fn(t)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (r badgerPurgeReader) Steps(nodes []messages.NodeID) ([]persistence.NodeStep, error) {
	var out []persistence.NodeStep
	for _, id := range nodes {
		err := eachRow(r.txn, id16(tableStepRow, id), true, func(_, v []byte) error {
			var s struct {
				ID messages.StepID `json:"id"`
			}
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("%w: step row of turn %s: %v", persistence.ErrCorrupt, id, err)
			}
			out = append(out, persistence.NodeStep{Turn: id, Step: s.ID})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r badgerPurgeReader) Chunks(nodes []messages.NodeID) ([]persistence.NodeChunk, error) {
	var out []persistence.NodeChunk
	seen := map[messages.ChunkID]bool{}
	for _, id := range nodes {
		err := eachRow(r.txn, id16(tableChunkRow, id), true, func(_, v []byte) error {
			var c struct {
				ID messages.ChunkID `json:"id"`
			}
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("%w: chunk row of turn %s: %v", persistence.ErrCorrupt, id, err)
			}
			if !seen[c.ID] {
				seen[c.ID] = true
				out = append(out, persistence.NodeChunk{Turn: id, Chunk: c.ID})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r badgerPurgeReader) Jobs(fn func(persistence.Job) error) error {
	return eachRow(r.txn, []byte{tableJob}, true, func(k, v []byte) error {
		var j persistence.Job
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("%w: job %x: %v", persistence.ErrCorrupt, k, err)
		}
		return fn(j)
	})
}

func (r badgerPurgeReader) Keyed(fn func(k, v []byte) error) error {
	if err := eachRow(r.txn, []byte{persistence.IdempotencyRowPrefix}, true, fn); err != nil {
		return err
	}
	return eachRow(r.txn, []byte{persistence.ProxyEntryPrefix}, true, fn)
}

// applyPurge releases the plan's blob references, updates its session and
// writes its marker: the drop itself follows once the group is durable
// (writeGroup calls scrub).
func (g *group) applyPurge(o *op) error {
	p := o.purge
	drop := slices.Clone(p.drop)
	var gone []persistence.Hash
	for h, n := range p.unref {
		cur, err := g.blobRefs(h)
		if err != nil {
			return err
		}
		if cur > n {
			g.setRefs(h, cur-n)
			continue
		}
		if !p.vlog {
			big, err := g.blobInValueLog(h)
			if err != nil {
				return err
			}
			p.vlog = big
		}
		// Dropped, not deleted: a deletion would hide the key from
		// DropPrefix, which drops only prefixes it finds.
		put(g, g.refs, h, 0)
		put(g, g.blobs, h, false)
		drop = append(drop, blobKey(h), refsKey(h))
		gone = append(gone, h)
	}
	if p.session != nil {
		if err := g.setJSON(id16(tableSession, p.session.ID), *p.session); err != nil {
			return err
		}
	}
	if p.vlog {
		g.set(metaKey(purgeVlogMeta), []byte{1})
	}
	id := messages.NewID[messages.NodeID](g.s.opts.Now())
	marker := metaKey(purgeMeta + id.String())
	drop = append(drop, marker)
	g.set(marker, encodePrefixes(drop))
	o.dropKeys, o.gone = drop, gone
	p.res.Blobs = len(gone)
	return nil
}

// blobInValueLog reports whether the stored blob h may be in Badger's
// value log: its value is at least the value threshold long, or it is
// written by a group not yet published (whose size is not looked up).
func (g *group) blobInValueLog(h persistence.Hash) (bool, error) {
	item, err := g.txn.Get(blobKey(h))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return item.ValueSize() >= g.s.opts.ValueThreshold, nil
}

// encodePrefixes lays out prefixes as uvarint length and bytes each.
func encodePrefixes(ps [][]byte) []byte {
	var b []byte
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

func decodePrefixes(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		p, rest, err := redoBytes(b)
		if err != nil {
			return nil, fmt.Errorf("%w: purge marker: %v", persistence.ErrCorrupt, err)
		}
		out = append(out, p)
		b = rest
	}
	return out, nil
}

// scrub drops prefixes from every file of Badger, then empties the redo
// log of what it held of them, and, when vlog is set (a dropped value was
// in the value log), reopens Badger (reopen.go) and rewrites every
// value-log file holding a value no longer live. It runs on the writer
// (or in Open, before it starts, with reopen false: Badger has just
// started a new value-log file): no other write is under way. pending
// reports that the reopen was given up (see reopenWait): the value-log
// file Badger writes may still hold a dropped value, until the next open.
func (s *badgerStore) scrub(prefixes [][]byte, vlog, reopen bool) (pending bool, err error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	// Badger flushes its memtables into tables (synced) without the
	// prefixes, deletes their logs, and compacts away the prefixes in
	// every table that may hold them.
	if err := s.db.DropPrefix(prefixes...); err != nil {
		return false, fmt.Errorf("drop deleted keys: %w", err)
	}
	if err := persistence.SyncDir(s.opts.Dir); err != nil {
		return false, err
	}
	if purgeHook != nil {
		purgeHook("dropped", s.opts.Dir)
	}
	if s.redo != nil {
		// Everything the log held is in Badger's tables now.
		if err := s.redo.wipe(); err != nil {
			return false, err
		}
	}
	if !vlog {
		return false, nil
	}
	if reopen {
		ok, err := s.reopenBadger()
		if err != nil {
			return false, err
		}
		pending = !ok
	}
	return pending, s.valueLogGCAll(pending)
}

// purgeHook, when set (tests only), is called at the moments of a delete a
// crash may cut: "dropped" (scrub: the keys dropped, the redo log not yet
// emptied) and "rewritten" (valueLogGCAll: the value-log files rewritten,
// not yet deleted).
var purgeHook func(stage, dir string)

// valueLogGCAll rewrites every value-log file that holds a value no longer
// live (but the one Badger writes), as runValueLogGC does. Unless
// readersLeft (reads under way may keep a rewritten file until they end),
// it removes purgeGCFile once Badger has deleted the files it rewrote.
func (s *badgerStore) valueLogGCAll(readersLeft bool) error {
	if err := markPurgeGC(s.opts.Dir); err != nil {
		return fmt.Errorf("value log gc: %w", err)
	}
	txn := s.db.NewTransactionAt(s.readTs.Load(), false)
	hold := txn.NewIterator(badger.IteratorOptions{})
	var err error
	for {
		if err = s.db.RunValueLogGC(1e-9); err != nil {
			break
		}
	}
	if errors.Is(err, badger.ErrNoRewrite) {
		err = nil
	}
	if serr := s.syncAllLogs(); serr != nil {
		return fmt.Errorf("value log gc: %w", serr) // the rewritten files stay: hold stays open
	}
	if purgeHook != nil {
		purgeHook("rewritten", s.opts.Dir)
	}
	hold.Close() // Badger deletes the files rewritten
	txn.Discard()
	if err != nil {
		return fmt.Errorf("value log gc: %w", err)
	}
	if readersLeft {
		return nil
	}
	if err := unmarkPurgeGC(s.opts.Dir); err != nil {
		return fmt.Errorf("value log gc: %w", err)
	}
	return nil
}

// finishPurges, in Open, drops what a purge a crash cut short left
// (markers found), and runs the value-log GC a purge left pending.
func (s *badgerStore) finishPurges() error {
	var markers [][]byte
	var lists [][][]byte
	vlog := false
	err := func() error {
		txn := s.db.NewTransactionAt(s.lastTs, false)
		defer txn.Discard()
		if ok, err := hasKey(txn, metaKey(purgeVlogMeta)); err != nil {
			return err
		} else if ok {
			vlog = true
		}
		return eachRow(txn, metaKey(purgeMeta), true, func(k, v []byte) error {
			ps, err := decodePrefixes(v)
			markers, lists = append(markers, k), append(lists, ps)
			return err
		})
	}()
	if err != nil {
		return fmt.Errorf("deletes cut short: %w", err)
	}
	for i, ps := range lists {
		start := time.Now()
		if _, err := s.scrub(ps, false, false); err != nil {
			return fmt.Errorf("finish the delete %s: %w", markers[i][1:], err)
		}
		s.log.Warn().Int("keys", len(ps)).Dur("took", time.Since(start)).Msg("finished a delete cut short by a stop or crash")
	}
	if vlog {
		s.gcMu.Lock()
		var err error
		if len(markers) > 0 {
			// The redo log, applied again above, wrote anew the values
			// the cut-short delete had dropped (Badger no longer held
			// them) into the value-log file this open started, where the
			// drop counted no discard: every file is rewritten, after a
			// reopen that makes this one an old file too.
			if err = markPurgeGC(s.opts.Dir); err == nil {
				_, err = s.reopenBadgerWith(func() error { return discardAllValueLogs(s.opts.Dir, s.log) })
			}
		}
		if err == nil {
			err = s.valueLogGCAll(false)
		}
		s.gcMu.Unlock()
		if err == nil {
			err = s.write([]entry{{key: metaKey(purgeVlogMeta), del: true}})
			s.readTs.Store(s.lastTs)
		}
		if err != nil {
			return fmt.Errorf("value log gc after a delete: %w", err)
		}
	}
	return nil
}

// forgetPurged drops what the caches hold of deleted nodes and blobs.
func (s *badgerStore) forgetPurged(nodes []messages.NodeID, blobs []persistence.Hash) {
	for _, id := range nodes {
		s.turns.Drop(id)
	}
	s.overlayMu.Lock()
	for _, id := range nodes {
		delete(s.overlays, id)
	}
	s.overlayMu.Unlock()
	if len(blobs) > 0 {
		s.blobs.gen.Add(1)
		for _, h := range blobs {
			s.blobs.drop(h)
		}
	}
}
