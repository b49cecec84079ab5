// Package storetest is the conformance kit of persistence.Store: one
// test body that every engine runs (Badger, PostgreSQL, memory), as the
// NATS server does for its file and memory stores. An engine's tests call
// Run for the conformance tests and RunModel for the property test
// against a naive model.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Engine is one Store implementation under test.
type Engine struct {
	Name string
	// Open opens the store kept in dir, creating it if needed, with lim
	// and durability d (which an engine without durability modes
	// ignores).
	Open func(t *testing.T, dir string, d persistence.Durability, lim persistence.Limits) persistence.Store
	// Durable says whether a closed store reopens from dir with its
	// data, and whether its durability mode matters.
	Durable bool
	// OneRun: RunModel runs a single seed, in DurabilitySync only (for a
	// store with no durability modes whose runs are slow: PostgreSQL).
	OneRun bool
}

// conformance lists the conformance tests, each run against every engine.
var conformance = []struct {
	name string
	fn   func(t *testing.T, s persistence.Store)
}{
	{"CreateBranch", testCreateBranch},
	{"Append", testAppend},
	{"ReadErrors", testReadErrors},
	{"Paging", testPaging},
	{"ForkIsolationAndChildren", testForkIsolationAndChildren},
	{"Dedup", testDedup},
	{"Overlays", testOverlays},
	{"Closed", testClosed},
}

// Run runs every conformance test against each engine, as subtests named
// test/engine, on a fresh store each with a payload limit of 1 MiB.
func Run(t *testing.T, engines ...Engine) {
	for _, c := range conformance {
		t.Run(c.name, func(t *testing.T) {
			for _, e := range engines {
				t.Run(e.Name, func(t *testing.T) {
					s := e.Open(t, t.TempDir(), persistence.DurabilitySync, persistence.Limits{MaxPayloadBytes: 1 << 20})
					t.Cleanup(func() { s.Close() })
					c.fn(t, s)
				})
			}
		})
	}
}

var bg = context.Background()

func testCreateBranch(t *testing.T, s persistence.Store) {
	_, ts := Chain(t, s, 3)
	fixed := messages.NewID[messages.BranchID](ts[0].CreatedAt)
	tests := []struct {
		name      string
		spec      persistence.BranchSpec
		wantErr   error
		wantTurn  messages.NodeID
		wantDepth uint64
	}{
		{"empty", persistence.BranchSpec{}, nil, messages.NodeID{}, 0},
		{"chosen id", persistence.BranchSpec{ID: fixed}, nil, messages.NodeID{}, 0},
		{"taken id", persistence.BranchSpec{ID: fixed}, persistence.ErrBranchExists, messages.NodeID{}, 0},
		{"fork at root", persistence.BranchSpec{At: ts[0].ID}, nil, ts[0].ID, 0},
		{"fork at middle", persistence.BranchSpec{At: ts[1].ID}, nil, ts[1].ID, 1},
		{"fork at unknown turn", persistence.BranchSpec{At: messages.NewID[messages.NodeID](ts[0].CreatedAt)}, persistence.ErrNodeNotFound, messages.NodeID{}, 0},
	}
	for _, tt := range tests {
		h, err := s.CreateBranch(bg, tt.spec)
		if !errors.Is(err, tt.wantErr) {
			t.Fatalf("%s: CreateBranch(%+v) error = %v, want %v", tt.name, tt.spec, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		if h.Node != tt.wantTurn || h.Depth != tt.wantDepth || h.Base != tt.wantTurn {
			t.Fatalf("%s: CreateBranch = %+v, want turn %s depth %d", tt.name, h, tt.wantTurn, tt.wantDepth)
		}
		got, err := s.Head(bg, h.Branch)
		if err != nil || got != h {
			t.Fatalf("%s: Head = %+v, %v, want %+v", tt.name, got, err, h)
		}
	}
}

func testAppend(t *testing.T, s persistence.Store) {
	h, ts := Chain(t, s, 2)
	empty, _ := s.CreateBranch(bg, persistence.BranchSpec{})
	zero := messages.NodeID{}
	wrong := ts[0].ID
	right := ts[1].ID
	big := bytes.Repeat([]byte("x"), 1<<20+1)
	tests := []struct {
		name      string
		branch    messages.BranchID
		req       persistence.AppendRequest
		wantErr   error
		wantDepth uint64
		errText   string
	}{
		{"child of head", h.Branch, persistence.AppendRequest{Payload: []byte("a")}, nil, 2, ""},
		{"root of empty branch", empty.Branch, persistence.AppendRequest{Payload: []byte("r"), ExpectParent: &zero}, nil, 0, ""},
		{"expect parent mismatch", h.Branch, persistence.AppendRequest{Payload: []byte("b"), ExpectParent: &wrong}, persistence.ErrHeadMismatch, 0, "expected parent"},
		{"expect empty on non-empty", h.Branch, persistence.AppendRequest{Payload: []byte("b"), ExpectParent: &zero}, persistence.ErrHeadMismatch, 0, ""},
		{"empty payload", h.Branch, persistence.AppendRequest{}, persistence.ErrInvalidArgument, 0, "payload is empty"},
		{"oversized payload", h.Branch, persistence.AppendRequest{Payload: big}, persistence.ErrInvalidArgument, 0, "over the limit of 1048576"},
		{"store-owned flags", h.Branch, persistence.AppendRequest{Payload: []byte("f"), Flags: persistence.FlagPatched}, persistence.ErrInvalidArgument, 0, "flags"},
		{"unknown branch", messages.NewID[messages.BranchID](ts[0].CreatedAt), persistence.AppendRequest{Payload: []byte("u")}, persistence.ErrBranchNotFound, 0, ""},
		{"zero branch", messages.BranchID{}, persistence.AppendRequest{Payload: []byte("u")}, persistence.ErrInvalidArgument, 0, "branch id is zero"},
	}
	for _, tt := range tests {
		before := s.Stats()
		headBefore, _ := s.Head(bg, h.Branch)
		got, err := s.Append(bg, tt.branch, tt.req)
		if !errors.Is(err, tt.wantErr) {
			t.Fatalf("%s: Append error = %v, want %v", tt.name, err, tt.wantErr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), tt.errText) {
				t.Fatalf("%s: error %q does not say %q", tt.name, err, tt.errText)
			}
			if after := s.Stats(); after.Appends != before.Appends || after.BlobWrites != before.BlobWrites {
				t.Fatalf("%s: failed Append changed the store: %+v -> %+v", tt.name, before, after)
			}
			if hh, _ := s.Head(bg, h.Branch); hh != headBefore {
				t.Fatalf("%s: failed Append moved the head", tt.name)
			}
			continue
		}
		if got.Depth != tt.wantDepth {
			t.Fatalf("%s: depth = %d, want %d", tt.name, got.Depth, tt.wantDepth)
		}
		if tt.branch == h.Branch && got.Parent != right {
			t.Fatalf("%s: parent = %s, want %s", tt.name, got.Parent, right)
		}
		nh, _ := s.Head(bg, tt.branch)
		if nh.Node != got.ID || nh.Depth != got.Depth {
			t.Fatalf("%s: head = %+v after appending %s", tt.name, nh, got.ID)
		}
		back, err := s.Node(bg, got.ID)
		if err != nil || back != got {
			t.Fatalf("%s: Turn = %+v, %v, want %+v", tt.name, back, err, got)
		}
	}
}

func testReadErrors(t *testing.T, s persistence.Store) {
	h, ts := Chain(t, s, 2)
	unknownTurn := messages.NewID[messages.NodeID](ts[0].CreatedAt)
	unknownBranch := messages.NewID[messages.BranchID](ts[0].CreatedAt)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Head unknown", func() error { _, err := s.Head(bg, unknownBranch); return err }, persistence.ErrBranchNotFound},
		{"Turn unknown", func() error { _, err := s.Node(bg, unknownTurn); return err }, persistence.ErrNodeNotFound},
		{"Turn zero", func() error { _, err := s.Node(bg, messages.NodeID{}); return err }, persistence.ErrInvalidArgument},
		{"Blob unknown", func() error { _, err := s.Blob(bg, persistence.HashOf([]byte("nope"))); return err }, persistence.ErrBlobNotFound},
		{"Last unknown", func() error { _, err := s.Last(bg, unknownBranch, 3); return err }, persistence.ErrBranchNotFound},
		{"Last negative", func() error { _, err := s.Last(bg, h.Branch, -1); return err }, persistence.ErrInvalidArgument},
		{"Last too many", func() error { _, err := s.Last(bg, h.Branch, persistence.MaxPageNodes+1); return err }, persistence.ErrInvalidArgument},
		{"Before unknown", func() error { _, err := s.Before(bg, unknownTurn, 3); return err }, persistence.ErrNodeNotFound},
		{"Chain unknown", func() error { _, err := s.Chain(bg, unknownTurn); return err }, persistence.ErrNodeNotFound},
		{"Range unknown", func() error { _, err := s.Range(bg, unknownBranch, 0, 3); return err }, persistence.ErrBranchNotFound},
		{"Range too many", func() error { _, err := s.Range(bg, h.Branch, 0, persistence.MaxPageNodes+1); return err }, persistence.ErrInvalidArgument},
		{"Children unknown", func() error { _, err := s.Children(bg, unknownTurn); return err }, persistence.ErrNodeNotFound},
		{"Overlays unknown", func() error { _, err := s.Overlays(bg, unknownTurn); return err }, persistence.ErrNodeNotFound},
		{"Overlay unknown", func() error {
			_, err := s.PutOverlay(bg, unknownTurn, persistence.OverlayRequest{Tombstone: true})
			return err
		}, persistence.ErrNodeNotFound},
		{"Overlay empty patch", func() error { _, err := s.PutOverlay(bg, ts[0].ID, persistence.OverlayRequest{}); return err }, persistence.ErrInvalidArgument},
		{"Overlay tombstone with payload", func() error {
			_, err := s.PutOverlay(bg, ts[0].ID, persistence.OverlayRequest{Tombstone: true, Payload: []byte("x")})
			return err
		}, persistence.ErrInvalidArgument},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, tt.want)
		}
	}
	if seq, _ := s.OverlaySeq(bg); seq != 0 {
		t.Errorf("failed overlays advanced OverlaySeq to %d", seq)
	}
}

func testPaging(t *testing.T, s persistence.Store) {
	h, ts := Chain(t, s, 10)
	empty, _ := s.CreateBranch(bg, persistence.BranchSpec{})
	lastTests := []struct {
		n        int
		want     []persistence.Node
		wantNext messages.NodeID
	}{
		{0, nil, messages.NodeID{}},
		{1, ts[9:], ts[9].ID},
		{4, ts[6:], ts[6].ID},
		{10, ts, messages.NodeID{}},
		{50, ts, messages.NodeID{}},
	}
	for _, tt := range lastTests {
		p, err := s.Last(bg, h.Branch, tt.n)
		if err != nil {
			t.Fatal(err)
		}
		SameIDs(t, fmt.Sprintf("Last(%d)", tt.n), p.Nodes, tt.want)
		if p.Next != tt.wantNext {
			t.Fatalf("Last(%d).Next = %s, want %s", tt.n, p.Next, tt.wantNext)
		}
	}
	if p, err := s.Last(bg, empty.Branch, 5); err != nil || len(p.Nodes) != 0 || !p.Next.IsZero() {
		t.Fatalf("Last(empty) = %+v, %v", p, err)
	}
	// Paging backwards with the cursor visits every turn once.
	var all []persistence.Node
	p, _ := s.Last(bg, h.Branch, 3)
	all = append(p.Nodes, all...)
	for !p.Next.IsZero() {
		if p, _ = s.Before(bg, p.Next, 3); len(p.Nodes) == 0 {
			t.Fatal("Before returned an empty page with a cursor")
		}
		all = append(p.Nodes, all...)
	}
	SameIDs(t, "paged history", all, ts)

	c, err := s.Chain(bg, ts[6].ID)
	if err != nil {
		t.Fatal(err)
	}
	SameIDs(t, "Chain", c, ts[:7])

	rangeTests := []struct {
		start uint64
		limit int
		want  []persistence.Node
	}{
		{0, 3, ts[:3]},
		{4, 3, ts[4:7]},
		{8, 5, ts[8:]},
		{9, 1, ts[9:]},
		{10, 5, nil},
		{3, 0, nil},
		{0, 100, ts},
	}
	for _, tt := range rangeTests {
		rp, err := s.Range(bg, h.Branch, tt.start, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		SameIDs(t, fmt.Sprintf("Range(%d, %d)", tt.start, tt.limit), rp.Nodes, tt.want)
		if rp.HeadDepth != 9 || rp.Empty {
			t.Fatalf("Range head depth = %d, empty %v", rp.HeadDepth, rp.Empty)
		}
	}
	if rp, _ := s.Range(bg, empty.Branch, 0, 5); !rp.Empty || len(rp.Nodes) != 0 {
		t.Fatalf("Range(empty) = %+v", rp)
	}
	for i, tr := range ts {
		b, err := s.Blob(bg, tr.PayloadHash)
		if err != nil || string(b) != fmt.Sprintf("p%d", i) {
			t.Fatalf("Blob(turn %d) = %q, %v", i, b, err)
		}
	}
}

func testForkIsolationAndChildren(t *testing.T, s persistence.Store) {
	h, ts := Chain(t, s, 5)
	f, err := s.CreateBranch(bg, persistence.BranchSpec{At: ts[2].ID})
	if err != nil {
		t.Fatal(err)
	}
	ft, err := s.Append(bg, f.Branch, persistence.AppendRequest{Payload: []byte("fork")})
	if err != nil {
		t.Fatal(err)
	}
	if ft.Parent != ts[2].ID || ft.Depth != 3 {
		t.Fatalf("fork turn = %+v, want parent %s depth 3", ft, ts[2].ID)
	}
	p, _ := s.Last(bg, f.Branch, 10)
	SameIDs(t, "fork history", p.Nodes, append(append([]persistence.Node(nil), ts[:3]...), ft))
	p, _ = s.Last(bg, h.Branch, 10)
	SameIDs(t, "original history", p.Nodes, ts)
	kids, err := s.Children(bg, ts[2].ID)
	if err != nil || len(kids) != 2 || kids[0] != ts[3].ID || kids[1] != ft.ID {
		t.Fatalf("Children = %v, %v, want [%s %s]", kids, err, ts[3].ID, ft.ID)
	}
	if kids, _ := s.Children(bg, ts[4].ID); len(kids) != 0 {
		t.Fatalf("Children(leaf) = %v", kids)
	}
}

func testDedup(t *testing.T, s persistence.Store) {
	h, _ := s.CreateBranch(bg, persistence.BranchSpec{})
	other, _ := s.CreateBranch(bg, persistence.BranchSpec{})
	payload := bytes.Repeat([]byte("same bytes "), 1000)
	a, _ := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: payload})
	before := s.Stats()
	b, _ := s.Append(bg, other.Branch, persistence.AppendRequest{Payload: payload})
	after := s.Stats()
	if a.PayloadHash != b.PayloadHash || a.PayloadHash != persistence.HashOf(payload) {
		t.Fatal("identical payloads got different hashes")
	}
	if after.BlobWrites != before.BlobWrites || after.BlobDedups != before.BlobDedups+1 {
		t.Fatalf("second put of an existing hash wrote a blob: %+v -> %+v", before, after)
	}
	if n, _ := s.BlobRefs(bg, a.PayloadHash); n != 2 {
		t.Fatalf("BlobRefs = %d, want 2", n)
	}
}

func testOverlays(t *testing.T, s persistence.Store) {
	_, ts := Chain(t, s, 3)
	target := ts[1]
	shared := ts[1].PayloadHash // p1 is referenced once so far
	if _, err := s.Append(bg, mustFork(t, s, ts[2].ID), persistence.AppendRequest{Payload: []byte("p1")}); err != nil {
		t.Fatal(err)
	}
	patch, err := s.PutOverlay(bg, target.ID, persistence.OverlayRequest{Payload: []byte("redacted")})
	if err != nil {
		t.Fatal(err)
	}
	tomb, err := s.PutOverlay(bg, target.ID, persistence.OverlayRequest{Tombstone: true, Purge: false})
	if err != nil {
		t.Fatal(err)
	}
	if patch.Seq == 0 || tomb.Seq <= patch.Seq {
		t.Fatalf("overlay seqs %d, %d are not increasing", patch.Seq, tomb.Seq)
	}
	views := []struct {
		name     string
		r        persistence.Reader
		wantHash persistence.Hash
		wantFlag uint32
	}{
		{"latest", s, persistence.Hash{}, persistence.FlagTombstoned},
		{"as of 0", s.AsOf(0), shared, 0},
		{"as of patch", s.AsOf(patch.Seq), persistence.HashOf([]byte("redacted")), persistence.FlagPatched},
		{"as of tombstone", s.AsOf(tomb.Seq), persistence.Hash{}, persistence.FlagTombstoned},
	}
	for _, v := range views {
		got, err := v.r.Node(bg, target.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.PayloadHash != v.wantHash || got.Flags&(persistence.FlagPatched|persistence.FlagTombstoned) != v.wantFlag {
			t.Fatalf("%s: Turn = hash %s flags %#x, want %s %#x", v.name, got.PayloadHash, got.Flags, v.wantHash, v.wantFlag)
		}
		p, _ := v.r.Last(bg, mustHead(t, s, ts), 3)
		if p.Nodes[1].PayloadHash != v.wantHash {
			t.Fatalf("%s: Last does not apply the overlay", v.name)
		}
	}
	// A patch with purge releases the payload it supersedes: the
	// tombstone superseded nothing, so patch again, then purge.
	if _, err := s.PutOverlay(bg, target.ID, persistence.OverlayRequest{Payload: []byte("v2")}); err != nil {
		t.Fatal(err)
	}
	pur, err := s.PutOverlay(bg, target.ID, persistence.OverlayRequest{Payload: []byte("v3"), Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if pur.Purged != persistence.HashOf([]byte("v2")) {
		t.Fatalf("purge released %s, want the v2 payload", pur.Purged)
	}
	if n, _ := s.BlobRefs(bg, persistence.HashOf([]byte("v2"))); n != 0 {
		t.Fatalf("BlobRefs(v2) = %d after purge, want 0", n)
	}
	if _, err := s.Blob(bg, persistence.HashOf([]byte("v2"))); !errors.Is(err, persistence.ErrBlobNotFound) {
		t.Fatalf("Blob(purged) error = %v, want ErrBlobNotFound", err)
	}
	if n, _ := s.BlobRefs(bg, persistence.HashOf([]byte("v3"))); n != 1 {
		t.Fatalf("BlobRefs(v3) = %d, want 1", n)
	}
	// The base payload p1 is still referenced by the base turn and the fork.
	if n, _ := s.BlobRefs(bg, shared); n != 2 {
		t.Fatalf("BlobRefs(p1) = %d, want 2", n)
	}
	os, err := s.Overlays(bg, target.ID)
	if err != nil || len(os) != 4 {
		t.Fatalf("Overlays = %d, %v, want 4", len(os), err)
	}
	if seq, _ := s.OverlaySeq(bg); seq != pur.Seq {
		t.Fatalf("OverlaySeq = %d, want %d", seq, pur.Seq)
	}
}

func testClosed(t *testing.T, s persistence.Store) {
	h, ts := Chain(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: []byte("x")}); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Node(bg, ts[0].ID); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("Turn after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// Chain creates a branch of s and appends n payloads "p0".."p{n-1}";
// it returns the branch's head and the turns, oldest first.
func Chain(t *testing.T, s persistence.Store, n int) (persistence.Head, []persistence.Node) {
	t.Helper()
	h, err := s.CreateBranch(bg, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	var ts []persistence.Node
	for i := range n {
		tr, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "p%d", i), TypeTag: 7, Codec: 2})
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tr)
	}
	h, err = s.Head(bg, h.Branch)
	if err != nil {
		t.Fatal(err)
	}
	return h, ts
}

func ids(ts []persistence.Node) []messages.NodeID {
	out := make([]messages.NodeID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// SameIDs fails t unless got and want are the same turns in the same
// order, naming what.
func SameIDs(t *testing.T, what string, got, want []persistence.Node) {
	t.Helper()
	g, w := ids(got), ids(want)
	if len(g) != len(w) {
		t.Fatalf("%s: got %d turns, want %d", what, len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("%s: turn %d = %s (depth %d), want %s", what, i, g[i], got[i].Depth, w[i])
		}
	}
}

func mustFork(t *testing.T, s persistence.Store, at messages.NodeID) messages.BranchID {
	t.Helper()
	h, err := s.CreateBranch(bg, persistence.BranchSpec{At: at})
	if err != nil {
		t.Fatal(err)
	}
	return h.Branch
}

// mustHead returns a branch whose head is the last of ts.
func mustHead(t *testing.T, s persistence.Store, ts []persistence.Node) messages.BranchID {
	return mustFork(t, s, ts[len(ts)-1].ID)
}
