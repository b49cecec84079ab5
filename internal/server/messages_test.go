package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// leaks are what an error message of the API must never hold: a Go
// package's prefix or a Go type.
var leaks = []string{"actors:", "core:", "persistence:", "messages: invalid", "ulid:", "struct {", "json:", "supervision:", "providers:"}

// checkNoLeak fails when message names Go internals.
func checkNoLeak(t *testing.T, where, message string) {
	t.Helper()
	for _, l := range leaks {
		if strings.Contains(message, l) {
			t.Errorf("%s: message %q holds %q", where, message, l)
		}
	}
}

// Every error the API answers names the field and what it wants in the
// API's own words, never the Go package or type that found it; a body
// may be empty where every field is optional, and holds one JSON object
// and nothing after it.
func TestErrorsInTheAPIsWords(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	f := fake.New(fake.Step{Block: block, Reply: "done"})
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider = f
		c.Models = map[string]actors.Model{"alpha": {Provider: local.New(local.Options{})}, "beta": {Provider: local.New(local.Options{})}}
	})
	// An empty body is {} where every field is optional.
	var created struct {
		Session persistence.SessionRow
		Branch  persistence.BranchRow
	}
	if st := ts.call(t, "POST", "/v1/sessions", nil, &created); st != 201 || created.Branch.ID.IsZero() {
		t.Fatalf("POST /v1/sessions with no body = %d %+v, want 201", st, created)
	}
	b := "/v1/branches/" + created.Branch.ID.String()

	// A turn in flight, held by the provider until block closes.
	turnDone := make(chan struct{})
	go func() {
		defer close(turnDone)
		resp, err := http.Post(ts.URL+b+"/turns", "application/json", strings.NewReader(`{"text":"hold on"}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	defer func() {
		close(block)
		<-turnDone
	}()
	for deadline := time.Now().Add(10 * time.Second); f.Calls() == 0; { // poll: until the turn is at its provider
		if time.Now().After(deadline) {
			t.Fatal("the first turn never reached its provider")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var busy apiErr
	if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": "me too"}, &busy); st != 409 {
		t.Fatalf("a second turn while one is in flight: %d %+v, want 409", st, busy)
	}

	for _, tc := range []struct {
		name         string
		method, path string
		body         any
		status       int
		code, msg    string
	}{
		{"busy", "", "", nil, 409, api.CodeBusy, ""}, // checked below
		{"unknown model", "PUT", b + "/model", `{"model":"x"}`, 400, api.CodeInvalid, `model: "x" is not configured; configured models: alpha, beta`},
		{"bad path id", "GET", "/v1/branches/xyz", nil, 400, api.CodeInvalid, `branch: "xyz" is not a valid id (26 characters of Crockford base32)`},
		{"bad session id", "GET", "/v1/sessions/xyz/branches", nil, 400, api.CodeInvalid, `session: "xyz" is not a valid id (26 characters of Crockford base32)`},
		{"type of a field", "POST", "/v1/sessions", `{"title": 5}`, 400, api.CodeInvalid, "title: want a string, got a number (at byte 11)"},
		{"type of an item", "POST", b + "/search", `{"query":"q","chunks":[7]}`, 400, api.CodeInvalid, "chunks[0]: want a string, got a number"},
		{"integer", "POST", b + "/search", `{"query":"q","k":1.5}`, 400, api.CodeInvalid, "k: want an integer, got number 1.5"},
		{"not an object", "POST", "/v1/sessions", `["title"]`, 400, api.CodeInvalid, "body: want a JSON object, got an array"},
		{"null", "POST", "/v1/sessions", `null`, 400, api.CodeInvalid, "body: want a JSON object, got null"},
		{"syntax", "POST", "/v1/sessions", `{"title":"a",}`, 400, api.CodeInvalid, "body: not valid JSON at byte 14"},
		{"cut short", "POST", "/v1/sessions", `{"title":"a"`, 400, api.CodeInvalid, "body: the JSON object ends early"},
		{"unknown field", "POST", "/v1/sessions", `{"titel":"a"}`, 400, api.CodeInvalid, "titel: unknown field; the fields are title"},
		{"trailing data", "POST", "/v1/sessions", `{"title":"a"} {"title":"b"}`, 400, api.CodeInvalid, "body: unexpected data after the JSON object"},
		{"trailing garbage", "POST", "/v1/sessions", `{"title":"a"}xyz`, 400, api.CodeInvalid, "body: unexpected data after the JSON object"},
		{"required body", "POST", b + "/turns", nil, 400, api.CodeInvalid, "body: required"},
		{"required body, pins", "POST", b + "/pins", "  ", 400, api.CodeInvalid, "body: required"},
		{"proxy body", "POST", "/v1/chat/completions", `{"model":"m","messages":[]} x`, 400, api.CodeInvalid, "body: unexpected data after the JSON object"},
		{"proxy type", "POST", "/v1/chat/completions", `{"messages":{}}`, 400, api.CodeInvalid, "messages: want an array, got an object"},
		{"import title", "POST", "/v1/sessions/import", `{"type":"session","format":2,"title":5}`, 400, api.CodeInvalid, `line 1: title: want a string, got a number`},
		{"import type", "POST", "/v1/sessions/import", `{"type":7}`, 400, api.CodeInvalid, `line 1: type: want a string, got a number`},
	} {
		var e struct {
			Error struct{ Code, Message string }
		}
		st := 0
		if tc.name == "busy" {
			st, e.Error = 409, busy.Error
			if want := "the branch has a turn in flight (turn "; !strings.Contains(e.Error.Message, want) ||
				!strings.Contains(e.Error.Message, "phase ") || !strings.HasSuffix(e.Error.Message, "; retry after it ends") {
				t.Errorf("busy: message %q, want %q…, phase P); retry after it ends", e.Error.Message, want)
			}
		} else {
			st = ts.call(t, tc.method, tc.path, tc.body, &e)
		}
		if st != tc.status || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.msg) {
			t.Errorf("%s: %s %s = %d %+v, want %d %s %q", tc.name, tc.method, tc.path, st, e.Error, tc.status, tc.code, tc.msg)
		}
		checkNoLeak(t, tc.name, e.Error.Message)
	}
}

// The runtime's sentinels and typed errors reach the client in the
// API's words, with their context and without their package.
func TestClassifySpeaksTheAPIsWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code string
		want string
	}{
		{&actors.UnknownModelError{Name: "x", Configured: []string{"a", "b"}}, api.CodeInvalid, `model: "x" is not configured; configured models: a, b`},
		{&actors.UnknownModelError{Name: "x", Configured: []string{"x"}, Why: "no API key in OPENAI_API_KEY"}, api.CodeInvalid, `model: "x" is configured but cannot be used: no API key in OPENAI_API_KEY`},
		{wrap("%w on branch B", actors.ErrNoTurnInFlight), api.CodeConflict, "no turn in flight on branch B"},
		{wrap("%w: query is empty", persistence.ErrInvalidArgument), api.CodeInvalid, "query is empty"},
		{wrap("%w: payload is 9 bytes, limit 8 (store.max_payload_bytes)", persistence.ErrTooLarge), api.CodeTooLarge, "too large: payload is 9 bytes, limit 8 (store.max_payload_bytes)"},
		{wrap("%w: turn 3 is responding; fork at a finished turn or wait", actors.ErrNotForkable), api.CodeInvalid, "cannot fork there: turn 3 is responding"},
		{wrap("%w: branch B", actors.ErrTimeout), api.CodeTimeout, "the runtime did not answer in time: branch B"},
		{wrap("load: %w", persistence.ErrNodeNotFound), api.CodeNotFound, "load: no such turn"},
		{&persistence.SpaceError{Dir: "/d", Free: 1, Need: 2, MinFree: 2}, api.CodeNoSpace, "insufficient storage: the file system of /d has 1 bytes free"},
		{io.ErrClosedPipe, api.CodeInternal, internalMessage},
		{fmt.Errorf("postgres: read branch row B: %w", errors.Join(errors.New("failed to connect to `user=postgres`"), persistence.ErrUnavailable)),
			api.CodeUnavailable, unavailableMessage},
	} {
		ae := classify(tc.err)
		if ae.Code != tc.code || !strings.HasPrefix(ae.Message, tc.want) {
			t.Errorf("classify(%v) = %s %q, want %s %q", tc.err, ae.Code, ae.Message, tc.code, tc.want)
		}
		checkNoLeak(t, tc.err.Error(), ae.Message)
	}
}

func wrap(format string, err error) error { return fmt.Errorf(format, err) }

// The body's deadline ends with the body: a turn streamed for longer than
// server.read_body_timeout is not cut (a deadline left on the connection
// would end net/http's background read, which cancels the request).
func TestBodyDeadlineDoesNotCutAStream(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	f := fake.New(fake.Step{Block: block, Reply: "after the deadline"})
	const timeout = 50 * time.Millisecond
	ts := newTestServerWith(t, Options{ReadBodyTimeout: timeout}, 0, func(c *actors.Config) { c.Provider = f })
	var created struct{ Branch persistence.BranchRow }
	ts.call(t, "POST", "/v1/sessions", nil, &created)
	go func() {
		for f.Calls() == 0 { // poll: until the turn is at its provider
			time.Sleep(time.Millisecond)
		}
		// Time passes beyond the body's deadline: that is the point.
		time.Sleep(6 * timeout)
		close(block)
	}()
	st, evs := readEvents(t, ts, "/v1/branches/"+created.Branch.ID.String()+"/turns", `{"text":"take your time"}`, nil)
	if st != 200 || len(evs) == 0 || evs[len(evs)-1].name != "done" {
		t.Fatalf("stream = %d %v, want 200 ending with done", st, evs)
	}
	var done doneEvent
	if err := json.Unmarshal([]byte(evs[len(evs)-1].data), &done); err != nil || done.Phase == messages.PhaseFailed {
		t.Fatalf("done = %+v, %v; want a turn that ended well", done, err)
	}
}
