package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Validate reports every problem in c at once (joined with errors.Join), each
// naming its full key, the bad value and the limit, for example
// "store.max_payload_bytes: 0 is out of range [1, 1073741824]".
// It returns nil when c is usable.
func (c Config) Validate() error {
	var p problems
	if strings.TrimSpace(c.DataDir) == "" {
		p.addf("data_dir: must not be empty")
	}
	c.Log.validate(&p, "log.")
	c.Store.validate(&p, "store.")
	c.Runtime.validate(&p, "runtime.")
	c.Stream.validate(&p, "stream.")
	c.Local.validate(&p, "local.")
	p.durationIn("librarian.delay", c.Librarian.Delay, 0, time.Hour)
	p.inRange("librarian.max_output_tokens", int64(c.Librarian.MaxOutputTokens), 64, 1_000_000)
	c.validateModels(&p)
	p.inRange("context.window_messages", int64(c.Context.WindowMessages), 0, 1000)
	p.inRange("context.overflow_messages", int64(c.Context.OverflowMessages), 0, 1000)
	p.inRange("context.summarize_every_turns", int64(c.Context.SummarizeEveryTurns), 0, 10000)
	if f := c.Context.SummarizeAtFraction; !(f > 0 && f <= 1) {
		p.addf("context.summarize_at_fraction: %v is out of range (0, 1]", f)
	}
	p.inRange("context.safety_margin_tokens", int64(c.Context.SafetyMarginTokens), 0, 10_000_000)
	p.inRange("context.retrieval_max_tokens", int64(c.Context.RetrievalMaxTokens), 1, 10_000_000)
	p.inRange("context.chunk_max_tokens", int64(c.Context.ChunkMaxTokens), 1, 10_000_000)
	p.inRange("context.max_pins", int64(c.Context.MaxPins), 1, 10_000)
	p.inRange("context.max_pin_bytes", int64(c.Context.MaxPinBytes), 1, 1<<20)
	if f := c.Context.MaxPinnedShare; !(f > 0 && f <= 1) {
		p.addf("context.max_pinned_share: %v is out of range (0, 1]", f)
	}
	c.Retrieval.validate(&p, "retrieval.")
	if strings.TrimSpace(c.Server.Addr) == "" {
		p.addf("server.addr: must not be empty")
	}
	p.inRange("server.max_body_bytes", c.Server.MaxBodyBytes, 1024, 1<<30)
	p.inRange("server.max_in_flight", int64(c.Server.MaxInFlight), 1, 1_000_000)
	p.durationIn("server.read_header_timeout", c.Server.ReadHeaderTimeout, time.Millisecond, time.Hour)
	p.durationIn("server.read_body_timeout", c.Server.ReadBodyTimeout, time.Millisecond, time.Hour)
	p.durationIn("server.idle_timeout", c.Server.IdleTimeout, time.Millisecond, 24*time.Hour)
	p.durationIn("server.drain", c.Server.Drain, 0, time.Hour)
	p.durationIn("server.proxy_commit_within", c.Server.ProxyCommitWithin, 0, 10*time.Second)
	p.inRange("server.proxy_queue", int64(c.Server.ProxyQueue), 0, 10_000)
	p.durationIn("server.proxy_queue_wait", c.Server.ProxyQueueWait, time.Second, 24*time.Hour)
	p.inRange("server.proxy_max_import", int64(c.Server.ProxyMaxImport), 1, 1_000_000)
	c.Server.validateTenants(&p)
	p.oneOf("tools.mode", c.Tools.Mode, ToolsDisabled, ToolsParseOnly, ToolsEnabled)
	c.validateMemory(&p)
	p.inRange("tools.max_steps", int64(c.Tools.MaxSteps), 1, 1000)
	p.durationIn("tools.timeout", c.Tools.Timeout, time.Millisecond, 24*time.Hour)
	c.Redaction.validate(&p, "redaction.")
	c.Retention.validate(&p, "retention.", c.Server.Tenants)
	c.Cluster.validate(&p, "cluster.")
	return errors.Join(p...)
}

func (r RetrievalConfig) validate(p *problems, prefix string) {
	p.oneOf(prefix+"embedder", r.Embedder, EmbedderAuto, EmbedderHash, EmbedderStatic, EmbedderOpenAI)
	p.inRange(prefix+"hash_dims", int64(r.HashDims), 8, 8192)
	p.inRange(prefix+"chunk_overlap_tokens", int64(r.ChunkOverlapTokens), 0, 200)
	p.inRange(prefix+"embed_dimensions", int64(r.EmbedDimensions), 0, 8192)
	if r.Embedder == EmbedderStatic && strings.TrimSpace(r.VectorsPath) == "" {
		p.addf("%svectors_path: required with embedder static", prefix)
	}
	if r.Embedder == EmbedderOpenAI {
		if r.EmbedModel == "" {
			p.addf("%sembed_model: required with embedder openai", prefix)
		}
		if u, err := url.Parse(r.EmbedBaseURL); err != nil || u.Scheme == "" || u.Host == "" {
			p.addf("%sembed_base_url: %q is not an absolute URL", prefix, r.EmbedBaseURL)
		}
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"vector_weight", r.VectorWeight}, {"text_weight", r.TextWeight}, {"recency_weight", r.RecencyWeight},
		{"threshold", r.Threshold}, {"mmr_lambda", r.MMRLambda}, {"time_boost", r.TimeBoost}, {"speaker_boost", r.SpeakerBoost}} {
		if !(f.v >= 0 && f.v <= 1) {
			p.addf("%s%s: %v is out of range [0, 1]", prefix, f.key, f.v)
		}
	}
	if s := r.VectorWeight + r.TextWeight; s < 1-1e-6 || s > 1+1e-6 {
		p.addf("%svector_weight + %stext_weight: %v, want 1", prefix, prefix, s)
	}
	if !(r.RecencyHalfLifeTurns > 0) {
		p.addf("%srecency_half_life_turns: %v, want more than 0", prefix, r.RecencyHalfLifeTurns)
	}
	p.inRange(prefix+"overfetch", int64(r.Overfetch), 1, 1000)
	p.inRange(prefix+"top_k", int64(r.TopK), 1, int64(max(r.Overfetch, 1)))
	p.inRange(prefix+"neighbours", int64(r.Neighbours), 0, 8)
	p.inRange(prefix+"neighbours_before", int64(r.NeighboursBefore), 0, 8)
	p.inRange(prefix+"max_k", int64(r.MaxK), int64(max(r.TopK, 1)), int64(max(r.Overfetch, 1)))
}

// validateMemory checks the memory section: memory.tools_models names
// models entries, each once, and the memory tools are not asked for
// where tools.mode runs no tool of the runtime's.
func (c Config) validateMemory(p *problems) {
	seen := map[string]int{}
	for i, name := range c.Memory.ToolsModels {
		key := fmt.Sprintf("memory.tools_models[%d]", i)
		if j, ok := seen[name]; ok {
			p.addf("%s: %q is memory.tools_models[%d] already", key, name, j)
			continue
		}
		seen[name] = i
		if _, ok := c.Models[name]; !ok {
			names := make([]string, 0, len(c.Models))
			for n := range c.Models {
				names = append(names, n)
			}
			sort.Strings(names)
			p.addf("%s: %q names no models entry (%s)", key, name, strings.Join(names, ", "))
		}
	}
	if c.Tools.Mode == ToolsParseOnly {
		switch {
		case c.Memory.Tools:
			p.addf("memory.tools: true, but tools.mode parse_only runs no tool of the runtime's: set tools.mode to disabled or enabled, or memory.tools to false")
		case len(c.Memory.ToolsModels) > 0:
			p.addf("memory.tools_models: %q, but tools.mode parse_only runs no tool of the runtime's: set tools.mode to disabled or enabled, or empty the list",
				c.Memory.ToolsModels)
		}
	}
}

// validateModels checks every models entry and that default_model names
// one of them (or is empty, for the local provider).
func (c Config) validateModels(p *problems) {
	names := make([]string, 0, len(c.Models))
	for name := range c.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m, prefix := c.Models[name], "models."+name+"."
		p.oneOf(prefix+"provider", m.Provider, "openai", "anthropic", "local")
		if m.Truncation != "" { // "" is disabled
			p.oneOf(prefix+"truncation", m.Truncation, "disabled", "auto")
		}
		p.inRange(prefix+"max_output_tokens", int64(m.MaxOutputTokens), 0, 1_000_000)
		if m.Provider == "openai" && !m.Caches() {
			p.addf("%scache: false: OpenAI caches prompt prefixes by itself and cannot be told not to; only an anthropic model takes cache: false", prefix)
		}
		if m.Provider == "openai" {
			if m.API != "" {
				p.oneOf(prefix+"api", m.API, "responses", "chat")
			}
		} else if m.API != "" {
			p.addf("%sapi: %q: only an openai model takes an api", prefix, m.API)
		}
		if m.Provider == "openai" || m.Provider == "anthropic" {
			if m.ModelID == "" {
				p.addf("%smodel_id: must be set", prefix)
			}
			if m.APIKeyEnv == "" {
				p.addf("%sapi_key_env: must name the environment variable holding the key", prefix)
			}
			if u, err := url.Parse(m.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.addf("%sbase_url: %q is not an http(s) URL", prefix, m.BaseURL)
			}
		}
		p.inRange(prefix+"context_limit", int64(m.ContextLimit), 1024, 10_000_000)
	}
	if _, ok := c.Models[c.DefaultModel]; c.DefaultModel != "" && !ok {
		p.addf("default_model: %q is not one of models (%s); \"\" means the local provider", c.DefaultModel, strings.Join(names, ", "))
	}
	if _, ok := c.Models[c.Librarian.Model]; c.Librarian.Model != "" && c.Librarian.Model != LibrarianDeterministic && !ok {
		p.addf("librarian.model: %q is not one of models (%s); \"\" means the small model of the default model's provider, %q the deterministic summarizer",
			c.Librarian.Model, strings.Join(names, ", "), LibrarianDeterministic)
	}
}

func (c RuntimeConfig) validate(p *problems, prefix string) {
	p.durationIn(prefix+"idle_passivation", c.IdlePassivation, time.Second, 24*time.Hour)
	p.inRange(prefix+"snapshot_every", int64(c.SnapshotEvery), 1, 1_000_000)
	p.durationIn(prefix+"request_timeout", c.RequestTimeout, 100*time.Millisecond, time.Hour)
	p.inRange(prefix+"max_restarts", int64(c.MaxRestarts), 1, 1000)
	p.durationIn(prefix+"restart_window", c.RestartWindow, time.Second, 24*time.Hour)
	p.inRange(prefix+"max_output_tokens", int64(c.MaxOutputTokens), 1, 1_000_000)
	p.durationIn(prefix+"provider_timeout", c.ProviderTimeout, time.Second, 24*time.Hour)
	p.inRange(prefix+"provider_max_retries", int64(c.ProviderMaxRetries), 0, 100)
	p.durationIn(prefix+"provider_retry_base_delay", c.ProviderRetryBaseDelay, time.Millisecond, time.Minute)
	p.durationIn(prefix+"provider_retry_max_delay", c.ProviderRetryMaxDelay, time.Millisecond, time.Hour)
	if c.MemoryLimitBytes != 0 {
		p.inRange(prefix+"memory_limit_bytes", c.MemoryLimitBytes, 64*MiB, 1<<50)
	}
	p.inRange(prefix+"gc_percent", int64(c.GCPercent), 25, 10000)
}

func (c StreamConfig) validate(p *problems, prefix string) {
	p.durationIn(prefix+"flush_interval", c.FlushInterval, time.Millisecond, time.Minute)
	p.inRange(prefix+"flush_bytes", int64(c.FlushBytes), 1, 64*MiB)
	p.durationIn(prefix+"fsync_interval", c.FsyncInterval, time.Millisecond, time.Hour)
	if c.RetainFinalized != 0 && (c.RetainFinalized < time.Minute || c.RetainFinalized > 87600*time.Hour) {
		p.addf("%sretain_finalized: %v is out of range: must be 0 (keep forever) or from 1m to 87600h", prefix, c.RetainFinalized)
	}
}

func (c LocalConfig) validate(p *problems, prefix string) {
	p.durationIn(prefix+"delay", c.Delay, 0, time.Minute)
	p.inRange(prefix+"context_limit", int64(c.ContextLimit), 256, 10_000_000)
}

func (c LogConfig) validate(p *problems, prefix string) {
	p.oneOf(prefix+"level", c.Level, LevelTrace, LevelDebug, LevelInfo, LevelWarn, LevelError)
	p.oneOf(prefix+"format", c.Format, FormatAuto, FormatConsole, FormatJSON)
}

func (c StoreConfig) validate(p *problems, prefix string) {
	p.oneOf(prefix+"durability", c.Durability, DurabilitySync, DurabilityRelaxed)
	p.inRange(prefix+"max_payload_bytes", c.MaxPayloadBytes, 1, 1*GiB)
	p.inRange(prefix+"group_commit_max", int64(c.GroupCommitMax), 1, 65536)
	p.inRange(prefix+"value_threshold_bytes", c.ValueThresholdBytes, 64, 1*MiB)
	p.inRange(prefix+"memtable_bytes", c.MemTableBytes, 1*MiB, 1*GiB)
	p.inRange(prefix+"block_cache_bytes", c.BlockCacheBytes, 0, 16*GiB)
	p.inRange(prefix+"value_log_file_bytes", c.ValueLogFileBytes, 1*MiB, 2*GiB)
	if c.MaxPayloadBytes <= 1*GiB && c.ValueLogFileBytes >= 1*MiB && c.ValueLogFileBytes < c.MaxPayloadBytes+64*KiB {
		p.addf("%svalue_log_file_bytes: %d must be at least %smax_payload_bytes (%d) + 64 KiB",
			prefix, c.ValueLogFileBytes, prefix, c.MaxPayloadBytes)
	}
	p.inRange(prefix+"turn_cache_entries", int64(c.NodeCacheEntries), 0, 1<<26)
	p.inRange(prefix+"blob_cache_bytes", c.BlobCacheBytes, 0, 16*GiB)
	if c.GCInterval != 0 && c.GCInterval < time.Second {
		p.addf("%sgc_interval: %v is out of range: must be 0 (disabled) or at least 1s", prefix, c.GCInterval)
	}
	// Written so that NaN fails too.
	if !(c.GCDiscardRatio > 0 && c.GCDiscardRatio < 1) {
		p.addf("%sgc_discard_ratio: %v is out of range (0, 1)", prefix, c.GCDiscardRatio)
	}
	p.oneOf(prefix+"compression", c.Compression, CompressionZstd, CompressionS2, CompressionNone)
	if c.RedoLogBytes != 0 && (c.RedoLogBytes < 1*MiB || c.RedoLogBytes > 4*GiB) {
		p.addf("%sredo_log_bytes: %d is out of range: must be 0 (none) or 1048576 (1 MiB) to 4294967296 (4 GiB)",
			prefix, c.RedoLogBytes)
	}
	// Under half of it Badger must still flush its memtables (up to four
	// of them) and compact: a write into a memory-mapped file with no
	// block left for it is a SIGBUS.
	if lo := 8 * c.MemTableBytes; c.MemTableBytes >= 1*MiB && c.MemTableBytes <= 1*GiB && c.MinFreeBytes != 0 &&
		(c.MinFreeBytes < lo || c.MinFreeBytes > 1<<40) {
		p.addf("%smin_free_bytes: %d is out of range: must be 0 (no check) or from 8 x %smemtable_bytes (%d) to 1099511627776 (1 TiB)",
			prefix, c.MinFreeBytes, prefix, lo)
	}
	c.validateEncryption(p, prefix)
	c.validateBackend(p, prefix)
}

// problems collects validation errors so that all of them are reported.
type problems []error

func (p *problems) addf(format string, args ...any) {
	*p = append(*p, fmt.Errorf(format, args...))
}

// inRange checks lo <= v <= hi.
func (p *problems) inRange(key string, v, lo, hi int64) {
	if v < lo || v > hi {
		p.addf("%s: %d is out of range [%d, %d]", key, v, lo, hi)
	}
}

// durationIn checks lo <= v <= hi.
func (p *problems) durationIn(key string, v, lo, hi time.Duration) {
	if v < lo || v > hi {
		p.addf("%s: %v is out of range [%v, %v]", key, v, lo, hi)
	}
}

// oneOf checks that v is exactly one of allowed.
func (p *problems) oneOf(key, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	p.addf("%s: %q is not one of %s", key, v, strings.Join(allowed, "|"))
}

// tenantNamePattern is what a tenant's name looks like (and at most
// MaxTenantName bytes).
var tenantNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// validateTenants checks server.tenants: names well formed, distinct
// and not DefaultTenant's; each with a variable of its own for its
// tokens.
func (c ServerConfig) validateTenants(p *problems) {
	names := map[string]int{}
	envs := map[string]string{}
	if c.TokensEnv != "" {
		envs[c.TokensEnv] = "server.tokens_env"
	}
	for i, t := range c.Tenants {
		key := fmt.Sprintf("server.tenants[%d]", i)
		switch {
		case len(t.Name) == 0 || len(t.Name) > MaxTenantName || !tenantNamePattern.MatchString(t.Name):
			p.addf("%s.name: %q: want 1 to %d bytes, a lower-case letter then lower-case letters, digits, '-' or '_' (%s)",
				key, t.Name, MaxTenantName, tenantNamePattern)
		case t.Name == DefaultTenant:
			p.addf("%s.name: %q is the tenant of server.tokens_env's tokens: choose another name", key, t.Name)
		default:
			if j, ok := names[t.Name]; ok {
				p.addf("%s.name: %q is server.tenants[%d]'s too", key, t.Name, j)
			} else {
				names[t.Name] = i
			}
		}
		switch {
		case strings.TrimSpace(t.TokensEnv) == "":
			p.addf("%s.tokens_env: must name the environment variable holding the tenant's tokens", key)
		case envs[t.TokensEnv] != "":
			p.addf("%s.tokens_env: %q is %s's too: a token belongs to one tenant", key, t.TokensEnv, envs[t.TokensEnv])
		default:
			envs[t.TokensEnv] = key + ".tokens_env"
		}
	}
}
