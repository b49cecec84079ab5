package frame_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/contextinfinity/ctxinf/client/frame"
	server "github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/memstore"
)

// gateStore blocks Append until released, and reports each append done.
type gateStore struct {
	persistence.Store
	entered  chan struct{}
	release  chan struct{}
	appended chan error
}

func (g *gateStore) Append(ctx context.Context, b messages.BranchID, req persistence.AppendRequest) (persistence.Node, error) {
	g.entered <- struct{}{}
	<-g.release
	t, err := g.Store.Append(ctx, b, req)
	g.appended <- err
	return t, err
}

func setup(t *testing.T) (*frame.Client, *gateStore) {
	t.Helper()
	store := memstore.New(persistence.Limits{MaxPayloadBytes: 1 << 20})
	t.Cleanup(func() { store.Close() })
	gate := &gateStore{Store: store, entered: make(chan struct{}), release: make(chan struct{}),
		appended: make(chan error, 16)}
	srv, err := server.ListenAndServe(context.Background(), "127.0.0.1:0", gate, server.Options{MaxPayload: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := frame.Dial(t.Context(), srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, gate
}

func TestCanceledCallLeavesConnectionUsable(t *testing.T) {
	c, gate := setup(t)
	h, err := c.CreateBranch(t.Context(), persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("late")})
		done <- err
	}()
	<-gate.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Append after cancel = %v, want context.Canceled", err)
	}
	close(gate.release) // the late answer arrives and is dropped
	// The server runs calls concurrently: the next append must not
	// overtake the canceled one.
	if err := <-gate.appended; err != nil {
		t.Fatalf("the canceled append, on the server: %v", err)
	}
	go func() {
		for range gate.entered {
		}
	}()
	t.Cleanup(func() { close(gate.entered) })
	tr, err := c.Append(t.Context(), h.Branch, persistence.AppendRequest{Payload: []byte("next")})
	if err != nil {
		t.Fatalf("Append after a canceled call: %v", err)
	}
	// The canceled append was sent, so the server ran it: the new turn
	// is its child.
	if tr.Depth != 1 {
		t.Fatalf("depth = %d, want 1 (after the canceled but executed append)", tr.Depth)
	}
}

func TestCloseFailsCallsInFlight(t *testing.T) {
	c, gate := setup(t)
	h, err := c.CreateBranch(t.Context(), persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Append(t.Context(), h.Branch, persistence.AppendRequest{Payload: []byte("x")})
		done <- err
	}()
	<-gate.entered
	c.Close()
	if err := <-done; !errors.Is(err, frame.ErrClosed) {
		t.Fatalf("a call in flight during Close = %v, want ErrClosed", err)
	}
	close(gate.release)
	if _, err := c.Head(t.Context(), h.Branch); !errors.Is(err, frame.ErrClosed) {
		t.Fatalf("a call after Close = %v, want ErrClosed", err)
	}
}

func TestLimitOutOfRange(t *testing.T) {
	c, _ := setup(t)
	h, _ := c.CreateBranch(t.Context(), persistence.BranchSpec{})
	if _, err := c.GetLast(t.Context(), h.Branch, -1); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("GetLast(-1) = %v, want ErrInvalidArgument", err)
	}
}

func Example() {
	ctx := context.Background()
	store := memstore.New(persistence.Limits{MaxPayloadBytes: 1 << 20})
	defer store.Close()
	srv, err := server.ListenAndServe(ctx, "127.0.0.1:0", store, server.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	c, err := frame.Dial(ctx, srv.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	h, _ := c.CreateBranch(ctx, persistence.BranchSpec{})
	var last persistence.Node
	for _, text := range []string{"hello", "how are you?", "fine"} {
		last, _ = c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte(text)})
	}
	// A conditional append fails when the head moved.
	stale := messages.TurnID{}
	_, err = c.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("x"), ExpectParent: &stale})
	var fe *frame.Error
	if errors.As(err, &fe) && errors.Is(err, persistence.ErrHeadMismatch) {
		fmt.Println("head mismatch; head is at the last turn:", fe.Head == last.ID)
	}
	fork, _ := c.Fork(ctx, frame.ForkSpec{At: last.Parent})
	c.Append(ctx, fork.Branch, persistence.AppendRequest{Payload: []byte("great")})

	page, _ := c.GetLast(ctx, fork.Branch, 10)
	for _, t := range page.Nodes {
		p, _ := c.GetBlob(ctx, t.PayloadHash)
		fmt.Println(t.Depth, string(p))
	}
	// Output:
	// head mismatch; head is at the last turn: true
	// 0 hello
	// 1 how are you?
	// 2 great
}
