package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpDir holds the TypeScript SDK's client script and its node_modules
// (pinned in package-lock.json, installed by `make mcpjs`).
const mcpDir = "mcp"

// mcpToolNames are the tools a client must list.
var mcpToolNames = []string{"commit_pending", "edit_fact", "fork", "get_context", "get_history", "get_turn", "list_conversations",
	"list_facts", "pin_fact", "record_exchange", "search_memory", "start_conversation", "unpin_fact"}

// tsResult is what tests/mcp/client.mjs prints.
type tsResult struct {
	Error        *struct{ Class, Message, Stack string }
	Server       struct{ Name, Version string }
	Unauthorized string
	Tools        []string
	Results      map[string]json.RawMessage
	Errors       map[string]string
	Repeat       bool
	Summary      string
	Facts        struct{ Facts []struct{ Fact string } }
	Templates    []string
	Prompt       string
	Branch       string
}

// A client no one here wrote, the official MCP TypeScript SDK, uses the
// real binary's MCP server over stdio (`ctxinf mcp` on a data
// directory) and over streamable HTTP (`ctxinf serve`'s /mcp, with a
// bearer token): it lists the tools, calls each, reads the resources and
// the prompt, and gets a tool error naming the field and the limit.
func TestMCPTypeScriptSDK(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the MCP TypeScript SDK test needs Node.js 20 or later and `make mcpjs`")
	}
	if _, err := os.Stat(filepath.Join(mcpDir, "node_modules", ".installed")); err != nil {
		t.Skip("tests/mcp/node_modules is not installed: `make mcpjs` installs it (npm ci)")
	}
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var args, extra []string
			if mode == "stdio" {
				args = []string{"stdio", binary}
				extra = env(dir, "CTX_STORE_DURABILITY=relaxed")
			} else {
				s := startServe(t, dir, "CTX_SERVER_TOKENS=token-of-mcp", "CTX_STORE_DURABILITY=relaxed")
				defer s.stop(t)
				args = []string{"http", s.url + "/mcp", "token-of-mcp"}
			}
			r := runTSClient(t, node, args, extra)
			if !slices.Equal(r.Tools, mcpToolNames) {
				t.Errorf("tools = %v, want %v", r.Tools, mcpToolNames)
			}
			for _, name := range mcpToolNames {
				if _, ok := r.Results[name]; !ok {
					t.Errorf("tool %s: not called, or no structured result", name)
				}
			}
			if r.Server.Name != "ctxinf" || !r.Repeat {
				t.Errorf("server %+v, repeat under the key: %v; want ctxinf, the same turn", r.Server, r.Repeat)
			}
			var found struct {
				Hits []struct{ Text, Speaker string }
			}
			if err := json.Unmarshal(r.Results["search_memory"], &found); err != nil || len(found.Hits) == 0 ||
				!strings.Contains(found.Hits[0].Text+found.Hits[min(1, len(found.Hits)-1)].Text, "5433") {
				t.Errorf("search_memory = %s, want the 5433 exchange", r.Results["search_memory"])
			}
			var cx struct{ Text string }
			if err := json.Unmarshal(r.Results["get_context"], &cx); err != nil || !strings.Contains(cx.Text, "Answer in English.") {
				t.Errorf("get_context = %s, want the pinned fact in its text", r.Results["get_context"])
			}
			var turn struct{ Messages []struct{ Role, Text string } }
			if err := json.Unmarshal(r.Results["get_turn"], &turn); err != nil || len(turn.Messages) != 2 || !strings.Contains(turn.Messages[1].Text, "5433") {
				t.Errorf("get_turn = %s, want turn 1's two messages", r.Results["get_turn"])
			}
			if len(r.Facts.Facts) != 1 || r.Facts.Facts[0].Fact != "Answer in English." || r.Summary == "" {
				t.Errorf("resources: facts %+v, summary %q; want the edited fact and a summary", r.Facts, r.Summary)
			}
			if want := []string{"ctxinf://branches/{branch}/facts", "ctxinf://branches/{branch}/summary"}; !slices.Equal(r.Templates, want) {
				t.Errorf("resource templates = %v, want %v", r.Templates, want)
			}
			if !strings.Contains(r.Prompt, r.Branch) || !strings.Contains(r.Prompt, "record_exchange") {
				t.Errorf("use_memory prompt = %q, want the branch and the tools", r.Prompt)
			}
			if !strings.Contains(r.Errors["search_memory"], "k: 80, want 1 to 50") {
				t.Errorf("search_memory with k 80 = %q, want the limit named", r.Errors["search_memory"])
			}
			if !strings.Contains(r.Errors["get_history"], "not found") {
				t.Errorf("get_history of an unknown branch = %q, want not found", r.Errors["get_history"])
			}
			if mode == "http" && !strings.Contains(r.Unauthorized, "unauthorized") {
				t.Errorf("connecting without a token = %q, want refused as unauthorized", r.Unauthorized)
			}
		})
	}
}

// runTSClient runs tests/mcp/client.mjs with args (and, for stdio, the
// binary's environment extra) and returns what it printed.
func runTSClient(t *testing.T, node string, args, extra []string) tsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, args...)...)
	cmd.Dir = mcpDir
	cmd.Env = append(os.Environ(), extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var line []byte
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if r, ok := bytes.CutPrefix(sc.Bytes(), []byte("RESULT ")); ok {
			line = append([]byte(nil), r...)
		}
	}
	var r tsResult
	if err := json.Unmarshal(line, &r); err != nil || runErr != nil || r.Error != nil {
		msg := ""
		if r.Error != nil {
			msg = r.Error.Class + ": " + r.Error.Message + "\n" + r.Error.Stack
		}
		t.Fatalf("node client.mjs %s: %v %v %s\nstdout: %s\nstderr: %s", args[0], runErr, err, msg, tail(stdout.String()), tail(stderr.String()))
	}
	return r
}

// `ctxinf mcp` over stdio, with the Go SDK's client starting the real
// binary: on the data directory's embedded runtime; on the ctxinf serve
// that owns the directory (found by its server.json), with the token of
// server.tokens_env; and on the one --server names. What one records the
// others see.
func TestMCPStdioBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	connect := func(args []string, extra ...string) *mcp.ClientSession {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"mcp"}, args...)...)
		cmd.Env = env(dir, append([]string{"CTX_STORE_DURABILITY=relaxed"}, extra...)...)
		cmd.Stderr = os.Stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test", Version: "1"}, nil).
			Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	call := func(cs *mcp.ClientSession, tool string, args map[string]any, out any) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
	}
	type history struct{ Messages []struct{ Role, Text string } }

	cs := connect(nil)
	var conv struct{ Session, Branch string }
	call(cs, "start_conversation", map[string]any{"title": "stdio"}, &conv)
	var turn struct{ Seq int }
	call(cs, "record_exchange", map[string]any{"branch": conv.Branch, "user": "embedded?", "reply": "yes, embedded"}, &turn)
	if err := cs.Close(); err != nil { // the binary exits: the runtime closes, the data directory is free
		t.Fatal(err)
	}

	s := startServe(t, dir, "CTX_SERVER_TOKENS=token-of-mcp", "CTX_STORE_DURABILITY=relaxed")
	defer s.stop(t)
	for i, args := range [][]string{nil, {"--server", s.url}} {
		cs := connect(args, "CTX_SERVER_TOKENS=token-of-mcp")
		call(cs, "record_exchange", map[string]any{"branch": conv.Branch, "user": "remote?", "reply": "yes, remote"}, &turn)
		if turn.Seq != 2+i {
			t.Errorf("mcp %v: recorded turn %d, want %d", args, turn.Seq, 2+i)
		}
		var h history
		call(cs, "get_history", map[string]any{"branch": conv.Branch}, &h)
		if len(h.Messages) != 2*(2+i) || h.Messages[1].Text != "yes, embedded" {
			t.Errorf("mcp %v: history %+v, want the embedded exchange and the remote ones", args, h)
		}
		cs.Close()
	}
}

// A script that writes its requests to `ctxinf mcp` and closes stdin
// gets every answer before the binary exits.
func TestMCPStdioScript(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "mcp")
	cmd.Env = env(t.TempDir(), "CTX_STORE_DURABILITY=relaxed")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":"start","method":"tools/call","params":{"name":"start_conversation","arguments":{"title":"script"}}}
`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ctxinf mcp: %v", err)
	}
	answered := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID     json.RawMessage
			Result json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.Result == nil {
			t.Fatalf("stdout line %q: %v, want a result", line, err)
		}
		answered[string(m.ID)] = true
	}
	for _, id := range []string{`1`, `2`, `"start"`} {
		if !answered[id] {
			t.Errorf("request %s: no answer before the binary exited; stdout:\n%s", id, out)
		}
	}
}
