// Package fake is a scripted Provider for tests. Each call of Stream plays
// the next Step of a script: it streams a reply word by word, adds
// transcript items, ends with any outcome, or injects a fault — an error
// before anything is streamed (a 429 with Retry-After, a 500), a dropped
// connection mid-stream, a stream that hangs until cancelled — and it can
// hold a call mid-flight until the test releases it. The provider records
// every request it receives.
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// ErrConnectionReset is the cause (Unwrap) of the *providers.Error a step
// with FailAfter returns when it drops the connection.
var ErrConnectionReset = errors.New("fake: connection reset")

// The Event.Type values Stream emits.
const (
	EventStart = "fake.start" // EventOther, first of every stream
	EventDelta = "fake.delta" // EventTextDelta, one per token
	EventItem  = "fake.item"  // EventItem, one per Step.Items
)

// Step scripts one call of Stream. Its zero value streams nothing and
// completes. A step plays in this order: wait for Block; return Err; emit
// an EventStart event; stream the tokens of Reply, Delay apart, up to
// FailAfter of them when it is set; hang if Hang is set; fail if FailAfter
// is set; emit Items; return Outcome. Whenever ctx is done Stream returns
// ctx.Err(), and when emit fails emit's error wrapped, each with the
// response so far.
type Step struct {
	// Reply is streamed as local.Tokens would split it and becomes the
	// response's first item, an AssistantMessage, when not empty.
	Reply string
	// Items are emitted as EventItem events after the reply, and follow
	// it in the response.
	Items messages.Items
	// Outcome is the outcome of the response; the zero value means
	// Completed.
	Outcome messages.StepOutcome
	// Err, when set, is returned as is before any event: a
	// &providers.Error{StatusCode: 429, Retryable: true, RetryAfter: …}
	// for a rate limit, StatusCode 500 for a server error.
	Err error
	// FailAfter, when positive, drops the connection after that many
	// tokens (all of them if the reply has fewer), before Items: Stream
	// returns a retryable *providers.Error "connection reset" wrapping
	// ErrConnectionReset, with the text so far in the response.
	FailAfter int
	// Hang blocks, after the tokens (no more than FailAfter when that is
	// set) and before Items, until ctx is done, then returns ctx.Err().
	Hang bool
	// Delay is the pause between two tokens.
	Delay time.Duration
	// Block, when not nil, holds the call before it streams anything
	// (and before Err) until Block is closed or ctx is done.
	Block <-chan struct{}
	// Usage, when not nil, is the usage the response reports, as an
	// upstream's; by default it is counted (local.Estimate of the
	// context in, the tokens streamed out).
	Usage *providers.Usage
	// Model, when not "", is the model the response says answered; by
	// default the request's.
	Model string
}

// DefaultContextLimit is the context window ContextLimit reports unless
// WithContextLimit sets another.
const DefaultContextLimit = local.DefaultContextLimit

// Provider plays a script of steps, one per call of Stream: the first call
// plays the first step, and once the steps run out every call plays the
// last one again. With no steps every call echoes the user's message:
// "echo: <user text>". It is safe for concurrent use; the order of
// concurrent calls decides which step each one plays.
type Provider struct {
	mu       sync.Mutex
	name     string
	limit    int
	steps    []Step
	requests []providers.Request
	refused  []string // GenParams fields RefusedParams refuses
}

var (
	_ providers.Provider    = (*Provider)(nil)
	_ providers.ParamsTaker = (*Provider)(nil)
)

// New returns a provider named "fake" that plays steps.
func New(steps ...Step) *Provider {
	return &Provider{name: "fake", limit: DefaultContextLimit, steps: slices.Clone(steps)}
}

// WithName sets the name Name returns and errors carry, and returns p.
func (p *Provider) WithName(name string) *Provider {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name = name
	return p
}

// WithContextLimit sets the context window ContextLimit returns for every
// model, and returns p.
func (p *Provider) WithContextLimit(tokens int) *Provider {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limit = tokens
	return p
}

// WithRefused makes RefusedParams refuse fields (GenParams' JSON names)
// when set, and returns p.
func (p *Provider) WithRefused(fields ...string) *Provider {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused = slices.Clone(fields)
	return p
}

// RefusedParams is providers.ParamsTaker: the fake takes every
// generation setting (Requests shows them), but those WithRefused names.
func (p *Provider) RefusedParams(_ string, gp messages.GenParams) []providers.RefusedParam {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []providers.RefusedParam
	for _, f := range gp.Set() {
		if slices.Contains(p.refused, f) {
			out = append(out, providers.RefusedParam{Field: f, Why: "the fake provider was told to refuse it"})
		}
	}
	return out
}

// Name returns the provider's name, "fake" unless WithName set another.
func (p *Provider) Name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.name
}

// ContextLimit returns DefaultContextLimit, or what WithContextLimit set,
// whatever the model.
func (p *Provider) ContextLimit(string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// EstimatePromptTokens returns local.Estimate(req.Context); it never fails.
func (p *Provider) EstimatePromptTokens(req providers.Request) (int, error) {
	return local.Estimate(req.Context), nil
}

// Calls returns how many times Stream has been called.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

// Requests returns the requests Stream received, in the order of the calls.
// The slice is a copy; the requests share their contents with the callers'.
func (p *Provider) Requests() []providers.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Stream records req and plays the next step of the script, as Step
// describes. A request whose tool choice the real adapters reject
// (providers.ToolChoice) fails first, with that error and outcome
// Failed{bad_request}, the step being played all the same.
func (p *Provider) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	p.mu.Lock()
	call := len(p.requests)
	p.requests = append(p.requests, req)
	name := p.name
	var step Step
	switch {
	case len(p.steps) == 0:
		step = Step{Reply: "echo: " + userText(req.Context.User)}
	case call < len(p.steps):
		step = p.steps[call]
	default:
		step = p.steps[len(p.steps)-1]
	}
	p.mu.Unlock()

	s := stream{name: name, call: call, req: req, inputTokens: local.Estimate(req.Context), usage: step.Usage, model: step.Model}
	if _, err := providers.ToolChoice(req.Context); err != nil {
		err = fmt.Errorf("%s: build request: %w", name, err)
		return s.response(failed("bad_request", err)), err
	}
	if step.Block != nil {
		select {
		case <-step.Block:
		case <-ctx.Done():
			return s.cancelled(), ctx.Err()
		}
	}
	if step.Err != nil {
		return s.response(failed("", step.Err)), step.Err
	}
	if err := s.emit(ctx, emit, providers.Event{Kind: providers.EventOther, Type: EventStart, Raw: s.startRaw()}); err != nil {
		return s.stop(err)
	}

	toks := local.Tokens(step.Reply)
	if step.FailAfter > 0 && step.FailAfter < len(toks) {
		toks = toks[:step.FailAfter]
	}
	for i, tok := range toks {
		if i > 0 && step.Delay > 0 {
			if err := providers.Sleep(ctx, step.Delay); err != nil {
				return s.cancelled(), err
			}
		}
		if err := s.emit(ctx, emit, deltaEvent(tok)); err != nil {
			return s.stop(err)
		}
		s.text.WriteString(tok)
		s.tokens++
	}

	if step.Hang {
		<-ctx.Done()
		return s.cancelled(), ctx.Err()
	}
	if step.FailAfter > 0 {
		err := &providers.Error{Provider: name, Message: "connection reset", Retryable: true, Err: ErrConnectionReset}
		return s.response(failed("connection_reset", err)), err
	}

	for _, it := range step.Items {
		ev := providers.Event{Kind: providers.EventItem, Item: it, Type: EventItem}
		if raw, err := messages.MarshalItem(it); err == nil {
			ev.Raw = raw
		}
		if err := s.emit(ctx, emit, ev); err != nil {
			return s.stop(err)
		}
		s.items = append(s.items, it)
	}

	outcome := step.Outcome
	if outcome.Kind == 0 {
		outcome.Kind = messages.OutcomeCompleted
	}
	return s.response(outcome), nil
}

// stream is the state of one Stream call: what has been sent so far.
type stream struct {
	name        string
	call        int
	req         providers.Request
	inputTokens int
	text        strings.Builder
	tokens      int
	items       messages.Items
	usage       *providers.Usage // Step.Usage
	model       string           // Step.Model
}

// errEmit marks an error returned by emit, to tell it from ctx's.
type errEmit struct{ err error }

func (e errEmit) Error() string { return e.err.Error() }

// emit checks ctx, then passes ev to emit.
func (s *stream) emit(ctx context.Context, emit func(providers.Event) error, ev providers.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := emit(ev); err != nil {
		return errEmit{err}
	}
	return nil
}

// stop ends the stream on an error from s.emit.
func (s *stream) stop(err error) (providers.Response, error) {
	var ee errEmit
	if !errors.As(err, &ee) {
		return s.cancelled(), err
	}
	err = fmt.Errorf("%s: emit: %w", s.name, ee.err)
	return s.response(failed("emit", err)), err
}

func (s *stream) cancelled() providers.Response {
	return s.response(messages.StepOutcome{Kind: messages.OutcomeCancelled})
}

// response returns the response for what was sent so far.
func (s *stream) response(outcome messages.StepOutcome) providers.Response {
	text := s.text.String()
	var items messages.Items
	if text != "" {
		items = append(items, messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: text}}})
	}
	items = append(items, s.items...)
	usage, model := providers.Usage{InputTokens: s.inputTokens, OutputTokens: s.tokens}, s.req.Model
	if s.usage != nil {
		usage = *s.usage
	}
	if s.model != "" {
		model = s.model
	}
	return providers.Response{
		Items:       items,
		Outcome:     outcome,
		Usage:       usage,
		Model:       model,
		RawRequest:  s.rawRequest(),
		RawResponse: rawResponse(text, s.items),
	}
}

func (s *stream) startRaw() json.RawMessage {
	return mustJSON(struct {
		Model string `json:"model"`
		Call  int    `json:"call"`
	}{s.req.Model, s.call})
}

func (s *stream) rawRequest() json.RawMessage {
	return mustJSON(struct {
		Model           string `json:"model"`
		Call            int    `json:"call"`
		MaxOutputTokens int    `json:"max_output_tokens"`
		UserText        string `json:"user_text"`
	}{s.req.Model, s.call, s.req.MaxOutputTokens, userText(s.req.Context.User)})
}

// rawResponse returns {"text":…,"items":[…]}, leaving items out when there
// are none or they do not encode.
func rawResponse(text string, items messages.Items) json.RawMessage {
	var raw json.RawMessage
	if len(items) > 0 {
		if data, err := items.MarshalJSON(); err == nil {
			raw = data
		}
	}
	return mustJSON(struct {
		Text  string          `json:"text"`
		Items json.RawMessage `json:"items,omitempty"`
	}{text, raw})
}

// failed returns the Failed outcome for err.
func failed(code string, err error) messages.StepOutcome {
	if code == "" {
		var pe *providers.Error
		if errors.As(err, &pe) {
			code = pe.Code
		}
	}
	return messages.StepOutcome{Kind: messages.OutcomeFailed, Code: code, Message: err.Error()}
}

func deltaEvent(tok string) providers.Event {
	return providers.Event{
		Kind: providers.EventTextDelta,
		Text: tok,
		Type: EventDelta,
		Raw: mustJSON(struct {
			Delta string `json:"delta"`
		}{tok}),
	}
}

// userText returns the text a reader sees in m.
func userText(m messages.Message) string {
	if m.RenderedText != "" {
		return m.RenderedText
	}
	return m.Blocks.RenderedText()
}

// mustJSON encodes v, which holds only strings, numbers and valid raw
// JSON and so always encodes.
func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fake: encode %T: %v", v, err))
	}
	return data
}
