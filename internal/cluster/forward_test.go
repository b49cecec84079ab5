package cluster

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/messages"
)

// A member forwards a request to the URL the owner itself gave, and
// drops that URL when the request's answer says the member behind it
// does not own the session, so that the next request asks again: a URL
// learned from another member (an activation of the session's grain
// left on a member that owned it before, a placement cache not yet
// updated) would send every request for the owner's sessions to a
// member that answers 503 until the topology changes again. (Not
// parallel: two members in one process race on grpc's global logger
// under -race.)
func TestForwardAsksTheOwner(t *testing.T) {
	var hits atomic.Int64
	var notOwner atomic.Bool
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if notOwner.Load() {
			w.Header().Set(server.OwnerHeader, "127.0.0.1:1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "answered by "+r.Header.Get(server.ForwardedHeader))
	}))
	defer api.Close()
	manage := freePort(t)
	m, err := Join(Config{Name: "t", Host: "127.0.0.1", Port: freePort(t), ManagePort: manage,
		Peers: []string{"127.0.0.1:" + strconv.Itoa(manage)}, AdvertiseURL: api.URL,
		Refresh: 100 * time.Millisecond, RequestTimeout: 500 * time.Millisecond, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Leave()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitJoined(ctx); err != nil {
		t.Fatal(err)
	}
	session := messages.NewID[messages.SessionID](time.Now())
	forward := func(owner string) (*httptest.ResponseRecorder, bool) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/v1/sessions/"+session.String(), nil)
		return w, m.Forward(w, r, http.NoBody, &actors.NotOwnerError{Session: session, Owner: owner})
	}

	// The owner the placement names is a member out of reach: the
	// request is not delivered (its client gets 503 and tries again),
	// and never to the member that happens to host the session's grain.
	gone := "127.0.0.1:" + strconv.Itoa(freePort(t))
	start := time.Now()
	if _, ok := forward(gone); ok || hits.Load() != 0 {
		t.Fatalf("a request for a session of %s (no member there) was delivered (%v) to %d other members' APIs", gone, ok, hits.Load())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("finding that the owner is out of reach took %v, want about RequestTimeout", took)
	}
	if _, cached := m.urls.Load(gone); cached {
		t.Errorf("a URL is remembered for %s, which never answered", gone)
	}

	// The owner is this member: the request goes to its own URL.
	if w, ok := forward(m.Address()); !ok || hits.Load() != 1 || !strings.Contains(w.Body.String(), m.Address()) {
		t.Fatalf("forward to the owner: delivered %v, %d hits, answer %q", ok, hits.Load(), w.Body.String())
	}
	if _, cached := m.urls.Load(m.Address()); !cached {
		t.Fatal("the owner's URL is not remembered")
	}
	// The member behind the URL answers that it does not own the session:
	// its answer goes to the client, and the URL is asked again next time.
	notOwner.Store(true)
	if w, ok := forward(m.Address()); !ok || w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a not-owner answer: delivered %v, %d", ok, w.Code)
	}
	if _, cached := m.urls.Load(m.Address()); cached {
		t.Fatal("the URL of a member that answered it does not own the session is still remembered")
	}
	notOwner.Store(false)
	if _, ok := forward(m.Address()); !ok || hits.Load() != 3 {
		t.Fatalf("after the URL was dropped: delivered %v, %d hits, want 3", ok, hits.Load())
	}
}
