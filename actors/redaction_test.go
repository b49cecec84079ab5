package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// recordingEmbedder records every text it is asked to embed.
type recordingEmbedder struct {
	retrieval.HashEmbedder
	mu    sync.Mutex
	texts []string
}

func (e *recordingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.texts = append(e.texts, texts...)
	e.mu.Unlock()
	return e.HashEmbedder.Embed(ctx, texts)
}

func (e *recordingEmbedder) all() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.texts, "\n")
}

// The configured patterns reach every request that leaves the runtime: a
// provider step's context (then the Go hook), the librarian's summary
// request and every text given to the embedder; the transcript keeps the
// original.
func TestRedactionOnEveryOutboundRequest(t *testing.T) {
	t.Parallel()
	red, err := providers.NewRedactor([]providers.RedactRule{{Pattern: `hunter\d+`, Replacement: "[pw]"}})
	if err != nil {
		t.Fatal(err)
	}
	step, lib := fake.New(fake.Step{Reply: "noted"}), fake.New(fake.Step{Reply: "## Facts\n- a password was given"})
	emb := &recordingEmbedder{}
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Provider, cfg.Redaction, cfg.Embedder = step, red, emb
	cfg.Fold = &core.Policy{} // fold each turn: the librarian is asked at once
	cfg.Summarize = Librarian{Provider: lib, Model: "lib", Log: zerolog.Nop()}.Summarize
	var mu sync.Mutex
	var hooked []string
	cfg.Redact = func(ac messages.AssembledContext) (messages.AssembledContext, error) {
		// The hook runs after the patterns: it sees their replacement.
		mu.Lock()
		hooked = append(hooked, ac.User.RenderedText)
		mu.Unlock()
		ac.User = messages.NewMessage(messages.RoleUser, messages.Text{Text: strings.ReplaceAll(ac.User.RenderedText, "[pw]", "[pw+hook]")})
		return ac, nil
	}
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "redact")
	const said = "the vault password is hunter42, keep it"
	if _, last, _ := runTurn(t, r, b.ID, said); last.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("turn ended %v: %s", last.Phase, last.Err)
	}
	ev.waitFor(t, "TurnIndexed", 1, isType[messages.TurnIndexed])

	sent := step.Requests()
	if len(sent) != 1 || sent[0].Context.User.RenderedText != "the vault password is [pw+hook], keep it" {
		t.Fatalf("provider step sent %+v", sent)
	}
	if len(lib.Requests()) == 0 {
		t.Fatal("the librarian was not asked")
	}
	for i, req := range lib.Requests() {
		body, _ := json.Marshal(req.Context)
		if bytes.Contains(body, []byte("hunter42")) || !bytes.Contains(body, []byte("password is [pw+hook]")) {
			t.Errorf("librarian request %d, want the patterns and the hook applied: %s", i, body)
		}
	}
	mu.Lock()
	if len(hooked) < 2 || hooked[0] != "the vault password is [pw], keep it" || !strings.Contains(hooked[1], "password is [pw], keep it") {
		t.Errorf("the hook saw %q, want the step's and the librarian's contexts after the patterns", hooked)
	}
	mu.Unlock()
	// Chunks and queries alike.
	if _, _, err := r.Embed(bg, []string{"query hunter7"}); err != nil {
		t.Fatal(err)
	}
	if got := emb.all(); strings.Contains(got, "hunter") || !strings.Contains(got, "vault password is [pw]") ||
		!strings.Contains(got, "query [pw]") {
		t.Errorf("the embedder was given %q", got)
	}
	h, _, err := r.History(bg, b.ID, messages.TurnID{}, 2)
	if err != nil || len(h) != 2 || h[0].Message.RenderedText != said {
		t.Fatalf("stored %+v, %v: want the original text", h, err)
	}
}

// An upstream error that echoes the API key is stored and logged
// without it.
func TestProviderErrorEchoingKeyIsScrubbed(t *testing.T) {
	t.Parallel()
	const key = "configured-upstream-key-123456"
	echo := &providers.Error{Provider: "fake", StatusCode: 401, Code: "invalid_api_key",
		Message: "Incorrect API key provided: " + key + ". Also sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX."}
	var logs syncBuffer
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = fake.New(fake.Step{Err: echo})
	cfg.Scrub = providers.NewScrubber(key)
	cfg.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel)
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "scrub")
	s, err := r.Submit(bg, b.ID, "hello")
	if err != nil {
		t.Fatal(err)
	}
	_, last := s.Wait(nil)
	if last.Phase != messages.PhaseFailed {
		t.Fatalf("turn ended %v", last.Phase)
	}
	row, err := r.TurnRow(bg, b.ID, s.Turn)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := r.Steps(bg, s.Turn)
	if err != nil || len(steps) != 1 {
		t.Fatalf("steps %+v, %v", steps, err)
	}
	stored, _ := json.Marshal(struct {
		Row   any
		Steps any
		Err   string
	}{row, steps, last.Err})
	if strings.Contains(string(stored), key) || strings.Contains(string(stored), "sk-proj-") {
		t.Errorf("the key is stored: %s", stored)
	}
	if !strings.Contains(row.Reason, "Incorrect API key provided: [redacted]. Also [redacted].") {
		t.Errorf("reason %q, want the upstream's message scrubbed", row.Reason)
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the key is logged: %s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the runtime's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The librarian's provider failing with an error that echoes the key:
// the librarian logs why it fell back, without the key.
func TestLibrarianErrorEchoingKeyIsScrubbed(t *testing.T) {
	t.Parallel()
	const key = "configured-librarian-key-98765"
	var logs syncBuffer
	lib := fake.New(fake.Step{Err: &providers.Error{Provider: "fake", StatusCode: 401, Message: "bad key " + key}})
	ev := newEvents()
	cfg := testConfig(t, t.TempDir(), ev)
	cfg.Fold = &core.Policy{}
	cfg.Scrub = providers.NewScrubber(key)
	cfg.Summarize = Librarian{Provider: lib, Model: "lib", Log: zerolog.New(&logs)}.Summarize
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "scrub")
	runTurn(t, r, b.ID, "hello")
	ev.waitFor(t, "StateCommitted", 1, isType[messages.StateCommitted])
	if lib.Calls() == 0 || !strings.Contains(logs.String(), "bad key [redacted]") || strings.Contains(logs.String(), key) {
		t.Errorf("after %d calls the librarian logged %s", lib.Calls(), logs.String())
	}
}

// A stream that reports a failure echoing the key (an error event, a
// failed response) leaves it in no file of the data directory and not
// in the log: the stream journal holds the event scrubbed.
func TestFailureEventsEchoingKeyAreScrubbed(t *testing.T) {
	t.Parallel()
	srv := fakeapi.New(
		fakeapi.NewResponsesStream().Text("partial ").ErrorEvent("invalid_api_key", "Incorrect API key provided: "+e2eKey),
		fakeapi.NewResponsesStream().Failed("invalid_api_key", "Incorrect API key provided: "+e2eKey),
	)
	defer srv.Close()
	var logs syncBuffer
	dir := t.TempDir()
	cfg := testConfig(t, dir, newEvents())
	cfg.Provider, cfg.Model = dialects[0].provider(srv.URL), "model-e2e"
	cfg.Retry = &providers.RetryPolicy{}
	cfg.Scrub = providers.NewScrubber(e2eKey)
	cfg.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel)
	r := openRuntime(t, cfg)
	_, b, _ := r.CreateSession(bg, "scrub")
	for i := range 2 {
		if _, last, _ := runTurn(t, r, b.ID, "hello"); last.Phase != messages.PhaseFailed || !strings.Contains(last.Err, "[redacted]") {
			t.Errorf("turn %d: %v %q, want failed with the key scrubbed", i, last.Phase, last.Err)
		}
	}
	r.Close()
	journals := journalViews(t, filepath.Join(dir, "streams"))
	if len(journals) != 2 {
		t.Fatalf("%d stream journals, want one per step", len(journals))
	}
	var all bytes.Buffer
	for _, data := range journals {
		all.Write(data)
	}
	if !strings.Contains(all.String(), "Incorrect API key provided: [redacted]") {
		t.Errorf("the journals do not hold the failures, scrubbed: %s", all.String())
	}
	var buf bytes.Buffer
	buf.WriteString(logs.String())
	noKeyIn(t, dir, &buf)
}
