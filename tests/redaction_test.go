package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
)

// Redaction and scrubbing on the real binary (docs/SECURITY.md,
// "Redaction"): `ctxinf serve` whose model, librarian and embedder are
// fakes of OpenAI's APIs, with a redaction pattern and an API key. A
// secret that matches the pattern reaches none of them, though the
// transcript keeps it; an upstream 401 that echoes the API key is stored
// in the turn's reason, and logged, without it.

const (
	redactKeyEnv = "CTXINF_TEST_REDACT_KEY"
	// redactKey has no known key shape: only knowing it scrubs it.
	redactKey    = "ctxinf-e2e-upstream-key-6f1c2a9b"
	redactSecret = "hunter42"
)

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// recorder is a fake OpenAI embeddings endpoint that records the texts
// it is sent.
type recorder struct {
	mu    sync.Mutex
	texts []string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input      []string `json:"input"`
		Dimensions int      `json:"dimensions"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || req.Dimensions == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	rec.mu.Lock()
	rec.texts = append(rec.texts, req.Input...)
	rec.mu.Unlock()
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	data := make([]item, len(req.Input))
	for i, text := range req.Input {
		v := make([]float64, req.Dimensions)
		for j := range v {
			v[j] = float64(len(text)%7+j+1) / 10
		}
		data[i] = item{Object: "embedding", Index: i, Embedding: v}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "fake-embed",
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
}

func (rec *recorder) all() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return strings.Join(rec.texts, "\n")
}

func TestRedactionAndScrubbingOnServe(t *testing.T) {
	t.Parallel()
	const failMarker = "this turn gets a 401"
	up := fakeapi.NewFunc(func(_ int, r fakeapi.Request) fakeapi.Reply {
		switch {
		case bytes.Contains(r.Body, []byte("librarian of a long conversation")), bytes.Contains(r.Body, []byte(failMarker)):
			// As OpenAI answers a bad key: the key echoed in the message.
			// The librarian logs why it falls back; the turn fails.
			return fakeapi.OpenAIError(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"Incorrect API key provided: "+redactKey+". You can find your API key at https://platform.openai.com/account/api-keys.")
		}
		return fakeapi.ChatText("stop", "Noted.")
	})
	defer up.Close()
	emb := &recorder{}
	embSrv := httptest.NewServer(emb)
	defer embSrv.Close()

	dir := t.TempDir()
	var stderr lockedBuffer
	s := startServeLogged(t, dir, &stderr, append(foldEveryTurn,
		"CTX_LOG_LEVEL=debug",
		"CTX_DEFAULT_MODEL=gpt", "CTX_MODELS_GPT_PROVIDER=openai", "CTX_MODELS_GPT_API=chat", "CTX_MODELS_GPT_MODEL_ID=upstream-gpt",
		"CTX_MODELS_GPT_BASE_URL="+up.URL+"/v1", "CTX_MODELS_GPT_API_KEY_ENV="+redactKeyEnv, redactKeyEnv+"="+redactKey,
		"CTX_LIBRARIAN_MODEL=gpt", "CTX_RUNTIME_PROVIDER_MAX_RETRIES=0",
		"CTX_RETRIEVAL_EMBEDDER=openai", "CTX_RETRIEVAL_EMBED_BASE_URL="+embSrv.URL+"/v1", "CTX_RETRIEVAL_EMBED_MODEL=fake-embed",
		"CTX_RETRIEVAL_EMBED_DIMENSIONS=8", "CTX_RETRIEVAL_EMBED_API_KEY_ENV="+redactKeyEnv,
		`CTX_REDACTION_PATTERNS=[{"pattern":"hunter\\d+","replacement":"[pw]"}]`,
		"OPENAI_API_KEY=", "OPENAI_BASE_URL=")...)

	var sess struct{ Branch struct{ ID string } }
	if st := postJSON(t, s.url+"/v1/sessions", map[string]any{"title": "redaction"}, &sess); st != 200 && st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := s.url + "/v1/branches/" + sess.Branch.ID
	said := "Remember: the vault password is " + redactSecret + "."
	var turn struct{ Reply, Phase string }
	if st := postJSON(t, b+"/turns", map[string]any{"text": said}, &turn); st != 200 || turn.Reply != "Noted." {
		t.Fatalf("turn 1: %d %+v", st, turn)
	}

	// The turn is folded (the librarian's model refuses the key, so the
	// deterministic summary is used, and the librarian logs why) and
	// indexed by the embedder in the background: wait for both.
	const fellBack = "librarian: using the deterministic fallback summary"
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(emb.all(), "password is [pw]") || !librarianAsked(up) || !strings.Contains(stderr.String(), fellBack) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: embedder given %q, librarian asked %v, log:\n%s", emb.all(), librarianAsked(up), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, r := range up.Requests() {
		if bytes.Contains(r.Body, []byte(redactSecret)) || !bytes.Contains(r.Body, []byte("password is [pw]")) {
			t.Errorf("upstream request %d, want the secret redacted: %s", i, r.Body)
		}
	}
	if strings.Contains(emb.all(), redactSecret) {
		t.Errorf("the embedder was given the secret: %q", emb.all())
	}
	// The transcript is lossless.
	var hist struct {
		Entries []struct {
			Message struct {
				RenderedText string `json:"rendered_text"`
			}
		}
	}
	getJSON(t, b+"/history", &hist)
	if raw, _ := json.Marshal(hist); !strings.Contains(string(raw), said) {
		t.Errorf("history %s, want the user's text as sent", raw)
	}

	// The upstream refuses the key and echoes it.
	st, _, body := post(t, b+"/turns", `{"text":"`+failMarker+`"}`)
	var e struct {
		Error struct{ Code, Message, Turn string }
	}
	if err := json.Unmarshal(body, &e); err != nil || st < 400 || e.Error.Turn == "" {
		t.Fatalf("turn 2: %d %s, want an error", st, body)
	}
	resp, err := http.Get(b + "/turns/" + e.Error.Turn)
	if err != nil {
		t.Fatal(err)
	}
	rowBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var row struct{ Phase, Reason string }
	if err := json.Unmarshal(rowBody, &row); err != nil || row.Phase != "failed" {
		t.Fatalf("GET turn: %s, %v", rowBody, err)
	}
	if !strings.Contains(row.Reason, "Incorrect API key provided: [redacted].") {
		t.Errorf("reason %q, want the upstream's message with the key scrubbed", row.Reason)
	}
	for what, text := range map[string]string{"turn": string(rowBody), "error": string(body)} {
		if strings.Contains(text, redactKey) {
			t.Errorf("the %s holds the API key: %s", what, text)
		}
	}
	s.stop(t)
	logs := stderr.String()
	if !strings.Contains(logs, "Incorrect API key provided: [redacted].") {
		t.Errorf("the log does not show the librarian's upstream error, scrubbed:\n%s", logs)
	}
	if strings.Contains(logs, redactKey) {
		t.Errorf("the log holds the API key:\n%s", logs)
	}
}

// librarianAsked reports whether up received a librarian request.
func librarianAsked(up *fakeapi.Server) bool {
	for _, r := range up.Requests() {
		if bytes.Contains(r.Body, []byte("librarian of a long conversation")) {
			return true
		}
	}
	return false
}
