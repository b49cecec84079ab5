package messages

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestGenParamsCheck(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		p    GenParams
		want string // "" for valid
	}{
		{GenParams{}, ""},
		{GenParams{MaxOutputTokens: new(1), Stop: []string{"a"}, TopK: new(1)}, ""},
		{GenParams{ResponseFormat: &ResponseFormat{Type: FormatJSONSchema, Schema: schema}}, ""},
		{GenParams{Thinking: &Thinking{Type: ThinkingEnabled, BudgetTokens: 1024}}, ""},
		{GenParams{MaxOutputTokens: new(0)}, "max_output_tokens: 0, want at least 1"},
		{GenParams{TopK: new(0)}, "top_k: 0, want at least 1"},
		{GenParams{Stop: make([]string, MaxStopSequences+1)}, "stop: 17 sequences, limit 16"},
		{GenParams{Stop: []string{"a", ""}}, "stop[1]: empty"},
		{GenParams{ResponseFormat: &ResponseFormat{Type: "xml"}}, `response_format.type: "xml"`},
		{GenParams{ResponseFormat: &ResponseFormat{Type: FormatJSONSchema}}, "response_format.schema: required"},
		{GenParams{ResponseFormat: &ResponseFormat{Type: FormatJSONObject, Schema: schema}}, "response_format.schema: only with type json_schema"},
		{GenParams{Thinking: &Thinking{Type: ThinkingEnabled}}, "thinking.budget_tokens: 0, want at least 1"},
		{GenParams{Thinking: &Thinking{Type: ThinkingDisabled, BudgetTokens: 5}}, "thinking.budget_tokens: only with type enabled"},
		{GenParams{Thinking: &Thinking{Type: "on"}}, `thinking.type: "on"`},
		{GenParams{CacheControl: &CacheControl{Type: CacheEphemeral, TTL: "1h"}}, ""},
		{GenParams{CacheControl: &CacheControl{Type: "persistent"}}, `cache_control.type: "persistent", want ephemeral`},
		{GenParams{CacheControl: &CacheControl{Type: CacheEphemeral, TTL: "2h"}}, `cache_control.ttl: "2h", want 5m or 1h`},
	}
	for _, tt := range tests {
		err := tt.p.Check()
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%v) = %v, want %q", tt.p.Set(), err, tt.want)
		}
	}
}

func TestGenParamsClone(t *testing.T) {
	t.Parallel()
	p := GenParams{Temperature: new(0.5), TopP: new(1.0), TopK: new(3), FrequencyPenalty: new(0.1), PresencePenalty: new(0.2),
		Seed: new(int64(9)), LogitBias: map[string]float64{"1": 2}, MaxOutputTokens: new(10), Stop: []string{"x"},
		ResponseFormat:    &ResponseFormat{Type: FormatJSONSchema, Schema: json.RawMessage(`{}`), Strict: new(true)},
		ParallelToolCalls: new(true), ReasoningEffort: "low", Thinking: &Thinking{Type: ThinkingAdaptive}, Verbosity: "low",
		CacheControl: &CacheControl{Type: CacheEphemeral, TTL: "1h"}}
	if got := len(p.Set()); got != reflect.TypeFor[GenParams]().NumField() {
		t.Fatalf("Set() names %d fields, the struct has %d: a field is missing from Set", got, reflect.TypeFor[GenParams]().NumField())
	}
	c := p.Clone()
	if !reflect.DeepEqual(c, p) {
		t.Fatalf("Clone() = %+v, want %+v", c, p)
	}
	*c.Temperature, c.Stop[0], c.ResponseFormat.Schema[0], c.LogitBias["1"], c.Thinking.Type = 0, "y", '[', 0, ""
	*c.ResponseFormat.Strict = false
	c.CacheControl.TTL = "5m"
	if p.CacheControl.TTL != "1h" {
		t.Fatalf("the clone shares the cache control with p: %+v", p.CacheControl)
	}
	if p.Temperature == c.Temperature || p.Stop[0] != "x" || p.ResponseFormat.Schema[0] != '{' || p.LogitBias["1"] != 2 ||
		p.Thinking.Type != ThinkingAdaptive || !*p.ResponseFormat.Strict {
		t.Fatalf("the clone shares memory with p: %+v", p)
	}
	if !(GenParams{}).IsZero() || p.IsZero() {
		t.Fatal("IsZero")
	}
}
