package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/persistence"
)

// A write refused for lack of disk space is a 507 whose message names the
// free and needed bytes, however deep it is wrapped.
func TestNoSpaceIs507(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("create session: %w",
		&persistence.SpaceError{Dir: "/data/store", Free: 1000, Need: 8 << 20, MinFree: 8 << 20})
	w := httptest.NewRecorder()
	writeError(w, httptest.NewRequest("POST", "/v1/sessions", nil), err)
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(w.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusInsufficientStorage || body.Error.Code != api.CodeNoSpace {
		t.Fatalf("writeError(%v) = %d %q, want 507 %q", err, w.Code, body.Error.Code, api.CodeNoSpace)
	}
	for _, want := range []string{"has 1000 bytes free", "needs 8388608 (store.min_free_bytes)", "free at least 8387608 bytes"} {
		if !strings.Contains(body.Error.Message, want) {
			t.Errorf("message %q does not say %q", body.Error.Message, want)
		}
	}
}
