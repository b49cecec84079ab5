package server

import (
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// An exchange recorded through the API is a finished turn of the
// branch, in its history; under an Idempotency-Key a repeat answers 200
// with the same turn, the key with another exchange 422; bad bodies
// name the field and record nothing.
func TestAPIRecordExchange(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	var created struct{ Branch persistence.BranchRow }
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "exchanges"}, &created); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := "/v1/branches/" + created.Branch.ID.String()
	body := map[string]string{"user": "Which port does the database use?", "reply": "5433."}
	var first client.PendingTurn
	if st := ts.call(t, "POST", b+"/exchanges", body, &first, IdempotencyKeyHeader, "x1"); st != 201 ||
		first.Seq != 1 || first.Phase != messages.PhaseResponseFinalized || first.Reply.IsZero() {
		t.Fatalf("record: %d %+v; want 201, turn 1 finalized", st, first)
	}
	var again client.PendingTurn
	if st := ts.call(t, "POST", b+"/exchanges", body, &again, IdempotencyKeyHeader, "x1"); st != 200 || again != first {
		t.Fatalf("repeat: %d %+v; want 200, %+v", st, again, first)
	}
	var e apiErr
	if st := ts.call(t, "POST", b+"/exchanges", map[string]string{"user": "other", "reply": "x"}, &e, IdempotencyKeyHeader, "x1"); st != 422 ||
		e.Error.Code != api.CodeKeyReused {
		t.Fatalf("key reused: %d %+v; want 422 %s", st, e, api.CodeKeyReused)
	}
	var second client.PendingTurn
	if st := ts.call(t, "POST", b+"/exchanges", map[string]string{"user": "And the cache?"}, &second); st != 201 || second.Seq != 2 {
		t.Fatalf("record without a reply or key: %d %+v; want 201, turn 2", st, second)
	}
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]string{"reply": "x"}, "user: required"},
		{map[string]string{"user": "  "}, "user: required"},
		{map[string]any{"user": 1}, "user: want a string"},
		{map[string]string{"user": "x", "text": "y"}, "text: unknown field"},
		{map[string]string{"user": strings.Repeat("x", 9<<20)}, "body"},
	} {
		var e apiErr
		if st := ts.call(t, "POST", b+"/exchanges", c.body, &e); st/100 != 4 || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("record %.40v: %d %+v; want 4xx naming %q", c.body, st, e, c.want)
		}
	}
	var h api.History
	if st := ts.call(t, "GET", b+"/history", nil, &h); st != 200 || len(h.Entries) != 4 ||
		h.Entries[0].Message.RenderedText != body["user"] || h.Entries[1].Message.RenderedText != body["reply"] {
		t.Fatalf("history: %d %+v; want the 2 exchanges", st, h)
	}
}
