package actors

import (
	"context"

	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// outbound is what a request leaving the process goes through: the
// configured patterns, then the Go hook (Config.Redaction, Config.Redact);
// and what its errors go through before they are stored or logged
// (Config.Scrub).
type outbound struct {
	patterns *providers.Redactor
	hook     func(messages.AssembledContext) (messages.AssembledContext, error)
	scrub    *providers.Scrubber
}

// outbound returns the runtime's outbound rules.
func (r *Runtime) outbound() outbound {
	return outbound{patterns: r.cfg.Redaction, hook: r.cfg.Redact, scrub: r.cfg.Scrub}
}

// context returns ac as it may be sent: the patterns applied, then the
// hook.
func (o outbound) context(ac messages.AssembledContext) (messages.AssembledContext, error) {
	ac = o.patterns.Context(ac)
	if o.hook != nil {
		return o.hook(ac)
	}
	return ac, nil
}

// outboundKey is the context key of withOutbound.
type outboundKey struct{}

// withOutbound returns ctx carrying o, for the librarian's requests
// (Config.Summarize and Config.Shrink have no parameter for it).
func withOutbound(ctx context.Context, o outbound) context.Context {
	return context.WithValue(ctx, outboundKey{}, o)
}

// Redaction returns the runtime's redaction of a request's context, as
// the librarian actor passes it to Config.Summarize and Config.Shrink in
// their context: the configured patterns, then Config.Redact. Librarian
// applies it to every request; a summarizer of one's own that calls a
// model should too. Outside the librarian it returns a function that
// changes nothing.
func Redaction(ctx context.Context) func(messages.AssembledContext) (messages.AssembledContext, error) {
	o, _ := ctx.Value(outboundKey{}).(outbound)
	return o.context
}

// patterns returns the configured patterns the librarian actor put in
// ctx (nil, which changes nothing, when none).
func patterns(ctx context.Context) *providers.Redactor {
	o, _ := ctx.Value(outboundKey{}).(outbound)
	return o.patterns
}

// scrubber returns the Scrubber the librarian actor put in ctx (nil,
// which removes key shapes only, when none).
func scrubber(ctx context.Context) *providers.Scrubber {
	o, _ := ctx.Value(outboundKey{}).(outbound)
	return o.scrub
}

// redactingEmbedder is the runtime's embedder: every text redacted by
// the configured patterns before it is embedded, and every error
// scrubbed. The runtime cannot tell an embedder that sends texts out of
// the process from one that does not, so it redacts for all of them;
// queries and chunks go through the same patterns, so they still meet.
type redactingEmbedder struct {
	retrieval.Embedder
	patterns *providers.Redactor
	scrub    *providers.Scrubber
}

func (e redactingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := e.Embedder.Embed(ctx, e.patterns.Texts(texts))
	return vecs, e.scrub.Error(err)
}
