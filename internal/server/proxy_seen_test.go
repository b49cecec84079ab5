package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
)

// What the model saw includes what a proxied request sent beside its
// messages: GET …/turns/{t} and the context debug view show the client's
// system prompt, the tools offered, the tool mode and choice, and the
// client's settings.
func TestProxyTurnShowsWhatTheModelSaw(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	body := `{"model":"m","temperature":0.2,"messages":[{"role":"system","content":"You are a weather agent."},` +
		`{"role":"user","content":"Weather in Paris?"}],` + weatherTool + `,"tool_choice":"required"}`
	res, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var cc struct{ ID string }
	if err := json.Unmarshal(answer, &cc); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, answer)
	}
	branch := res.Header.Get(ProxyBranchHeader)
	turn, _, ok := parseStepID("chatcmpl-", cc.ID)
	if !ok {
		t.Fatalf("answer id %q", cc.ID)
	}
	schema := `{"type":"object","properties":{"city":{"type":"string"}}}`
	wantTools := func(where string, tools []messages.Tool, mode messages.ToolMode, choice messages.ToolChoice) {
		t.Helper()
		if len(tools) != 1 || tools[0].Name != "get_weather" || !jsonEqual(json.RawMessage(tools[0].InputSchema), json.RawMessage(schema)) ||
			mode != messages.ToolsEnabled || choice != (messages.ToolChoice{Mode: messages.ToolChoiceRequired}) {
			t.Errorf("%s: tools %+v, mode %q, choice %+v", where, tools, mode, choice)
		}
	}

	var info client.TurnInfo
	if st := ts.call(t, "GET", "/v1/branches/"+branch+"/turns/"+turn.String(), nil, &info); st != http.StatusOK {
		t.Fatalf("GET turn: %d", st)
	}
	if info.System != "You are a weather agent." || info.Params.Temperature == nil || *info.Params.Temperature != 0.2 {
		t.Errorf("GET turn: system %q, params %+v", info.System, info.Params)
	}
	wantTools("GET turn", info.Tools, info.ToolMode, info.ToolChoice)
	// The tool's schema is the JSON it holds, not base64.
	var raw bytes.Buffer
	req, _ := http.NewRequest("GET", ts.URL+"/v1/branches/"+branch+"/turns/"+turn.String(), nil)
	if res, err := http.DefaultClient.Do(req); err == nil {
		_, _ = raw.ReadFrom(res.Body)
		res.Body.Close()
	}
	if !strings.Contains(raw.String(), `"input_schema":`+schema) {
		t.Errorf("GET turn writes the schema otherwise: %s", raw.String())
	}

	var d actors.ContextDebug
	if st := ts.call(t, "GET", "/v1/branches/"+branch+"/context?turn="+turn.String(), nil, &d); st != http.StatusOK {
		t.Fatalf("GET context: %d", st)
	}
	if !d.Matches || d.ClientSystem != "You are a weather agent." || !strings.HasPrefix(d.Context.SystemInstructions, d.ClientSystem) ||
		d.Params.Temperature == nil {
		t.Errorf("context debug: matches %v, client system %q, system %q, params %+v", d.Matches, d.ClientSystem,
			d.Context.SystemInstructions, d.Params)
	}
	wantTools("context debug", d.Context.Tools, d.Context.ToolMode, d.Context.ToolChoice)
}
