package messages

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// textEnum is the interface shared by the enums.
type textEnum interface {
	String() string
	MarshalText() ([]byte, error)
}

func TestEnumText(t *testing.T) {
	tests := []struct {
		v    textEnum
		text string
	}{
		{RoleUser, "user"},
		{RoleAssistant, "assistant"},
		{PhaseAccepted, "accepted"},
		{PhaseResponding, "responding"},
		{PhaseResponseFinalized, "response_finalized"},
		{PhaseStateCommitted, "state_committed"},
		{PhaseDone, "done"},
		{PhaseFailed, "failed"},
		{OutcomeCompleted, "completed"},
		{OutcomeIncomplete, "incomplete"},
		{OutcomePaused, "paused"},
		{OutcomeFailed, "failed"},
		{OutcomeCancelled, "cancelled"},
		{ChunkCode, "code"},
		{ChunkExplanation, "explanation"},
		{ChunkDecision, "decision"},
		{ChunkUserContext, "user_context"},
		{ChunkToolResult, "tool_result"},
		{ChunkOther, "other"},
	}
	for _, tc := range tests {
		got, err := json.Marshal(tc.v)
		if want := `"` + tc.text + `"`; err != nil || string(got) != want {
			t.Errorf("json.Marshal(%v) = %s, %v, want %s", tc.v, got, err, want)
		}
		if s := tc.v.String(); s != tc.text {
			t.Errorf("String() = %q, want %q", s, tc.text)
		}
		back := reflect.New(reflect.TypeOf(tc.v))
		if err := json.Unmarshal(got, back.Interface()); err != nil || back.Elem().Interface() != tc.v {
			t.Errorf("json.Unmarshal(%s) = %v, %v, want %v", got, back.Elem(), err, tc.v)
		}
	}
}

func TestEnumErrors(t *testing.T) {
	var (
		r Role
		p TurnPhase
		k OutcomeKind
		c ChunkType
	)
	tests := []struct {
		v    interface{ UnmarshalText([]byte) error }
		text string
		want string
	}{
		{&r, "system", `messages: unknown value: role "system"`},
		{&r, "", `messages: unknown value: role ""`},
		{&p, "Accepted", `messages: unknown value: turn phase "Accepted"`},
		{&k, "timeout", `messages: unknown value: step outcome "timeout"`},
		{&c, "prose", `messages: unknown value: chunk type "prose"`},
	}
	for _, tc := range tests {
		if err := tc.v.UnmarshalText([]byte(tc.text)); !errors.Is(err, ErrUnknownValue) || err.Error() != tc.want {
			t.Errorf("UnmarshalText(%q) = %v, want %s", tc.text, err, tc.want)
		}
	}
	for _, v := range []textEnum{Role(0), Role(3), TurnPhase(0), TurnPhase(9), OutcomeKind(0), ChunkType(7)} {
		if got, err := v.MarshalText(); !errors.Is(err, ErrUnknownValue) {
			t.Errorf("MarshalText(%v) = %q, %v, want ErrUnknownValue", v, got, err)
		}
	}
	if got, want := TurnPhase(9).String(), "turn phase(9)"; got != want {
		t.Errorf("TurnPhase(9).String() = %q, want %q", got, want)
	}
}

func TestTurnPhaseOrder(t *testing.T) {
	order := []TurnPhase{PhaseAccepted, PhaseResponding, PhaseResponseFinalized,
		PhaseStateCommitted, PhaseDone, PhaseFailed}
	for i := 1; i < len(order); i++ {
		if !(order[i-1] < order[i]) {
			t.Errorf("%v < %v = false, want true", order[i-1], order[i])
		}
	}
}

func TestStepOutcomeJSON(t *testing.T) {
	tests := []struct {
		o    StepOutcome
		json string
	}{
		{StepOutcome{Kind: OutcomeCompleted}, `{"kind":"completed"}`},
		{StepOutcome{Kind: OutcomeIncomplete, Reason: "max_output_tokens"}, `{"kind":"incomplete","reason":"max_output_tokens"}`},
		{StepOutcome{Kind: OutcomePaused, Reason: "pause_turn"}, `{"kind":"paused","reason":"pause_turn"}`},
		{StepOutcome{Kind: OutcomeFailed, Code: "overloaded_error", Message: "Overloaded"}, `{"kind":"failed","code":"overloaded_error","message":"Overloaded"}`},
		{StepOutcome{Kind: OutcomeCancelled}, `{"kind":"cancelled"}`},
	}
	for _, tc := range tests {
		got, err := json.Marshal(tc.o)
		if err != nil || string(got) != tc.json {
			t.Errorf("json.Marshal(%+v) = %s, %v, want %s", tc.o, got, err, tc.json)
		}
		var back StepOutcome
		if err := json.Unmarshal(got, &back); err != nil || back != tc.o {
			t.Errorf("json.Unmarshal(%s) = %+v, %v, want %+v", got, back, err, tc.o)
		}
	}
	errTests := []struct {
		in   string
		want string
		is   error
	}{
		{`{"reason":"x"}`, `messages: invalid step outcome: field "kind" is required`, ErrInvalidOutcome},
		{`{"kind":"timeout"}`, `step outcome "timeout"`, ErrUnknownValue},
		{`{"kind":"failed","code":7}`, `messages: invalid step outcome`, ErrInvalidOutcome},
	}
	for _, tc := range errTests {
		var o StepOutcome
		if err := json.Unmarshal([]byte(tc.in), &o); !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("json.Unmarshal(%s) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
	if _, err := json.Marshal(StepOutcome{}); !errors.Is(err, ErrUnknownValue) {
		t.Errorf("json.Marshal(StepOutcome{}) = %v, want ErrUnknownValue", err)
	}
}

// TestFailedOutcome checks that the outcome of a failed turn, whatever
// its code, encodes (the zero StepOutcome does not) and names its kind
// as text that decodes: it is what the turn's row and stream carry.
func TestFailedOutcome(t *testing.T) {
	tests := []struct {
		code, reason string
		want         StepOutcome
	}{
		{FailContextTooLarge, "context too large", StepOutcome{Kind: OutcomeFailed, Code: FailContextTooLarge, Message: "context too large"}},
		{FailProvider, "openai: 401", StepOutcome{Kind: OutcomeFailed, Code: FailProvider, Message: "openai: 401"}},
		{FailProviderTimeout, "timed out", StepOutcome{Kind: OutcomeFailed, Code: FailProviderTimeout, Message: "timed out"}},
		{FailCancelled, "cancelled", StepOutcome{Kind: OutcomeCancelled, Code: FailCancelled, Message: "cancelled"}},
		{FailInterrupted, "interrupted", StepOutcome{Kind: OutcomeFailed, Code: FailInterrupted, Message: "interrupted"}},
		{FailTurn, "redact: no", StepOutcome{Kind: OutcomeFailed, Code: FailTurn, Message: "redact: no"}},
		{"", "an old failure", StepOutcome{Kind: OutcomeFailed, Code: FailTurn, Message: "an old failure"}},
	}
	for _, tc := range tests {
		got := FailedOutcome(tc.code, tc.reason)
		if got != tc.want {
			t.Errorf("FailedOutcome(%q, %q) = %+v, want %+v", tc.code, tc.reason, got, tc.want)
		}
		data, err := json.Marshal(got)
		if err != nil {
			t.Errorf("json.Marshal(FailedOutcome(%q)) = %v", tc.code, err)
			continue
		}
		var back StepOutcome
		if err := json.Unmarshal(data, &back); err != nil || back != got {
			t.Errorf("json.Unmarshal(%s) = %+v, %v, want %+v", data, back, err, got)
		}
		text, err := got.Kind.MarshalText()
		var k OutcomeKind
		if err != nil || k.UnmarshalText(text) != nil || k != got.Kind {
			t.Errorf("FailedOutcome(%q).Kind as text = %q, %v; decodes to %v", tc.code, text, err, k)
		}
	}
}
