// Package local is a Provider that runs in-process, with no network and no
// key: for offline use, and for watching context management work. Its
// reply is a deterministic report of the context it was given (how many
// pinned facts, window messages, pending turns and retrieved chunks, and
// snippets of the user's and the pending turns' text), streamed word by
// word like a real model's.
package local

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// DefaultContextLimit is the context window ContextLimit reports when
// Options.ContextLimit is not set.
const DefaultContextLimit = 32768

// The Event.Type values Stream emits.
const (
	EventStart = "local.start" // EventOther, first of every stream
	EventDelta = "local.delta" // EventTextDelta, one per token
)

// Options configures a Provider.
type Options struct {
	// Delay is the pause between two tokens of the stream; 0 (or less)
	// streams as fast as emit accepts.
	Delay time.Duration
	// ContextLimit is the context window reported for every model;
	// 0 (or less) means DefaultContextLimit.
	ContextLimit int
}

// Provider is the local provider. It is safe for concurrent use.
type Provider struct {
	opts Options
}

var _ providers.Provider = (*Provider)(nil)

// New returns a local provider configured by opts.
func New(opts Options) *Provider {
	if opts.ContextLimit <= 0 {
		opts.ContextLimit = DefaultContextLimit
	}
	if opts.Delay < 0 {
		opts.Delay = 0
	}
	return &Provider{opts: opts}
}

// Name returns "local".
func (p *Provider) Name() string { return "local" }

// ContextLimit returns Options.ContextLimit whatever the model.
func (p *Provider) ContextLimit(string) int { return p.opts.ContextLimit }

// EstimatePromptTokens returns Estimate(req.Context); it never fails.
func (p *Provider) EstimatePromptTokens(req providers.Request) (int, error) {
	return Estimate(req.Context), nil
}

// Stream streams Reply(req.Context). It emits an EventOther of type
// EventStart, then one EventTextDelta of type EventDelta at index 0 for
// each of the reply's Tokens, waiting Options.Delay between two tokens.
//
// The final response holds the reply as one AssistantMessage with outcome
// Completed, or, when req.MaxOutputTokens is positive and the reply has
// more tokens than that, its first MaxOutputTokens tokens with outcome
// Incomplete{Reason: "max_output_tokens"}. Usage.InputTokens is
// Estimate(req.Context) and Usage.OutputTokens the number of tokens sent;
// Model is req.Model.
//
// When ctx is done Stream returns ctx.Err() and, when emit fails, emit's
// error wrapped; either way with the response so far: the text of the
// tokens emit accepted, and outcome Cancelled or Failed.
func (p *Provider) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	toks := Tokens(cutAtStop(Reply(req.Context), req.Params.Stop))
	outcome := messages.StepOutcome{Kind: messages.OutcomeCompleted}
	if limit := req.MaxOutputTokens; limit > 0 && len(toks) > limit {
		toks = toks[:limit]
		outcome = messages.StepOutcome{Kind: messages.OutcomeIncomplete, Reason: "max_output_tokens"}
	}
	s := stream{req: req, inputTokens: Estimate(req.Context)}
	if err := ctx.Err(); err != nil {
		return s.cancelled(), err
	}
	if err := emit(providers.Event{Kind: providers.EventOther, Type: EventStart, Raw: startRaw(req)}); err != nil {
		return s.emitFailed(err)
	}
	for i, tok := range toks {
		if i > 0 {
			if err := providers.Sleep(ctx, p.opts.Delay); err != nil {
				return s.cancelled(), err
			}
		} else if err := ctx.Err(); err != nil {
			return s.cancelled(), err
		}
		if err := emit(deltaEvent(tok)); err != nil {
			return s.emitFailed(err)
		}
		s.text.WriteString(tok)
		s.tokens++
	}
	return s.response(outcome), nil
}

// stream is the state of one Stream call: what has been sent so far.
type stream struct {
	req         providers.Request
	inputTokens int
	text        strings.Builder
	tokens      int
}

// response returns the response for the text sent so far.
func (s *stream) response(outcome messages.StepOutcome) providers.Response {
	text := s.text.String()
	var items messages.Items
	if text != "" {
		items = messages.Items{messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: text}}}}
	}
	return providers.Response{
		Items:      items,
		Outcome:    outcome,
		Usage:      providers.Usage{InputTokens: s.inputTokens, OutputTokens: s.tokens},
		Model:      s.req.Model,
		RawRequest: rawRequest(s.req),
		RawResponse: mustJSON(struct {
			Text string `json:"text"`
		}{text}),
	}
}

func (s *stream) cancelled() providers.Response {
	return s.response(messages.StepOutcome{Kind: messages.OutcomeCancelled})
}

func (s *stream) emitFailed(err error) (providers.Response, error) {
	err = fmt.Errorf("local: emit: %w", err)
	return s.response(messages.StepOutcome{Kind: messages.OutcomeFailed, Code: "emit", Message: err.Error()}), err
}

func deltaEvent(tok string) providers.Event {
	return providers.Event{
		Kind:  providers.EventTextDelta,
		Index: 0,
		Text:  tok,
		Type:  EventDelta,
		Raw:   append(messages.AppendJSONString([]byte(`{"delta":`), tok), '}'),
	}
}

func startRaw(req providers.Request) json.RawMessage {
	return mustJSON(struct {
		Model string `json:"model"`
	}{req.Model})
}

// requestSummary is the RawRequest of a step: the shape of the context and
// the user's text, not the whole context (the step record has that).
type requestSummary struct {
	Model             string `json:"model"`
	MaxOutputTokens   int    `json:"max_output_tokens"`
	PinnedFacts       int    `json:"pinned_facts"`
	SummaryTokens     int    `json:"summary_tokens"`
	WindowMessages    int    `json:"window_messages"`
	PendingMessages   int    `json:"pending_messages"`
	PendingTurns      int    `json:"pending_turns"`
	RetrievedChunks   int    `json:"retrieved_chunks"`
	ContinuationItems int    `json:"continuation_items"`
	Tools             int    `json:"tools"`
	UserText          string `json:"user_text"`
	// Params are the client's generation settings, as taken.
	Params *messages.GenParams `json:"params,omitempty"`
}

func rawRequest(req providers.Request) json.RawMessage {
	c := req.Context
	return mustJSON(requestSummary{
		Model:             req.Model,
		MaxOutputTokens:   req.MaxOutputTokens,
		PinnedFacts:       len(c.PinnedFacts),
		SummaryTokens:     textTokens(c.Summary),
		WindowMessages:    len(c.Window),
		PendingMessages:   len(c.Pending),
		PendingTurns:      len(pendingUsers(c)),
		RetrievedChunks:   len(c.Retrieved),
		ContinuationItems: len(c.Continuation),
		Tools:             len(c.Tools),
		UserText:          messageText(c.User),
		Params:            paramsOf(req.Params),
	})
}

func paramsOf(p messages.GenParams) *messages.GenParams {
	if p.IsZero() {
		return nil
	}
	return &p
}

// mustJSON encodes v, which holds only strings and numbers and so always
// encodes.
func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("local: encode %T: %v", v, err))
	}
	return data
}
