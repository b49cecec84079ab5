package frame_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	client "github.com/contextinfinity/ctxinf/client/frame"
	"github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/persistence/memstore"
)

func openDB(t testing.TB) persistence.Database {
	t.Helper()
	db, err := badgerdb.Open(badgerdb.TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func startServer(t testing.TB, store persistence.Store, opts frame.Options) *frame.Server {
	t.Helper()
	s, err := frame.ListenAndServe(context.Background(), "127.0.0.1:0", store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t testing.TB, s *frame.Server, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.DialOptions(context.Background(), s.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func turnsEqual(a, b persistence.Node) bool {
	at, bt := a, b
	at.CreatedAt, bt.CreatedAt = time.Time{}, time.Time{}
	return at == bt && a.CreatedAt.Equal(b.CreatedAt)
}

func headsEqual(a, b persistence.Head) bool {
	at, bt := a, b
	at.CreatedAt, bt.CreatedAt = time.Time{}, time.Time{}
	return at == bt && a.CreatedAt.Equal(b.CreatedAt)
}

func checkTurns(t *testing.T, what string, got, want []persistence.Node) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d turns, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !turnsEqual(got[i], want[i]) {
			t.Fatalf("%s: turn %d = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

func wantCode(t *testing.T, what string, err error, code frame.Code, sentinel error) *frame.Error {
	t.Helper()
	var fe *frame.Error
	if !errors.As(err, &fe) {
		t.Fatalf("%s: err = %v, want a *frame.Error with code %s", what, err, code)
	}
	if fe.Code != code {
		t.Fatalf("%s: code = %s (%v), want %s", what, fe.Code, fe, code)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("%s: errors.Is(%v, %v) = false", what, err, sentinel)
	}
	return fe
}

// TestRoundTrips runs every request type through the client and compares
// each answer with what the store itself says.
func TestRoundTrips(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	srv := startServer(t, db, frame.Options{})
	c := dial(t, srv, client.Options{Name: "test"})

	info := c.Server()
	// Without a token the client speaks version 1, which every server reads.
	if info.Version != 1 || info.Name != frame.ServerName ||
		int(info.MaxFrame) != srv.EffectiveMaxFrame() || info.MaxPayload != persistence.DefaultMaxPayloadBytes ||
		info.MaxPage != persistence.MaxPageNodes {
		t.Fatalf("Server() = %+v", info)
	}
	if want := persistence.DefaultMaxPayloadBytes + frame.FrameOverhead; srv.EffectiveMaxFrame() != want {
		t.Fatalf("EffectiveMaxFrame() = %d, want the store's payload limit + overhead %d", srv.EffectiveMaxFrame(), want)
	}

	h, err := c.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Branch.IsZero() || !h.Empty() {
		t.Fatalf("CreateBranch = %+v, want a new empty branch", h)
	}
	got, err := c.Head(ctx, h.Branch)
	if err != nil || !headsEqual(got, h) {
		t.Fatalf("Head = %+v, %v; want %+v", got, err, h)
	}

	var turns []persistence.Node
	for i := range 7 {
		tr, err := c.Append(ctx, h.Branch, persistence.AppendRequest{
			Payload: fmt.Appendf(nil, "turn %d %s", i, bytes.Repeat([]byte("x"), i*100)),
			TypeTag: uint64(100 + i), Codec: 3, Flags: 0x5,
		})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := db.Node(ctx, tr.ID)
		if err != nil || !turnsEqual(tr, stored) {
			t.Fatalf("Append = %+v; the store has %+v, %v", tr, stored, err)
		}
		if tr.Depth != uint64(i) || tr.TypeTag != uint64(100+i) || tr.Codec != 3 || tr.Flags != 5 {
			t.Fatalf("Append(%d) = %+v", i, tr)
		}
		turns = append(turns, tr)
	}
	h, err = c.Head(ctx, h.Branch)
	if err != nil || h.Node != turns[6].ID || h.Depth != 6 {
		t.Fatalf("Head after appends = %+v, %v; want turn %s at depth 6", h, err, turns[6].ID)
	}

	last, err := c.GetLast(ctx, h.Branch, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkTurns(t, "GetLast(3)", last.Nodes, turns[4:])
	if last.Next != turns[4].ID {
		t.Fatalf("GetLast(3).Next = %s, want %s", last.Next, turns[4].ID)
	}
	older, err := c.GetBefore(ctx, last.Next, 10)
	if err != nil {
		t.Fatal(err)
	}
	checkTurns(t, "GetBefore", older.Nodes, turns[:4])
	if !older.Next.IsZero() {
		t.Fatalf("GetBefore reached the root but Next = %s", older.Next)
	}
	rp, err := c.GetRangeByDepth(ctx, h.Branch, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkTurns(t, "GetRangeByDepth(2, 3)", rp.Nodes, turns[2:5])
	if rp.HeadDepth != 6 || rp.Empty {
		t.Fatalf("GetRangeByDepth = head depth %d, empty %v; want 6, false", rp.HeadDepth, rp.Empty)
	}
	for i, tr := range turns {
		blob, err := c.GetBlob(ctx, tr.PayloadHash)
		want, _ := db.Blob(ctx, tr.PayloadHash)
		if err != nil || !bytes.Equal(blob, want) || persistence.HashOf(blob) != tr.PayloadHash {
			t.Fatalf("GetBlob(turn %d) = %q, %v; want %q", i, blob, err, want)
		}
	}

	// CTX_CREATE at a turn, with the caller's id.
	id := messages.NewID[messages.BranchID](time.Now())
	based, err := c.CreateBranch(ctx, persistence.BranchSpec{ID: id, At: turns[2].ID})
	if err != nil || based.Branch != id || based.Node != turns[2].ID || based.Depth != 2 || based.Base != turns[2].ID {
		t.Fatalf("CreateBranch(at turn 2) = %+v, %v", based, err)
	}
	_, err = c.CreateBranch(ctx, persistence.BranchSpec{ID: id})
	wantCode(t, "CreateBranch(taken id)", err, client.CodeBranchExists, persistence.ErrBranchExists)

	// CTX_FORK at a turn and from another branch's head.
	f1, err := c.Fork(ctx, client.ForkSpec{At: turns[3].ID})
	if err != nil || f1.Node != turns[3].ID || f1.Depth != 3 {
		t.Fatalf("Fork(at turn 3) = %+v, %v", f1, err)
	}
	f2, err := c.Fork(ctx, client.ForkSpec{Source: h.Branch})
	if err != nil || f2.Node != turns[6].ID || f2.Branch == h.Branch {
		t.Fatalf("Fork(source) = %+v, %v; want a new branch at %s", f2, err, turns[6].ID)
	}
	stored, err := db.Head(ctx, f2.Branch)
	if err != nil || !headsEqual(stored, f2) {
		t.Fatalf("the store has fork %+v, %v; the client got %+v", stored, err, f2)
	}
	_, err = c.Fork(ctx, client.ForkSpec{})
	wantCode(t, "Fork(nothing)", err, client.CodeInvalidArgument, persistence.ErrInvalidArgument)
	_, err = c.Fork(ctx, client.ForkSpec{Source: h.Branch, At: turns[1].ID})
	wantCode(t, "Fork(source and at)", err, client.CodeInvalidArgument, persistence.ErrInvalidArgument)

	// An empty branch pages and ranges as empty.
	empty, _ := c.CreateBranch(ctx, persistence.BranchSpec{})
	if p, err := c.GetLast(ctx, empty.Branch, 64); err != nil || len(p.Nodes) != 0 || !p.Next.IsZero() {
		t.Fatalf("GetLast(empty) = %+v, %v", p, err)
	}
	if rp, err := c.GetRangeByDepth(ctx, empty.Branch, 0, 10); err != nil || !rp.Empty || len(rp.Nodes) != 0 {
		t.Fatalf("GetRangeByDepth(empty) = %+v, %v", rp, err)
	}
}

func TestForkDoesNotSeeLaterParentAppends(t *testing.T) {
	ctx := t.Context()
	srv := startServer(t, openDB(t), frame.Options{})
	c := dial(t, srv, client.Options{})
	h, _ := c.CreateBranch(ctx, persistence.BranchSpec{})
	var base []persistence.Node
	for i := range 3 {
		tr, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "p%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		base = append(base, tr)
	}
	fork, err := c.Fork(ctx, client.ForkSpec{Source: h.Branch})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "parent later %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	onFork, err := c.Append(ctx, fork.Branch, persistence.AppendRequest{Payload: []byte("fork only")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.GetLast(ctx, fork.Branch, 100)
	if err != nil {
		t.Fatal(err)
	}
	checkTurns(t, "fork history", p.Nodes, append(base[:3:3], onFork))
	pp, err := c.GetLast(ctx, h.Branch, 100)
	if err != nil || len(pp.Nodes) != 5 {
		t.Fatalf("parent history = %d turns, %v; want 5", len(pp.Nodes), err)
	}
	for _, tr := range pp.Nodes {
		if tr.ID == onFork.ID {
			t.Fatal("the parent branch sees the fork's turn")
		}
	}
}

func TestExpectParent(t *testing.T) {
	ctx := t.Context()
	srv := startServer(t, openDB(t), frame.Options{})
	c := dial(t, srv, client.Options{})
	h, _ := c.CreateBranch(ctx, persistence.BranchSpec{})
	var zero messages.TurnID
	first, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("a"), ExpectParent: &zero})
	if err != nil {
		t.Fatalf("Append(expect empty) on an empty branch: %v", err)
	}
	_, err = c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("b"), ExpectParent: &zero})
	fe := wantCode(t, "Append(expect empty) on a non-empty branch", err, client.CodeHeadMismatch, persistence.ErrHeadMismatch)
	if fe.Head != first.ID {
		t.Fatalf("HEAD_MISMATCH head = %s, want the actual head %s", fe.Head, first.ID)
	}
	if got, _ := c.Head(ctx, h.Branch); got.Node != first.ID {
		t.Fatalf("a failed conditional append moved the head to %s", got.Node)
	}
	second, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("b"), ExpectParent: &first.ID})
	if err != nil || second.Parent != first.ID {
		t.Fatalf("Append(expect first) = %+v, %v", second, err)
	}
}

// TestErrorCodes checks that store errors reach the client as their codes
// and that the connection stays usable after each.
func TestErrorCodes(t *testing.T) {
	ctx := t.Context()
	srv := startServer(t, openDB(t), frame.Options{})
	c := dial(t, srv, client.Options{})
	h, _ := c.CreateBranch(ctx, persistence.BranchSpec{})
	unknownBranch := messages.NewID[messages.BranchID](time.Now())
	unknownTurn := messages.NewID[messages.TurnID](time.Now())
	tests := []struct {
		name     string
		call     func() error
		code     frame.Code
		sentinel error
	}{
		{"GetHead(unknown)", func() error { _, err := c.Head(ctx, unknownBranch); return err },
			client.CodeBranchNotFound, persistence.ErrBranchNotFound},
		{"GetLast(unknown)", func() error { _, err := c.GetLast(ctx, unknownBranch, 5); return err },
			client.CodeBranchNotFound, persistence.ErrNotFound},
		{"GetBefore(unknown)", func() error { _, err := c.GetBefore(ctx, unknownTurn, 5); return err },
			client.CodeTurnNotFound, persistence.ErrNodeNotFound},
		{"Fork(at unknown)", func() error { _, err := c.Fork(ctx, client.ForkSpec{At: unknownTurn}); return err },
			client.CodeTurnNotFound, persistence.ErrNotFound},
		{"GetBlob(unknown)", func() error { _, err := c.GetBlob(ctx, persistence.HashOf([]byte("nope"))); return err },
			client.CodeBlobNotFound, persistence.ErrBlobNotFound},
		{"Append(empty payload)", func() error {
			_, err := c.Append(ctx, h.Branch, persistence.AppendRequest{})
			return err
		}, client.CodeInvalidArgument, persistence.ErrInvalidArgument},
		{"Append(zero branch)", func() error {
			_, err := c.Append(ctx, messages.BranchID{}, persistence.AppendRequest{Payload: []byte("x")})
			return err
		}, client.CodeInvalidArgument, persistence.ErrInvalidArgument},
		{"Append(store flags)", func() error {
			_, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("x"), Flags: persistence.FlagPatched})
			return err
		}, client.CodeInvalidArgument, persistence.ErrInvalidArgument},
		{"GetLast(limit over the store's)", func() error { _, err := c.GetLast(ctx, h.Branch, persistence.MaxPageNodes+1); return err },
			client.CodeInvalidArgument, persistence.ErrInvalidArgument},
	}
	for _, tt := range tests {
		wantCode(t, tt.name, tt.call(), tt.code, tt.sentinel)
		if _, err := c.Head(ctx, h.Branch); err != nil {
			t.Fatalf("after %s the connection fails: %v", tt.name, err)
		}
	}
}

// gateStore blocks Append until released, to order events across the
// server's goroutines without sleeping.
type gateStore struct {
	persistence.Store
	entered chan struct{}
	release chan struct{}
}

func (g *gateStore) Append(ctx context.Context, b messages.BranchID, req persistence.AppendRequest) (persistence.Node, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Store.Append(ctx, b, req)
}

func newGate(s persistence.Store) *gateStore {
	return &gateStore{Store: s, entered: make(chan struct{}), release: make(chan struct{})}
}

// rawConn is a client that writes frames by hand.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *frame.Reader
}

func rawDial(t *testing.T, s *frame.Server) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	// Bounds a broken server; the tests never wait on it.
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, r: frame.NewReader(nc, 4096)}
}

func (c *rawConn) send(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) read() (frame.Header, []byte) {
	c.t.Helper()
	h, err := c.r.ReadHeader()
	if err == nil {
		err = frame.CheckResponse(h, frame.DefaultMaxFrame)
	}
	var p []byte
	if err == nil {
		p, err = c.r.ReadPayload(h)
	}
	if err != nil {
		c.t.Fatalf("read answer: %v", err)
	}
	return h, p
}

func (c *rawConn) readError(reqID uint64, code frame.Code) {
	c.t.Helper()
	h, p := c.read()
	if h.Type != frame.MsgError || h.ReqID != reqID {
		c.t.Fatalf("answer = %s req %d, want ERROR req %d", h.Type, h.ReqID, reqID)
	}
	e, err := frame.DecodeError(p)
	if err != nil || e.Code != code {
		c.t.Fatalf("ERROR = %v, %v; want code %s", e, err, code)
	}
}

func (c *rawConn) expectEOF() {
	c.t.Helper()
	if h, err := c.r.ReadHeader(); err != io.EOF {
		c.t.Fatalf("after a protocol error: read %+v, %v; want EOF", h, err)
	}
}

func req(reqID uint64, r frame.Request) []byte {
	b, tail := frame.EncodeRequest(nil, reqID, r)
	return append(b, tail...)
}

// TestPipelining sends many requests in one write and checks that each is
// answered once, with its req_id and its type, and that a slow request
// does not hold up the ones behind it.
func TestPipelining(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	gate := newGate(db)
	srv := startServer(t, gate, frame.Options{})
	h, err := db.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	c := rawDial(t, srv)

	// A blocked append does not hold up the requests after it.
	c.send(append(req(1, frame.AppendRequest{Branch: h.Branch, Payload: []byte("slow")}),
		req(2, frame.HeadRequest{Branch: h.Branch})...))
	<-gate.entered
	if hd, _ := c.read(); hd.ReqID != 2 || hd.Type != frame.MsgGetHead.Response() {
		t.Fatalf("first answer = %s req %d, want GET_HEAD's (req 2) while req 1 is blocked", hd.Type, hd.ReqID)
	}
	close(gate.release)
	if hd, p := c.read(); hd.ReqID != 1 || hd.Type != frame.MsgAppendTurn.Response() {
		t.Fatalf("second answer = %s req %d, want APPEND_TURN's (req 1)", hd.Type, hd.ReqID)
	} else if tr, err := frame.DecodeNode(p); err != nil || tr.Depth != 0 {
		t.Fatalf("APPEND_TURN answer = %+v, %v", tr, err)
	}
	go func() { // later appends pass the gate at once
		for range gate.entered {
		}
	}()
	defer close(gate.entered)

	// 300 requests of every kind in one write; req_ids are not in order.
	const n = 300
	var batch []byte
	want := map[uint64]frame.MsgType{}
	for i := range n {
		id := uint64(1_000_000 - 7*i)
		var r frame.Request
		switch i % 5 {
		case 0:
			r = frame.AppendRequest{Branch: h.Branch, Payload: fmt.Appendf(nil, "p%d", i)}
		case 1:
			r = frame.LastRequest{Branch: h.Branch, Limit: 64}
		case 2:
			r = frame.CreateRequest{}
		case 3:
			r = frame.RangeRequest{Branch: h.Branch, Start: 0, Limit: 10}
		case 4:
			r = frame.HeadRequest{Branch: h.Branch}
		}
		want[id] = r.Type().Response()
		batch = append(batch, req(id, r)...)
	}
	c.send(batch)
	for range n {
		hd, p := c.read()
		typ, ok := want[hd.ReqID]
		if !ok {
			t.Fatalf("answer to req %d, which was not sent or was already answered", hd.ReqID)
		}
		if hd.Type != typ {
			e, _ := frame.DecodeError(p)
			t.Fatalf("req %d answered with %s (%v), want %s", hd.ReqID, hd.Type, e, typ)
		}
		delete(want, hd.ReqID)
	}
	if got, _ := db.Head(ctx, h.Branch); got.Depth != n/5 {
		t.Fatalf("head depth = %d after %d pipelined appends, want %d", got.Depth, n/5+1, n/5)
	}
}

// TestClientConcurrent shares one client among many goroutines.
func TestClientConcurrent(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	srv := startServer(t, db, frame.Options{})
	c := dial(t, srv, client.Options{})
	const workers, each = 32, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	branches := make([]messages.BranchID, workers)
	for w := range workers {
		wg.Go(func() {
			h, err := c.CreateBranch(ctx, persistence.BranchSpec{})
			if err != nil {
				errs <- err
				return
			}
			branches[w] = h.Branch
			prev := messages.TurnID{}
			for i := range each {
				tr, err := c.Append(ctx, h.Branch, persistence.AppendRequest{
					Payload: fmt.Appendf(nil, "w%d-%d", w, i), ExpectParent: &prev,
				})
				if err != nil {
					errs <- fmt.Errorf("worker %d append %d: %w", w, i, err)
					return
				}
				prev = tr.ID
				if _, err := c.GetLast(ctx, h.Branch, 4); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w, b := range branches {
		p, err := db.Last(ctx, b, 100)
		if err != nil || len(p.Nodes) != each {
			t.Fatalf("branch of worker %d: %d turns, %v; want %d", w, len(p.Nodes), err, each)
		}
		for i, tr := range p.Nodes {
			blob, _ := db.Blob(ctx, tr.PayloadHash)
			if want := fmt.Sprintf("w%d-%d", w, i); string(blob) != want {
				t.Fatalf("worker %d turn %d = %q, want %q", w, i, blob, want)
			}
		}
	}
}

// TestMaxFrameSize: an oversized frame gets FRAME_TOO_LARGE and closes
// its connection only; the server keeps serving others.
func TestMaxFrameSize(t *testing.T) {
	ctx := t.Context()
	const maxFrame = 64 << 10
	srv := startServer(t, openDB(t), frame.Options{MaxFrame: maxFrame})
	if srv.EffectiveMaxFrame() != maxFrame {
		t.Fatalf("EffectiveMaxFrame() = %d, want %d", srv.EffectiveMaxFrame(), maxFrame)
	}
	good := dial(t, srv, client.Options{})
	h, err := good.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}

	bad := rawDial(t, srv)
	hdr := frame.AppendHeader(nil, frame.Header{Len: maxFrame + 1, Type: frame.MsgAppendTurn, ReqID: 77})
	bad.send(append(hdr, make([]byte, 1000)...)) // the start of the payload
	bad.readError(77, frame.CodeFrameTooLarge)
	bad.expectEOF()

	// The client checks the server's limit before sending: the call fails
	// alone and the connection lives on.
	_, err = good.Append(ctx, h.Branch, persistence.AppendRequest{Payload: make([]byte, maxFrame)})
	wantCode(t, "Append(over the frame limit)", err, client.CodeFrameTooLarge, frame.ErrFrameTooLarge)
	if _, err := good.Append(ctx, h.Branch, persistence.AppendRequest{Payload: make([]byte, maxFrame-frame.AppendOverhead)}); err != nil {
		t.Fatalf("Append(exactly the frame limit): %v", err)
	}
	if _, err := good.Head(ctx, h.Branch); err != nil {
		t.Fatalf("the other connection fails after one was closed: %v", err)
	}
	fresh := dial(t, srv, client.Options{})
	if _, err := fresh.Head(ctx, h.Branch); err != nil {
		t.Fatalf("a new connection fails: %v", err)
	}
}

// TestMaxFrameCappedByStore: the frame limit never exceeds what the
// store would accept.
func TestMaxFrameCappedByStore(t *testing.T) {
	srv := frame.New(memstore.New(persistence.Limits{MaxPayloadBytes: 1 << 20}), frame.Options{
		MaxFrame: 64 << 20, MaxPayload: 1 << 20,
	})
	if got, want := srv.EffectiveMaxFrame(), 1<<20+frame.FrameOverhead; got != want {
		t.Fatalf("EffectiveMaxFrame() = %d, want %d", got, want)
	}
}

// TestMalformedFrames: each broken frame is answered with its ERROR code
// and ends its connection; another connection is not disturbed.
func TestMalformedFrames(t *testing.T) {
	ctx := t.Context()
	srv := startServer(t, openDB(t), frame.Options{})
	good := dial(t, srv, client.Options{})
	h, err := good.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	withFlags := req(5, frame.HeadRequest{Branch: h.Branch})
	binary.LittleEndian.PutUint16(withFlags[6:], 1)
	tests := []struct {
		name  string
		bytes []byte
		code  frame.Code
	}{
		{"unknown type", frame.AppendFrame(nil, 0x0042, 5, nil), frame.CodeUnknownType},
		{"a response type", frame.AppendFrame(nil, frame.MsgGetHead.Response(), 5, nil), frame.CodeUnknownType},
		{"ERROR from a client", frame.AppendFrame(nil, frame.MsgError, 5, nil), frame.CodeUnknownType},
		{"reserved flags", withFlags, frame.CodeMalformed},
		{"short payload", frame.AppendFrame(nil, frame.MsgCtxCreate, 5, func(b []byte) []byte { return append(b, make([]byte, 20)...) }), frame.CodeMalformed},
		{"trailing bytes", frame.AppendFrame(nil, frame.MsgGetHead, 5, func(b []byte) []byte { return append(b, make([]byte, 17)...) }), frame.CodeMalformed},
		{"append length beyond the frame", func() []byte {
			b := req(5, frame.AppendRequest{Branch: h.Branch, Payload: []byte("abc")})
			binary.LittleEndian.PutUint32(b[frame.HeaderSize+frame.AppendOverhead-4:], 4)
			return b
		}(), frame.CodeMalformed},
		{"expect_parent without its option", func() []byte {
			b := req(5, frame.AppendRequest{Branch: h.Branch, Payload: []byte("abc")})
			b[frame.HeaderSize+16] = 1
			return b
		}(), frame.CodeMalformed},
		{"hello version 0", req(5, frame.Hello{Version: 0}), frame.CodeUnsupportedVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawDial(t, srv)
			// A good request first: it is answered before the error.
			c.send(req(4, frame.HeadRequest{Branch: h.Branch}))
			if hd, _ := c.read(); hd.ReqID != 4 || hd.Type != frame.MsgGetHead.Response() {
				t.Fatalf("answer = %s req %d, want GET_HEAD's", hd.Type, hd.ReqID)
			}
			c.send(tt.bytes)
			c.readError(5, tt.code)
			c.expectEOF()
			if _, err := good.Head(ctx, h.Branch); err != nil {
				t.Fatalf("another connection fails: %v", err)
			}
		})
	}
}

// TestSmallClientFrames: answers respect the client's maximum frame size
// from HELLO — pages are cut to fit (with a cursor), a blob that cannot
// fit is refused alone.
func TestSmallClientFrames(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	srv := startServer(t, db, frame.Options{})
	c := dial(t, srv, client.Options{MaxFrame: frame.MinMaxFrame})
	maxPage := frame.MaxPageFor(frame.MinMaxFrame)
	if int(c.Server().MaxPage) != maxPage {
		t.Fatalf("HELLO max_page = %d, want %d for a %d-byte client", c.Server().MaxPage, maxPage, frame.MinMaxFrame)
	}
	h, _ := c.CreateBranch(ctx, persistence.BranchSpec{})
	for i := range maxPage + 5 {
		if _, err := db.Append(ctx, h.Branch, persistence.AppendRequest{Payload: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.GetLast(ctx, h.Branch, 1000)
	if err != nil || len(p.Nodes) != maxPage || p.Next.IsZero() {
		t.Fatalf("GetLast(1000) = %d turns (next %q), %v; want %d and a cursor", len(p.Nodes), p.Next, err, maxPage)
	}
	rest, err := c.GetBefore(ctx, p.Next, 1000)
	if err != nil || len(rest.Nodes) != 5 || !rest.Next.IsZero() {
		t.Fatalf("GetBefore = %d turns, %v; want the 5 older ones", len(rest.Nodes), err)
	}
	big, err := db.Append(ctx, h.Branch, persistence.AppendRequest{Payload: bytes.Repeat([]byte{7}, 10_000)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetBlob(ctx, big.PayloadHash)
	wantCode(t, "GetBlob(over the client's frame)", err, client.CodeResponseTooLarge, nil)
	if _, err := c.Head(ctx, h.Branch); err != nil {
		t.Fatalf("the connection fails after RESPONSE_TOO_LARGE: %v", err)
	}
}

// TestShutdown: Shutdown lets a request in flight finish and be answered,
// then refuses new connections.
func TestShutdown(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	gate := newGate(db)
	srv := startServer(t, gate, frame.Options{})
	c := dial(t, srv, client.Options{})
	h, err := c.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	appended := make(chan error, 1)
	go func() {
		_, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("in flight")})
		appended <- err
	}()
	<-gate.entered
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case err := <-appended:
		t.Fatalf("Append returned %v before it was released", err)
	default:
	}
	close(gate.release)
	if err := <-appended; err != nil {
		t.Fatalf("the request in flight during Shutdown failed: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if got, _ := db.Head(ctx, h.Branch); got.Empty() {
		t.Fatal("the acknowledged append is not in the store")
	}
	if _, err := client.Dial(ctx, srv.Addr().String()); err == nil {
		t.Fatal("Dial after Shutdown succeeded")
	}
	if _, err := c.Head(ctx, h.Branch); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("a call after Shutdown = %v, want ErrClosed", err)
	}
}

// A connection over MaxConns is told why (UNAVAILABLE, req_id 0) and
// closed (when no connection may be evicted); one that sends nothing for
// IdleTimeout is closed; the others are served as before.
func TestConnectionLimits(t *testing.T) {
	db := openDB(t)
	s := startServer(t, db, frame.Options{MaxConns: 1, IdleTimeout: 300 * time.Millisecond, EvictIdleAfter: -1})
	first := rawDial(t, s)
	first.send(req(1, frame.Hello{Version: frame.Version, MaxFrame: frame.DefaultMaxFrame}))
	if h, _ := first.read(); h.Type != frame.MsgHello.Response() || h.ReqID != 1 {
		t.Fatalf("HELLO answer = %s req %d", h.Type, h.ReqID)
	}
	second := rawDial(t, s)
	second.readError(0, frame.CodeUnavailable)
	second.expectEOF()

	// The first is idle now: closed after IdleTimeout, not before.
	start := time.Now()
	first.expectEOF()
	if idle := time.Since(start); idle < 100*time.Millisecond {
		t.Errorf("idle connection closed after %v, want about 300ms", idle)
	}
	// Its slot is free again.
	third := rawDial(t, s)
	third.send(req(2, frame.Hello{Version: frame.Version, MaxFrame: frame.DefaultMaxFrame}))
	if h, _ := third.read(); h.Type != frame.MsgHello.Response() || h.ReqID != 2 {
		t.Fatalf("HELLO answer after the slot was freed = %s req %d", h.Type, h.ReqID)
	}
}

// At MaxConns, a new client takes the place of the connection idle
// longest instead of being locked out until IdleTimeout; the evicted
// client is told why. A connection with a request in flight is never
// evicted: with none idle, the new client is refused at once.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	db := openDB(t)
	gate := newGate(db)
	s := startServer(t, gate, frame.Options{MaxConns: 2, IdleTimeout: time.Hour, EvictIdleAfter: time.Nanosecond})
	hello := func(c *rawConn, reqID uint64) {
		t.Helper()
		c.send(req(reqID, frame.Hello{Version: frame.Version, MaxFrame: frame.DefaultMaxFrame}))
		if h, _ := c.read(); h.Type != frame.MsgHello.Response() || h.ReqID != reqID {
			t.Fatalf("HELLO answer = %s req %d, want HELLO req %d", h.Type, h.ReqID, reqID)
		}
	}
	oldest, older := rawDial(t, s), rawDial(t, s)
	hello(oldest, 1)
	hello(older, 2)

	// Both idle, the limit reached: a third gets in, the oldest goes.
	third := rawDial(t, s)
	hello(third, 3)
	oldest.readError(0, frame.CodeUnavailable)
	oldest.expectEOF()
	hello(older, 4) // untouched

	// With a request in flight on each connection, none may go: a new
	// client is refused at once.
	ctx := context.Background()
	h, err := db.CreateBranch(ctx, persistence.BranchSpec{ID: messages.NewID[messages.BranchID](time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []*rawConn{older, third} {
		c.send(req(uint64(10+i), frame.AppendRequest{Branch: h.Branch, Payload: []byte("hold")}))
		<-gate.entered
	}
	refused := rawDial(t, s)
	refused.readError(0, frame.CodeUnavailable)
	refused.expectEOF()
	close(gate.release)
	for i, c := range []*rawConn{older, third} {
		if h, _ := c.read(); h.ReqID != uint64(10+i) || h.Type == frame.MsgError {
			t.Errorf("append answer = %s req %d, want req %d", h.Type, h.ReqID, 10+i)
		}
	}
}

// TestProtocolErrorLogIsLimited: a peer opening connection after
// connection that each break the protocol gets a few log lines a minute,
// not one each; every connection is still answered and closed.
func TestProtocolErrorLogIsLimited(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	srv := startServer(t, openDB(t), frame.Options{Log: zerolog.New(&buf)})
	const conns = 40
	for range conns {
		c := rawDial(t, srv)
		c.send(frame.AppendFrame(nil, 0x0042, 5, nil))
		c.readError(5, frame.CodeUnknownType)
		c.expectEOF()
	}
	lines := strings.Count(buf.String(), "protocol error")
	if lines < 1 || lines > 10 {
		t.Fatalf("%d protocol error lines for %d bad connections, want 1 to 10:\n%s", lines, conns, buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
