package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/api"
)

// A reference to an item the proxy does not hold is 400 naming
// input[i].id, and runs nothing; a response asked not to be stored is
// not kept; GET of an id the proxy did not answer is 404 in the OpenAI
// API's shape.
func TestProxyResponsesItemReferencesRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	type apiError struct {
		Error struct{ Message, Code, Type string }
	}
	var first response
	if st := ts.call(t, "POST", "/v1/responses", `{"model":"local","input":"The code is 4711."}`, &first); st != 200 {
		t.Fatalf("first response: %d", st)
	}
	var held response
	if st := ts.call(t, "GET", "/v1/responses/"+first.ID, nil, &held); st != 200 || held.ID != first.ID || len(held.Output) != 1 {
		t.Fatalf("GET /v1/responses/%s: %d %+v", first.ID, st, held)
	}
	msgID := held.Output[0].(map[string]any)["id"].(string)
	turn, _, _ := parseStepID("resp_", first.ID)
	sessions := func() int {
		ss, err := ts.rt.DB().Sessions(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return len(ss)
	}
	before := sessions()
	for _, tc := range []struct{ ref, where string }{
		{`{"type":"item_reference","id":"msg_nope"}`, "input[1].id"},
		{`{"type":"item_reference","id":"rs_` + turn.String() + `"}`, "input[1].id"}, // the proxy answers no reasoning items
		{`{"type":"item_reference","id":"` + stepID("msg_", turn, 3) + `"}`, "input[1].id"},
		{`{"type":"item_reference","id":"` + stepID("fc_", turn, 0) + `_0"}`, "input[1].id"}, // its response made no call
		{`{"id":"fc_x_0"}`, "input[1].id"},
		{`{"type":"item_reference"}`, "input[1].id: required"},
	} {
		body := fmt.Sprintf(`{"model":"local","input":[{"role":"user","content":"The code is 4711."},%s,{"role":"user","content":"And?"}]}`, tc.ref)
		var e apiError
		if st := ts.call(t, "POST", "/v1/responses", body, &e); st != 400 || !strings.Contains(e.Error.Message, tc.where) ||
			e.Error.Type != "invalid_request_error" {
			t.Errorf("reference %s: %d %+v, want 400 naming %s", tc.ref, st, e, tc.where)
		}
	}
	if n := sessions(); n != before {
		t.Errorf("%d sessions after refused requests, %d before: want none made", n, before)
	}
	// The reference to the message that was answered is that message.
	body := fmt.Sprintf(`{"model":"local","input":[{"role":"user","content":"The code is 4711."},{"type":"item_reference","id":%q},
		{"role":"user","content":"And?"}],"store":false}`, msgID)
	var second response
	if st := ts.call(t, "POST", "/v1/responses", body, &second); st != 200 {
		t.Fatalf("a reference to %s: %d", msgID, st)
	}
	if n := sessions(); n != before {
		t.Errorf("the reference to the first response's message made a new conversation (%d sessions, %d before)", n, before)
	}
	// store: false: not kept.
	for _, id := range []string{second.ID, "resp_x", "resp_" + turn.String() + "_7", "chatcmpl-" + turn.String()} {
		var e apiError
		if st := ts.call(t, "GET", "/v1/responses/"+id, nil, &e); st != 404 || e.Error.Code != api.CodeNotFound ||
			e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, id) {
			t.Errorf("GET /v1/responses/%s: %d %+v, want 404 naming it in the OpenAI API's shape", id, st, e)
		}
	}
	var raw json.RawMessage
	if st := ts.call(t, "GET", "/v1/responses/"+first.ID, nil, &raw); st != 200 {
		t.Errorf("GET the first response again: %d", st)
	}
}
