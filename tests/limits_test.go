package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Requests whose bodies never finish do not lock the API out: /healthz,
// /readyz and /metrics answer while every in-flight slot is held (they
// never take one), each stalled request is answered 408 once
// server.read_body_timeout passes, which frees its slot, and the API
// then serves again. A request refused for want of a slot is answered
// at once, without waiting for a body that does not come.
func TestSlowBodiesDoNotLockOutTheAPI(t *testing.T) {
	t.Parallel()
	const maxInFlight, stalled = 8, 12
	s := startServe(t, t.TempDir(), fmt.Sprintf("CTX_SERVER_MAX_IN_FLIGHT=%d", maxInFlight), "CTX_SERVER_READ_BODY_TIMEOUT=1s")
	addr := strings.TrimPrefix(s.url, "http://")

	// More requests than slots send their headers and half a body, then
	// stall.
	var conns []net.Conn
	for range stalled {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		body := `{"title":"never finished"}`
		if _, err := fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			addr, len(body), body[:10]); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}

	// Health, readiness and metrics answer at once, whatever the slots.
	quick := &http.Client{Timeout: 10 * time.Second}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := quick.Get(s.url + path)
		if err != nil {
			t.Fatalf("GET %s while the slots are held: %v", path, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s while the slots are held: %d %s, want 200", path, resp.StatusCode, data)
		}
	}

	// Each stalled request is answered: 408 once its body is overdue (it
	// held a slot), or 429 at once (there was none).
	codes := map[int]int{}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("stalled request %d: no answer: %v", i, err)
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		codes[resp.StatusCode]++
		switch {
		case resp.StatusCode == 408 && e.Error.Code == "request_timeout" && strings.Contains(e.Error.Message, "server.read_body_timeout"):
		case resp.StatusCode == 429 && e.Error.Code == "overloaded":
		default:
			t.Errorf("stalled request %d: %d %+v, want 408 request_timeout or 429 overloaded", i, resp.StatusCode, e.Error)
		}
	}
	if codes[408] < maxInFlight {
		t.Errorf("answers to the stalled requests: %v, want at least %d 408s (one per slot)", codes, maxInFlight)
	}

	// The slots are free: the API serves (the stalled connections are
	// still open).
	resp, err := quick.Post(s.url+"/v1/sessions", "application/json", strings.NewReader(`{"title":"after"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Errorf("POST /v1/sessions after the stalled bodies timed out: %d, want 201", resp.StatusCode)
	}
}
