package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/mcpserver"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// The tools every client must see.
var toolNames = []string{"commit_pending", "edit_fact", "fork", "get_context", "get_history", "get_turn", "list_conversations",
	"list_facts", "pin_fact", "record_exchange", "search_memory", "start_conversation", "unpin_fact"}

// backend is a runtime and the HTTP API's handler over it.
type backend struct {
	rt   *actors.Runtime
	api  *server.Server
	opts server.Options
}

// newBackend is a backend whose server takes config.yaml's options
// (server.OptionsOf(config.Default().Server)) with the tokens and
// tenants of auth.
func newBackend(t *testing.T, auth server.Options) *backend {
	t.Helper()
	store := badgerdb.TestOptions("")
	store.Durability = persistence.DurabilityRelaxed
	cfg := actors.Config{DataDir: t.TempDir(), Store: store, Provider: local.New(local.Options{}), Model: "local",
		RequestTimeout: 10 * time.Second, Logger: zerolog.Nop()}
	rt, err := actors.Open(context.Background(), wiring.Fill(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	opts := server.OptionsOf(config.Default().Server)
	opts.Tokens, opts.Tenants = auth.Tokens, auth.Tenants
	api, err := server.New(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &backend{rt: rt, api: api, opts: opts}
}

// stdio connects an SDK client to the server over the stdio transport's
// framing (newline-delimited JSON on a pair of pipes), its tools on the
// API in process, as `ctxinf mcp` runs them.
func (b *backend) stdio(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	s := mcpserver.New(mcpserver.Options{Version: "test", Client: func(http.Header) *client.Client { return mcpserver.InProcess(b.api, nil) }})
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.MCP().Run(ctx, &mcp.IOTransport{Reader: sr, Writer: sw}) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test", Version: "1"}, opts).
		Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

// httpServer serves the API with the MCP endpoint at /mcp, as `ctxinf
// serve` does.
func (b *backend) httpServer(t *testing.T) *httptest.Server {
	t.Helper()
	var tenantOf func(string) (string, bool)
	if len(b.opts.Tokens) > 0 {
		table, err := server.TokenTable(b.opts)
		if err != nil {
			t.Fatal(err)
		}
		tenantOf = func(tok string) (string, bool) { p, ok := table.Lookup(tok); return p.Tenant, ok }
	}
	b.api.Handle("/mcp", mcpserver.Handler(b.api, "test", time.Minute, tenantOf))
	hs := httptest.NewServer(b.api)
	t.Cleanup(hs.Close)
	return hs
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// streamable connects an SDK client to hs's /mcp with token ("": none).
func streamable(t *testing.T, hs *httptest.Server, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{}
	if token != "" {
		hc.Transport = bearer{token}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test", Version: "1"}, opts).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// call calls tool with args and decodes its structured result into out;
// it fails the test on a tool error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): %v", tool, args, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): tool error %s", tool, args, text(res))
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %s: %v", tool, data, err)
	}
}

// callErr calls tool and returns its tool error's text ("" if none).
func callErr(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err.Error()
	}
	if !res.IsError {
		return ""
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type started struct{ Session, Branch string }

type turnRef struct {
	Turn  string
	Seq   uint64
	Reply string
}

type hit struct {
	Text, Speaker, Branch, Turn, Chunk string
	Seq                                uint64
}

// Every tool, the resources and the prompt, through the SDK's client
// over stdio and over streamable HTTP: the answers a model needs, and
// bad input refused naming the field and the limit with nothing stored.
func TestToolsOverBothTransports(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, server.Options{})
			updates := make(chan string, 16)
			opts := &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				updates <- r.Params.URI
			}}
			var cs *mcp.ClientSession
			if transport == "stdio" {
				cs = b.stdio(t, opts)
			} else {
				var err error
				if cs, err = streamable(t, b.httpServer(t), "", opts); err != nil {
					t.Fatal(err)
				}
			}
			exercise(t, b, cs, updates)
		})
	}
}

func exercise(t *testing.T, b *backend, cs *mcp.ClientSession, updates chan string) {
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("tool %s: no description or input schema", tl.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, toolNames) {
		t.Fatalf("tools = %v, want %v", names, toolNames)
	}

	var s started
	call(t, cs, "start_conversation", map[string]any{"title": "deploys"}, &s)
	said := [][2]string{
		{"Which port does the staging database listen on?", "The staging database listens on port 5433."},
		{"And where do we deploy?", "We deploy to the eu-west-1 region."},
		{"Who owns the billing service?", "Priya owns the billing service."},
	}
	var turns []turnRef
	for i, x := range said {
		var r turnRef
		call(t, cs, "record_exchange", map[string]any{"branch": s.Branch, "user": x[0], "reply": x[1], "idempotency_key": "k" + x[0]}, &r)
		if r.Seq != uint64(i+1) {
			t.Fatalf("record_exchange %d: %+v, want seq %d", i, r, i+1)
		}
		turns = append(turns, r)
	}
	var again turnRef
	call(t, cs, "record_exchange", map[string]any{"branch": s.Branch, "user": said[0][0], "reply": said[0][1], "idempotency_key": "k" + said[0][0]}, &again)
	if again != turns[0] {
		t.Fatalf("record_exchange repeated under its key = %+v, want %+v", again, turns[0])
	}
	if msg := callErr(t, cs, "record_exchange", map[string]any{"branch": s.Branch, "user": "other", "reply": "x", "idempotency_key": "k" + said[0][0]}); !strings.Contains(msg, "idempotency_key_reused") {
		t.Errorf("record_exchange with a used key = %q, want idempotency_key_reused", msg)
	}

	// Facts, and the resources' change notifications.
	factsURI := "ctxinf://branches/" + s.Branch + "/facts"
	summaryURI := "ctxinf://branches/" + s.Branch + "/summary"
	for _, uri := range []string{factsURI, summaryURI} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	var f struct {
		ID   uint64
		Fact string
	}
	call(t, cs, "pin_fact", map[string]any{"branch": s.Branch, "fact": "Answer in French."}, &f)
	if f.ID != 1 || f.Fact != "Answer in French." {
		t.Fatalf("pin_fact = %+v", f)
	}
	if got := <-updates; got != factsURI {
		t.Fatalf("after pin_fact: updated %s, want %s", got, factsURI)
	}
	call(t, cs, "edit_fact", map[string]any{"branch": s.Branch, "id": 1, "fact": "Answer in English."}, &f)
	<-updates
	call(t, cs, "pin_fact", map[string]any{"branch": s.Branch, "fact": "Use metric units."}, &f)
	<-updates
	var unp struct{ Unpinned uint64 }
	call(t, cs, "unpin_fact", map[string]any{"branch": s.Branch, "id": 2}, &unp)
	<-updates
	var facts struct {
		Facts []struct {
			ID   uint64
			Fact string
		}
	}
	call(t, cs, "list_facts", map[string]any{"branch": s.Branch}, &facts)
	if len(facts.Facts) != 1 || facts.Facts[0].Fact != "Answer in English." {
		t.Fatalf("list_facts = %+v, want the edited fact alone", facts)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: factsURI})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "Answer in English.") {
		t.Fatalf("read %s = %+v, %v", factsURI, rr, err)
	}

	// Fold, then search: the turns are indexed once folded.
	var c struct {
		Folding bool
		Pending int
	}
	call(t, cs, "commit_pending", map[string]any{"branch": s.Branch}, &c)
	if !c.Folding || c.Pending != 3 {
		t.Fatalf("commit_pending = %+v, want folding 3", c)
	}
	if got := <-updates; got != summaryURI {
		t.Fatalf("after commit_pending: updated %s, want %s", got, summaryURI)
	}
	branchID, _ := messages.ParseID[messages.BranchID](s.Branch)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := b.rt.Settle(sctx, branchID); err != nil {
		t.Fatal(err)
	}
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: summaryURI})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text == "" {
		t.Fatalf("read %s = %+v, %v; want the summary", summaryURI, rr, err)
	}
	var found struct {
		Note string
		Hits []hit
	}
	call(t, cs, "search_memory", map[string]any{"branch": s.Branch, "query": "staging database port"}, &found)
	if len(found.Hits) < 2 || found.Hits[0].Turn != turns[0].Turn || found.Hits[0].Seq != 1 || !strings.Contains(found.Note, "untrusted") ||
		!strings.Contains(found.Hits[0].Text+found.Hits[1].Text, "5433") {
		t.Fatalf("search_memory = %+v, want turn 1 (5433) first, marked untrusted", found)
	}
	call(t, cs, "search_memory", map[string]any{"branch": s.Branch, "query": "billing service owner", "speaker": "assistant", "k": 3}, &found)
	if len(found.Hits) == 0 || len(found.Hits) > 3 {
		t.Fatalf("search_memory by the assistant = %+v, want 1 to 3 hits", found)
	}
	for _, h := range found.Hits {
		if h.Speaker != "assistant" {
			t.Errorf("search_memory speaker=assistant: a hit of %s: %+v", h.Speaker, h)
		}
	}
	call(t, cs, "search_memory", map[string]any{"branch": s.Branch, "query": "billing", "after": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, &found)
	if len(found.Hits) != 0 {
		t.Errorf("search_memory after an hour from now = %+v, want none", found.Hits)
	}

	// Fork at turn 1, record there; the session's search sees both.
	var fork struct{ ID, Parent string }
	call(t, cs, "fork", map[string]any{"branch": s.Branch, "at_seq": 1, "label": "alt"}, &fork)
	if fork.Parent != s.Branch {
		t.Fatalf("fork = %+v", fork)
	}
	call(t, cs, "record_exchange", map[string]any{"branch": fork.ID, "user": "Switch the region?", "reply": "Move to the ap-south-1 region."}, &again)
	forkID, _ := messages.ParseID[messages.BranchID](fork.ID)
	if err := b.rt.Settle(sctx, forkID); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "search_memory", map[string]any{"session": s.Session, "query": "region", "k": 10}, &found)
	branches := map[string]bool{}
	for _, h := range found.Hits {
		branches[h.Branch] = true
	}
	if !branches[s.Branch] || !branches[fork.ID] {
		t.Fatalf("search_memory of the session = %+v, want hits of both branches", found.Hits)
	}

	var list struct {
		Sessions []struct {
			ID, Title    string
			LastActivity string `json:"last_activity"`
			Branches     []struct{ ID, Label string }
		}
	}
	call(t, cs, "list_conversations", nil, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != s.Session || list.Sessions[0].Title != "deploys" || len(list.Sessions[0].Branches) != 2 ||
		list.Sessions[0].LastActivity == "" {
		t.Fatalf("list_conversations = %+v", list)
	}

	var cx struct {
		Text     string
		Pinned   []string
		Sections []struct {
			Name   string
			Tokens int
		}
		TotalTokens int `json:"total_tokens"`
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_context", Arguments: map[string]any{"branch": s.Branch, "message": "Remind me of the staging database port?"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "## Pinned facts\n- Answer in English.") || !strings.Contains(text(res), "tokens of a") {
		t.Fatalf("get_context's text = %q, %v; want the context to paste and its arithmetic", text(res), err)
	}
	call(t, cs, "get_context", map[string]any{"branch": s.Branch, "message": "Remind me of the staging database port?"}, &cx)
	if !strings.Contains(cx.Text, "Answer in English.") || !slices.Equal(cx.Pinned, []string{"Answer in English."}) || cx.TotalTokens == 0 || len(cx.Sections) == 0 {
		t.Fatalf("get_context = %+v", cx)
	}

	var h struct {
		Messages []struct {
			ID, Role, Text string
		}
		NextBefore string `json:"next_before"`
	}
	call(t, cs, "get_history", map[string]any{"branch": s.Branch, "limit": 2}, &h)
	if len(h.Messages) != 2 || h.Messages[1].Text != said[2][1] || h.Messages[1].Role != "assistant" || h.NextBefore == "" {
		t.Fatalf("get_history = %+v", h)
	}
	before := h.NextBefore
	h.NextBefore = ""
	call(t, cs, "get_history", map[string]any{"branch": s.Branch, "before": before, "limit": 100}, &h)
	if len(h.Messages) != 4 || h.Messages[0].Text != said[0][0] || h.NextBefore != "" {
		t.Fatalf("get_history's page before = %+v", h)
	}
	var turn struct {
		Turn     string
		Seq      uint64
		Messages []struct{ Role, Text string }
	}
	for _, args := range []map[string]any{{"branch": s.Branch, "seq": 2}, {"branch": s.Branch, "turn": turns[1].Turn}} {
		call(t, cs, "get_turn", args, &turn)
		if turn.Turn != turns[1].Turn || len(turn.Messages) != 2 || turn.Messages[0].Text != said[1][0] || turn.Messages[1].Text != said[1][1] {
			t.Fatalf("get_turn(%v) = %+v", args, turn)
		}
	}
	call(t, cs, "get_turn", map[string]any{"branch": s.Branch, "seq": 3}, &turn) // the latest: no next turn
	if len(turn.Messages) != 2 || turn.Messages[1].Text != said[2][1] {
		t.Fatalf("get_turn of the latest = %+v", turn)
	}

	// Bad input: an error naming the field and the limit; nothing stored.
	bad := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"search_memory", map[string]any{"branch": s.Branch, "query": "x", "k": 80}, "k: 80, want 1 to 50"},
		{"search_memory", map[string]any{"query": "x"}, "branch or session"},
		{"search_memory", map[string]any{"branch": s.Branch, "query": "x", "speaker": "robot"}, "speaker"},
		{"search_memory", map[string]any{"branch": s.Branch, "query": "x", "after": "yesterday"}, "after"},
		{"get_history", map[string]any{"branch": s.Branch, "limit": 1000}, "limit: 1000, want 1 to 100"},
		{"record_exchange", map[string]any{"branch": "nope", "user": "u", "reply": "r"}, `branch: "nope" is not a branch id`},
		{"record_exchange", map[string]any{"branch": s.Branch, "user": " ", "reply": "r"}, "user: required"},
		{"record_exchange", map[string]any{"branch": s.Branch, "reply": "r"}, "user"},
		{"record_exchange", map[string]any{"branch": s.Branch, "user": "u", "reply": "r", "idempotency_key": strings.Repeat("k", 300)}, "idempotency_key: 300 bytes, limit 255"},
		{"pin_fact", map[string]any{"branch": s.Branch, "fact": strings.Repeat("x", 5000)}, "fact"},
		{"fork", map[string]any{"branch": s.Branch, "label": strings.Repeat("l", 200)}, "label: 200 bytes, limit 128"},
		{"fork", map[string]any{"branch": s.Branch, "at_seq": 99}, "not found"},
		{"get_context", map[string]any{"branch": s.Branch, "message": strings.Repeat("m", mcpserver.MaxMessageBytes+1)}, "message: 65537 bytes, limit 65536"},
		{"unpin_fact", map[string]any{"branch": s.Branch, "id": 9}, "not found"},
		{"get_turn", map[string]any{"branch": s.Branch}, "turn or seq"},
		{"list_conversations", map[string]any{"cursor": "zz"}, "cursor"},
		{"start_conversation", map[string]any{"title": strings.Repeat("t", 300)}, "title"},
	}
	for _, c := range bad {
		if msg := callErr(t, cs, c.tool, c.args); !strings.Contains(msg, c.want) {
			t.Errorf("%s(%.60v) = %q, want an error naming %q", c.tool, c.args, msg, c.want)
		}
	}
	info, err := b.rt.Inspect(ctx, branchID)
	if err != nil || info.TurnSeq != 3 {
		t.Errorf("after the bad calls: turn seq %d, %v; want 3", info.TurnSeq, err)
	}
	call(t, cs, "list_facts", map[string]any{"branch": s.Branch}, &facts)
	if len(facts.Facts) != 1 {
		t.Errorf("after the bad calls: facts %+v, want 1", facts)
	}
	call(t, cs, "list_conversations", nil, &list)
	if len(list.Sessions) != 1 || len(list.Sessions[0].Branches) != 2 {
		t.Errorf("after the bad calls: %+v, want 1 session of 2 branches", list)
	}

	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "use_memory", Arguments: map[string]string{"branch": s.Branch}})
	if err != nil || len(p.Messages) != 1 || !strings.Contains(p.Messages[0].Content.(*mcp.TextContent).Text, s.Branch) {
		t.Fatalf("use_memory prompt = %+v, %v", p, err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "use_memory", Arguments: map[string]string{"branch": "x"}}); err == nil {
		t.Error("use_memory with a bad branch: no error")
	}
}

// The streamable HTTP transport is behind the API's tokens: no token or
// a wrong one is refused before MCP; and a tenant's tools see its own
// sessions only: every tool that names an id answers another tenant's
// as not found, and changes nothing of it.
func TestHTTPTokensAndTenants(t *testing.T) {
	t.Parallel()
	b := newBackend(t, server.Options{Tokens: []string{"token-of-default"}, Tenants: []server.Tenant{
		{Name: "acme", Tokens: []string{"token-of-acme"}}, {Name: "beta", Tokens: []string{"token-of-beta"}}}})
	hs := b.httpServer(t)
	for _, tok := range []string{"", "wrong-token"} {
		if _, err := streamable(t, hs, tok, nil); err == nil {
			t.Errorf("connect with token %q: no error", tok)
		}
		req, _ := http.NewRequest("POST", hs.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST /mcp with token %q: %d, want 401", tok, resp.StatusCode)
		}
	}
	acme, err := streamable(t, hs, "token-of-acme", nil)
	if err != nil {
		t.Fatal(err)
	}
	beta, err := streamable(t, hs, "token-of-beta", nil)
	if err != nil {
		t.Fatal(err)
	}
	// An MCP session is its tenant's: beta's token naming acme's is
	// refused, as a bearer token or as the Anthropic SDKs' x-api-key.
	for _, auth := range [][2]string{{"Authorization", "Bearer token-of-beta"}, {"X-Api-Key", "token-of-beta"}, {"X-Api-Key", "token-of-acme"}} {
		req, _ := http.NewRequest("POST", hs.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", acme.ID())
		req.Header.Set("Mcp-Protocol-Version", acme.InitializeResult().ProtocolVersion)
		req.Header.Set(auth[0], auth[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := http.StatusForbidden
		if auth[1] == "token-of-acme" {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("tools/list in acme's MCP session with %s %s: %d %s, want %d", auth[0], auth[1], resp.StatusCode, body, want)
		}
	}
	var s started
	call(t, acme, "start_conversation", map[string]any{"title": "acme's"}, &s)
	var r turnRef
	call(t, acme, "record_exchange", map[string]any{"branch": s.Branch, "user": "The vault code?", "reply": "It is 7f3e91."}, &r)
	var f struct{ ID uint64 }
	call(t, acme, "pin_fact", map[string]any{"branch": s.Branch, "fact": "acme's fact"}, &f)

	named := []struct {
		tool string
		args map[string]any
	}{
		{"list_conversations", map[string]any{"session": s.Session}},
		{"fork", map[string]any{"branch": s.Branch}},
		{"fork", map[string]any{"branch": s.Branch, "at_turn": r.Turn}},
		{"record_exchange", map[string]any{"branch": s.Branch, "user": "beta's", "reply": "x"}},
		{"search_memory", map[string]any{"branch": s.Branch, "query": "vault code"}},
		{"search_memory", map[string]any{"session": s.Session, "query": "vault code"}},
		{"get_context", map[string]any{"branch": s.Branch, "message": "vault code?"}},
		{"get_history", map[string]any{"branch": s.Branch}},
		{"get_turn", map[string]any{"branch": s.Branch, "turn": r.Turn}},
		{"get_turn", map[string]any{"branch": s.Branch, "seq": 1}},
		{"pin_fact", map[string]any{"branch": s.Branch, "fact": "beta's fact"}},
		{"unpin_fact", map[string]any{"branch": s.Branch, "id": f.ID}},
		{"edit_fact", map[string]any{"branch": s.Branch, "id": f.ID, "fact": "edited by beta"}},
		{"list_facts", map[string]any{"branch": s.Branch}},
		{"commit_pending", map[string]any{"branch": s.Branch}},
	}
	tools, err := beta.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{"start_conversation": true} // names no id
	for _, c := range named {
		checked[c.tool] = true
		if msg := callErr(t, beta, c.tool, c.args); !strings.Contains(msg, "not found") || strings.Contains(msg, "7f3e91") {
			t.Errorf("beta's %s of acme's ids = %q, want not found", c.tool, msg)
		}
	}
	for _, tl := range tools.Tools {
		if !checked[tl.Name] {
			t.Errorf("tool %s is not checked across tenants: add it to this test", tl.Name)
		}
	}
	var list struct{ Sessions []struct{ ID string } }
	call(t, beta, "list_conversations", nil, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("beta's list_conversations = %+v, want none of acme's", list)
	}
	for _, what := range []string{"summary", "facts"} {
		uri := "ctxinf://branches/" + s.Branch + "/" + what
		if _, err := beta.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("beta reads acme's %s: no error", uri)
		}
		if err := beta.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err == nil {
			t.Errorf("beta subscribes to acme's %s: no error", uri)
		}
		if _, err := acme.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err != nil {
			t.Errorf("acme reads its %s: %v", uri, err)
		}
	}
	// acme's conversation is as acme left it.
	var facts struct{ Facts []struct{ Fact string } }
	call(t, acme, "list_facts", map[string]any{"branch": s.Branch}, &facts)
	if len(facts.Facts) != 1 || facts.Facts[0].Fact != "acme's fact" {
		t.Errorf("acme's facts after beta's calls = %+v", facts)
	}
	call(t, acme, "list_conversations", nil, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("acme's sessions after beta's calls = %+v, want 1", list)
	}
	branchID, _ := messages.ParseID[messages.BranchID](s.Branch)
	if info, err := b.rt.Inspect(context.Background(), branchID); err != nil || info.TurnSeq != 1 {
		t.Errorf("acme's branch after beta's calls: turn seq %d, %v; want 1", info.TurnSeq, err)
	}
}
