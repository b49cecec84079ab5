package openai

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"

	oai "github.com/openai/openai-go/v3"

	"github.com/contextinfinity/ctxinf/providers"
)

// Defaults used by NewEmbedder for unset EmbedOptions.
const (
	DefaultEmbedModel = "text-embedding-3-small"
	DefaultEmbedBatch = 256
	// MaxEmbedBatch is OpenAI's limit of inputs in one request.
	MaxEmbedBatch = 2048
)

// knownEmbedDims are the default dimensions of OpenAI's embedding models,
// so that Name and Dim are known before the first request.
var knownEmbedDims = map[string]int{
	"text-embedding-3-small": 1536,
	"text-embedding-3-large": 3072,
	"text-embedding-ada-002": 1536,
}

// EmbedOptions configures an Embedder. The zero value embeds with
// OpenAI's text-embedding-3-small.
type EmbedOptions struct {
	// Name is the provider's name in config, the first part of the
	// Embedder's Name; "" means DefaultName.
	Name string
	// BaseURL is the API root, ending in /v1 (OpenAI, Ollama's
	// http://localhost:11434/v1, llama.cpp's server, TEI…); "" means
	// DefaultBaseURL.
	BaseURL string
	// APIKey is sent as the bearer token. The caller reads it from the
	// environment variable config names; it is never logged.
	APIKey string
	// Model is the embedding model; "" means DefaultEmbedModel.
	Model string
	// Dimensions asks the model for vectors of this length (models
	// that can shorten theirs, like text-embedding-3-*); 0 takes the
	// model's own, known in advance for OpenAI's models and learnt from
	// the first response for others. Set it for other models so that
	// Name carries the dimension from the start.
	Dimensions int
	// MaxBatch is the most inputs sent in one request; 0 means
	// DefaultEmbedBatch. Longer lists are sent in several requests, one
	// after the other.
	MaxBatch int
	// HTTPClient, when set, makes the HTTP requests.
	HTTPClient *http.Client
}

// Validate reports every invalid option at once, naming the field and
// its limits.
func (o EmbedOptions) Validate() error {
	var errs []error
	if o.Dimensions < 0 {
		errs = append(errs, fmt.Errorf("openai: embed options: Dimensions %d: must be 0 (the model's) or more", o.Dimensions))
	}
	if o.MaxBatch < 0 || o.MaxBatch > MaxEmbedBatch {
		errs = append(errs, fmt.Errorf("openai: embed options: MaxBatch %d: must be 0 (%d) to %d", o.MaxBatch, DefaultEmbedBatch, MaxEmbedBatch))
	}
	if err := (Options{BaseURL: o.BaseURL}).Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Embedder embeds texts with the Embeddings API (POST /v1/embeddings) of
// OpenAI or any compatible server. It has the method set of
// retrieval.Embedder (Name, Dim, Embed) without importing it. It is safe
// for concurrent use.
type Embedder struct {
	name     string // provider name, for errors
	model    string
	fullName string
	want     int          // Options.Dimensions, 0 for the model's
	known    int          // the dimension known before any request, or 0
	dim      atomic.Int64 // known or learnt dimension, 0 before
	batch    int
	optsErr  error
	client   oai.Client
}

// NewEmbedder returns an embedder configured by opts, with defaults for
// unset options. Options set here take precedence over the SDK's
// OPENAI_* environment variables for the base URL and the key. It does
// not fail: check opts.Validate first; invalid options make every Embed
// fail.
func NewEmbedder(opts EmbedOptions) *Embedder {
	optsErr := opts.Validate()
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if opts.Model == "" {
		opts.Model = DefaultEmbedModel
	}
	if opts.MaxBatch <= 0 || opts.MaxBatch > MaxEmbedBatch {
		opts.MaxBatch = DefaultEmbedBatch
	}
	copts := clientOptions(opts.BaseURL, opts.APIKey, opts.HTTPClient)
	e := &Embedder{
		name:    opts.Name,
		model:   opts.Model,
		want:    max(opts.Dimensions, 0),
		batch:   opts.MaxBatch,
		optsErr: optsErr,
		client:  oai.NewClient(copts...),
	}
	d := e.want
	if d == 0 {
		d = knownEmbedDims[opts.Model]
	}
	e.known = d
	e.dim.Store(int64(d))
	e.fullName = opts.Name + "/" + opts.Model
	if d > 0 {
		e.fullName += "-" + strconv.Itoa(d)
	}
	return e
}

// Name returns "<provider>/<model>-<dim>", e.g.
// "openai/text-embedding-3-small-1536". When the dimension was not known
// when the Embedder was made (a model not known here and no
// Options.Dimensions), it is "<provider>/<model>" until the first
// successful Embed learns the dimension, and then never changes again.
func (e *Embedder) Name() string {
	if e.known == 0 {
		if d := e.Dim(); d > 0 {
			return e.fullName + "-" + strconv.Itoa(d)
		}
	}
	return e.fullName
}

// Dim returns the length of the vectors: Options.Dimensions, or the
// model's, known for OpenAI's models and otherwise learnt from the first
// successful Embed (0 before it).
func (e *Embedder) Dim() int { return int(e.dim.Load()) }

// Embed returns one L2-normalised vector per text, in order, asking for
// at most MaxBatch texts in one request. HTTP and transport failures are
// *providers.Error (429 and 5xx retryable, the SDK's retries are off).
// A response that does not give exactly one vector per input, or gives
// vectors whose length differs from each other, from Options.Dimensions
// or from earlier responses, or a zero or non-finite vector, fails with a
// *providers.Error of Code "bad_response" naming what is wrong. When
// ctx is done, Embed returns its error.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.optsErr != nil {
		return nil, e.optsErr
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.batch {
		part := texts[start:min(start+e.batch, len(texts))]
		vecs, err := e.embedBatch(ctx, part, start)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// embedBatch sends one request for texts, which start at index base of
// the caller's list (for messages).
func (e *Embedder) embedBatch(ctx context.Context, texts []string, base int) ([][]float32, error) {
	params := oai.EmbeddingNewParams{
		Input:          oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		Model:          oai.EmbeddingModel(e.model),
		EncodingFormat: oai.EmbeddingNewParamsEncodingFormatFloat,
	}
	if e.want > 0 {
		params.Dimensions = oai.Int(int64(e.want))
	}
	resp, err := e.client.Embeddings.New(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, toError(e.name, err, nil)
	}
	bad := func(format string, args ...any) error {
		return &providers.Error{Provider: e.name, Code: "bad_response",
			Message: fmt.Sprintf("embeddings of %s: ", e.model) + fmt.Sprintf(format, args...)}
	}
	if len(resp.Data) != len(texts) {
		return nil, bad("%d vectors for %d inputs", len(resp.Data), len(texts))
	}
	raw := make([][]float64, len(texts))
	for _, d := range resp.Data {
		i := int(d.Index)
		if i < 0 || i >= len(texts) || raw[i] != nil {
			return nil, bad("index %d out of range or repeated (%d inputs)", d.Index, len(texts))
		}
		raw[i] = d.Embedding
	}
	out := make([][]float32, len(texts))
	dim := int(e.dim.Load())
	what := "earlier responses'"
	switch {
	case e.want > 0:
		what = "the Dimensions asked for"
	case e.known > 0:
		what = "the model's"
	case dim == 0:
		what = "the first vector's"
	}
	for i, r := range raw {
		if dim == 0 {
			dim = len(r)
		}
		if len(r) != dim {
			return nil, bad("input %d: vector of dimension %d, but %s is %d", base+i, len(r), what, dim)
		}
		v, ok := normalized(r)
		if !ok {
			return nil, bad("input %d: zero or non-finite vector", base+i)
		}
		out[i] = v
	}
	if dim > 0 && !e.dim.CompareAndSwap(0, int64(dim)) && e.Dim() != dim {
		// Another call learnt another dimension first.
		return nil, bad("vectors of dimension %d, but earlier responses had %d", dim, e.Dim())
	}
	return out, nil
}

// normalized returns v as float32 scaled to unit length, and false when
// it is zero or has a NaN or infinite entry.
func normalized(v []float64) ([]float32, bool) {
	var s float64
	for _, x := range v {
		s += x * x
	}
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return nil, false
	}
	inv := 1 / math.Sqrt(s)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return out, true
}
