package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/contextinfinity/ctxinf/providers/openai"
)

// embedder is retrieval.Embedder, which providers may not import: the
// Embedder must have its method set.
type embedder interface {
	Name() string
	Dim() int
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

var _ embedder = (*openai.Embedder)(nil)

// embedRequest is the body of POST /v1/embeddings.
type embedRequest struct {
	Input          []string `json:"input"`
	Model          string   `json:"model"`
	Dimensions     *int     `json:"dimensions"`
	EncodingFormat string   `json:"encoding_format"`
}

// fakeEmbeddings is an OpenAI-compatible /v1/embeddings server. By
// default each text's vector is [len(text), 1, 2, …] of dim entries
// (unnormalised, to check the client normalises), listed in reverse
// order (to check the client orders by index); respond overrides it.
type fakeEmbeddings struct {
	*httptest.Server
	dim     int
	respond func(w http.ResponseWriter, req embedRequest)

	mu   sync.Mutex
	reqs []embedRequest
	auth []string
}

func newFakeEmbeddings(t *testing.T, dim int) *fakeEmbeddings {
	t.Helper()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	f := &fakeEmbeddings{dim: dim}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.Error(w, "not found: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		var req embedRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		if f.respond != nil {
			f.respond(w, req)
			return
		}
		vecs := make([][]float64, len(req.Input))
		for i, s := range req.Input {
			vecs[i] = fakeVector(s, f.dim)
		}
		writeEmbeddings(w, req.Model, vecs)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeEmbeddings) requests() []embedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]embedRequest(nil), f.reqs...)
}

func fakeVector(s string, dim int) []float64 {
	v := make([]float64, dim)
	v[0] = float64(len(s))
	for j := 1; j < dim; j++ {
		v[j] = float64(j)
	}
	return v
}

// writeEmbeddings answers with vecs, the last first.
func writeEmbeddings(w http.ResponseWriter, model string, vecs [][]float64) {
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	body := struct {
		Object string         `json:"object"`
		Model  string         `json:"model"`
		Data   []item         `json:"data"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Model: model, Usage: map[string]int{"prompt_tokens": 1, "total_tokens": 1}}
	for i := len(vecs) - 1; i >= 0; i-- {
		body.Data = append(body.Data, item{Object: "embedding", Index: i, Embedding: vecs[i]})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func unitOf(v []float64) []float32 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x / math.Sqrt(s))
	}
	return out
}

func TestEmbedBatchesInOrder(t *testing.T) {
	srv := newFakeEmbeddings(t, 4)
	e := openai.NewEmbedder(openai.EmbedOptions{BaseURL: srv.URL + "/v1", APIKey: "test-key", Model: "nomic-embed-text", Dimensions: 4, MaxBatch: 2})
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee"}
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if len(got) != len(texts) {
		t.Fatalf("Embed returned %d vectors, want %d", len(got), len(texts))
	}
	for i, s := range texts {
		want := unitOf(fakeVector(s, 4))
		for j := range want {
			if math.Abs(float64(got[i][j]-want[j])) > 1e-6 {
				t.Fatalf("vector %d (%q) = %v, want %v", i, s, got[i], want)
			}
		}
	}
	reqs := srv.requests()
	var sizes []int
	for _, r := range reqs {
		sizes = append(sizes, len(r.Input))
		if r.Model != "nomic-embed-text" || r.EncodingFormat != "float" || r.Dimensions == nil || *r.Dimensions != 4 {
			t.Errorf("request = %+v, want model nomic-embed-text, encoding_format float, dimensions 4", r)
		}
	}
	if fmt.Sprint(sizes) != "[2 2 1]" {
		t.Errorf("batch sizes = %v, want [2 2 1]", sizes)
	}
	if srv.auth[0] != "Bearer test-key" {
		t.Errorf("Authorization = %q, want the API key", srv.auth[0])
	}
	if e.Name() != "openai/nomic-embed-text-4" || e.Dim() != 4 {
		t.Errorf("Name, Dim = %q, %d, want openai/nomic-embed-text-4, 4", e.Name(), e.Dim())
	}
}

func TestEmbedLearnsDimension(t *testing.T) {
	srv := newFakeEmbeddings(t, 3)
	e := openai.NewEmbedder(openai.EmbedOptions{Name: "ollama", BaseURL: srv.URL + "/v1", Model: "all-minilm"})
	if e.Dim() != 0 || e.Name() != "ollama/all-minilm" {
		t.Fatalf("before Embed: Name, Dim = %q, %d, want ollama/all-minilm, 0", e.Name(), e.Dim())
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if e.Dim() != 3 || e.Name() != "ollama/all-minilm-3" {
		t.Errorf("after Embed: Name, Dim = %q, %d, want ollama/all-minilm-3, 3", e.Name(), e.Dim())
	}
	if r := srv.requests()[0]; r.Dimensions != nil {
		t.Errorf("dimensions = %d sent, want none (the model's)", *r.Dimensions)
	}
	// A later response of another dimension is an error.
	srv.dim = 5
	_, err := e.Embed(context.Background(), []string{"y"})
	pe := providerError(t, err)
	if pe.Code != "bad_response" || !strings.Contains(pe.Message, "dimension 5, but earlier responses' is 3") {
		t.Errorf("err = %v, want bad_response about dimension 5", err)
	}
	known := openai.NewEmbedder(openai.EmbedOptions{BaseURL: srv.URL + "/v1"})
	if known.Name() != "openai/text-embedding-3-small-1536" || known.Dim() != 1536 {
		t.Errorf("default model: Name, Dim = %q, %d, want openai/text-embedding-3-small-1536, 1536", known.Name(), known.Dim())
	}
}

func TestEmbedDimensionMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		dims int // EmbedOptions.Dimensions
		vecs [][]float64
		want string
	}{
		{"within a response", 0, [][]float64{{1, 0, 0}, {0, 1}}, "input 1: vector of dimension 2, but the first vector's is 3"},
		{"against Dimensions", 3, [][]float64{{1, 0, 0, 0}, {0, 1, 0, 0}}, "vector of dimension 4, but the Dimensions asked for is 3"},
		{"zero vector", 0, [][]float64{{1, 0}, {0, 0}}, "input 1: zero or non-finite vector"},
		{"missing vector", 0, [][]float64{{1, 0}}, "1 vectors for 2 inputs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeEmbeddings(t, 0)
			srv.respond = func(w http.ResponseWriter, req embedRequest) { writeEmbeddings(w, req.Model, tc.vecs) }
			e := openai.NewEmbedder(openai.EmbedOptions{BaseURL: srv.URL + "/v1", Model: "m", Dimensions: tc.dims})
			got, err := e.Embed(context.Background(), []string{"a", "b"})
			if err == nil {
				t.Fatalf("Embed = %v, want an error", got)
			}
			pe := providerError(t, err)
			if pe.Code != "bad_response" || pe.Retryable || !strings.Contains(pe.Message, tc.want) {
				t.Errorf("err = %v, want a non-retryable bad_response containing %q", err, tc.want)
			}
		})
	}
}

func TestEmbedHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		status    int
		retryable bool
	}{{http.StatusBadRequest, false}, {http.StatusUnauthorized, false}, {http.StatusTooManyRequests, true}, {http.StatusServiceUnavailable, true}} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := newFakeEmbeddings(t, 2)
			srv.respond = func(w http.ResponseWriter, _ embedRequest) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"error":{"message":"model not found: nope","type":"invalid_request_error","code":"model_not_found"}}`))
			}
			e := openai.NewEmbedder(openai.EmbedOptions{BaseURL: srv.URL + "/v1", Model: "nope"})
			_, err := e.Embed(context.Background(), []string{"a"})
			pe := providerError(t, err)
			if pe.StatusCode != tc.status || pe.Retryable != tc.retryable || pe.Code != "model_not_found" || !strings.Contains(pe.Message, "model not found") {
				t.Errorf("err = %+v, want status %d, retryable %v, code model_not_found", pe, tc.status, tc.retryable)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("server got %d requests, want 1 (the SDK's retries are off)", n)
			}
		})
	}
}

func TestEmbedOptionsValidate(t *testing.T) {
	err := openai.EmbedOptions{Dimensions: -1, MaxBatch: 5000, BaseURL: "ftp://x"}.Validate()
	for _, want := range []string{"Dimensions -1", "MaxBatch 5000", "BaseURL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
	e := openai.NewEmbedder(openai.EmbedOptions{MaxBatch: -1})
	if _, err := e.Embed(context.Background(), []string{"a"}); err == nil || !strings.Contains(err.Error(), "MaxBatch") {
		t.Errorf("Embed with invalid options = %v, want the Validate error", err)
	}
}

func TestEmbedCancelled(t *testing.T) {
	srv := newFakeEmbeddings(t, 2)
	e := openai.NewEmbedder(openai.EmbedOptions{BaseURL: srv.URL + "/v1", Model: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"a"}); err != context.Canceled {
		t.Errorf("Embed on a cancelled context = %v, want context.Canceled", err)
	}
}
