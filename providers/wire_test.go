package providers

import (
	"encoding/json"
	"testing"
)

func TestSentJSON(t *testing.T) {
	encoded := json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if got := SentJSON(encoded, []byte(string(encoded))); &got[0] != &encoded[0] {
		t.Errorf("a body sent unchanged was not kept as encoded: %s", got)
	}
	if got := SentJSON(encoded, []byte("{ \"model\" : \"n\" }\n")); string(got) != `{"model":"n"}` {
		t.Errorf("a changed body = %s, want it as sent, compacted", got)
	}
	for _, sent := range []string{"", "{not json"} {
		if got := SentJSON(encoded, []byte(sent)); string(got) != string(encoded) {
			t.Errorf("sent %q: got %s, want the encoded body", sent, got)
		}
	}
}
