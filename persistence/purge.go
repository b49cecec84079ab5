package persistence

import (
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

// Hard delete (SRD §14.4). Purge removes a session, or branches of one,
// and everything stored of them, so that no byte of their content is left
// in any file of the store once it returns:
//
//  1. A plan is read at the last durable timestamp: every key of the
//     branches (their heads, owner rows, rows, turn rows, states, steps,
//     chunks and their partition entries and vectors, jobs, idempotency
//     keys, proxy index entries, actor event logs and snapshots) and the transcript
//     nodes they own (those after each branch's base: a fork's nodes
//     before its fork point are its parent's), with the blob references
//     the nodes hold. A node that a branch not deleted still reaches (a
//     fork of a deleted branch) is ErrInUse, and nothing is written.
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

// ErrInUse is returned by Purge when what it would delete is part of a
// branch it does not delete (a fork): nothing is deleted.
var ErrInUse = errors.New("persistence: in use by another branch")

// purgeMeta prefixes the markers of drops not finished; purgeVlogMeta
// marks value-log files that hold dropped values and wait for GC.
const (
	purgeMeta     = "purge/"
	purgeVlogMeta = "purge_vlog"
)

// PurgeSpec says what Purge deletes.
type PurgeSpec struct {
	Session messages.SessionID
	// DeleteSession deletes the session: its row and every branch of it
	// (Branches is ignored). Otherwise Branches, each of Session, are
	// deleted and the session stays; if its active branch is one of them,
	// the nearest ancestor not deleted becomes the active branch.
	DeleteSession bool
	Branches      []messages.BranchID
	// Actors are the actors whose event logs and snapshots are deleted
	// (the runtime's names of the branches' actors).
	Actors []string
}

// PurgeResult says what Purge deleted and how long it took.
type PurgeResult struct {
	Branches []messages.BranchID // the branches deleted
	Nodes    int                 // transcript nodes
	Turns    int                 // turn rows
	Blobs    int                 // blobs no longer referenced
	Chunks   int
	// Keys are the Badger keys dropped, every version counted; on
	// PostgreSQL the rows deleted (all on the first of PurgeSessions').
	Keys int
	// Steps are the provider steps deleted (and those the deleted turns
	// name): the caller removes their stream journals.
	Steps []messages.StepID
	// ValueLogPending: a dropped value is still in the value-log file
	// Badger was writing, until the next open: the reads under way held
	// Badger open beyond reopenWait (see above).
	ValueLogPending bool
	Took            time.Duration // the whole call
	// Scrub is step 3, while the store's writes waited; on PostgreSQL
	// the VACUUM after the commit (writes do not wait).
	Scrub time.Duration
}

// purgePlan is what a Purge drops, read before its group is applied.
type purgePlan struct {
	drop    [][]byte        // key prefixes (many are whole keys)
	unref   map[Hash]uint64 // blob references the deleted nodes held
	nodes   []messages.TurnID
	session *SessionRow // updated, when the session stays and its active branch goes
	vlog    bool        // a dropped value is in the value log
	res     PurgeResult
}

// Check refuses a spec that names nothing to delete or a bad actor.
func (spec PurgeSpec) Check() error {
	if spec.Session.IsZero() {
		return fmt.Errorf("%w: purge: session id is zero", ErrInvalidArgument)
	}
	if !spec.DeleteSession && len(spec.Branches) == 0 {
		return fmt.Errorf("%w: purge: no branch to delete", ErrInvalidArgument)
	}
	for _, a := range spec.Actors {
		if err := CheckActor(a); err != nil {
			return err
		}
	}
	return nil
}

// CheckPurgeSessions refuses PurgeSessions' specs unless each deletes a
// session, no two the same, with good actors.
func CheckPurgeSessions(specs []PurgeSpec) error {
	seen := map[messages.SessionID]bool{}
	for i, spec := range specs {
		if spec.Session.IsZero() || !spec.DeleteSession {
			return fmt.Errorf("%w: purge sessions: spec %d deletes no session", ErrInvalidArgument, i)
		}
		if seen[spec.Session] {
			return fmt.Errorf("%w: purge sessions: session %s twice", ErrInvalidArgument, spec.Session)
		}
		seen[spec.Session] = true
		if err := spec.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Purge deletes what spec names, for good, and returns once the bytes are
// gone from the store's files (see above). It blocks the store's writes
// while it drops them (PurgeResult.Scrub); reads go on.
func (d *DB) Purge(ctx context.Context, spec PurgeSpec) (PurgeResult, error) {
	start := time.Now()
	if err := spec.Check(); err != nil {
		return PurgeResult{}, err
	}
	p, err := d.planPurge(ctx, spec)
	if err != nil {
		return PurgeResult{}, err
	}
	o := &op{kind: opPurge, purge: p}
	// Once handed over it runs to the end: a caller gone changes nothing.
	if err := d.submit(context.WithoutCancel(ctx), o); err != nil {
		return PurgeResult{}, err
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
func (d *DB) PurgeSessions(ctx context.Context, specs []PurgeSpec) ([]PurgeResult, error) {
	start := time.Now()
	if len(specs) == 0 {
		return nil, nil
	}
	if err := CheckPurgeSessions(specs); err != nil {
		return nil, err
	}
	all := &purgePlan{unref: map[Hash]uint64{}}
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
	out := make([]PurgeResult, len(plans))
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
		return v, false, fmt.Errorf("%w: row %x: %v", ErrCorrupt, k, err)
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

func (d *DB) planPurge(ctx context.Context, spec PurgeSpec) (*purgePlan, error) {
	p := &purgePlan{unref: map[Hash]uint64{}}
	err := d.read(func(txn *badger.Txn) error {
		sess, ok, err := txnRow[SessionRow](txn, id16(tableSession, spec.Session))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: session %s", ErrRowNotFound, spec.Session)
		}
		rows := map[messages.BranchID]BranchRow{} // every branch of the session
		err = eachRow(txn, id16(tableSessBranch, spec.Session), false, func(k, _ []byte) error {
			id := messages.BranchID(k[17:33])
			r, ok, err := txnRow[BranchRow](txn, id16(tableBranchRow, id))
			if err == nil && ok {
				rows[id] = r
			}
			return err
		})
		if err != nil {
			return err
		}
		del := map[messages.BranchID]bool{}
		if spec.DeleteSession {
			for id := range rows {
				del[id] = true
			}
		} else {
			for _, id := range spec.Branches {
				if _, ok := rows[id]; !ok {
					return fmt.Errorf("%w: branch %s of session %s", ErrRowNotFound, id, spec.Session)
				}
				del[id] = true
			}
		}
		for id := range del {
			p.res.Branches = append(p.res.Branches, id)
		}
		slices.SortFunc(p.res.Branches, func(a, b messages.BranchID) int { return a.Compare(b) })
		return d.planBranches(txn, spec, sess, rows, del, p)
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

// planBranches fills p with the keys of the branches del of session sess
// (rows: all its branches).
func (d *DB) planBranches(txn *badger.Txn, spec PurgeSpec, sess SessionRow, rows map[messages.BranchID]BranchRow,
	del map[messages.BranchID]bool, p *purgePlan) error {
	drop := func(k []byte) { p.drop = append(p.drop, k) }
	owned := map[messages.TurnID]TurnRecord{}
	for _, b := range p.res.Branches {
		h, err := getHead(txn, b)
		if errors.Is(err, ErrBranchNotFound) {
			continue // a branch row whose store branch was never made
		}
		if err != nil {
			return err
		}
		for id := h.Turn; !id.IsZero() && id != h.Base; {
			r, err := d.turnRecord(txn, id)
			if err != nil {
				return err
			}
			owned[id] = r
			id = r.Parent
		}
	}
	// A node a branch kept reaches: a fork's head or base, or a child
	// that is not deleted.
	err := eachRow(txn, []byte{tableHead}, true, func(k, v []byte) error {
		id := messages.BranchID(k[1:])
		if del[id] {
			return nil
		}
		h, err := decodeHead(id, v)
		if err != nil {
			return err
		}
		if _, ok := owned[h.Turn]; ok {
			return fmt.Errorf("%w: branch %s is at turn %s of a branch to delete (a fork): delete it first", ErrInUse, id, h.Turn)
		}
		if _, ok := owned[h.Base]; ok {
			return fmt.Errorf("%w: branch %s was forked at turn %s of a branch to delete: delete it first", ErrInUse, id, h.Base)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for id, r := range owned {
		err := eachRow(txn, childPrefix(id), false, func(k, _ []byte) error {
			if _, ok := owned[messages.TurnID(k[17:33])]; !ok {
				return fmt.Errorf("%w: turn %s of a branch to delete has a child %x on a branch kept (a fork): delete it first",
					ErrInUse, id, k[17:33])
			}
			return nil
		})
		if err != nil {
			return err
		}
		p.nodes = append(p.nodes, id)
		drop(turnKey(id))
		drop(id16(tableRootTenant, id))
		drop(childPrefix(id))
		drop(overlayPrefix(id))
		if _, ok := owned[r.Parent]; !ok && !r.Parent.IsZero() {
			drop(childKey(r.Parent, id))
		}
		refs := map[Hash]int{r.PayloadHash: 1}
		d.overlayMu.RLock()
		for _, ov := range d.overlays[id] {
			drop(overlayOrderKey(ov.Seq, id))
			if !ov.Tombstone {
				refs[ov.Hash]++
			}
			if !ov.Purged.IsZero() {
				refs[ov.Purged]--
			}
		}
		d.overlayMu.RUnlock()
		for h, n := range refs {
			if n > 0 && !h.IsZero() {
				p.unref[h] += uint64(n)
			}
		}
	}
	p.res.Nodes = len(owned)

	chunks := map[messages.ChunkID]bool{}
	steps := map[messages.StepID]bool{}
	for _, b := range p.res.Branches {
		drop(headKey(b))
		drop(id16(tableBranchTenant, b))
		drop(id16(tableBranchRow, b))
		drop(id16(tableTurnRow, b))
		drop(id16(tableStateRow, b))
		drop(id16(tableMember, b))
		if !spec.DeleteSession {
			drop(append(id16(tableSessBranch, spec.Session), b[:]...))
		}
		err := eachRow(txn, id16(tableTurnRow, b), true, func(_, v []byte) error {
			var t TurnRow
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("%w: turn row of branch %s: %v", ErrCorrupt, b, err)
			}
			p.res.Turns++
			drop(turnByIDKey(t.ID, b))
			if _, ok := owned[t.ID]; !ok {
				return nil // a turn of the parent the fork carried as pending: the parent's
			}
			if !t.Step.IsZero() {
				steps[t.Step] = true
			}
			drop(id16(tableStepRow, t.ID))
			drop(id16(tableChunkRow, t.ID))
			err := eachRow(txn, id16(tableStepRow, t.ID), true, func(_, v []byte) error {
				var s struct {
					ID messages.StepID `json:"id"`
				}
				if err := json.Unmarshal(v, &s); err != nil {
					return fmt.Errorf("%w: step row of turn %s: %v", ErrCorrupt, t.ID, err)
				}
				steps[s.ID] = true
				drop(id16(tableStepByID, s.ID))
				return nil
			})
			if err != nil {
				return err
			}
			return eachRow(txn, id16(tableChunkRow, t.ID), true, func(_, v []byte) error {
				var c struct {
					ID messages.ChunkID `json:"id"`
				}
				if err := json.Unmarshal(v, &c); err != nil {
					return fmt.Errorf("%w: chunk row of turn %s: %v", ErrCorrupt, t.ID, err)
				}
				chunks[c.ID] = true
				drop(id16(tableChunkByID, c.ID))
				return nil
			})
		})
		if err != nil {
			return err
		}
	}
	p.res.Chunks = len(chunks)
	for s := range steps {
		p.res.Steps = append(p.res.Steps, s)
	}
	slices.SortFunc(p.res.Steps, func(a, b messages.StepID) int { return a.Compare(b) })
	if len(chunks) > 0 {
		err := eachRow(txn, []byte{tableVector}, false, func(k, _ []byte) error {
			if len(k) == 1+8+16 && chunks[messages.ChunkID(k[9:])] {
				drop(k)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	err = eachRow(txn, []byte{tableJob}, true, func(k, v []byte) error {
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("%w: job %x: %v", ErrCorrupt, k, err)
		}
		if del[j.Branch] {
			drop(k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(txn, []byte{IdempotencyRowPrefix}, true, func(k, v []byte) error {
		var r IdempotencyRow
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("%w: idempotency key %x: %v", ErrCorrupt, k, err)
		}
		if del[r.Owner] || del[r.Branch] || spec.DeleteSession && r.Session == spec.Session {
			drop(k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(txn, []byte{ProxyEntryPrefix}, true, func(k, v []byte) error {
		var t ProxyTarget
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("%w: proxy entry %x: %v", ErrCorrupt, k, err)
		}
		if del[t.Branch] {
			drop(k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, a := range spec.Actors {
		drop(eventPrefix(a))
		drop(snapshotKey(tableSnapshot, a))
		drop(snapshotKey(tablePrevSnap, a))
	}
	if spec.DeleteSession {
		drop(id16(tableSession, spec.Session))
		drop(id16(tableSessBranch, spec.Session))
		drop(id16(tableImport, spec.Session))
		drop(id16(tableActivity, spec.Session))
	} else if del[sess.ActiveBranch] {
		b := sess.ActiveBranch
		for del[b] && !b.IsZero() {
			b = rows[b].Parent
		}
		if b.IsZero() {
			return fmt.Errorf("%w: every branch of session %s would be deleted: delete the session", ErrInvalidArgument, spec.Session)
		}
		sess.ActiveBranch = b
		p.session = &sess
	}
	return nil
}

// applyPurge releases the plan's blob references, updates its session and
// writes its marker: the drop itself follows once the group is durable
// (writeGroup calls scrub).
func (g *group) applyPurge(o *op) error {
	p := o.purge
	drop := slices.Clone(p.drop)
	var gone []Hash
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
	id := messages.NewID[messages.TurnID](g.s.opts.Now())
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
func (g *group) blobInValueLog(h Hash) (bool, error) {
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
			return nil, fmt.Errorf("%w: purge marker: %v", ErrCorrupt, err)
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
	if err := syncDir(s.opts.Dir); err != nil {
		return false, err
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
	return pending, s.valueLogGCAll()
}

// valueLogGCAll rewrites every value-log file that holds a value no longer
// live (but the one Badger writes), as runValueLogGC does.
func (s *badgerStore) valueLogGCAll() error {
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
	hold.Close()
	txn.Discard()
	if err != nil {
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
		err := s.valueLogGCAll()
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
func (s *badgerStore) forgetPurged(nodes []messages.TurnID, blobs []Hash) {
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
