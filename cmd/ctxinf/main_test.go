package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/persistence"
)

func TestBadConfigNamesTheKey(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("store:\n  max_payload_bytes: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"--config", cfg, "inspect"}, nil, &out, &errOut); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "store.max_payload_bytes") {
		t.Fatalf("error %q does not name the key", errOut.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"frobnicate"}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Fatalf("run(frobnicate) = %d, %q", code, errOut.String())
	}
}

// Chat lists, unpins and edits pinned facts by number; the next turn's
// context has what is left (the local model reports how many it got).
func TestChatPins(t *testing.T) {
	t.Setenv("CTX_DATA_DIR", t.TempDir())
	t.Setenv("CTX_LOCAL_DELAY", "0")
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	t.Setenv("CTX_DEFAULT_MODEL", "local")
	t.Setenv("CTX_CONTEXT_MAX_PINS", "2")
	in := strings.NewReader(strings.Join([]string{"/pin Answer in French.", "/pin Use tabs.", "/pin A third fact.", "hello",
		"/unpin 1", "/editpin 2 Use spaces.", "/pins", "/state", "how many pins now?", "/unpin 9", "/unpin x", "/editpin 2",
		"/help", "/quit"}, "\n") + "\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"chat"}, in, &out, &errOut); code != 0 {
		t.Fatalf("chat exited %d: %s", code, errOut.String())
	}
	o := out.String()
	for _, want := range []string{
		"  pinned #1 (/unpin 1 to unpin it)",
		"  pinned #2 (/unpin 2 to unpin it)",
		"the branch has 2 pinned facts, limit 2 (context.max_pins)",
		"Context: 2 pinned facts",
		"  unpinned #1",
		"  #2 is now: Use spaces.",
		"  #2 Use spaces. (since turn 1)",
		"  pinned #2: Use spaces.",
		"Context: 1 pinned fact,",
		"pin 9 is not pinned",
		"/unpin: N must be a pinned fact's number (see /pins)",
		"fact: required",
		"  /unpin N       unpin fact N (see /pins)",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("chat output lacks %q:\n%s", want, o)
		}
	}
}

func TestChatSession(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CTX_DATA_DIR", dir)
	t.Setenv("CTX_LOCAL_DELAY", "0")
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	t.Setenv("CTX_DEFAULT_MODEL", "local")
	in := strings.NewReader("Remember the code word: bluebird-7.\n/pin The user is Ada.\n/history 2\n/fork 1\nOn the fork.\n/branches\n/nonsense\n" +
		"\x1b[A\n/switch main\n/switch nosuch\n/quit\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"chat"}, in, &out, &errOut); code != 0 {
		t.Fatalf("chat exited %d: %s", code, errOut.String())
	}
	o := out.String()
	for _, want := range []string{
		`[local] I received your message (5 words): "Remember the code word: bluebird-7."`,
		"[turn 1 · response_finalized · stream durable/displayed",
		"  pinned",
		"#0 user: Remember the code word: bluebird-7.",
		"now on branch",
		`"On the fork."`,
		"unknown command /nonsense",
		"error: the line holds a terminal key sequence (an arrow?) and was not sent",
		"(main)\n",
		`error: /switch: tui: no such branch: "nosuch"`,
	} {
		if !strings.Contains(o, want) {
			t.Errorf("chat output lacks %q:\n%s", want, o)
		}
	}
	if strings.Contains(o, "\x1b[A\"") {
		t.Errorf("an up arrow was sent as a message:\n%s", o)
	}
	if strings.Contains(o, "durable/displayed 0/0") {
		t.Errorf("stream counters were not reported:\n%s", o)
	}
	// inspect sees both branches and their turns.
	out.Reset()
	if code := run([]string{"inspect", "--json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("inspect exited %d: %s", code, errOut.String())
	}
	var rep struct {
		Sessions []struct {
			Branches []struct {
				Turns int `json:"turns"`
			} `json:"branches"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Sessions) != 1 || len(rep.Sessions[0].Branches) != 2 {
		t.Fatalf("inspect --json = %s (%v)", out.String(), err)
	}
	// inspect --journal writes a step's journal as the SRD's file of
	// JSON lines, from the segments the runtime wrote.
	journals := persistence.NewSegmentJournals(filepath.Join(dir, "streams"))
	steps, err := journals.List(context.Background())
	journals.Close()
	if err != nil || len(steps) != 2 {
		t.Fatalf("journals %v, %v; want one per turn", steps, err)
	}
	out.Reset()
	if code := run([]string{"inspect", "--journal", steps[0].String()}, nil, &out, &errOut); code != 0 {
		t.Fatalf("inspect --journal exited %d: %s", code, errOut.String())
	}
	if lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); len(lines) < 2 || !strings.HasPrefix(lines[0], `{"ts":"`) ||
		!strings.Contains(out.String(), "bluebird-7") || !strings.HasSuffix(out.String(), "}\n") {
		t.Errorf("inspect --journal = %q, want the first turn's JSON lines", out.String())
	}
	errOut.Reset()
	if code := run([]string{"inspect", "--journal", "nope"}, nil, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "--journal") {
		t.Errorf("inspect --journal nope exited %d: %s; want an error naming the flag", code, errOut.String())
	}
}

func TestChaosSmall(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"chaos", "--branches", "4", "--turns", "4", "--kill-every", "20ms", "--seed", "42", "--json", "--dir", t.TempDir()}
	if code := run(args, nil, &out, &errOut); code != 0 {
		t.Fatalf("chaos exited %d: %s\n%s", code, out.String(), errOut.String())
	}
	var res struct {
		TurnsAcked       int              `json:"turns_acked"`
		TurnsCommitted   int              `json:"turns_committed"`
		Lost             int              `json:"lost"`
		DuplicateCommits int              `json:"duplicate_commits"`
		HeadErrors       int              `json:"head_errors"`
		StuckBranches    int              `json:"stuck_branches"`
		Kills            map[string]int64 `json:"kills"`
		Failures         map[string]int64 `json:"failures"`
		Verdict          string           `json:"verdict"`
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatalf("chaos --json output %q: %v", out.String(), err)
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("chaos --json output %q: %v", out.String(), err)
	}
	for _, k := range []string{"turns_acked", "turns_committed", "lost", "duplicate_commits", "head_errors", "stuck_branches",
		"restarts", "kills", "failures", "seconds", "verdict", "seed"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("chaos --json has no %q: %s", k, out.String())
		}
	}
	if len(raw) != 12 {
		t.Errorf("chaos --json has %d keys, want the 12: %s", len(raw), out.String())
	}
	// A turn whose actor is killed right after its response was finalized
	// reports "interrupted" to its reader yet stays committed, so
	// committed may exceed acked; never the other way round.
	if res.TurnsAcked != 16 || res.TurnsCommitted < 16 || res.Lost != 0 || res.DuplicateCommits != 0 ||
		res.HeadErrors != 0 || res.StuckBranches != 0 || res.Verdict != "pass" {
		t.Fatalf("chaos = %s", out.String())
	}
	for _, k := range []string{"branch", "step", "journal", "librarian", "indexer"} {
		if _, ok := res.Kills[k]; !ok {
			t.Errorf("chaos --json kills has no %q: %v", k, res.Kills)
		}
		if _, ok := res.Failures[k]; !ok {
			t.Errorf("chaos --json failures has no %q: %v", k, res.Failures)
		}
	}
}

// A step, librarian or indexer killed mid-work is survived, and the run
// ends with a verdict; --kill-kinds is checked.
func TestChaosKillKinds(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"chaos", "--branches", "6", "--turns", "6", "--kill-every", "1ms", "--kill-kinds", "step,librarian,indexer",
		"--seed", "3", "--dir", t.TempDir()}
	if code := run(args, nil, &out, &errOut); code != 0 {
		t.Fatalf("chaos exited %d: %s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "verdict: pass") || !strings.Contains(out.String(), "lost 0") {
		t.Fatalf("chaos output:\n%s", out.String())
	}
	// The kills reach the runtime's actors: some were taken.
	killed := 0
	for _, m := range regexp.MustCompile(`(?m)^\s*(step|librarian|indexer)\s+killed\s+(\d+)`).FindAllStringSubmatch(out.String(), -1) {
		n, _ := strconv.Atoi(m[2])
		killed += n
	}
	if killed == 0 {
		t.Errorf("no step, librarian or indexer was killed:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"chaos", "--kill-kinds", "provider"}, nil, &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), `actor kind "provider"`) {
		t.Fatalf("chaos --kill-kinds provider: exit %d, %s", code, errOut.String())
	}
}

func TestBenchTurnsSmall(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"bench", "turns", "--branches", "3", "--turns", "3", "--passive", "20", "--json", "--dir", t.TempDir()}
	if code := run(args, nil, &out, &errOut); code != 0 {
		t.Fatalf("bench turns exited %d: %s", code, errOut.String())
	}
	var f map[string]float64
	if err := json.Unmarshal(out.Bytes(), &f); err != nil || len(f) != 8 {
		t.Fatalf("bench turns --json = %q (%v), want eight keys", out.String(), err)
	}
	for _, k := range []string{"turns_per_s", "overhead_p50_us", "overhead_p99_us", "peak_rss_mb", "replay_1000_events_ms"} {
		if f[k] <= 0 {
			t.Errorf("%s = %v, want a positive measurement", k, f[k])
		}
	}
}

// A turn that fails says so in chat, with its code and why; the next
// turn runs.
func TestChatSaysWhyATurnFailed(t *testing.T) {
	t.Setenv("CTX_DATA_DIR", t.TempDir())
	t.Setenv("CTX_LOCAL_DELAY", "0")
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	t.Setenv("CTX_DEFAULT_MODEL", "local")
	t.Setenv("CTX_MODELS_LOCAL_CONTEXT_LIMIT", "1024")
	t.Setenv("CTX_RUNTIME_MAX_OUTPUT_TOKENS", "256")
	in := strings.NewReader(strings.Repeat("huge ", 3000) + "\nsmall\n/quit\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"chat"}, in, &out, &errOut); code != 0 {
		t.Fatalf("chat exited %d: %s", code, errOut.String())
	}
	o := out.String()
	for _, want := range []string{
		"[turn 1 · failed ·",
		"  failed (context_too_large): context too large: ",
		"context_limit",
		"[turn 2 · response_finalized ·",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("chat output lacks %q:\n%s", want, o)
		}
	}
}

// With a model's key in the environment, chat talks to that model (here
// a loopback server speaking OpenAI's streaming Chat Completions), and the
// key appears nowhere: not in the output, the logs or the data dir.
func TestChatWithOpenAIModel(t *testing.T) {
	const key = "sk-test-secret-4711"
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello "}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"from the fake model."},"finish_reason":"stop"}]}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	dir := t.TempDir()
	t.Setenv("CTX_DATA_DIR", dir)
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	t.Setenv("CTX_DEFAULT_MODEL", "gpt")
	t.Setenv("CTX_MODELS_GPT_BASE_URL", srv.URL+"/v1")
	t.Setenv("CTX_MODELS_GPT_API_KEY_ENV", "CTXINF_TEST_KEY")
	t.Setenv("CTXINF_TEST_KEY", key)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	var out, errOut bytes.Buffer
	if code := run([]string{"chat"}, strings.NewReader("hi\n/quit\n"), &out, &errOut); code != 0 {
		t.Fatalf("chat exited %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "Hello from the fake model.") || !strings.Contains(out.String(), "provider openai") {
		t.Errorf("chat output:\n%s", out.String())
	}
	if auth != "Bearer "+key {
		t.Errorf("the server saw Authorization %q", auth)
	}
	if strings.Contains(out.String()+errOut.String(), key) {
		t.Error("the API key appears in the output or logs")
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(key)) {
			t.Errorf("the API key is written in %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A branch switches from an OpenAI model to an Anthropic one mid
// conversation (/model): the history goes to the new provider in its own
// shape, and neither key reaches the data dir or the logs.
func TestChatSwitchesModels(t *testing.T) {
	const gptKey, claudeKey = "sk-gpt-secret-0451", "sk-ant-secret-0452"
	gpt := fakeapi.New(fakeapi.ResponsesText("Hi from ", "gpt."))
	defer gpt.Close()
	claude := fakeapi.New(fakeapi.AnthropicText([]string{"Hi from ", "claude."}, "end_turn"))
	defer claude.Close()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"CTX_DATA_DIR": dir, "CTX_STORE_DURABILITY": "relaxed", "CTX_DEFAULT_MODEL": "gpt",
		"CTX_MODELS_GPT_BASE_URL": gpt.URL + "/v1", "CTX_MODELS_GPT_API": "responses", "CTX_MODELS_GPT_API_KEY_ENV": "CTXINF_GPT_KEY",
		"CTX_MODELS_CLAUDE_BASE_URL": claude.URL, "CTX_MODELS_CLAUDE_API_KEY_ENV": "CTXINF_CLAUDE_KEY",
		"CTXINF_GPT_KEY": gptKey, "CTXINF_CLAUDE_KEY": claudeKey, "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "",
		"ANTHROPIC_API_KEY": "", "CTX_LOG_LEVEL": "debug",
	} {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	in := "first question\n/model claude\nsecond question\n/model\n/quit\n"
	if code := run([]string{"chat"}, strings.NewReader(in), &out, &errOut); code != 0 {
		t.Fatalf("chat exited %d: %s", code, errOut.String())
	}
	o := out.String()
	if !strings.Contains(o, "Hi from gpt.") || !strings.Contains(o, "Hi from claude.") || !strings.Contains(o, "this branch uses: claude") {
		t.Fatalf("chat output:\n%s", o)
	}
	if gpt.Count() != 1 || claude.Count() != 1 {
		t.Fatalf("requests: gpt %d, claude %d; want 1 each", gpt.Count(), claude.Count())
	}
	req := claude.Requests()[0]
	if req.Header.Get("X-Api-Key") != claudeKey || !bytes.Contains(req.Body, []byte("first question")) ||
		!bytes.Contains(req.Body, []byte("Hi from gpt.")) || !bytes.Contains(req.Body, []byte(`"system":`)) {
		t.Errorf("claude request: key ok %v, body %s", req.Header.Get("X-Api-Key") == claudeKey, req.Body)
	}
	for _, key := range []string{gptKey, claudeKey} {
		if strings.Contains(o+errOut.String(), key) {
			t.Errorf("a key appears in the output or logs")
		}
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(key)) {
				t.Errorf("a key is written in %s", path)
			}
			return nil
		})
	}
}

func TestBenchServeJSON(t *testing.T) {
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	var out, errOut bytes.Buffer
	args := []string{"bench", "serve", "--json", "--conversations", "64", "--turns", "1", "--rate", "20", "--paced-for", "1s",
		"--proxy-requests", "10", "--frame-requests", "10", "--dir", t.TempDir()}
	if code := run(args, nil, &out, &errOut); code != 0 {
		t.Fatalf("bench serve exited %d: %s", code, errOut.String())
	}
	var f map[string]any
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("output %s: %v", out.String(), err)
	}
	for _, k := range []string{"turns_per_s", "first_delta_p50_us", "first_delta_p99_us", "paced_turns_per_s",
		"saturated_first_delta_p99_us", "frame_append_p50_us", "frame_append_p99_us", "frame_get_last64_p50_us",
		"fsync_4k_p50_us", "fsync_4k_p99_us", "fdatasync_4k_overwrite_p50_us", "fdatasync_4k_overwrite_p99_us",
		"thread_handoff_p50_us", "thread_handoff_p99_us", "sleep_1ms_late_p99_us"} {
		if v, ok := f[k].(float64); !ok || !(v > 0) {
			t.Errorf("%s = %v in %s", k, v, out.String())
		}
	}
	for _, k := range []string{"proxy_overhead_p50_us", "proxy_floor_overhead_p50_us", "paced_host_stalls_per_s", "paced_slow_sync_pct"} {
		if _, ok := f[k].(float64); !ok {
			t.Errorf("%s missing in %s", k, out.String())
		}
	}
	if f["paced_offered_per_s"] != 20.0 {
		t.Errorf("paced_offered_per_s = %v, want 20", f["paced_offered_per_s"])
	}
}

func TestContextDebug(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CTX_DATA_DIR", dir)
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	t.Setenv("CTX_DEFAULT_MODEL", "local")
	t.Setenv("CTX_LOCAL_DELAY", "0s")
	var out, errOut bytes.Buffer
	if code := run([]string{"chat"}, strings.NewReader("first\nsecond\n/quit\n"), &out, &errOut); code != 0 {
		t.Fatalf("chat exited %d: %s", code, errOut.String())
	}
	out.Reset()
	if code := run([]string{"inspect", "--json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("inspect exited %d: %s", code, errOut.String())
	}
	var rep struct {
		Sessions []struct{ Branches []struct{ ID string } }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	branch := rep.Sessions[0].Branches[0].ID
	out.Reset()
	if code := run([]string{"context", "debug", "--branch", branch, "--turn", "2", "--json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("context debug exited %d: %s", code, errOut.String())
	}
	var d struct {
		Matches bool
		Context struct {
			Pending []json.RawMessage
			User    struct {
				RenderedText string `json:"rendered_text"`
			}
		}
		Report struct{ Sections []struct{ Name string } }
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if !d.Matches || len(d.Context.Pending) != 2 || d.Context.User.RenderedText != "second" || len(d.Report.Sections) != 7 {
		t.Fatalf("context debug --turn 2 = %s", out.String())
	}
	out.Reset()
	if code := run([]string{"context", "debug", "--branch", branch, "--turn", "9"}, nil, &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "has no turn 9") {
		t.Errorf("a missing turn: exit %d, %s", code, errOut.String())
	}
}
