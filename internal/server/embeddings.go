package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"
)

// The limits of an embeddings request.
const (
	MaxEmbedInputs = 256     // texts in one request
	MaxEmbedBytes  = 1 << 20 // bytes of all of them
)

// embeddings is the OpenAI-compatible POST /v1/embeddings with the
// runtime's embedder (retrieval.embedder: the one retrieval uses, so a
// client's vectors compare with the runtime's). input is a string or an
// array of strings; token arrays, dimensions other than the embedder's
// and encoding_format base64 are refused, naming the field. model is
// echoed back as the embedder's name.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
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
	name, vecs, err := s.rt.Embed(r.Context(), texts)
	if err != nil {
		return &apiError{Status: http.StatusBadGateway, Code: CodeProvider, Message: "the embedder failed: " + apiMessage(err)}
	}
	if req.Dimensions > 0 && len(vecs) > 0 && req.Dimensions != len(vecs[0]) {
		return invalid("dimensions: %d: the embedder (%s) gives %d", req.Dimensions, name, len(vecs[0]))
	}
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
		n := (utf8.RuneCountInString(texts[i]) + 3) / 4 // the runtime's default count: a token per four runes
		out.Usage.PromptTokens += n
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	writeJSON(w, http.StatusOK, out)
	return nil
}
