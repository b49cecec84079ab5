package server

import (
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
)

// GET and PUT /v1/sessions/{session}/retention: the server's default,
// the session's own (days, a Go duration, 0), back to the default with
// null; bad values are refused naming the field and the range, and
// change nothing.
func TestRetentionRoutes(t *testing.T) {
	t.Parallel()
	ts := newTestServerWith(t, Options{}, 0, func(cfg *actors.Config) {
		cfg.Retention = actors.RetentionPolicy{Idle: 30 * 24 * time.Hour, Interval: -1}
	})
	var created struct{ Session client.Session }
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "kept"}, &created); st != 201 {
		t.Fatalf("create: %d", st)
	}
	path := "/v1/sessions/" + created.Session.ID.String() + "/retention"
	var got client.Retention
	if st := ts.call(t, "GET", path, nil, &got); st != 200 || got.Idle != "30d" || got.Source != "default" || got.Own != nil ||
		got.Expires == nil || !got.Expires.Equal(got.LastActivity.Add(30*24*time.Hour)) {
		t.Errorf("GET retention = %d %+v; want the default 30d", st, got)
	}
	for _, c := range []struct{ body, idle, own, source string }{
		{`{"idle":"7d"}`, "7d", "7d", "session"},
		{`{"idle":"36h"}`, "36h0m0s", "36h0m0s", "session"},
		{`{"idle":"0"}`, "0", "0", "session"},
		{`{"idle":null}`, "30d", "", "default"},
	} {
		got = client.Retention{}
		st := ts.call(t, "PUT", path, c.body, &got)
		own := ""
		if got.Own != nil {
			own = *got.Own
		}
		if st != 200 || got.Idle != c.idle || own != c.own || got.Source != c.source || (c.idle == "0") != (got.Expires == nil) {
			t.Errorf("PUT %s = %d %+v; want idle %s, own %q, source %s", c.body, st, got, c.idle, c.own, c.source)
		}
	}
	for _, body := range []string{`{"idle":"10ms"}`, `{"idle":"-1h"}`, `{"idle":"40000d"}`, `{"idle":"soon"}`, `{}`, `{"idle":"1d","x":1}`} {
		var e apiErr
		if st := ts.call(t, "PUT", path, body, &e); st != 400 || e.Error.Code != api.CodeInvalid ||
			(body != `{}` && !strings.Contains(body, "x") && !strings.Contains(e.Error.Message, "idle:")) {
			t.Errorf("PUT %s = %d %+v; want 400 naming idle", body, st, e)
		}
	}
	if st := ts.call(t, "GET", path, nil, &got); st != 200 || got.Own != nil {
		t.Errorf("after refused PUTs: %d %+v; want no retention of its own", st, got)
	}
	if st := ts.call(t, "GET", "/v1/sessions/01ARZ3NDEKTSV4RRFFQ69G5FAV/retention", nil, nil); st != 404 {
		t.Errorf("GET retention of no session = %d, want 404", st)
	}
}
