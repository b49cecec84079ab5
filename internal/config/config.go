// Package config holds the typed configuration of ctxinf and loads it from a
// YAML file and CTX_* environment variables.
//
// It is the only package that imports viper. Everything else receives a
// validated Config (or one of its sections) as a plain value.
//
// To add a section (retrieval, models, server, ...), add a struct type with
// mapstructure tags, a field on Config, its defaults in Default, its checks in
// Validate, and the keys with comments in config.yaml. Viper defaults,
// environment bindings and the set of known keys are derived from Default by
// reflection, so there is no second list to keep in step.
package config

import (
	"slices"
	"time"
)

// Size units for byte-valued settings.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
)

// Config is the whole configuration. Load returns it validated.
type Config struct {
	DataDir string `mapstructure:"data_dir"`
	// DefaultModel names the entry of Models new turns use; "" means the
	// offline local provider. A model whose API key variable is unset in
	// the environment falls back to local too, with a warning.
	DefaultModel string                 `mapstructure:"default_model"`
	Models       map[string]ModelConfig `mapstructure:"models"`
	Log          LogConfig              `mapstructure:"log"`
	Store        StoreConfig            `mapstructure:"store"`
	Runtime      RuntimeConfig          `mapstructure:"runtime"`
	Stream       StreamConfig           `mapstructure:"stream"`
	Local        LocalConfig            `mapstructure:"local"`
	Librarian    LibrarianConfig        `mapstructure:"librarian"`
	Tools        ToolsConfig            `mapstructure:"tools"`
	Memory       MemoryConfig           `mapstructure:"memory"`
	Context      ContextConfig          `mapstructure:"context"`
	Retrieval    RetrievalConfig        `mapstructure:"retrieval"`
	Server       ServerConfig           `mapstructure:"server"`
	Redaction    RedactionConfig        `mapstructure:"redaction"`
	Retention    RetentionConfig        `mapstructure:"retention"`
	Cluster      ClusterConfig          `mapstructure:"cluster"`
}

// ServerConfig is `ctxinf serve`: the HTTP API's address, authentication
// and limits.
type ServerConfig struct {
	// Addr is the HTTP API's address; one that is not loopback needs
	// bearer tokens.
	Addr string `mapstructure:"addr"`
	// FrameAddr is the binary frame protocol's address (the context store,
	// docs/FRAME_PROTOCOL.md); "" turns it off. It has no
	// authentication, so it must be a loopback address.
	FrameAddr string `mapstructure:"frame_addr"`
	// TokensEnv names the environment variable holding the bearer tokens
	// (comma-separated); unset or empty means no authentication.
	TokensEnv string `mapstructure:"tokens_env"`
	// MaxBodyBytes bounds a request body; MaxInFlight the requests
	// handled at once (more get 429).
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	MaxInFlight  int   `mapstructure:"max_in_flight"`
	// ReadHeaderTimeout and IdleTimeout bound slow clients, and
	// ReadBodyTimeout how long a request's body may take to arrive after
	// its headers (then 408); Drain is how long a shutdown waits for
	// requests in flight.
	ReadHeaderTimeout time.Duration `mapstructure:"read_header_timeout"`
	ReadBodyTimeout   time.Duration `mapstructure:"read_body_timeout"`
	IdleTimeout       time.Duration `mapstructure:"idle_timeout"`
	Drain             time.Duration `mapstructure:"drain"`
	// ProxyCommitWithin is how long a turn of the OpenAI-compatible
	// proxy may hold the commit of its acceptance, to make it with the
	// turn's response (actors.Runtime.SubmitDeferred); 0 commits it
	// before the response starts.
	ProxyCommitWithin time.Duration `mapstructure:"proxy_commit_within"`
	// ProxyQueue is how many proxied requests may wait for the turns of
	// their conversation before them (a branch takes a turn once the one
	// before has its response); more get 429. 0 queues none: a request
	// on a conversation with a turn running gets 409 at once.
	// ProxyQueueWait bounds one request's wait (past it, 409).
	ProxyQueue     int           `mapstructure:"proxy_queue"`
	ProxyQueueWait time.Duration `mapstructure:"proxy_queue_wait"`
	// ProxyMaxImport is how many earlier exchanges one proxied request
	// may bring into a conversation (a new one, or one it continues past
	// what the branch holds); more is 413.
	ProxyMaxImport int `mapstructure:"proxy_max_import"`
	// Tenants are the tenants beside the default one (whose tokens are
	// TokensEnv's, named DefaultTenant): a token's requests see its
	// tenant's sessions only. In the environment, CTX_SERVER_TENANTS is
	// "name=ENV_VAR,name2=ENV_VAR2".
	Tenants []TenantConfig `mapstructure:"tenants"`
}

// TenantConfig is a tenant of the server (server.tenants): its name and
// the environment variable holding its bearer tokens (comma-separated;
// tokens are never in the file).
type TenantConfig struct {
	Name      string `mapstructure:"name"`
	TokensEnv string `mapstructure:"tokens_env"`
}

// DefaultTenant is the name of the tenant of server.tokens_env's tokens,
// and of the sessions made before tenants; a tenant of server.tenants
// may not take it.
const DefaultTenant = "default"

// MaxTenantName is the longest tenant name, in bytes. A name is a
// lower-case letter, then lower-case letters, digits, '-' and '_'
// (tenantNamePattern; the server checks the same).
const MaxTenantName = 64

// Embedders accepted by retrieval.embedder.
const (
	// EmbedderAuto is EmbedderStatic when retrieval.vectors_path exists,
	// else EmbedderHash.
	EmbedderAuto   = "auto"
	EmbedderHash   = "hash"
	EmbedderStatic = "static"
	EmbedderOpenAI = "openai"
)

// RetrievalConfig is retrieval (SRD §8, §9): the embedder of the vector
// search and the hybrid ranker.
type RetrievalConfig struct {
	// Enabled puts retrieved memory into contexts; when false chunks are
	// still indexed and searchable.
	Enabled bool `mapstructure:"enabled"`
	// Embedder is auto, hash, static or openai.
	Embedder string `mapstructure:"embedder"`
	// HashDims is the hash embedder's dimension.
	HashDims int `mapstructure:"hash_dims"`
	// ChunkOverlapTokens is how much a chunk cut for its size repeats of
	// the one before it (SRD §9.1's optional overlap); 0 for none.
	ChunkOverlapTokens int `mapstructure:"chunk_overlap_tokens"`
	// VectorsPath is the static embedder's word-vector file (make models).
	VectorsPath string `mapstructure:"vectors_path"`
	// The openai embedder: any OpenAI-compatible /v1/embeddings endpoint.
	EmbedModel      string `mapstructure:"embed_model"`
	EmbedBaseURL    string `mapstructure:"embed_base_url"`
	EmbedAPIKeyEnv  string `mapstructure:"embed_api_key_env"`
	EmbedDimensions int    `mapstructure:"embed_dimensions"`
	// The hybrid ranker: weights of the normalized vector and full-text
	// scores (summing to 1), the recency boost and its half-life in
	// turns, the relevance floor (threshold), MMR's lambda, candidates per
	// search, and the results offered to a context: always the best
	// top_k, then up to max_k while they reach the floor (the assembler
	// packs them within context.retrieval_max_tokens).
	VectorWeight         float64 `mapstructure:"vector_weight"`
	TextWeight           float64 `mapstructure:"text_weight"`
	RecencyWeight        float64 `mapstructure:"recency_weight"`
	RecencyHalfLifeTurns float64 `mapstructure:"recency_half_life_turns"`
	Threshold            float64 `mapstructure:"threshold"`
	MMRLambda            float64 `mapstructure:"mmr_lambda"`
	Overfetch            int     `mapstructure:"overfetch"`
	TopK                 int     `mapstructure:"top_k"`
	MaxK                 int     `mapstructure:"max_k"`
	// Neighbours is how many chunks after each hit (in the order of the
	// conversation) come with it into a context, and NeighboursBefore
	// how many before it, merged with it into one excerpt.
	Neighbours       int `mapstructure:"neighbours"`
	NeighboursBefore int `mapstructure:"neighbours_before"`
	// TimeBoost is added to the score of a chunk said within a time
	// the query names ("in May", "last week", "7 May 2023"); a chunk said
	// by a participant it names (or by the user on "I", the assistant on
	// "you") scores its relevance times 1 + SpeakerBoost; 0 to 1, 0 for
	// none.
	TimeBoost    float64 `mapstructure:"time_boost"`
	SpeakerBoost float64 `mapstructure:"speaker_boost"`
}

// ContextConfig is the bounded working context: the summary-as-state
// policy (summarization contract v2.2) and the token budget (SRD §7).
type ContextConfig struct {
	// WindowMessages (K) is how many of the newest messages stay verbatim
	// after a fold; OverflowMessages (B) how many more may accumulate
	// before one is due. 0 and 0 fold every turn as soon as it ends.
	WindowMessages   int `mapstructure:"window_messages"`
	OverflowMessages int `mapstructure:"overflow_messages"`
	// SummarizeEveryTurns folds once that many user turns are pending
	// (the safety trigger); 0 disables it.
	SummarizeEveryTurns int `mapstructure:"summarize_every_turns"`
	// SummarizeAtFraction folds when a context uses more than this share
	// of its input budget (the primary trigger).
	SummarizeAtFraction float64 `mapstructure:"summarize_at_fraction"`
	// SafetyMarginTokens is kept free in every context for estimation
	// error; 0 means 2 % of the model's context limit, at least 256.
	SafetyMarginTokens int `mapstructure:"safety_margin_tokens"`
	// RetrievalMaxTokens caps retrieved memory in a context;
	// ChunkMaxTokens is the size above which a retrieved chunk is sent as
	// its summary when the context must shrink.
	RetrievalMaxTokens int `mapstructure:"retrieval_max_tokens"`
	ChunkMaxTokens     int `mapstructure:"chunk_max_tokens"`
	// MaxPins is the most facts a branch may have pinned at once;
	// MaxPinBytes the longest one. MaxPinnedShare caps the tokens of all
	// a branch's pinned facts at this share of its model's input budget.
	// They bind new pins and edits; a branch over them keeps its pins
	// until they are unpinned.
	MaxPins        int     `mapstructure:"max_pins"`
	MaxPinBytes    int     `mapstructure:"max_pin_bytes"`
	MaxPinnedShare float64 `mapstructure:"max_pinned_share"`
}

// ToolsConfig is the tools policy (SRD §12).
type ToolsConfig struct {
	// Mode is disabled (no tools are offered; a tool call from the model
	// fails the turn), parse_only (calls are recorded and shown, never
	// run) or enabled (calls run and the loop goes on).
	Mode     string        `mapstructure:"mode"`
	MaxSteps int           `mapstructure:"max_steps"` // steps per turn calling the runtime's tools (not a client's)
	Timeout  time.Duration `mapstructure:"timeout"`   // per tool call
	Parallel bool          `mapstructure:"parallel"`  // let the model call several tools in one step
}

// MemoryConfig is what the model is offered to use the conversation's
// memory itself.
type MemoryConfig struct {
	// Tools offers the model the runtime's memory tools (search_memory,
	// pin_fact, unpin_fact), run inside the runtime whatever tools.mode
	// says but parse_only, on every model.
	Tools bool `mapstructure:"tools"`
	// ToolsModels names the entries of Models whose branches are offered
	// the memory tools when Tools is false: the opt-in per model. A
	// branch on the default model follows default_model's entry (local's
	// when it falls back to the local provider). In the environment,
	// CTX_MEMORY_TOOLS_MODELS is comma-separated.
	ToolsModels []string `mapstructure:"tools_models"`
}

// MemoryToolsOn reports whether the branches on the models entry name
// are offered the memory tools (memory.tools, or name among
// memory.tools_models).
func (c Config) MemoryToolsOn(name string) bool {
	return c.Memory.Tools || slices.Contains(c.Memory.ToolsModels, name)
}

// Tool modes accepted by tools.mode.
const (
	ToolsDisabled  = "disabled"
	ToolsParseOnly = "parse_only"
	ToolsEnabled   = "enabled"
)

// ModelConfig is one model a branch can use (SRD §18).
type ModelConfig struct {
	Provider     string `mapstructure:"provider"` // "openai", "anthropic" or "local"
	ModelID      string `mapstructure:"model_id"`
	ContextLimit int    `mapstructure:"context_limit"` // tokens
	// APIKeyEnv names the environment variable holding the key; the key
	// itself is never part of the configuration.
	APIKeyEnv string `mapstructure:"api_key_env"`
	// BaseURL is the API root: for OpenAI it ends in /v1, for Anthropic
	// it has no /v1.
	BaseURL string `mapstructure:"base_url"`
	// API is OpenAI's API: "responses", "chat" (Chat Completions, which
	// OpenAI-compatible servers such as Ollama, vLLM or llama.cpp speak),
	// or "" for responses on api.openai.com and chat elsewhere.
	API string `mapstructure:"api"`
	// Store is the Responses API's store flag: let OpenAI keep the
	// response (privacy: off by default).
	Store bool `mapstructure:"store"`
	// Truncation is the Responses API's truncation: "disabled" (a request
	// too large fails, and the runtime shrinks its context) or "auto".
	Truncation string `mapstructure:"truncation"`
	// MaxOutputTokens bounds this model's output; 0 uses
	// runtime.max_output_tokens.
	MaxOutputTokens int `mapstructure:"max_output_tokens"`
	// Cache marks the stable start of every request (system prompt,
	// tools, pinned facts, summary, the conversation so far) for the
	// provider's prompt cache: Anthropic's cache_control breakpoints.
	// nil (an entry that does not say) is true. OpenAI caches prompt
	// prefixes by itself and cannot be told not to, so an openai model
	// takes only true. A client's own cache_control turns it on for its
	// request.
	Cache *bool `mapstructure:"cache"`
}

// Caches reports whether the model's requests are marked for the prompt
// cache (Cache, true when unset).
func (m ModelConfig) Caches() bool { return m.Cache == nil || *m.Cache }

// LibrarianDeterministic is the value of librarian.model that keeps the
// deterministic summarizer even when a model could summarize.
const LibrarianDeterministic = "deterministic"

// LibrarianConfig configures the librarian (summaries, SRD §10).
type LibrarianConfig struct {
	// Delay is artificial latency added to every summary, for demos and
	// chaos tests of the window between a response and its commit.
	Delay time.Duration `mapstructure:"delay"`
	// Model names the entry of Models the librarian writes summaries
	// with. "" picks the small model of the default model's provider
	// (OpenAIModel, AnthropicModel) when the default model is OpenAI's or
	// Anthropic's own API with its key set, and the deterministic
	// summarizer otherwise; LibrarianDeterministic always picks the
	// deterministic summarizer (offline, no key). A model whose API key
	// variable is unset falls back to it too, with a warning.
	Model string `mapstructure:"model"`
	// OpenAIModel and AnthropicModel are the provider's model ids the
	// librarian uses when Model is "" ("" here: the deterministic
	// summarizer for that provider).
	OpenAIModel    string `mapstructure:"openai_model"`
	AnthropicModel string `mapstructure:"anthropic_model"`
	// MaxOutputTokens bounds each librarian call: the summary's size.
	MaxOutputTokens int `mapstructure:"max_output_tokens"`
}

// RuntimeConfig configures the actor runtime.
type RuntimeConfig struct {
	IdlePassivation time.Duration `mapstructure:"idle_passivation"` // passivate a branch actor idle this long
	SnapshotEvery   int           `mapstructure:"snapshot_every"`   // branch actor snapshot interval, in events
	RequestTimeout  time.Duration `mapstructure:"request_timeout"`  // how long a caller waits for a branch
	MaxRestarts     int           `mapstructure:"max_restarts"`     // restarts of one branch within restart_window before it stops
	RestartWindow   time.Duration `mapstructure:"restart_window"`
	MaxOutputTokens int           `mapstructure:"max_output_tokens"` // bound sent with every provider step
	ProviderTimeout time.Duration `mapstructure:"provider_timeout"`  // bound on one provider step, streaming included
	// MemoryLimitBytes is the ctxinf binary's soft memory limit (Go's
	// GOMEMLIMIT, which wins when set), raised to one and a half times
	// the live heap when that is more (cli's memoryLimit); 0 disables it.
	MemoryLimitBytes int64 `mapstructure:"memory_limit_bytes"`
	// GCPercent is the ctxinf binary's GOGC (the environment's GOGC wins):
	// how far the heap grows past what the last collection kept before
	// the next one; the memory limit caps it either way.
	GCPercent int `mapstructure:"gc_percent"`
	// Provider calls that fail with 429, 5xx or a dropped connection
	// before streaming anything are retried this many times, waiting
	// Retry-After or an exponential backoff from the base delay, each wait
	// at most the max delay.
	ProviderMaxRetries     int           `mapstructure:"provider_max_retries"`
	ProviderRetryBaseDelay time.Duration `mapstructure:"provider_retry_base_delay"`
	ProviderRetryMaxDelay  time.Duration `mapstructure:"provider_retry_max_delay"`
}

// StreamConfig is the stream journal policy (SRD §13.2).
type StreamConfig struct {
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	FlushBytes    int           `mapstructure:"flush_bytes"`
	FsyncInterval time.Duration `mapstructure:"fsync_interval"`
	// FsyncFinalized fsyncs, at completion, the journal of a step whose
	// response is then finalized (SRD §13.2, the default). false leaves
	// that step's durability to the store transaction that finalizes it.
	FsyncFinalized bool `mapstructure:"fsync_finalized"`
	// RetainFinalized is how long the journal of a step whose turn's
	// response was finalized is kept after the step ended; the store holds
	// that output, so the journal is then redundant. 0 keeps journals
	// forever. Journals of failed turns are always kept.
	RetainFinalized time.Duration `mapstructure:"retain_finalized"`
}

// LocalConfig configures the offline local provider.
type LocalConfig struct {
	Delay        time.Duration `mapstructure:"delay"`         // between streamed tokens
	ContextLimit int           `mapstructure:"context_limit"` // tokens
}

// LogConfig configures the root logger built in cmd.
type LogConfig struct {
	Level  string `mapstructure:"level"`  // trace|debug|info|warn|error
	Format string `mapstructure:"format"` // auto|console|json; auto is console on a terminal, JSON otherwise
}

// Log levels accepted by log.level.
const (
	LevelTrace = "trace"
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Log formats accepted by log.format.
const (
	FormatAuto    = "auto"
	FormatConsole = "console"
	FormatJSON    = "json"
)

// StoreConfig configures the persistent store and its write path.
type StoreConfig struct {
	// Backend is where the store lives: badger (the default, embedded in
	// {data_dir}/store) or postgres (a PostgreSQL database, whose URL is
	// read from the environment variable PostgresURLEnv names, never
	// from this file: it may hold a password). The Badger keys below do
	// not apply to postgres; durability is the server's
	// (synchronous_commit), and so is encryption at rest.
	Backend             string        `mapstructure:"backend"`               // badger|postgres
	PostgresURLEnv      string        `mapstructure:"postgres_url_env"`      // the variable holding the URL
	PostgresMaxConns    int           `mapstructure:"postgres_max_conns"`    // the pool's connections
	Durability          string        `mapstructure:"durability"`            // sync|relaxed
	MaxPayloadBytes     int64         `mapstructure:"max_payload_bytes"`     // largest accepted payload
	GroupCommitMax      int           `mapstructure:"group_commit_max"`      // max appends per group commit batch
	ValueThresholdBytes int64         `mapstructure:"value_threshold_bytes"` // Badger value threshold
	MemTableBytes       int64         `mapstructure:"memtable_bytes"`        // Badger memtable size
	BlockCacheBytes     int64         `mapstructure:"block_cache_bytes"`     // Badger block cache size; 0 disables
	ValueLogFileBytes   int64         `mapstructure:"value_log_file_bytes"`  // Badger value log file size
	NodeCacheEntries    int           `mapstructure:"turn_cache_entries"`    // decoded turns kept in memory; 0 disables
	BlobCacheBytes      int64         `mapstructure:"blob_cache_bytes"`      // decompressed payloads kept in memory; 0 disables
	GCInterval          time.Duration `mapstructure:"gc_interval"`           // value-log GC period; 0 disables
	GCDiscardRatio      float64       `mapstructure:"gc_discard_ratio"`      // value-log GC discard ratio
	Compression         string        `mapstructure:"compression"`           // zstd|s2|none
	RedoLogBytes        int64         `mapstructure:"redo_log_bytes"`        // the store's redo log; 0: none
	// MinFreeBytes is the free space the store keeps on its file system:
	// under it new turns and sessions are refused, under half of it every
	// write; 0 disables the check.
	MinFreeBytes int64 `mapstructure:"min_free_bytes"`

	// Encryption at rest (docs/SECURITY.md). With Encryption, the store,
	// its redo log and the stream journals are encrypted under a key of
	// 16, 24 or 32 bytes (hex or base64) read from EncryptionKeyFile if it
	// is set, else from the environment variable EncryptionKeyEnv names;
	// never from this file (EncryptionKey). EncryptionKeyRotation is how
	// long Badger encrypts with one data key before it makes the next.
	Encryption            bool          `mapstructure:"encryption"`
	EncryptionKeyEnv      string        `mapstructure:"encryption_key_env"`
	EncryptionKeyFile     string        `mapstructure:"encryption_key_file"`
	EncryptionKeyRotation time.Duration `mapstructure:"encryption_key_rotation"`
}

// Backends accepted by store.backend.
const (
	BackendBadger   = "badger"
	BackendPostgres = "postgres"
)

// Durability modes accepted by store.durability.
const (
	// DurabilitySync acknowledges a write only after it has been fsynced.
	DurabilitySync = "sync"
	// DurabilityRelaxed never fsyncs; for tests and bulk loads only.
	DurabilityRelaxed = "relaxed"
)

// Compression policies accepted by store.compression.
const (
	// CompressionZstd compresses blobs with zstd and stores them raw when
	// compression does not make them smaller.
	CompressionZstd = "zstd"
	// CompressionNone stores blobs raw.
	CompressionNone = "none"
	// CompressionS2 compresses blobs with S2 (faster, larger than zstd) and
	// stores them raw when compression does not make them smaller.
	CompressionS2 = "s2"
)

// Default returns the configuration used for every key that neither the file
// nor the environment sets. It is the only source of default values.
func Default() Config {
	return Config{
		DataDir:      "./data",
		DefaultModel: "gpt",
		Models: map[string]ModelConfig{
			"gpt": {Provider: "openai", ModelID: "gpt-5.4-mini", ContextLimit: 128000,
				APIKeyEnv: "OPENAI_API_KEY", BaseURL: "https://api.openai.com/v1", Truncation: "disabled", Cache: new(true)},
			"claude": {Provider: "anthropic", ModelID: "claude-sonnet-5-5", ContextLimit: 200000,
				APIKeyEnv: "ANTHROPIC_API_KEY", BaseURL: "https://api.anthropic.com", Truncation: "disabled", Cache: new(true)},
			"local": {Provider: "local", ModelID: "local", ContextLimit: 32768, Truncation: "disabled", Cache: new(true)},
		},
		Context: ContextConfig{
			WindowMessages:      6,
			OverflowMessages:    4,
			SummarizeEveryTurns: 10,
			SummarizeAtFraction: 0.70,
			SafetyMarginTokens:  0,
			RetrievalMaxTokens:  1800,
			ChunkMaxTokens:      800,
			MaxPins:             64,
			MaxPinBytes:         2048,
			MaxPinnedShare:      0.25,
		},
		Retrieval: RetrievalConfig{
			Enabled:              true,
			Embedder:             EmbedderAuto,
			HashDims:             512,
			ChunkOverlapTokens:   0,
			VectorsPath:          "models/glove-100d.ctxvec",
			EmbedModel:           "text-embedding-3-small",
			EmbedBaseURL:         "https://api.openai.com/v1",
			EmbedAPIKeyEnv:       "OPENAI_API_KEY",
			EmbedDimensions:      0,
			VectorWeight:         0.3,
			TextWeight:           0.7,
			RecencyWeight:        0,
			RecencyHalfLifeTurns: 500,
			Threshold:            0.35,
			MMRLambda:            0.9,
			Overfetch:            48,
			TopK:                 6,
			MaxK:                 24,
			Neighbours:           2,
			NeighboursBefore:     0,
			TimeBoost:            0.1,
			SpeakerBoost:         0.8,
		},
		Server: ServerConfig{
			Addr:              "127.0.0.1:8080",
			FrameAddr:         "127.0.0.1:8081",
			TokensEnv:         "CTX_SERVER_TOKENS",
			MaxBodyBytes:      8 * MiB,
			MaxInFlight:       1024,
			ReadHeaderTimeout: 10 * time.Second,
			ReadBodyTimeout:   30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			Drain:             30 * time.Second,
			ProxyCommitWithin: 50 * time.Millisecond,
			ProxyQueue:        16,
			ProxyQueueWait:    5 * time.Minute,
			ProxyMaxImport:    500,
			Tenants:           []TenantConfig{},
		},
		Memory: MemoryConfig{ToolsModels: []string{}},
		Tools: ToolsConfig{
			Mode:     ToolsDisabled,
			MaxSteps: 8,
			Timeout:  time.Minute,
			Parallel: true,
		},
		Log: LogConfig{
			Level:  LevelInfo,
			Format: FormatAuto,
		},
		Store: StoreConfig{
			Backend:             BackendBadger,
			PostgresURLEnv:      "CTX_STORE_POSTGRES_URL",
			PostgresMaxConns:    16,
			Durability:          DurabilitySync,
			MaxPayloadBytes:     8 * MiB,
			GroupCommitMax:      512,
			ValueThresholdBytes: 64 * KiB,
			MemTableBytes:       32 * MiB,
			BlockCacheBytes:     256 * MiB,
			ValueLogFileBytes:   256 * MiB,
			NodeCacheEntries:    1 << 18,
			BlobCacheBytes:      64 * MiB,
			GCInterval:          10 * time.Minute,
			GCDiscardRatio:      0.5,
			Compression:         CompressionZstd,
			RedoLogBytes:        64 * MiB,
			MinFreeBytes:        512 * MiB,

			EncryptionKeyEnv:      "CTX_STORE_KEY",
			EncryptionKeyRotation: 10 * 24 * time.Hour,
		},
		Runtime: RuntimeConfig{
			IdlePassivation:        5 * time.Minute,
			SnapshotEvery:          100,
			RequestTimeout:         30 * time.Second,
			MaxRestarts:            10,
			RestartWindow:          time.Minute,
			MaxOutputTokens:        4096,
			ProviderTimeout:        30 * time.Minute,
			MemoryLimitBytes:       768 * MiB,
			GCPercent:              300,
			ProviderMaxRetries:     3,
			ProviderRetryBaseDelay: 500 * time.Millisecond,
			ProviderRetryMaxDelay:  30 * time.Second,
		},
		Stream: StreamConfig{
			FlushInterval:   250 * time.Millisecond,
			FlushBytes:      8192,
			FsyncInterval:   2 * time.Second,
			FsyncFinalized:  true,
			RetainFinalized: 7 * 24 * time.Hour,
		},
		Local: LocalConfig{
			Delay:        15 * time.Millisecond,
			ContextLimit: 32768,
		},
		Librarian: LibrarianConfig{Delay: 0, Model: "", OpenAIModel: "gpt-5.4-nano", AnthropicModel: "claude-haiku-4-5",
			MaxOutputTokens: 1024},
		Redaction: RedactionConfig{Patterns: []RedactPattern{}},
		Retention: defaultRetention(),
		Cluster:   defaultCluster(),
	}
}
