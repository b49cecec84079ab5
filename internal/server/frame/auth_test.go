package frame_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	client "github.com/contextinfinity/ctxinf/client/frame"
	"github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// countingStore counts every store operation the frame server can run,
// so a test can tell that a refused connection ran none.
type countingStore struct {
	persistence.Store
	calls atomic.Int64
}

func (s *countingStore) CreateBranch(ctx context.Context, spec persistence.BranchSpec) (persistence.Head, error) {
	s.calls.Add(1)
	return s.Store.CreateBranch(ctx, spec)
}

func (s *countingStore) Append(ctx context.Context, b messages.BranchID, req persistence.AppendRequest) (persistence.Node, error) {
	s.calls.Add(1)
	return s.Store.Append(ctx, b, req)
}

func (s *countingStore) Head(ctx context.Context, b messages.BranchID) (persistence.Head, error) {
	s.calls.Add(1)
	return s.Store.Head(ctx, b)
}

func (s *countingStore) Last(ctx context.Context, b messages.BranchID, n int) (persistence.Page, error) {
	s.calls.Add(1)
	return s.Store.Last(ctx, b, n)
}

func (s *countingStore) Before(ctx context.Context, before messages.NodeID, n int) (persistence.Page, error) {
	s.calls.Add(1)
	return s.Store.Before(ctx, before, n)
}

func (s *countingStore) Range(ctx context.Context, b messages.BranchID, start uint64, limit int) (persistence.RangePage, error) {
	s.calls.Add(1)
	return s.Store.Range(ctx, b, start, limit)
}

func (s *countingStore) Blob(ctx context.Context, h persistence.Hash) ([]byte, error) {
	s.calls.Add(1)
	return s.Store.Blob(ctx, h)
}

// TestTokenAuth: the check accepts exactly the configured tokens and
// names them by position, never by value.
func TestTokenAuth(t *testing.T) {
	if frame.TokenAuth(nil) != nil {
		t.Fatal("TokenAuth(nil) is not nil: no tokens must mean no authentication")
	}
	auth := frame.TokenAuth([]string{"alpha-token", "beta"})
	for _, tt := range []struct {
		token, principal string
		ok               bool
	}{
		{"alpha-token", "token 1", true},
		{"beta", "token 2", true},
		{"", "", false},
		{"alpha", "", false},
		{"alpha-token ", "", false},
		{"betA", "", false},
		{"gamma", "", false},
	} {
		if p, ok := auth(tt.token); p.Name != tt.principal || ok != tt.ok || ok && p.Tenant != persistence.DefaultTenant {
			t.Errorf("auth(%q) = %+v, %v; want %q of tenant %q, %v", tt.token, p, ok, tt.principal, persistence.DefaultTenant, tt.ok)
		}
	}
}

// readAll reads what the server sends until it closes the connection.
func readAll(t *testing.T, c *rawConn) []byte {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c.nc)
	if err != nil {
		t.Fatalf("read until the server closes: %v (got %d bytes)", err, len(b))
	}
	return b
}

// TestAuthRefusedBeforeAnyFrame: with Authenticate set, a connection
// whose first frame is not a HELLO carrying a good token gets one ERROR
// frame (UNAUTHENTICATED, or FRAME_TOO_LARGE for a first frame larger
// than any HELLO) and is closed; the requests pipelined behind it are
// neither run against the store nor answered.
func TestAuthRefusedBeforeAnyFrame(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	secret := messages.NewID[messages.BranchID](time.Now())
	marker := []byte("MARKER-only-for-the-authenticated")
	if _, err := db.CreateBranch(ctx, persistence.BranchSpec{ID: secret}); err != nil {
		t.Fatal(err)
	}
	turn, err := db.Append(ctx, secret, persistence.AppendRequest{Payload: marker, TypeTag: 1})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: db}
	srv := startServer(t, store, frame.Options{Authenticate: frame.TokenAuth([]string{"good-token"})})

	// What an attacker pipelines behind its first frame: read the secret
	// branch, fork it into a branch of its choosing, fetch the payload.
	fork := messages.NewID[messages.BranchID](time.Now())
	attack := bytes.Join([][]byte{
		req(11, frame.LastRequest{Branch: secret, Limit: 64}),
		req(12, frame.ForkRequest{Branch: fork, Source: secret}),
		req(13, frame.BlobRequest{Hash: turn.PayloadHash}),
		req(14, frame.AppendRequest{Branch: secret, Payload: []byte("planted")}),
	}, nil)
	bigHello := frame.AppendFrame(nil, frame.MsgHello, 1, func(b []byte) []byte {
		return append(b, make([]byte, frame.MaxHelloSize+1)...)
	})
	tests := []struct {
		name  string
		first []byte // nil: the attack alone
		code  frame.Code
	}{
		{"request before HELLO", nil, frame.CodeUnauthenticated},
		{"HELLO version 1 without a token", req(1, frame.Hello{Version: 1, Name: "x"}), frame.CodeUnauthenticated},
		{"HELLO with an empty token", req(1, frame.Hello{Version: frame.Version}), frame.CodeUnauthenticated},
		{"HELLO with a wrong token", req(1, frame.Hello{Version: frame.Version, Token: "bad-token"}), frame.CodeUnauthenticated},
		{"HELLO with a prefix of the token", req(1, frame.Hello{Version: frame.Version, Token: "good"}), frame.CodeUnauthenticated},
		{"HELLO larger than any HELLO", bigHello, frame.CodeFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawDial(t, srv)
			c.send(append(append([]byte(nil), tt.first...), attack...))
			got := readAll(t, c)
			firstID := uint64(1)
			if tt.first == nil {
				firstID = 11
			}
			c.r = frame.NewReader(bytes.NewReader(got), 4096)
			c.readError(firstID, tt.code)
			c.expectEOF() // one frame, nothing else answered
			if bytes.Contains(got, marker) {
				t.Fatal("the marker is in the bytes the server sent")
			}
			if n := store.calls.Load(); n != 0 {
				t.Fatalf("the store ran %d operations for an unauthenticated connection", n)
			}
			if _, err := db.Head(ctx, fork); !errors.Is(err, persistence.ErrBranchNotFound) {
				t.Fatalf("the fork an unauthenticated client asked for: Head = %v, want ErrBranchNotFound", err)
			}
			if h, err := db.Head(ctx, secret); err != nil || h.Node != turn.ID {
				t.Fatalf("the secret branch's head = %+v, %v; want it unmoved at %s", h, err, turn.ID)
			}
		})
	}

	// The same requests after a good HELLO are served.
	c := rawDial(t, srv)
	c.send(append(req(1, frame.Hello{Version: frame.Version, Token: "good-token"}), attack...))
	if h, p := c.read(); h.Type != frame.MsgHello.Response() || h.ReqID != 1 {
		t.Fatalf("answer to a good HELLO = %s req %d", h.Type, h.ReqID)
	} else if info, err := frame.DecodeHelloReply(p); err != nil || info.Version != frame.Version {
		t.Fatalf("HELLO reply = %+v, %v; want version %d", info, err, frame.Version)
	}
	answered := map[uint64]bool{}
	var blob []byte
	for range 4 {
		h, p := c.read()
		if h.Type == frame.MsgError {
			e, _ := frame.DecodeError(p)
			t.Fatalf("req %d after a good HELLO: %v", h.ReqID, e)
		}
		answered[h.ReqID] = true
		if h.ReqID == 13 {
			blob = p
		}
	}
	if len(answered) != 4 || !bytes.Equal(blob, marker) {
		t.Fatalf("after a good HELLO: answered %v, blob %q", answered, blob)
	}
}

// TestAuthClient: the Go client sends its token in HELLO; without it, or
// with a wrong one, Dial fails with UNAUTHENTICATED.
func TestAuthClient(t *testing.T) {
	ctx := t.Context()
	srv := startServer(t, openDB(t), frame.Options{Authenticate: frame.TokenAuth([]string{"tok-1", "tok-2"})})
	for _, tok := range []string{"", "tok-3", "tok-1x"} {
		c, err := client.DialOptions(ctx, srv.Addr().String(), client.Options{Token: tok})
		if err == nil {
			c.Close()
			t.Fatalf("Dial with token %q succeeded", tok)
		}
		wantCode(t, "Dial with token "+tok, err, frame.CodeUnauthenticated, client.ErrUnauthenticated)
	}
	for _, tok := range []string{"tok-1", "tok-2"} {
		c := dial(t, srv, client.Options{Token: tok, Name: "auth-test"})
		if v := c.Server().Version; v != frame.Version {
			t.Fatalf("Server().Version = %d, want %d", v, frame.Version)
		}
		h, err := c.CreateBranch(ctx, persistence.BranchSpec{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("hi"), TypeTag: 1}); err != nil {
			t.Fatal(err)
		}
		if p, err := c.GetLast(ctx, h.Branch, 10); err != nil || len(p.Nodes) != 1 {
			t.Fatalf("GetLast = %+v, %v", p, err)
		}
	}
	if _, err := client.DialOptions(ctx, srv.Addr().String(), client.Options{Token: string(make([]byte, frame.MaxTokenLen+1))}); err == nil {
		t.Fatal("Dial with a token over MaxTokenLen succeeded")
	}
}

// TestAuthLaterHello: a later HELLO is checked too, and cannot switch
// the connection to another principal.
func TestAuthLaterHello(t *testing.T) {
	srv := startServer(t, openDB(t), frame.Options{Authenticate: frame.TokenAuth([]string{"tok-1", "tok-2"})})
	c := rawDial(t, srv)
	c.send(req(1, frame.Hello{Version: frame.Version, Token: "tok-1"}))
	if h, _ := c.read(); h.Type != frame.MsgHello.Response() {
		t.Fatalf("answer = %s", h.Type)
	}
	c.send(req(2, frame.Hello{Version: frame.Version, Token: "tok-1"}))
	if h, _ := c.read(); h.Type != frame.MsgHello.Response() || h.ReqID != 2 {
		t.Fatalf("answer to the same token again = %s req %d", h.Type, h.ReqID)
	}
	c.send(req(3, frame.Hello{Version: frame.Version, Token: "tok-2"}))
	c.readError(3, frame.CodeUnauthenticated)
	c.expectEOF()

	c = rawDial(t, srv)
	c.send(req(1, frame.Hello{Version: frame.Version, Token: "tok-1"}))
	c.read()
	c.send(req(2, frame.Hello{Version: 1}))
	c.readError(2, frame.CodeUnauthenticated)
	c.expectEOF()
}

// TestNoAuthUnchanged: without Authenticate, HELLO stays optional and a
// version 1 HELLO is answered with version 1.
func TestNoAuthUnchanged(t *testing.T) {
	srv := startServer(t, openDB(t), frame.Options{})
	c := rawDial(t, srv)
	c.send(req(1, frame.HeadRequest{Branch: messages.NewID[messages.BranchID](time.Now())}))
	c.readError(1, frame.CodeBranchNotFound)
	c.send(req(2, frame.Hello{Version: 1}))
	if h, p := c.read(); h.Type != frame.MsgHello.Response() {
		t.Fatalf("answer = %s", h.Type)
	} else if info, err := frame.DecodeHelloReply(p); err != nil || info.Version != 1 {
		t.Fatalf("HELLO reply = %+v, %v; want version 1", info, err)
	}
	// A token sent to a server that needs none is accepted and ignored.
	c.send(req(3, frame.Hello{Version: frame.Version, Token: "whatever"}))
	if h, _ := c.read(); h.Type != frame.MsgHello.Response() {
		t.Fatalf("answer = %s", h.Type)
	}
}

// TestPublicBindNeedsAuth: beyond loopback, ListenAndServe requires
// Authenticate.
func TestPublicBindNeedsAuth(t *testing.T) {
	db := openDB(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		if s, err := frame.ListenAndServe(t.Context(), addr, db, frame.Options{}); !errors.Is(err, frame.ErrPublicBind) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("ListenAndServe(%q) without Authenticate: %v, want ErrPublicBind", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		s, err := frame.ListenAndServe(t.Context(), addr, db, frame.Options{})
		if err != nil {
			t.Fatalf("ListenAndServe(%q): %v", addr, err)
		}
		s.Close()
	}
	s, err := frame.ListenAndServe(t.Context(), "0.0.0.0:0", db, frame.Options{Authenticate: frame.TokenAuth([]string{"t"})})
	if err != nil {
		t.Fatalf("ListenAndServe(0.0.0.0:0) with Authenticate: %v", err)
	}
	s.Close()
}
