package server

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
)

// switchPlacement owns every session while mine is set, else "other"
// owns them.
type switchPlacement struct{ mine atomic.Bool }

func (p *switchPlacement) Owner(messages.SessionID) (string, bool, bool) {
	if p.mine.Load() {
		return "me", true, true
	}
	return "other", false, true
}

// A request for a session another member owns goes to Options.Forward
// with its body as it arrived (the handler read it first), and the
// client gets the owner's answer; a request forwarded already, or one
// Forward could not deliver, is answered 503 with Retry-After here.
func TestForwardToOwner(t *testing.T) {
	t.Parallel()
	p := &switchPlacement{}
	p.mine.Store(true)
	var (
		mu       sync.Mutex
		gotBody  string
		gotOwner string
		deliver  atomic.Bool
	)
	deliver.Store(true)
	opts := Options{Forward: func(w http.ResponseWriter, r *http.Request, body io.Reader, to *actors.NotOwnerError) bool {
		if !deliver.Load() {
			return false
		}
		b, _ := io.ReadAll(body)
		mu.Lock()
		gotBody, gotOwner = string(b), to.Owner
		mu.Unlock()
		w.Header().Set("X-Answered-By", to.Owner)
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"from":"owner"}`)
		return true
	}}
	ts := newTestServerWith(t, opts, 0, func(c *actors.Config) { c.Placement = p })
	var created struct {
		Branch struct {
			ID string `json:"id"`
		} `json:"branch"`
	}
	if code := ts.call(t, "POST", "/v1/sessions", map[string]any{"title": "t"}, &created); code != http.StatusCreated {
		t.Fatalf("create session: %d", code)
	}
	p.mine.Store(false) // the session moved

	body := `{"text":"` + strings.Repeat("a long turn ", 500) + `"}`
	req, _ := http.NewRequest("POST", ts.URL+"/v1/branches/"+created.Branch.ID+"/turns", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	if resp.StatusCode != http.StatusAccepted || string(answer) != `{"from":"owner"}` || gotOwner != "other" || gotBody != body {
		t.Fatalf("forwarded turn: %d %q, owner %q, body forwarded %d bytes of %d", resp.StatusCode, answer, gotOwner, len(gotBody), len(body))
	}
	mu.Unlock()

	var e struct{ Error struct{ Code string } }
	if code := ts.call(t, "POST", "/v1/branches/"+created.Branch.ID+"/turns", body, &e, ForwardedHeader, "127.0.0.1:1"); code != http.StatusServiceUnavailable ||
		e.Error.Code != api.CodeUnavailable {
		t.Fatalf("a forwarded request for a session not owned here: %d %q, want 503 unavailable", code, e.Error.Code)
	}
	// Its answer names the owner this member sees, so that the member
	// that forwarded it drops the URL it used.
	req, _ = http.NewRequest("GET", ts.URL+"/v1/branches/"+created.Branch.ID, nil)
	req.Header.Set(ForwardedHeader, "127.0.0.1:1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(OwnerHeader) != "other" {
		t.Fatalf("a forwarded read not owned here: %d, %s %q; want 503 naming owner \"other\"", resp.StatusCode, OwnerHeader, resp.Header.Get(OwnerHeader))
	}
	deliver.Store(false)
	req, _ = http.NewRequest("GET", ts.URL+"/v1/branches/"+created.Branch.ID+"/pins", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("an owner out of reach: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
