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
// configuration has a key for is set from it (actors.Open takes no
// defaults of its own). The retention job does not run (its interval is
// negative): the command that serves sets Retention.Interval.
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
	def, models, unavailable := Models(c, env)
	lib, hasLib := librarianModel(c, def, models, unavailable, env.Log)
	pg, err := PostgresOptions(c, env.Log)
	if err != nil {
		return actors.Config{}, err
	}
	cfg := settings(c)
	cfg.DataDir = c.DataDir
	cfg.Store = StoreOptions(c, env.StoreKey, env.Log, "")
	cfg.Postgres = pg
	cfg.Provider, cfg.Model, cfg.Models, cfg.Unavailable = def.Provider, def.ID, models, unavailable
	cfg.MemoryTools = memoryTools(c, models)
	cfg.Counter = TokenCounter
	cfg.Tools = Tools(time.Now)
	cfg.Logger = env.Log
	cfg.Summarize = librarianSummarize(lib, hasLib, c.Librarian.Delay)
	cfg.Shrink = librarianShrink(lib, hasLib)
	cfg.Embedder, cfg.Redaction, cfg.Scrub = embedder, redaction, env.Scrub
	return cfg, nil
}

// settings maps the keys of c that need nothing from outside the
// configuration (no secret, model, file or logger) onto the runtime's
// settings.
func settings(c config.Config) actors.Config {
	toolMode := messages.ToolMode(c.Tools.Mode)
	if c.Tools.Mode == config.ToolsDisabled {
		toolMode = messages.ToolsDisabled
	}
	rank := RankOptions(c.Retrieval)
	return actors.Config{
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
		Fold: &core.Policy{K: c.Context.WindowMessages, B: c.Context.OverflowMessages,
			SafetyTurns: c.Context.SummarizeEveryTurns},
		FoldAtFraction:    c.Context.SummarizeAtFraction,
		SafetyMargin:      c.Context.SafetyMarginTokens,
		RetrievalMax:      c.Context.RetrievalMaxTokens,
		ChunkMax:          c.Context.ChunkMaxTokens,
		Pins:              core.PinLimits{MaxPins: c.Context.MaxPins, MaxBytes: c.Context.MaxPinBytes},
		MaxPinnedShare:    c.Context.MaxPinnedShare,
		ToolMode:          toolMode,
		MaxToolSteps:      c.Tools.MaxSteps,
		ToolTimeout:       c.Tools.Timeout,
		ParallelToolCalls: c.Tools.Parallel,
		MemoryTools:       c.Memory.Tools,
		Rank:              &rank,
		NoRetrieval:       !c.Retrieval.Enabled,
		ChunkOverlap:      c.Retrieval.ChunkOverlapTokens,
	}
}

// memoryTools sets on models the memory tools of their entries where
// memory.tools_models opts them in, and returns whether the branches on
// the default model are offered them: default_model's entry's setting
// (local's when the default falls back to the local provider). The
// runtime's setting (actors.Config.MemoryTools) is the default model's,
// so an entry opted out while the default model is opted in says so
// itself.
func memoryTools(c config.Config, models map[string]actors.Model) bool {
	def := c.DefaultModel
	if _, ok := models[def]; !ok || def == "" {
		def = "local"
	}
	defOn := c.MemoryToolsOn(def)
	for name, m := range models {
		if on := c.MemoryToolsOn(name); on || defOn {
			m.MemoryTools = new(on)
			models[name] = m
		}
	}
	return defOn
}

// Fill returns cfg with the settings that actors.Open requires and cfg
// leaves unset (zero, or out of range as Open would refuse them) taken
// from config.Default(), mapped as Runtime maps them. ctxinf.Open fills
// a caller's own actors.Config (Options.Config) with it, and tests that
// build an actors.Config start from it. The retention job, if cfg sets
// no interval, runs at retention.interval's default.
func Fill(cfg actors.Config) actors.Config {
	c := config.Default()
	d := settings(c)
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = d.RequestTimeout
	}
	if cfg.Retention.Interval == 0 {
		cfg.Retention.Interval = c.Retention.Interval
	}
	if cfg.Retention.Batch <= 0 {
		cfg.Retention.Batch = d.Retention.Batch
	}
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = d.IdleAfter
	}
	if cfg.SnapshotEvery <= 0 {
		cfg.SnapshotEvery = d.SnapshotEvery
	}
	if cfg.MaxOutputTokens <= 0 {
		cfg.MaxOutputTokens = d.MaxOutputTokens
	}
	if cfg.Retry == nil {
		cfg.Retry = d.Retry
	}
	if cfg.Fold == nil {
		cfg.Fold = d.Fold
	}
	if cfg.RetrievalMax <= 0 {
		cfg.RetrievalMax = d.RetrievalMax
	}
	if cfg.ChunkMax <= 0 {
		cfg.ChunkMax = d.ChunkMax
	}
	if cfg.Rank == nil {
		cfg.Rank = d.Rank
	}
	if !(cfg.FoldAtFraction > 0 && cfg.FoldAtFraction <= 1) {
		cfg.FoldAtFraction = d.FoldAtFraction
	}
	if !(cfg.MaxPinnedShare > 0 && cfg.MaxPinnedShare <= 1) {
		cfg.MaxPinnedShare = d.MaxPinnedShare
	}
	if cfg.StepTimeout <= 0 {
		cfg.StepTimeout = d.StepTimeout
	}
	if cfg.MaxToolSteps <= 0 {
		cfg.MaxToolSteps = d.MaxToolSteps
	}
	if cfg.ToolTimeout <= 0 {
		cfg.ToolTimeout = d.ToolTimeout
	}
	if cfg.Journal.FlushInterval <= 0 {
		cfg.Journal.FlushInterval = d.Journal.FlushInterval
	}
	if cfg.Journal.FlushBytes <= 0 {
		cfg.Journal.FlushBytes = d.Journal.FlushBytes
	}
	if cfg.Journal.FsyncInterval <= 0 {
		cfg.Journal.FsyncInterval = d.Journal.FsyncInterval
	}
	if cfg.MaxRestarts <= 0 {
		cfg.MaxRestarts = d.MaxRestarts
	}
	if cfg.RestartWindow <= 0 {
		cfg.RestartWindow = d.RestartWindow
	}
	return cfg
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
