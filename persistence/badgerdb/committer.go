package badgerdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/commit"
)

// The write path. Every write is an op handed to the single committer
// goroutine (through a commit.Queue), which takes whatever ops are
// waiting (up to GroupCommitMax),
// validates them in order against the durable state plus the effects of
// the earlier ops of the same group, writes all their entries in one Badger
// transaction (commitAt) at a new timestamp and waits for it to be synced.
// Only then does it publish the timestamp to readers and wake the writers.
// Within an append, the head entry is written after the turn it points at,
// so even a torn batch never leaves a head pointing at a missing turn.

type opKind int

const (
	opAppend opKind = iota
	opBranch
	opOverlay
	opTx
	opRaw   // entries written as they are: store maintenance (backfillIndex)
	opPurge // a hard delete (purge.go)
)

type op struct {
	kind   opKind
	branch messages.BranchID
	append persistence.AppendRequest
	spec   persistence.BranchSpec
	turn   messages.NodeID
	ovReq  persistence.OverlayRequest
	hash   persistence.Hash // of the payload, for appends and patches
	blob   []byte           // the encoded blob, when the caller saw it missing
	tx     *persistence.Tx
	parts  []*op // a tx's appends, prepared like single appends
	raw    []entry
	// purge is a hard delete's plan; applyPurge sets dropKeys (what the
	// writer drops once the group is durable) and gone (blobs deleted).
	purge    *purgePlan
	dropKeys [][]byte
	gone     []persistence.Hash

	res result
	commit.Call
}

type result struct {
	turn    persistence.Node
	head    persistence.Head
	overlay persistence.Overlay
	tx      persistence.TxResult
	scrub   time.Duration // a purge's drop
	// vlogPending: the purge's value-log GC waits for the next open
	vlogPending bool
	err         error
}

func (s *badgerStore) submit(ctx context.Context, o *op) error {
	if err := s.alive(); err != nil {
		return err
	}
	return s.stats.Counted(s.ops.Submit(ctx, o))
}

// prepareBlob hashes p and, unless the blob is already stored, encodes it,
// so that this work happens on the caller's goroutine, not the committer's.
func (s *badgerStore) prepareBlob(o *op, p []byte) {
	o.hash = persistence.HashOf(p)
	_ = s.read(func(txn *badger.Txn) error {
		if ok, _ := hasKey(txn, blobKey(o.hash)); !ok {
			o.blob = persistence.EncodeBlob(p, s.opts.Compress)
		}
		return nil
	})
}

func (s *badgerStore) Append(ctx context.Context, branch messages.BranchID, req persistence.AppendRequest) (persistence.Node, error) {
	if err := persistence.CheckAppend(branch, req, s.opts.Limits); err != nil {
		return persistence.Node{}, err
	}
	o := &op{kind: opAppend, branch: branch, append: req}
	s.prepareBlob(o, req.Payload)
	if err := s.submit(ctx, o); err != nil {
		return persistence.Node{}, err
	}
	return o.res.turn, nil
}

// writeRaw commits entries as they are, in one group.
func (s *badgerStore) writeRaw(entries []entry) error {
	return s.submit(context.Background(), &op{kind: opRaw, raw: entries})
}

func (s *badgerStore) CreateBranch(ctx context.Context, spec persistence.BranchSpec) (persistence.Head, error) {
	o := &op{kind: opBranch, spec: spec}
	if err := s.submit(ctx, o); err != nil {
		return persistence.Head{}, err
	}
	return o.res.head, nil
}

func (s *badgerStore) PutOverlay(ctx context.Context, turn messages.NodeID, req persistence.OverlayRequest) (persistence.Overlay, error) {
	if err := persistence.CheckOverlay(turn, req, s.opts.Limits); err != nil {
		return persistence.Overlay{}, err
	}
	o := &op{kind: opOverlay, turn: turn, ovReq: req}
	if !req.Tombstone {
		s.prepareBlob(o, req.Payload)
	}
	if err := s.submit(ctx, o); err != nil {
		return persistence.Overlay{}, err
	}
	return o.res.overlay, nil
}

func (s *badgerStore) commitLoop() {
	defer close(s.done)
	writes := make(chan *group) // unbuffered: the writer holds one group at a time
	written := make(chan struct{})
	go s.writeLoop(writes, written)
	defer func() {
		close(writes)
		<-written
	}()
	var prev *group // the group handed to the writer last
	s.ops.Run(s.opts.GroupCommitMax, func(batch []*op) {
		g := s.applyGroup(batch, prev)
		writes <- g // waits until the writer is done with prev
		prev = g
	})
}

// writeLoop writes and publishes groups in the order they were applied.
// While it waits for one group's fsync the committer applies the next, so
// a group costs the longer of the two stages rather than their sum.
func (s *badgerStore) writeLoop(writes <-chan *group, written chan<- struct{}) {
	defer close(written)
	for g := range writes {
		s.writeGroup(g)
	}
}

type entry struct {
	key, val []byte
	del      bool
}

// group is the state of one group commit: the durable state as of the
// last published group (txn), overlaid with what the group before this
// one wrote if it may not be published yet (prev), overlaid with what this
// group's earlier ops wrote. Every change to it is recorded in an undo
// log, so that an op failing halfway (a transaction whose third part is
// invalid) leaves the group exactly as it found it.
//
// Lookups consult prev's maps and entries but never prev.prev: when a
// group is applied, the one before prev has been published (the writer
// takes prev only after it is done with its predecessor). A published
// prev is harmless, since its maps agree with txn.
type group struct {
	s        *badgerStore
	batch    []*op
	prev     *group // cleared by the writer once this group is published
	txn      *badger.Txn
	entries  []entry
	heads    map[messages.BranchID]persistence.Head
	turns    map[messages.NodeID]persistence.NodeRecord
	refs     map[persistence.Hash]uint64
	blobs    map[persistence.Hash]bool // present after this group's writes so far
	overlays map[messages.NodeID][]persistence.Overlay
	rows     map[string]bool // lifecycle row keys written by this group
	ovSeq    uint64
	newTurns []persistence.NodeRecord
	newOv    []persistence.Overlay
	newBlobs map[persistence.Hash][]byte // payloads written, for the blob cache
	st       commit.GroupStats
	undo     []func()
}

// groupMark is where an op started; rollback returns the group to it.
type groupMark struct {
	entries, undo, newTurns, newOv int
	ovSeq                          uint64
	st                             commit.GroupStats
}

func (g *group) mark() groupMark {
	return groupMark{len(g.entries), len(g.undo), len(g.newTurns), len(g.newOv), g.ovSeq, g.st}
}

func (g *group) rollback(m groupMark) {
	for i := len(g.undo) - 1; i >= m.undo; i-- {
		g.undo[i]()
	}
	g.undo = g.undo[:m.undo]
	g.entries = g.entries[:m.entries]
	g.newTurns = g.newTurns[:m.newTurns]
	g.newOv = g.newOv[:m.newOv]
	g.ovSeq, g.st = m.ovSeq, m.st
}

// put sets m[k] = v in a group map, recording how to undo it.
func put[K comparable, V any](g *group, m map[K]V, k K, v V) {
	old, had := m[k]
	g.undo = append(g.undo, func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
	m[k] = v
}

// applyGroup validates the ops of batch in order against the state left
// by prev (nil: none unpublished) and builds the group's entries.
func (s *badgerStore) applyGroup(batch []*op, prev *group) *group {
	// A purge may reopen Badger on the writer meanwhile (reopen.go).
	s.gate.enter()
	defer s.gate.leave()
	failed := s.failed.Load()
	g := &group{
		s:        s,
		batch:    append([]*op(nil), batch...),
		prev:     prev,
		heads:    make(map[messages.BranchID]persistence.Head),
		turns:    make(map[messages.NodeID]persistence.NodeRecord),
		refs:     make(map[persistence.Hash]uint64),
		blobs:    make(map[persistence.Hash]bool),
		overlays: make(map[messages.NodeID][]persistence.Overlay),
		rows:     make(map[string]bool),
		newBlobs: make(map[persistence.Hash][]byte),
	}
	if failed == nil {
		g.txn = s.db.NewTransactionAt(s.readTs.Load(), false)
	}
	defer func() {
		if g.txn != nil {
			g.txn.Discard()
		}
		g.txn, g.undo = nil, nil
	}()
	if prev != nil {
		g.ovSeq = prev.ovSeq
	} else {
		s.overlayMu.RLock()
		g.ovSeq = s.ovSeq
		s.overlayMu.RUnlock()
	}
	// A disk short of space refuses the whole group, before anything of
	// it is applied: a group is validated against the one before it, so
	// it must be refused whole or written whole.
	noSpace := s.space.floor()
	for _, o := range g.batch {
		if failed != nil {
			o.res.err = *failed
			continue
		}
		if noSpace != nil {
			o.res.err = noSpace
			continue
		}
		m := g.mark()
		o.res = g.apply(o)
		if o.res.err != nil {
			g.rollback(m) // a failed op writes nothing
		}
	}
	return g
}

// writeGroup makes g durable, publishes it and wakes its writers. A
// failed write fails the store, this group and every group after it (they
// were validated against this one).
func (s *badgerStore) writeGroup(g *group) {
	failed := s.failed.Load()
	if failed != nil {
		for _, o := range g.batch {
			if o.res.err == nil {
				o.res = result{err: *failed}
			}
		}
	} else if len(g.entries) > 0 {
		if err := s.write(g.entries); err != nil {
			err = fmt.Errorf("persistence: store failed, reopen it: %w", err)
			s.failed.Store(&err)
			s.log.Error().Err(err).Msg("group commit")
			for _, o := range g.batch {
				if o.res.err == nil {
					o.res = result{err: err}
				}
			}
		} else {
			s.publish(g)
			s.scrubGroup(g)
		}
	}
	g.prev = nil
	for _, o := range g.batch {
		o.Finish(o.res.err)
	}
}

// write commits entries at the next timestamp and, with DurabilitySync,
// makes them durable: in the redo log, or in the logs Badger wrote them
// to when there is none or the group is too big for it.
func (s *badgerStore) write(entries []entry) error {
	start := time.Now()
	ts := s.lastTs + 1
	n := recordMax(entries)
	if s.redo != nil && s.redo.fits(n) {
		if err := s.writeLogged(entries, ts, n); err != nil {
			return err
		}
	} else {
		if err := s.commitAt(entries, ts); err != nil {
			return err
		}
		valueLog := false // a value went to the value log
		for _, e := range entries {
			valueLog = valueLog || !e.del && int64(len(e.val)) >= s.opts.ValueThreshold
		}
		if err := s.syncLogs(valueLog); err != nil {
			return err
		}
	}
	s.lastTs = ts
	// What the group takes on disk: Badger's log now, a table later.
	s.space.wrote(2 * n)
	s.stats.Group(s.opts.Durability == persistence.DurabilitySync, time.Since(start))
	return nil
}

// writeLogged writes the group of entries at ts to the redo log (a record
// of at most n bytes; a new lap first if the log is full) and to Badger,
// and syncs the log while Badger commits. A group whose Badger commit
// failed may be in the synced log, and so in Badger after the next open:
// such a failure fails the store, and its writers are told that the write
// failed, not that nothing was written.
//
// The sync runs here and the commit is handed off, not the other way
// round: a goroutine started for the sync waited a p50 of 100-120 µs for
// a P on the dev VM (the committer's own P runs it only once the
// committer blocks), and the sync is the longer of the two.
func (s *badgerStore) writeLogged(entries []entry, ts uint64, n int64) error {
	if s.redo.full(n) {
		if err := s.checkpoint(); err != nil {
			return err
		}
	}
	if err := s.redo.append(ts, entries); err != nil {
		return err
	}
	committed := s.commitAtAsync(entries, ts)
	err := s.redo.sync()
	if cerr := <-committed; cerr != nil {
		err = cerr
	}
	return err
}

// commitAt writes entries at ts and waits for it (see commitAtAsync).
func (s *badgerStore) commitAt(entries []entry, ts uint64) error {
	return <-s.commitAtAsync(entries, ts)
}

// commitAtAsync starts writing entries at ts and returns where the
// outcome will be sent: as one Badger transaction, whose commit Badger's
// writer runs while the caller goes on, or through a WriteBatch (which
// splits what is too big for one transaction) on a goroutine of its own
// when they do not fit in one.
func (s *badgerStore) commitAtAsync(entries []entry, ts uint64) <-chan error {
	done := make(chan error, 1)
	txn := s.db.NewTransactionAt(ts-1, true)
	err := setEntries(txn, entries)
	if errors.Is(err, badger.ErrTxnTooBig) {
		txn.Discard()
		go func() {
			wb := s.db.NewWriteBatchAt(ts)
			defer wb.Cancel()
			err := setEntries(wb, entries)
			if err == nil {
				err = wb.Flush()
			}
			done <- err
		}()
		return done
	}
	if err != nil {
		txn.Discard()
		done <- err
		return done
	}
	// Badger discards the transaction itself, except when its checks
	// fail before the commit starts; a second Discard does nothing.
	_ = txn.CommitAt(ts, func(err error) { done <- err })
	txn.Discard()
	return done
}

// setEntries sets or deletes each of entries in w (a transaction or a
// write batch).
func setEntries(w interface {
	Set(k, v []byte) error
	Delete(k []byte) error
}, entries []entry) error {
	for _, e := range entries {
		var err error
		if e.del {
			err = w.Delete(e.key)
		} else {
			err = w.Set(e.key, e.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *badgerStore) publish(g *group) {
	s.stats.Add(g.st)
	for _, r := range g.newTurns {
		s.turns.Put(r)
	}
	if len(g.newOv) > 0 {
		s.overlayMu.Lock()
		for _, o := range g.newOv {
			s.overlays[o.Node] = append(s.overlays[o.Node], o)
		}
		s.ovSeq = g.ovSeq
		s.overlayMu.Unlock()
	}
	s.readTs.Store(s.lastTs)
	// Purged blobs leave the cache after the new timestamp is visible and
	// before anyone is acknowledged; see blobCache for why in this order.
	var purged []persistence.Hash
	for h, present := range g.blobs {
		if !present {
			purged = append(purged, h)
		}
	}
	if len(purged) > 0 {
		s.blobs.gen.Add(1)
		for _, h := range purged {
			s.blobs.drop(h)
		}
	}
	gen := s.blobs.gen.Load()
	for h, p := range g.newBlobs {
		if g.blobs[h] {
			s.blobs.put(h, p, gen)
		}
	}
}

// scrubGroup drops what the purges of the published group g delete (see
// purge.go), on the writer: every later group waits for it. A failed drop
// fails the store; its marker makes the next open finish it.
func (s *badgerStore) scrubGroup(g *group) {
	for _, o := range g.batch {
		if o.kind != opPurge || o.res.err != nil {
			continue
		}
		start := time.Now()
		pending, err := s.scrub(o.dropKeys, o.purge.vlog, true)
		if err == nil && o.purge.vlog && !pending {
			// Nothing is left for the next open to rewrite.
			if err = s.write([]entry{{key: metaKey(purgeVlogMeta), del: true}}); err == nil {
				s.readTs.Store(s.lastTs)
			}
		}
		o.res.scrub = time.Since(start)
		o.res.vlogPending = pending
		if err != nil {
			err = fmt.Errorf("persistence: store failed, reopen it (which finishes the delete): %w", err)
			s.failed.CompareAndSwap(nil, &err)
			s.log.Error().Err(err).Msg("delete")
			o.res.err = err
			continue
		}
		s.forgetPurged(o.purge.nodes, o.gone)
	}
}

func (g *group) set(k, v []byte) { g.entries = append(g.entries, entry{key: k, val: v}) }

func (g *group) apply(o *op) result {
	switch o.kind {
	case opAppend:
		return g.appendTurn(o)
	case opBranch:
		return g.createBranch(o)
	case opOverlay:
		return g.putOverlay(o)
	case opTx:
		r, err := g.applyTx(o)
		return result{tx: r, err: err}
	case opRaw:
		g.entries = append(g.entries, o.raw...)
		return result{}
	case opPurge:
		return result{err: g.applyPurge(o)}
	}
	return result{err: fmt.Errorf("persistence: unknown op %d", o.kind)}
}

func (g *group) head(b messages.BranchID) (persistence.Head, error) {
	if h, ok := g.heads[b]; ok {
		return h, nil
	}
	if p := g.prev; p != nil {
		if h, ok := p.heads[b]; ok {
			return h, nil
		}
	}
	return getHead(g.txn, b)
}

func (g *group) record(id messages.NodeID) (persistence.NodeRecord, error) {
	if r, ok := g.turns[id]; ok {
		return r, nil
	}
	if p := g.prev; p != nil {
		if r, ok := p.turns[id]; ok {
			return r, nil
		}
	}
	return g.s.turnRecord(g.txn, id)
}

func (g *group) blobExists(h persistence.Hash) (bool, error) {
	if ok, seen := g.blobs[h]; seen {
		return ok, nil
	}
	if p := g.prev; p != nil {
		if ok, seen := p.blobs[h]; seen {
			return ok, nil
		}
	}
	return hasKey(g.txn, blobKey(h))
}

func (g *group) blobRefs(h persistence.Hash) (uint64, error) {
	if n, ok := g.refs[h]; ok {
		return n, nil
	}
	if p := g.prev; p != nil {
		if n, ok := p.refs[h]; ok {
			return n, nil
		}
	}
	return getRefs(g.txn, h)
}

// addRef stores payload p under hash (unless already stored) and counts
// one more reference to it.
func (g *group) addRef(o *op, p []byte) error {
	ok, err := g.blobExists(o.hash)
	if err != nil {
		return err
	}
	if ok {
		g.st.BlobDedups++
	} else {
		if o.blob == nil {
			o.blob = persistence.EncodeBlob(p, g.s.opts.Compress)
		}
		g.set(blobKey(o.hash), o.blob)
		put(g, g.blobs, o.hash, true)
		put(g, g.newBlobs, o.hash, append([]byte(nil), p...))
		g.st.BlobWrites++
		g.st.StoredBytes += uint64(len(o.blob))
		g.st.RawBytes += uint64(len(p))
	}
	n, err := g.blobRefs(o.hash)
	if err != nil {
		return err
	}
	g.setRefs(o.hash, n+1)
	return nil
}

func (g *group) setRefs(h persistence.Hash, n uint64) {
	put(g, g.refs, h, n)
	if n == 0 {
		g.entries = append(g.entries, entry{key: refsKey(h), del: true}, entry{key: blobKey(h), del: true})
		put(g, g.blobs, h, false)
		return
	}
	g.set(refsKey(h), binaryUvarint(n))
}

func (g *group) appendTurn(o *op) result {
	t, h, err := g.appendNode(o, o.branch, messages.NodeID{}, o.append)
	return result{turn: t, head: h, err: err}
}

// appendNode appends req at branch's head as turn id (zero: a fresh id);
// o carries the payload's hash and encoded blob.
func (g *group) appendNode(o *op, branch messages.BranchID, id messages.NodeID, req persistence.AppendRequest) (persistence.Node, persistence.Head, error) {
	h, err := g.head(branch)
	if err != nil {
		return persistence.Node{}, persistence.Head{}, err
	}
	if want := req.ExpectParent; want != nil && *want != h.Node {
		return persistence.Node{}, persistence.Head{}, &persistence.HeadMismatchError{Branch: branch, Want: *want, Got: h.Node}
	}
	now := g.s.opts.Now()
	if id.IsZero() {
		id = messages.NewID[messages.NodeID](now)
	} else if _, err := g.record(id); err == nil {
		return persistence.Node{}, persistence.Head{}, fmt.Errorf("%w: turn %s already exists", persistence.ErrDuplicate, id)
	} else if !errors.Is(err, persistence.ErrNodeNotFound) {
		return persistence.Node{}, persistence.Head{}, err
	}
	r := persistence.NodeRecord{Node: persistence.Node{
		ID:          id,
		TypeTag:     req.TypeTag,
		Codec:       req.Codec,
		PayloadHash: o.hash,
		Flags:       req.Flags,
		CreatedAt:   timeMillis(now),
	}}
	if !h.Empty() {
		r.Parent, r.Depth = h.Node, h.Depth+1
		if r.Skips, err = g.skips(r.Parent, r.Depth); err != nil {
			return persistence.Node{}, persistence.Head{}, err
		}
	}
	if err := g.addRef(o, req.Payload); err != nil {
		return persistence.Node{}, persistence.Head{}, err
	}
	g.set(turnKey(r.ID), encodeTurn(r))
	if !r.Parent.IsZero() {
		g.set(childKey(r.Parent, r.ID), nil)
	} else if err := g.ownRoot(branch, r.ID); err != nil {
		return persistence.Node{}, persistence.Head{}, err
	}
	h.Node, h.Depth = r.ID, r.Depth
	g.set(headKey(branch), encodeHead(h))
	put(g, g.heads, branch, h)
	put(g, g.turns, r.ID, r)
	g.newTurns = append(g.newTurns, r)
	g.st.Appends++
	return r.Node, h, nil
}

// skips computes the skip pointers of a new turn at depth d whose parent
// is parent: ptr_k = ptr_{k-1}(ptr_{k-1}), ptr_0 being the parent.
func (g *group) skips(parent messages.NodeID, d uint64) ([]messages.NodeID, error) {
	n := persistence.SkipLevels(d)
	if n == 0 {
		return nil, nil
	}
	out := make([]messages.NodeID, n)
	prev := parent // ptr_{k-1} of the new turn
	for k := 1; k <= n; k++ {
		r, err := g.record(prev)
		if err != nil {
			return nil, err
		}
		if k == 1 {
			out[0] = r.Parent
		} else {
			out[k-1] = r.Skips[k-2]
		}
		prev = out[k-1]
	}
	return out, nil
}

func (g *group) createBranch(o *op) result {
	h, err := g.newBranch(o.spec)
	return result{head: h, err: err}
}

func (g *group) newBranch(spec persistence.BranchSpec) (persistence.Head, error) {
	now := g.s.opts.Now()
	if len(spec.Tenant) > persistence.MaxTenantName {
		return persistence.Head{}, fmt.Errorf("%w: tenant: %d bytes, limit %d", persistence.ErrInvalidArgument, len(spec.Tenant), persistence.MaxTenantName)
	}
	id := spec.ID
	if id.IsZero() {
		id = messages.NewID[messages.BranchID](now)
	}
	if _, err := g.head(id); err == nil {
		return persistence.Head{}, fmt.Errorf("%w: %s", persistence.ErrBranchExists, id)
	} else if !errors.Is(err, persistence.ErrBranchNotFound) {
		return persistence.Head{}, err
	}
	h := persistence.Head{Branch: id, CreatedAt: timeMillis(now)}
	if !spec.At.IsZero() {
		r, err := g.record(spec.At)
		if err != nil {
			return persistence.Head{}, fmt.Errorf("fork at turn: %w", err)
		}
		h.Node, h.Depth, h.Base = r.ID, r.Depth, r.ID
	}
	if spec.Tenant != "" && spec.Tenant != persistence.DefaultTenant {
		g.setRow(id16(tableBranchTenant, id), []byte(spec.Tenant))
	}
	g.set(headKey(id), encodeHead(h))
	put(g, g.heads, id, h)
	return h, nil
}

func (g *group) putOverlay(o *op) result {
	r, err := g.record(o.turn)
	if err != nil {
		return result{err: err}
	}
	ov := persistence.Overlay{Node: o.turn, Seq: g.ovSeq + 1, Tombstone: o.ovReq.Tombstone, CreatedAt: timeMillis(g.s.opts.Now())}
	current := r.PayloadHash
	if os := g.turnOverlays(o.turn); len(os) > 0 {
		current = os[len(os)-1].Hash
	}
	if !ov.Tombstone {
		ov.Hash = o.hash
		if err := g.addRef(o, o.ovReq.Payload); err != nil {
			return result{err: err}
		}
	}
	if o.ovReq.Purge && !current.IsZero() {
		n, err := g.blobRefs(current)
		if err != nil {
			return result{err: err}
		}
		if n > 0 {
			g.setRefs(current, n-1)
		}
		ov.Purged = current
	}
	g.set(overlayKey(ov.Node, ov.Seq), encodeOverlay(ov))
	g.set(overlayOrderKey(ov.Seq, ov.Node), nil)
	g.ovSeq = ov.Seq
	put(g, g.overlays, ov.Node, append(g.turnOverlays(ov.Node), ov))
	g.newOv = append(g.newOv, ov)
	return result{overlay: ov}
}

func (g *group) turnOverlays(turn messages.NodeID) []persistence.Overlay {
	if os, ok := g.overlays[turn]; ok {
		return os
	}
	if p := g.prev; p != nil {
		if os, ok := p.overlays[turn]; ok {
			return os
		}
	}
	g.s.overlayMu.RLock()
	defer g.s.overlayMu.RUnlock()
	return append([]persistence.Overlay(nil), g.s.overlays[turn]...)
}
