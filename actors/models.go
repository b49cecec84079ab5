package actors

import (
	"hash/maphash"

	"github.com/contextinfinity/ctxinf/internal/core"
)

// model returns the model a branch that selected name uses: the named
// model, or the default for "" or a name no longer configured.
func (r *Runtime) model(name string) Model {
	if m, ok := r.cfg.Models[name]; ok && name != "" {
		return m
	}
	return Model{Provider: r.cfg.Provider, ID: r.cfg.Model}
}

// budget is the token budget of a step with model m.
func (r *Runtime) budget(m Model) core.Budget {
	limit := m.Provider.ContextLimit(m.ID)
	out := r.cfg.MaxOutputTokens
	if m.MaxOutputTokens > 0 {
		out = m.MaxOutputTokens
	}
	margin := r.cfg.SafetyMargin
	if margin <= 0 {
		margin = max(limit/50, 256)
	}
	return core.Budget{ContextLimit: limit, ResponseReserve: out, SafetyMargin: margin,
		RetrievalMax: r.cfg.RetrievalMax, ChunkMax: r.cfg.ChunkMax}
}

// counter is the token counter of model m, behind a cache shared by the
// runtime: a context is counted every turn, and most of its messages were
// counted the turn before.
func (r *Runtime) counter(m Model) core.Counter { return r.counterFor(m.Provider.Name(), m.ID) }

// counterFor is counter by the provider's name and the model id.
func (r *Runtime) counterFor(provider, modelID string) core.Counter {
	count := r.cfg.Counter(provider, modelID)
	model := provider + "\x00" + modelID
	return func(text string) int {
		if text == "" {
			return count(text)
		}
		// Even a short text is worth the lookup: a hash and a map read
		// cost less than counting a one-line message.
		var h maphash.Hash
		h.SetSeed(r.countSeed)
		h.WriteString(model)
		h.WriteString(text)
		k := h.Sum64()
		if n, ok := r.counts.get(k); ok {
			return n
		}
		n := count(text)
		r.counts.put(k, n)
		return n
	}
}
