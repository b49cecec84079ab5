package server

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// The limits of an embeddings request.
const (
	MaxEmbedInputs = 256     // texts in one request
	MaxEmbedBytes  = 1 << 20 // bytes of all of them
)

// EmbedderHeader names, on an answer of POST /v1/embeddings, the
// embedder that gave its vectors (its model and dimension).
const EmbedderHeader = "X-Ctx-Embedder"

// embeddings is the OpenAI-compatible POST /v1/embeddings with the
// runtime's embedder (retrieval.embedder: the one retrieval uses, so a
// client's vectors compare with the runtime's), named by the answer's
// model and its X-Ctx-Embedder header, whatever the request's model.
// input is a string or an array of strings; token arrays and
// encoding_format base64 are refused, naming the field. dimensions
// shortens the vectors, as OpenAI's text-embedding-3 models do: the
// first dimensions components, scaled back to unit length; more than
// the embedder gives is refused, naming the limit.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     *int            `json:"dimensions"`
		User           string          `json:"user"`
	}
	if err := decodeAPIRequest(r, &req, "Embeddings"); err != nil {
		return err
	}
	var texts []string
	var one string
	switch {
	case len(req.Input) == 0 || string(req.Input) == "null":
		return invalid("input: required (a string or an array of strings)")
	case json.Unmarshal(req.Input, &one) == nil:
		texts = []string{one}
	case json.Unmarshal(req.Input, &texts) == nil:
	default:
		return invalid("input: want a string or an array of strings (token arrays are not supported)")
	}
	total := 0
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return invalid("input[%d]: empty", i)
		}
		total += len(t)
	}
	switch {
	case len(texts) > MaxEmbedInputs:
		return invalid("input: %d texts, limit %d", len(texts), MaxEmbedInputs)
	case total > MaxEmbedBytes:
		return invalid("input: %d bytes, limit %d", total, MaxEmbedBytes)
	case req.EncodingFormat != "" && req.EncodingFormat != "float":
		return invalid("encoding_format: %q: only \"float\" is supported", req.EncodingFormat)
	}
	name, dim := s.rt.Embedder()
	if d := req.Dimensions; d != nil && (*d < 1 || *d > dim) {
		return invalid("dimensions: %d, want 1 to %d (the embedder %s gives %d)", *d, dim, name, dim)
	}
	name, vecs, err := s.rt.Embed(r.Context(), texts)
	if err != nil {
		return &apiError{Status: http.StatusBadGateway, Code: api.CodeProvider, Message: "the embedder failed: " + apiMessage(err)}
	}
	if d := req.Dimensions; d != nil && *d < dim {
		for i, v := range vecs {
			vecs[i] = shorten(v, *d)
		}
	}
	w.Header().Set(EmbedderHeader, name)
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Model: name}
	for i, v := range vecs {
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: v})
		out.Usage.PromptTokens += tokens.Estimate.Count(texts[i])
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	writeJSON(w, http.StatusOK, out)
	return nil
}

// shorten is a new vector of the first n components of v, scaled to
// unit length (zero if they are); v, which the embedder may hold on to,
// is left as it is.
func shorten(v []float32, n int) []float32 {
	out := make([]float32, min(n, len(v)))
	var sum float64
	for _, x := range v[:len(out)] {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return out
	}
	norm := math.Sqrt(sum)
	for i, x := range v[:len(out)] {
		out[i] = float32(float64(x) / norm)
	}
	return out
}
