package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/providers"
)

// librarianSummarize returns the runtime's summarizer: the model named by
// librarian.model (actors.Librarian: entity checks, one retry, the
// deterministic fallback) when it can be used, else the deterministic
// summarizer (core.FallbackSummary), with a warning when a model was
// named. models and unavailable are runtimeModels'. Either waits
// librarian.delay first.
func librarianSummarize(c config.Config, models map[string]actors.Model, unavailable map[string]string,
	log zerolog.Logger) func(ctx context.Context, previous string, exchanges []core.Exchange) (string, error) {
	summarize := func(_ context.Context, prev string, ex []core.Exchange) (string, error) {
		return core.FallbackSummary(prev, ex), nil
	}
	if name := c.Librarian.Model; name != "" {
		m, ok := models[name]
		switch {
		case !ok:
			log.Warn().Str("model", name).Str("reason", unavailable[name]).
				Msg("librarian model not available: using the deterministic summarizer")
		case m.Provider.Name() == "local":
			log.Warn().Str("model", name).Msg("the local provider cannot summarize: using the deterministic summarizer")
		default:
			retry := providers.RetryPolicy{MaxRetries: c.Runtime.ProviderMaxRetries,
				BaseDelay: c.Runtime.ProviderRetryBaseDelay, MaxDelay: c.Runtime.ProviderRetryMaxDelay}
			summarize = actors.Librarian{
				Provider:        providers.WithRetry(m.Provider, retry),
				Model:           m.ID,
				MaxOutputTokens: c.Librarian.MaxOutputTokens,
				Log:             log.With().Str("component", "librarian").Str("librarian_model", name).Logger(),
			}.Summarize
		}
	}
	delay := c.Librarian.Delay
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
