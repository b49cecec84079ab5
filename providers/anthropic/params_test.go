package anthropic_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
)

const orderedSchema = `{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},"required":["zeta","alpha"],"additionalProperties":false}`

// The client's generation settings reach the Messages API under its
// names (stop as stop_sequences, a json_schema format and the effort in
// output_config); those it has no place for are refused by name.
func TestParams(t *testing.T) {
	tests := []struct {
		params messages.GenParams
		want   map[string]string // field → its JSON as sent
	}{
		{messages.GenParams{Temperature: new(0.3), TopP: new(0.9), TopK: new(40), Stop: []string{"END", "STOP"},
			Thinking: &messages.Thinking{Type: messages.ThinkingEnabled, BudgetTokens: 2048}, ReasoningEffort: "high",
			ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONSchema, Name: "answer", Schema: json.RawMessage(orderedSchema), Strict: new(true)}},
			map[string]string{"temperature": "0.3", "top_p": "0.9", "top_k": "40", "stop_sequences": `["END","STOP"]`,
				"thinking":      `{"type":"enabled","budget_tokens":2048}`,
				"output_config": `{"effort":"high","format":{"type":"json_schema","schema":` + orderedSchema + `}}`}},
		{messages.GenParams{Thinking: &messages.Thinking{Type: messages.ThinkingAdaptive, Display: "omitted"}},
			map[string]string{"thinking": `{"type":"adaptive","display":"omitted"}`}},
		{messages.GenParams{Thinking: &messages.Thinking{Type: messages.ThinkingDisabled}},
			map[string]string{"thinking": `{"type":"disabled"}`}},
	}
	for _, tt := range tests {
		s := newServer(t, fakeapi.AnthropicText([]string{"ok"}, "end_turn"))
		req := basicRequest()
		req.Params = tt.params
		if refused := newProvider(s.URL).RefusedParams("m", tt.params); len(refused) > 0 {
			t.Errorf("RefusedParams(%v) = %v, want none", tt.params.Set(), refused)
		}
		if _, _, err := run(t, s, req); err != nil {
			t.Fatalf("%v: Stream: %v", tt.params.Set(), err)
		}
		b := body(t, s)
		for field, want := range tt.want {
			var w any
			if err := json.Unmarshal([]byte(want), &w); err != nil {
				t.Fatal(err)
			}
			if got, ok := b[field]; !ok || !reflect.DeepEqual(got, w) {
				got, _ := json.Marshal(got)
				t.Errorf("%v: %s = %s, want %s", tt.params.Set(), field, got, want)
			}
		}
		if tt.params.ResponseFormat != nil && !strings.Contains(string(s.Requests()[0].Body), `"properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}`) {
			t.Errorf("the schema's properties were reordered: %s", s.Requests()[0].Body)
		}
	}

	every := messages.GenParams{Temperature: new(0.3), FrequencyPenalty: new(0.1), PresencePenalty: new(0.2), Seed: new(int64(1)),
		LogitBias: map[string]float64{"1": 1}, ReasoningEffort: "minimal", Verbosity: "low",
		ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONObject}}
	var got []string
	for _, r := range newProvider("http://127.0.0.1:1").RefusedParams("m", every) {
		got = append(got, r.Field)
	}
	want := []string{"frequency_penalty", "presence_penalty", "seed", "logit_bias", "response_format", "reasoning_effort", "verbosity"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RefusedParams = %v, want %v", got, want)
	}
}
