package wiring

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// Embedder returns the embedder retrieval.embedder names: hash,
// static (the word vectors at retrieval.vectors_path), openai (an
// OpenAI-compatible embeddings endpoint), or auto: static when the
// vectors file exists, else hash.
func Embedder(c config.Config, env Env) (retrieval.Embedder, error) {
	r := c.Retrieval
	hash := retrieval.HashEmbedder{Dims: r.HashDims}
	switch r.Embedder {
	case config.EmbedderHash:
		return hash, nil
	case config.EmbedderAuto:
		if _, err := os.Stat(r.VectorsPath); err != nil {
			env.Log.Debug().Str("vectors_path", r.VectorsPath).Msg("no word vectors (make models): the hash embedder is used")
			return hash, nil
		}
		fallthrough
	case config.EmbedderStatic:
		e, err := retrieval.LoadStatic(r.VectorsPath)
		if err != nil {
			return nil, fmt.Errorf("retrieval.vectors_path: %w (run `make models`, or set retrieval.embedder: hash)", err)
		}
		return e, nil
	case config.EmbedderOpenAI:
		opts := openai.EmbedOptions{BaseURL: r.EmbedBaseURL, Model: r.EmbedModel, Dimensions: r.EmbedDimensions}
		if r.EmbedAPIKeyEnv != "" {
			opts.APIKey = env.getenv(r.EmbedAPIKeyEnv)
		}
		if err := opts.Validate(); err != nil {
			return nil, fmt.Errorf("retrieval: %w", err)
		}
		e := openai.NewEmbedder(opts)
		if e.Dim() == 0 {
			// A model whose dimension is not known in advance: learn it
			// now, as the index namespace carries it.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := e.Embed(ctx, []string{"dimension probe"}); err != nil {
				return nil, fmt.Errorf("retrieval: embedder openai (%s at %s): %w; set retrieval.embed_dimensions, or start the server",
					r.EmbedModel, r.EmbedBaseURL, err)
			}
		}
		return e, nil
	}
	return nil, fmt.Errorf("retrieval.embedder: %q is not one of auto, hash, static, openai", r.Embedder)
}

// RankOptions maps the retrieval section onto the hybrid ranker's.
func RankOptions(r config.RetrievalConfig) retrieval.RankOptions {
	return retrieval.RankOptions{VectorWeight: r.VectorWeight, TextWeight: r.TextWeight, RecencyWeight: r.RecencyWeight,
		RecencyHalfLife: r.RecencyHalfLifeTurns, Threshold: r.Threshold, MMRLambda: r.MMRLambda,
		Overfetch: r.Overfetch, TopK: r.TopK, MaxK: r.MaxK,
		Neighbours: r.Neighbours, NeighboursBefore: r.NeighboursBefore,
		TimeBoost: r.TimeBoost, SpeakerBoost: r.SpeakerBoost}
}
