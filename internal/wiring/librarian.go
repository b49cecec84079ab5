package wiring

import (
	"context"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/providers"
)

// librarianModel returns the librarian of the model librarian.model
// names (actors.Librarian: entity checks, one retry, the deterministic
// fallback), or false when the deterministic summarizer is to be used,
// with a warning for a model named but unusable. With librarian.model ""
// it is the small model of the default model's provider
// (librarian.openai_model, librarian.anthropic_model), when the default
// model is OpenAI's or Anthropic's own API and its key is set: def is the
// default model as Models built it. models and unavailable are Models'.
func librarianModel(c config.Config, def actors.Model, models map[string]actors.Model, unavailable map[string]string,
	log zerolog.Logger) (actors.Librarian, bool) {
	name := c.Librarian.Model
	librarian := func(m actors.Model, id, what string) actors.Librarian {
		return actors.Librarian{
			Provider:        providers.WithRetry(m.Provider, *retryPolicy(c.Runtime)),
			Model:           id,
			MaxOutputTokens: c.Librarian.MaxOutputTokens,
			Log:             log.With().Str("component", "librarian").Str("librarian_model", what).Logger(),
		}
	}
	switch name {
	case config.LibrarianDeterministic:
		return actors.Librarian{}, false
	case "":
		id, ok := smallModel(c, def)
		if !ok {
			return actors.Librarian{}, false
		}
		log.Info().Str("librarian_model", id).Str("provider", def.Provider.Name()).
			Msg("the librarian summarizes with the small model of the default model's provider (librarian.model \"deterministic\" turns it off)")
		return librarian(def, id, id), true
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
	return librarian(m, m.ID, name), true
}

// smallModel returns the model id of the small model of def's provider
// (librarian.openai_model, librarian.anthropic_model), if def is
// OpenAI's or Anthropic's own API (its key is set: Models made def the
// local provider otherwise) and the id is not "".
func smallModel(c config.Config, def actors.Model) (string, bool) {
	if def.Provider == nil {
		return "", false
	}
	var id, api string
	switch def.Provider.Name() {
	case "openai":
		id, api = c.Librarian.OpenAIModel, "api.openai.com"
	case "anthropic":
		id, api = c.Librarian.AnthropicModel, "api.anthropic.com"
	default:
		return "", false
	}
	mc, ok := c.Models[c.DefaultModel]
	if !ok || id == "" || !strings.Contains(mc.BaseURL, api) {
		// A compatible server (Ollama, vLLM…) has its own model names.
		return "", false
	}
	return id, true
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
