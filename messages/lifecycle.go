package messages

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrUnknownValue is returned when decoding text that names no value of an
// enum (Role, TurnPhase, OutcomeKind, ChunkType), and when encoding a value
// out of range, such as the zero value.
var ErrUnknownValue = errors.New("messages: unknown value")

// ErrInvalidOutcome is returned when decoding a StepOutcome without a kind.
var ErrInvalidOutcome = errors.New("messages: invalid step outcome")

// enum maps the values of an enum type to their names. Value 0 has no name
// and is invalid, so that a forgotten field does not pass for a value.
type enum[E ~uint8] struct {
	typ   string // names the type in errors: "turn phase"
	names []string
}

func (e enum[E]) valid(v E) bool { return v > 0 && int(v) < len(e.names) }

func (e enum[E]) String(v E) string {
	if e.valid(v) {
		return e.names[v]
	}
	return fmt.Sprintf("%s(%d)", e.typ, v)
}

func (e enum[E]) marshal(v E) ([]byte, error) {
	if !e.valid(v) {
		return nil, fmt.Errorf("%w: %s(%d)", ErrUnknownValue, e.typ, v)
	}
	return []byte(e.names[v]), nil
}

func (e enum[E]) unmarshal(v *E, text []byte) error {
	for i := 1; i < len(e.names); i++ {
		if e.names[i] == string(text) {
			*v = E(i)
			return nil
		}
	}
	return fmt.Errorf("%w: %s %q", ErrUnknownValue, e.typ, text)
}

// TurnPhase is where a user turn stands in its lifecycle (SRD §5.6). Phases
// are declared in the order a turn goes through them, so they compare with
// <; PhaseFailed comes last, after PhaseDone. The zero TurnPhase is
// invalid. It encodes as snake_case text: "response_finalized".
//
// The SRD's state machine (§6.1) has two phases more, ContextPrepared and
// Indexed, which no turn rests in here, so they are left out. The context
// is assembled inside the step that ResponseStarted records: marking it
// prepared would cost a durable write before the first token, and
// neither a reader nor recovery would tell the two apart (a turn
// interrupted before its response fails either way). Indexing (TX-C,
// TurnIndexed) is the turn's last step, so its row goes from
// StateCommitted straight to Done.
type TurnPhase uint8

// The turn phases, in order.
const (
	PhaseAccepted TurnPhase = iota + 1
	PhaseResponding
	PhaseResponseFinalized
	PhaseStateCommitted
	PhaseDone
	PhaseFailed
)

var turnPhases = enum[TurnPhase]{"turn phase", []string{
	PhaseAccepted:          "accepted",
	PhaseResponding:        "responding",
	PhaseResponseFinalized: "response_finalized",
	PhaseStateCommitted:    "state_committed",
	PhaseDone:              "done",
	PhaseFailed:            "failed",
}}

// String returns the text form of p, or "turn phase(N)" when p is invalid.
func (p TurnPhase) String() string { return turnPhases.String(p) }

// MarshalText encodes p; it fails with ErrUnknownValue when p is invalid.
func (p TurnPhase) MarshalText() ([]byte, error) { return turnPhases.marshal(p) }

// UnmarshalText decodes p; it fails with ErrUnknownValue naming the text
// when the text names no phase.
func (p *TurnPhase) UnmarshalText(text []byte) error { return turnPhases.unmarshal(p, text) }

// OutcomeKind is how a provider step ended. The zero OutcomeKind is
// invalid.
type OutcomeKind uint8

// The kinds of step outcome.
const (
	OutcomeCompleted OutcomeKind = iota + 1
	OutcomeIncomplete
	OutcomePaused
	OutcomeFailed
	OutcomeCancelled
)

var outcomeKinds = enum[OutcomeKind]{"step outcome", []string{
	OutcomeCompleted:  "completed",
	OutcomeIncomplete: "incomplete",
	OutcomePaused:     "paused",
	OutcomeFailed:     "failed",
	OutcomeCancelled:  "cancelled",
}}

// String returns the text form of k, or "step outcome(N)" when k is
// invalid.
func (k OutcomeKind) String() string { return outcomeKinds.String(k) }

// MarshalText encodes k; it fails with ErrUnknownValue when k is invalid.
func (k OutcomeKind) MarshalText() ([]byte, error) { return outcomeKinds.marshal(k) }

// UnmarshalText decodes k; it fails with ErrUnknownValue naming the text
// when the text names no kind.
func (k *OutcomeKind) UnmarshalText(text []byte) error { return outcomeKinds.unmarshal(k, text) }

// StepOutcome is how a provider step ended (SRD §5.7). Reason is set for
// OutcomeIncomplete and OutcomePaused, Code and Message for OutcomeFailed.
// Empty strings are left out of the JSON form:
//
//	{"kind":"failed","code":"overloaded","message":"try later"}
type StepOutcome struct {
	Kind    OutcomeKind `json:"kind"`
	Reason  string      `json:"reason,omitempty"`
	Code    string      `json:"code,omitempty"`
	Message string      `json:"message,omitempty"`
}

// UnmarshalJSON decodes o, whose kind is required; null leaves o alone.
func (o *StepOutcome) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	type plain StepOutcome
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOutcome, err)
	}
	if p.Kind == 0 {
		return fmt.Errorf("%w: field %q is required", ErrInvalidOutcome, "kind")
	}
	*o = StepOutcome(p)
	return nil
}

// The codes of a failed turn (TurnFailed.Code, and the Code of the
// StepOutcome it ends with): why it failed, one per cause a client may
// act on differently.
const (
	// FailContextTooLarge: the context does not fit the model's window,
	// even shrunk; the reason names the sections and the keys to change.
	FailContextTooLarge = "context_too_large"
	// FailProvider: the provider failed (a 5xx once retries ran out, a
	// dropped stream) or answered with an error the codes below do not
	// name.
	FailProvider = "provider_error"
	// FailProviderRateLimited: the provider rate limited the server's
	// key (its 429), after the runtime's retries if it said not when to
	// come back.
	FailProviderRateLimited = "provider_rate_limited"
	// FailProviderRejected: the provider refused the request's content
	// (its 400); the reason carries its message.
	FailProviderRejected = "provider_rejected"
	// FailProviderModelNotFound: the provider does not know the model
	// (its 404).
	FailProviderModelNotFound = "provider_model_not_found"
	// FailProviderAuth: the provider refused the server's own key for
	// it (its 401 or 403): the server's configuration is at fault, not
	// the client.
	FailProviderAuth = "provider_auth"
	// FailProviderOverloaded: the provider was overloaded (its 503 or
	// 529) through the runtime's retries.
	FailProviderOverloaded = "provider_overloaded"
	// FailProviderTimeout: the provider step outlasted
	// runtime.provider_timeout.
	FailProviderTimeout = "provider_timeout"
	// FailCancelled: the turn was cancelled before its response was
	// final.
	FailCancelled = "cancelled"
	// FailInterrupted: the runtime stopped or restarted, or the branch
	// failed, while the turn was in flight.
	FailInterrupted = "interrupted"
	// FailTurn: any other cause (redaction, the store, a tool call while
	// tools are disabled); the reason says which.
	FailTurn = "turn_failed"
)

// FailedOutcome is the outcome a turn that failed with code for reason
// ends with: kind OutcomeCancelled for FailCancelled, else OutcomeFailed,
// with Code (FailTurn when code is empty: a turn failed before codes were
// recorded) and Message reason. Unlike the zero StepOutcome it encodes.
func FailedOutcome(code, reason string) StepOutcome {
	if code == "" {
		code = FailTurn
	}
	kind := OutcomeFailed
	if code == FailCancelled {
		kind = OutcomeCancelled
	}
	return StepOutcome{Kind: kind, Code: code, Message: reason}
}

// ChunkType classifies a retrieval chunk (SRD §5.8). The zero ChunkType is
// invalid.
type ChunkType uint8

// The chunk types.
const (
	ChunkCode ChunkType = iota + 1
	ChunkExplanation
	ChunkDecision
	ChunkUserContext
	ChunkToolResult
	ChunkOther
)

var chunkTypes = enum[ChunkType]{"chunk type", []string{
	ChunkCode:        "code",
	ChunkExplanation: "explanation",
	ChunkDecision:    "decision",
	ChunkUserContext: "user_context",
	ChunkToolResult:  "tool_result",
	ChunkOther:       "other",
}}

// String returns the text form of t, or "chunk type(N)" when t is invalid.
func (t ChunkType) String() string { return chunkTypes.String(t) }

// MarshalText encodes t; it fails with ErrUnknownValue when t is invalid.
func (t ChunkType) MarshalText() ([]byte, error) { return chunkTypes.marshal(t) }

// UnmarshalText decodes t; it fails with ErrUnknownValue naming the text
// when the text names no chunk type.
func (t *ChunkType) UnmarshalText(text []byte) error { return chunkTypes.unmarshal(t, text) }
