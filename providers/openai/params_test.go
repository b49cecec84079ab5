package openai_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// A schema whose properties are not in alphabetical order: they reach
// the upstream in the client's order.
const orderedSchema = `{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},"required":["zeta","alpha"],"additionalProperties":false}`

// The client's generation settings reach each API under its own names;
// those it has no place for are refused by name before anything is sent.
func TestParams(t *testing.T) {
	all := messages.GenParams{Temperature: new(0.3), TopP: new(0.9), FrequencyPenalty: new(0.1), PresencePenalty: new(0.2),
		Seed: new(int64(7)), LogitBias: map[string]float64{"50256": -100}, MaxOutputTokens: new(321), Stop: []string{"END"},
		ParallelToolCalls: new(false), ReasoningEffort: "low", Verbosity: "high",
		CacheControl: &messages.CacheControl{Type: messages.CacheEphemeral, TTL: "5m"}, // OpenAI caches by itself
		ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONSchema, Name: "answer", Description: "The answer",
			Schema: json.RawMessage(orderedSchema), Strict: new(true)}}
	tests := []struct {
		api    string
		params messages.GenParams
		want   map[string]string // field → its JSON as sent
	}{
		{openai.APIChat, all, map[string]string{"temperature": "0.3", "top_p": "0.9", "frequency_penalty": "0.1",
			"presence_penalty": "0.2", "seed": "7", "logit_bias": `{"50256":-100}`, "max_completion_tokens": "321",
			"stop": `["END"]`, "parallel_tool_calls": "false", "reasoning_effort": `"low"`, "verbosity": `"high"`,
			"response_format": `{"type":"json_schema","json_schema":{"name":"answer","description":"The answer","schema":` + orderedSchema + `,"strict":true}}`}},
		{openai.APIChat, messages.GenParams{ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONObject}},
			map[string]string{"response_format": `{"type":"json_object"}`}},
		{openai.APIChat, messages.GenParams{ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONSchema, Schema: json.RawMessage(`{"type":"object"}`)}},
			map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object"}}}`}},
		{openai.APIResponses, messages.GenParams{Temperature: new(0.3), TopP: new(0.9), MaxOutputTokens: new(321),
			ParallelToolCalls: new(false), ReasoningEffort: "high", Verbosity: "low", ResponseFormat: all.ResponseFormat},
			map[string]string{"temperature": "0.3", "top_p": "0.9", "max_output_tokens": "321", "parallel_tool_calls": "false",
				"reasoning": `{"effort":"high"}`,
				"text":      `{"format":{"type":"json_schema","name":"answer","description":"The answer","schema":` + orderedSchema + `,"strict":true},"verbosity":"low"}`}},
		{openai.APIResponses, messages.GenParams{ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONObject}},
			map[string]string{"text": `{"format":{"type":"json_object"}}`}},
	}
	for _, tt := range tests {
		req := basicRequest()
		withTools(&req)
		req.Params = tt.params
		req.MaxOutputTokens = *cmpOr(tt.params.MaxOutputTokens, new(req.MaxOutputTokens))
		req.ParallelToolCalls = tt.params.ParallelToolCalls == nil || *tt.params.ParallelToolCalls
		if refused := offline(tt.api).RefusedParams("m", tt.params); len(refused) > 0 {
			t.Errorf("%s: RefusedParams(%v) = %v, want none", tt.api, tt.params.Set(), refused)
		}
		_, body := sendOnce(t, tt.api, textReply(tt.api), req)
		for field, want := range tt.want {
			got, ok := body[field]
			if !ok {
				t.Errorf("%s: %s not sent; body %v", tt.api, field, body)
				continue
			}
			var w any
			if err := json.Unmarshal([]byte(want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("%s: %s = %s, want %s", tt.api, field, compact(t, got), want)
			}
		}
		// The schema's properties keep their order.
		if tt.params.ResponseFormat != nil && tt.params.ResponseFormat.Type == messages.FormatJSONSchema && tt.params.ResponseFormat.Name == "answer" {
			_, raw := onlyRawRequest(t, tt.api, req)
			if !strings.Contains(raw, `"properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}`) {
				t.Errorf("%s: the schema's properties were reordered: %s", tt.api, raw)
			}
		}
	}

	refusals := []struct {
		api  string
		want []string
	}{
		{openai.APIChat, []string{"top_k", "thinking", "cache_control"}},
		{openai.APIResponses, []string{"top_k", "frequency_penalty", "presence_penalty", "seed", "logit_bias", "stop", "thinking", "cache_control"}},
	}
	every := all
	every.TopK = new(40)
	every.CacheControl = &messages.CacheControl{Type: messages.CacheEphemeral, TTL: "1h"}
	every.Thinking = &messages.Thinking{Type: messages.ThinkingEnabled, BudgetTokens: 1024}
	for _, r := range refusals {
		var got []string
		for _, f := range offline(r.api).RefusedParams("m", every) {
			got = append(got, f.Field)
			if f.Why == "" {
				t.Errorf("%s: %s refused without a reason", r.api, f.Field)
			}
		}
		if !reflect.DeepEqual(got, r.want) {
			t.Errorf("%s: RefusedParams = %v, want %v", r.api, got, r.want)
		}
		if got := offline(r.api).RefusedParams("m", messages.GenParams{Thinking: &messages.Thinking{Type: messages.ThinkingDisabled}}); len(got) > 0 {
			t.Errorf("%s: thinking disabled refused: %v", r.api, got)
		}
	}
}

func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// onlyRawRequest sends req once and returns the raw body the server got.
func onlyRawRequest(t *testing.T, api string, req providers.Request) (fakeapi.Request, string) {
	t.Helper()
	srv := newServer(t, textReply(api))
	if _, _, err := run(t, provider(srv, api), req); err != nil {
		t.Fatal(err)
	}
	r, _ := onlyRequest(t, srv)
	return r, string(r.Body)
}

// offline is a provider of api that is never called.
func offline(api string) *openai.Provider {
	return openai.New(openai.Options{BaseURL: "http://127.0.0.1:1/v1", APIKey: "test-key", API: api})
}
