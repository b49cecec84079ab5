package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// The OpenAPI document and the routes served are the same set.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: %v (version %q)", err, doc.OpenAPI)
	}
	inDoc := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			inDoc[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, r := range routes {
		served[r.method+" "+r.path] = true
		if !inDoc[r.method+" "+r.path] {
			t.Errorf("route %s %s is not in openapi.json", r.method, r.path)
		}
	}
	for op := range inDoc {
		if !served[op] {
			t.Errorf("openapi.json lists %s, which is not served", op)
		}
	}
}

// Every schema of the document that stands for a Go type the API writes
// names exactly that type's JSON fields.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	types := map[string]reflect.Type{
		"Session": reflect.TypeFor[client.Session](), "Branch": reflect.TypeFor[client.Branch](),
		"BranchInfo": reflect.TypeFor[client.BranchInfo](), "TurnResult": reflect.TypeFor[client.TurnResult](),
		"HistoryEntry": reflect.TypeFor[client.HistoryEntry](), "TurnRow": reflect.TypeFor[client.Turn](), // a turn row as the API writes it (wire.Turn)
		"TurnInfo": reflect.TypeFor[client.TurnInfo](), "StepInfo": reflect.TypeFor[client.StepInfo](),
		"PendingTurn": reflect.TypeFor[client.PendingTurn](), "Imported": reflect.TypeFor[client.Imported](),
		"Hit": reflect.TypeFor[client.Hit](), "Chunk": reflect.TypeFor[persistence.ChunkRow](), "ChunkInfo": reflect.TypeFor[client.ChunkInfo](),
		"ContextDebug": reflect.TypeFor[actors.ContextDebug](), "PartialOutput": reflect.TypeFor[client.PartialOutput](),
		"Report": reflect.TypeFor[client.Report](),
		"Pin":    reflect.TypeFor[client.Pin](), "Deleted": reflect.TypeFor[client.Deleted](),
		"Retention": reflect.TypeFor[client.Retention](),
		// The OpenAI proxy's answers.
		"ChatCompletion": reflect.TypeFor[chatCompletion](), "ChatChoice": reflect.TypeFor[chatChoice](),
		"ChatReply": reflect.TypeFor[chatReply](), "ChatToolCall": reflect.TypeFor[chatToolCall](),
		"ChatUsage": reflect.TypeFor[chatUsage](), "Response": reflect.TypeFor[response](),
		"ResponseMessage": reflect.TypeFor[responseMessage](), "ResponseFunctionCall": reflect.TypeFor[responseFunctionCall](),
		"ResponseUsage": reflect.TypeFor[responseUsage](),
		// The Messages API's answer (Anthropic's shape).
		"AnthropicMessage": reflect.TypeFor[anthropicResponse](),
	}
	for name, typ := range types {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("openapi.json has no schema %s (%s)", name, typ)
			continue
		}
		want := jsonFields(typ)
		for f := range want {
			if _, ok := schema.Properties[f]; !ok {
				t.Errorf("schema %s lacks %s's field %q", name, typ, f)
			}
		}
		for f := range schema.Properties {
			if !want[f] {
				t.Errorf("schema %s has %q, which %s does not write", name, f, typ)
			}
		}
	}
	for name := range doc.Components.Schemas {
		if _, ok := types[name]; !ok && name != "Error" {
			t.Errorf("schema %s is not checked against a type: add it to this test", name)
		}
	}
}

// checkSchema checks that the string values of v match the patterns of
// the openapi.json schema name, following $refs and arrays.
func checkSchema(t *testing.T, where, name string, v map[string]any) {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]schemaDoc `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	var check func(name string, v map[string]any)
	check = func(name string, v map[string]any) {
		for prop, sch := range doc.Components.Schemas[name].Properties {
			val, ok := v[prop]
			if !ok {
				continue
			}
			ref := strings.TrimPrefix(sch.Ref, "#/components/schemas/")
			switch val := val.(type) {
			case string:
				if sch.Pattern != "" && !regexp.MustCompile(sch.Pattern).MatchString(val) {
					t.Errorf("%s: %s.%s = %q does not match %s", where, name, prop, val, sch.Pattern)
				}
			case map[string]any:
				if ref != "" {
					check(ref, val)
				}
			case []any:
				item := strings.TrimPrefix(sch.Items.Ref, "#/components/schemas/")
				for _, e := range val {
					if m, ok := e.(map[string]any); ok && item != "" {
						check(item, m)
					}
				}
			}
		}
	}
	check(name, v)
}

type schemaDoc struct {
	Properties map[string]struct {
		Ref     string `json:"$ref"`
		Pattern string `json:"pattern"`
		Items   struct {
			Ref string `json:"$ref"`
		} `json:"items"`
	} `json:"properties"`
}

// jsonFields returns the names encoding/json gives typ's fields,
// embedded structs' included.
func jsonFields(typ reflect.Type) map[string]bool {
	out := map[string]bool{}
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported():
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, jsonFields(f.Type))
		case name == "":
			out[f.Name] = true
		default:
			out[name] = true
		}
	}
	return out
}

type testServer struct {
	*httptest.Server
	rt *actors.Runtime
}

func newTestServer(t *testing.T, opts Options, delay time.Duration) *testServer {
	t.Helper()
	return newTestServerWith(t, opts, delay, nil)
}

// newTestServerWith is newTestServer with the runtime's configuration
// changed by edit, if not nil.
func newTestServerWith(t *testing.T, opts Options, delay time.Duration, edit func(*actors.Config)) *testServer {
	t.Helper()
	return newTestServerOpts(t, testOptions(opts), delay, edit)
}

// testOptions are the server's options of config.yaml's defaults
// (OptionsOf(config.Default().Server)) with the fields over sets (those
// not zero) in their place.
func testOptions(over Options) Options {
	opts := OptionsOf(config.Default().Server)
	o, v := reflect.ValueOf(&opts).Elem(), reflect.ValueOf(over)
	for i := range v.NumField() {
		if !v.Field(i).IsZero() {
			o.Field(i).Set(v.Field(i))
		}
	}
	return opts
}

// mustNew is New over rt with testOptions(over).
func mustNew(t *testing.T, rt *actors.Runtime, over Options) *Server {
	t.Helper()
	s, err := New(rt, testOptions(over))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newTestServerOpts is newTestServerWith with the server's options opts
// as they are.
func newTestServerOpts(t *testing.T, opts Options, delay time.Duration, edit func(*actors.Config)) *testServer {
	t.Helper()
	store := badgerdb.TestOptions("")
	store.Durability = persistence.DurabilityRelaxed
	cfg := actors.Config{DataDir: t.TempDir(), Store: store,
		Provider: local.New(local.Options{Delay: delay}), Model: "local", Fold: &core.Policy{},
		RequestTimeout: 10 * time.Second, Logger: zerolog.Nop()}
	if edit != nil {
		edit(&cfg)
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
		opts.Metrics.Hook(&cfg)
	}
	rt, err := actors.Open(context.Background(), wiring.Fill(cfg))
	if err != nil {
		t.Fatal(err)
	}
	opts.Metrics.Runtime(rt)
	s, err := New(rt, opts)
	if err != nil {
		rt.Close()
		t.Fatal(err)
	}
	ts := &testServer{Server: httptest.NewServer(s), rt: rt}
	t.Cleanup(func() {
		ts.Close()
		rt.Close()
	})
	return ts
}

// call sends a JSON request and decodes the JSON answer into out (if not
// nil); it returns the status.
func (ts *testServer) call(t *testing.T, method, path string, body any, out any, headers ...string) int {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, ts.URL+path, rd)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// TestGetTurnListsItsChunks: GET turn answers the chunks the turn was
// indexed into, with their text and where it is from; a pending turn
// (not indexed yet) answers an empty list, not a missing one.
func TestGetTurnListsItsChunks(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	var created struct{ Branch persistence.BranchRow }
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "chunks"}, &created); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := "/v1/branches/" + created.Branch.ID.String()
	const said = "The deploy target is eu-west-1, and the database runs on port 5433."
	var res client.TurnResult
	if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": said}, &res); st != 200 {
		t.Fatalf("turn: %d %+v", st, res)
	}
	var raw map[string]json.RawMessage
	if st := ts.call(t, "GET", b+"/turns/1", nil, &raw); st != 200 || string(raw["chunks"]) != "[]" {
		t.Fatalf("GET a pending turn: %d, chunks %s, want []", st, raw["chunks"])
	}
	if st := ts.call(t, "POST", b+"/commit", nil, nil); st != 202 {
		t.Fatalf("commit: %d", st)
	}
	if err := ts.rt.Settle(context.Background(), created.Branch.ID); err != nil {
		t.Fatal(err)
	}
	var turn client.TurnInfo
	if st := ts.call(t, "GET", b+"/turns/1", nil, &turn); st != 200 || len(turn.Chunks) == 0 {
		t.Fatalf("GET an indexed turn: %d, %d chunks, want some (phase %s)", st, len(turn.Chunks), turn.Phase)
	}
	if first := turn.Chunks[0]; first.Node != res.Turn || said[first.Start:first.End] != first.Text {
		t.Errorf("first chunk %+v: want the user message's text at its offsets", first)
	}
	var found bool
	for _, c := range turn.Chunks {
		if c.ID.IsZero() || c.Seq != 1 || c.Text == "" || c.TokenEst <= 0 || c.Type == 0 ||
			(c.Node != res.Turn && c.Node != turn.Reply) {
			t.Errorf("chunk %+v: want an id, seq 1, text, tokens, a type and the turn's message or reply as node", c)
		}
		found = found || strings.Contains(c.Text, "eu-west-1")
	}
	if !found {
		t.Errorf("no chunk holds the turn's text: %+v", turn.Chunks)
	}
	var schema map[string]any
	ts.call(t, "GET", b+"/turns/1", nil, &schema)
	checkSchema(t, "GET turn", "TurnInfo", schema)
}

type apiErr struct {
	Error struct{ Code, Message string }
}

func TestAPI(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	var created struct {
		Session persistence.SessionRow
		Branch  persistence.BranchRow
	}
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "demo"}, &created); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := "/v1/branches/" + created.Branch.ID.String()
	var res client.TurnResult
	if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": "The deploy target is eu-west-1."}, &res); st != 200 ||
		res.Phase.String() != "response_finalized" || !strings.Contains(res.Reply, "[local]") || res.Durable == 0 {
		t.Fatalf("turn: %d %+v", st, res)
	}
	// Streaming: turn, deltas with counters, done.
	req, _ := http.NewRequest("POST", ts.URL+b+"/turns", strings.NewReader(`{"text":"Where do we deploy?","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %v %v", resp, err)
	}
	var events []string
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, ev)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && events[len(events)-1] == "delta" {
			var d struct {
				Text               string
				Displayed, Durable uint64
			}
			_ = json.Unmarshal([]byte(data), &d)
			text.WriteString(d.Text)
		}
	}
	resp.Body.Close()
	if len(events) < 3 || events[0] != "turn" || events[len(events)-1] != "done" || !strings.Contains(text.String(), "Where do we deploy?") {
		t.Fatalf("events %v, text %q", events, text.String())
	}
	var info client.BranchInfo
	if st := ts.call(t, "GET", b, nil, &info); st != 200 || info.TurnSeq != 2 || info.Branch.ID != created.Branch.ID {
		t.Fatalf("branch: %d %+v", st, info)
	}
	var hist struct{ Entries []client.HistoryEntry }
	if st := ts.call(t, "GET", b+"/history?limit=10", nil, &hist); st != 200 || len(hist.Entries) != 4 ||
		hist.Entries[0].Message.RenderedText != "The deploy target is eu-west-1." {
		t.Fatalf("history: %d %+v", st, hist)
	}
	if st := ts.call(t, "POST", b+"/pins", map[string]string{"fact": "answer briefly"}, nil); st != 201 {
		t.Fatalf("pin: %d", st)
	}
	if st := ts.call(t, "POST", b+"/commit", nil, nil); st != 202 {
		t.Fatalf("commit: %d", st)
	}
	if err := ts.rt.Settle(context.Background(), created.Branch.ID); err != nil {
		t.Fatal(err)
	}
	var hits struct {
		Hits []actors.Hit
	}
	if st := ts.call(t, "POST", b+"/search", map[string]any{"query": "deploy target eu-west-1", "k": 3}, &hits); st != 200 ||
		len(hits.Hits) == 0 || !strings.Contains(hits.Hits[0].Chunk.Text, "eu-west-1") {
		t.Fatalf("search: %d %+v", st, hits)
	}
	var dbg actors.ContextDebug
	if st := ts.call(t, "GET", b+"/context?turn="+res.Turn.String(), nil, &dbg); st != 200 || !dbg.Matches {
		t.Fatalf("context debug: %d matches %v", st, dbg.Matches)
	}
	var fork persistence.BranchRow
	if st := ts.call(t, "POST", b+"/forks", map[string]string{"label": "alt"}, &fork); st != 201 || fork.Parent != created.Branch.ID {
		t.Fatalf("fork: %d %+v", st, fork)
	}
	// A turn before the fork point is on the fork's transcript: GET turn
	// through the fork finds it (its row is the parent's).
	var inherited persistence.TurnRow
	if st := ts.call(t, "GET", "/v1/branches/"+fork.ID.String()+"/turns/"+res.Turn.String(), nil, &inherited); st != 200 ||
		inherited.ID != res.Turn || inherited.Branch != created.Branch.ID {
		t.Fatalf("GET a turn before the fork point through the fork: %d %+v", st, inherited)
	}
	var turn struct {
		persistence.TurnRow
		Steps []json.RawMessage
	}
	if st := ts.call(t, "GET", b+"/turns/"+res.Turn.String(), nil, &turn); st != 200 || turn.Seq != 1 || len(turn.Steps) != 1 {
		t.Fatalf("turn row: %d %+v", st, turn)
	}
	// Answers fit their schemas' patterns (ids, and empty ids where the
	// schema allows them).
	for _, c := range []struct{ path, schema string }{
		{b + "/turns/" + res.Turn.String(), "TurnInfo"}, {b, "BranchInfo"},
		{"/v1/branches/" + fork.ID.String(), "BranchInfo"}, {"/v1/branches/" + fork.ID.String() + "/context", "ContextDebug"},
	} {
		var raw map[string]any
		if st := ts.call(t, "GET", c.path, nil, &raw); st != 200 {
			t.Fatalf("GET %s: %d", c.path, st)
		}
		checkSchema(t, c.path, c.schema, raw)
	}

	// Errors: code, message naming the field or limit, status.
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		code, msg    string
	}{
		{"POST", b + "/turns", map[string]string{"text": ""}, 400, api.CodeInvalid, "text: required"},
		{"POST", b + "/turns", `{"text": 5}`, 400, api.CodeInvalid, `text: want a string, got a number`},
		{"POST", b + "/turns", `{"txt": "hi"}`, 400, api.CodeInvalid, `txt: unknown field; the fields are text, stream`},
		{"POST", "/v1/branches/nope/turns", map[string]string{"text": "hi"}, 400, api.CodeInvalid, "branch: \"nope\" is not a valid id"},
		{"POST", "/v1/branches/01M7ZZZZZZZZZZZZZZZZZZZZZZ/turns", map[string]string{"text": "hi"}, 404, api.CodeNotFound, "branch"},
		{"GET", b + "/history?limit=5000", nil, 400, api.CodeInvalid, "limit: \"5000\", want an integer from 1 to 1000"},
		{"PUT", b + "/model", map[string]string{"model": "gpt-9"}, 400, api.CodeInvalid, `model: "gpt-9" is not configured`},
		{"POST", b + "/cancel", nil, 409, api.CodeConflict, "no turn in flight"},
		{"GET", b + "/turns/01M7ZZZZZZZZZZZZZZZZZZZZZZ", nil, 404, api.CodeNotFound, "turn 01M7ZZZZZZZZZZZZZZZZZZZZZZ on branch"},
		{"GET", "/v1/nothing", nil, 404, api.CodeNotFound, "no route"},
	} {
		var e apiErr
		if st := ts.call(t, tc.method, tc.path, tc.body, &e); st != tc.status || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.msg) {
			t.Errorf("%s %s: %d %+v, want %d %s %q", tc.method, tc.path, st, e, tc.status, tc.code, tc.msg)
		}
	}
	var health map[string]string
	if st := ts.call(t, "GET", "/readyz", nil, &health); st != 200 || health["status"] != "ready" {
		t.Errorf("readyz: %d %v", st, health)
	}
	mresp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{
		`ctxinf_turns_total{event="accepted"} 2`,
		`ctxinf_turns_total{event="finalized_completed"} 2`,
		`ctxinf_http_requests_total{code="201",route="POST /v1/sessions"} 1`,
		`ctxinf_http_requests_total{code="400",route="POST /v1/branches/{branch}/turns"} 4`,
		"ctxinf_step_seconds_count", "ctxinf_context_assembly_seconds_count", "ctxinf_retrieval_seconds_count",
		`ctxinf_summaries_total{result="committed"}`, "ctxinf_journal_bytes_total", "ctxinf_actor_restarts_total 0",
		"ctxinf_indexed_chunks_total", "ctxinf_store_sync_seconds_count",
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// A second turn while one streams is refused with 409; a body over the
// limit with 413; past the in-flight limit with 429 and Retry-After.
func TestAPILimits(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{MaxBodyBytes: 1024, MaxInFlight: 1}, 20*time.Millisecond)
	var created struct{ Branch persistence.BranchRow }
	ts.call(t, "POST", "/v1/sessions", map[string]string{}, &created)
	b := "/v1/branches/" + created.Branch.ID.String()
	req, _ := http.NewRequest("POST", ts.URL+b+"/turns", strings.NewReader(`{"text":"a slow turn please","stream":true}`))
	resp, err := http.DefaultClient.Do(req) // streams for a while: holds the one slot
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e apiErr
	r2, _ := http.NewRequest("GET", ts.URL+"/v1/sessions", nil)
	resp2, err := http.DefaultClient.Do(r2)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp2.Body).Decode(&e)
	resp2.Body.Close()
	if resp2.StatusCode != 429 || e.Error.Code != api.CodeOverloaded || resp2.Header.Get("Retry-After") == "" {
		t.Errorf("over the in-flight limit: %d %+v", resp2.StatusCode, e)
	}
	// The busy branch, through the runtime (the server's one slot is taken).
	if _, err := ts.rt.Submit(context.Background(), created.Branch.ID, "another"); !errors.Is(err, core.ErrBusy) {
		t.Errorf("second turn: %v", err)
	} else if ae := classify(err); ae.Status != 409 || ae.Code != api.CodeBusy {
		t.Errorf("busy maps to %+v", ae)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // the turn ends
	big := `{"text":"` + strings.Repeat("x", 2000) + `"}`
	if st := ts.call(t, "POST", b+"/turns", big, &e); st != 413 || e.Error.Code != api.CodeTooLarge || !strings.Contains(e.Error.Message, "1024 bytes") {
		t.Errorf("too large: %d %+v", st, e)
	}
}

func TestAPIAuthAndBind(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Tokens: []string{"s3cret"}}, 0)
	var e apiErr
	if st := ts.call(t, "GET", "/v1/sessions", nil, &e); st != 401 || e.Error.Code != api.CodeUnauthorized {
		t.Errorf("no token: %d %+v", st, e)
	}
	if st := ts.call(t, "GET", "/v1/sessions", nil, nil, "Authorization", "Bearer s3cret"); st != 200 {
		t.Errorf("with the token: %d", st)
	}
	if st := ts.call(t, "GET", "/healthz", nil, nil); st != 200 {
		t.Errorf("health needs no token: %d", st)
	}
	s := mustNew(t, ts.rt, Options{Addr: "0.0.0.0:0"})
	if _, err := s.Listen(); !errors.Is(err, ErrPublicBind) {
		t.Errorf("binding 0.0.0.0 without tokens: %v", err)
	}
	s = mustNew(t, ts.rt, Options{Addr: "127.0.0.1:0"})
	l, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// An export imported again is the same conversation in a new session.
func TestExportImport(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	var created struct {
		Session persistence.SessionRow
		Branch  persistence.BranchRow
	}
	ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "orig"}, &created)
	b := "/v1/branches/" + created.Branch.ID.String()
	for _, text := range []string{"first question", "second question"} {
		ts.call(t, "POST", b+"/turns", map[string]string{"text": text}, nil)
	}
	resp, err := http.Get(ts.URL + "/v1/sessions/" + created.Session.ID.String() + "/export")
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// session, branch, two turns (and the states folding them, if
	// committed already), head, end
	if lines := strings.Count(string(export), "\n"); lines < 6 {
		t.Fatalf("export has %d lines:\n%s", lines, export)
	}
	var imported struct {
		Session persistence.SessionRow
		Branch  persistence.BranchRow
		Turns   int
	}
	if st := ts.call(t, "POST", "/v1/sessions/import", string(export), &imported); st != 201 || imported.Turns != 2 || imported.Session.Title != "orig" {
		t.Fatalf("import: %d %+v", st, imported)
	}
	var hist struct{ Entries []client.HistoryEntry }
	ts.call(t, "GET", "/v1/branches/"+imported.Branch.ID.String()+"/history", nil, &hist)
	var got []string
	for _, e := range hist.Entries {
		got = append(got, e.Message.RenderedText)
	}
	if len(got) != 4 || got[0] != "first question" || got[2] != "second question" || !strings.Contains(got[1], "[local]") {
		t.Errorf("imported history %q", got)
	}
	var e apiErr
	if st := ts.call(t, "POST", "/v1/sessions/import", `{"type":"weird"}`, &e); st != 400 || !strings.Contains(e.Error.Message, `line 1: type "weird"`) {
		t.Errorf("bad import: %d %+v", st, e)
	}

}

// The store's sync times reach /metrics as a histogram: cumulative
// buckets in seconds, the count and the sum.
func TestSyncHistogram(t *testing.T) {
	t.Parallel()
	st := persistence.Stats{SyncTime: 30 * time.Millisecond}
	st.SyncTimes[0], st.SyncTimes[persistence.SyncTimeBucket(3*time.Millisecond)], st.SyncTimes[len(st.SyncTimes)-1] = 4, 2, 1
	reg := prometheus.NewRegistry()
	reg.MustRegister(syncCollector{stats: func() persistence.Stats { return st }})
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("Gather = %v, %v", mfs, err)
	}
	h := mfs[0].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 7 || h.GetSampleSum() != 0.03 {
		t.Errorf("count %d sum %v, want 7 and 0.03", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{0.00025: 4, 0.0005: 4, 0.001: 4, 0.002: 4, 0.004: 6, 0.064: 6}
	for _, b := range h.GetBucket() {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket <= %vs holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
}

// A handler that cuts its connection partway (an export whose read
// failed after its first line) is counted as aborted, not by the status
// it had written; the client does not get a whole body.
func TestAbortedRequestsAreCounted(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	s := &Server{opts: Options{Metrics: m}}
	ts := httptest.NewServer(s.instrument("GET /cut", func(_ *Server, w http.ResponseWriter, _ *http.Request) error {
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "{\"first\":1}\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer ts.Close()
	resp, err := http.Get(ts.URL)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("the client read a whole body from a handler that cut its connection")
	}
	if n := testutil.ToFloat64(m.httpRequests.WithLabelValues("GET /cut", "aborted")); n != 1 {
		t.Errorf("aborted requests counted: %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.httpRequests.WithLabelValues("GET /cut", "200")); n != 0 {
		t.Errorf("the aborted request was also counted as 200 (%v)", n)
	}
}

// New takes no defaults: options with a limit unset or out of range are
// refused, each such field named; config.yaml's defaults (OptionsOf) are
// accepted.
func TestNewRefusesUnsetLimits(t *testing.T) {
	t.Parallel()
	_, err := New(nil, Options{ProxyQueue: -1, ProxyCommitWithin: -time.Second})
	if err == nil {
		t.Fatal("New(Options{}) = nil error, want the unset limits named")
	}
	for _, field := range []string{"MaxBodyBytes", "MaxInFlight", "ReadHeaderTimeout", "IdleTimeout", "ReadBodyTimeout",
		"ProxyQueueWait", "ProxyMaxImport", "ProxyQueue", "ProxyCommitWithin"} {
		if !strings.Contains(err.Error(), "Options."+field+":") {
			t.Errorf("New(Options{}) = %v, want it to name %s", err, field)
		}
	}
	if _, err := New(nil, OptionsOf(config.Default().Server)); err != nil {
		t.Errorf("New(OptionsOf(config.Default().Server)) = %v, want nil", err)
	}
}

// OptionsOf maps every key of the server section but those the command
// resolves itself (the tokens' variables, the frame protocol's address,
// the drain of a shutdown): a key added to config.ServerConfig and not
// mapped fails here.
func TestOptionsOfMapsTheServerSection(t *testing.T) {
	t.Parallel()
	commands := map[string]bool{"TokensEnv": true, "Tenants": true, "FrameAddr": true, "Drain": true}
	base := config.Default().Server
	want := OptionsOf(base)
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if commands[name] {
			continue
		}
		c := base
		f := reflect.ValueOf(&c).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		default:
			t.Fatalf("config.ServerConfig.%s: a %s, which this test does not change: teach it", name, f.Kind())
		}
		if reflect.DeepEqual(OptionsOf(c), want) {
			t.Errorf("OptionsOf ignores config.ServerConfig.%s", name)
		}
	}
}
