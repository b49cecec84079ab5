package wiring

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/providers"
)

// librarianModel returns the librarian of the model named by
// librarian.model (actors.Librarian: entity checks, one retry, the
// deterministic fallback), or false when none is named or it cannot be
// used, with a warning for a model named but unusable. models and
// unavailable are Models'.
func librarianModel(c config.Config, models map[string]actors.Model, unavailable map[string]string,
	log zerolog.Logger) (actors.Librarian, bool) {
	name := c.Librarian.Model
	if name == "" {
		return actors.Librarian{}, false
	}
	m, ok := models[name]
	switch {
	case !ok:
		log.Warn().Str("model", name).Str("reason", unavailable[name]).
			Msg("librarian model not available: using the deterministic summarizer")
		return actors.Librarian{}, false
	case m.Provider.Name() == "local":
		log.Warn().Str("model", name).Msg("the local provider cannot summarize: using the deterministic summarizer")
		return actors.Librarian{}, false
	}
	return actors.Librarian{
		Provider:        providers.WithRetry(m.Provider, *retryPolicy(c.Runtime)),
		Model:           m.ID,
		MaxOutputTokens: c.Librarian.MaxOutputTokens,
		Log:             log.With().Str("component", "librarian").Str("librarian_model", name).Logger(),
	}, true
}

// librarianSummarize returns the runtime's summarizer: the librarian
// model's (librarianModel) when there is one, else the deterministic
// summarizer (core.FallbackSummary). Either waits librarian.delay first.
func librarianSummarize(lib actors.Librarian, ok bool, delay time.Duration) func(ctx context.Context, previous string, exchanges []core.Exchange) (string, error) {
	summarize := func(_ context.Context, prev string, ex []core.Exchange) (string, error) {
		return core.FallbackSummary(prev, ex), nil
	}
	if ok {
		summarize = lib.Summarize
	}
	return func(ctx context.Context, prev string, ex []core.Exchange) (string, error) {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return summarize(ctx, prev, ex)
	}
}

// librarianShrink returns the shrinker's step 4 with the librarian model's
// shrink prompt (actors.Config.Shrink), or nil without a librarian model:
// the deterministic shrink of the summary sent is then step 4.
func librarianShrink(lib actors.Librarian, ok bool) func(ctx context.Context, summary string, targetTokens int) (string, error) {
	if !ok {
		return nil
	}
	return lib.Shrink
}
