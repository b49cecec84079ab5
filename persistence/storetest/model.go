package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

var modelSeed = flag.Uint64("seed", 0, "replay RunModel with this seed (0: seeds from the clock)")

// modelMaxPayload is the payload limit of the stores under the model test:
// small, so that the over-limit case is cheap.
const modelMaxPayload = 64 << 10

// RunModel runs seeded random interleavings of operations on many
// branches against each engine and checks every answer against a naive
// in-memory model, as subtests named engine/durability/seed=N. Replay a failure with -seed and -run on
// the failing subtest's name; the replay is exact except for which of
// several concurrent appends wins a race for a head.
func RunModel(t *testing.T, engines ...Engine) {
	ops, nSeeds := 2000, 3
	if testing.Short() {
		ops, nSeeds = 1000, 2
	}
	var seeds []uint64
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	} else {
		base := uint64(time.Now().UnixNano())
		for i := range nSeeds {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, impl := range engines {
		for i, seed := range seeds {
			if impl.OneRun && i > 0 {
				break
			}
			durs := []persistence.Durability{persistence.DurabilityRelaxed}
			switch {
			case impl.OneRun:
				durs = []persistence.Durability{persistence.DurabilitySync}
			case !impl.Durable:
			case *modelSeed != 0:
				durs = []persistence.Durability{persistence.DurabilitySync, persistence.DurabilityRelaxed}
			case i == 0:
				durs = []persistence.Durability{persistence.DurabilitySync}
			}
			for _, d := range durs {
				name := impl.Name
				if impl.Durable {
					name += "/" + durabilityName(d)
				}
				name += fmt.Sprintf("/seed=%d", seed)
				t.Run(name, func(t *testing.T) {
					t.Logf("seed %d (replay: go test -run '%s' -seed=%d in the engine's package)", seed, t.Name(), seed)
					runModel(t, impl, d, seed, ops)
				})
			}
		}
	}
}

func durabilityName(d persistence.Durability) string {
	if d == persistence.DurabilitySync {
		return "sync"
	}
	return "relaxed"
}

// modelTurn is a turn as the model knows it: what Append returned, and
// the payload it was given.
type modelTurn struct {
	turn    persistence.Node
	payload []byte
}

// modelBranch is a branch: its head as CreateBranch returned it, moved by
// appends, and its chain of turns from the root.
type modelBranch struct {
	head  persistence.Head
	chain []*modelTurn
}

// modelRun is one seeded run: the store under test and the model.
type modelRun struct {
	t      *testing.T
	ctx    context.Context
	rng    *rand.Rand
	seed   uint64
	op     int
	opName string
	s      persistence.Store
	open   func() persistence.Store // reopens the store; nil when it cannot be reopened
	pool   [][]byte
	limit  []byte // a payload of exactly the limit

	branches  map[messages.BranchID]*modelBranch
	branchIDs []messages.BranchID // creation order
	turns     map[messages.NodeID]*modelTurn
	turnIDs   []messages.NodeID // append order
	children  map[messages.NodeID][]messages.NodeID
	refs      map[persistence.Hash]uint64 // turns per payload hash
	payloads  map[persistence.Hash][]byte // payload per hash
	hashes    []persistence.Hash          // distinct payload hashes, first-use order
}

func runModel(t *testing.T, impl Engine, d persistence.Durability, seed uint64, ops int) {
	dir := t.TempDir()
	m := &modelRun{
		t:        t,
		ctx:      t.Context(),
		rng:      rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		seed:     seed,
		s:        impl.Open(t, dir, d, persistence.Limits{MaxPayloadBytes: modelMaxPayload}),
		branches: make(map[messages.BranchID]*modelBranch),
		turns:    make(map[messages.NodeID]*modelTurn),
		children: make(map[messages.NodeID][]messages.NodeID),
		refs:     make(map[persistence.Hash]uint64),
		payloads: make(map[persistence.Hash][]byte),
	}
	if impl.Durable {
		m.open = func() persistence.Store {
			return impl.Open(t, dir, d, persistence.Limits{MaxPayloadBytes: modelMaxPayload})
		}
	}
	t.Cleanup(func() { m.s.Close() })
	m.makePool()

	type weighted struct {
		name   string
		weight int
		run    func()
	}
	table := []weighted{
		{"create", 2, m.createEmpty},
		{"fork", 3, m.fork},
		{"append", 45, m.append},
		{"append-concurrent", 3, m.appendConcurrent},
		{"last", 5, m.last},
		{"page", 3, m.pageWholeBranch},
		{"before", 4, m.before},
		{"chain", 4, m.chain},
		{"range", 5, m.rangeQuery},
		{"head", 3, m.head},
		{"turn", 3, m.turn},
		{"blob", 4, m.blob},
		{"children", 4, m.childrenOf},
		{"bad-input", 8, m.badInput},
	}
	total := 0
	for _, w := range table {
		total += w.weight
	}
	reopenAt := -1
	if m.open != nil {
		reopenAt = ops/4 + m.rng.IntN(ops/2)
	}
	for m.op = range ops {
		if m.op == reopenAt {
			m.opName = "reopen"
			m.reopen()
		}
		if m.op%500 == 499 {
			m.opName = "check-all"
			m.checkAll()
		}
		k := m.rng.IntN(total)
		for _, w := range table {
			if k < w.weight {
				m.opName = w.name
				w.run()
				break
			}
			k -= w.weight
		}
	}
	m.opName = "final check-all"
	m.checkAll()
	deepest := 0
	for _, mb := range m.branches {
		deepest = max(deepest, len(mb.chain))
	}
	reopened := "not reopened"
	if reopenAt >= 0 {
		reopened = fmt.Sprintf("reopened before op %d", reopenAt)
	}
	t.Logf("%d ops (%s): %d branches (longest %d turns), %d turns, %d distinct payloads; stats: %+v",
		ops, reopened, len(m.branchIDs), deepest, len(m.turnIDs), len(m.hashes), m.s.Stats())
}

func (m *modelRun) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d, op %d (%s): %s", m.seed, m.op, m.opName, fmt.Sprintf(format, args...))
}

// --- random inputs ---

// makePool makes the small set of payloads that appends mostly draw from,
// so that the same bytes are appended many times and deduplicated.
func (m *modelRun) makePool() {
	sizes := []int{1, 2, 3, 64, 1023, 1024, 1025}
	for len(sizes) < 20 {
		sizes = append(sizes, 1+m.rng.IntN(20<<10))
	}
	for _, n := range sizes {
		m.pool = append(m.pool, m.randomPayload(n))
	}
	m.limit = m.randomPayload(modelMaxPayload)
}

// randomPayload returns n bytes that are random, text-like or repetitive,
// so that some compress and some do not.
func (m *modelRun) randomPayload(n int) []byte {
	p := make([]byte, n)
	switch m.rng.IntN(3) {
	case 0:
		for i := range p {
			p[i] = byte(m.rng.Uint32())
		}
	case 1:
		const words = "the quick brown fox jumps over a lazy dog while turns pile up "
		off := m.rng.IntN(len(words))
		for i := range p {
			p[i] = words[(off+i)%len(words)]
		}
	default:
		b := byte(m.rng.Uint32())
		for i := range p {
			p[i] = b
		}
		if n > 1 {
			p[m.rng.IntN(n)] ^= 0x5a
		}
	}
	return p
}

func (m *modelRun) pickPayload() []byte {
	switch k := m.rng.IntN(100); {
	case k < 2:
		return m.limit
	case k < 15:
		return m.randomPayload(1 + m.rng.IntN(20<<10))
	default:
		return m.pool[m.rng.IntN(len(m.pool))]
	}
}

// newBranchID returns a branch id drawn from the run's generator, so that a
// replay makes the same ids.
func (m *modelRun) newBranchID() messages.BranchID {
	var id messages.BranchID
	for id.IsZero() || m.branches[id] != nil {
		binary.BigEndian.PutUint64(id[:8], m.rng.Uint64())
		binary.BigEndian.PutUint64(id[8:], m.rng.Uint64())
	}
	return id
}

// unknownTurnID returns a turn id that no turn has.
func (m *modelRun) unknownTurnID() messages.NodeID {
	var id messages.NodeID
	for id.IsZero() || m.turns[id] != nil {
		binary.BigEndian.PutUint64(id[:8], m.rng.Uint64())
		binary.BigEndian.PutUint64(id[8:], m.rng.Uint64())
	}
	return id
}

// pickBranch returns a branch, or zero when there is none: often one of
// the first few, so that their chains grow deep enough for several levels
// of skip pointers, often a recent one, so that new forks grow too.
func (m *modelRun) pickBranch() messages.BranchID {
	n := len(m.branchIDs)
	if n == 0 {
		return messages.BranchID{}
	}
	switch m.rng.IntN(4) {
	case 0, 1:
		return m.branchIDs[m.rng.IntN(min(n, 3))]
	case 2:
		return m.branchIDs[n-1-m.rng.IntN(min(n, 4))]
	}
	return m.branchIDs[m.rng.IntN(n)]
}

// pickNonEmptyBranch returns a branch with turns, or false.
func (m *modelRun) pickNonEmptyBranch() (messages.BranchID, bool) {
	for range 8 {
		if b := m.pickBranch(); !b.IsZero() && len(m.branches[b].chain) > 0 {
			return b, true
		}
	}
	for _, b := range m.branchIDs {
		if len(m.branches[b].chain) > 0 {
			return b, true
		}
	}
	return messages.BranchID{}, false
}

// pickTurn returns an existing turn, or nil when there is none.
func (m *modelRun) pickTurn() *modelTurn {
	if len(m.turnIDs) == 0 {
		return nil
	}
	return m.turns[m.turnIDs[m.rng.IntN(len(m.turnIDs))]]
}

// --- the model ---

func (m *modelRun) addBranch(h persistence.Head, chain []*modelTurn) {
	m.branches[h.Branch] = &modelBranch{head: h, chain: chain}
	m.branchIDs = append(m.branchIDs, h.Branch)
}

func (m *modelRun) addTurn(b messages.BranchID, t persistence.Node, payload []byte) {
	mt := &modelTurn{turn: t, payload: payload}
	m.turns[t.ID] = mt
	m.turnIDs = append(m.turnIDs, t.ID)
	if !t.Parent.IsZero() {
		m.children[t.Parent] = append(m.children[t.Parent], t.ID)
	}
	if m.refs[t.PayloadHash] == 0 {
		m.hashes = append(m.hashes, t.PayloadHash)
		m.payloads[t.PayloadHash] = payload
	}
	m.refs[t.PayloadHash]++
	mb := m.branches[b]
	mb.chain = append(mb.chain, mt)
	mb.head.Node, mb.head.Depth = t.ID, t.Depth
}

// chainOf returns the turns from the root to id.
func (m *modelRun) chainOf(id messages.NodeID) []*modelTurn {
	var c []*modelTurn
	for !id.IsZero() {
		mt := m.turns[id]
		c = append(c, mt)
		id = mt.turn.Parent
	}
	slices.Reverse(c)
	return c
}

// --- comparisons ---

func sameTurn(a, b persistence.Node) bool {
	return a.ID == b.ID && a.Parent == b.Parent && a.Depth == b.Depth &&
		a.TypeTag == b.TypeTag && a.Codec == b.Codec && a.PayloadHash == b.PayloadHash &&
		a.Flags == b.Flags && a.CreatedAt.Equal(b.CreatedAt) && a.OverlaySeq == b.OverlaySeq
}

func sameHead(a, b persistence.Head) bool {
	return a.Branch == b.Branch && a.Node == b.Node && a.Depth == b.Depth &&
		a.Base == b.Base && a.CreatedAt.Equal(b.CreatedAt)
}

func turnIDs(ts []persistence.Node) []messages.NodeID {
	ids := make([]messages.NodeID, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

func modelIDs(ts []*modelTurn) []messages.NodeID {
	ids := make([]messages.NodeID, len(ts))
	for i, t := range ts {
		ids[i] = t.turn.ID
	}
	return ids
}

// checkTurns fails unless got are exactly the turns of want, in order.
func (m *modelRun) checkTurns(call string, got []persistence.Node, want []*modelTurn) {
	m.t.Helper()
	if len(got) != len(want) {
		m.fatalf("%s returned %d turns %v, want %d %v", call, len(got), turnIDs(got), len(want), modelIDs(want))
	}
	for i := range got {
		if !sameTurn(got[i], want[i].turn) {
			m.fatalf("%s turn %d = %+v, want %+v", call, i, got[i], want[i].turn)
		}
	}
}

func (m *modelRun) checkHead(b messages.BranchID) {
	m.t.Helper()
	h, err := m.s.Head(m.ctx, b)
	if err != nil {
		m.fatalf("Head(%s) = %v", b, err)
	}
	if want := m.branches[b].head; !sameHead(h, want) {
		m.fatalf("Head(%s) = %+v, want %+v", b, h, want)
	}
}

// checkUnchanged fails if a failed call appended anything or moved the
// head of branch b (when the model knows b) or created it (when not).
func (m *modelRun) checkUnchanged(before persistence.Stats, b messages.BranchID) {
	m.t.Helper()
	after := m.s.Stats()
	if after.Appends != before.Appends || after.BlobWrites != before.BlobWrites || after.BlobDedups != before.BlobDedups {
		m.fatalf("a failed call changed the stats from %+v to %+v", before, after)
	}
	if b.IsZero() {
		return
	}
	if m.branches[b] != nil {
		m.checkHead(b)
	} else if _, err := m.s.Head(m.ctx, b); !errors.Is(err, persistence.ErrBranchNotFound) {
		m.fatalf("after a failed call, Head(unknown %s) = %v, want ErrBranchNotFound", b, err)
	}
}

// checkAll compares the whole store with the model.
func (m *modelRun) checkAll() {
	m.t.Helper()
	for _, b := range m.branchIDs {
		m.checkHead(b)
		mb := m.branches[b]
		if len(mb.chain) == 0 {
			continue
		}
		c, err := m.s.Chain(m.ctx, mb.head.Node)
		if err != nil {
			m.fatalf("Chain(head %s of %s) = %v", mb.head.Node, b, err)
		}
		m.checkTurns(fmt.Sprintf("Chain(head of %s)", b), c, mb.chain)
		r, err := m.s.Range(m.ctx, b, 0, len(mb.chain))
		if err != nil {
			m.fatalf("Range(%s, 0, %d) = %v", b, len(mb.chain), err)
		}
		m.checkTurns(fmt.Sprintf("Range(%s, 0, %d)", b, len(mb.chain)), r.Nodes, mb.chain)
	}
	for _, id := range m.turnIDs {
		got, err := m.s.Node(m.ctx, id)
		if err != nil || !sameTurn(got, m.turns[id].turn) {
			m.fatalf("Turn(%s) = %+v, %v; want %+v", id, got, err, m.turns[id].turn)
		}
		m.checkChildren(id)
	}
	for _, h := range m.hashes {
		m.checkBlob(h)
	}
}

func (m *modelRun) checkChildren(id messages.NodeID) {
	m.t.Helper()
	got, err := m.s.Children(m.ctx, id)
	if err != nil {
		m.fatalf("Children(%s) = %v", id, err)
	}
	if want := m.children[id]; !slices.Equal(got, want) {
		m.fatalf("Children(%s) = %v, want %v", id, got, want)
	}
}

// checkBlob reads the blob of h twice, scribbling on the first copy, and
// checks both against the model along with its reference count.
func (m *modelRun) checkBlob(h persistence.Hash) {
	m.t.Helper()
	want := m.payloads[h]
	for i := range 2 {
		got, err := m.s.Blob(m.ctx, h)
		if err != nil {
			m.fatalf("Blob(%s) = %v", h, err)
		}
		if !bytes.Equal(got, want) {
			m.fatalf("Blob(%s) read %d returned %d bytes that differ from the %d appended", h, i, len(got), len(want))
		}
		clear(got) // the store must have handed out its own copy
	}
	n, err := m.s.BlobRefs(m.ctx, h)
	if err != nil || n != m.refs[h] {
		m.fatalf("BlobRefs(%s) = %d, %v; want %d", h, n, err, m.refs[h])
	}
}

// --- operations ---

func (m *modelRun) reopen() {
	b := m.pickBranch()
	if b.IsZero() {
		b = m.newBranchID()
	}
	if err := m.s.Close(); err != nil {
		m.fatalf("Close() = %v", err)
	}
	if err := m.s.Close(); err != nil {
		m.fatalf("second Close() = %v, want nil", err)
	}
	if _, err := m.s.Head(m.ctx, b); !errors.Is(err, persistence.ErrClosed) {
		m.fatalf("Head after Close = %v, want ErrClosed", err)
	}
	if _, err := m.s.Append(m.ctx, b, persistence.AppendRequest{Payload: m.pool[0]}); !errors.Is(err, persistence.ErrClosed) {
		m.fatalf("Append after Close = %v, want ErrClosed", err)
	}
	m.s = m.open()
	m.checkAll()
}

func (m *modelRun) createEmpty() {
	var spec persistence.BranchSpec
	if m.rng.IntN(2) == 0 {
		spec.ID = m.newBranchID()
	}
	h, err := m.s.CreateBranch(m.ctx, spec)
	if err != nil {
		m.fatalf("CreateBranch(%+v) = %v", spec, err)
	}
	if h.Branch.IsZero() || (!spec.ID.IsZero() && h.Branch != spec.ID) || m.branches[h.Branch] != nil {
		m.fatalf("CreateBranch(%+v) made branch %q: zero, not the one asked for or already used", spec, h.Branch)
	}
	if !h.Empty() || h.Depth != 0 || !h.Base.IsZero() || h.Len() != 0 || h.CreatedAt.IsZero() {
		m.fatalf("CreateBranch(%+v) = %+v, want an empty head", spec, h)
	}
	m.addBranch(h, nil)
	m.checkHead(h.Branch)
}

func (m *modelRun) fork() {
	at := m.pickTurn()
	if at == nil {
		m.createEmpty()
		return
	}
	if m.rng.IntN(3) == 0 { // fork at a head, the common case
		if b, ok := m.pickNonEmptyBranch(); ok {
			at = m.branches[b].chain[len(m.branches[b].chain)-1]
		}
	}
	spec := persistence.BranchSpec{At: at.turn.ID}
	if m.rng.IntN(2) == 0 {
		spec.ID = m.newBranchID()
	}
	h, err := m.s.CreateBranch(m.ctx, spec)
	if err != nil {
		m.fatalf("CreateBranch(%+v) = %v", spec, err)
	}
	if h.Branch.IsZero() || (!spec.ID.IsZero() && h.Branch != spec.ID) || m.branches[h.Branch] != nil {
		m.fatalf("CreateBranch(%+v) made branch %q: zero, not the one asked for or already used", spec, h.Branch)
	}
	if h.Node != at.turn.ID || h.Depth != at.turn.Depth || h.Base != at.turn.ID || h.Len() != at.turn.Depth+1 {
		m.fatalf("CreateBranch(%+v) = %+v, want head and base %s at depth %d", spec, h, at.turn.ID, at.turn.Depth)
	}
	m.addBranch(h, m.chainOf(at.turn.ID))
	m.checkHead(h.Branch)
}

// wrongParent returns an ExpectParent value that is not b's head.
func (m *modelRun) wrongParent(mb *modelBranch) messages.NodeID {
	for {
		var w messages.NodeID
		switch m.rng.IntN(3) {
		case 0:
			if t := m.pickTurn(); t != nil {
				w = t.turn.ID
			}
		case 1:
			w = m.unknownTurnID()
		default: // zero: "the branch must be empty"
		}
		if w != mb.head.Node {
			return w
		}
	}
}

func (m *modelRun) append() {
	b := m.pickBranch()
	if b.IsZero() {
		m.createEmpty()
		return
	}
	mb := m.branches[b]
	payload := m.pickPayload()
	req := persistence.AppendRequest{
		Payload: slices.Clone(payload),
		TypeTag: m.rng.Uint64N(1 << 40),
		Codec:   uint32(m.rng.IntN(4)),
		Flags:   m.rng.Uint32() & persistence.CallerFlagsMask,
	}
	var wrong bool
	switch m.rng.IntN(6) {
	case 0, 1:
		p := mb.head.Node
		req.ExpectParent = &p
	case 2:
		w := m.wrongParent(mb)
		req.ExpectParent, wrong = &w, true
	}
	before := m.s.Stats()
	got, err := m.s.Append(m.ctx, b, req)
	clear(req.Payload) // the store must not keep the caller's buffer
	if wrong {
		var hm *persistence.HeadMismatchError
		if !errors.Is(err, persistence.ErrHeadMismatch) || !errors.As(err, &hm) {
			m.fatalf("Append(%s, expect parent %q) with head %q = %+v, %v; want ErrHeadMismatch",
				b, *req.ExpectParent, mb.head.Node, got, err)
		}
		if hm.Branch != b || hm.Want != *req.ExpectParent || hm.Got != mb.head.Node {
			m.fatalf("Append(%s, expect parent %q) with head %q: error %+v names the wrong turns",
				b, *req.ExpectParent, mb.head.Node, hm)
		}
		m.checkUnchanged(before, b)
		return
	}
	if err != nil {
		m.fatalf("Append(%s, %d bytes, expect parent %v) = %v", b, len(payload), req.ExpectParent != nil, err)
	}
	want := persistence.Node{
		ID: got.ID, Parent: mb.head.Node, Depth: uint64(len(mb.chain)),
		TypeTag: req.TypeTag, Codec: req.Codec, PayloadHash: persistence.HashOf(payload), Flags: req.Flags,
		CreatedAt: got.CreatedAt,
	}
	if got.ID.IsZero() || m.turns[got.ID] != nil || got.CreatedAt.IsZero() || !sameTurn(got, want) {
		m.fatalf("Append(%s, %d bytes) = %+v, want %+v with a fresh id", b, len(payload), got, want)
	}
	after := m.s.Stats()
	wantWrites, wantDedups := before.BlobWrites, before.BlobDedups+1
	if m.refs[want.PayloadHash] == 0 {
		wantWrites, wantDedups = before.BlobWrites+1, before.BlobDedups
	}
	if after.Appends != before.Appends+1 || after.BlobWrites != wantWrites || after.BlobDedups != wantDedups {
		m.fatalf("Append(%s, %d bytes, %d earlier uses): stats went from %+v to %+v", b, len(payload), m.refs[want.PayloadHash], before, after)
	}
	m.addTurn(b, got, payload)
}

// appendConcurrent appends from several goroutines at once to a few
// branches, so that the appends share group commits. Either every append
// succeeds, or all of them expect the same head and exactly one per branch
// wins.
func (m *modelRun) appendConcurrent() {
	if len(m.branchIDs) == 0 {
		m.createEmpty()
		return
	}
	type call struct {
		b       messages.BranchID
		payload []byte
		req     persistence.AppendRequest
		got     persistence.Node
		err     error
	}
	race := m.rng.IntN(2) == 0
	targets := make([]messages.BranchID, 1+m.rng.IntN(3))
	for i := range targets {
		targets[i] = m.pickBranch()
	}
	calls := make([]*call, 2+m.rng.IntN(7))
	for i := range calls {
		c := &call{b: targets[m.rng.IntN(len(targets))], payload: m.pickPayload()}
		c.req = persistence.AppendRequest{Payload: c.payload, TypeTag: uint64(i), Codec: 1}
		if race {
			p := m.branches[c.b].head.Node
			c.req.ExpectParent = &p
		}
		calls[i] = c
	}
	before := m.s.Stats()
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() { c.got, c.err = m.s.Append(m.ctx, c.b, c.req) })
	}
	wg.Wait()

	var ok []*call
	tries, wins := make(map[messages.BranchID]int), make(map[messages.BranchID]int)
	for _, c := range calls {
		tries[c.b]++
		switch {
		case c.err == nil:
			ok = append(ok, c)
			wins[c.b]++
		case race && errors.Is(c.err, persistence.ErrHeadMismatch):
		default:
			m.fatalf("concurrent Append(%s, expect parent %v) = %v", c.b, race, c.err)
		}
	}
	for b, n := range tries {
		if race && wins[b] != 1 {
			m.fatalf("%d concurrent appends to %s expecting the same head: %d succeeded, want 1", n, b, wins[b])
		}
	}
	// Turn ids increase in commit order, and the model must see the turns
	// in that order for each branch's chain and each parent's children.
	slices.SortFunc(ok, func(a, b *call) int { return a.got.ID.Compare(b.got.ID) })
	newHashes := make(map[persistence.Hash]bool)
	for _, c := range ok {
		mb := m.branches[c.b]
		want := persistence.Node{
			ID: c.got.ID, Parent: mb.head.Node, Depth: uint64(len(mb.chain)),
			TypeTag: c.req.TypeTag, Codec: 1, PayloadHash: persistence.HashOf(c.payload), CreatedAt: c.got.CreatedAt,
		}
		if m.turns[c.got.ID] != nil || !sameTurn(c.got, want) {
			m.fatalf("concurrent Append(%s) = %+v, want %+v (turns taken in id order)", c.b, c.got, want)
		}
		if m.refs[want.PayloadHash] == 0 {
			newHashes[want.PayloadHash] = true
		}
		m.addTurn(c.b, c.got, c.payload)
	}
	after := m.s.Stats()
	if after.Appends != before.Appends+uint64(len(ok)) ||
		after.BlobWrites != before.BlobWrites+uint64(len(newHashes)) ||
		after.BlobDedups != before.BlobDedups+uint64(len(ok)-len(newHashes)) {
		m.fatalf("%d concurrent appends, %d new payloads: stats went from %+v to %+v", len(ok), len(newHashes), before, after)
	}
	for _, b := range targets {
		m.checkHead(b)
	}
}

func (m *modelRun) last() {
	b := m.pickBranch()
	if b.IsZero() {
		return
	}
	n := m.rng.IntN(71)
	p, err := m.s.Last(m.ctx, b, n)
	if err != nil {
		m.fatalf("Last(%s, %d) = %v", b, n, err)
	}
	chain := m.branches[b].chain
	want := chain[max(0, len(chain)-n):]
	m.checkTurns(fmt.Sprintf("Last(%s, %d)", b, n), p.Nodes, want)
	var next messages.NodeID
	if len(want) > 0 && len(want) < len(chain) {
		next = want[0].turn.ID
	}
	if p.Next != next {
		m.fatalf("Last(%s, %d) on %d turns: Next = %q, want %q", b, n, len(chain), p.Next, next)
	}
}

// pageWholeBranch pages from the head to the root with Last and Before in
// random page sizes and checks the pages add up to the chain.
func (m *modelRun) pageWholeBranch() {
	b, ok := m.pickNonEmptyBranch()
	if !ok {
		return
	}
	chain := m.branches[b].chain
	n := 1 + m.rng.IntN(70)
	p, err := m.s.Last(m.ctx, b, n)
	if err != nil {
		m.fatalf("Last(%s, %d) = %v", b, n, err)
	}
	got := p.Nodes
	for pages := 1; !p.Next.IsZero(); pages++ {
		if pages > len(chain) {
			m.fatalf("paging %s (%d turns) did not reach the root after %d pages", b, len(chain), pages)
		}
		cursor := p.Next
		n = 1 + m.rng.IntN(70)
		if p, err = m.s.Before(m.ctx, cursor, n); err != nil {
			m.fatalf("Before(%s, %d) = %v", cursor, n, err)
		}
		if len(p.Nodes) == 0 || len(p.Nodes) > n {
			m.fatalf("Before(%s, %d) returned %d turns with more to come", cursor, n, len(p.Nodes))
		}
		got = append(slices.Clone(p.Nodes), got...)
	}
	m.checkTurns(fmt.Sprintf("pages of %s", b), got, chain)
}

func (m *modelRun) before() {
	at := m.pickTurn()
	if at == nil {
		return
	}
	n := m.rng.IntN(71)
	p, err := m.s.Before(m.ctx, at.turn.ID, n)
	if err != nil {
		m.fatalf("Before(%s, %d) = %v", at.turn.ID, n, err)
	}
	older := m.chainOf(at.turn.Parent)
	want := older[max(0, len(older)-n):]
	m.checkTurns(fmt.Sprintf("Before(%s, %d)", at.turn.ID, n), p.Nodes, want)
	var next messages.NodeID
	if len(want) > 0 && len(want) < len(older) {
		next = want[0].turn.ID
	}
	if p.Next != next {
		m.fatalf("Before(%s at depth %d, %d): Next = %q, want %q", at.turn.ID, at.turn.Depth, n, p.Next, next)
	}
}

func (m *modelRun) chain() {
	at := m.pickTurn()
	if b, ok := m.pickNonEmptyBranch(); ok && m.rng.IntN(2) == 0 {
		at = m.branches[b].chain[len(m.branches[b].chain)-1]
	}
	if at == nil {
		return
	}
	c, err := m.s.Chain(m.ctx, at.turn.ID)
	if err != nil {
		m.fatalf("Chain(%s) = %v", at.turn.ID, err)
	}
	m.checkTurns(fmt.Sprintf("Chain(%s)", at.turn.ID), c, m.chainOf(at.turn.ID))
}

func (m *modelRun) rangeQuery() {
	b := m.pickBranch()
	if b.IsZero() {
		return
	}
	mb := m.branches[b]
	l := uint64(len(mb.chain))
	var start uint64
	switch m.rng.IntN(8) {
	case 0:
		start = l + m.rng.Uint64N(5) // at or past the head
	case 1:
		start = math.MaxUint64 - m.rng.Uint64N(2)
	default:
		start = m.rng.Uint64N(l + 1)
	}
	limit := m.rng.IntN(71)
	p, err := m.s.Range(m.ctx, b, start, limit)
	if err != nil {
		m.fatalf("Range(%s, %d, %d) = %v", b, start, limit, err)
	}
	var want []*modelTurn
	if start < l {
		want = mb.chain[start : start+min(uint64(limit), l-start)]
	}
	call := fmt.Sprintf("Range(%s, %d, %d) on %d turns", b, start, limit, l)
	m.checkTurns(call, p.Nodes, want)
	if p.HeadDepth != mb.head.Depth || p.Empty != (l == 0) {
		m.fatalf("%s: head depth %d, empty %v; want %d, %v", call, p.HeadDepth, p.Empty, mb.head.Depth, l == 0)
	}
}

func (m *modelRun) head() {
	if b := m.pickBranch(); !b.IsZero() {
		m.checkHead(b)
	}
}

func (m *modelRun) turn() {
	at := m.pickTurn()
	if at == nil {
		return
	}
	got, err := m.s.Node(m.ctx, at.turn.ID)
	if err != nil || !sameTurn(got, at.turn) {
		m.fatalf("Turn(%s) = %+v, %v; want %+v", at.turn.ID, got, err, at.turn)
	}
}

func (m *modelRun) blob() {
	if at := m.pickTurn(); at != nil {
		m.checkBlob(at.turn.PayloadHash)
	}
}

func (m *modelRun) childrenOf() {
	if at := m.pickTurn(); at != nil {
		m.checkChildren(at.turn.ID)
	}
}

// badInput makes one call that must fail, and checks it failed with the
// right error and changed nothing.
func (m *modelRun) badInput() {
	b := m.pickBranch()
	var lastTurn messages.NodeID
	if t := m.pickTurn(); t != nil {
		lastTurn = t.turn.ID
	}
	unknownB, unknownT := m.newBranchID(), m.unknownTurnID()
	before := m.s.Stats()
	var (
		call    string
		err     error
		touched = b
		want    = []error{persistence.ErrInvalidArgument}
	)
	appendTo := func(br messages.BranchID, req persistence.AppendRequest) {
		call = fmt.Sprintf("Append(%q, %d-byte payload, flags %#x)", br, len(req.Payload), req.Flags)
		_, err = m.s.Append(m.ctx, br, req)
	}
	switch k := m.rng.IntN(20); k {
	case 0:
		appendTo(b, persistence.AppendRequest{Payload: []byte{}})
	case 1:
		appendTo(b, persistence.AppendRequest{})
	case 2:
		appendTo(b, persistence.AppendRequest{Payload: make([]byte, modelMaxPayload+1+m.rng.IntN(1000))})
	case 3:
		appendTo(b, persistence.AppendRequest{Payload: m.pool[1], Flags: persistence.FlagPatched})
	case 4:
		appendTo(unknownB, persistence.AppendRequest{Payload: m.pool[2]})
		touched, want = unknownB, []error{persistence.ErrBranchNotFound}
	case 5:
		appendTo(messages.BranchID{}, persistence.AppendRequest{Payload: m.pool[2]})
		want = []error{persistence.ErrInvalidArgument}
	case 6:
		spec := persistence.BranchSpec{ID: unknownB, At: unknownT}
		call = fmt.Sprintf("CreateBranch(%+v)", spec)
		_, err = m.s.CreateBranch(m.ctx, spec)
		touched, want = unknownB, []error{persistence.ErrNodeNotFound}
	case 7:
		if b.IsZero() {
			return
		}
		spec := persistence.BranchSpec{ID: b, At: lastTurn}
		call = fmt.Sprintf("CreateBranch(%+v) of an existing branch", spec)
		_, err = m.s.CreateBranch(m.ctx, spec)
		want = []error{persistence.ErrBranchExists}
	case 8:
		call = "Head(unknown)"
		_, err = m.s.Head(m.ctx, unknownB)
		want = []error{persistence.ErrBranchNotFound}
	case 9:
		call = "Head(zero)"
		_, err = m.s.Head(m.ctx, messages.BranchID{})
		want = []error{persistence.ErrInvalidArgument}
	case 10:
		call = "Turn(unknown)"
		_, err = m.s.Node(m.ctx, unknownT)
		want = []error{persistence.ErrNodeNotFound}
	case 11:
		call = "Turn(zero)"
		_, err = m.s.Node(m.ctx, messages.NodeID{})
		want = []error{persistence.ErrInvalidArgument}
	case 12:
		call = "Chain(unknown)"
		_, err = m.s.Chain(m.ctx, unknownT)
		want = []error{persistence.ErrNodeNotFound}
	case 13:
		call = "Before(unknown, 5)"
		_, err = m.s.Before(m.ctx, unknownT, 5)
		want = []error{persistence.ErrNodeNotFound}
	case 14:
		call = "Children(unknown)"
		_, err = m.s.Children(m.ctx, unknownT)
		want = []error{persistence.ErrNodeNotFound}
	case 15:
		call = "Last(unknown, 5)"
		_, err = m.s.Last(m.ctx, unknownB, 5)
		want = []error{persistence.ErrBranchNotFound}
	case 16:
		call = "Range(unknown, 0, 5)"
		_, err = m.s.Range(m.ctx, unknownB, 0, 5)
		want = []error{persistence.ErrBranchNotFound}
	case 17:
		if b.IsZero() {
			return
		}
		n := []int{-1, persistence.MaxPageNodes + 1}[m.rng.IntN(2)]
		call = fmt.Sprintf("Last(%s, %d)", b, n)
		_, err = m.s.Last(m.ctx, b, n)
	case 18:
		if b.IsZero() {
			return
		}
		n := []int{-1, persistence.MaxPageNodes + 1}[m.rng.IntN(2)]
		call = fmt.Sprintf("Range(%s, 0, %d)", b, n)
		_, err = m.s.Range(m.ctx, b, 0, n)
	case 19:
		h := persistence.HashOf(m.randomPayload(40))
		call = "Blob(unknown)"
		_, err = m.s.Blob(m.ctx, h)
		want = []error{persistence.ErrBlobNotFound}
		if n, rerr := m.s.BlobRefs(m.ctx, h); rerr != nil || n != 0 {
			m.fatalf("BlobRefs(unknown %s) = %d, %v; want 0, nil", h, n, rerr)
		}
	}
	if !slices.ContainsFunc(want, func(w error) bool { return errors.Is(err, w) }) {
		m.fatalf("%s = %v, want one of %v", call, err, want)
	}
	m.checkUnchanged(before, touched)
}
