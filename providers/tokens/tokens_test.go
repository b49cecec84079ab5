package tokens_test

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/contextinfinity/ctxinf/providers/tokens"
)

var (
	o200k  = tokens.ForModel("openai", "gpt-4o")
	cl100k = tokens.ForModel("openai", "gpt-4")
)

func TestCount(t *testing.T) {
	tests := []struct {
		c    tokens.Counter
		text string
		want int
	}{
		{cl100k, "", 0},
		{o200k, "", 0},
		{tokens.Anthropic, "", 0},
		// tiktoken's tests/test_simple_public.py
		{cl100k, "hello world", 2},
		// tiktoken's tests/test_base_encodings.py (cl100k_test_data)
		{cl100k, "Hello world!", 3},
		{cl100k, "This     is     a     sentence     with     extra     spaces.", 14},
		{cl100k, "How about numbers? 123 45.6 -78.9", 14},
		{cl100k, "Mixed script: 你好 world! 🌍", 11},
		// OpenAI's cookbook, "How to count tokens with tiktoken"
		{o200k, "2 + 2 = 4", 7},
		{o200k, "お誕生日おめでとう", 8},
		{cl100k, "お誕生日おめでとう", 9},
		// special tokens are counted as the text they are
		{cl100k, "<|endoftext|>", 7},
	}
	for _, tt := range tests {
		if got := tt.c.Count(tt.text); got != tt.want {
			t.Errorf("%s.Count(%q) = %d, want %d", tt.c.Name(), tt.text, got, tt.want)
		}
	}
}

// The framing ChatOverhead gives for OpenAI, added to the counts of the
// messages' fields, reproduces the prompt_tokens OpenAI's API reported
// for the example conversation in OpenAI's cookbook: 124 for gpt-4o,
// 129 for gpt-4-0613. A message's name costs one token more.
func TestChatOverheadOpenAICookbook(t *testing.T) {
	msgs := []struct{ role, name, content string }{
		{"system", "", "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
		{"system", "example_user", "New synergies will help drive top-line growth."},
		{"system", "example_assistant", "Things working well together will increase revenue."},
		{"system", "example_user", "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
		{"system", "example_assistant", "Let's talk later when we're less busy about how to do better."},
		{"user", "", "This late pivot means we don't have time to boil the ocean for the client deliverable."},
	}
	perMessage, perRequest := tokens.ChatOverhead("openai")
	for _, tt := range []struct {
		model string
		want  int
	}{{"gpt-4o-2024-08-06", 124}, {"gpt-4-0613", 129}} {
		c := tokens.ForModel("openai", tt.model)
		n := perRequest
		for _, m := range msgs {
			n += perMessage + c.Count(m.role) + c.Count(m.content)
			if m.name != "" {
				n += c.Count(m.name) + 1
			}
		}
		if n != tt.want {
			t.Errorf("%s: conversation = %d tokens, want %d", tt.model, n, tt.want)
		}
	}
}

func TestChatOverhead(t *testing.T) {
	tests := []struct {
		provider               string
		perMessage, perRequest int
	}{
		{"openai", 3, 3},
		{"OpenAI", 3, 3},
		{"anthropic", 3, 4},
		{"local", 4, 3},
		{"fake", 4, 3},
	}
	for _, tt := range tests {
		if m, r := tokens.ChatOverhead(tt.provider); m != tt.perMessage || r != tt.perRequest {
			t.Errorf("ChatOverhead(%q) = %d, %d, want %d, %d", tt.provider, m, r, tt.perMessage, tt.perRequest)
		}
	}
}

func TestForModel(t *testing.T) {
	tests := []struct {
		provider, model, want string
	}{
		{"openai", "gpt-4o", tokens.O200KBase},
		{"openai", "gpt-4o-mini", tokens.O200KBase},
		{"openai", "gpt-4o-2024-08-06", tokens.O200KBase},
		{"openai", "chatgpt-4o-latest", tokens.O200KBase},
		{"openai", "gpt-4.1", tokens.O200KBase},
		{"openai", "gpt-4.1-nano", tokens.O200KBase},
		{"openai", "gpt-4.5-preview", tokens.O200KBase},
		{"openai", "gpt-5", tokens.O200KBase},
		{"openai", "gpt-5-mini", tokens.O200KBase},
		{"openai", "gpt-5.2-codex", tokens.O200KBase},
		{"openai", "o1", tokens.O200KBase},
		{"openai", "o1-mini", tokens.O200KBase},
		{"openai", "o3-mini", tokens.O200KBase},
		{"openai", "o4-mini", tokens.O200KBase},
		{"openai", "gpt-oss-120b", tokens.O200KBase},
		{"openai", "some-new-model", tokens.O200KBase},
		{"openai", "", tokens.O200KBase},
		{"openai", "gpt-4", tokens.CL100KBase},
		{"openai", "GPT-4", tokens.CL100KBase},
		{"openai", "gpt-4-0613", tokens.CL100KBase},
		{"openai", "gpt-4-turbo", tokens.CL100KBase},
		{"openai", "gpt-4-32k", tokens.CL100KBase},
		{"openai", "gpt-3.5-turbo", tokens.CL100KBase},
		{"openai", "gpt-3.5-turbo-0125", tokens.CL100KBase},
		{"openai", "gpt-35-turbo", tokens.CL100KBase},
		{"openai", "text-embedding-3-small", tokens.CL100KBase},
		{"openai", "text-embedding-3-large", tokens.CL100KBase},
		{"openai", "text-embedding-ada-002", tokens.CL100KBase},
		{"openai", "openai/gpt-4", tokens.CL100KBase},
		{"openai", "openai/gpt-4o", tokens.O200KBase},
		{"anthropic", "claude-sonnet-5-5", tokens.AnthropicEstimate},
		{"anthropic", "", tokens.AnthropicEstimate},
		{"local", "anything", tokens.CL100KBase},
		{"fake", "", tokens.CL100KBase},
		{"ollama", "llama3.1", tokens.CL100KBase},
		{"", "gpt-4o", tokens.CL100KBase},
	}
	for _, tt := range tests {
		if got := tokens.ForModel(tt.provider, tt.model).Name(); got != tt.want {
			t.Errorf("ForModel(%q, %q).Name() = %q, want %q", tt.provider, tt.model, got, tt.want)
		}
	}
}

func TestAnthropicCount(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},
		{" ", 1},
		{"\n", 1},
		{"\xff", 1},
		{"hello world", 3},          // 1.5 + 1.5
		{"hello, world!", 4},        // 1.5 + 0.5 + 1.5 + 0.5
		{"12345", 2},                // ⌈5/3⌉
		{"\t\tx", 2},                // an indent, then a word
		{"你好", 2},                   // 3 bytes each
		{"🚀", 2},                    // 4/3
		{"internationalization", 4}, // 1 + 19/8
	}
	for _, tt := range tests {
		if got := tokens.Anthropic.Count(tt.text); got != tt.want {
			t.Errorf("Anthropic.Count(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
	if got := tokens.Anthropic.Name(); got != tokens.AnthropicEstimate {
		t.Errorf("Anthropic.Name() = %q, want %q", got, tokens.AnthropicEstimate)
	}
}

// The calibration of the Anthropic estimate (see its doc): on each
// sample the estimate is within 15% of the target built from published
// figures and within a sane ratio of cl100k_base. Run with -v for the
// table.
func TestAnthropicCalibration(t *testing.T) {
	samples := []struct {
		file, what string
		target     func(s string) float64
	}{
		{"prose.txt", "English prose", func(s string) float64 { return float64(utf8.RuneCountInString(s)) / 3.5 }},
		{"code.go.txt", "Go source", func(s string) float64 { return 1.30 * float64(o200k.Count(s)) }},
		{"request.json", "chat request", func(s string) float64 { return 1.30 * float64(o200k.Count(s)) }},
		{"markdown.md", "SRD §1-2", func(s string) float64 { return 1.25 * float64(o200k.Count(s)) }},
		{"multilingual.txt", "10 scripts", func(s string) float64 { return float64(cl100k.Count(s)) }},
	}
	for _, sm := range samples {
		s := readSample(t, sm.file)
		est, target, cl := tokens.Anthropic.Count(s), sm.target(s), cl100k.Count(s)
		ratio, vsCL := float64(est)/target, float64(est)/float64(cl)
		t.Logf("%-16s %-13s %5d / %5.0f = %.2f (%.2f) o200k=%d cl100k=%d chars/token=%.2f",
			sm.file, sm.what, est, target, ratio, vsCL, o200k.Count(s), cl, float64(utf8.RuneCountInString(s))/float64(est))
		if math.Abs(ratio-1) > 0.15 {
			t.Errorf("%s: Anthropic.Count = %d, target %.0f: off by more than 15%%", sm.file, est, target)
		}
		if vsCL < 0.8 || vsCL > 1.6 {
			t.Errorf("%s: Anthropic.Count = %d, cl100k_base %d: ratio %.2f outside [0.8, 1.6]", sm.file, est, cl, vsCL)
		}
	}
}

func readSample(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func samples(t testing.TB) []string {
	var out []string
	for _, f := range []string{"prose.txt", "code.go.txt", "request.json", "markdown.md", "multilingual.txt"} {
		out = append(out, readSample(t, f))
	}
	return out
}

func counters() []tokens.Counter {
	return []tokens.Counter{o200k, cl100k, tokens.Anthropic}
}

// Counting the same text gives the same count, every time.
func TestDeterministic(t *testing.T) {
	for _, c := range counters() {
		for _, s := range samples(t) {
			want := c.Count(s)
			for range 5 {
				if got := c.Count(s); got != want {
					t.Fatalf("%s.Count changed from %d to %d", c.Name(), want, got)
				}
			}
		}
	}
}

// Counters are safe for concurrent use (run with -race;
// TestConcurrentFirstLoad covers the first load).
func TestConcurrent(t *testing.T) {
	texts := samples(t)
	want := map[string][]int{}
	for _, c := range counters() {
		for _, s := range texts {
			want[c.Name()] = append(want[c.Name()], c.Count(s))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for _, c := range counters() {
				for i, s := range texts {
					if got := c.Count(s); got != want[c.Name()][i] {
						errs <- fmt.Errorf("goroutine %d: %s.Count(sample %d) = %d, want %d", g, c.Name(), i, got, want[c.Name()][i])
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Long runs of one character are counted in linear time (the inputs of
// tiktoken's test_large_repeated and test_catastrophically_repetitive;
// without the cuts Count makes, 100 KB of "x" takes seconds and 1 MB minutes).
func TestLargeRepeated(t *testing.T) {
	t.Parallel()
	for _, unit := range []string{"x", "^", "0", " ", "\n", "'s"} {
		s := strings.Repeat(unit, 100_000/len(unit))
		for _, c := range counters() {
			if n := c.Count(s); n <= 0 || n > len(s) {
				t.Errorf("%s.Count(%q × %d) = %d", c.Name(), unit, len(s)/len(unit), n)
			}
		}
	}
}

const childEnv = "CTXINF_TOKENS_LOAD_CHILD"

// The encodings load from the binary alone: a fresh process with every
// HTTP request failing, a proxy that goes nowhere and an empty
// TIKTOKEN_CACHE_DIR loads both, counts right, makes no request and
// writes no cache. The child also reports what loading costs (go test -v
// shows it).
func TestLoadOffline(t *testing.T) {
	t.Parallel()
	if os.Getenv(childEnv) == "1" {
		loadOfflineChild(t)
		return
	}
	cache := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadOffline$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TIKTOKEN_CACHE_DIR="+cache,
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("TIKTOKEN_CACHE_DIR has %d entries, want none", len(entries))
	}
}

type refuseNetwork struct {
	mu   sync.Mutex
	urls []string
}

func (r *refuseNetwork) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.urls = append(r.urls, req.URL.String())
	return nil, errors.New("network refused by test")
}

func loadOfflineChild(t *testing.T) {
	refuse := &refuseNetwork{}
	http.DefaultTransport = refuse
	var m runtime.MemStats
	heap := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	allocated := m.TotalAlloc
	for _, tt := range []struct {
		c     tokens.Counter
		name  string
		count int
	}{{cl100k, tokens.CL100KBase, 2}, {o200k, tokens.O200KBase, 2}} {
		h0, start := heap(), time.Now()
		name := tt.c.Name() // loads
		took, h1 := time.Since(start), heap()
		if name != tt.name {
			t.Errorf("Name() = %q, want %q", name, tt.name)
		}
		if n := tt.c.Count("hello world"); n != tt.count {
			t.Errorf("%s.Count(%q) = %d, want %d", name, "hello world", n, tt.count)
		}
		t.Logf("loaded %s in %v: heap +%.1f MiB", name, took.Round(time.Millisecond), float64(h1-h0)/(1<<20))
	}
	t.Logf("both encodings: heap +%.1f MiB (HeapAlloc after GC), %.1f MiB allocated while loading",
		float64(heap()-before)/(1<<20), float64(m.TotalAlloc-allocated)/(1<<20))
	if len(refuse.urls) > 0 {
		t.Errorf("HTTP requests made: %v", refuse.urls)
	}
}

// FuzzCount checks that no counter panics, that counts are
// deterministic, 0 exactly for the empty string, and for valid UTF-8 at
// most one token per byte.
func FuzzCount(f *testing.F) {
	for _, s := range []string{"", "hello world", "<|endoftext|>", "\xff\xfe", " \u00850", "today\n  \n", strings.Repeat("a", 300), "🚀🚀", "x := map[string]int{\"a\": 1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range counters() {
			n := c.Count(s)
			if n2 := c.Count(s); n2 != n {
				t.Fatalf("%s.Count(%q) = %d then %d", c.Name(), s, n, n2)
			}
			if (n == 0) != (s == "") {
				t.Fatalf("%s.Count(%q) = %d", c.Name(), s, n)
			}
			if utf8.ValidString(s) && n > len(s) {
				t.Fatalf("%s.Count(%q) = %d, more than its %d bytes", c.Name(), s, n, len(s))
			}
		}
	})
}

// BenchmarkCount counts about 1 KB of English prose and of Go source
// with each counter (the encodings are loaded before timing).
func BenchmarkCount(b *testing.B) {
	for _, sample := range []string{"prose.txt", "code.go.txt"} {
		text := readSample(b, sample)[:1024]
		for _, c := range []tokens.Counter{o200k, cl100k, tokens.Anthropic} {
			b.Run(fmt.Sprintf("text=%s/counter=%s", strings.TrimSuffix(sample, filepath.Ext(sample)), c.Name()), func(b *testing.B) {
				n := c.Count(text)
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					c.Count(text)
				}
				b.ReportMetric(float64(n), "tokens/op")
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)*1024/float64(len(text)), "µs/KB")
			})
		}
	}
}
