// Package frame is the Go client of ContextInfinity's binary frame
// protocol (docs/FRAME_PROTOCOL.md): the context store's operations —
// create and fork branches, append turns, page history, fetch payloads —
// over one persistent TCP connection.
//
// A Client is safe for concurrent use: calls from many goroutines are
// pipelined on its one connection and their answers matched by request
// id, so a slow call does not hold up the others. The server handles
// pipelined requests concurrently: two appends to one branch sent without
// waiting may commit in either order; wait for the first answer, or set
// AppendRequest.ExpectParent, when order matters.
//
// Ids are the project's 16-byte ULIDs (messages.BranchID,
// messages.NodeID); answers are the persistence package's types. A failed
// request returns an *Error whose Code is stable; errors.Is matches it
// against the persistence sentinels (persistence.ErrHeadMismatch,
// persistence.ErrBranchNotFound, persistence.ErrNotFound, ...).
package frame

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	wire "github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Error is a request the server refused: a stable Code, a message naming
// the field and limit, and for CodeHeadMismatch the branch's actual Head.
type Error = wire.Error

// Code is the stable code of an Error.
type Code = wire.Code

// ServerInfo is what the server said about itself in HELLO.
type ServerInfo = wire.HelloReply

// The error codes; docs/FRAME_PROTOCOL.md lists their meanings.
const (
	CodeMalformed          = wire.CodeMalformed
	CodeUnknownType        = wire.CodeUnknownType
	CodeFrameTooLarge      = wire.CodeFrameTooLarge
	CodeUnsupportedVersion = wire.CodeUnsupportedVersion
	CodeUnauthenticated    = wire.CodeUnauthenticated
	CodeNotFound           = wire.CodeNotFound
	CodeBranchNotFound     = wire.CodeBranchNotFound
	CodeTurnNotFound       = wire.CodeTurnNotFound
	CodeBlobNotFound       = wire.CodeBlobNotFound
	CodeBranchExists       = wire.CodeBranchExists
	CodeHeadMismatch       = wire.CodeHeadMismatch
	CodeInvalidArgument    = wire.CodeInvalidArgument
	CodeDuplicate          = wire.CodeDuplicate
	CodeResponseTooLarge   = wire.CodeResponseTooLarge
	CodeCorrupt            = wire.CodeCorrupt
	CodeUnavailable        = wire.CodeUnavailable
	CodeInternal           = wire.CodeInternal
)

// ErrClosed is returned by calls on a client whose connection ended; when
// the server ended it with a protocol error, that *Error is wrapped too.
var ErrClosed = errors.New("frame: connection closed")

// ErrUnauthenticated matches (errors.Is) the error of Dial when the
// server requires a token and Options.Token is missing or not one it
// accepts.
var ErrUnauthenticated = wire.ErrUnauthenticated

// ErrProtocol is returned when the server's bytes break the protocol;
// the client closes the connection.
var ErrProtocol = errors.New("frame: protocol error from server")

// Options configure a Client; zero values take the defaults.
type Options struct {
	// MaxFrame is the largest answer accepted (wire.DefaultMaxFrame).
	MaxFrame int
	// Name identifies the client in the server's logs.
	Name string
	// Token authenticates the connection to a server that requires one
	// (`ctxinf serve` with server.tokens_env set): it is sent in HELLO,
	// which is then of version 2. Empty sends a version 1 HELLO, which
	// every server without tokens accepts. At most 1,024 bytes.
	Token string
	// WriteTimeout bounds a blocked write (30 s).
	WriteTimeout time.Duration
}

// ForkSpec says where a fork starts: at a turn (At) or at another
// branch's current head (Source); exactly one is set. ID zero lets the
// server choose the new branch's id.
type ForkSpec struct {
	ID     messages.BranchID
	Source messages.BranchID
	At     messages.NodeID
}

// Client is a connection to a frame protocol server.
type Client struct {
	nc       net.Conn
	w        *wire.Writer
	maxFrame int // largest answer accepted
	maxSend  int // largest request the server accepts
	info     ServerInfo
	nextID   atomic.Uint64
	closed   chan struct{}
	once     sync.Once

	mu      sync.Mutex
	pending map[uint64]chan reply
	err     error // why the connection ended; set once
}

type reply struct {
	h   wire.Header
	p   []byte
	err error
}

// Dial connects to the server at addr (host:port) and exchanges HELLO.
func Dial(ctx context.Context, addr string) (*Client, error) {
	return DialOptions(ctx, addr, Options{})
}

// DialOptions is Dial with options.
func DialOptions(ctx context.Context, addr string, opts Options) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("frame: dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return NewClient(ctx, nc, opts)
}

// NewClient runs the protocol on an open connection, which it owns from
// then on, and exchanges HELLO.
func NewClient(ctx context.Context, nc net.Conn, opts Options) (*Client, error) {
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = wire.DefaultMaxFrame
	}
	opts.MaxFrame = max(opts.MaxFrame, wire.MinMaxFrame)
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	if len(opts.Token) > wire.MaxTokenLen {
		nc.Close()
		return nil, fmt.Errorf("frame: token is %d bytes, over the limit of %d", len(opts.Token), wire.MaxTokenLen)
	}
	c := &Client{
		nc:       nc,
		w:        wire.NewWriter(nc, 64<<10, opts.WriteTimeout),
		maxFrame: opts.MaxFrame,
		maxSend:  wire.MinMaxFrame,
		closed:   make(chan struct{}),
		pending:  make(map[uint64]chan reply),
	}
	go c.readLoop(wire.NewReader(nc, 64<<10))
	// Without a token, version 1: the HELLO every server reads.
	hello := wire.Hello{Version: 1, MaxFrame: uint32(min(opts.MaxFrame, math.MaxUint32)), Name: opts.Name}
	if opts.Token != "" {
		hello.Version, hello.Token = wire.Version, opts.Token
	}
	h, p, err := c.call(ctx, hello)
	if err == nil {
		c.info, err = wire.DecodeHelloReply(p)
		c.expect(h, hello, &err)
	}
	if err == nil && (c.info.Version == 0 || c.info.Version > hello.Version) {
		err = fmt.Errorf("%w: the server answered version %d, the client asked for %d", wire.ErrUnsupportedVersion, c.info.Version, hello.Version)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("frame: hello: %w", err)
	}
	c.maxSend = max(int(c.info.MaxFrame), wire.MinMaxFrame)
	return c, nil
}

// Server returns what the server said about itself: version, maximum
// frame size, page and payload limits.
func (c *Client) Server() ServerInfo { return c.info }

// Close closes the connection; calls in flight return ErrClosed.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	return nil
}

// fail ends the connection for reason and fails every pending call.
func (c *Client) fail(reason error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = reason
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		c.nc.Close()
		close(c.closed)
		for _, ch := range pending {
			ch <- reply{err: reason}
		}
	})
}

func (c *Client) readLoop(r *wire.Reader) {
	var fatal *Error // a protocol error the server reported before closing
	for {
		h, err := r.ReadHeader()
		if err == nil {
			err = wire.CheckResponse(h, c.maxFrame)
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrProtocol, err)
			}
		}
		var p []byte
		if err == nil {
			p, err = r.ReadPayload(h)
		}
		if err != nil {
			switch {
			case fatal != nil:
				err = fmt.Errorf("%w: %w", ErrClosed, fatal)
			case !errors.Is(err, ErrProtocol):
				err = fmt.Errorf("%w: %w", ErrClosed, err)
			}
			c.fail(err)
			return
		}
		if h.Type == wire.MsgError {
			if e, err := wire.DecodeError(p); err == nil && e.Code.Fatal() {
				fatal = e
			}
		}
		c.mu.Lock()
		ch := c.pending[h.ReqID]
		delete(c.pending, h.ReqID)
		c.mu.Unlock()
		if ch != nil { // nil: the call was canceled
			ch <- reply{h: h, p: p}
		}
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// call sends req and waits for its answer frame. An ERROR answer is
// returned as *Error.
func (c *Client) call(ctx context.Context, req wire.Request) (wire.Header, []byte, error) {
	if m, ok := req.(wire.AppendRequest); ok && int64(len(m.Payload))+wire.AppendOverhead > int64(c.maxSend) {
		// Checked here so that an oversized turn fails alone instead of
		// ending the connection.
		return wire.Header{}, nil, &Error{Code: CodeFrameTooLarge, Message: fmt.Sprintf(
			"payload is %d bytes: the frame would be over the server's limit of %d bytes", len(m.Payload), c.maxSend)}
	}
	id := c.nextID.Add(1)
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		return wire.Header{}, nil, err
	}
	c.pending[id] = ch
	c.mu.Unlock()

	bp := bufPool.Get().(*[]byte)
	frame, tail := wire.EncodeRequest((*bp)[:0], id, req)
	err := c.w.WriteFrame(frame, tail)
	if cap(frame) <= 64<<10 {
		*bp = frame
		bufPool.Put(bp)
	}
	if err != nil {
		c.fail(fmt.Errorf("%w: write: %w", ErrClosed, err))
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.h, nil, r.err
		}
		if r.h.Type == wire.MsgError {
			e, err := wire.DecodeError(r.p)
			if err != nil {
				c.fail(fmt.Errorf("%w: %w", ErrProtocol, err))
				return r.h, nil, fmt.Errorf("%w: %w", ErrProtocol, err)
			}
			return r.h, nil, e
		}
		return r.h, r.p, nil
	case <-ctx.Done():
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		return wire.Header{}, nil, ctx.Err()
	}
}

// expect checks that h answers req and turns a decoding error into a
// protocol error that ends the connection.
func (c *Client) expect(h wire.Header, req wire.Request, err *error) {
	if *err == nil && h.Type != req.Type().Response() {
		*err = fmt.Errorf("%w: %s answered with %s", ErrProtocol, req.Type(), h.Type)
	} else if *err != nil {
		*err = fmt.Errorf("%w: %w", ErrProtocol, *err)
	} else {
		return
	}
	c.fail(*err)
}

func (c *Client) head(ctx context.Context, req wire.Request) (persistence.Head, error) {
	h, p, err := c.call(ctx, req)
	if err != nil {
		return persistence.Head{}, err
	}
	hd, err := wire.DecodeHead(p)
	c.expect(h, req, &err)
	return hd, err
}

// CreateBranch creates an empty branch (spec.At zero) or one based at an
// existing turn (CTX_CREATE).
func (c *Client) CreateBranch(ctx context.Context, spec persistence.BranchSpec) (persistence.Head, error) {
	return c.head(ctx, wire.CreateRequest{Branch: spec.ID, At: spec.At})
}

// Fork creates a branch whose head is an existing turn or another
// branch's current head (CTX_FORK). No history is copied; later appends
// to the source are not seen by the fork.
func (c *Client) Fork(ctx context.Context, spec ForkSpec) (persistence.Head, error) {
	return c.head(ctx, wire.ForkRequest{Branch: spec.ID, Source: spec.Source, At: spec.At})
}

// Head returns a branch's head (GET_HEAD).
func (c *Client) Head(ctx context.Context, branch messages.BranchID) (persistence.Head, error) {
	return c.head(ctx, wire.HeadRequest{Branch: branch})
}

// Append adds a turn at the branch head (APPEND_TURN) and returns it once
// it is durable. With req.ExpectParent set, it fails with CodeHeadMismatch
// (errors.Is persistence.ErrHeadMismatch) unless the head is that turn;
// the *Error's Head then says where the head is.
func (c *Client) Append(ctx context.Context, branch messages.BranchID, req persistence.AppendRequest) (persistence.Node, error) {
	w := wire.AppendRequest{
		Branch: branch, ExpectParent: req.ExpectParent,
		TypeTag: req.TypeTag, Codec: req.Codec, Flags: req.Flags, Payload: req.Payload,
	}
	h, p, err := c.call(ctx, w)
	if err != nil {
		return persistence.Node{}, err
	}
	t, err := wire.DecodeNode(p)
	c.expect(h, w, &err)
	return t, err
}

func limit(n int) (uint32, error) {
	if n < 0 || n > math.MaxUint32 {
		return 0, fmt.Errorf("%w: limit %d is out of range [0, %d]", persistence.ErrInvalidArgument, n, persistence.MaxPageNodes)
	}
	return uint32(n), nil
}

func (c *Client) page(ctx context.Context, req wire.Request) (persistence.Page, error) {
	h, p, err := c.call(ctx, req)
	if err != nil {
		return persistence.Page{}, err
	}
	pg, err := wire.DecodePage(p)
	c.expect(h, req, &err)
	return pg, err
}

// GetLast returns the last n turns of a branch, oldest first (GET_LAST).
// Pass the page's Next to GetBefore for older ones. A page holds at most
// Server().MaxPage turns; a larger n gets that many.
func (c *Client) GetLast(ctx context.Context, branch messages.BranchID, n int) (persistence.Page, error) {
	l, err := limit(n)
	if err != nil {
		return persistence.Page{}, err
	}
	return c.page(ctx, wire.LastRequest{Branch: branch, Limit: l})
}

// GetBefore returns up to n turns strictly older than before on its
// ancestry, oldest first (GET_BEFORE, cursor paging).
func (c *Client) GetBefore(ctx context.Context, before messages.NodeID, n int) (persistence.Page, error) {
	l, err := limit(n)
	if err != nil {
		return persistence.Page{}, err
	}
	return c.page(ctx, wire.BeforeRequest{Before: before, Limit: l})
}

// GetRangeByDepth returns the branch's turns at depths [start, start+n)
// and its head depth (GET_RANGE_BY_DEPTH).
func (c *Client) GetRangeByDepth(ctx context.Context, branch messages.BranchID, start uint64, n int) (persistence.RangePage, error) {
	l, err := limit(n)
	if err != nil {
		return persistence.RangePage{}, err
	}
	req := wire.RangeRequest{Branch: branch, Start: start, Limit: l}
	h, p, err := c.call(ctx, req)
	if err != nil {
		return persistence.RangePage{}, err
	}
	rp, err := wire.DecodeRangePage(p)
	c.expect(h, req, &err)
	return rp, err
}

// GetBlob returns the payload stored under hash (GET_BLOB).
func (c *Client) GetBlob(ctx context.Context, hash persistence.Hash) ([]byte, error) {
	req := wire.BlobRequest{Hash: hash}
	h, p, err := c.call(ctx, req)
	if err != nil {
		return nil, err
	}
	c.expect(h, req, &err)
	return p, err
}
