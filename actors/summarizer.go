package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// Librarian writes summaries with a language model under the SRD's
// contract (§10): each summary is checked for the entities it must keep
// (core.RequiredEntities, core.MissingEntities); a summary that misses
// some is asked for once more, naming them (core.RetryPrompt); when that
// fails too, or the provider fails, the deterministic fallback is used
// (core.FallbackSummary, core.ShrinkSummary) and the reason logged. Its
// requests go through the runtime's redaction (Redaction: the configured
// patterns, then Config.Redact) and its errors through Config.Scrub, as
// the librarian actor passes them in the context. Its methods never fail
// but for a done context.
type Librarian struct {
	Provider providers.Provider
	Model    string // the provider's model id
	// MaxOutputTokens bounds each call (default 1024).
	MaxOutputTokens int
	// Timeout bounds each call (default 2 minutes): the librarian actor
	// runs the summarizer with a context that has no deadline.
	Timeout time.Duration
	// Count counts tokens for Shrink; nil: the branch's counter, else
	// tokens.Estimate.
	Count func(string) int
	// Log receives why a model summary was rejected: counts and kinds at
	// info and warn level, never the prompt or the conversation (the
	// missing entities' text is logged at debug level only).
	Log zerolog.Logger
}

// LLMSummarizer returns a summarizer for Config.Summarize that asks
// model on p (see Librarian.Summarize).
func LLMSummarizer(p providers.Provider, model string, maxOutputTokens int, log zerolog.Logger) func(ctx context.Context, previous string, exchanges []core.Exchange) (string, error) {
	return Librarian{Provider: p, Model: model, MaxOutputTokens: maxOutputTokens, Log: log}.Summarize
}

// LLMShrinker returns a shrinker for the context shrinker's last step
// (SRD §7.3 step 4) that asks model on p (see Librarian.Shrink).
func LLMShrinker(p providers.Provider, model string, maxOutputTokens int, log zerolog.Logger) func(ctx context.Context, summary string, targetTokens int) (string, error) {
	return Librarian{Provider: p, Model: model, MaxOutputTokens: maxOutputTokens, Log: log}.Shrink
}

// pinnedKey is the context key of WithPinnedFacts.
type pinnedKey struct{}

// WithPinnedFacts returns ctx carrying the pinned facts of the branch a
// summary is written for. Config.Summarize has no parameter for them; the
// librarian actor passes them this way, and Librarian.Summarize reads
// them with PinnedFacts.
func WithPinnedFacts(ctx context.Context, pinned []string) context.Context {
	return context.WithValue(ctx, pinnedKey{}, pinned)
}

// PinnedFacts returns the pinned facts WithPinnedFacts put in ctx, or nil.
func PinnedFacts(ctx context.Context) []string {
	pinned, _ := ctx.Value(pinnedKey{}).([]string)
	return pinned
}

// counterKey is the context key of WithCounter.
type counterKey struct{}

// WithCounter returns ctx carrying the token counter of the model a
// summary is shrunk for: Config.Shrink's target is in its tokens. The
// librarian actor passes it this way; Librarian.Shrink uses it when its
// own Count is nil.
func WithCounter(ctx context.Context, count core.Counter) context.Context {
	return context.WithValue(ctx, counterKey{}, count)
}

// Why a model's answer is not used.
var (
	errEmptySummary = errors.New("librarian: the model returned no text")
	errMissing      = errors.New("librarian: the summary misses entities it must keep")
	errTooLong      = errors.New("librarian: the shrunk summary is over its target")
)

// Summarize folds exchanges into previous: it asks the model
// (core.SummaryPrompt, with the pinned facts of PinnedFacts(ctx)), checks
// the answer against core.RequiredEntities, retries once with
// core.RetryPrompt naming what is missing, and falls back to
// core.FallbackSummary when the retry misses entities too or the
// provider fails (transient errors are retried by the provider's own
// retry policy first). It returns an error only when ctx is done.
func (l Librarian) Summarize(ctx context.Context, previous string, exchanges []core.Exchange) (string, error) {
	// The model is shown the turns as redacted, so it is held to the
	// entities of what it was shown: a secret it never saw cannot be
	// kept. The deterministic fallback, which sends nothing, keeps all.
	red := patterns(ctx)
	pinned, prev := red.Texts(PinnedFacts(ctx)), red.Text(previous)
	shown := exchanges
	if red != nil {
		shown = make([]core.Exchange, len(exchanges))
		for i, e := range exchanges {
			shown[i] = core.Exchange{User: red.Text(e.User), Assistant: red.Text(e.Assistant)}
		}
	}
	required := core.RequiredEntities(pinned, prev, shown)
	system, user := core.SummaryPrompt(prev, shown, pinned)
	summary, err := l.check(ctx, "summarize", 1, system, user, required, -1)
	if missing := (*missingError)(nil); errors.As(err, &missing) {
		system, user = core.RetryPrompt(prev, shown, pinned, missing.entities)
		summary, err = l.check(ctx, "summarize", 2, system, user, required, -1)
	}
	if err == nil {
		return summary, nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return "", cerr
	}
	l.Log.Warn().Err(err).Str("provider", l.Provider.Name()).Str("model", l.Model).Int("exchanges", len(exchanges)).
		Msg("librarian: using the deterministic fallback summary")
	return core.FallbackSummary(previous, exchanges), nil
}

// Shrink shortens summary to at most targetTokens (SRD §7.3 step 4,
// §10.4): it asks the model (core.ShrinkPrompt), checks that the answer
// keeps every entity of the summary and fits, retries once
// (core.ShrinkRetryPrompt), and otherwise falls back to
// core.ShrinkSummary — applied to the model's last answer when that kept
// every entity, else to summary. A summary that fits already is returned
// as it is. It returns an error only when ctx is done.
func (l Librarian) Shrink(ctx context.Context, summary string, targetTokens int) (string, error) {
	count := l.Count
	if c, ok := ctx.Value(counterKey{}).(core.Counter); ok && count == nil && c != nil {
		count = c
	}
	if count == nil {
		count = tokens.Estimate.Count
	}
	l.Count = count // for check
	if count(summary) <= targetTokens {
		return summary, nil
	}
	shown := patterns(ctx).Text(summary) // as the model sees it (see Summarize)
	required := core.RequiredEntities(nil, shown, nil)
	system, user := core.ShrinkPrompt(shown, targetTokens, count)
	best := summary // the shortest answer so far that keeps every entity
	out, err := l.check(ctx, "shrink", 1, system, user, required, targetTokens)
	var missing *missingError
	if errors.As(err, &missing) {
		if len(missing.entities) == 0 && len(missing.text) < len(best) {
			best = missing.text
		}
		system, user = core.ShrinkRetryPrompt(shown, targetTokens, missing.entities, missing.tokens, count)
		out, err = l.check(ctx, "shrink", 2, system, user, required, targetTokens)
		if errors.As(err, &missing) && len(missing.entities) == 0 && len(missing.text) < len(best) {
			best = missing.text
		}
	}
	if err == nil {
		return out, nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return "", cerr
	}
	l.Log.Warn().Err(err).Str("provider", l.Provider.Name()).Str("model", l.Model).Int("target_tokens", targetTokens).
		Msg("librarian: shrinking the summary deterministically")
	return core.ShrinkSummary(best, targetTokens, count), nil
}

// missingError is a model answer that misses entities or, when shrinking,
// is over its target.
type missingError struct {
	entities []core.Entity
	text     string // the answer
	tokens   int    // its tokens when over the target, else 0
}

func (e *missingError) Error() string {
	if len(e.entities) == 0 {
		return fmt.Sprintf("%v: %d tokens", errTooLong, e.tokens)
	}
	return fmt.Sprintf("%v: %d (%s)", errMissing, len(e.entities), entityKinds(e.entities))
}

func (e *missingError) Unwrap() error {
	if len(e.entities) == 0 {
		return errTooLong
	}
	return errMissing
}

// check asks the model and checks its answer against required and, when
// target >= 0, against target tokens. The error is a *missingError when
// the answer does not pass.
func (l Librarian) check(ctx context.Context, task string, attempt int, system, user string, required []core.Entity, target int) (string, error) {
	started := markNow()
	text, err := l.complete(ctx, system, user)
	ev := l.Log.Debug()
	if err == nil {
		var e *missingError
		if missing := core.MissingEntities(text, required); len(missing) > 0 {
			e = &missingError{entities: missing, text: text}
		}
		if target >= 0 {
			count := l.Count
			if count == nil {
				count = tokens.Estimate.Count
			}
			if n := count(text); n > target {
				if e == nil {
					e = &missingError{text: text}
				}
				e.tokens = n
			}
		}
		if e != nil {
			err = e
			ev = l.Log.Info()
			if l.Log.GetLevel() <= zerolog.DebugLevel {
				texts := make([]string, len(e.entities))
				for i, m := range e.entities {
					texts[i] = m.String()
				}
				l.Log.Debug().Str("task", task).Int("attempt", attempt).Strs("missing", texts).Msg("librarian: missing entities")
			}
		}
	}
	ev.Str("task", task).Int("attempt", attempt).Str("provider", l.Provider.Name()).Str("model", l.Model).
		Int("required", len(required)).Dur("took", started.elapsed()).AnErr("reject", err).Msg("librarian: model answer")
	return text, err
}

// complete runs one call of the model and returns its text.
func (l Librarian) complete(ctx context.Context, system, user string) (string, error) {
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	maxOut := l.MaxOutputTokens
	if maxOut <= 0 {
		maxOut = 1024
	}
	// The runtime's redaction (patterns, then hook) applies to what the
	// librarian sends as to any step.
	ac, err := Redaction(ctx)(messages.AssembledContext{
		SystemInstructions: system,
		User:               messages.NewMessage(messages.RoleUser, messages.Text{Text: user}),
	})
	if err != nil {
		return "", fmt.Errorf("librarian: redact: %w", scrubber(ctx).Error(err))
	}
	req := providers.Request{Model: l.Model, MaxOutputTokens: maxOut, Context: ac}
	var deltas strings.Builder
	resp, err := l.Provider.Stream(ctx, req, func(ev providers.Event) error {
		if ev.Kind == providers.EventTextDelta {
			deltas.WriteString(ev.Text)
		}
		return nil
	})
	// Its errors are logged: an upstream that echoes the key it was
	// sent must not get it there.
	resp, err = scrubber(ctx).Response(resp, err)
	if err != nil {
		return "", fmt.Errorf("librarian %s/%s: %w", l.Provider.Name(), l.Model, err)
	}
	if k := resp.Outcome.Kind; k != messages.OutcomeCompleted {
		return "", fmt.Errorf("librarian %s/%s: the call ended %v (%s)", l.Provider.Name(), l.Model, k, resp.Outcome.Message)
	}
	text := assistantText(resp.Items)
	if text == "" {
		text = deltas.String()
	}
	if text = cleanSummary(text); text == "" {
		return "", errEmptySummary
	}
	return text, nil
}

// assistantText returns the text blocks of the assistant messages in
// items.
func assistantText(items messages.Items) string {
	var b strings.Builder
	for _, it := range items {
		if m, ok := it.(messages.AssistantMessage); ok {
			for _, bl := range m.Blocks {
				if t, ok := bl.(messages.Text); ok {
					b.WriteString(t.Text)
				}
			}
		}
	}
	return b.String()
}

// cleanSummary trims a model's answer and unwraps it from a code fence
// the model put around it despite the prompt.
func cleanSummary(text string) string {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "```") && strings.HasSuffix(text, "```") && len(text) > 6 {
		if nl := strings.IndexByte(text, '\n'); nl >= 0 {
			text = strings.TrimSpace(strings.TrimSuffix(text[nl+1:], "```"))
		}
	}
	return text
}

// entityKinds lists the kinds of es with counts, for logs: "2 number,
// 1 pinned fact".
func entityKinds(es []core.Entity) string {
	var order []core.EntityKind
	n := map[core.EntityKind]int{}
	for _, e := range es {
		if n[e.Kind] == 0 {
			order = append(order, e.Kind)
		}
		n[e.Kind]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %v", n[k], k)
	}
	return strings.Join(parts, ", ")
}
