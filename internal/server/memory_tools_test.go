package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// PUT /v1/branches/{b}/memory_tools sets a branch's memory tools
// setting, GET shows it and what it turns out to be, a fork keeps it,
// and the client does the same; a value that is none is a 400 naming
// the field, and leaves the setting alone.
func TestBranchMemoryToolsAPI(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0) // memory.tools off
	var created api.CreatedSession
	if code := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "m"}, &created); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	b := "/v1/branches/" + created.Branch.ID.String()
	info := func(path string) api.BranchInfo {
		t.Helper()
		var out api.BranchInfo
		if code := ts.call(t, "GET", path, nil, &out); code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		return out
	}
	if got := info(b); got.MemoryTools != messages.MemoryToolsDefault || got.MemoryToolsOn {
		t.Fatalf("a new branch: memory tools %s on %v, want default off", got.MemoryTools, got.MemoryToolsOn)
	}
	var out map[string]string
	if code := ts.call(t, "PUT", b+"/memory_tools", map[string]string{"memory_tools": "on"}, &out); code != 200 || out["memory_tools"] != "on" {
		t.Fatalf("PUT on: %d %v", code, out)
	}
	if got := info(b); got.MemoryTools != messages.MemoryToolsOn || !got.MemoryToolsOn {
		t.Fatalf("after PUT on: memory tools %s on %v", got.MemoryTools, got.MemoryToolsOn)
	}
	for _, body := range []string{`{"memory_tools":"maybe"}`, `{"memory_tools":"ON"}`, `{}`, `{"memory_tools":true}`, `{"memory_tools":"on","x":1}`} {
		var e apiErr
		if code := ts.call(t, "PUT", b+"/memory_tools", body, &e); code != 400 || e.Error.Code != api.CodeInvalid ||
			!strings.Contains(e.Error.Message, "memory_tools") && !strings.Contains(e.Error.Message, `"x"`) {
			t.Errorf("PUT %s: %d %+v, want a 400 naming the field", body, code, e)
		}
	}
	if got := info(b); got.MemoryTools != messages.MemoryToolsOn {
		t.Fatalf("after refused PUTs: memory tools %s", got.MemoryTools)
	}
	// A fork keeps its parent's setting.
	if code := ts.call(t, "POST", b+"/turns", map[string]string{"text": "hello"}, nil); code != 200 {
		t.Fatalf("turn: %d", code)
	}
	var fork api.Branch
	if code := ts.call(t, "POST", b+"/forks", map[string]string{"label": "f"}, &fork); code != 201 {
		t.Fatalf("fork: %d", code)
	}
	if got := info("/v1/branches/" + fork.ID.String()); got.MemoryTools != messages.MemoryToolsOn || !got.MemoryToolsOn {
		t.Fatalf("the fork: memory tools %s on %v, want its parent's", got.MemoryTools, got.MemoryToolsOn)
	}
	// The Go client.
	c := client.New(ts.URL)
	if err := c.SelectMemoryTools(context.Background(), fork.ID, messages.MemoryToolsOff); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Branch(context.Background(), fork.ID); err != nil || got.MemoryTools != messages.MemoryToolsOff || got.MemoryToolsOn {
		t.Fatalf("client: %+v, %v", got, err)
	}
	if got := info(b); got.MemoryTools != messages.MemoryToolsOn {
		t.Fatalf("the parent after its fork's change: %s", got.MemoryTools)
	}
}

// proxyChat sends a Chat Completions request of msgs in conversation
// conv, with the X-Ctx-Memory-Tools header set to setting unless it is
// "": it returns the status, the answer's text (or the error's
// message) and its branch.
func proxyChat(t *testing.T, ts *testServer, conv, setting string, msgs []map[string]string) (int, string, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": msgs})
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set(ProxyConversationHeader, conv)
	if setting != "" {
		req.Header.Set(ProxyMemoryToolsHeader, setting)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("answer %s: %v", data, err)
	}
	if resp.StatusCode != 200 {
		return resp.StatusCode, out.Error.Message, ""
	}
	if len(out.Choices) != 1 {
		t.Fatalf("answer %s: want one choice", data)
	}
	return resp.StatusCode, out.Choices[0].Message.Content, resp.Header.Get(ProxyBranchHeader)
}

// upstreamTools are the names of the tools an upstream Chat Completions
// request offers.
func upstreamTools(t *testing.T, r fakeapi.Request) []string {
	t.Helper()
	var names []string
	for _, raw := range parseUpstream(t, r).Tools {
		var tool struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatalf("upstream tool %s: %v", raw, err)
		}
		names = append(names, tool.Function.Name)
	}
	return names
}

// A bad X-Ctx-Memory-Tools header refuses the request, naming the
// header, before any conversation is made.
func TestProxyMemoryToolsHeaderRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	for _, h := range []string{"yes", "ON", "default,on"} {
		code, msg, _ := proxyChat(t, ts, "bad-header", h, []map[string]string{{"role": "user", "content": "hi"}})
		if code != 400 || !strings.Contains(msg, ProxyMemoryToolsHeader+" header") || !strings.Contains(msg, "default, on or off") {
			t.Errorf("header %q: %d %q, want a 400 naming the header", h, code, msg)
		}
	}
	var sessions api.SessionList
	if code := ts.call(t, "GET", "/v1/sessions", nil, &sessions); code != 200 || sessions.Sessions == nil || len(sessions.Sessions) != 0 {
		t.Fatalf("sessions after refused requests: %d %+v", code, sessions)
	}
}

// End to end through the proxy, the model an upstream API played by
// internal/fakeapi: with memory.tools off for the server, a
// conversation whose first request says X-Ctx-Memory-Tools: on is
// offered the memory tools on its later turns too (the branch keeps the
// setting): the upstream searches the conversation's memory through
// search_memory and answers from it. With memory.tools on, a
// conversation that says off is offered none, while one that says
// nothing is offered them.
func TestProxyMemoryToolsPerConversation(t *testing.T) {
	t.Parallel()
	t.Run("on while the server's default is off", func(t *testing.T) {
		t.Parallel()
		up := fakeapi.New(
			fakeapi.ChatText("stop", "Noted."),
			fakeapi.ChatToolCalls(fakeapi.OpenAIToolCall{ID: "call_m1", Name: actors.SearchMemoryTool, Args: []string{memSearch}}),
			fakeapi.ChatText("stop", "eu-west-1."),
		)
		t.Cleanup(up.Close)
		ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
			c.Provider = openai.New(openai.Options{BaseURL: up.URL + "/v1", APIKey: "sk-test", API: openai.APIChat})
			c.Model, c.MemoryTools = "model-e2e", false
		})
		msgs := []map[string]string{{"role": "user", "content": memSeed}}
		code, text, branch := proxyChat(t, ts, "conv-on", "on", msgs)
		if code != 200 || text != "Noted." {
			t.Fatalf("first answer: %d %q", code, text)
		}
		settleBranch(t, ts, branch)
		msgs = append(msgs, map[string]string{"role": "assistant", "content": text}, map[string]string{"role": "user", "content": "Where do we deploy?"})
		if code, text, _ = proxyChat(t, ts, "conv-on", "", msgs); code != 200 || text != "eu-west-1." {
			t.Fatalf("second answer: %d %q", code, text)
		}
		reqs := up.Requests()
		if len(reqs) != 3 {
			t.Fatalf("%d upstream requests, want 3 (the fact, the search, the answer)", len(reqs))
		}
		for i, r := range reqs {
			if names := upstreamTools(t, r); !slices.Contains(names, actors.SearchMemoryTool) {
				t.Errorf("upstream request %d offered %v, want the memory tools", i, names)
			}
		}
		if out := upstreamOutputs(t, openai.APIChat, reqs[2])["call_m1"]; !strings.Contains(out, "eu-west-1") {
			t.Errorf("the search's output %q does not hold the fact", out)
		}
		var info api.BranchInfo
		if code := ts.call(t, "GET", "/v1/branches/"+branch, nil, &info); code != 200 || info.MemoryTools != messages.MemoryToolsOn || !info.MemoryToolsOn {
			t.Errorf("GET the branch: %d, memory tools %s on %v", code, info.MemoryTools, info.MemoryToolsOn)
		}
	})
	t.Run("off while the server's default is on", func(t *testing.T) {
		t.Parallel()
		up := fakeapi.New(fakeapi.ChatText("stop", "ok"))
		t.Cleanup(up.Close)
		ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
			c.Provider = openai.New(openai.Options{BaseURL: up.URL + "/v1", APIKey: "sk-test", API: openai.APIChat})
			c.Model, c.MemoryTools = "model-e2e", true
		})
		msgs := []map[string]string{{"role": "user", "content": "hello"}}
		_, _, off := proxyChat(t, ts, "conv-off", "off", msgs)
		msgs = append(msgs, map[string]string{"role": "assistant", "content": "ok"}, map[string]string{"role": "user", "content": "again"})
		proxyChat(t, ts, "conv-off", "", msgs)
		_, _, def := proxyChat(t, ts, "conv-default", "", msgs[:1])
		reqs := up.Requests()
		if len(reqs) != 3 {
			t.Fatalf("%d upstream requests, want 3", len(reqs))
		}
		for i, want := range []bool{false, false, true} {
			if got := slices.Contains(upstreamTools(t, reqs[i]), actors.SearchMemoryTool); got != want {
				t.Errorf("upstream request %d offered the memory tools: %v, want %v", i, got, want)
			}
		}
		for _, tc := range []struct {
			branch string
			set    messages.MemoryTools
			on     bool
		}{{off, messages.MemoryToolsOff, false}, {def, messages.MemoryToolsDefault, true}} {
			var info api.BranchInfo
			if code := ts.call(t, "GET", "/v1/branches/"+tc.branch, nil, &info); code != 200 || info.MemoryTools != tc.set || info.MemoryToolsOn != tc.on {
				t.Errorf("GET branch %s: %d, memory tools %s on %v, want %s %v", tc.branch, code, info.MemoryTools, info.MemoryToolsOn, tc.set, tc.on)
			}
		}
	})
}
