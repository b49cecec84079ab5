package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// runtimeEmbedder returns the embedder retrieval.embedder names: hash,
// static (the word vectors at retrieval.vectors_path), openai (an
// OpenAI-compatible embeddings endpoint), or auto: static when the
// vectors file exists, else hash.
func runtimeEmbedder(c config.Config, log zerolog.Logger) (retrieval.Embedder, error) {
	r := c.Retrieval
	hash := retrieval.HashEmbedder{Dims: r.HashDims}
	switch r.Embedder {
	case config.EmbedderHash:
		return hash, nil
	case config.EmbedderAuto:
		if _, err := os.Stat(r.VectorsPath); err != nil {
			log.Debug().Str("vectors_path", r.VectorsPath).Msg("no word vectors (make models): the hash embedder is used")
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
			opts.APIKey = os.Getenv(r.EmbedAPIKeyEnv)
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

// rankOptions maps the retrieval section onto the hybrid ranker's.
func rankOptions(r config.RetrievalConfig) retrieval.RankOptions {
	return retrieval.RankOptions{VectorWeight: r.VectorWeight, TextWeight: r.TextWeight, RecencyWeight: r.RecencyWeight,
		RecencyHalfLife: r.RecencyHalfLifeTurns, Threshold: r.Threshold, MMRLambda: r.MMRLambda,
		Overfetch: r.Overfetch, TopK: r.TopK}
}

// search is `ctxinf search --branch B [--k N] [--json] [--force] QUERY`:
// the hybrid retrieval of a branch, with scores and source turns; with
// --force, the hits are forced into the branch's next turn.
func search(e *env, args []string) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	branchFlag := fs.String("branch", "", "the branch to search (required)")
	k := fs.Int("k", 0, "hits to return (default retrieval.top_k)")
	asJSON := fs.Bool("json", false, "print the hits as JSON")
	force := fs.Bool("force", false, "force the hits into the branch's next turn")
	chunkFlag := fs.String("chunks", "", "with --force and no query: these chunk ids (comma-separated)")
	serverURL := fs.String("server", "", "ask the ctxinf serve at this URL (default: the data directory's, when one runs on it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *branchFlag == "" {
		return errors.New("search: --branch is required")
	}
	branch, err := messages.ParseID[messages.BranchID](*branchFlag)
	if err != nil {
		return fmt.Errorf("--branch: %w", err)
	}
	query := strings.Join(fs.Args(), " ")
	if query == "" && (*chunkFlag == "" || !*force) {
		return errors.New("search: a query is required (or --force --chunks ID,...)")
	}
	opts := rankOptions(e.cfg.Retrieval)
	if *k > 0 {
		opts.TopK, opts.Overfetch = *k, max(opts.Overfetch, *k)
	}
	ctx := context.Background()
	var chunks []messages.ChunkID
	for _, s := range strings.Split(*chunkFlag, ",") {
		if s = strings.TrimSpace(s); s != "" {
			id, err := messages.ParseID[messages.ChunkID](s)
			if err != nil {
				return fmt.Errorf("--chunks: %w", err)
			}
			chunks = append(chunks, id)
		}
	}
	var hits []actors.Hit
	var forced int
	var rt *ctxinf.Runtime
	if *serverURL == "" {
		rt, err = openRuntime(ctx, e)
	}
	if rt != nil {
		defer rt.Close()
		hits, forced, err = rt.SearchAndForce(ctx, branch, query, &opts, *force, chunks)
	} else {
		c, rerr := e.remote(*serverURL, err)
		if rerr != nil {
			return rerr
		}
		hits, forced, err = c.SearchWith(ctx, branch, query, client.SearchOptions{K: *k, Force: *force, Chunks: chunks})
	}
	if err != nil {
		return err
	}
	if *asJSON {
		if hits == nil {
			hits = []actors.Hit{}
		}
		return json.NewEncoder(e.stdout).Encode(struct {
			Query  string       `json:"query"`
			Hits   []actors.Hit `json:"hits"`
			Forced int          `json:"forced,omitempty"`
		}{query, hits, forced})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "score\tvector\ttext\tturn seq\tsource turn\tchunk\ttext")
	for _, h := range hits {
		text := strings.Join(strings.Fields(h.Chunk.Text), " ")
		if r := []rune(text); len(r) > 80 {
			text = string(r[:77]) + "..."
		}
		fmt.Fprintf(tw, "%.3f\t%.3f\t%.3f\t%d\t%s\t%s\t%s\n", h.Score, h.Vector, h.Text, h.Chunk.Seq, h.Chunk.SourceTurn, h.Chunk.ID, text)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if forced > 0 {
		fmt.Fprintf(e.stdout, "%d chunks forced into the next turn of branch %s\n", forced, branch)
	}
	return nil
}
