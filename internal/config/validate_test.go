package config

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"empty data_dir", func(c *Config) { c.DataDir = "" }, `data_dir: must not be empty`},
		{"max pins zero", func(c *Config) { c.Context.MaxPins = 0 }, `context.max_pins: 0 is out of range [1, 10000]`},
		{"max pin bytes big", func(c *Config) { c.Context.MaxPinBytes = 1<<20 + 1 }, `context.max_pin_bytes: 1048577 is out of range [1, 1048576]`},
		{"max pinned share zero", func(c *Config) { c.Context.MaxPinnedShare = 0 }, `context.max_pinned_share: 0 is out of range (0, 1]`},
		{"max pinned share big", func(c *Config) { c.Context.MaxPinnedShare = 1.5 }, `context.max_pinned_share: 1.5 is out of range (0, 1]`},
		{"blank data_dir", func(c *Config) { c.DataDir = "  " }, `data_dir: must not be empty`},
		{"log level", func(c *Config) { c.Log.Level = "verbose" }, `log.level: "verbose" is not one of trace|debug|info|warn|error`},
		{"log level case", func(c *Config) { c.Log.Level = "INFO" }, `log.level: "INFO" is not one of trace|debug|info|warn|error`},
		{"log format", func(c *Config) { c.Log.Format = "text" }, `log.format: "text" is not one of auto|console|json`},
		{"durability", func(c *Config) { c.Store.Durability = "fast" }, `store.durability: "fast" is not one of sync|relaxed`},
		{"payload zero", func(c *Config) { c.Store.MaxPayloadBytes = 0 }, `store.max_payload_bytes: 0 is out of range [1, 1073741824]`},
		{"payload too big", func(c *Config) { c.Store.MaxPayloadBytes = GiB + 1 }, `store.max_payload_bytes: 1073741825 is out of range [1, 1073741824]`},
		{"group commit zero", func(c *Config) { c.Store.GroupCommitMax = 0 }, `store.group_commit_max: 0 is out of range [1, 65536]`},
		{"group commit too big", func(c *Config) { c.Store.GroupCommitMax = 65537 }, `store.group_commit_max: 65537 is out of range [1, 65536]`},
		{"value threshold small", func(c *Config) { c.Store.ValueThresholdBytes = 63 }, `store.value_threshold_bytes: 63 is out of range [64, 1048576]`},
		{"value threshold big", func(c *Config) { c.Store.ValueThresholdBytes = MiB + 1 }, `store.value_threshold_bytes: 1048577 is out of range [64, 1048576]`},
		{"redo log small", func(c *Config) { c.Store.RedoLogBytes = MiB - 1 }, `store.redo_log_bytes: 1048575 is out of range: must be 0 (none) or 1048576 (1 MiB) to 4294967296 (4 GiB)`},
		{"redo log big", func(c *Config) { c.Store.RedoLogBytes = 4*GiB + 1 }, `store.redo_log_bytes: 4294967297 is out of range: must be 0 (none) or 1048576 (1 MiB) to 4294967296 (4 GiB)`},
		{"min free small", func(c *Config) { c.Store.MinFreeBytes = 256*MiB - 1 },
			`store.min_free_bytes: 268435455 is out of range: must be 0 (no check) or from 8 x store.memtable_bytes (268435456) to 1099511627776 (1 TiB)`},
		{"min free big", func(c *Config) { c.Store.MinFreeBytes = 1<<40 + 1 },
			`store.min_free_bytes: 1099511627777 is out of range: must be 0 (no check) or from 8 x store.memtable_bytes (268435456) to 1099511627776 (1 TiB)`},
		{"min free under a big memtable", func(c *Config) { c.Store.MemTableBytes = 128 * MiB },
			`store.min_free_bytes: 536870912 is out of range: must be 0 (no check) or from 8 x store.memtable_bytes (1073741824) to 1099511627776 (1 TiB)`},
		{"memtable small", func(c *Config) { c.Store.MemTableBytes = MiB - 1 }, `store.memtable_bytes: 1048575 is out of range [1048576, 1073741824]`},
		{"memtable big", func(c *Config) { c.Store.MemTableBytes = GiB + 1 }, `store.memtable_bytes: 1073741825 is out of range [1048576, 1073741824]`},
		{"block cache negative", func(c *Config) { c.Store.BlockCacheBytes = -1 }, `store.block_cache_bytes: -1 is out of range [0, 17179869184]`},
		{"block cache big", func(c *Config) { c.Store.BlockCacheBytes = 16*GiB + 1 }, `store.block_cache_bytes: 17179869185 is out of range [0, 17179869184]`},
		{"vlog file small", func(c *Config) { c.Store.ValueLogFileBytes = MiB - 1 }, `store.value_log_file_bytes: 1048575 is out of range [1048576, 2147483648]`},
		{"vlog file big", func(c *Config) { c.Store.ValueLogFileBytes = 2*GiB + 1 }, `store.value_log_file_bytes: 2147483649 is out of range [1048576, 2147483648]`},
		{"gc interval short", func(c *Config) { c.Store.GCInterval = 500 * time.Millisecond }, `store.gc_interval: 500ms is out of range: must be 0 (disabled) or at least 1s`},
		{"gc interval negative", func(c *Config) { c.Store.GCInterval = -time.Second }, `store.gc_interval: -1s is out of range: must be 0 (disabled) or at least 1s`},
		{"journal retention short", func(c *Config) { c.Stream.RetainFinalized = 59 * time.Second },
			`stream.retain_finalized: 59s is out of range: must be 0 (keep forever) or from 1m to 87600h`},
		{"journal retention negative", func(c *Config) { c.Stream.RetainFinalized = -time.Hour },
			`stream.retain_finalized: -1h0m0s is out of range: must be 0 (keep forever) or from 1m to 87600h`},
		{"gc ratio zero", func(c *Config) { c.Store.GCDiscardRatio = 0 }, `store.gc_discard_ratio: 0 is out of range (0, 1)`},
		{"gc ratio one", func(c *Config) { c.Store.GCDiscardRatio = 1 }, `store.gc_discard_ratio: 1 is out of range (0, 1)`},
		{"gc ratio NaN", func(c *Config) { c.Store.GCDiscardRatio = math.NaN() }, `store.gc_discard_ratio: NaN is out of range (0, 1)`},
		{"compression", func(c *Config) { c.Store.Compression = "gzip" }, `store.compression: "gzip" is not one of zstd|s2|none`},
		{"proxy commit negative", func(c *Config) { c.Server.ProxyCommitWithin = -time.Millisecond },
			`server.proxy_commit_within: -1ms is out of range [0s, 10s]`},
		{"proxy commit long", func(c *Config) { c.Server.ProxyCommitWithin = 11 * time.Second },
			`server.proxy_commit_within: 11s is out of range [0s, 10s]`},
		{"proxy queue negative", func(c *Config) { c.Server.ProxyQueue = -1 }, `server.proxy_queue: -1 is out of range [0, 10000]`},
		{"proxy queue wait short", func(c *Config) { c.Server.ProxyQueueWait = 0 },
			`server.proxy_queue_wait: 0s is out of range [1s, 24h0m0s]`},
		{"librarian model", func(c *Config) { c.Librarian.Model = "gpt5" },
			`librarian.model: "gpt5" is not one of models (claude, gpt, local); "" means the small model of the default model's provider, "deterministic" the deterministic summarizer`},
		{"openai cache off", func(c *Config) { m := c.Models["gpt"]; m.Cache = new(false); c.Models["gpt"] = m },
			`models.gpt.cache: false: OpenAI caches prompt prefixes by itself and cannot be told not to; only an anthropic model takes cache: false`},
		{"librarian output small", func(c *Config) { c.Librarian.MaxOutputTokens = 63 }, `librarian.max_output_tokens: 63 is out of range [64, 1000000]`},
		{"librarian output big", func(c *Config) { c.Librarian.MaxOutputTokens = 1_000_001 }, `librarian.max_output_tokens: 1000001 is out of range [64, 1000000]`},
	}
	leaves, _ := flatten(Default())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.modify(&c)
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
			key, _, _ := strings.Cut(tt.want, ":")
			if _, ok := leaves[key]; !ok {
				t.Errorf("error names key %q, which is not a known key", key)
			}
		})
	}
}

func TestValidateAcceptsLimits(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
	}{
		{"lowest", func(c *Config) {
			c.Store.MaxPayloadBytes = 1
			c.Store.GroupCommitMax = 1
			c.Store.ValueThresholdBytes = 64
			c.Store.MemTableBytes = MiB
			c.Store.BlockCacheBytes = 0
			c.Store.ValueLogFileBytes = MiB
			c.Store.NodeCacheEntries = 0
			c.Store.GCInterval = 0
			c.Store.GCDiscardRatio = 0.001
			c.Store.MinFreeBytes = 8 * MiB
		}},
		{"no free space check", func(c *Config) { c.Store.MinFreeBytes = 0 }},
		{"highest", func(c *Config) {
			c.Store.MaxPayloadBytes = GiB
			c.Store.GroupCommitMax = 65536
			c.Store.NodeCacheEntries = 1 << 26
			c.Store.ValueThresholdBytes = MiB
			c.Store.MemTableBytes = GiB
			c.Store.BlockCacheBytes = 16 * GiB
			c.Store.ValueLogFileBytes = 2 * GiB
			c.Store.GCInterval = time.Second
			c.Store.GCDiscardRatio = 0.999
			c.Store.MinFreeBytes = 1 << 40
		}},
		{"librarian model", func(c *Config) {
			c.Librarian.Model = "claude"
			c.Librarian.MaxOutputTokens = 64
		}},
		{"other choices", func(c *Config) {
			c.Log.Level = LevelTrace
			c.Log.Format = FormatJSON
			c.Store.Durability = DurabilityRelaxed
			c.Store.Compression = CompressionNone
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.modify(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.DataDir = ""
	c.Log.Level = "loud"
	c.Store.MaxPayloadBytes = 0
	c.Store.GCDiscardRatio = 2
	c.Store.Compression = "lz4"

	err := c.Validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("Validate() = %v, want errors joined with errors.Join", err)
	}
	if got := len(joined.Unwrap()); got != 5 {
		t.Errorf("Validate() reported %d problems, want 5:\n%v", got, err)
	}
	for _, key := range []string{"data_dir:", "log.level:", "store.max_payload_bytes:", "store.gc_discard_ratio:", "store.compression:"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() = %v, want a problem naming %s", err, key)
		}
	}
}

func TestValidateRetrieval(t *testing.T) {
	for _, tc := range []struct {
		edit func(*RetrievalConfig)
		want string
	}{
		{func(r *RetrievalConfig) { r.Embedder = "bert" }, `retrieval.embedder: "bert"`},
		{func(r *RetrievalConfig) { r.VectorWeight = 0.9 }, "retrieval.vector_weight + retrieval.text_weight: 1.6, want 1"},
		{func(r *RetrievalConfig) { r.MMRLambda = -1 }, "retrieval.mmr_lambda: -1 is out of range [0, 1]"},
		{func(r *RetrievalConfig) { r.TimeBoost = 2 }, "retrieval.time_boost: 2 is out of range [0, 1]"},
		{func(r *RetrievalConfig) { r.SpeakerBoost = -1 }, "retrieval.speaker_boost: -1 is out of range [0, 1]"},
		{func(r *RetrievalConfig) { r.TopK = 60 }, "retrieval.top_k: 60 is out of range [1, 48]"},
		{func(r *RetrievalConfig) { r.MaxK = 2 }, "retrieval.max_k: 2 is out of range [6, 48]"},
		{func(r *RetrievalConfig) { r.NeighboursBefore = 9 }, "retrieval.neighbours_before: 9 is out of range [0, 8]"},
		{func(r *RetrievalConfig) { r.Embedder, r.VectorsPath = EmbedderStatic, "" }, "retrieval.vectors_path: required with embedder static"},
		{func(r *RetrievalConfig) { r.Embedder, r.EmbedBaseURL = EmbedderOpenAI, "localhost" }, `retrieval.embed_base_url: "localhost" is not an absolute URL`},
		{func(r *RetrievalConfig) { r.HashDims = 4 }, "retrieval.hash_dims: 4 is out of range [8, 8192]"},
	} {
		c := Default()
		tc.edit(&c.Retrieval)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
}
