package frame

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/memstore"
)

var (
	seedNow    = time.UnixMilli(1_700_000_000_000)
	seedBranch = messages.NewID[messages.BranchID](seedNow)
	seedTurn   = messages.NewID[messages.TurnID](seedNow)
)

func seedRequests() []Request {
	return []Request{
		Hello{Version: 1, MaxFrame: 1 << 20, Name: "seed"},
		Hello{Version: Version, MaxFrame: 1 << 20, Name: "seed", Token: "s3cret"},
		CreateRequest{},
		CreateRequest{Branch: seedBranch, At: seedTurn},
		ForkRequest{Source: seedBranch},
		ForkRequest{Branch: seedBranch, At: seedTurn},
		HeadRequest{Branch: seedBranch},
		AppendRequest{Branch: seedBranch, TypeTag: 9, Codec: 2, Flags: 1, Payload: []byte("hello")},
		AppendRequest{Branch: seedBranch, ExpectParent: &seedTurn, Payload: []byte("x")},
		LastRequest{Branch: seedBranch, Limit: 64},
		BeforeRequest{Before: seedTurn, Limit: 10},
		RangeRequest{Branch: seedBranch, Start: 3, Limit: 10},
		BlobRequest{Hash: persistence.HashOf([]byte("hello"))},
	}
}

// FuzzDecodeRequest: the request decoder never panics, and whatever it
// accepts encodes back to the same bytes (the format has one encoding).
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range seedRequests() {
		f.Add(uint16(r.Type()), r.AppendPayload(nil))
	}
	f.Add(uint16(MsgAppendTurn), []byte{1, 2, 3})
	f.Add(uint16(0x77), []byte{})
	f.Fuzz(func(t *testing.T, typ uint16, p []byte) {
		r, err := DecodeRequest(MsgType(typ), p)
		if err != nil {
			if r != nil {
				t.Fatalf("DecodeRequest returned %v with error %v", r, err)
			}
			return
		}
		if r.Type() != MsgType(typ) {
			t.Fatalf("DecodeRequest(%s) returned a %s", MsgType(typ), r.Type())
		}
		if again := r.AppendPayload(nil); !bytes.Equal(again, p) {
			t.Fatalf("DecodeRequest(%s, %x) = %+v, which encodes as %x", MsgType(typ), p, r, again)
		}
		frame, tail := EncodeRequest(nil, 7, r)
		h, err := ParseHeader(frame)
		if err != nil || int(h.Len) != len(frame)-HeaderSize+len(tail) || h.Type != MsgType(typ) || h.ReqID != 7 {
			t.Fatalf("EncodeRequest header = %+v, %v", h, err)
		}
		if !bytes.Equal(append(frame[HeaderSize:len(frame):len(frame)], tail...), p) {
			t.Fatalf("EncodeRequest payload differs from AppendPayload")
		}
	})
}

// FuzzDecodeResponse: the client's decoders never panic and re-encode
// what they accept to the same bytes.
func FuzzDecodeResponse(f *testing.F) {
	turn := persistence.Node{ID: seedTurn, Depth: 3, TypeTag: 1, Codec: 2, Flags: 3, CreatedAt: seedNow, OverlaySeq: 4}
	head := persistence.Head{Branch: seedBranch, Node: seedTurn, Depth: 3, CreatedAt: seedNow}
	f.Add(uint8(0), HelloReply{Version: 1, MaxFrame: 1 << 20, MaxPage: 100, MaxPayload: 1 << 10, Name: "ctxinf"}.AppendPayload(nil))
	f.Add(uint8(1), AppendHead(nil, head))
	f.Add(uint8(2), AppendNode(nil, turn))
	f.Add(uint8(3), AppendPage(nil, persistence.Page{Nodes: []persistence.Node{turn, turn}, Next: seedTurn}))
	f.Add(uint8(4), AppendRangePage(nil, persistence.RangePage{Nodes: []persistence.Node{turn}, HeadDepth: 9}))
	f.Add(uint8(5), AppendError(nil, &Error{Code: CodeHeadMismatch, Message: "head moved", Head: seedTurn}))
	f.Fuzz(func(t *testing.T, which uint8, p []byte) {
		var again []byte
		switch which % 6 {
		case 0:
			m, err := DecodeHelloReply(p)
			if err != nil {
				return
			}
			again = m.AppendPayload(nil)
		case 1:
			m, err := DecodeHead(p)
			if err != nil {
				return
			}
			again = AppendHead(nil, m)
		case 2:
			m, err := DecodeNode(p)
			if err != nil {
				return
			}
			again = AppendNode(nil, m)
		case 3:
			m, err := DecodePage(p)
			if err != nil {
				return
			}
			again = AppendPage(nil, m)
		case 4:
			m, err := DecodeRangePage(p)
			if err != nil {
				return
			}
			again = AppendRangePage(nil, m)
		case 5:
			m, err := DecodeError(p)
			if err != nil {
				return
			}
			again = AppendError(nil, m)
		}
		if !bytes.Equal(again, p) {
			t.Fatalf("decoder %d accepted %x, which encodes as %x", which%6, p, again)
		}
	})
}

var (
	fuzzSrvOnce sync.Once
	fuzzSrv     *Server
	fuzzNet     string
	fuzzAddr    string
	fuzzErr     error
)

// fuzzServer is one server over a memory store shared by every input.
func fuzzServer(t *testing.T) string {
	fuzzSrvOnce.Do(func() {
		// An abstract Unix socket on Linux: no TIME_WAIT left behind by
		// hundreds of thousands of short connections.
		network, address := "tcp", "127.0.0.1:0"
		if runtime.GOOS == "linux" {
			network, address = "unix", fmt.Sprintf("@ctxinf-frame-fuzz-%d", os.Getpid())
		}
		l, err := net.Listen(network, address)
		if err != nil {
			fuzzErr = err
			return
		}
		fuzzSrv = New(memstore.New(persistence.Limits{MaxPayloadBytes: 1 << 16}), Options{
			MaxFrame: 1 << 17, MaxPayload: 1 << 16, MaxInFlight: 8, WriteTimeout: 5 * time.Second,
		})
		fuzzNet, fuzzAddr = network, l.Addr().String()
		go fuzzSrv.Serve(l)
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzAddr
}

// FuzzConn feeds a whole connection random bytes. The server must not
// panic, must answer only with well-formed frames, and must close the
// connection once the client has finished sending (never hang).
func FuzzConn(f *testing.F) {
	var session []byte
	for i, r := range seedRequests() {
		fr, tail := EncodeRequest(nil, uint64(i), r)
		session = append(append(session, fr...), tail...)
	}
	f.Add(session)
	f.Add(append(AppendFrame(nil, MsgCtxCreate, 1, CreateRequest{}.AppendPayload), AppendFrame(nil, MsgGetLast, 2, LastRequest{Limit: 5}.AppendPayload)...))
	f.Add(AppendHeader(nil, Header{Len: 1 << 30, Type: MsgAppendTurn, ReqID: 3}))
	f.Add(AppendFrame(nil, 0x0042, 4, nil))
	f.Add(session[:len(session)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		addr := fuzzServer(t)
		nc, err := net.Dial(fuzzNet, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// The deadline turns a hang into a failure below.
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		writeErr := make(chan error, 1)
		go func() {
			_, err := nc.Write(in)
			if err == nil {
				err = nc.(interface{ CloseWrite() error }).CloseWrite()
			}
			writeErr <- err
		}()
		r := NewReader(nc, 4096)
		for {
			h, err := r.ReadHeader()
			if errors.Is(err, io.EOF) || isReset(err) {
				break
			}
			if err != nil {
				t.Fatalf("reading the server's answers: %v (a hang ends in a timeout)", err)
			}
			if err := CheckResponse(h, DefaultMaxFrame); err != nil {
				t.Fatalf("the server sent a bad header %+v: %v", h, err)
			}
			p, err := r.ReadPayload(h)
			if err != nil {
				if isReset(err) {
					break
				}
				t.Fatalf("reading a payload: %v", err)
			}
			if err := checkAnswer(h, p); err != nil {
				t.Fatalf("the server sent a bad %s: %v", h.Type, err)
			}
		}
		<-writeErr // the server may close before reading everything
	})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// checkAnswer decodes an answer with the client's decoder for its type.
func checkAnswer(h Header, p []byte) error {
	var err error
	switch h.Type {
	case MsgError:
		_, err = DecodeError(p)
	case MsgHello.Response():
		_, err = DecodeHelloReply(p)
	case MsgCtxCreate.Response(), MsgCtxFork.Response(), MsgGetHead.Response():
		_, err = DecodeHead(p)
	case MsgAppendTurn.Response():
		_, err = DecodeNode(p)
	case MsgGetLast.Response(), MsgGetBefore.Response():
		_, err = DecodePage(p)
	case MsgGetRangeByDepth.Response():
		_, err = DecodeRangePage(p)
	}
	return err
}

// TestErrorForEveryStoreError maps each store sentinel to its code and
// back through errors.Is.
func TestErrorForEveryStoreError(t *testing.T) {
	tests := []struct {
		err  error
		code Code
	}{
		{persistence.ErrBranchNotFound, CodeBranchNotFound},
		{persistence.ErrNodeNotFound, CodeTurnNotFound},
		{persistence.ErrBlobNotFound, CodeBlobNotFound},
		{persistence.ErrNotFound, CodeNotFound},
		{persistence.ErrBranchExists, CodeBranchExists},
		{&persistence.HeadMismatchError{Got: seedTurn}, CodeHeadMismatch},
		{persistence.ErrInvalidArgument, CodeInvalidArgument},
		{persistence.ErrDuplicate, CodeDuplicate},
		{persistence.ErrCorrupt, CodeCorrupt},
		{persistence.ErrClosed, CodeUnavailable},
		{context.Canceled, CodeUnavailable},
		{ErrFrameTooLarge, CodeFrameTooLarge},
		{ErrMalformed, CodeMalformed},
		{ErrUnknownType, CodeUnknownType},
		{ErrUnsupportedVersion, CodeUnsupportedVersion},
		{errors.New("disk on fire"), CodeInternal},
	}
	for _, tt := range tests {
		wrapped := errors.Join(errors.New("context"), tt.err)
		e := ErrorFor(wrapped)
		if e.Code != tt.code {
			t.Errorf("ErrorFor(%v).Code = %s, want %s", tt.err, e.Code, tt.code)
		}
		// Through the wire and back.
		got, err := DecodeError(AppendError(nil, e))
		if err != nil {
			t.Fatal(err)
		}
		target := tt.err
		if _, ok := target.(*persistence.HeadMismatchError); ok {
			target = persistence.ErrHeadMismatch
		}
		if tt.code != CodeInternal && tt.err != context.Canceled && !errors.Is(got, target) {
			t.Errorf("errors.Is(decoded %v, %v) = false", got, target)
		}
		if tt.code.Fatal() != (tt.code>>8 == 1) {
			t.Errorf("%s.Fatal() = %v", tt.code, tt.code.Fatal())
		}
	}
	if e := ErrorFor(&persistence.HeadMismatchError{Got: seedTurn}); e.Head != seedTurn {
		t.Errorf("HEAD_MISMATCH head = %s, want %s", e.Head, seedTurn)
	}
	if e, _ := DecodeError(AppendError(nil, &Error{Code: CodeInternal, Message: string(make([]byte, 5000))})); len(e.Message) != MaxErrorMessage {
		t.Errorf("a long message is %d bytes on the wire, want it cut at %d", len(e.Message), MaxErrorMessage)
	}
}

// TestBudget: the per-connection byte budget admits what fits, admits an
// oversized request only alone, and gives up when the connection stops.
func TestBudget(t *testing.T) {
	b := newBudget(100)
	stop := make(chan struct{})
	if !b.acquire(60, stop, nil) || !b.acquire(40, stop, nil) {
		t.Fatal("acquire within the budget failed")
	}
	got := make(chan bool, 1)
	go func() { got <- b.acquire(10, stop, nil) }()
	b.release(40) // wakes the waiter: 40 free, 10 wanted
	if !<-got {
		t.Fatal("acquire after a release failed")
	}
	b.release(60)
	b.release(10)
	if !b.acquire(500, stop, nil) {
		t.Fatal("an oversized request is refused although nothing is held")
	}
	go func() { got <- b.acquire(1, stop, nil) }()
	close(stop)
	if <-got {
		t.Fatal("acquire over the budget succeeded after stop instead of failing")
	}
}
