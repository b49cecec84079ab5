// Package wiring maps the typed configuration (internal/config) onto the
// options of the runtime, its store, its models and its logger. It is the
// one builder the binary and ctxinf.Open share, so that a runtime opened
// as a library with zero Options behaves as config.yaml's defaults do in
// the binary.
package wiring

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
)

// Env is what the builder takes from outside the configuration.
type Env struct {
	// Log is the root logger; the zero Logger writes nothing.
	Log zerolog.Logger
	// Scrub holds the known secrets, kept out of the log and every stored
	// error; nil: Scrubber(c, Getenv).
	Scrub *providers.Scrubber
	// StoreKey encrypts the store at rest (store.encryption); nil: off.
	StoreKey []byte
	// Getenv reads the API keys the configuration names (api_key_env,
	// embed_api_key_env, tokens_env). nil reads nothing: every model
	// that needs a key is unavailable (a library runtime does not pick
	// secrets up from the environment behind its caller's back).
	Getenv func(string) string
}

func (e Env) getenv(name string) string {
	if e.Getenv == nil || name == "" {
		return ""
	}
	return e.Getenv(name)
}

// Runtime maps c onto the runtime's configuration: every field the
// configuration has a key for is set from it, so that actors.Open's own
// fallbacks are not reached. The retention job does not run (its interval
// is negative): the command that serves sets Retention.Interval.
func Runtime(c config.Config, env Env) (actors.Config, error) {
	if env.Scrub == nil {
		env.Scrub = Scrubber(c, env.Getenv)
	}
	embedder, err := Embedder(c, env)
	if err != nil {
		return actors.Config{}, err
	}
	redaction, err := Redactor(c)
	if err != nil {
		return actors.Config{}, err
	}
	rank := RankOptions(c.Retrieval)
	def, models, unavailable := Models(c, env)
	lib, hasLib := librarianModel(c, models, unavailable, env.Log)
	pg, err := PostgresOptions(c, env.Log)
	if err != nil {
		return actors.Config{}, err
	}
	toolMode := messages.ToolMode(c.Tools.Mode)
	if c.Tools.Mode == config.ToolsDisabled {
		toolMode = messages.ToolsDisabled
	}
	return actors.Config{
		DataDir:         c.DataDir,
		Store:           StoreOptions(c, env.StoreKey, env.Log, ""),
		Postgres:        pg,
		SnapshotEvery:   c.Runtime.SnapshotEvery,
		IdleAfter:       c.Runtime.IdlePassivation,
		RequestTimeout:  c.Runtime.RequestTimeout,
		MaxRestarts:     c.Runtime.MaxRestarts,
		RestartWindow:   c.Runtime.RestartWindow,
		MaxOutputTokens: c.Runtime.MaxOutputTokens,
		StepTimeout:     c.Runtime.ProviderTimeout,
		Journal: persistence.JournalPolicy{FlushInterval: c.Stream.FlushInterval, FlushBytes: c.Stream.FlushBytes,
			FsyncInterval: c.Stream.FsyncInterval},
		SkipFinalizedFsync: !c.Stream.FsyncFinalized,
		RetainFinalized:    c.Stream.RetainFinalized,
		Retention:          RetentionPolicy(c.Retention, -1),
		Retry:              retryPolicy(c.Runtime),
		Provider:           def.Provider,
		Model:              def.ID,
		Models:             models,
		Fold: &core.Policy{K: c.Context.WindowMessages, B: c.Context.OverflowMessages,
			SafetyTurns: c.Context.SummarizeEveryTurns},
		FoldAtFraction:    c.Context.SummarizeAtFraction,
		SafetyMargin:      c.Context.SafetyMarginTokens,
		RetrievalMax:      c.Context.RetrievalMaxTokens,
		ChunkMax:          c.Context.ChunkMaxTokens,
		Pins:              core.PinLimits{MaxPins: c.Context.MaxPins, MaxBytes: c.Context.MaxPinBytes},
		MaxPinnedShare:    c.Context.MaxPinnedShare,
		Counter:           TokenCounter,
		Unavailable:       unavailable,
		ToolMode:          toolMode,
		Tools:             Tools(time.Now),
		MaxToolSteps:      c.Tools.MaxSteps,
		ToolTimeout:       c.Tools.Timeout,
		ParallelToolCalls: c.Tools.Parallel,
		Logger:            env.Log,
		Summarize:         librarianSummarize(lib, hasLib, c.Librarian.Delay),
		Shrink:            librarianShrink(lib, hasLib),
		Embedder:          embedder,
		Redaction:         redaction,
		Scrub:             env.Scrub,
		Rank:              &rank,
		NoRetrieval:       !c.Retrieval.Enabled,
		ChunkOverlap:      c.Retrieval.ChunkOverlapTokens,
	}, nil
}

// retryPolicy is the providers' retry policy of runtime.provider_*.
func retryPolicy(r config.RuntimeConfig) *providers.RetryPolicy {
	return &providers.RetryPolicy{MaxRetries: r.ProviderMaxRetries,
		BaseDelay: r.ProviderRetryBaseDelay, MaxDelay: r.ProviderRetryMaxDelay}
}

// RetentionPolicy is the runtime's retention from the configuration; the
// job runs every interval (negative: never).
func RetentionPolicy(c config.RetentionConfig, interval time.Duration) actors.RetentionPolicy {
	p := actors.RetentionPolicy{Idle: c.Idle, Interval: interval, Batch: c.Batch, Tenants: map[string]time.Duration{}}
	for _, t := range c.Tenants {
		p.Tenants[t.Name] = t.Idle
	}
	return p
}
