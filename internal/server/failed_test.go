package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// failingServer is a test server whose model is f, with a context window
// of 600 tokens (100 of them for the response): a message of 3,000 words
// cannot fit.
func failingServer(t *testing.T, f *fake.Provider) (*testServer, string) {
	t.Helper()
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider, c.MaxOutputTokens, c.SafetyMargin = f.WithContextLimit(600), 100, 10
	})
	var created struct{ Branch persistence.BranchRow }
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "failing"}, &created); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	return ts, "/v1/branches/" + created.Branch.ID.String()
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, data string }

// readEvents posts body to path as a streamed request and returns its
// status and events; each, if not nil, sees every event as it comes.
func readEvents(t *testing.T, ts *testServer, path, body string, each func(sseEvent)) (int, []sseEvent) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []sseEvent
	name := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			evs = append(evs, sseEvent{name, d})
			if each != nil {
				each(evs[len(evs)-1])
			}
			name = ""
		}
	}
	return resp.StatusCode, evs
}

// doneEvent is the data of a streamed turn's "done" event.
type doneEvent struct {
	Phase   messages.TurnPhase
	Outcome messages.StepOutcome
	Error   string
	Code    string
}

// A turn that fails answers with the status and code of its cause and a
// message naming it, waited for or streamed, and its row says so in
// values that decode (never "step outcome(0)").
func TestFailedTurnsSayWhy(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("huge ", 3000)
	unauthorized := &providers.Error{Provider: "fake", StatusCode: 401, Message: "invalid api key"}
	for _, tc := range []struct {
		name      string
		f         *fake.Provider
		text      string
		status    int
		code      string
		msg       []string
		wantKind  messages.OutcomeKind
		wantReply bool
	}{
		{"context too large", fake.New(), huge, 422, api.CodeContextTooLarge,
			[]string{"context too large", "user ", "context_limit"}, messages.OutcomeFailed, false},
		{"provider 401", fake.New(fake.Step{Err: unauthorized}), "hello", 502, api.CodeProviderAuth,
			[]string{"status 401", "invalid api key"}, messages.OutcomeFailed, false},
		{"provider failed outcome", fake.New(fake.Step{Reply: "half an answer",
			Outcome: messages.StepOutcome{Kind: messages.OutcomeFailed, Code: "server_error", Message: "the model crashed"}}),
			"hello", 502, api.CodeProvider, []string{"server_error", "the model crashed"}, messages.OutcomeFailed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, b := failingServer(t, tc.f)
			var e struct {
				Error struct {
					Code, Message string
					Turn          messages.TurnID
				}
			}
			st := ts.call(t, "POST", b+"/turns", map[string]string{"text": tc.text}, &e)
			if st != tc.status || e.Error.Code != tc.code || e.Error.Turn.IsZero() {
				t.Fatalf("POST turns = %d %+v, want %d %s with the turn", st, e, tc.status, tc.code)
			}
			for _, m := range tc.msg {
				if !strings.Contains(e.Error.Message, m) {
					t.Errorf("message %q lacks %q", e.Error.Message, m)
				}
			}
			// The row of the failed turn.
			var row persistence.TurnRow
			if st := ts.call(t, "GET", b+"/turns/"+e.Error.Turn.String(), nil, &row); st != 200 {
				t.Fatalf("GET turn: %d", st)
			}
			var kind messages.OutcomeKind
			if row.Phase != messages.PhaseFailed || kind.UnmarshalText([]byte(row.Outcome)) != nil || kind != tc.wantKind ||
				row.Code != tc.code || row.Reason != e.Error.Message {
				t.Errorf("turn row = phase %s outcome %q code %q reason %q, want failed %s %s %q",
					row.Phase, row.Outcome, row.Code, row.Reason, tc.wantKind, tc.code, e.Error.Message)
			}

			// Streamed: a done event that says the outcome and why.
			st, evs := readEvents(t, ts, b+"/turns", `{"text":`+string(mustJSON(tc.text))+`,"stream":true}`, nil)
			if st != 200 || len(evs) < 2 || evs[0].name != "turn" || evs[len(evs)-1].name != "done" {
				t.Fatalf("stream = %d %v, want 200 turn … done", st, evs)
			}
			var done doneEvent
			if err := json.Unmarshal([]byte(evs[len(evs)-1].data), &done); err != nil {
				t.Fatalf("done event %q: %v", evs[len(evs)-1].data, err)
			}
			if done.Phase != messages.PhaseFailed || done.Outcome.Kind != tc.wantKind || done.Outcome.Code != tc.code ||
				done.Code != tc.code || done.Error == "" || done.Outcome.Message != done.Error {
				t.Errorf("done = %+v, want phase failed, outcome %s %s and the reason", done, tc.wantKind, tc.code)
			}
			for _, m := range tc.msg {
				if !strings.Contains(done.Error, m) {
					t.Errorf("done error %q lacks %q", done.Error, m)
				}
			}
			deltas := 0
			for _, ev := range evs {
				if ev.name == "delta" {
					deltas++
				}
			}
			if tc.wantReply != (deltas > 0) {
				t.Errorf("%d delta events, want some: %v", deltas, tc.wantReply)
			}
		})
	}
}

// A cancelled turn answers 409 cancelled when waited for, and ends with
// a done event whose outcome is cancelled when streamed.
func TestCancelledTurnSaysSo(t *testing.T) {
	t.Parallel()
	ts, b := failingServer(t, fake.New(fake.Step{Hang: true}))
	// cancel cancels the turn in flight. It is in flight once its step
	// runs: until then cancel finds nothing to cancel.
	cancel := func() error {
		for deadline := time.Now().Add(10 * time.Second); ; {
			resp, err := http.Post(ts.URL+b+"/cancel", "application/json", nil)
			if err != nil {
				return err
			}
			var e apiErr
			_ = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode == 202 {
				return nil
			}
			if resp.StatusCode != 409 || e.Error.Code != api.CodeConflict || time.Now().After(deadline) {
				return fmt.Errorf("cancel: %d %+v", resp.StatusCode, e)
			}
			time.Sleep(5 * time.Millisecond) // poll: the step starts on its own
		}
	}
	type result struct {
		st int
		e  struct {
			Error struct {
				Code, Message string
				Turn          messages.TurnID
			}
		}
	}
	got := make(chan result, 1)
	go func() {
		var r result
		resp, err := http.Post(ts.URL+b+"/turns", "application/json", strings.NewReader(`{"text":"wait for me"}`))
		if err == nil {
			r.st = resp.StatusCode
			_ = json.NewDecoder(resp.Body).Decode(&r.e)
			resp.Body.Close()
		}
		got <- r
	}()
	if err := cancel(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.st != 409 || r.e.Error.Code != api.CodeCancelled || !strings.Contains(r.e.Error.Message, "cancelled") || r.e.Error.Turn.IsZero() {
		t.Fatalf("cancelled turn = %d %+v, want 409 cancelled", r.st, r.e)
	}
	var row persistence.TurnRow
	if ts.call(t, "GET", b+"/turns/"+r.e.Error.Turn.String(), nil, &row); row.Outcome != "cancelled" || row.Code != api.CodeCancelled {
		t.Errorf("turn row outcome %q code %q, want cancelled", row.Outcome, row.Code)
	}

	cancelled := make(chan error, 1)
	st, evs := readEvents(t, ts, b+"/turns", `{"text":"and me","stream":true}`, func(ev sseEvent) {
		if ev.name == "turn" {
			go func() { cancelled <- cancel() }()
		}
	})
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	if st != 200 || len(evs) < 2 || evs[len(evs)-1].name != "done" {
		t.Fatalf("stream = %d %v", st, evs)
	}
	var done doneEvent
	if err := json.Unmarshal([]byte(evs[len(evs)-1].data), &done); err != nil || done.Phase != messages.PhaseFailed ||
		done.Outcome.Kind != messages.OutcomeCancelled || done.Code != api.CodeCancelled || done.Error != "cancelled" {
		t.Fatalf("done = %+v, %v; want cancelled", done, err)
	}
}

// An answer that cannot be encoded is a 500 naming why, never an empty
// body with the status asked for.
func TestWriteJSONNeverAnswersEmpty(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]any{"outcome": messages.StepOutcome{}})
	var e apiErr
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code != api.CodeInternal ||
		!strings.Contains(e.Error.Message, "step outcome(0)") {
		t.Errorf("writeJSON(zero outcome) = %d %q, want 500 internal", rec.Code, rec.Body.String())
	}
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
