package server

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/contextinfinity/ctxinf/api"
)

// The OpenAI Go SDK's embeddings call works against /v1/embeddings, with
// the runtime's embedder: one vector per input, in order, the same text
// giving the same vector; bad input is an API error naming the field.
func TestEmbeddingsWithTheOpenAIClient(t *testing.T) {
	ts := newTestServer(t, Options{}, 0)
	t.Setenv("OPENAI_API_KEY", "unused")
	oc := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	res, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "any",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"the deploy target", "release train", "the deploy target"}}})
	if err != nil {
		t.Fatal(err)
	}
	name, want, err := ts.rt.Embed(ctx, []string{"release train"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 3 || res.Model != name || res.Usage.PromptTokens == 0 {
		t.Fatalf("embeddings: %d vectors, model %q (want %q), usage %+v", len(res.Data), res.Model, name, res.Usage)
	}
	for i, d := range res.Data {
		if d.Index != int64(i) || len(d.Embedding) != len(want[0]) {
			t.Fatalf("vector %d: index %d, %d dimensions, want %d", i, d.Index, len(d.Embedding), len(want[0]))
		}
	}
	for j, x := range want[0] {
		if float32(res.Data[1].Embedding[j]) != x {
			t.Fatalf("vector 1 differs from the runtime's embedding of the same text at %d", j)
		}
	}
	_, err = oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "any",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{1, 2, 3}}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Code != api.CodeInvalid {
		t.Fatalf("token input: %v, want a 400 invalid_request", err)
	}
}
