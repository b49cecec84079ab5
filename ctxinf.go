// Package ctxinf is ContextInfinity as a Go library: a runtime that hosts
// many conversations with unlimited history. Each branch keeps a bounded
// working context (pinned facts, a rolling summary, a verbatim window and
// pending turns) while the full transcript stays on disk losslessly,
// content-addressed and forkable from any turn.
//
// Open a runtime on a data directory, create a session, submit user turns
// and read their streams, fork, page history, pin facts and inspect
// branches. Every acknowledged write is durable; killing the process loses
// nothing that was acknowledged.
package ctxinf

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// Types of the runtime's API.
type (
	// TurnStream delivers one turn's updates: text deltas, the stream
	// journal's displayed/durable counters, and the end.
	TurnStream = actors.TurnStream
	// Update is one item of a TurnStream.
	Update = actors.Update
	// BranchInfo is a branch's live state, as Inspect shows it.
	BranchInfo = actors.BranchInfo
	// Entry is one message of a branch's history.
	Entry = actors.Entry
	// Session and Branch are the stored rows of sessions and branches.
	Session = persistence.SessionRow
	Branch  = persistence.BranchRow
	// TurnID names a turn (and a transcript node). The zero TurnID means
	// "the head" where an API takes a turn to fork at or page before.
	TurnID = messages.TurnID
	// Tool is a function the model may call; ToolRegistry holds the
	// tools a runtime offers (Options.Tools).
	Tool         = actors.Tool
	ToolRegistry = actors.ToolRegistry
	// Model is a named model a branch can select (Options.Models,
	// Runtime.SelectModel): a provider and its model id.
	Model = actors.Model
	// Hit is a chunk found by Runtime.Search, with its scores.
	Hit = actors.Hit
	// Exchange is a finished exchange for Runtime.Import.
	Exchange = actors.Exchange
)

// ToolFunc makes a Tool of a definition and a function.
func ToolFunc(def messages.Tool, call func(ctx context.Context, arguments json.RawMessage) (string, error)) Tool {
	return actors.ToolFunc(def, call)
}

// NewToolRegistry returns a registry holding tools; names must be unique
// and valid for every provider (1 to 64 letters, digits, '_' or '-').
func NewToolRegistry(tools ...Tool) (*ToolRegistry, error) { return actors.NewToolRegistry(tools...) }

// Options configure Open. Zero fields take the defaults of config.yaml
// (internal/config.Default, mapped as the binary maps it), but for the
// API keys: a library runtime reads none from the environment, so that its
// default model is the offline local provider.
type Options struct {
	DataDir  string             // required
	Provider providers.Provider // default: the offline local provider
	Model    string
	// Models are further models a branch can switch to by name; when set
	// they replace the configured ones.
	Models map[string]Model
	// ToolMode is the tools policy: messages.ToolsDisabled (default),
	// ToolsParseOnly (calls are recorded, never run) or ToolsEnabled
	// (calls run and the model continues, in at most MaxToolSteps steps
	// per turn, default 8).
	ToolMode     messages.ToolMode
	Tools        *ToolRegistry
	MaxToolSteps int
	// MemoryTools offers the model the runtime's memory tools
	// (search_memory, pin_fact, unpin_fact), which run inside the runtime
	// in every ToolMode but ToolsParseOnly (memory.tools); a Model's
	// MemoryTools overrides it for the branches on that model.
	MemoryTools bool
	// Redact, if set, rewrites every context just before it is sent to a
	// provider (SRD §14.1), the librarian's requests included, after the
	// patterns of Config.Redaction; what is stored is unchanged. It
	// returns new messages rather than changing those it is given in
	// place.
	Redact func(messages.AssembledContext) (messages.AssembledContext, error)
	// Relaxed skips fsync: writes survive a process crash but not a power
	// loss. For tests and bulk loads.
	Relaxed bool
	// EncryptionKey, when set, encrypts the data directory at rest (the
	// store, its redo log and the stream journals; docs/SECURITY.md): 16,
	// 24 or 32 bytes. A directory created with a key opens only with it.
	EncryptionKey []byte
	// PostgresURL, when set, keeps the store in the PostgreSQL database
	// at this URL instead of Badger in DataDir (store.backend: postgres,
	// docs/STORE.md); DataDir still holds a lock. It cannot be combined
	// with EncryptionKey: encryption at rest is then the database's.
	PostgresURL string
	Logger      zerolog.Logger
	// Config, when set, is used as is: DataDir, Provider and Model above
	// still fill its empty fields, and the settings it leaves unset
	// (timeouts, limits, policies: see actors.Config) take config.yaml's
	// defaults.
	Config *actors.Config
}

// Runtime is an open ContextInfinity runtime. Its methods are safe for
// concurrent use.
type Runtime struct{ *actors.Runtime }

// Open opens (creating if needed) the runtime stored in opts.DataDir and
// recovers any work a crash interrupted before it returns.
func Open(ctx context.Context, opts Options) (*Runtime, error) {
	cfg, err := runtimeConfig(opts)
	if err != nil {
		return nil, err
	}
	r, err := actors.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Runtime{r}, nil
}

// runtimeConfig is the runtime's configuration for opts: opts.Config with
// opts' fields in its empty ones, or else config.yaml's defaults mapped
// by the binary's builder (wiring.Runtime) with opts' non-zero fields on
// top.
func runtimeConfig(opts Options) (actors.Config, error) {
	if opts.Config != nil {
		return fill(*opts.Config, opts), nil
	}
	c := config.Default()
	c.DataDir = opts.DataDir
	// No key is read (wiring.Env.Getenv is nil), so default_model's
	// model is unavailable and the local provider is the default, as in
	// the binary without keys; naming no default model says so without
	// the binary's warning.
	c.DefaultModel = ""
	cfg, err := wiring.Runtime(c, wiring.Env{Log: opts.Logger})
	if err != nil {
		return actors.Config{}, err
	}
	if opts.Provider != nil {
		cfg.Provider, cfg.Model = opts.Provider, opts.Model
	} else if opts.Model != "" {
		cfg.Model = opts.Model
	}
	if opts.Models != nil {
		cfg.Models, cfg.Unavailable = opts.Models, nil
	}
	if opts.ToolMode != messages.ToolsDisabled {
		cfg.ToolMode = opts.ToolMode
	}
	if opts.Tools != nil {
		cfg.Tools = opts.Tools
	}
	if opts.MaxToolSteps > 0 {
		cfg.MaxToolSteps = opts.MaxToolSteps
	}
	cfg.MemoryTools = cfg.MemoryTools || opts.MemoryTools
	cfg.Redact = opts.Redact
	return storage(cfg, opts), nil
}

// fill sets cfg's empty fields from opts, and its unset settings from
// config.yaml's defaults (wiring.Fill).
func fill(cfg actors.Config, opts Options) actors.Config {
	cfg = wiring.Fill(cfg)
	if cfg.DataDir == "" {
		cfg.DataDir = opts.DataDir
	}
	if cfg.Provider == nil {
		cfg.Provider = opts.Provider
	}
	if cfg.Provider == nil {
		cfg.Provider = local.New(local.Options{})
	}
	if cfg.Model == "" {
		cfg.Model = opts.Model
	}
	if cfg.Models == nil {
		cfg.Models = opts.Models
	}
	if cfg.ToolMode == messages.ToolsDisabled {
		cfg.ToolMode = opts.ToolMode
	}
	if cfg.Tools == nil {
		cfg.Tools = opts.Tools
	}
	cfg.MemoryTools = cfg.MemoryTools || opts.MemoryTools
	if cfg.MaxToolSteps == 0 {
		cfg.MaxToolSteps = opts.MaxToolSteps
	}
	if cfg.Redact == nil {
		cfg.Redact = opts.Redact
	}
	return storage(cfg, opts)
}

// storage applies opts' store fields (Relaxed, EncryptionKey,
// PostgresURL) to cfg.
func storage(cfg actors.Config, opts Options) actors.Config {
	if opts.Relaxed {
		cfg.Store.Durability = persistence.DurabilityRelaxed
	}
	if len(opts.EncryptionKey) > 0 {
		cfg.Store.EncryptionKey = opts.EncryptionKey
	}
	if opts.PostgresURL != "" && cfg.Postgres == nil {
		o := wiring.PostgresOptionsAt(config.Default(), opts.PostgresURL, opts.Logger)
		cfg.Postgres = &o
	}
	return cfg
}

// Ask is Submit followed by reading the whole stream: it returns the reply
// text and the final update.
func (r *Runtime) Ask(ctx context.Context, branch Branch, text string) (string, Update, error) {
	s, err := r.Submit(ctx, branch.ID, text)
	if err != nil {
		return "", Update{}, err
	}
	stop := make(chan struct{})
	if d, ok := ctx.Deadline(); ok {
		t := time.AfterFunc(time.Until(d), func() { close(stop) })
		defer t.Stop()
	}
	reply, last := s.Wait(stop)
	return reply, last, ctx.Err()
}
