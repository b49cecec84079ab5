package frame

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Server defaults.
const (
	// DefaultMaxInFlight bounds the requests of one connection handled at
	// once; the server stops reading that connection while it is reached.
	DefaultMaxInFlight = 256
	// DefaultMaxInFlightBytes bounds the request bytes of one connection
	// held at once; a frame larger than that is still accepted when it is
	// the only one in flight.
	DefaultMaxInFlightBytes = 64 << 20
	// DefaultWriteTimeout is how long a write to a client that does not
	// read may block before the connection is dropped.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxConns bounds the connections served at once. One more
	// takes the place of the connection idle longest, if one has been
	// idle for DefaultEvictIdleAfter; else it is answered with an ERROR
	// frame (UNAVAILABLE) and closed.
	DefaultMaxConns = 1024
	// DefaultEvictIdleAfter is how long a connection must have been idle
	// (no request in flight, none read) to give its place to a new one
	// when the server is at MaxConns.
	DefaultEvictIdleAfter = time.Second
	// DefaultIdleTimeout is how long a connection may send nothing before
	// the server closes it (answers already due are written first).
	DefaultIdleTimeout = 5 * time.Minute
	// ServerName is sent in the HELLO reply.
	ServerName = "ctxinf"

	readBufferSize  = 64 << 10
	writeBufferSize = 64 << 10
	// After a protocol error the server half-closes and discards what the
	// client still sends, for at most lingerTime and lingerBytes, so that
	// the client reads the ERROR frame before the connection is reset.
	lingerTime  = time.Second
	lingerBytes = 1 << 20
)

// Log field names.
const (
	logRemote = "remote"
	logReqID  = "req_id"
	logType   = "msg_type"
	logAddr   = "addr"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("frame: server closed")

// Options configure a Server; zero values take the defaults.
type Options struct {
	// MaxFrame is the largest frame payload accepted (DefaultMaxFrame);
	// it is capped at MaxPayload + FrameOverhead.
	MaxFrame int
	// MaxPayload is the store's limit on one payload
	// (persistence.Limits.MaxPayloadBytes; persistence.DefaultMaxPayloadBytes).
	MaxPayload int64
	// MaxInFlight bounds the requests of one connection handled at once
	// (DefaultMaxInFlight).
	MaxInFlight int
	// MaxInFlightBytes bounds the request payload bytes of one connection
	// held at once (DefaultMaxInFlightBytes).
	MaxInFlightBytes int64
	// WriteTimeout bounds a blocked write to one client (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxConns bounds the connections served at once (DefaultMaxConns).
	MaxConns int
	// IdleTimeout closes a connection that sent nothing for this long
	// (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// EvictIdleAfter: at MaxConns, a new connection takes the place of
	// the one idle longest if it has been idle this long
	// (DefaultEvictIdleAfter); a negative value never evicts.
	EvictIdleAfter time.Duration
	// Authenticate, when set, makes every connection authenticate: its
	// first frame must be a HELLO (version >= TokenVersion) whose token
	// Authenticate accepts, else the connection gets an ERROR frame
	// UNAUTHENTICATED and is closed with no other frame read or served.
	// The principal (its Name not empty) names who connected, in logs,
	// and its Tenant is the connection's (see Tenancy). Nil serves
	// everyone, and ListenAndServe then listens on loopback only.
	// TokenAuth and TableAuth build one.
	Authenticate func(token string) (Principal, bool)
	// Tenancy, when set, scopes every connection to its tenant (the
	// principal's; persistence.DefaultTenant without Authenticate): a
	// branch or a turn of another tenant's is answered exactly as one
	// that does not exist, a branch it creates or forks is its tenant's
	// (persistence.BranchSpec.Tenant), and GET_BLOB answers only the
	// payloads of turns the connection was sent (see Tenancy). Nil: one
	// tenant, every branch visible.
	Tenancy Tenancy
	Log     zerolog.Logger
}

// Tenancy tells which tenant owns a branch or a turn;
// persistence.Database implements it. Each returns the store's own error for
// one that does not exist (persistence.BranchNotFound, NodeNotFound),
// and "" for one that is no tenant's.
type Tenancy interface {
	BranchTenant(ctx context.Context, branch messages.BranchID) (string, error)
	TurnTenant(ctx context.Context, turn messages.NodeID) (string, error)
}

// MaxSeenBlobs is how many payload hashes a connection scoped by
// Tenancy remembers having been sent (in turns of its answers), the
// ones GET_BLOB answers on it; beyond it the oldest are forgotten, and
// their turns must be read again before their blobs.
const MaxSeenBlobs = 1 << 16

// Server serves the frame protocol over a persistence.Store. Set the
// exported fields before the first Serve or ServeConn; zero values take
// the defaults of Options. Each connection has one goroutine reading
// frames; requests run concurrently and are answered as they finish,
// matched by req_id; answers are written whole, one at a time.
type Server struct {
	Store            persistence.Store
	MaxFrame         int
	MaxPayload       int64
	MaxInFlight      int
	MaxInFlightBytes int64
	WriteTimeout     time.Duration
	MaxConns         int
	IdleTimeout      time.Duration
	EvictIdleAfter   time.Duration
	Authenticate     func(token string) (Principal, bool)
	Tenancy          Tenancy
	Log              zerolog.Logger

	initOnce sync.Once
	maxFrame int // effective
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{} // closed by Shutdown and Close

	mu        sync.Mutex
	closing   bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	evicted   int // of conns, those evicted and closing
	// protoLog limits the protocol error lines: a peer opening
	// connections that each send garbage gets a few lines a minute, and
	// the next line says how many were left out.
	protoLog logLimiter
	wg       sync.WaitGroup // Serve loops and connections
	addr     net.Addr
}

// New returns a Server for store configured by opts.
func New(store persistence.Store, opts Options) *Server {
	return &Server{
		Store: store, MaxFrame: opts.MaxFrame, MaxPayload: opts.MaxPayload,
		MaxInFlight: opts.MaxInFlight, MaxInFlightBytes: opts.MaxInFlightBytes,
		WriteTimeout: opts.WriteTimeout, MaxConns: opts.MaxConns, IdleTimeout: opts.IdleTimeout,
		EvictIdleAfter: opts.EvictIdleAfter, Authenticate: opts.Authenticate, Tenancy: opts.Tenancy, Log: opts.Log,
	}
}

// ListenAndServe listens on the TCP address addr ("127.0.0.1:0" picks a
// port) and serves in the background until Shutdown or Close; ctx bounds
// only the listen. Addr returns the bound address. An address beyond
// loopback is refused (ErrPublicBind) unless opts.Authenticate is set.
func ListenAndServe(ctx context.Context, addr string, store persistence.Store, opts Options) (*Server, error) {
	if store == nil {
		return nil, errors.New("frame: ListenAndServe: store is nil")
	}
	if err := checkBind(addr, opts.Authenticate != nil); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("frame: listen %s: %w", addr, err)
	}
	s := New(store, opts)
	s.init()
	s.mu.Lock()
	s.addr = l.Addr()
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.serve(l); err != nil && !errors.Is(err, ErrServerClosed) {
			s.Log.Error().Err(err).Str(logAddr, l.Addr().String()).Msg("frame: serve stopped")
		}
	}()
	s.Log.Info().Str(logAddr, l.Addr().String()).Int("max_frame", s.maxFrame).Bool("auth", s.Authenticate != nil).Msg("frame: listening")
	return s, nil
}

// Addr returns the address ListenAndServe bound, or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// EffectiveMaxFrame returns the largest frame payload the server accepts.
func (s *Server) EffectiveMaxFrame() int {
	s.init()
	return s.maxFrame
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		if s.MaxPayload <= 0 {
			s.MaxPayload = persistence.DefaultMaxPayloadBytes
		}
		s.maxFrame = MaxFrameFor(s.MaxFrame, s.MaxPayload)
		if s.MaxInFlight <= 0 {
			s.MaxInFlight = DefaultMaxInFlight
		}
		if s.MaxInFlightBytes <= 0 {
			s.MaxInFlightBytes = DefaultMaxInFlightBytes
		}
		if s.WriteTimeout <= 0 {
			s.WriteTimeout = DefaultWriteTimeout
		}
		if s.MaxConns <= 0 {
			s.MaxConns = DefaultMaxConns
		}
		if s.IdleTimeout <= 0 {
			s.IdleTimeout = DefaultIdleTimeout
		}
		if s.EvictIdleAfter == 0 {
			s.EvictIdleAfter = DefaultEvictIdleAfter
		}
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.done = make(chan struct{})
		s.listeners = make(map[net.Listener]struct{})
		s.conns = make(map[*conn]struct{})
	})
}

// Serve accepts connections on l and serves each until Shutdown or
// Close, when it returns ErrServerClosed. It closes l.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	return s.serve(l)
}

func (s *Server) serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.Log.Warn().Err(err).Dur("retry_in", backoff).Msg("frame: accept")
			select {
			case <-time.After(backoff):
			case <-s.done:
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		c, ok := s.newConn(nc)
		if !ok {
			continue
		}
		go func() {
			defer s.wg.Done()
			c.serve()
		}()
	}
}

// ServeConn serves one connection until it ends; it closes nc.
func (s *Server) ServeConn(nc net.Conn) {
	s.init()
	c, ok := s.newConn(nc)
	if !ok {
		return
	}
	defer s.wg.Done()
	c.serve()
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// newConn registers a connection; the caller must call s.wg.Done when it
// has been served.
func (s *Server) newConn(nc net.Conn) (*conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		nc.Close()
		return nil, false
	}
	if len(s.conns)-s.evicted >= s.MaxConns && !s.evictIdle() {
		go s.refuse(nc)
		return nil, false
	}
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{
		s: s, nc: nc, ctx: ctx, cancel: cancel,
		r:       NewReader(nc, readBufferSize),
		w:       NewWriter(nc, writeBufferSize, s.WriteTimeout),
		sem:     make(chan struct{}, s.MaxInFlight),
		bytes:   newBudget(s.MaxInFlightBytes),
		stopped: make(chan struct{}),
		log:     s.Log.With().Str(logRemote, nc.RemoteAddr().String()).Logger(),
	}
	if s.Tenancy != nil {
		c.scope = &scope{t: s.Tenancy, tenant: persistence.DefaultTenant}
	}
	c.peerMax.Store(int64(DefaultMaxFrame))
	c.active()
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c, true
}

// refuse tells a connection over MaxConns why, in an ERROR frame for
// req_id 0 on a short deadline, and closes it.
func (s *Server) refuse(nc net.Conn) {
	s.Log.Warn().Int("max_conns", s.MaxConns).Msg("frame: connection refused: too many connections")
	e := &Error{Code: CodeUnavailable, Message: fmt.Sprintf(
		"too many connections: the server serves at most %d at once (max_conns) and none of them is idle; retry later", s.MaxConns)}
	nc.SetWriteDeadline(time.Now().Add(time.Second))
	nc.Write(AppendFrame(nil, MsgError, 0, func(b []byte) []byte { return AppendError(b, e) }))
	nc.Close()
}

// evictIdle closes the connection idle longest, if one has been idle
// for EvictIdleAfter, to make room for a new one: a server at MaxConns
// does not keep new clients out behind idle ones until IdleTimeout. The
// evicted client is told why in an ERROR frame. s.mu is held.
func (s *Server) evictIdle() bool {
	if s.EvictIdleAfter < 0 {
		return false
	}
	now := monotonicNow()
	var victim *conn
	var idle int64
	for c := range s.conns {
		if c.evicted.Load() || c.inFlight.Load() > 0 {
			continue
		}
		if d := now - c.lastActive.Load(); d >= int64(s.EvictIdleAfter) && (victim == nil || d > idle) {
			victim, idle = c, d
		}
	}
	if victim == nil {
		return false
	}
	victim.evicted.Store(true)
	s.evicted++
	victim.log.Debug().Dur("idle", time.Duration(idle)).Int("max_conns", s.MaxConns).Msg("frame: idle connection evicted for a new one")
	victim.stop()
	return true
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	if _, ok := s.conns[c]; ok && c.evicted.Load() {
		s.evicted--
	}
	delete(s.conns, c)
	s.mu.Unlock()
}

// beginClose marks the server closing, closes its listeners and returns
// its connections.
func (s *Server) beginClose() []*conn {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing {
		s.closing = true
		close(s.done)
	}
	for l := range s.listeners {
		l.Close()
	}
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}

// Shutdown stops accepting connections and reading requests, lets the
// requests already read finish and their answers be written, then closes
// every connection. If ctx ends first it closes everything at once (see
// Close) and returns ctx's error. A request whose frame was not fully
// read is dropped unanswered.
func (s *Server) Shutdown(ctx context.Context) error {
	for _, c := range s.beginClose() {
		c.stop()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close closes the listeners and every connection at once, cancels the
// requests in flight and waits for their goroutines to end. It does not
// close the store.
func (s *Server) Close() error {
	cs := s.beginClose()
	s.cancel()
	for _, c := range cs {
		c.nc.Close()
	}
	s.wg.Wait()
	return nil
}

// conn is one client connection.
type conn struct {
	s       *Server
	nc      net.Conn
	ctx     context.Context // canceled by Close or when the client is gone
	cancel  context.CancelFunc
	r       *Reader
	w       *Writer
	sem     chan struct{} // requests in flight
	bytes   *budget       // their payload bytes
	peerMax atomic.Int64  // the client's largest frame, from HELLO
	// principal is who the connection authenticated as, set once by
	// the reader's goroutine before any request is handled; its Name is
	// "" until then, and for ever without Authenticate.
	principal Principal
	// scope is the connection's tenant and the blobs it was sent; nil
	// without Tenancy.
	scope *scope

	// For eviction at MaxConns: requests read and not yet answered, the
	// time (monotonicNow) of the last request read or answer written, and
	// whether the connection was evicted.
	inFlight   atomic.Int64
	lastActive atomic.Int64
	evicted    atomic.Bool

	handlers sync.WaitGroup
	stopOnce sync.Once
	stopped  chan struct{} // closed by stop: read no more requests
	log      zerolog.Logger
}

// stop makes the reader return without reading further requests.
func (c *conn) stop() {
	c.stopOnce.Do(func() {
		close(c.stopped)
		c.nc.SetReadDeadline(time.Now())
	})
}

// active notes that the connection is in use now.
func (c *conn) active() { c.lastActive.Store(monotonicNow()) }

// clockBase makes monotonicNow monotonic: durations since it are.
var clockBase = time.Now()

// monotonicNow is a point in time in ns, for comparisons only.
func monotonicNow() int64 { return int64(time.Since(clockBase)) }

func (c *conn) isStopped() bool {
	select {
	case <-c.stopped:
		return true
	default:
		return false
	}
}

func (c *conn) serve() {
	c.log.Debug().Msg("frame: connection opened")
	fatal := c.readLoop()
	c.handlers.Wait()
	if c.evicted.Load() {
		c.writeError(0, &Error{Code: CodeUnavailable, Message: fmt.Sprintf(
			"closed: idle while the server was at its limit of %d connections (max_conns); reconnect", c.s.MaxConns)})
	}
	if fatal {
		c.linger()
	}
	c.s.removeConn(c) // first: a client that saw the close finds its slot free
	c.nc.Close()
	c.cancel()
	c.log.Debug().Msg("frame: connection closed")
}

// readLoop reads requests until the connection ends, is stopped or
// breaks the protocol; it reports the last case, after answering it.
func (c *conn) readLoop() (fatal bool) {
	for {
		// An idle client is closed; stop's deadline must win over this one.
		c.nc.SetReadDeadline(time.Now().Add(c.s.IdleTimeout))
		if c.isStopped() {
			c.nc.SetReadDeadline(time.Now())
		}
		h, err := c.r.ReadHeader()
		if err != nil {
			c.readEnded(err)
			return false
		}
		maxFrame := c.s.maxFrame
		if c.s.Authenticate != nil && c.principal.Name == "" {
			// Nothing but an authenticating HELLO is read before it.
			if h.Type != MsgHello {
				c.fail(h, fmt.Errorf("%w: %s before HELLO: this server requires a token, sent in HELLO (version %d or higher) as the first frame",
					ErrUnauthenticated, h.Type, TokenVersion))
				return true
			}
			maxFrame = MaxHelloSize
		}
		if err := CheckRequest(h, maxFrame); err != nil {
			c.fail(h, err)
			return true
		}
		// Wait for room before reading, so that a client cannot make the
		// server hold more than MaxInFlight requests and MaxInFlightBytes.
		select {
		case c.sem <- struct{}{}:
		case <-c.stopped:
			return false
		case <-c.ctx.Done():
			return false
		}
		n := int64(h.Len)
		if !c.bytes.acquire(n, c.stopped, c.ctx.Done()) {
			return false
		}
		release := func() {
			c.bytes.release(n)
			<-c.sem
		}
		p, err := c.r.ReadPayload(h)
		if err != nil {
			release()
			c.readEnded(err)
			return false
		}
		c.active()
		req, err := DecodeRequest(h.Type, p)
		if err != nil {
			release()
			c.fail(h, err)
			return true
		}
		if hello, ok := req.(Hello); ok {
			// Answered in order, so that the limits it sets apply to
			// every request after it.
			err := c.hello(h.ReqID, hello)
			release()
			if err != nil {
				c.fail(h, err)
				return true
			}
			continue
		}
		c.handlers.Add(1)
		c.inFlight.Add(1)
		go c.handle(h.ReqID, req, release)
	}
}

func (c *conn) readEnded(err error) {
	if c.isStopped() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.log.Debug().Dur("idle_timeout", c.s.IdleTimeout).Msg("frame: idle connection closed")
		return
	}
	c.log.Debug().Err(err).Msg("frame: read")
}

// fail answers a frame that broke the protocol; the connection closes.
func (c *conn) fail(h Header, err error) {
	if ok, dropped := c.s.protoLog.allow(time.Now()); ok {
		ev := c.log.Warn().Err(err).Uint64(logReqID, h.ReqID).Stringer(logType, h.Type)
		if dropped > 0 {
			ev = ev.Int("not_logged_before", dropped)
		}
		ev.Msg("frame: protocol error, closing connection")
	}
	c.writeError(h.ReqID, ErrorFor(err))
}

// linger half-closes a connection that broke the protocol and discards
// what the client still sends, so that the client reads the ERROR frame
// instead of a reset.
func (c *conn) linger() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, c.nc, lingerBytes)
}

func (c *conn) hello(reqID uint64, m Hello) error {
	if m.Version == 0 {
		return fmt.Errorf("%w: client speaks version %d, the server %d", ErrUnsupportedVersion, m.Version, Version)
	}
	if err := c.authenticate(m); err != nil {
		return err
	}
	peer := int64(DefaultMaxFrame)
	if m.MaxFrame != 0 {
		peer = max(int64(m.MaxFrame), MinMaxFrame)
	}
	c.peerMax.Store(peer)
	maxFrame := min(int64(c.s.maxFrame), peer)
	reply := HelloReply{
		Version:    min(m.Version, Version),
		MaxFrame:   uint32(c.s.maxFrame),
		MaxPage:    uint32(MaxPageFor(int(maxFrame))),
		MaxPayload: uint32(min(c.s.MaxPayload, 1<<32-1)),
		Name:       ServerName,
	}
	c.log.Debug().Str("client", m.Name).Uint16("version", m.Version).Str("principal", c.principal.Name).Msg("frame: hello")
	buf := AppendFrame(nil, MsgHello.Response(), reqID, reply.AppendPayload)
	c.write(buf, nil)
	return nil
}

// authenticate checks m's token when the server requires one. Every
// HELLO is checked, and a later one must name the same principal: a
// connection never changes who it is.
func (c *conn) authenticate(m Hello) error {
	if c.s.Authenticate == nil {
		return nil
	}
	if m.Version < TokenVersion || m.Token == "" {
		return fmt.Errorf("%w: HELLO (version %d) carries no token: this server requires one (HELLO version %d or higher)",
			ErrUnauthenticated, m.Version, TokenVersion)
	}
	p, ok := c.s.Authenticate(m.Token)
	if !ok || p.Name == "" {
		return fmt.Errorf("%w: the token in HELLO is not one the server accepts", ErrUnauthenticated)
	}
	if c.principal.Name != "" {
		if p != c.principal {
			return fmt.Errorf("%w: a later HELLO names another principal than the connection's first", ErrUnauthenticated)
		}
		return nil
	}
	c.principal = p
	if c.scope != nil {
		c.scope.tenant = p.Tenant
	}
	return nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func (c *conn) handle(reqID uint64, req Request, release func()) {
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Stringer(logType, req.Type()).Msg("frame: request panicked")
			c.writeError(reqID, &Error{Code: CodeInternal, Message: "internal error"})
		}
		if cap(*bp) <= 1<<20 {
			bufPool.Put(bp)
		}
		release()
		c.active()
		c.inFlight.Add(-1)
		c.handlers.Done()
	}()
	buf, tail, err := c.s.answer(c.ctx, c.scope, reqID, req, (*bp)[:0], c.maxAnswer())
	if err != nil {
		c.writeError(reqID, ErrorFor(err))
		return
	}
	*bp = buf
	c.write(buf, tail)
}

// maxAnswer is the largest payload the client accepts.
func (c *conn) maxAnswer() int {
	return int(min(int64(c.s.maxFrame), c.peerMax.Load()))
}

func (c *conn) writeError(reqID uint64, e *Error) {
	c.write(AppendFrame(nil, MsgError, reqID, func(b []byte) []byte { return AppendError(b, e) }), nil)
}

func (c *conn) write(frame, tail []byte) {
	if err := c.w.WriteFrame(frame, tail); err != nil {
		// The client is gone or does not read: drop the connection.
		c.cancel()
		c.nc.Close()
	}
}

// answer runs req against the store and appends its answer frame to buf;
// tail, when not nil, is the rest of the payload (a blob), not copied.
// With a scope, every branch and turn req names is checked first to be
// the scope's tenant's, in the same words as one that does not exist.
func (s *Server) answer(ctx context.Context, sc *scope, reqID uint64, req Request, buf []byte, maxAnswer int) (frame, tail []byte, err error) {
	st := s.Store
	maxPage := MaxPageFor(maxAnswer)
	pageSize := func(limit uint32) int {
		if limit > persistence.MaxPageNodes {
			return int(limit) // the store reports the limit
		}
		return min(int(limit), maxPage)
	}
	rt := req.Type().Response()
	switch m := req.(type) {
	case CreateRequest:
		if !m.At.IsZero() {
			if err := sc.ownTurn(ctx, m.At, "fork at turn: %w"); err != nil {
				return nil, nil, err
			}
		}
		h, err := st.CreateBranch(ctx, persistence.BranchSpec{ID: m.Branch, At: m.At, Tenant: sc.tenantName()})
		if err != nil {
			return nil, nil, err
		}
		return AppendFrame(buf, rt, reqID, func(b []byte) []byte { return AppendHead(b, h) }), nil, nil
	case ForkRequest:
		at := m.At
		switch {
		case m.Source.IsZero() == m.At.IsZero():
			return nil, nil, fmt.Errorf("%w: CTX_FORK needs exactly one of source and at", persistence.ErrInvalidArgument)
		case !m.Source.IsZero():
			if err := sc.ownBranch(ctx, m.Source); err != nil {
				return nil, nil, err
			}
			h, err := st.Head(ctx, m.Source)
			if err != nil {
				return nil, nil, err
			}
			at = h.Node
		default:
			if err := sc.ownTurn(ctx, m.At, "fork at turn: %w"); err != nil {
				return nil, nil, err
			}
		}
		h, err := st.CreateBranch(ctx, persistence.BranchSpec{ID: m.Branch, At: at, Tenant: sc.tenantName()})
		if err != nil {
			return nil, nil, err
		}
		return AppendFrame(buf, rt, reqID, func(b []byte) []byte { return AppendHead(b, h) }), nil, nil
	case HeadRequest:
		if err := sc.ownBranch(ctx, m.Branch); err != nil {
			return nil, nil, err
		}
		h, err := st.Head(ctx, m.Branch)
		if err != nil {
			return nil, nil, err
		}
		return AppendFrame(buf, rt, reqID, func(b []byte) []byte { return AppendHead(b, h) }), nil, nil
	case AppendRequest:
		if err := sc.ownBranch(ctx, m.Branch); err != nil {
			return nil, nil, err
		}
		t, err := st.Append(ctx, m.Branch, persistence.AppendRequest{
			Payload: m.Payload, TypeTag: m.TypeTag, Codec: m.Codec, Flags: m.Flags, ExpectParent: m.ExpectParent,
		})
		if err != nil {
			return nil, nil, err
		}
		sc.sent(t)
		return AppendFrame(buf, rt, reqID, func(b []byte) []byte { return AppendNode(b, t) }), nil, nil
	case LastRequest:
		if err := sc.ownBranch(ctx, m.Branch); err != nil {
			return nil, nil, err
		}
		p, err := st.Last(ctx, m.Branch, pageSize(m.Limit))
		if err != nil {
			return nil, nil, err
		}
		sc.sent(p.Nodes...)
		return AppendFrame(buf, rt, reqID, func(b []byte) []byte { return AppendPage(b, p) }), nil, nil
	case BeforeRequest:
		if err := sc.ownTurn(ctx, m.Before, "%w"); err != nil {
			return nil, nil, err
		}
		p, err := st.Before(ctx, m.Before, pageSize(m.Limit))
		if err != nil {
			return nil, nil, err
		}
		sc.sent(p.Nodes...)
		return AppendFrame(buf, rt, reqID, func(b []byte) []byte { return AppendPage(b, p) }), nil, nil
	case RangeRequest:
		if err := sc.ownBranch(ctx, m.Branch); err != nil {
			return nil, nil, err
		}
		p, err := st.Range(ctx, m.Branch, m.Start, pageSize(m.Limit))
		if err != nil {
			return nil, nil, err
		}
		sc.sent(p.Nodes...)
		return AppendFrame(buf, rt, reqID, func(b []byte) []byte { return AppendRangePage(b, p) }), nil, nil
	case BlobRequest:
		if !sc.wasSent(m.Hash) {
			return nil, nil, persistence.BlobNotFound(m.Hash)
		}
		blob, err := st.Blob(ctx, m.Hash)
		if err != nil {
			return nil, nil, err
		}
		if len(blob) > maxAnswer {
			return nil, nil, &Error{Code: CodeResponseTooLarge, Message: fmt.Sprintf(
				"blob %s is %d bytes, over the client's maximum frame of %d", m.Hash, len(blob), maxAnswer)}
		}
		buf = AppendHeader(buf, Header{Len: uint32(len(blob)), Type: rt, ReqID: reqID})
		return buf, blob, nil
	}
	return nil, nil, fmt.Errorf("%w: %s has no handler", ErrUnknownType, req.Type())
}

// scope is what a connection of a server with Tenancy sees: its
// tenant's branches and turns, and the blobs of the turns it was sent.
// A nil scope sees everything.
type scope struct {
	t      Tenancy
	tenant string // set before the first request is handled

	mu   sync.Mutex
	seen map[persistence.Hash]struct{}
	ring []persistence.Hash // seen's hashes, oldest first from next
	next int
}

func (sc *scope) tenantName() string {
	if sc == nil {
		return ""
	}
	return sc.tenant
}

// ownBranch fails unless branch exists and is the scope's tenant's;
// another tenant's is the error of a branch that does not exist.
func (sc *scope) ownBranch(ctx context.Context, branch messages.BranchID) error {
	if sc == nil {
		return nil
	}
	t, err := sc.t.BranchTenant(ctx, branch)
	if err != nil {
		return err
	}
	if t != sc.tenant {
		return persistence.BranchNotFound(branch)
	}
	return nil
}

// ownTurn fails unless turn exists and is the scope's
// tenant's; another tenant's is the error of a turn that does not
// exist. format wraps the error (%w) as the store wraps it.
func (sc *scope) ownTurn(ctx context.Context, turn messages.NodeID, format string) error {
	if sc == nil {
		return nil
	}
	t, err := sc.t.TurnTenant(ctx, turn)
	if err == nil && t != sc.tenant {
		err = persistence.NodeNotFound(turn)
	}
	if err != nil {
		return fmt.Errorf(format, err)
	}
	return nil
}

// sent remembers the payloads of turns about to be sent.
func (sc *scope) sent(turns ...persistence.Node) {
	if sc == nil || len(turns) == 0 {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.seen == nil {
		sc.seen = make(map[persistence.Hash]struct{})
	}
	for _, t := range turns {
		h := t.PayloadHash
		if h.IsZero() {
			continue
		}
		if _, ok := sc.seen[h]; ok {
			continue
		}
		if len(sc.ring) < MaxSeenBlobs {
			sc.ring = append(sc.ring, h)
		} else {
			delete(sc.seen, sc.ring[sc.next])
			sc.ring[sc.next] = h
			sc.next = (sc.next + 1) % MaxSeenBlobs
		}
		sc.seen[h] = struct{}{}
	}
}

// wasSent reports whether GET_BLOB may answer h on the connection.
func (sc *scope) wasSent(h persistence.Hash) bool {
	if sc == nil {
		return true
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	_, ok := sc.seen[h]
	return ok
}

// budget is a count of bytes that one goroutine takes and any returns.
type budget struct {
	mu    sync.Mutex
	max   int64
	avail int64
	wake  chan struct{} // one taker waits at a time
}

func newBudget(n int64) *budget {
	return &budget{max: n, avail: n, wake: make(chan struct{}, 1)}
}

// acquire takes n bytes, waiting for returns; a request larger than the
// whole budget gets it when nothing else is held. It reports false when
// stop or done closed first.
func (b *budget) acquire(n int64, stop, done <-chan struct{}) bool {
	for {
		b.mu.Lock()
		if b.avail >= n || b.avail == b.max {
			b.avail -= n
			b.mu.Unlock()
			return true
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-stop:
			return false
		case <-done:
			return false
		}
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.avail += n
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// logLimiter lets protoLogBurst lines through in each protoLogPeriod and
// counts the others.
type logLimiter struct {
	mu      sync.Mutex
	start   time.Time
	n       int
	dropped int
}

const (
	protoLogBurst  = 10
	protoLogPeriod = time.Minute
)

// allow reports whether to log a line at now, and how many lines were
// not logged since the last one that was.
func (l *logLimiter) allow(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= protoLogPeriod {
		l.start, l.n = now, 0
	}
	if l.n >= protoLogBurst {
		l.dropped++
		return false, 0
	}
	l.n++
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}
