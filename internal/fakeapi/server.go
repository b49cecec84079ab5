// Package fakeapi serves scripted model APIs on loopback for tests and
// benchmarks: OpenAI Chat Completions and Responses and Anthropic Messages
// streams written from the providers' documentation, HTTP errors with
// their headers, and connections cut mid-stream. Nothing here reaches a
// network; a Server listens on 127.0.0.1 and stops when closed.
package fakeapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Event is one server-sent event. An empty Name writes a data line only
// (as Chat Completions streams do).
type Event struct {
	Name string
	Data string
}

// Reply is one scripted HTTP response: a stream of events (Status 0 or
// 200) or an error status with Body as JSON.
type Reply struct {
	Status int
	Header http.Header // extra headers (Retry-After, request ids)
	Body   string      // the body of a non-200 reply
	Events []Event
	// Cut drops the connection after the events, without ending the
	// stream: a disconnect mid-stream.
	Cut bool
	// Delay is slept before each event.
	Delay time.Duration
	// Linger holds the response open this long after its last event,
	// which is flushed: the end of the body comes after the end of the
	// stream, as it does over a network.
	Linger time.Duration
}

// Request is a request the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Server is a scripted API server on loopback. It is safe for concurrent
// use.
type Server struct {
	// URL is the server's root, http://127.0.0.1:port, without a path.
	URL string

	srv     *httptest.Server
	respond func(n int, r Request) Reply

	mu       sync.Mutex
	script   []Reply
	requests []Request
}

// New starts a server that answers the i-th request with the i-th reply
// and, once the script is used up, repeats the last reply (or answers 500
// when there was none).
func New(replies ...Reply) *Server {
	s := &Server{script: replies}
	s.start()
	return s
}

// NewFunc starts a server that answers each request with respond(n, r),
// n counting requests from 0. respond may be called concurrently.
func NewFunc(respond func(n int, r Request) Reply) *Server {
	s := &Server{respond: respond}
	s.start()
	return s
}

func (s *Server) start() {
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
}

// Close stops the server, dropping open connections.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	s.script = append(s.script, replies...)
	s.mu.Unlock()
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count is the number of requests received so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, req)
	var reply Reply
	switch {
	case s.respond != nil:
	case n < len(s.script):
		reply = s.script[n]
	case len(s.script) > 0:
		reply = s.script[len(s.script)-1]
	default:
		reply = Reply{Status: http.StatusInternalServerError, Body: `{"error":{"message":"fakeapi: no reply scripted"}}`}
	}
	s.mu.Unlock()
	if s.respond != nil {
		reply = s.respond(n, req)
	}
	write(w, r, reply)
}

// write sends reply on w.
func write(w http.ResponseWriter, r *http.Request, reply Reply) {
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	var buf bytes.Buffer
	for _, ev := range reply.Events {
		if reply.Delay > 0 {
			select {
			case <-time.After(reply.Delay):
			case <-r.Context().Done():
				return
			}
		}
		buf.Reset()
		writeEvent(&buf, ev)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if flusher != nil && reply.Delay > 0 {
			flusher.Flush()
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	if reply.Linger > 0 {
		select {
		case <-time.After(reply.Linger):
		case <-r.Context().Done():
		}
	}
	if reply.Cut {
		// Abort the response: the connection is closed without the
		// chunked stream's end, as a dropped connection looks.
		panic(http.ErrAbortHandler)
	}
}

// writeEvent writes ev in the SSE wire format.
func writeEvent(b *bytes.Buffer, ev Event) {
	if ev.Name != "" {
		b.WriteString("event: ")
		b.WriteString(ev.Name)
		b.WriteByte('\n')
	}
	for _, line := range strings.Split(ev.Data, "\n") {
		b.WriteString("data: ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
}
