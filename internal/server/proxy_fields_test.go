package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	anthropicprovider "github.com/contextinfinity/ctxinf/providers/anthropic"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// fieldCase is a request of a served API (chat, responses or messages)
// that sets body's fields on a minimal request (one user message, $M,
// unique to the case), answered by a runtime whose model is upstream
// (chat, responses or anthropic): either the upstream request carries
// sent (a path of its JSON body → the JSON there, or "~text": its JSON
// holds text) and not absent, or the request is refused with a 400 whose
// message starts with refused, and nothing is created.
type fieldCase struct {
	api, upstream string
	field         string // the top-level field the case shows
	body          string
	sent          map[string]string
	absent        []string
	refused       string
}

const weatherTool = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
const weatherToolResponses = `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
const weatherToolAnthropic = `"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`

// A schema whose properties are not in alphabetical order, as LangChain
// sends a zod schema.
const fieldSchema = `{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"],"additionalProperties":false}`

var fieldCases = []fieldCase{
	// Chat Completions, answered by a Chat Completions upstream.
	{api: "chat", upstream: "chat", field: "model", body: `"model":"gpt-unknown"`, sent: map[string]string{"model": `"model-e2e"`}},
	{api: "chat", upstream: "chat", field: "messages", body: `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"$M"}]`,
		sent: map[string]string{"messages.0.content": "~Be brief.", "messages.-1.content": `"$M"`}},
	{api: "chat", upstream: "chat", field: "tools", body: weatherTool, sent: map[string]string{"tools.-1.function.name": `"get_weather"`}},
	{api: "chat", upstream: "chat", field: "tool_choice", body: weatherTool + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`,
		sent: map[string]string{"tool_choice": `{"type":"function","function":{"name":"get_weather"}}`}},
	{api: "chat", upstream: "chat", field: "tool_choice", body: weatherTool + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}`,
		refused: "tool_choice.type"},
	{api: "chat", upstream: "chat", field: "stream", body: `"stream":true`, sent: map[string]string{"stream": "true"}},
	{api: "chat", upstream: "chat", field: "stream_options", body: `"stream":true,"stream_options":{"include_usage":true}`,
		sent: map[string]string{"stream_options": `{"include_usage":true}`}},
	{api: "chat", upstream: "chat", field: "user", body: `"user":"alice"`, absent: []string{"user"}},
	{api: "chat", upstream: "chat", field: "metadata", body: `"metadata":{"conversation":"conv-$M"}`, absent: []string{"metadata"}},
	{api: "chat", upstream: "chat", field: "temperature", body: `"temperature":0.3`, sent: map[string]string{"temperature": "0.3"}},
	{api: "chat", upstream: "chat", field: "top_p", body: `"top_p":0.9`, sent: map[string]string{"top_p": "0.9"}},
	{api: "chat", upstream: "chat", field: "frequency_penalty", body: `"frequency_penalty":0.5`, sent: map[string]string{"frequency_penalty": "0.5"}},
	{api: "chat", upstream: "chat", field: "presence_penalty", body: `"presence_penalty":-0.5`, sent: map[string]string{"presence_penalty": "-0.5"}},
	{api: "chat", upstream: "chat", field: "seed", body: `"seed":42`, sent: map[string]string{"seed": "42"}},
	{api: "chat", upstream: "chat", field: "logit_bias", body: `"logit_bias":{"50256":-100}`, sent: map[string]string{"logit_bias": `{"50256":-100}`}},
	{api: "chat", upstream: "chat", field: "max_tokens", body: `"max_tokens":123`, sent: map[string]string{"max_completion_tokens": "123"}},
	{api: "chat", upstream: "chat", field: "max_completion_tokens", body: `"max_completion_tokens":321`, sent: map[string]string{"max_completion_tokens": "321"}},
	{api: "chat", upstream: "chat", field: "max_completion_tokens", body: `"max_tokens":5,"max_completion_tokens":6`, refused: "max_tokens, max_completion_tokens"},
	{api: "chat", upstream: "chat", field: "max_tokens", body: `"max_tokens":0`, refused: "max_tokens: 0, want at least 1"},
	{api: "chat", upstream: "chat", field: "stop", body: `"stop":"END"`, sent: map[string]string{"stop": `["END"]`}},
	{api: "chat", upstream: "chat", field: "stop", body: `"stop":["END",""]`, refused: "stop[1]: empty"},
	{api: "chat", upstream: "chat", field: "response_format",
		body: `"response_format":{"type":"json_schema","json_schema":{"name":"weather_report","schema":` + fieldSchema + `,"strict":true}}`,
		sent: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"weather_report","schema":` + fieldSchema + `,"strict":true}}`}},
	{api: "chat", upstream: "chat", field: "response_format", body: `"response_format":{"type":"json_object"}`,
		sent: map[string]string{"response_format": `{"type":"json_object"}`}},
	{api: "chat", upstream: "chat", field: "response_format", body: `"response_format":{"type":"xml"}`, refused: "response_format.type"},
	{api: "chat", upstream: "chat", field: "parallel_tool_calls", body: weatherTool + `,"parallel_tool_calls":false`,
		sent: map[string]string{"parallel_tool_calls": "false"}},
	{api: "chat", upstream: "chat", field: "reasoning_effort", body: `"reasoning_effort":"low"`, sent: map[string]string{"reasoning_effort": `"low"`}},
	{api: "chat", upstream: "chat", field: "verbosity", body: `"verbosity":"high"`, sent: map[string]string{"verbosity": `"high"`}},
	{api: "chat", upstream: "chat", field: "n", body: `"n":1`, absent: []string{"n"}},
	{api: "chat", upstream: "chat", field: "n", body: `"n":2`, refused: "n: 2 is not supported"},
	{api: "chat", upstream: "chat", field: "logprobs", body: `"logprobs":false`, absent: []string{"logprobs"}},
	{api: "chat", upstream: "chat", field: "logprobs", body: `"logprobs":true`, refused: "logprobs: true is not supported"},
	{api: "chat", upstream: "chat", field: "top_logprobs", body: `"top_logprobs":3`, refused: "top_logprobs: 3 is not supported"},
	{api: "chat", upstream: "chat", field: "modalities", body: `"modalities":["text"]`, absent: []string{"modalities"}},
	{api: "chat", upstream: "chat", field: "modalities", body: `"modalities":["text","audio"]`, refused: "modalities"},
	{api: "chat", upstream: "chat", field: "service_tier", body: `"service_tier":"auto"`, absent: []string{"service_tier"}},
	{api: "chat", upstream: "chat", field: "service_tier", body: `"service_tier":"flex"`, refused: "service_tier"},
	{api: "chat", upstream: "chat", field: "store", body: `"store":true`, absent: []string{"store"}},
	{api: "chat", upstream: "chat", field: "prompt_cache_key", body: `"prompt_cache_key":"k"`, absent: []string{"prompt_cache_key"}},
	{api: "chat", upstream: "chat", field: "prompt_cache_retention", body: `"prompt_cache_retention":"24h"`, absent: []string{"prompt_cache_retention"}},
	{api: "chat", upstream: "chat", field: "safety_identifier", body: `"safety_identifier":"u1"`, absent: []string{"safety_identifier"}},
	{api: "chat", upstream: "chat", field: "audio", body: `"audio":{"voice":"alloy","format":"mp3"}`, refused: "audio: not supported"},
	{api: "chat", upstream: "chat", field: "functions", body: `"functions":[{"name":"f"}]`, refused: "functions: not supported"},
	{api: "chat", upstream: "chat", field: "function_call", body: `"function_call":"auto"`, refused: "function_call: not supported"},
	{api: "chat", upstream: "chat", field: "prediction", body: `"prediction":{"type":"content","content":"x"}`, refused: "prediction: not supported"},
	{api: "chat", upstream: "chat", field: "web_search_options", body: `"web_search_options":{}`, refused: "web_search_options: not supported"},
	{api: "chat", upstream: "chat", field: "(unknown)", body: `"temprature":0.3,"frobnicate":1`, refused: "frobnicate, temprature: unknown field"},
	{api: "chat", upstream: "chat", field: "(null)", body: `"audio":null,"seed":null,"n":null`, absent: []string{"seed", "audio", "n"}},

	// Chat Completions, answered by other upstreams: mapped or refused.
	{api: "chat", upstream: "responses", field: "max_tokens", body: `"max_tokens":77`, sent: map[string]string{"max_output_tokens": "77"}},
	{api: "chat", upstream: "responses", field: "response_format",
		body: `"response_format":{"type":"json_schema","json_schema":{"name":"weather_report","schema":` + fieldSchema + `}}`,
		sent: map[string]string{"text": `{"format":{"type":"json_schema","name":"weather_report","schema":` + fieldSchema + `}}`}},
	{api: "chat", upstream: "responses", field: "reasoning_effort", body: `"reasoning_effort":"high"`, sent: map[string]string{"reasoning": `{"effort":"high"}`}},
	{api: "chat", upstream: "responses", field: "stop", body: `"stop":["END"]`, refused: "stop: the upstream model model-e2e (openai) cannot take it"},
	{api: "chat", upstream: "responses", field: "seed", body: `"seed":1`, refused: "seed: the upstream model"},
	{api: "chat", upstream: "anthropic", field: "stop", body: `"stop":["END"]`, sent: map[string]string{"stop_sequences": `["END"]`}},
	{api: "chat", upstream: "anthropic", field: "max_completion_tokens", body: `"max_completion_tokens":99`, sent: map[string]string{"max_tokens": "99"}},
	{api: "chat", upstream: "anthropic", field: "temperature", body: `"temperature":0.2`, sent: map[string]string{"temperature": "0.2"}},
	{api: "chat", upstream: "anthropic", field: "response_format",
		body: `"response_format":{"type":"json_schema","json_schema":{"name":"weather_report","schema":` + fieldSchema + `}}`,
		sent: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":` + fieldSchema + `}}`}},
	{api: "chat", upstream: "anthropic", field: "response_format", body: `"response_format":{"type":"json_object"}`,
		refused: "response_format: the upstream model claude-upstream (anthropic) cannot take it"},
	{api: "chat", upstream: "anthropic", field: "reasoning_effort", body: `"reasoning_effort":"medium"`,
		sent: map[string]string{"output_config": `{"effort":"medium"}`}},
	{api: "chat", upstream: "anthropic", field: "parallel_tool_calls", body: weatherTool + `,"parallel_tool_calls":true`,
		sent: map[string]string{"tool_choice": `{"type":"auto","disable_parallel_tool_use":false}`}},
	{api: "chat", upstream: "anthropic", field: "seed", body: `"seed":1`, refused: "seed: the upstream model"},
	{api: "chat", upstream: "anthropic", field: "frequency_penalty", body: `"frequency_penalty":1`, refused: "frequency_penalty: the upstream model"},

	// Responses, answered by a Responses upstream.
	{api: "responses", upstream: "responses", field: "model", body: `"model":"gpt-unknown"`, sent: map[string]string{"model": `"model-e2e"`}},
	{api: "responses", upstream: "responses", field: "input", body: `"input":[{"role":"user","content":[{"type":"input_text","text":"$M"}]}]`,
		sent: map[string]string{"input.-1.content.0.text": `"$M"`}},
	{api: "responses", upstream: "responses", field: "instructions", body: `"instructions":"Be brief."`, sent: map[string]string{"instructions": "~Be brief."}},
	{api: "responses", upstream: "responses", field: "tools", body: weatherToolResponses, sent: map[string]string{"tools.-1.name": `"get_weather"`}},
	{api: "responses", upstream: "responses", field: "tool_choice", body: weatherToolResponses + `,"tool_choice":"required"`,
		sent: map[string]string{"tool_choice": `"required"`}},
	{api: "responses", upstream: "responses", field: "stream", body: `"stream":true`, sent: map[string]string{"stream": "true"}},
	{api: "responses", upstream: "responses", field: "stream_options", body: `"stream":true,"stream_options":{"include_obfuscation":false}`,
		absent: []string{"stream_options"}},
	{api: "responses", upstream: "responses", field: "previous_response_id", body: `"previous_response_id":"resp_nope"`,
		refused: "previous_response_id"},
	{api: "responses", upstream: "responses", field: "conversation", body: `"conversation":"conv-$M"`, absent: []string{"conversation"}},
	{api: "responses", upstream: "responses", field: "user", body: `"user":"alice"`, absent: []string{"user"}},
	{api: "responses", upstream: "responses", field: "metadata", body: `"metadata":{"app":"x"}`, absent: []string{"metadata"}},
	{api: "responses", upstream: "responses", field: "temperature", body: `"temperature":0.3`, sent: map[string]string{"temperature": "0.3"}},
	{api: "responses", upstream: "responses", field: "top_p", body: `"top_p":0.5`, sent: map[string]string{"top_p": "0.5"}},
	{api: "responses", upstream: "responses", field: "max_output_tokens", body: `"max_output_tokens":55`, sent: map[string]string{"max_output_tokens": "55"}},
	{api: "responses", upstream: "responses", field: "parallel_tool_calls", body: weatherToolResponses + `,"parallel_tool_calls":false`,
		sent: map[string]string{"parallel_tool_calls": "false"}},
	{api: "responses", upstream: "responses", field: "reasoning", body: `"reasoning":{"effort":"minimal"}`, sent: map[string]string{"reasoning": `{"effort":"minimal"}`}},
	{api: "responses", upstream: "responses", field: "reasoning", body: `"reasoning":{"effort":"low","summary":"auto"}`, refused: "reasoning.summary"},
	{api: "responses", upstream: "responses", field: "text",
		body: `"text":{"format":{"type":"json_schema","name":"weather_report","schema":` + fieldSchema + `,"strict":true},"verbosity":"low"}`,
		sent: map[string]string{"text": `{"format":{"type":"json_schema","name":"weather_report","schema":` + fieldSchema + `,"strict":true},"verbosity":"low"}`}},
	{api: "responses", upstream: "responses", field: "top_logprobs", body: `"top_logprobs":0`, absent: []string{"top_logprobs"}},
	{api: "responses", upstream: "responses", field: "top_logprobs", body: `"top_logprobs":2`, refused: "top_logprobs: 2 is not supported"},
	{api: "responses", upstream: "responses", field: "include", body: `"include":["reasoning.encrypted_content"]`, absent: []string{"include"}},
	{api: "responses", upstream: "responses", field: "include", body: `"include":["message.output_text.logprobs"]`, refused: "include"},
	{api: "responses", upstream: "responses", field: "background", body: `"background":false`, absent: []string{"background"}},
	{api: "responses", upstream: "responses", field: "background", body: `"background":true`, refused: "background: true is not supported"},
	{api: "responses", upstream: "responses", field: "service_tier", body: `"service_tier":"default"`, absent: []string{"service_tier"}},
	{api: "responses", upstream: "responses", field: "service_tier", body: `"service_tier":"priority"`, refused: "service_tier"},
	{api: "responses", upstream: "responses", field: "store", body: `"store":true`, sent: map[string]string{"store": "false"}},
	{api: "responses", upstream: "responses", field: "truncation", body: `"truncation":"auto"`, sent: map[string]string{"truncation": `"disabled"`}},
	{api: "responses", upstream: "responses", field: "max_tool_calls", body: `"max_tool_calls":3`, absent: []string{"max_tool_calls"}},
	{api: "responses", upstream: "responses", field: "prompt_cache_key", body: `"prompt_cache_key":"k"`, absent: []string{"prompt_cache_key"}},
	{api: "responses", upstream: "responses", field: "prompt_cache_retention", body: `"prompt_cache_retention":"in-memory"`, absent: []string{"prompt_cache_retention"}},
	{api: "responses", upstream: "responses", field: "safety_identifier", body: `"safety_identifier":"u1"`, absent: []string{"safety_identifier"}},
	{api: "responses", upstream: "responses", field: "prompt", body: `"prompt":{"id":"pmpt_1"}`, refused: "prompt: not supported"},
	{api: "responses", upstream: "responses", field: "context_management", body: `"context_management":[{"type":"compaction"}]`, refused: "context_management: not supported"},
	{api: "responses", upstream: "responses", field: "(unknown)", body: `"modalities":["text"]`, refused: "modalities: unknown field"},

	// Responses, answered by other upstreams.
	{api: "responses", upstream: "chat", field: "text", body: `"text":{"format":{"type":"json_object"}}`,
		sent: map[string]string{"response_format": `{"type":"json_object"}`}},
	{api: "responses", upstream: "chat", field: "max_output_tokens", body: `"max_output_tokens":12`, sent: map[string]string{"max_completion_tokens": "12"}},
	{api: "responses", upstream: "anthropic", field: "text",
		body: `"text":{"format":{"type":"json_schema","name":"weather_report","schema":` + fieldSchema + `}}`,
		sent: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":` + fieldSchema + `}}`}},
	{api: "responses", upstream: "anthropic", field: "text", body: `"text":{"verbosity":"low"}`, refused: "text.verbosity: the upstream model"},
	{api: "responses", upstream: "anthropic", field: "reasoning", body: `"reasoning":{"effort":"minimal"}`, refused: "reasoning.effort: the upstream model"},

	// Anthropic Messages, answered by an Anthropic upstream.
	{api: "messages", upstream: "anthropic", field: "model", body: `"model":"claude-unknown"`, sent: map[string]string{"model": `"claude-upstream"`}},
	{api: "messages", upstream: "anthropic", field: "messages", body: `"messages":[{"role":"user","content":[{"type":"text","text":"$M"}]}]`,
		sent: map[string]string{"messages.-1.content.-1.text": `"$M"`}},
	{api: "messages", upstream: "anthropic", field: "system", body: `"system":"Be brief."`, sent: map[string]string{"system": "~Be brief."}},
	{api: "messages", upstream: "anthropic", field: "tools", body: weatherToolAnthropic, sent: map[string]string{"tools.-1.name": `"get_weather"`}},
	{api: "messages", upstream: "anthropic", field: "tool_choice", body: weatherToolAnthropic + `,"tool_choice":{"type":"any","disable_parallel_tool_use":true}`,
		sent: map[string]string{"tool_choice": `{"type":"any","disable_parallel_tool_use":true}`}},
	{api: "messages", upstream: "anthropic", field: "stream", body: `"stream":true`, sent: map[string]string{"stream": "true"}},
	{api: "messages", upstream: "anthropic", field: "metadata", body: `"metadata":{"user_id":"u-$M"}`, absent: []string{"metadata"}},
	{api: "messages", upstream: "anthropic", field: "max_tokens", body: `"max_tokens":64`, sent: map[string]string{"max_tokens": "64"}},
	{api: "messages", upstream: "anthropic", field: "max_tokens", body: `"max_tokens":0`, refused: "max_tokens: 0, want at least 1"},
	{api: "messages", upstream: "anthropic", field: "temperature", body: `"temperature":0.7`, sent: map[string]string{"temperature": "0.7"}},
	{api: "messages", upstream: "anthropic", field: "top_p", body: `"top_p":0.8`, sent: map[string]string{"top_p": "0.8"}},
	{api: "messages", upstream: "anthropic", field: "top_k", body: `"top_k":20`, sent: map[string]string{"top_k": "20"}},
	{api: "messages", upstream: "anthropic", field: "stop_sequences", body: `"stop_sequences":["Human:"]`, sent: map[string]string{"stop_sequences": `["Human:"]`}},
	{api: "messages", upstream: "anthropic", field: "thinking", body: `"max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048}`,
		sent: map[string]string{"thinking": `{"type":"enabled","budget_tokens":2048}`}},
	{api: "messages", upstream: "anthropic", field: "thinking", body: `"thinking":{"type":"sometimes"}`, refused: `thinking.type: "sometimes"`},
	{api: "messages", upstream: "anthropic", field: "output_config", body: `"output_config":{"effort":"low","format":{"type":"json_schema","schema":` + fieldSchema + `}}`,
		sent: map[string]string{"output_config": `{"effort":"low","format":{"type":"json_schema","schema":` + fieldSchema + `}}`}},
	{api: "messages", upstream: "anthropic", field: "output_format", body: `"output_format":{"type":"json_schema","schema":` + fieldSchema + `}`,
		sent: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":` + fieldSchema + `}}`}},
	{api: "messages", upstream: "anthropic", field: "service_tier", body: `"service_tier":"standard_only"`, absent: []string{"service_tier"}},
	{api: "messages", upstream: "anthropic", field: "cache_control", body: `"cache_control":{"type":"ephemeral"}`},
	// A client's cache_control, at the top or on a block: the runtime's
	// breakpoints carry its longest ttl.
	{api: "messages", upstream: "anthropic", field: "cache_control", body: `"system":"Be brief.","cache_control":{"type":"ephemeral","ttl":"1h"}`,
		sent: map[string]string{"system.0.cache_control": `{"type":"ephemeral","ttl":"1h"}`}},
	{api: "messages", upstream: "anthropic", field: "cache_control",
		body: `"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"$M","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]`,
		sent:   map[string]string{"system.0.cache_control": `{"type":"ephemeral","ttl":"1h"}`, "messages.-1.content.-1.text": `"$M"`},
		absent: []string{"messages.-1.content.-1.cache_control"}},
	{api: "messages", upstream: "anthropic", field: "cache_control", body: `"cache_control":{"type":"ephemeral","ttl":"2h"}`,
		refused: `cache_control.ttl: "2h", want 5m or 1h`},
	{api: "messages", upstream: "anthropic", field: "cache_control",
		body:    `"messages":[{"role":"user","content":[{"type":"text","text":"$M","cache_control":{"type":"persistent"}}]}]`,
		refused: `messages[0].content[0].cache_control.type: "persistent", want ephemeral`},
	{api: "messages", upstream: "anthropic", field: "speed", body: `"speed":"standard"`, absent: []string{"speed"}},
	{api: "messages", upstream: "anthropic", field: "speed", body: `"speed":"fast"`, refused: "speed"},
	{api: "messages", upstream: "anthropic", field: "container", body: `"container":"c1"`, refused: "container: not supported"},
	{api: "messages", upstream: "anthropic", field: "mcp_servers", body: `"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]`, refused: "mcp_servers: not supported"},
	{api: "messages", upstream: "anthropic", field: "context_management", body: `"context_management":{"edits":[]}`, refused: "context_management: not supported"},
	{api: "messages", upstream: "anthropic", field: "inference_geo", body: `"inference_geo":"us"`, refused: "inference_geo: not supported"},
	{api: "messages", upstream: "anthropic", field: "diagnostics", body: `"diagnostics":{}`, refused: "diagnostics: not supported"},
	{api: "messages", upstream: "anthropic", field: "(unknown)", body: `"stop":["x"]`, refused: "stop: unknown field"},

	// Anthropic Messages, answered by OpenAI upstreams.
	{api: "messages", upstream: "chat", field: "stop_sequences", body: `"stop_sequences":["Human:"]`, sent: map[string]string{"stop": `["Human:"]`}},
	{api: "messages", upstream: "chat", field: "max_tokens", body: `"max_tokens":64`, sent: map[string]string{"max_completion_tokens": "64"}},
	{api: "messages", upstream: "chat", field: "top_k", body: `"top_k":20`, refused: "top_k: the upstream model model-e2e (openai) cannot take it"},
	{api: "messages", upstream: "chat", field: "cache_control", body: `"cache_control":{"type":"ephemeral"}`, absent: []string{"cache_control"}},
	{api: "messages", upstream: "chat", field: "cache_control", body: `"tools":[{"name":"get_weather","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}]`,
		refused: "tools[0].cache_control: the upstream model model-e2e (openai) cannot take it: OpenAI caches prompt prefixes by itself"},
	{api: "messages", upstream: "chat", field: "thinking", body: `"thinking":{"type":"enabled","budget_tokens":2048}`, refused: "thinking: the upstream model"},
	{api: "messages", upstream: "chat", field: "output_config", body: `"output_config":{"format":{"type":"json_schema","schema":` + fieldSchema + `}}`,
		sent: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"response","schema":` + fieldSchema + `}}`}},
	{api: "messages", upstream: "chat", field: "tool_choice", body: weatherToolAnthropic + `,"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`,
		sent: map[string]string{"tool_choice": `"auto"`, "parallel_tool_calls": "false"}},
	{api: "messages", upstream: "responses", field: "stop_sequences", body: `"stop_sequences":["Human:"]`, refused: "stop_sequences: the upstream model"},
}

// fieldUpstream is a server whose model is upstream, played by up.
type fieldUpstream struct {
	ts *testServer
	up *fakeapi.Server
}

func newFieldUpstream(t *testing.T, upstream string) fieldUpstream {
	t.Helper()
	switch upstream {
	case "chat", "responses":
		up := fakeapi.New(map[string]fakeapi.Reply{"chat": fakeapi.ChatText("stop", "ok"), "responses": fakeapi.ResponsesText("ok")}[upstream])
		api := map[string]string{"chat": openai.APIChat, "responses": openai.APIResponses}[upstream]
		return fieldUpstream{upstreamServer(t, api, Options{}, up), up}
	}
	up := fakeapi.New(fakeapi.AnthropicText([]string{"ok"}, "end_turn"))
	t.Cleanup(up.Close)
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider = anthropicprovider.New(anthropicprovider.Options{BaseURL: up.URL, APIKey: "upstream-key"})
		c.Model = "claude-upstream"
	})
	return fieldUpstream{ts, up}
}

// fieldRequest is the body of c's request, its user message marker.
func fieldRequest(t *testing.T, c fieldCase, marker string) (path string, body []byte) {
	t.Helper()
	var base map[string]any
	switch c.api {
	case "chat":
		path, base = "/v1/chat/completions", map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": marker}}}
	case "responses":
		path, base = "/v1/responses", map[string]any{"model": "m", "input": marker}
	default:
		path, base = "/v1/messages", map[string]any{"model": "m", "max_tokens": 256,
			"messages": []any{map[string]any{"role": "user", "content": marker}}}
	}
	var extra map[string]json.RawMessage
	if err := json.Unmarshal([]byte("{"+strings.ReplaceAll(c.body, "$M", marker)+"}"), &extra); err != nil {
		t.Fatalf("case body %s: %v", c.body, err)
	}
	for k, v := range extra {
		base[k] = v
	}
	body, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	return path, body
}

// jsonAt is the value of body at path: keys and indexes (-1 the last)
// joined by dots.
func jsonAt(body any, path string) (any, bool) {
	v := body
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if i < 0 {
				i += len(x)
			}
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// TestProxyRequestFields shows where each top-level field of each served
// API's request goes: what the upstream received (under its own API's
// name: the upstream may speak another API than the client), or the 400
// naming the field, with nothing created. Every field of the tables of
// proxy_fields.go has a case.
func TestProxyRequestFields(t *testing.T) {
	t.Parallel()
	tables := map[string][]proxyField{"chat": chatFields, "responses": responsesFields, "messages": anthropicFields}
	for api, fields := range tables {
		for _, f := range fields {
			found := false
			for _, c := range fieldCases {
				found = found || c.api == api && c.field == f.name
			}
			if !found {
				t.Errorf("%s: field %s has no case", api, f.name)
			}
		}
	}
	for _, upstream := range []string{"chat", "responses", "anthropic"} {
		t.Run("upstream="+upstream, func(t *testing.T) {
			t.Parallel()
			fu := newFieldUpstream(t, upstream)
			for i, c := range fieldCases {
				if c.upstream != upstream {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%d", c.api, c.field, i), func(t *testing.T) {
					fieldCheck(t, fu, c, fmt.Sprintf("case-%d-%s", i, c.field))
				})
			}
		})
	}
}

func fieldCheck(t *testing.T, fu fieldUpstream, c fieldCase, marker string) {
	sessions := func() int {
		all, err := fu.ts.rt.DB().Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	before := sessions()
	path, body := fieldRequest(t, c, marker)
	res, err := http.Post(fu.ts.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var sent map[string]any
	for _, r := range fu.up.Requests() {
		if bytes.Contains(r.Body, []byte(marker)) {
			if err := json.Unmarshal(r.Body, &sent); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c.refused != "" {
		var e struct {
			Error struct{ Message string }
		}
		_ = json.Unmarshal(answer, &e)
		if res.StatusCode != http.StatusBadRequest || !strings.HasPrefix(e.Error.Message, c.refused) {
			t.Errorf("%s: %d %s, want 400 starting %q", body, res.StatusCode, answer, c.refused)
		}
		if sent != nil {
			t.Errorf("a refused request reached the upstream: %v", sent)
		}
		if after := sessions(); after != before {
			t.Errorf("a refused request made %d sessions", after-before)
		}
		return
	}
	if res.StatusCode != http.StatusOK || sent == nil {
		t.Fatalf("%s: %d %s; upstream got it: %v", body, res.StatusCode, answer, sent != nil)
	}
	for p, want := range c.sent {
		want = strings.ReplaceAll(want, "$M", marker)
		got, ok := jsonAt(sent, p)
		data, _ := json.Marshal(got)
		if text, sub := strings.CutPrefix(want, "~"); sub {
			if !ok || !strings.Contains(string(data), text) {
				t.Errorf("upstream %s = %s, want it to hold %q", p, data, text)
			}
			continue
		}
		if !ok || !jsonEqual(got, json.RawMessage(want)) {
			t.Errorf("upstream %s = %s, want %s", p, data, want)
		}
	}
	for _, p := range c.absent {
		if v, ok := jsonAt(sent, p); ok {
			t.Errorf("upstream %s = %v, want it left out", p, v)
		}
	}
}

// docs/PROVIDERS.md's "Request fields and upstreams" names every field of
// the tables, under its API.
func TestProxyFieldsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/PROVIDERS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Request fields and upstreams")
	if !ok {
		t.Fatal("docs/PROVIDERS.md has no section Request fields and upstreams")
	}
	named := map[string]map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		api := strings.TrimSpace(cells[1])
		if named[api] == nil {
			named[api] = map[string]bool{}
		}
		quoted := strings.Split(cells[2], "`")
		for i := 1; i < len(quoted); i += 2 {
			name, _, _ := strings.Cut(quoted[i], ".")
			named[api][name] = true
		}
	}
	tables := map[string][]proxyField{"Chat": chatFields, "Responses": responsesFields, "Messages": anthropicFields}
	for api, fields := range tables {
		for _, f := range fields {
			if !named[api][f.name] {
				t.Errorf("docs/PROVIDERS.md, Request fields and upstreams: %s field %s is not in the table", api, f.name)
			}
		}
	}
}

// A conversation that runs on another model than the request names (its
// branch selected it before) is checked against that model when its turn
// is submitted: the 400 names the request's field all the same.
func TestProxyParamsCheckedAgainstTheConversationsModel(t *testing.T) {
	t.Parallel()
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider = fake.New()
		c.Models = map[string]actors.Model{"strict": {Provider: fake.New().WithRefused("stop"), ID: "strict-1"}}
	})
	post := func(body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set(ProxyConversationHeader, "conv-strict")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(data)
	}
	// The first request selects the strict model for the conversation.
	if st, body := post(`{"model":"strict","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`); st != http.StatusOK {
		t.Fatalf("first request: %d %s", st, body)
	}
	// The next names no configured model: checked first against the
	// default (which takes stop), then against the conversation's.
	st, body := post(`{"model":"other","max_tokens":64,"stop_sequences":["END"],"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":"echo: hi"},{"role":"user","content":"again"}]}`)
	if st != http.StatusBadRequest || !strings.Contains(body, "stop_sequences: the upstream model strict-1 (fake) cannot take it") {
		t.Fatalf("a setting the conversation's model cannot take: %d %s", st, body)
	}
}
