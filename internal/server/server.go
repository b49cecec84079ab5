// Package server is ContextInfinity's network face: an HTTP/JSON API
// with SSE streaming over the runtime (sessions, branches, turns,
// history, pins, pending turns, retrieval, context debug, models,
// export and import), health and readiness, and its OpenAPI document.
package server

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/auth"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/persistence"
)

// Options configure a Server. New takes no defaults of its own:
// OptionsOf maps the configuration's server section (whose defaults are
// internal/config.Default's) onto them, and New refuses a limit left
// unset.
type Options struct {
	// Addr is where Listen listens. An address that is not loopback is
	// refused unless Tokens is set.
	Addr string
	// Tokens are the bearer tokens a request must carry
	// ("Authorization: Bearer <token>", or "x-api-key: <token>" as the
	// Anthropic SDKs send it); none, here and in Tenants, means no
	// authentication, allowed on loopback only. They are the default
	// tenant's (persistence.DefaultTenant).
	Tokens []string
	// Tenants are the other tenants and their tokens: a token's requests
	// see the sessions of its tenant only (see Tenant).
	Tenants []Tenant
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// MaxInFlight bounds the requests handled at once; more get 429 with
	// Retry-After.
	MaxInFlight int
	// ReadHeaderTimeout and IdleTimeout bound slow clients;
	// ReadBodyTimeout is how long a request's body may take to arrive
	// once its headers have: a body not complete by then is answered 408
	// (request_timeout) and its slot of MaxInFlight freed.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	ReadBodyTimeout   time.Duration
	Log               zerolog.Logger
	// Forward, in a cluster, hands a request to the member that owns
	// its session (to, the runtime's *actors.NotOwnerError, names it),
	// with its body as it arrived, and writes that member's answer to
	// w; it returns false if it could not reach the owner, and the
	// request is answered 503 (unavailable) with Retry-After. A request
	// is forwarded once: one that carries ForwardedHeader, or whose
	// handler wrote its answer already, is answered here. nil: no
	// cluster.
	Forward func(w http.ResponseWriter, r *http.Request, body io.Reader, to *actors.NotOwnerError) bool
	// Metrics are served at /metrics; nil serves the HTTP metrics alone
	// (Metrics.Hook feeds the runtime's into them).
	Metrics *Metrics
	// ProxyCommitWithin is how long a proxied turn may hold the commit
	// of its acceptance for its response's (Runtime.SubmitDeferred):
	// the OpenAI APIs tell a client nothing before the response ends.
	// 0 commits it at once.
	ProxyCommitWithin time.Duration
	// ProxyQueue is how many proxied requests may wait for the turns of
	// their conversation before them to end; past it they get 429. 0
	// queues none: a conversation with a turn running answers 409 with
	// Retry-After, as the HTTP API does. ProxyQueueWait bounds a
	// request's wait; past it, 409 with Retry-After.
	ProxyQueue     int
	ProxyQueueWait time.Duration
	// ProxyMaxImport is how many earlier exchanges one proxied request
	// may bring into a conversation; more is 413.
	ProxyMaxImport int
}

// OptionsOf maps the server section of the configuration onto a
// server's options: its address and limits. What the section names
// outside itself (the tokens in tokens_env and each tenant's variable)
// and what is not configuration (Log, Forward, Metrics) stay unset; the
// frame protocol's address and the shutdown's drain are the command's.
func OptionsOf(c config.ServerConfig) Options {
	return Options{Addr: c.Addr, MaxBodyBytes: c.MaxBodyBytes, MaxInFlight: c.MaxInFlight,
		ReadHeaderTimeout: c.ReadHeaderTimeout, IdleTimeout: c.IdleTimeout, ReadBodyTimeout: c.ReadBodyTimeout,
		ProxyCommitWithin: c.ProxyCommitWithin, ProxyQueue: c.ProxyQueue, ProxyQueueWait: c.ProxyQueueWait,
		ProxyMaxImport: c.ProxyMaxImport}
}

// check reports every limit of o that is unset or out of range, each
// naming its field.
func (o Options) check() error {
	var errs []error
	positive := func(field string, ok bool, v any) {
		if !ok {
			errs = append(errs, fmt.Errorf("server: Options.%s: %v, want more than 0", field, v))
		}
	}
	positive("MaxBodyBytes", o.MaxBodyBytes > 0, o.MaxBodyBytes)
	positive("MaxInFlight", o.MaxInFlight > 0, o.MaxInFlight)
	positive("ReadHeaderTimeout", o.ReadHeaderTimeout > 0, o.ReadHeaderTimeout)
	positive("IdleTimeout", o.IdleTimeout > 0, o.IdleTimeout)
	positive("ReadBodyTimeout", o.ReadBodyTimeout > 0, o.ReadBodyTimeout)
	positive("ProxyQueueWait", o.ProxyQueueWait > 0, o.ProxyQueueWait)
	positive("ProxyMaxImport", o.ProxyMaxImport > 0, o.ProxyMaxImport)
	if o.ProxyCommitWithin < 0 {
		errs = append(errs, fmt.Errorf("server: Options.ProxyCommitWithin: %v, want 0 (at once) or more", o.ProxyCommitWithin))
	}
	if o.ProxyQueue < 0 {
		errs = append(errs, fmt.Errorf("server: Options.ProxyQueue: %d, want 0 (no queue) or more", o.ProxyQueue))
	}
	return errors.Join(errs...)
}

// Server serves the API over a runtime.
type Server struct {
	rt       *actors.Runtime
	opts     Options
	mux      *http.ServeMux
	ready    atomic.Bool
	inFlight atomic.Int64
	proxy    proxySessions
	// tokens maps each token to its tenant; tenantsErr is what is wrong
	// with Options.Tenants (Listen refuses to serve them).
	tokens     *auth.Table
	tenantsErr error
}

// route is one operation of the API; the OpenAPI document lists the same
// set (a test checks it).
type route struct {
	method, path string
	handle       func(s *Server, w http.ResponseWriter, r *http.Request) error
}

var routes = []route{
	{"GET", "/healthz", (*Server).health},
	{"GET", "/readyz", (*Server).readiness},
	{"GET", "/openapi.json", (*Server).openAPI},
	{"GET", "/metrics", (*Server).metrics},
	{"POST", "/v1/sessions", (*Server).createSession},
	{"GET", "/v1/sessions", (*Server).listSessions},
	{"GET", "/v1/sessions/{session}", (*Server).getSession},
	{"GET", "/v1/sessions/{session}/branches", (*Server).listBranches},
	{"GET", "/v1/sessions/{session}/export", (*Server).exportSession},
	{"DELETE", "/v1/sessions/{session}", (*Server).deleteSession},
	{"GET", "/v1/sessions/{session}/retention", (*Server).getRetention},
	{"PUT", "/v1/sessions/{session}/retention", (*Server).putRetention},
	{"POST", importPath, (*Server).importSession},
	{"GET", "/v1/branches/{branch}", (*Server).getBranch},
	{"DELETE", "/v1/branches/{branch}", (*Server).deleteBranch},
	{"POST", "/v1/branches/{branch}/forks", (*Server).fork},
	{"POST", "/v1/branches/{branch}/turns", (*Server).submitTurn},
	{"POST", "/v1/branches/{branch}/exchanges", (*Server).recordExchange},
	{"GET", "/v1/branches/{branch}/turns/{turn}", (*Server).getTurn},
	{"POST", "/v1/branches/{branch}/cancel", (*Server).cancel},
	{"GET", "/v1/branches/{branch}/history", (*Server).history},
	{"POST", "/v1/branches/{branch}/pins", (*Server).pin},
	{"GET", "/v1/branches/{branch}/pins", (*Server).listPins},
	{"DELETE", "/v1/branches/{branch}/pins/{pin}", (*Server).unpin},
	{"PUT", "/v1/branches/{branch}/pins/{pin}", (*Server).editPin},
	{"GET", "/v1/branches/{branch}/pending", (*Server).pending},
	{"POST", "/v1/branches/{branch}/commit", (*Server).commit},
	{"POST", "/v1/branches/{branch}/reindex", (*Server).reindex},
	{"POST", "/v1/branches/{branch}/search", (*Server).search},
	{"GET", "/v1/branches/{branch}/context", (*Server).contextDebug},
	{"PUT", "/v1/branches/{branch}/model", (*Server).selectModel},
	{"PUT", "/v1/branches/{branch}/memory_tools", (*Server).selectMemoryTools},
	{"GET", "/v1/inspect", (*Server).inspect},
	{"GET", "/v1/models", (*Server).models},
	{"GET", "/v1/models/{model}", (*Server).getModel},
	{"POST", "/v1/embeddings", (*Server).embeddings},
	{"POST", "/v1/chat/completions", digestBody((*Server).chatCompletions)},
	{"POST", "/v1/responses", digestBody((*Server).responses)},
	{"GET", "/v1/responses/{response}", (*Server).getResponse},
	{"POST", anthropicMessagesPath, digestBody((*Server).anthropicMessages)},
	{"POST", anthropicMessagesPath + "/count_tokens", (*Server).anthropicCountTokens},
}

// New returns a server over rt, or an error naming each limit of opts
// that is unset or out of range (OptionsOf sets them all from the
// configuration). The runtime has recovered when it is open (actors.Open
// reconciles before it returns), so the server is ready at once;
// SetReady(false) marks it unready (shutting down).
func New(rt *actors.Runtime, opts Options) (*Server, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	s := &Server{rt: rt, opts: opts, mux: http.NewServeMux()}
	s.tokens, s.tenantsErr = TokenTable(opts)
	for _, rt := range routes {
		name := rt.method + " " + rt.path
		s.mux.HandleFunc(name, s.instrument(name, rt.handle))
	}
	s.mux.HandleFunc("/", s.noRoute)
	s.ready.Store(true)
	return s, nil
}

// instrument serves route name with h: an error h returns is answered
// as JSON, and the request is counted and timed.
func (s *Server) instrument(name string, h func(*Server, http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			// A handler that cuts its connection (an export whose read
			// failed after its first line) is counted as such.
			if v := recover(); v != nil {
				s.opts.Metrics.observe(name, codeAborted, time.Since(t0))
				panic(v)
			}
		}()
		var rec *bodyRecorder
		if s.opts.Forward != nil && r.Body != nil && r.Body != http.NoBody {
			rec = &bodyRecorder{ReadCloser: r.Body}
			r.Body = rec
		}
		err := h(s, sw, r)
		if no := (*actors.NotOwnerError)(nil); err != nil && s.opts.Forward != nil && errors.As(err, &no) && no.Owner != "" &&
			!sw.wrote && r.Header.Get(ForwardedHeader) == "" {
			body := io.Reader(http.NoBody)
			if rec != nil {
				body = rec.replay()
			}
			if s.opts.Forward(sw, r, body, no) {
				s.opts.Metrics.observe(name, sw.code, time.Since(t0))
				return
			}
		}
		if err != nil {
			if no := (*actors.NotOwnerError)(nil); errors.As(err, &no) && !sw.wrote {
				owner := no.Owner
				if owner == "" {
					owner = "unknown"
				}
				sw.Header().Set(OwnerHeader, owner)
			}
			if classify(err).Code == api.CodeInternal && r.Context().Err() == nil {
				// The client is told only that it happened (a client that
				// went away is not a server's error).
				s.opts.Log.Error().Err(err).Str("route", name).Msg("server: internal error")
			} else if errors.Is(err, persistence.ErrUnavailable) {
				s.opts.Log.Warn().Err(err).Str("route", name).Msg("server: the store's database is unreachable")
			}
			writeError(sw, r, err)
		}
		s.opts.Metrics.observe(name, sw.code, time.Since(t0))
	}
}

// ForwardedHeader marks a request one member of a cluster forwarded to
// another (Options.Forward); it names the member that forwarded it. A
// forwarded request is never forwarded again.
const ForwardedHeader = "Ctxinf-Forwarded-By"

// OwnerHeader is on the 503 answer of a member that does not own the
// request's session: it names the member this one believes owns it
// ("unknown" while the cluster forms). A member that forwarded the
// request there learns that the URL it used is not the owner's
// (Options.Forward).
const OwnerHeader = "Ctxinf-Owner"

// bodyRecorder keeps what a handler read of a request's body, so that
// a request whose session another member owns can be forwarded whole.
type bodyRecorder struct {
	io.ReadCloser
	read []byte
}

func (b *bodyRecorder) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read = append(b.read, p[:n]...)
	return n, err
}

// replay returns the body as it arrived: what was read, then the rest.
func (b *bodyRecorder) replay() io.Reader {
	return io.MultiReader(bytes.NewReader(b.read), b.ReadCloser)
}

// Handle serves h at pattern (a ServeMux pattern, "/mcp") behind the
// server's tokens and limits, as the API's routes are: a request without
// a valid token is refused before h sees it. Call it before serving.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// SetReady sets what /readyz answers.
func (s *Server) SetReady(ok bool) { s.ready.Store(ok) }

// ServeHTTP authenticates (the token's tenant goes on the request's
// context: tenantOf), bounds the body (its size and the time it takes
// to arrive) and the requests in flight, and routes. Health, readiness
// and metrics are never counted in nor refused by the in-flight limit:
// a monitor must see a server that is full.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.tokens.Len() > 0 && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
		tenant, ok := tenantOfRequest(s.tokens, r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ctxinf"`)
			refuse(w, r, &apiError{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized,
				Message: "a valid bearer token is required (Authorization: Bearer <token>, or x-api-key: <token>)"})
			return
		}
		r = r.WithContext(withTenant(r.Context(), tenant))
	}
	if !monitoring(r.URL.Path) {
		if n := s.inFlight.Add(1); n > int64(s.opts.MaxInFlight) {
			s.inFlight.Add(-1)
			refuse(w, r, &apiError{Status: http.StatusTooManyRequests, Code: api.CodeOverloaded, Message: fmt.Sprintf(
				"%d requests in flight, the limit is %d (server.max_in_flight)", n-1, s.opts.MaxInFlight)})
			return
		}
		defer s.inFlight.Add(-1)
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = newTimedBody(w, r.Body, s.opts.ReadBodyTimeout)
	}
	if r.Method != http.MethodPost || r.URL.Path != importPath { // an import streams: its lines are bounded instead
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	}
	s.mux.ServeHTTP(w, r)
}

// noRoute answers a request no route takes: 405 with Allow when the
// path is served for other methods, else 404; in the API's shape of the
// path (errorShapeOf).
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, r, notFound("no route %s %s (GET /openapi.json lists them)", r.Method, r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, r, &apiError{Status: http.StatusMethodNotAllowed, Code: api.CodeMethodNotAllowed,
		Message: fmt.Sprintf("%s %s: method not allowed; %s takes %s", r.Method, r.URL.Path, r.URL.Path, strings.Join(allow, ", "))})
}

// refuse answers a request refused before its body was read. A body is
// then not waited for (net/http would read what is left of it before
// answering, for ever if it never comes): the connection closes after
// the answer.
func refuse(w http.ResponseWriter, r *http.Request, ae *apiError) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	writeError(w, r, ae)
}

// monitoring reports whether path is one of the routes a monitor polls,
// which the in-flight limit leaves alone.
func monitoring(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

// timedBody is a request body that must arrive within a deadline: a read
// past it fails with the API's 408 (request_timeout). The deadline is
// the connection's, set by newTimedBody and lifted once the body has
// been read to its end, so that a response streamed for longer is not
// cut; after a timeout it stays, so that the server's own read of the
// rest fails at once and it closes the connection.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	ended   bool
}

func newTimedBody(w http.ResponseWriter, body io.ReadCloser, timeout time.Duration) io.ReadCloser {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
		return body // a connection without deadlines (not a net.Conn)
	}
	return &timedBody{ReadCloser: body, rc: rc, timeout: timeout}
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil || b.ended:
	case errors.Is(err, io.EOF):
		b.ended = true
		_ = b.rc.SetReadDeadline(time.Time{}) // net/http does too, when it starts its background read; not documented
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.ended = true
		return n, &apiError{Status: http.StatusRequestTimeout, Code: api.CodeRequestTimeout, Message: fmt.Sprintf(
			"body: not complete within %v of the request's headers (server.read_body_timeout)", b.timeout)}
	}
	return n, err
}

// ErrPublicBind is returned by ListenAndServe for an address that is not
// loopback when no token is configured.
var ErrPublicBind = errors.New("server: refusing to listen beyond loopback without bearer tokens (set server.tokens_env)")

// Listen checks the tenants and the bind policy, and listens on
// opts.Addr.
func (s *Server) Listen() (net.Listener, error) {
	if s.tenantsErr != nil {
		return nil, s.tenantsErr
	}
	host, _, err := net.SplitHostPort(s.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("server: addr %q: %w", s.opts.Addr, err)
	}
	if ip := net.ParseIP(host); s.tokens.Len() == 0 && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: %s", ErrPublicBind, s.opts.Addr)
	}
	return net.Listen("tcp", s.opts.Addr)
}

// Serve serves on l until ctx is done, then shuts down gracefully: it
// stops accepting, marks itself unready, and waits up to drain for the
// requests in flight (turns finalize or journal what they streamed).
func (s *Server) Serve(ctx context.Context, l net.Listener, drain time.Duration) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: s.opts.ReadHeaderTimeout, IdleTimeout: s.opts.IdleTimeout,
		ErrorLog: nil}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.SetReady(false)
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-done
	return err
}

// queryInt reads query parameter name, def when absent, within [lo, hi].
func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, invalid("%s: %q, want an integer from %d to %d", name, s, lo, hi)
	}
	return n, nil
}

//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	s.opts.Metrics.handler().ServeHTTP(w, r)
	return nil
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) readiness(w http.ResponseWriter, _ *http.Request) error {
	if !s.ready.Load() {
		return &apiError{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, Message: "not ready: recovering or shutting down"}
	}
	if err := s.rt.DB().CheckSpace(); errors.Is(err, persistence.ErrNoSpace) {
		// Reads go on, writes are 507: a load balancer routes writes
		// elsewhere until space is freed (then ready again by itself).
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "read_only", "message": apiMessage(err)})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}
