package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/anthropic"
	"github.com/contextinfinity/ctxinf/providers/local"
	"github.com/contextinfinity/ctxinf/providers/openai"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// errNoKey is why a model with a remote provider cannot be used.
type errNoKey struct{ env string }

func (e errNoKey) Error() string {
	return fmt.Sprintf("no API key in the environment variable %s", e.env)
}

// buildModel makes the runtime model configured as m: its provider, the
// provider's model id and output bound. A remote provider needs its key
// in the environment variable m.APIKeyEnv; the key goes to the provider
// and nowhere else.
func buildModel(c config.Config, env Env, name string, m config.ModelConfig) (actors.Model, error) {
	out := actors.Model{ID: m.ModelID, MaxOutputTokens: m.MaxOutputTokens}
	switch m.Provider {
	case "openai", "anthropic":
		key := env.getenv(m.APIKeyEnv)
		if key == "" {
			return out, errNoKey{m.APIKeyEnv}
		}
		if m.Provider == "anthropic" {
			out.Provider = anthropic.New(anthropic.Options{Name: "anthropic", BaseURL: m.BaseURL, APIKey: key, ContextLimit: m.ContextLimit,
				NoCache: !m.Caches()})
			return out, nil
		}
		opts := openai.Options{Name: "openai", BaseURL: m.BaseURL, APIKey: key, ContextLimit: m.ContextLimit,
			API: m.API, Store: m.Store, Truncation: m.Truncation}
		if err := opts.Validate(); err != nil {
			return out, fmt.Errorf("models.%s: %w", name, err)
		}
		out.Provider = openai.New(opts)
		return out, nil
	default:
		out.Provider = local.New(local.Options{Delay: c.Local.Delay, ContextLimit: m.ContextLimit})
		if out.ID == "" {
			out.ID = "local"
		}
		return out, nil
	}
}

// Models returns the default model and every model a branch can
// select: each configured model whose provider can be used (a remote one
// needs its key). The default is default_model, or the local provider when
// that is "" or cannot be used (with a warning), so that ctxinf runs
// without a key.
func Models(c config.Config, env Env) (def actors.Model, models map[string]actors.Model, unavailable map[string]string) {
	log := env.Log
	models, unavailable = map[string]actors.Model{}, map[string]string{}
	names := make([]string, 0, len(c.Models))
	for name := range c.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m, err := buildModel(c, env, name, c.Models[name])
		if err != nil {
			lvl := log.Debug()
			if name == c.DefaultModel {
				lvl = log.Warn()
			}
			lvl.Err(err).Str("model", name).Msg("model not available")
			unavailable[name] = err.Error()
			continue
		}
		models[name] = m
	}
	if m, ok := models[c.DefaultModel]; ok && c.DefaultModel != "" {
		return m, models, unavailable
	}
	if c.DefaultModel != "" {
		log.Warn().Str("model", c.DefaultModel).Msg("using the local provider instead")
	}
	return actors.Model{Provider: local.New(local.Options{Delay: c.Local.Delay, ContextLimit: c.Local.ContextLimit}), ID: "local"}, models, unavailable
}

// Tools returns the tools the binary offers when tools.mode is
// not disabled: a clock, harmless and useful to try the tool loop. Go
// programs embedding the runtime register their own (actors.Tool).
func Tools(now func() time.Time) *actors.ToolRegistry {
	clock := actors.ToolFunc(messages.Tool{
		Name:        "current_time",
		Description: "Returns the current date and time (RFC 3339), in UTC or in the IANA time zone given.",
		InputSchema: []byte(`{"type":"object","properties":{"zone":{"type":"string","description":"IANA time zone, e.g. Europe/Paris"}}}`),
	}, func(_ context.Context, args json.RawMessage) (string, error) {
		var in struct {
			Zone string `json:"zone"`
		}
		if err := json.Unmarshal(args, &in); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		loc := time.UTC
		if in.Zone != "" {
			var err error
			if loc, err = time.LoadLocation(in.Zone); err != nil {
				return "", fmt.Errorf("zone %q: %w", in.Zone, err)
			}
		}
		return now().In(loc).Format(time.RFC3339), nil
	})
	reg, err := actors.NewToolRegistry(clock)
	if err != nil {
		panic(err) // a fixed, valid definition
	}
	return reg
}

// TokenCounter counts tokens as a provider's model does: tiktoken's
// encodings for OpenAI models, a calibrated estimate for Anthropic's,
// cl100k for anything else (providers/tokens).
func TokenCounter(provider, modelID string) core.Counter {
	return tokens.ForModel(provider, modelID).Count
}
