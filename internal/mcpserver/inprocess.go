package mcpserver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextinfinity/ctxinf/client"
)

// InProcessURL is the base URL of an in-process client (InProcess): no
// connection is made to it.
const InProcessURL = "http://ctxinf.in-process"

// InProcess returns a client of the HTTP API served by h in this
// process: each request is handled by h.ServeHTTP, without a connection,
// with the headers of header (a token) added. The API's JSON answers are
// buffered whole; a streamed answer (a turn's events) is not for it.
func InProcess(h http.Handler, header http.Header) *client.Client {
	return client.New(InProcessURL, client.WithHTTPClient(&http.Client{Transport: handlerTransport{h: h, header: header}}))
}

// handlerTransport is an http.RoundTripper that calls a handler.
type handlerTransport struct {
	h      http.Handler
	header http.Header
}

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, vs := range t.header {
		req.Header[k] = vs
	}
	if req.Body == nil {
		req.Body = http.NoBody
	}
	req.RequestURI = req.URL.RequestURI()
	req.RemoteAddr = "127.0.0.1:0" // in process
	w := &recorder{header: http.Header{}}
	t.h.ServeHTTP(w, req)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return &http.Response{Status: strconv.Itoa(w.code) + " " + http.StatusText(w.code), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.sent, Body: io.NopCloser(&w.body),
		ContentLength: int64(w.body.Len()), Request: req}, nil
}

// recorder is the http.ResponseWriter of an in-process request: the
// status, the headers as they were when it was written, and the body.
type recorder struct {
	header, sent http.Header
	code         int
	body         bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.code != 0 {
		return
	}
	w.code, w.sent = code, w.header.Clone()
}

func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

func (w *recorder) Flush() {}

// Handler is the streamable HTTP transport of the tools over api, the
// HTTP API's handler, which authenticates each request (mount it behind
// the same check): each request's tools call api in process with that
// request's token (its Authorization and X-Api-Key headers), so that
// they see the sessions of its tenant only. With tenantOf (the tenant
// of a token; nil: the API takes no tokens), an MCP session belongs to
// the tenant whose token opened it: a request of another tenant's token
// naming it is refused (403). Idle sessions close after idle.
func Handler(api http.Handler, version string, idle time.Duration, tenantOf func(token string) (string, bool)) http.Handler {
	s := New(Options{Version: version, Client: func(h http.Header) *client.Client { return InProcess(api, tokenOf(h)) }})
	h := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{SessionTimeout: idle}))
	if tenantOf == nil {
		return h
	}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		tenant, ok := tenantOf(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "tenant:" + tenant}, nil
	}
	h = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k := r.Header.Get("X-Api-Key"); k != "" && r.Header.Get("Authorization") == "" {
			r = r.Clone(r.Context()) // the key as the Anthropic SDKs send it, as a bearer token
			r.Header.Set("Authorization", "Bearer "+k)
		}
		h.ServeHTTP(w, r)
	})
}

// authHeaders are the headers of a request that carry its token.
var authHeaders = []string{"Authorization", "X-Api-Key"}

// tokenOf returns the headers of h that carry a token, nil if none.
func tokenOf(h http.Header) http.Header {
	var out http.Header
	for _, k := range authHeaders {
		if vs := h.Values(k); len(vs) > 0 {
			if out == nil {
				out = http.Header{}
			}
			out[k] = vs
		}
	}
	return out
}
