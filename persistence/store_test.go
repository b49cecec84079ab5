package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
)

// storeImpls lists every Store implementation; each conformance test body
// runs against all of them.
var storeImpls = []struct {
	name string
	open func(t *testing.T, lim Limits) Store
}{
	{"badger", func(t *testing.T, lim Limits) Store {
		o := TestOptions(t.TempDir())
		o.Limits = lim
		s, err := OpenBadger(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"memory", func(t *testing.T, lim Limits) Store { return NewMemory(lim) }},
	{"postgres", func(t *testing.T, lim Limits) Store {
		o := DefaultPGOptions(pgtest.Start(t))
		o.Limits = lim
		s, err := OpenPostgres(bg, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

// TestMain stops the PostgreSQL server of the postgres store's tests (if
// one started) and removes its directory before the binary exits.
func TestMain(m *testing.M) { pgtest.Main(m) }

func forEachStore(t *testing.T, fn func(t *testing.T, s Store)) {
	for _, impl := range storeImpls {
		t.Run(impl.name, func(t *testing.T) {
			s := impl.open(t, Limits{MaxPayloadBytes: 1 << 20})
			t.Cleanup(func() { s.Close() })
			fn(t, s)
		})
	}
}

var bg = context.Background()

// chain creates a branch and appends n payloads "p0".."p{n-1}".
func chain(t *testing.T, s Store, n int) (Head, []Turn) {
	t.Helper()
	h, err := s.CreateBranch(bg, BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	var ts []Turn
	for i := range n {
		tr, err := s.Append(bg, h.Branch, AppendRequest{Payload: fmt.Appendf(nil, "p%d", i), TypeTag: 7, Codec: 2})
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

func ids(ts []Turn) []messages.TurnID {
	out := make([]messages.TurnID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []Turn) {
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

func TestCreateBranch(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		_, ts := chain(t, s, 3)
		fixed := messages.NewID[messages.BranchID](ts[0].CreatedAt)
		tests := []struct {
			name      string
			spec      BranchSpec
			wantErr   error
			wantTurn  messages.TurnID
			wantDepth uint64
		}{
			{"empty", BranchSpec{}, nil, messages.TurnID{}, 0},
			{"chosen id", BranchSpec{ID: fixed}, nil, messages.TurnID{}, 0},
			{"taken id", BranchSpec{ID: fixed}, ErrBranchExists, messages.TurnID{}, 0},
			{"fork at root", BranchSpec{At: ts[0].ID}, nil, ts[0].ID, 0},
			{"fork at middle", BranchSpec{At: ts[1].ID}, nil, ts[1].ID, 1},
			{"fork at unknown turn", BranchSpec{At: messages.NewID[messages.TurnID](ts[0].CreatedAt)}, ErrTurnNotFound, messages.TurnID{}, 0},
		}
		for _, tt := range tests {
			h, err := s.CreateBranch(bg, tt.spec)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("%s: CreateBranch(%+v) error = %v, want %v", tt.name, tt.spec, err, tt.wantErr)
			}
			if err != nil {
				continue
			}
			if h.Turn != tt.wantTurn || h.Depth != tt.wantDepth || h.Base != tt.wantTurn {
				t.Fatalf("%s: CreateBranch = %+v, want turn %s depth %d", tt.name, h, tt.wantTurn, tt.wantDepth)
			}
			got, err := s.Head(bg, h.Branch)
			if err != nil || got != h {
				t.Fatalf("%s: Head = %+v, %v, want %+v", tt.name, got, err, h)
			}
		}
	})
}

func TestAppend(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		h, ts := chain(t, s, 2)
		empty, _ := s.CreateBranch(bg, BranchSpec{})
		zero := messages.TurnID{}
		wrong := ts[0].ID
		right := ts[1].ID
		big := bytes.Repeat([]byte("x"), 1<<20+1)
		tests := []struct {
			name      string
			branch    messages.BranchID
			req       AppendRequest
			wantErr   error
			wantDepth uint64
			errText   string
		}{
			{"child of head", h.Branch, AppendRequest{Payload: []byte("a")}, nil, 2, ""},
			{"root of empty branch", empty.Branch, AppendRequest{Payload: []byte("r"), ExpectParent: &zero}, nil, 0, ""},
			{"expect parent mismatch", h.Branch, AppendRequest{Payload: []byte("b"), ExpectParent: &wrong}, ErrHeadMismatch, 0, "expected parent"},
			{"expect empty on non-empty", h.Branch, AppendRequest{Payload: []byte("b"), ExpectParent: &zero}, ErrHeadMismatch, 0, ""},
			{"empty payload", h.Branch, AppendRequest{}, ErrInvalidArgument, 0, "payload is empty"},
			{"oversized payload", h.Branch, AppendRequest{Payload: big}, ErrInvalidArgument, 0, "over the limit of 1048576"},
			{"store-owned flags", h.Branch, AppendRequest{Payload: []byte("f"), Flags: FlagPatched}, ErrInvalidArgument, 0, "flags"},
			{"unknown branch", messages.NewID[messages.BranchID](ts[0].CreatedAt), AppendRequest{Payload: []byte("u")}, ErrBranchNotFound, 0, ""},
			{"zero branch", messages.BranchID{}, AppendRequest{Payload: []byte("u")}, ErrInvalidArgument, 0, "branch id is zero"},
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
			if nh.Turn != got.ID || nh.Depth != got.Depth {
				t.Fatalf("%s: head = %+v after appending %s", tt.name, nh, got.ID)
			}
			back, err := s.Turn(bg, got.ID)
			if err != nil || back != got {
				t.Fatalf("%s: Turn = %+v, %v, want %+v", tt.name, back, err, got)
			}
		}
	})
}

func TestReadErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		h, ts := chain(t, s, 2)
		unknownTurn := messages.NewID[messages.TurnID](ts[0].CreatedAt)
		unknownBranch := messages.NewID[messages.BranchID](ts[0].CreatedAt)
		tests := []struct {
			name string
			call func() error
			want error
		}{
			{"Head unknown", func() error { _, err := s.Head(bg, unknownBranch); return err }, ErrBranchNotFound},
			{"Turn unknown", func() error { _, err := s.Turn(bg, unknownTurn); return err }, ErrTurnNotFound},
			{"Turn zero", func() error { _, err := s.Turn(bg, messages.TurnID{}); return err }, ErrInvalidArgument},
			{"Blob unknown", func() error { _, err := s.Blob(bg, HashOf([]byte("nope"))); return err }, ErrBlobNotFound},
			{"Last unknown", func() error { _, err := s.Last(bg, unknownBranch, 3); return err }, ErrBranchNotFound},
			{"Last negative", func() error { _, err := s.Last(bg, h.Branch, -1); return err }, ErrInvalidArgument},
			{"Last too many", func() error { _, err := s.Last(bg, h.Branch, MaxPageTurns+1); return err }, ErrInvalidArgument},
			{"Before unknown", func() error { _, err := s.Before(bg, unknownTurn, 3); return err }, ErrTurnNotFound},
			{"Chain unknown", func() error { _, err := s.Chain(bg, unknownTurn); return err }, ErrTurnNotFound},
			{"Range unknown", func() error { _, err := s.Range(bg, unknownBranch, 0, 3); return err }, ErrBranchNotFound},
			{"Range too many", func() error { _, err := s.Range(bg, h.Branch, 0, MaxPageTurns+1); return err }, ErrInvalidArgument},
			{"Children unknown", func() error { _, err := s.Children(bg, unknownTurn); return err }, ErrTurnNotFound},
			{"Overlays unknown", func() error { _, err := s.Overlays(bg, unknownTurn); return err }, ErrTurnNotFound},
			{"Overlay unknown", func() error {
				_, err := s.PutOverlay(bg, unknownTurn, OverlayRequest{Tombstone: true})
				return err
			}, ErrTurnNotFound},
			{"Overlay empty patch", func() error { _, err := s.PutOverlay(bg, ts[0].ID, OverlayRequest{}); return err }, ErrInvalidArgument},
			{"Overlay tombstone with payload", func() error {
				_, err := s.PutOverlay(bg, ts[0].ID, OverlayRequest{Tombstone: true, Payload: []byte("x")})
				return err
			}, ErrInvalidArgument},
		}
		for _, tt := range tests {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("%s: error = %v, want %v", tt.name, err, tt.want)
			}
		}
		if seq, _ := s.OverlaySeq(bg); seq != 0 {
			t.Errorf("failed overlays advanced OverlaySeq to %d", seq)
		}
	})
}

func TestPaging(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		h, ts := chain(t, s, 10)
		empty, _ := s.CreateBranch(bg, BranchSpec{})
		lastTests := []struct {
			n        int
			want     []Turn
			wantNext messages.TurnID
		}{
			{0, nil, messages.TurnID{}},
			{1, ts[9:], ts[9].ID},
			{4, ts[6:], ts[6].ID},
			{10, ts, messages.TurnID{}},
			{50, ts, messages.TurnID{}},
		}
		for _, tt := range lastTests {
			p, err := s.Last(bg, h.Branch, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			sameIDs(t, fmt.Sprintf("Last(%d)", tt.n), p.Turns, tt.want)
			if p.Next != tt.wantNext {
				t.Fatalf("Last(%d).Next = %s, want %s", tt.n, p.Next, tt.wantNext)
			}
		}
		if p, err := s.Last(bg, empty.Branch, 5); err != nil || len(p.Turns) != 0 || !p.Next.IsZero() {
			t.Fatalf("Last(empty) = %+v, %v", p, err)
		}
		// Paging backwards with the cursor visits every turn once.
		var all []Turn
		p, _ := s.Last(bg, h.Branch, 3)
		all = append(p.Turns, all...)
		for !p.Next.IsZero() {
			if p, _ = s.Before(bg, p.Next, 3); len(p.Turns) == 0 {
				t.Fatal("Before returned an empty page with a cursor")
			}
			all = append(p.Turns, all...)
		}
		sameIDs(t, "paged history", all, ts)

		c, err := s.Chain(bg, ts[6].ID)
		if err != nil {
			t.Fatal(err)
		}
		sameIDs(t, "Chain", c, ts[:7])

		rangeTests := []struct {
			start uint64
			limit int
			want  []Turn
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
			sameIDs(t, fmt.Sprintf("Range(%d, %d)", tt.start, tt.limit), rp.Turns, tt.want)
			if rp.HeadDepth != 9 || rp.Empty {
				t.Fatalf("Range head depth = %d, empty %v", rp.HeadDepth, rp.Empty)
			}
		}
		if rp, _ := s.Range(bg, empty.Branch, 0, 5); !rp.Empty || len(rp.Turns) != 0 {
			t.Fatalf("Range(empty) = %+v", rp)
		}
		for i, tr := range ts {
			b, err := s.Blob(bg, tr.PayloadHash)
			if err != nil || string(b) != fmt.Sprintf("p%d", i) {
				t.Fatalf("Blob(turn %d) = %q, %v", i, b, err)
			}
		}
	})
}

func TestForkIsolationAndChildren(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		h, ts := chain(t, s, 5)
		f, err := s.CreateBranch(bg, BranchSpec{At: ts[2].ID})
		if err != nil {
			t.Fatal(err)
		}
		ft, err := s.Append(bg, f.Branch, AppendRequest{Payload: []byte("fork")})
		if err != nil {
			t.Fatal(err)
		}
		if ft.Parent != ts[2].ID || ft.Depth != 3 {
			t.Fatalf("fork turn = %+v, want parent %s depth 3", ft, ts[2].ID)
		}
		p, _ := s.Last(bg, f.Branch, 10)
		sameIDs(t, "fork history", p.Turns, append(append([]Turn(nil), ts[:3]...), ft))
		p, _ = s.Last(bg, h.Branch, 10)
		sameIDs(t, "original history", p.Turns, ts)
		kids, err := s.Children(bg, ts[2].ID)
		if err != nil || len(kids) != 2 || kids[0] != ts[3].ID || kids[1] != ft.ID {
			t.Fatalf("Children = %v, %v, want [%s %s]", kids, err, ts[3].ID, ft.ID)
		}
		if kids, _ := s.Children(bg, ts[4].ID); len(kids) != 0 {
			t.Fatalf("Children(leaf) = %v", kids)
		}
	})
}

func TestDedup(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		h, _ := s.CreateBranch(bg, BranchSpec{})
		other, _ := s.CreateBranch(bg, BranchSpec{})
		payload := bytes.Repeat([]byte("same bytes "), 1000)
		a, _ := s.Append(bg, h.Branch, AppendRequest{Payload: payload})
		before := s.Stats()
		b, _ := s.Append(bg, other.Branch, AppendRequest{Payload: payload})
		after := s.Stats()
		if a.PayloadHash != b.PayloadHash || a.PayloadHash != HashOf(payload) {
			t.Fatal("identical payloads got different hashes")
		}
		if after.BlobWrites != before.BlobWrites || after.BlobDedups != before.BlobDedups+1 {
			t.Fatalf("second put of an existing hash wrote a blob: %+v -> %+v", before, after)
		}
		if n, _ := s.BlobRefs(bg, a.PayloadHash); n != 2 {
			t.Fatalf("BlobRefs = %d, want 2", n)
		}
	})
}

func TestOverlays(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		_, ts := chain(t, s, 3)
		target := ts[1]
		shared := ts[1].PayloadHash // p1 is referenced once so far
		if _, err := s.Append(bg, mustFork(t, s, ts[2].ID), AppendRequest{Payload: []byte("p1")}); err != nil {
			t.Fatal(err)
		}
		patch, err := s.PutOverlay(bg, target.ID, OverlayRequest{Payload: []byte("redacted")})
		if err != nil {
			t.Fatal(err)
		}
		tomb, err := s.PutOverlay(bg, target.ID, OverlayRequest{Tombstone: true, Purge: false})
		if err != nil {
			t.Fatal(err)
		}
		if patch.Seq == 0 || tomb.Seq <= patch.Seq {
			t.Fatalf("overlay seqs %d, %d are not increasing", patch.Seq, tomb.Seq)
		}
		views := []struct {
			name     string
			r        Reader
			wantHash Hash
			wantFlag uint32
		}{
			{"latest", s, Hash{}, FlagTombstoned},
			{"as of 0", s.AsOf(0), shared, 0},
			{"as of patch", s.AsOf(patch.Seq), HashOf([]byte("redacted")), FlagPatched},
			{"as of tombstone", s.AsOf(tomb.Seq), Hash{}, FlagTombstoned},
		}
		for _, v := range views {
			got, err := v.r.Turn(bg, target.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.PayloadHash != v.wantHash || got.Flags&(FlagPatched|FlagTombstoned) != v.wantFlag {
				t.Fatalf("%s: Turn = hash %s flags %#x, want %s %#x", v.name, got.PayloadHash, got.Flags, v.wantHash, v.wantFlag)
			}
			p, _ := v.r.Last(bg, mustHead(t, s, ts), 3)
			if p.Turns[1].PayloadHash != v.wantHash {
				t.Fatalf("%s: Last does not apply the overlay", v.name)
			}
		}
		// A patch with purge releases the payload it supersedes: the
		// tombstone superseded nothing, so patch again, then purge.
		if _, err := s.PutOverlay(bg, target.ID, OverlayRequest{Payload: []byte("v2")}); err != nil {
			t.Fatal(err)
		}
		pur, err := s.PutOverlay(bg, target.ID, OverlayRequest{Payload: []byte("v3"), Purge: true})
		if err != nil {
			t.Fatal(err)
		}
		if pur.Purged != HashOf([]byte("v2")) {
			t.Fatalf("purge released %s, want the v2 payload", pur.Purged)
		}
		if n, _ := s.BlobRefs(bg, HashOf([]byte("v2"))); n != 0 {
			t.Fatalf("BlobRefs(v2) = %d after purge, want 0", n)
		}
		if _, err := s.Blob(bg, HashOf([]byte("v2"))); !errors.Is(err, ErrBlobNotFound) {
			t.Fatalf("Blob(purged) error = %v, want ErrBlobNotFound", err)
		}
		if n, _ := s.BlobRefs(bg, HashOf([]byte("v3"))); n != 1 {
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
	})
}

func mustFork(t *testing.T, s Store, at messages.TurnID) messages.BranchID {
	t.Helper()
	h, err := s.CreateBranch(bg, BranchSpec{At: at})
	if err != nil {
		t.Fatal(err)
	}
	return h.Branch
}

// mustHead returns a branch whose head is the last of ts.
func mustHead(t *testing.T, s Store, ts []Turn) messages.BranchID {
	return mustFork(t, s, ts[len(ts)-1].ID)
}

func TestClosed(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		h, ts := chain(t, s, 1)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(bg, h.Branch, AppendRequest{Payload: []byte("x")}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Append after Close = %v, want ErrClosed", err)
		}
		if _, err := s.Turn(bg, ts[0].ID); !errors.Is(err, ErrClosed) {
			t.Fatalf("Turn after Close = %v, want ErrClosed", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
	})
}

func TestBadgerReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	h, ts := chain(t, s, 40)
	ov, err := s.PutOverlay(bg, ts[3].ID, OverlayRequest{Payload: []byte("patched")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenBadger(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Head(bg, h.Branch)
	if err != nil || got != h {
		t.Fatalf("Head after reopen = %+v, %v, want %+v", got, err, h)
	}
	rp, _ := s.Range(bg, h.Branch, 30, 10)
	sameIDs(t, "Range after reopen", rp.Turns, ts[30:])
	if tr, _ := s.Turn(bg, ts[3].ID); tr.OverlaySeq != ov.Seq {
		t.Fatalf("overlay lost on reopen: %+v", tr)
	}
	next, err := s.PutOverlay(bg, ts[4].ID, OverlayRequest{Tombstone: true})
	if err != nil || next.Seq != ov.Seq+1 {
		t.Fatalf("overlay seq after reopen = %d, %v, want %d", next.Seq, err, ov.Seq+1)
	}
	if _, err := s.Append(bg, h.Branch, AppendRequest{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
}

func TestBadgerCorruptBlob(t *testing.T) {
	o := TestOptions(t.TempDir())
	o.BlobCacheBytes = 0 // read from disk, not from what the append cached
	s, err := openBadger(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, ts := chain(t, s, 1)
	h := ts[0].PayloadHash
	// Flip one bit of the stored record behind the store's back.
	rec := encodeBlob([]byte("p0"), CompressNone)
	rec[len(rec)-5] ^= 0x20
	txn := s.db.NewTransactionAt(s.lastTs, true)
	if err := txn.Set(blobKey(h), rec); err != nil {
		t.Fatal(err)
	}
	if err := txn.CommitAt(s.lastTs+1, nil); err != nil {
		t.Fatal(err)
	}
	s.lastTs++
	s.readTs.Store(s.lastTs)
	_, err = s.Blob(bg, h)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), h.String()) {
		t.Fatalf("Blob(corrupt) error = %v, want ErrCorrupt naming %s", err, h)
	}
}

func TestConcurrentAppendsShareSyncs(t *testing.T) {
	s, err := OpenBadger(TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const branches, each = 32, 20
	errs := make(chan error, branches)
	for b := range branches {
		go func() {
			h, err := s.CreateBranch(bg, BranchSpec{})
			for i := 0; err == nil && i < each; i++ {
				_, err = s.Append(bg, h.Branch, AppendRequest{Payload: fmt.Appendf(nil, "%d/%d", b, i)})
			}
			errs <- err
		}()
	}
	for range branches {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Appends != branches*each {
		t.Fatalf("Appends = %d, want %d", st.Appends, branches*each)
	}
	if st.Syncs >= st.Appends+branches {
		t.Fatalf("%d syncs for %d writes: no group commit happened", st.Syncs, st.Appends+branches)
	}
	var timed uint64
	for _, n := range st.SyncTimes {
		timed += n
	}
	if timed != st.Syncs {
		t.Errorf("SyncTimes %v hold %d syncs, want Syncs = %d", st.SyncTimes, timed, st.Syncs)
	}
}

func TestSyncTimeBuckets(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {249 * time.Microsecond, 0}, {250 * time.Microsecond, 1}, {3 * time.Millisecond, 4},
		{4 * time.Millisecond, 5}, {64*time.Millisecond - 1, 8}, {64 * time.Millisecond, 9}, {time.Hour, 9},
	} {
		if got := SyncTimeBucket(tc.d); got != tc.want {
			t.Errorf("SyncTimeBucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	times := [len(SyncTimeBounds) + 1]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := SyncsOver(times, 4*time.Millisecond); got != 6+7+8+9+10 {
		t.Errorf("SyncsOver(4ms) = %d, want %d", got, 6+7+8+9+10)
	}
	if got := SyncsOver(times, 0); got != 55 {
		t.Errorf("SyncsOver(0) = %d, want 55", got)
	}
}

func TestSkipPointerHops(t *testing.T) {
	// From every depth d to every target, the walk by nextHop lands exactly
	// on the target within 2·log2(d)+2 hops.
	for d := uint64(1); d <= 2048; d++ {
		limit := 2*bits.Len64(d) + 2
		for target := uint64(0); target <= d; target++ {
			at, hops := d, 0
			for at > target {
				k := nextHop(at, target)
				if k > skipLevels(at) {
					t.Fatalf("nextHop(%d, %d) = %d beyond the %d levels stored", at, target, k, skipLevels(at))
				}
				at -= 1 << k
				hops++
			}
			if at != target || hops > limit {
				t.Fatalf("walk %d -> %d ended at %d after %d hops (limit %d)", d, target, at, hops, limit)
			}
		}
	}
}

func TestDeepRangeUsesSkips(t *testing.T) {
	s, err := openBadger(TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, ts := chain(t, s, 1000)
	for _, start := range []uint64{0, 1, 255, 256, 511, 700, 999} {
		rp, err := s.Range(bg, h.Branch, start, 7)
		if err != nil {
			t.Fatal(err)
		}
		sameIDs(t, fmt.Sprintf("Range(%d, 7)", start), rp.Turns, ts[start:min(int(start)+7, len(ts))])
	}
}
