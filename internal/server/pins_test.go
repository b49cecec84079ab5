package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// Pins are created, listed, edited and deleted by id; bad ids, unknown
// pins and limits answer errors naming them, and store nothing.
func TestAPIPins(t *testing.T) {
	t.Parallel()
	ts := newTestServerWith(t, Options{}, 0, func(cfg *actors.Config) {
		cfg.Pins = core.PinLimits{MaxPins: 3, MaxBytes: 64}
	})
	var created struct{ Branch persistence.BranchRow }
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "pins"}, &created); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := "/v1/branches/" + created.Branch.ID.String()
	for i, fact := range []string{"answer in French", "use tabs"} {
		var p map[string]any
		if st := ts.call(t, "POST", b+"/pins", map[string]string{"fact": fact}, &p); st != 201 || p["id"] != float64(i+1) || p["fact"] != fact {
			t.Fatalf("pin %q: %d %v", fact, st, p)
		}
		checkSchema(t, "pin", "Pin", p)
	}
	var p client.Pin
	if st := ts.call(t, "PUT", b+"/pins/1", map[string]string{"fact": "answer in English"}, &p); st != 200 || p.ID != 1 || p.Fact != "answer in English" {
		t.Fatalf("edit: %d %+v", st, p)
	}
	var unpinned map[string]uint64
	if st := ts.call(t, "DELETE", b+"/pins/2", nil, &unpinned); st != 200 || unpinned["unpinned"] != 2 {
		t.Fatalf("unpin: %d %v", st, unpinned)
	}
	var list struct{ Pins []client.Pin }
	if st := ts.call(t, "GET", b+"/pins", nil, &list); st != 200 || len(list.Pins) != 1 || list.Pins[0].ID != 1 || list.Pins[0].Fact != "answer in English" {
		t.Fatalf("list: %d %+v", st, list)
	}
	errs := []struct {
		method, path string
		body         any
		status       int
		code, want   string
	}{
		{"DELETE", b + "/pins/2", nil, 404, api.CodeNotFound, "pin 2 is not pinned"},
		{"PUT", b + "/pins/7", map[string]string{"fact": "x"}, 404, api.CodeNotFound, "pin 7 is not pinned"},
		{"DELETE", b + "/pins/abc", nil, 400, api.CodeInvalid, `pin: "abc" is not a pin id`},
		{"DELETE", b + "/pins/0", nil, 400, api.CodeInvalid, `pin: "0" is not a pin id`},
		{"POST", b + "/pins", map[string]string{"fact": strings.Repeat("x", 65)}, 400, api.CodeInvalid, "fact: 65 bytes, limit 64 (context.max_pin_bytes)"},
		{"PUT", b + "/pins/1", map[string]string{"fact": strings.Repeat("x", 65)}, 400, api.CodeInvalid, "fact: 65 bytes, limit 64 (context.max_pin_bytes)"},
		{"PUT", b + "/pins/1", map[string]string{"fact": ""}, 400, api.CodeInvalid, "fact: required"},
		{"PUT", b + "/pins/1", map[string]string{"text": "x"}, 400, api.CodeInvalid, `text: unknown field`},
		{"GET", "/v1/branches/01JH0000000000000000000000/pins", nil, 404, api.CodeNotFound, "branch"},
	}
	for _, tc := range errs {
		var e apiErr
		if st := ts.call(t, tc.method, tc.path, tc.body, &e); st != tc.status || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("%s %s: %d %+v, want %d %s containing %q", tc.method, tc.path, st, e.Error, tc.status, tc.code, tc.want)
		}
	}
	for _, fact := range []string{"b", "c"} {
		if st := ts.call(t, "POST", b+"/pins", map[string]string{"fact": fact}, nil); st != 201 {
			t.Fatalf("pin %q: %d", fact, st)
		}
	}
	var e apiErr
	if st := ts.call(t, "POST", b+"/pins", map[string]string{"fact": "d"}, &e); st != 400 || !strings.Contains(e.Error.Message, "limit 3 (context.max_pins)") {
		t.Errorf("a pin over max_pins: %d %+v", st, e.Error)
	}
	if ts.call(t, "GET", b+"/pins", nil, &list); len(list.Pins) != 3 {
		t.Errorf("a refused pin was stored: %+v", list.Pins)
	}
}

// A branch whose pinned facts leave no room for a turn (pinned under
// looser limits, or before there were any) fails its turns with a
// context_too_large error that names the way out, and recovers once the
// pins are unpinned.
func TestAPIContextTooLargeAdvisesUnpin(t *testing.T) {
	t.Parallel()
	ts := newTestServerWith(t, Options{}, 0, func(cfg *actors.Config) {
		cfg.Provider = fake.New().WithContextLimit(900)
		cfg.Model, cfg.MaxOutputTokens, cfg.SafetyMargin = "fake", 100, 10 // an input budget of 790 tokens
		cfg.MaxPinnedShare = 1
		cfg.Pins = core.PinLimits{MaxBytes: 1 << 12}
	})
	var created struct{ Branch persistence.BranchRow }
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "full"}, &created); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := "/v1/branches/" + created.Branch.ID.String()
	for i := range 3 {
		fact := fmt.Sprintf("fact %d: %s", i, strings.Repeat("word ", 200)) // about 250 tokens each
		if st := ts.call(t, "POST", b+"/pins", map[string]string{"fact": fact}, nil); st != 201 {
			t.Fatalf("pin %d: %d", i, st)
		}
	}
	var e apiErr
	if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": strings.Repeat("question ", 40)}, &e); st != 422 ||
		e.Error.Code != api.CodeContextTooLarge || !strings.Contains(e.Error.Message, "DELETE /v1/branches/{branch}/pins/{id}") {
		t.Fatalf("turn over budget: %d %+v, want 422 advising DELETE .../pins/{id}", st, e.Error)
	}
	for _, id := range []string{"1", "2"} {
		if st := ts.call(t, "DELETE", b+"/pins/"+id, nil, nil); st != 200 {
			t.Fatalf("unpin %s: %d", id, st)
		}
	}
	var res client.TurnResult
	if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": strings.Repeat("question ", 40)}, &res); st != 200 ||
		res.Phase.String() != "response_finalized" {
		t.Fatalf("turn after unpinning: %d %+v", st, res)
	}
}
