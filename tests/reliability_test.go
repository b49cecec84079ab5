package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postJSON sends a JSON body and decodes the answer into out (if not nil).
func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("POST %s: %d %q: %v", url, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// A turn whose text the store could not hold (stored twice it is over
// store.max_payload_bytes) is refused at acceptance with 413 naming the
// limit, and the branch goes on serving: before, its commit failed, the
// branch's restarts ran out and every later request answered 503.
func TestOversizedTurnIsRefusedWith413(t *testing.T) {
	t.Parallel()
	s := startServe(t, t.TempDir())
	var created struct {
		Branch struct {
			ID string `json:"id"`
		} `json:"branch"`
	}
	if st := postJSON(t, s.url+"/v1/sessions", map[string]string{"title": "big"}, &created); st != 200 && st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := s.url + "/v1/branches/" + created.Branch.ID
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	text := strings.Repeat("word ", 4200<<10/5) // 4.2 MB: under the body limit, over the store's twice
	if st := postJSON(t, b+"/turns", map[string]any{"text": text}, &e); st != http.StatusRequestEntityTooLarge ||
		e.Error.Code != "request_too_large" || !strings.Contains(e.Error.Message, "store.max_payload_bytes") {
		t.Fatalf("4.2 MB turn: %d %+v, want 413 request_too_large naming store.max_payload_bytes", st, e)
	}
	var turn struct {
		Phase string `json:"phase"`
		Reply string `json:"reply"`
	}
	if st := postJSON(t, b+"/turns", map[string]any{"text": "and now a small one"}, &turn); st != 200 || turn.Phase != "response_finalized" {
		t.Fatalf("turn after the refused one: %d %+v", st, turn)
	}
	resp, err := http.Get(b)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET branch after the refused turn: %d", resp.StatusCode)
	}
	s.stop(t)
}
