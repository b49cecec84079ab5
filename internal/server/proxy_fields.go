package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// The top-level fields of each served API's request, and what the proxy
// does with each: read it itself (the messages, the tools, the stream…),
// send it to the upstream as a generation setting (messages.GenParams:
// each upstream's adapter sends it under its API's name, mapped there,
// or the request is refused naming it when the upstream cannot take it),
// accept it with nothing to send (a label, a hint the runtime answers
// itself), or refuse it. A field of none of the tables is refused: the
// proxy never drops a field it does not know. docs/PROVIDERS.md
// ("Request fields and upstreams") is the same tables, upstream by
// upstream.

// fieldRule is what the proxy does with a request field.
type fieldRule int

const (
	// fieldRead: the proxy reads it itself (model, messages, tools,
	// tool_choice, stream, the conversation's key…).
	fieldRead fieldRule = iota
	// fieldParam: a generation setting, sent upstream (GenParams).
	fieldParam
	// fieldAccepted: taken, with nothing to send upstream, for the
	// reason the docs give.
	fieldAccepted
	// fieldRefused: refused whatever its value (but null).
	fieldRefused
)

// proxyField is a top-level field of a request. refuse, if not nil,
// refuses some values of a field otherwise read or accepted: it says why
// raw (never null) cannot be honoured, or "".
type proxyField struct {
	name   string
	rule   fieldRule
	why    string // for fieldRefused: why
	refuse func(raw json.RawMessage) string
}

// The answers carry no log probabilities, so asking for them is refused.
const noLogprobs = "the proxy's answers carry no log probabilities"

// onlyValues refuses any value but those given (as JSON), saying why.
func onlyValues(why string, ok ...string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if slices.Contains(ok, string(compactJSON(raw))) {
			return ""
		}
		return why
	}
}

// compactJSON is raw without white space (nil when not JSON).
func compactJSON(raw json.RawMessage) []byte {
	out, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	return out
}

// chatFields are the fields of a Chat Completions request.
var chatFields = []proxyField{
	{name: "model", rule: fieldRead},
	{name: "messages", rule: fieldRead},
	{name: "tools", rule: fieldRead},
	{name: "tool_choice", rule: fieldRead},
	{name: "stream", rule: fieldRead},
	{name: "stream_options", rule: fieldRead},
	{name: "user", rule: fieldRead},
	{name: "metadata", rule: fieldRead},
	{name: "temperature", rule: fieldParam},
	{name: "top_p", rule: fieldParam},
	{name: "frequency_penalty", rule: fieldParam},
	{name: "presence_penalty", rule: fieldParam},
	{name: "seed", rule: fieldParam},
	{name: "logit_bias", rule: fieldParam},
	{name: "max_tokens", rule: fieldParam},
	{name: "max_completion_tokens", rule: fieldParam},
	{name: "stop", rule: fieldParam},
	{name: "response_format", rule: fieldParam},
	{name: "parallel_tool_calls", rule: fieldParam},
	{name: "reasoning_effort", rule: fieldParam},
	{name: "verbosity", rule: fieldParam},
	{name: "n", rule: fieldAccepted, refuse: onlyValues("the proxy answers one choice: n must be 1", "1")},
	{name: "logprobs", rule: fieldAccepted, refuse: onlyValues(noLogprobs, "false")},
	{name: "top_logprobs", rule: fieldAccepted, refuse: onlyValues(noLogprobs, "0")},
	{name: "modalities", rule: fieldAccepted, refuse: onlyValues(`the proxy answers text only: modalities must be ["text"]`, `["text"]`)},
	{name: "service_tier", rule: fieldAccepted, refuse: onlyValues("the server's upstream configuration chooses the service tier: only auto or default",
		`"auto"`, `"default"`)},
	{name: "store", rule: fieldAccepted},
	{name: "prompt_cache_key", rule: fieldAccepted},
	{name: "prompt_cache_retention", rule: fieldAccepted},
	{name: "safety_identifier", rule: fieldAccepted},
	{name: "audio", rule: fieldRefused, why: "the proxy answers text only"},
	{name: "functions", rule: fieldRefused, why: "the deprecated functions are not supported: send tools"},
	{name: "function_call", rule: fieldRefused, why: "the deprecated function_call is not supported: send tool_choice"},
	{name: "prediction", rule: fieldRefused, why: "predicted outputs are not supported"},
	{name: "web_search_options", rule: fieldRefused, why: "OpenAI's web search runs at OpenAI only"},
}

// responsesFields are the fields of a Responses request.
var responsesFields = []proxyField{
	{name: "model", rule: fieldRead},
	{name: "input", rule: fieldRead},
	{name: "instructions", rule: fieldRead},
	{name: "tools", rule: fieldRead},
	{name: "tool_choice", rule: fieldRead},
	{name: "stream", rule: fieldRead},
	{name: "stream_options", rule: fieldRead},
	{name: "previous_response_id", rule: fieldRead},
	{name: "conversation", rule: fieldRead},
	{name: "user", rule: fieldRead},
	{name: "metadata", rule: fieldRead},
	{name: "temperature", rule: fieldParam},
	{name: "top_p", rule: fieldParam},
	{name: "max_output_tokens", rule: fieldParam},
	{name: "parallel_tool_calls", rule: fieldParam},
	{name: "reasoning", rule: fieldParam},
	{name: "text", rule: fieldParam},
	{name: "top_logprobs", rule: fieldAccepted, refuse: onlyValues(noLogprobs, "0")},
	{name: "include", rule: fieldAccepted, refuse: func(raw json.RawMessage) string {
		var inc []string
		if json.Unmarshal(raw, &inc) == nil && slices.Contains(inc, "message.output_text.logprobs") {
			return noLogprobs
		}
		return ""
	}},
	{name: "background", rule: fieldAccepted, refuse: onlyValues("background responses are not supported", "false")},
	{name: "service_tier", rule: fieldAccepted, refuse: onlyValues("the server's upstream configuration chooses the service tier: only auto or default",
		`"auto"`, `"default"`)},
	{name: "store", rule: fieldRead},
	{name: "truncation", rule: fieldAccepted},
	{name: "max_tool_calls", rule: fieldAccepted},
	{name: "prompt_cache_key", rule: fieldAccepted},
	{name: "prompt_cache_retention", rule: fieldAccepted},
	{name: "safety_identifier", rule: fieldAccepted},
	{name: "prompt", rule: fieldRefused, why: "reusable prompts live at OpenAI: send instructions"},
	{name: "context_management", rule: fieldRefused, why: "the runtime manages the context itself"},
}

// anthropicFields are the fields of a Messages request.
var anthropicFields = []proxyField{
	{name: "model", rule: fieldRead},
	{name: "messages", rule: fieldRead},
	{name: "system", rule: fieldRead},
	{name: "tools", rule: fieldRead},
	{name: "tool_choice", rule: fieldRead},
	{name: "stream", rule: fieldRead},
	{name: "metadata", rule: fieldRead},
	{name: "max_tokens", rule: fieldParam},
	{name: "temperature", rule: fieldParam},
	{name: "top_p", rule: fieldParam},
	{name: "top_k", rule: fieldParam},
	{name: "stop_sequences", rule: fieldParam},
	{name: "thinking", rule: fieldParam},
	{name: "output_config", rule: fieldParam},
	{name: "output_format", rule: fieldParam},
	{name: "service_tier", rule: fieldAccepted},
	{name: "cache_control", rule: fieldParam},
	{name: "speed", rule: fieldAccepted, refuse: onlyValues("the server's upstream configuration chooses the speed: only standard", `"standard"`)},
	{name: "container", rule: fieldRefused, why: "Anthropic's containers (code execution) run at Anthropic only"},
	{name: "mcp_servers", rule: fieldRefused, why: "Anthropic's MCP connector runs at Anthropic only"},
	{name: "context_management", rule: fieldRefused, why: "the runtime manages the context itself"},
	{name: "inference_geo", rule: fieldRefused, why: "the server's upstream configuration chooses where the model runs"},
	{name: "diagnostics", rule: fieldRefused, why: "not supported"},
}

// decodeProxyRequest reads the body of a request to the API named apiName,
// whose top-level fields are fields, into v: a field of none of them, or
// refused (with a value that is not null), is a 400 naming it.
func decodeProxyRequest(r *http.Request, v any, apiName string, fields []proxyField) error {
	var raw json.RawMessage
	if err := decodeBody(r.Body, &raw, false, true); err != nil {
		if ae, ok := err.(*apiError); ok && ae.Code == api.CodeInvalid {
			return invalid("%s (a %s request)", ae.Message, apiName)
		}
		return err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return invalid("body: want a JSON object (a %s request)", apiName)
	}
	if err := checkFields(top, apiName, fields); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		if ae := classify(jsonError(err, v)); ae.Code == api.CodeInvalid {
			return invalid("%s (a %s request)", ae.Message, apiName)
		}
		return jsonError(err, v)
	}
	return nil
}

// checkFields refuses the fields of top that fields does not know, then
// those it refuses, naming each.
func checkFields(top map[string]json.RawMessage, apiName string, fields []proxyField) error {
	var unknown []string
	for name := range top {
		if !slices.ContainsFunc(fields, func(f proxyField) bool { return f.name == name }) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return invalid("%s: unknown field of a %s request: the proxy sends a field upstream, answers it itself, "+
			"or refuses it, and knows no such field", strings.Join(unknown, ", "), apiName)
	}
	for _, f := range fields {
		raw, ok := top[f.name]
		if !ok || string(raw) == "null" {
			continue
		}
		switch {
		case f.rule == fieldRefused:
			return invalid("%s: not supported by this proxy: %s", f.name, f.why)
		case f.refuse != nil:
			if why := f.refuse(raw); why != "" {
				return invalid("%s: %s is not supported: %s", f.name, compactJSON(raw), why)
			}
		}
	}
	return nil
}

// paramSource records, for each GenParams field a request set, the
// request's field it came from ("stop_sequences", "text.format"), to
// name it in errors.
type paramSource map[string]string

// paramsError is err (GenParams.Check's, or a *providers.ParamsError of
// the runtime's) in the request's words: each GenParams field named by
// the request's field it came from.
func (ps paramSource) paramsError(err error) error {
	var pe *providers.ParamsError
	if errors.As(err, &pe) {
		parts := make([]string, len(pe.Refused))
		for i, r := range pe.Refused {
			parts[i] = fmt.Sprintf("%s: the upstream model %s (%s) cannot take it: %s", ps.name(r.Field), pe.Model, pe.Provider, r.Why)
		}
		return invalid("%s", strings.Join(parts, "; "))
	}
	msg := err.Error()
	field, rest, _ := strings.Cut(msg, ":")
	head, tail := field, ""
	if i := strings.IndexAny(field, ".["); i >= 0 {
		head, tail = field[:i], field[i:]
	}
	return invalid("%s%s:%s", ps.name(head), tail, rest)
}

// name is the request's field that set GenParams field f.
func (ps paramSource) name(f string) string {
	if n, ok := ps[f]; ok {
		return n
	}
	return f
}

// checkParams checks p, set by the request's fields src, against the
// model the request runs on (model: a configured model's name, else the
// default model's; a conversation on another model is checked again when
// its turn is submitted), before anything is created: a 400 naming the
// request's fields the model cannot take.
func (s *Server) checkParams(model string, p messages.GenParams, src paramSource) error {
	if p.IsZero() {
		return nil
	}
	if err := p.Check(); err != nil {
		return src.paramsError(err)
	}
	if err := s.rt.CheckParams(s.proxyModel(model), p); err != nil {
		return src.paramsError(err)
	}
	return nil
}

// chatParamFields are the generation settings of a Chat Completions
// request.
type chatParamFields struct {
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	Seed                *int64             `json:"seed"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	Stop                json.RawMessage    `json:"stop"` // a string or an array of strings
	ResponseFormat      json.RawMessage    `json:"response_format"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls"`
	ReasoningEffort     *string            `json:"reasoning_effort"`
	Verbosity           *string            `json:"verbosity"`
}

// params maps f to GenParams, recording where each came from.
func (f *chatParamFields) params() (messages.GenParams, paramSource, error) {
	var p messages.GenParams
	src := paramSource{}
	p.Temperature, p.TopP, p.Seed = f.Temperature, f.TopP, f.Seed
	p.FrequencyPenalty, p.PresencePenalty, p.LogitBias = f.FrequencyPenalty, f.PresencePenalty, f.LogitBias
	p.ParallelToolCalls = f.ParallelToolCalls
	p.ReasoningEffort, p.Verbosity = deref(f.ReasoningEffort), deref(f.Verbosity)
	switch {
	case f.MaxTokens != nil && f.MaxCompletionTokens != nil && *f.MaxTokens != *f.MaxCompletionTokens:
		return p, src, invalid("max_tokens, max_completion_tokens: both set, to %d and %d: send one (max_completion_tokens)",
			*f.MaxTokens, *f.MaxCompletionTokens)
	case f.MaxCompletionTokens != nil:
		p.MaxOutputTokens, src["max_output_tokens"] = f.MaxCompletionTokens, "max_completion_tokens"
	case f.MaxTokens != nil:
		p.MaxOutputTokens, src["max_output_tokens"] = f.MaxTokens, "max_tokens"
	}
	stop, err := stopSequences(f.Stop, "stop")
	if err != nil {
		return p, src, err
	}
	p.Stop = stop
	if p.ResponseFormat, err = chatResponseFormat(f.ResponseFormat); err != nil {
		return p, src, err
	}
	return p, src, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// stopSequences reads a stop field: a string or an array of strings.
func stopSequences(raw json.RawMessage, field string) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var all []string
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, invalid("%s: want a string or an array of strings", field)
	}
	return all, nil
}

// chatResponseFormat reads Chat Completions' response_format: {"type":
// "text"}, {"type":"json_object"} or {"type":"json_schema","json_schema":
// {"name","description","schema","strict"}}.
func chatResponseFormat(raw json.RawMessage) (*messages.ResponseFormat, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, invalid("response_format: want an object with its type (text, json_object or json_schema)")
	}
	out := &messages.ResponseFormat{Type: f.Type}
	switch f.Type {
	case messages.FormatText, messages.FormatJSONObject:
	case messages.FormatJSONSchema:
		if f.JSONSchema == nil {
			return nil, invalid("response_format.json_schema: required with type json_schema")
		}
		js := f.JSONSchema
		if !isJSONObject(js.Schema) {
			return nil, invalid("response_format.json_schema.schema: required: a JSON Schema object")
		}
		out.Name, out.Description, out.Schema, out.Strict = js.Name, js.Description, js.Schema, js.Strict
	default:
		return nil, invalid("response_format.type: %q, want text, json_object or json_schema", f.Type)
	}
	return out, nil
}

// responsesParamFields are the generation settings of a Responses
// request.
type responsesParamFields struct {
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	MaxOutputTokens   *int            `json:"max_output_tokens"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Reasoning         json.RawMessage `json:"reasoning"`
	Text              json.RawMessage `json:"text"`
}

// params maps f to GenParams, recording where each came from.
func (f *responsesParamFields) params() (messages.GenParams, paramSource, error) {
	p := messages.GenParams{Temperature: f.Temperature, TopP: f.TopP, MaxOutputTokens: f.MaxOutputTokens,
		ParallelToolCalls: f.ParallelToolCalls}
	src := paramSource{}
	if len(f.Reasoning) > 0 && string(f.Reasoning) != "null" {
		var r struct {
			Effort          *string `json:"effort"`
			Summary         *string `json:"summary"`
			GenerateSummary *string `json:"generate_summary"`
		}
		if err := json.Unmarshal(f.Reasoning, &r); err != nil {
			return p, src, invalid("reasoning: want an object (effort, summary)")
		}
		if r.Summary != nil || r.GenerateSummary != nil {
			return p, src, invalid("reasoning.summary: not supported: the proxy's answers carry no reasoning items")
		}
		p.ReasoningEffort, src["reasoning_effort"] = deref(r.Effort), "reasoning.effort"
	}
	if len(f.Text) > 0 && string(f.Text) != "null" {
		var t struct {
			Format    json.RawMessage `json:"format"`
			Verbosity *string         `json:"verbosity"`
		}
		if err := json.Unmarshal(f.Text, &t); err != nil {
			return p, src, invalid("text: want an object (format, verbosity)")
		}
		p.Verbosity, src["verbosity"] = deref(t.Verbosity), "text.verbosity"
		rf, err := flatResponseFormat(t.Format, "text.format")
		if err != nil {
			return p, src, err
		}
		p.ResponseFormat, src["response_format"] = rf, "text.format"
	}
	return p, src, nil
}

// flatResponseFormat reads a format whose json_schema fields are at its
// top (Responses' text.format, Anthropic's output_config.format):
// {"type":"json_schema","name","description","schema","strict"}, or
// {"type":"text"} / {"type":"json_object"}.
func flatResponseFormat(raw json.RawMessage, field string) (*messages.ResponseFormat, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, invalid("%s: want an object with its type (text, json_object or json_schema)", field)
	}
	switch f.Type {
	case messages.FormatText, messages.FormatJSONObject:
		return &messages.ResponseFormat{Type: f.Type}, nil
	case messages.FormatJSONSchema:
		if !isJSONObject(f.Schema) {
			return nil, invalid("%s.schema: required: a JSON Schema object", field)
		}
		return &messages.ResponseFormat{Type: f.Type, Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}, nil
	}
	return nil, invalid("%s.type: %q, want text, json_object or json_schema", field, f.Type)
}

// anthropicParamFields are the generation settings of a Messages
// request (max_tokens, required, is read by parseAnthropic).
type anthropicParamFields struct {
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	StopSequences []string        `json:"stop_sequences"`
	Thinking      json.RawMessage `json:"thinking"`
	OutputConfig  json.RawMessage `json:"output_config"`
	OutputFormat  json.RawMessage `json:"output_format"` // the structured outputs beta's name of output_config.format
	CacheControl  json.RawMessage `json:"cache_control"`
}

// params maps f, and the request's max_tokens, to GenParams, recording
// where each came from.
func (f *anthropicParamFields) params(maxTokens *int64) (messages.GenParams, paramSource, error) {
	p := messages.GenParams{Temperature: f.Temperature, TopP: f.TopP, TopK: f.TopK, Stop: f.StopSequences}
	src := paramSource{"stop": "stop_sequences", "max_output_tokens": "max_tokens"}
	if maxTokens != nil {
		p.MaxOutputTokens = new(int(*maxTokens))
	}
	if len(f.Thinking) > 0 && string(f.Thinking) != "null" {
		var t messages.Thinking
		if err := json.Unmarshal(f.Thinking, &t); err != nil {
			return p, src, invalid("thinking: want an object (type, budget_tokens, display)")
		}
		p.Thinking = &t
	}
	if len(f.OutputConfig) > 0 && string(f.OutputConfig) != "null" {
		var oc struct {
			Effort *string         `json:"effort"`
			Format json.RawMessage `json:"format"`
		}
		if err := json.Unmarshal(f.OutputConfig, &oc); err != nil {
			return p, src, invalid("output_config: want an object (effort, format)")
		}
		p.ReasoningEffort, src["reasoning_effort"] = deref(oc.Effort), "output_config.effort"
		rf, err := flatResponseFormat(oc.Format, "output_config.format")
		if err != nil {
			return p, src, err
		}
		p.ResponseFormat, src["response_format"] = rf, "output_config.format"
	}
	if len(f.OutputFormat) > 0 && string(f.OutputFormat) != "null" {
		if p.ResponseFormat != nil {
			return p, src, invalid("output_format: and output_config.format both set: send one (output_config.format)")
		}
		rf, err := flatResponseFormat(f.OutputFormat, "output_format")
		if err != nil {
			return p, src, err
		}
		p.ResponseFormat, src["response_format"] = rf, "output_format"
	}
	return p, src, nil
}

// anthropicCacheControl is the prompt caching a Messages request asks
// for: its cache_control, at the top level or on any block of its
// system prompt, tools or messages (a tool result's content included),
// the longest ttl of them; nil when it has none. The runtime lays the
// prompt out itself and places its breakpoints at the ends of the
// prompt's stable parts, with that ttl (GenParams.CacheControl). where
// is the first field that set it. A cache_control that is not
// {"type":"ephemeral"} with a ttl of 5m, 1h or none is refused, naming
// it.
func anthropicCacheControl(req *anthropicRequest) (cc *messages.CacheControl, where string, err error) {
	take := func(raw json.RawMessage, field string) error {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		var c messages.CacheControl
		if json.Unmarshal(raw, &c) != nil {
			return invalid("%s: want an object (type ephemeral, ttl 5m or 1h)", field)
		}
		if err := (messages.GenParams{CacheControl: &c}).Check(); err != nil {
			_, why, _ := strings.Cut(err.Error(), ".")
			return invalid("%s.%s", field, why)
		}
		switch {
		case cc == nil:
			cc, where = &c, field
		case c.TTL == "1h" && cc.TTL != "1h":
			cc.TTL = "1h"
		}
		return nil
	}
	// blocks takes the cache_control of each block of a content (a
	// string has none), and of the blocks of a tool result's content.
	var blocks func(raw json.RawMessage, field string) error
	blocks = func(raw json.RawMessage, field string) error {
		var list []struct {
			CacheControl json.RawMessage `json:"cache_control"`
			Content      json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &list) != nil {
			return nil // a string, or a shape the request's parsing refuses
		}
		for i, b := range list {
			at := fmt.Sprintf("%s[%d]", field, i)
			if err := take(b.CacheControl, at+".cache_control"); err != nil {
				return err
			}
			if err := blocks(b.Content, at+".content"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := take(req.CacheControl, "cache_control"); err != nil {
		return nil, "", err
	}
	if err := blocks(req.System, "system"); err != nil {
		return nil, "", err
	}
	for i, t := range req.Tools {
		if err := take(t.CacheControl, fmt.Sprintf("tools[%d].cache_control", i)); err != nil {
			return nil, "", err
		}
	}
	for i, m := range req.Messages {
		if err := blocks(m.Content, fmt.Sprintf("messages[%d].content", i)); err != nil {
			return nil, "", err
		}
	}
	return cc, where, nil
}
