// Package memstore is the context store in memory: persistence.Store with
// plain parent walks, for tests and embedding without a data directory.
// Nothing survives it.
package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// memoryStore implements persistence.Store in memory.
type memoryStore struct {
	mu       sync.RWMutex
	limits   persistence.Limits
	now      func() time.Time
	closed   bool
	heads    map[messages.BranchID]persistence.Head
	turns    map[messages.NodeID]persistence.Node
	children map[messages.NodeID][]messages.NodeID
	blobs    map[persistence.Hash][]byte
	refs     map[persistence.Hash]uint64
	overlays map[messages.NodeID][]persistence.Overlay
	ovSeq    uint64
	stats    persistence.Stats
}

// New returns an empty store; lim's zero MaxPayloadBytes is
// persistence.DefaultMaxPayloadBytes.
func New(lim persistence.Limits) persistence.Store {
	if lim.MaxPayloadBytes <= 0 {
		lim.MaxPayloadBytes = persistence.DefaultMaxPayloadBytes
	}
	return &memoryStore{
		limits:   lim,
		now:      time.Now,
		heads:    make(map[messages.BranchID]persistence.Head),
		turns:    make(map[messages.NodeID]persistence.Node),
		children: make(map[messages.NodeID][]messages.NodeID),
		blobs:    make(map[persistence.Hash][]byte),
		refs:     make(map[persistence.Hash]uint64),
		overlays: make(map[messages.NodeID][]persistence.Overlay),
	}
}

func (m *memoryStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func (m *memoryStore) Stats() persistence.Stats {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.stats
}

// rlock takes the read lock unless the store is closed.
func (m *memoryStore) rlock() error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return persistence.ErrClosed
	}
	return nil
}

func (m *memoryStore) lock() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return persistence.ErrClosed
	}
	return nil
}

func (m *memoryStore) CreateBranch(ctx context.Context, spec persistence.BranchSpec) (persistence.Head, error) {
	if err := m.lock(); err != nil {
		return persistence.Head{}, err
	}
	defer m.mu.Unlock()
	now := m.now()
	id := spec.ID
	if id.IsZero() {
		id = messages.NewID[messages.BranchID](now)
	}
	if _, ok := m.heads[id]; ok {
		return persistence.Head{}, fmt.Errorf("%w: %s", persistence.ErrBranchExists, id)
	}
	h := persistence.Head{Branch: id, CreatedAt: millis(now)}
	if !spec.At.IsZero() {
		t, err := m.turn(spec.At)
		if err != nil {
			return persistence.Head{}, fmt.Errorf("fork at turn: %w", err)
		}
		h.Node, h.Depth, h.Base = t.ID, t.Depth, t.ID
	}
	m.heads[id] = h
	return h, nil
}

func (m *memoryStore) addRef(p []byte) persistence.Hash {
	h := persistence.HashOf(p)
	if _, ok := m.blobs[h]; ok {
		m.stats.BlobDedups++
	} else {
		m.blobs[h] = append([]byte(nil), p...)
		m.stats.BlobWrites++
		m.stats.RawBytes += uint64(len(p))
		m.stats.StoredBytes += uint64(len(p))
	}
	m.refs[h]++
	return h
}

func (m *memoryStore) Append(ctx context.Context, branch messages.BranchID, req persistence.AppendRequest) (persistence.Node, error) {
	if err := persistence.CheckAppend(branch, req, m.limits); err != nil {
		return persistence.Node{}, err
	}
	if err := m.lock(); err != nil {
		return persistence.Node{}, err
	}
	defer m.mu.Unlock()
	h, err := m.head(branch)
	if err != nil {
		return persistence.Node{}, err
	}
	if want := req.ExpectParent; want != nil && *want != h.Node {
		return persistence.Node{}, &persistence.HeadMismatchError{Branch: branch, Want: *want, Got: h.Node}
	}
	now := m.now()
	t := persistence.Node{
		ID:        messages.NewID[messages.NodeID](now),
		TypeTag:   req.TypeTag,
		Codec:     req.Codec,
		Flags:     req.Flags,
		CreatedAt: millis(now),
	}
	if !h.Empty() {
		t.Parent, t.Depth = h.Node, h.Depth+1
		m.children[t.Parent] = append(m.children[t.Parent], t.ID)
	}
	t.PayloadHash = m.addRef(req.Payload)
	m.turns[t.ID] = t
	h.Node, h.Depth = t.ID, t.Depth
	m.heads[branch] = h
	m.stats.Appends++
	return t, nil
}

func (m *memoryStore) head(b messages.BranchID) (persistence.Head, error) {
	if err := persistence.CheckBranchID(b); err != nil {
		return persistence.Head{}, err
	}
	h, ok := m.heads[b]
	if !ok {
		return persistence.Head{}, persistence.BranchNotFound(b)
	}
	return h, nil
}

func (m *memoryStore) turn(id messages.NodeID) (persistence.Node, error) {
	if err := persistence.CheckNodeID(id); err != nil {
		return persistence.Node{}, err
	}
	t, ok := m.turns[id]
	if !ok {
		return persistence.Node{}, persistence.NodeNotFound(id)
	}
	return t, nil
}

func (m *memoryStore) Children(ctx context.Context, id messages.NodeID) ([]messages.NodeID, error) {
	if err := m.rlock(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	if _, err := m.turn(id); err != nil {
		return nil, err
	}
	return append([]messages.NodeID(nil), m.children[id]...), nil
}

func (m *memoryStore) PutOverlay(ctx context.Context, turn messages.NodeID, req persistence.OverlayRequest) (persistence.Overlay, error) {
	if err := persistence.CheckOverlay(turn, req, m.limits); err != nil {
		return persistence.Overlay{}, err
	}
	if err := m.lock(); err != nil {
		return persistence.Overlay{}, err
	}
	defer m.mu.Unlock()
	t, err := m.turn(turn)
	if err != nil {
		return persistence.Overlay{}, err
	}
	current := t.PayloadHash
	if os := m.overlays[turn]; len(os) > 0 {
		current = os[len(os)-1].Hash
	}
	o := persistence.Overlay{Node: turn, Seq: m.ovSeq + 1, Tombstone: req.Tombstone, CreatedAt: millis(m.now())}
	if !req.Tombstone {
		o.Hash = m.addRef(req.Payload)
	}
	if req.Purge && !current.IsZero() {
		if m.refs[current] > 0 {
			m.refs[current]--
		}
		if m.refs[current] == 0 {
			delete(m.refs, current)
			delete(m.blobs, current)
		}
		o.Purged = current
	}
	m.ovSeq = o.Seq
	m.overlays[turn] = append(m.overlays[turn], o)
	return o, nil
}

func (m *memoryStore) Overlays(ctx context.Context, turn messages.NodeID) ([]persistence.Overlay, error) {
	if err := m.rlock(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	if _, err := m.turn(turn); err != nil {
		return nil, err
	}
	return append([]persistence.Overlay(nil), m.overlays[turn]...), nil
}

func (m *memoryStore) OverlaySeq(ctx context.Context) (uint64, error) {
	if err := m.rlock(); err != nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	return m.ovSeq, nil
}

func (m *memoryStore) BlobRefs(ctx context.Context, h persistence.Hash) (uint64, error) {
	if err := m.rlock(); err != nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	return m.refs[h], nil
}

func (m *memoryStore) AsOf(seq uint64) persistence.Reader {
	return m.reader(persistence.OverlayView{AsOf: seq})
}

func (m *memoryStore) view() memoryReader { return m.reader(persistence.OverlayView{Latest: true}) }

func (m *memoryStore) reader(v persistence.OverlayView) memoryReader {
	r := memoryReader{m: m, view: v}
	r.Pager.View = func(_ context.Context, fn func(persistence.DAGView) error) error {
		if err := m.rlock(); err != nil {
			return err
		}
		defer m.mu.RUnlock()
		return fn(memoryView{r})
	}
	return r
}

func (m *memoryStore) Head(ctx context.Context, b messages.BranchID) (persistence.Head, error) {
	return m.view().Head(ctx, b)
}
func (m *memoryStore) Node(ctx context.Context, id messages.NodeID) (persistence.Node, error) {
	return m.view().Node(ctx, id)
}
func (m *memoryStore) Blob(ctx context.Context, h persistence.Hash) ([]byte, error) {
	return m.view().Blob(ctx, h)
}
func (m *memoryStore) Last(ctx context.Context, b messages.BranchID, n int) (persistence.Page, error) {
	return m.view().Last(ctx, b, n)
}
func (m *memoryStore) Before(ctx context.Context, id messages.NodeID, n int) (persistence.Page, error) {
	return m.view().Before(ctx, id, n)
}
func (m *memoryStore) Chain(ctx context.Context, id messages.NodeID) ([]persistence.Node, error) {
	return m.view().Chain(ctx, id)
}
func (m *memoryStore) Range(ctx context.Context, b messages.BranchID, start uint64, limit int) (persistence.RangePage, error) {
	return m.view().Range(ctx, b, start, limit)
}

// memoryReader reads with one overlay policy: latest, or as of a seq.
type memoryReader struct {
	persistence.Pager
	m    *memoryStore
	view persistence.OverlayView
}

func (r memoryReader) present(t persistence.Node) persistence.Node {
	return r.view.Apply(t, r.m.overlays[t.ID])
}

func (r memoryReader) Head(ctx context.Context, b messages.BranchID) (persistence.Head, error) {
	if err := r.m.rlock(); err != nil {
		return persistence.Head{}, err
	}
	defer r.m.mu.RUnlock()
	return r.m.head(b)
}

func (r memoryReader) Node(ctx context.Context, id messages.NodeID) (persistence.Node, error) {
	if err := r.m.rlock(); err != nil {
		return persistence.Node{}, err
	}
	defer r.m.mu.RUnlock()
	t, err := r.m.turn(id)
	return r.present(t), err
}

func (r memoryReader) Blob(ctx context.Context, h persistence.Hash) ([]byte, error) {
	if err := r.m.rlock(); err != nil {
		return nil, err
	}
	defer r.m.mu.RUnlock()
	p, ok := r.m.blobs[h]
	if !ok {
		return nil, persistence.BlobNotFound(h)
	}
	return append([]byte(nil), p...), nil
}

// memoryView is a memoryReader's DAGView, under the store's read lock:
// plain parent walks.
type memoryView struct{ r memoryReader }

func (v memoryView) Head(b messages.BranchID) (persistence.Head, error) { return v.r.m.head(b) }

func (v memoryView) Walk(id messages.NodeID, n int) ([]persistence.Node, messages.NodeID, error) {
	var out []persistence.Node
	for ; n > 0 && !id.IsZero(); n-- {
		t, err := v.r.m.turn(id)
		if err != nil {
			return nil, id, err
		}
		out = append(out, v.r.present(t))
		id = t.Parent
	}
	return out, id, nil
}

func (v memoryView) AncestorAt(id messages.NodeID, d, target uint64) (messages.NodeID, error) {
	for ; d > target; d-- {
		id = v.r.m.turns[id].Parent
	}
	return id, nil
}

// millis is t at the millisecond precision of the other engines' records.
func millis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
