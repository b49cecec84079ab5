package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/providers"
)

// The framework tests' upstream: a scripted model behind OpenAI's Chat
// Completions and Responses APIs (streamed, as the runtime asks), whose
// answer follows from the request it gets, as a real model's would, so
// that a framework can drive it through any number of turns and tool
// steps without a script of replies in order. It reads the newest user
// message and the tool results after it:
//
//   - "[status 429]" or "[status 400]" in it: that error, in OpenAI's shape
//     (429 with Retry-After: modelRetryAfter).
//   - a json_schema response format (chat response_format, Responses
//     text.format) or a tool_choice forcing one function: the report
//     extracted from "<City>, <n> degrees", as the JSON text or as that
//     function's arguments.
//   - "call tick <n> times": a call of tick ({"n": k}) while fewer than n
//     results came back, then "Ticked <n> times.".
//   - "Recall the <what>, …": a call of search_memory ({"query": what})
//     when the request offers it and no search result came back; then,
//     if the message asks for the "weather in <City>" too, a call of
//     get_weather as below; then "The <what> is <x>." with x what the
//     search results say ("<what> is x"), or "nothing", and the weather.
//   - "weather in <City>": a call of get_weather ({"city": City}) when the
//     request offers it and no result came back, then "The weather in
//     <City>: <result>.".
//   - anything else: "Noted: <message>".
//
// fakeapi.Server records every request it receives.

// modelRetryAfter is the Retry-After of the scripted model's 429.
const modelRetryAfter = "1"

// modelBadRequest is the message of the scripted model's 400.
const modelBadRequest = "scripted upstream: messages[0].content: the word 'rutabaga' is not allowed"

// modelCall is a function call the model makes or the request carries.
type modelCall struct {
	ID, Name, Args string
}

// modelMessage is one message of a request, in either API.
type modelMessage struct {
	Role  string // system, user, assistant or tool
	Text  string
	Calls []modelCall // an assistant's calls
	Call  string      // a tool result's call id
}

// modelRequest is an upstream request as the scripted model reads it.
type modelRequest struct {
	API    string // "chat" or "responses"
	Model  string
	Stream bool
	// System is the text of the system and developer messages (and the
	// Responses instructions), joined.
	System   string
	Messages []modelMessage
	Tools    []string // the function tools' names
	// ToolChoice is the request's tool_choice as sent.
	ToolChoice json.RawMessage
	// Schema is the json_schema response format's schema, and
	// SchemaName its name.
	Schema     json.RawMessage
	SchemaName string
	// ForcedTool is the function tool_choice forces, if any.
	ForcedTool string
	// Raw holds the request's top-level fields as sent.
	Raw map[string]json.RawMessage
}

// newScriptedModel starts the scripted model on loopback; the caller
// closes it.
func newScriptedModel() *fakeapi.Server {
	return fakeapi.NewFunc(func(n int, r fakeapi.Request) fakeapi.Reply {
		req, err := parseModelRequest(r)
		if err != nil {
			return fakeapi.OpenAIError(http.StatusBadRequest, "invalid_request_error", "", "scripted upstream: "+err.Error())
		}
		if !req.Stream {
			return fakeapi.OpenAIError(http.StatusBadRequest, "invalid_request_error", "", "scripted upstream: it answers streams only")
		}
		return modelAnswer(req, n)
	})
}

// parseModelRequest reads a Chat Completions or Responses request.
func parseModelRequest(r fakeapi.Request) (modelRequest, error) {
	var req modelRequest
	if err := json.Unmarshal(r.Body, &req.Raw); err != nil {
		return req, fmt.Errorf("body: %v", err)
	}
	var head struct {
		Model      string
		Stream     bool
		ToolChoice json.RawMessage `json:"tool_choice"`
		Tools      []struct {
			Type, Name string
			Function   struct{ Name string }
		}
	}
	if err := json.Unmarshal(r.Body, &head); err != nil {
		return req, fmt.Errorf("body: %v", err)
	}
	req.Model, req.Stream, req.ToolChoice = head.Model, head.Stream, head.ToolChoice
	for _, t := range head.Tools {
		req.Tools = append(req.Tools, t.Name+t.Function.Name)
	}
	var forced struct {
		Type, Name string
		Function   struct{ Name string }
	}
	if json.Unmarshal(head.ToolChoice, &forced) == nil && forced.Type == "function" {
		req.ForcedTool = forced.Name + forced.Function.Name
	}
	var system []string
	switch {
	case strings.HasSuffix(r.Path, "/chat/completions"):
		req.API = "chat"
		var body struct {
			Messages []struct {
				Role       string
				Content    json.RawMessage
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			ResponseFormat struct {
				Type       string
				JSONSchema struct {
					Name   string
					Schema json.RawMessage
				} `json:"json_schema"`
			} `json:"response_format"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			return req, fmt.Errorf("body: %v", err)
		}
		for _, m := range body.Messages {
			msg := modelMessage{Role: m.Role, Text: contentText(m.Content), Call: m.ToolCallID}
			for _, c := range m.ToolCalls {
				msg.Calls = append(msg.Calls, modelCall{c.ID, c.Function.Name, c.Function.Arguments})
			}
			if m.Role == "developer" {
				msg.Role = "system"
			}
			if msg.Role == "system" {
				system = append(system, msg.Text)
			}
			req.Messages = append(req.Messages, msg)
		}
		if body.ResponseFormat.Type == "json_schema" {
			req.Schema, req.SchemaName = body.ResponseFormat.JSONSchema.Schema, body.ResponseFormat.JSONSchema.Name
		}
	case strings.HasSuffix(r.Path, "/responses"):
		req.API = "responses"
		var body struct {
			Instructions string
			Input        json.RawMessage
			Text         struct {
				Format struct {
					Type, Name string
					Schema     json.RawMessage
				}
			}
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			return req, fmt.Errorf("body: %v", err)
		}
		if body.Instructions != "" {
			system = append(system, body.Instructions)
			req.Messages = append(req.Messages, modelMessage{Role: "system", Text: body.Instructions})
		}
		var items []struct {
			Type, Role, CallID, Name, Arguments string
			Content                             json.RawMessage
			Output                              json.RawMessage
		}
		var one string
		if json.Unmarshal(body.Input, &one) == nil {
			req.Messages = append(req.Messages, modelMessage{Role: "user", Text: one})
		} else if err := json.Unmarshal(body.Input, &items); err != nil {
			return req, fmt.Errorf("input: %v", err)
		}
		for _, it := range items {
			switch {
			case it.Type == "function_call":
				req.Messages = append(req.Messages, modelMessage{Role: "assistant", Calls: []modelCall{{it.CallID, it.Name, it.Arguments}}})
			case it.Type == "function_call_output":
				req.Messages = append(req.Messages, modelMessage{Role: "tool", Text: contentText(it.Output), Call: it.CallID})
			case it.Type == "message" || (it.Type == "" && it.Role != ""):
				role := it.Role
				if role == "developer" {
					role = "system"
				}
				if role == "system" {
					system = append(system, contentText(it.Content))
				}
				req.Messages = append(req.Messages, modelMessage{Role: role, Text: contentText(it.Content)})
			default:
				return req, fmt.Errorf("input item of type %q", it.Type)
			}
		}
		if body.Text.Format.Type == "json_schema" {
			req.Schema, req.SchemaName = body.Text.Format.Schema, body.Text.Format.Name
		}
	default:
		return req, fmt.Errorf("no API at %s", r.Path)
	}
	req.System = strings.Join(system, "\n")
	return req, nil
}

// Turn returns the newest user message's text, without the retrieved
// memory the runtime starts it with, and the outputs of the tool results
// after it, in order.
func (r modelRequest) Turn() (string, []string) {
	var user string
	var results []string
	for _, m := range r.Messages {
		switch m.Role {
		case "user":
			user, results = m.Text, nil
			if _, own, ok := strings.Cut(user, providers.MemoryEnd); ok {
				user = strings.TrimLeft(own, "\n")
			}
		case "tool":
			results = append(results, m.Text)
		}
	}
	return user, results
}

// Offers reports whether the request offers the function tool name.
func (r modelRequest) Offers(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

var (
	modelReport  = regexp.MustCompile(`(\p{Lu}\p{L}+), (-?\d+) degrees`)
	modelTicks   = regexp.MustCompile(`call tick (\d+) times`)
	modelWeather = regexp.MustCompile(`(?i)weather in (\p{Lu}\p{L}+)`)
	modelRecall  = regexp.MustCompile(`Recall the ([a-z ]+?),`)
)

// modelAnswer is the scripted model's answer to req, the n-th request
// it got (which numbers its call ids).
func modelAnswer(req modelRequest, n int) fakeapi.Reply {
	user, results := req.Turn()
	var calls []fakeapi.OpenAIToolCall
	call := func(name string, args any) {
		data, _ := json.Marshal(args)
		calls = append(calls, fakeapi.OpenAIToolCall{ID: "call_" + strconv.Itoa(n) + "_" + strconv.Itoa(len(calls)), Name: name,
			Args: []string{string(data)}})
	}
	var text string
	report := func() map[string]any {
		m := modelReport.FindStringSubmatch(user)
		if m == nil {
			return map[string]any{"city": "nowhere", "celsius": 0}
		}
		c, _ := strconv.Atoi(m[2])
		return map[string]any{"city": m[1], "celsius": c}
	}
	switch {
	case strings.Contains(user, "[status 429]"):
		return fakeapi.OpenAIRateLimited(modelRetryAfter)
	case strings.Contains(user, "[status 400]"):
		return fakeapi.OpenAIError(http.StatusBadRequest, "invalid_request_error", "", modelBadRequest)
	case req.Schema != nil:
		data, _ := json.Marshal(report())
		text = string(data)
	case req.ForcedTool != "":
		call(req.ForcedTool, report())
	case modelTicks.MatchString(user):
		want, _ := strconv.Atoi(modelTicks.FindStringSubmatch(user)[1])
		if len(results) < want {
			call("tick", map[string]any{"n": len(results) + 1})
		} else {
			text = fmt.Sprintf("Ticked %d times.", want)
		}
	case modelRecall.MatchString(user):
		what := modelRecall.FindStringSubmatch(user)[1]
		var recalled, others []string
		for _, r := range results {
			if strings.Contains(r, "<memory_artifact") || strings.HasPrefix(r, "No memory matches") {
				recalled = append(recalled, r)
			} else {
				others = append(others, r)
			}
		}
		city := ""
		if m := modelWeather.FindStringSubmatch(user); m != nil {
			city = m[1]
		}
		switch {
		case recalled == nil && req.Offers("search_memory"):
			call("search_memory", map[string]string{"query": what})
		case city != "" && others == nil && req.Offers("get_weather"):
			call("get_weather", map[string]string{"city": city})
		default:
			fact := "nothing"
			if m := regexp.MustCompile(regexp.QuoteMeta(what) + ` is ([\w-]+)`).FindStringSubmatch(strings.Join(recalled, "\n")); m != nil {
				fact = m[1]
			}
			text = fmt.Sprintf("The %s is %s.", what, fact)
			if city != "" {
				text += fmt.Sprintf(" The weather in %s: %s.", city, strings.Join(others, "; "))
			}
		}
	case modelWeather.MatchString(user):
		city := modelWeather.FindStringSubmatch(user)[1]
		switch {
		case len(results) > 0:
			text = fmt.Sprintf("The weather in %s: %s.", city, strings.Join(results, "; "))
		case req.Offers("get_weather"):
			call("get_weather", map[string]string{"city": city})
		default:
			text = "I have no weather tool."
		}
	default:
		text = "Noted: " + user
	}
	in := 0
	for _, m := range req.Messages {
		in += len(m.Text)/4 + 1
	}
	if req.API == "responses" {
		st := fakeapi.NewResponsesStream().Usage(in, 5)
		if calls != nil {
			return st.FunctionCalls(calls...).Completed()
		}
		return st.Text(text).Completed()
	}
	st := fakeapi.NewChatStream().Usage(in, 5)
	if calls != nil {
		return st.ToolCalls(calls...).Finish("tool_calls")
	}
	return st.Text(text).Finish("stop")
}
