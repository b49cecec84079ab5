package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// tenantMarker is the text only tenant acme's conversations hold.
const tenantMarker = "acme-secret-7f3e91"

const (
	tokAcme = "token-of-acme"
	tokBeta = "token-of-beta"
)

// newTenantServer is a server with the tenants acme and beta (and the
// default tenant's token "token-of-default").
func newTenantServer(t *testing.T) *testServer {
	t.Helper()
	return newTestServerWith(t, Options{Tokens: []string{"token-of-default"}, Tenants: []Tenant{
		{Name: "acme", Tokens: []string{tokAcme}}, {Name: "beta", Tokens: []string{tokBeta, "second-token-of-beta"}},
	}}, 0, func(c *actors.Config) {
		c.Models = map[string]actors.Model{"other": {Provider: local.New(local.Options{}), ID: "local"}}
	})
}

// send is a request with token as its bearer token; it returns the
// status, the body and the headers.
func (ts *testServer) send(t *testing.T, token, method, path, body string, headers ...string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, ts.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), resp.Header
}

// acmeWorld is what tenant acme made: a session with a turn and a pin
// holding tenantMarker, committed and indexed, and a proxied
// conversation under the key "shared-key".
type acmeWorld struct {
	session   messages.SessionID
	branch    messages.BranchID
	turn      messages.TurnID
	pin       uint64
	proxyResp string            // the id of a /v1/responses answer in acme's conversation
	proxyConv messages.BranchID // the branch of acme's conversation "shared-key"
	chatReply string            // the reply to acme's keyless chat, whose transcript beta will send
	chatConv  messages.BranchID
}

func makeAcme(t *testing.T, ts *testServer) acmeWorld {
	t.Helper()
	var w acmeWorld
	st, body, _ := ts.send(t, tokAcme, "POST", "/v1/sessions", `{"title":"acme's"}`)
	var created struct {
		Session persistence.SessionRow
		Branch  persistence.BranchRow
	}
	if st != 201 || json.Unmarshal([]byte(body), &created) != nil || created.Session.Tenant != "acme" {
		t.Fatalf("acme creates a session: %d %s", st, body)
	}
	w.session, w.branch = created.Session.ID, created.Branch.ID
	b := "/v1/branches/" + w.branch.String()
	var res client.TurnResult
	st, body, _ = ts.send(t, tokAcme, "POST", b+"/turns", `{"text":"The vault code is `+tenantMarker+`."}`)
	if st != 200 || json.Unmarshal([]byte(body), &res) != nil {
		t.Fatalf("acme's turn: %d %s", st, body)
	}
	w.turn = res.Turn
	var pin client.Pin
	st, body, _ = ts.send(t, tokAcme, "POST", b+"/pins", `{"fact":"remember `+tenantMarker+`"}`)
	if st != 201 || json.Unmarshal([]byte(body), &pin) != nil {
		t.Fatalf("acme's pin: %d %s", st, body)
	}
	w.pin = pin.ID
	if st, body, _ = ts.send(t, tokAcme, "POST", b+"/commit", ""); st != 202 {
		t.Fatalf("acme's commit: %d %s", st, body)
	}
	if err := ts.rt.Settle(context.Background(), w.branch); err != nil {
		t.Fatal(err)
	}
	var hits struct{ Hits []actors.Hit }
	st, body, _ = ts.send(t, tokAcme, "POST", b+"/search", `{"query":"vault code `+tenantMarker+`"}`)
	if st != 200 || json.Unmarshal([]byte(body), &hits) != nil || len(hits.Hits) == 0 {
		t.Fatalf("acme's search finds nothing of its own: %d %s", st, body)
	}

	// A proxied conversation under a key, and a keyless one.
	st, body, h := ts.send(t, tokAcme, "POST", "/v1/responses",
		`{"model":"local","input":"The launch code is `+tenantMarker+`.","user":"shared-key"}`)
	var resp struct{ ID string }
	if st != 200 || json.Unmarshal([]byte(body), &resp) != nil || !strings.HasPrefix(resp.ID, "resp_") {
		t.Fatalf("acme's proxied response: %d %s", st, body)
	}
	w.proxyResp = resp.ID
	if w.proxyConv, _ = messages.ParseID[messages.BranchID](h.Get(ProxyBranchHeader)); w.proxyConv.IsZero() {
		t.Fatalf("acme's proxied response names no branch: %v", h)
	}
	st, body, h = ts.send(t, tokAcme, "POST", "/v1/chat/completions",
		`{"model":"local","messages":[{"role":"user","content":"Keyless `+tenantMarker+`"}]}`)
	var chat struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if st != 200 || json.Unmarshal([]byte(body), &chat) != nil || len(chat.Choices) != 1 {
		t.Fatalf("acme's keyless chat: %d %s", st, body)
	}
	w.chatReply = chat.Choices[0].Message.Content
	w.chatConv, _ = messages.ParseID[messages.BranchID](h.Get(ProxyBranchHeader))
	return w
}

// tenantBodies are valid bodies of the routes that take one, so that a
// route that forgot the tenant would answer 2xx, not 400.
var tenantBodies = map[string]string{
	"POST /v1/branches/{branch}/forks":       `{"label":"stolen"}`,
	"POST /v1/branches/{branch}/turns":       `{"text":"what is the vault code?"}`,
	"POST /v1/branches/{branch}/exchanges":   `{"user":"what is the vault code?","reply":"beta's"}`,
	"POST /v1/branches/{branch}/pins":        `{"fact":"a pin of beta's"}`,
	"PUT /v1/branches/{branch}/pins/{pin}":   `{"fact":"edited by beta"}`,
	"POST /v1/branches/{branch}/search":      `{"query":"vault code"}`,
	"PUT /v1/branches/{branch}/model":        `{"model":"other"}`,
	"PUT /v1/branches/{branch}/memory_tools": `{"memory_tools":"on"}`,
	"PUT /v1/sessions/{session}/retention":   `{"idle":"1d"}`,
	"POST /v1/sessions":                      `{"title":"beta's"}`,
	"POST /v1/embeddings":                    `{"input":"hello","model":"local"}`,
	"POST /v1/chat/completions":              `{"model":"local","messages":[{"role":"user","content":"hello from beta"}],"user":"shared-key"}`,
	"POST /v1/responses":                     `{"model":"local","input":"hello from beta","user":"shared-key"}`,
	"POST /v1/messages":                      `{"model":"local","max_tokens":64,"messages":[{"role":"user","content":"hello from beta"}],"metadata":{"user_id":"shared-key"}}`,
	"POST /v1/messages/count_tokens":         `{"model":"local","messages":[{"role":"user","content":"hello from beta"}],"metadata":{"user_id":"shared-key"}}`,
	"GET /v1/branches/{branch}/history":      ``,
	"GET /v1/branches/{branch}/context":      ``,
	"GET /v1/sessions/{session}/export":      ``,
	"GET /v1/sessions/{session}/branches":    ``,
	"POST /v1/branches/{branch}/commit":      ``,
	"POST /v1/branches/{branch}/cancel":      ``,
	"GET /v1/branches/{branch}/turns/{turn}": ``,
}

// apiOps are the operations of the OpenAPI document, "METHOD path",
// sorted with the DELETEs last (so that a walk that carries them out
// deletes a pin after it edited it).
func apiOps(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for path, methods := range doc.Paths {
		for m := range methods {
			ops = append(ops, strings.ToUpper(m)+" "+path)
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		di, dj := strings.HasPrefix(ops[i], "DELETE "), strings.HasPrefix(ops[j], "DELETE ")
		if di != dj {
			return dj
		}
		return ops[i] < ops[j]
	})
	return ops
}

// fill puts w's ids in path's parameters; ok is false for a parameter
// it does not know.
func (w acmeWorld) fill(path string) (string, bool) {
	r := strings.NewReplacer("{session}", w.session.String(), "{branch}", w.branch.String(),
		"{turn}", w.turn.String(), "{pin}", strconv.FormatUint(w.pin, 10), "{response}", w.proxyResp, "{model}", "default")
	out := r.Replace(path)
	return out, !strings.Contains(out, "{")
}

// Every route of the OpenAPI document, called by tenant beta with tenant
// acme's ids, answers 404 exactly as for an id that does not exist, and
// says nothing of acme's; the routes without ids leave acme's sessions
// out (lists) or are acme-blind (the proxy finds beta's own
// conversations only); and acme's session is as acme left it. The same
// walk with acme's token finds every id (no 404): the 404s are the
// tenant's, not the requests'.
func TestTenantsNeverSeeEachOther(t *testing.T) {
	t.Parallel()
	ts := newTenantServer(t)
	w := makeAcme(t, ts)
	missing := acmeWorld{session: messages.NewID[messages.SessionID](time.Now()), branch: messages.NewID[messages.BranchID](time.Now()),
		turn: w.turn, pin: w.pin, proxyResp: "resp_" + messages.NewID[messages.TurnID](time.Now()).String()}

	// The routes with no id, each with what it must (not) show beta.
	noID := map[string]func(st int, body string, h http.Header){
		"GET /healthz": nil, "GET /readyz": nil, "GET /openapi.json": nil, "GET /metrics": nil, "GET /v1/models": nil,
		"GET /v1/models/{model}": nil, // the server's models are every tenant's
		"POST /v1/messages/count_tokens": func(st int, body string, h http.Header) {
			if b := h.Get(ProxyBranchHeader); st != 200 || b == w.proxyConv.String() || b == w.branch.String() {
				t.Errorf("beta counts tokens under acme's key: %d branch %q %s, want 200 on none of acme's", st, b, body)
			}
		},
		"POST /v1/embeddings": nil,
		"POST /v1/sessions": func(st int, body string, _ http.Header) {
			if st != 201 || !strings.Contains(body, `"tenant":"beta"`) {
				t.Errorf("beta creates a session: %d %s, want 201 owned by beta", st, body)
			}
		},
		"GET /v1/sessions": func(st int, body string, _ http.Header) {
			var list struct{ Sessions []persistence.SessionRow }
			if st != 200 || json.Unmarshal([]byte(body), &list) != nil || slices.ContainsFunc(list.Sessions,
				func(s persistence.SessionRow) bool { return s.Tenant != "beta" }) {
				t.Errorf("beta lists sessions: %d %s, want beta's only", st, body)
			}
		},
		"GET /v1/inspect": func(st int, body string, _ http.Header) {
			if st != 200 || strings.Contains(body, w.session.String()) || strings.Contains(body, w.branch.String()) {
				t.Errorf("beta inspects: %d %s, want none of acme's sessions", st, body)
			}
		},
		"POST /v1/sessions/import": nil, // below: it needs an export
	}
	proxyCheck := func(op string) func(st int, body string, h http.Header) {
		return func(st int, body string, h http.Header) {
			b := h.Get(ProxyBranchHeader)
			if st != 200 || b == "" || b == w.proxyConv.String() || b == w.branch.String() {
				t.Errorf("%s by beta under acme's key: %d branch %q %s, want 200 on a conversation of beta's (acme's is %s)",
					op, st, b, body, w.proxyConv)
			}
		}
	}
	for _, op := range []string{"POST /v1/chat/completions", "POST /v1/responses", "POST /v1/messages"} {
		noID[op] = proxyCheck(op)
	}

	for _, op := range apiOps(t) {
		method, path, _ := strings.Cut(op, " ")
		filled, ok := w.fill(path)
		if !ok {
			t.Errorf("%s: a path parameter this test does not know: add it to acmeWorld.fill", op)
			continue
		}
		if _, noTenant := noID[op]; noTenant || filled == path { // no id of a tenant's
			check, known := noID[op]
			if !known {
				t.Errorf("%s: a route without ids this test does not know: say what beta may see of acme's through it", op)
				continue
			}
			if op == "POST /v1/sessions/import" {
				continue
			}
			st, body, h := ts.send(t, tokBeta, method, filled, tenantBodies[op])
			if strings.Contains(body, tenantMarker) {
				t.Errorf("%s by beta: %d, the answer holds acme's text: %s", op, st, body)
			}
			if check != nil {
				check(st, body, h)
			}
			continue
		}
		st, body, _ := ts.send(t, tokBeta, method, filled, tenantBodies[op])
		var e apiErr
		if st != 404 || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != api.CodeNotFound || strings.Contains(body, tenantMarker) {
			t.Errorf("%s with acme's ids by beta: %d %s, want 404 not_found", op, st, body)
			continue
		}
		// The same answer as for ids that do not exist: beta cannot tell
		// acme's ids from none.
		mfilled, _ := missing.fill(path)
		mst, mbody, _ := ts.send(t, tokBeta, method, mfilled, tenantBodies[op])
		want := strings.NewReplacer(missing.session.String(), w.session.String(), missing.branch.String(), w.branch.String(),
			missing.proxyResp, w.proxyResp).Replace(mbody)
		if mst != st || want != body {
			t.Errorf("%s by beta: acme's ids answer %d %s, ids that do not exist %d %s: want the same", op, st, body, mst, mbody)
		}
	}

	// The proxy's other ways to a conversation: acme's branch named, a
	// previous response of acme's, acme's transcript sent back.
	for _, c := range []struct{ name, path, body string }{
		{"X-Ctx-Branch", "/v1/chat/completions", `{"model":"local","messages":[{"role":"user","content":"hi"}]}`},
		{"previous_response_id", "/v1/responses", `{"model":"local","input":"and now?","previous_response_id":"` + w.proxyResp + `"}`},
		{"previous_response_id of an HTTP turn", "/v1/responses", `{"model":"local","input":"and now?","previous_response_id":"resp_` + w.turn.String() + `"}`},
	} {
		var hs []string
		if c.name == "X-Ctx-Branch" {
			hs = []string{ProxyBranchHeader, w.branch.String()}
		}
		st, body, _ := ts.send(t, tokBeta, "POST", c.path, c.body, hs...)
		if st != 404 || strings.Contains(body, tenantMarker) {
			t.Errorf("proxy by %s of acme's, by beta: %d %s, want 404", c.name, st, body)
		}
	}
	// A reference to an item of acme's response is one to an item that
	// does not exist.
	turn, step, _ := parseStepID("resp_", w.proxyResp)
	ref := `{"model":"local","input":[{"type":"item_reference","id":"` + stepID("msg_", turn, step) + `"},{"role":"user","content":"go on"}]}`
	if st, body, _ := ts.send(t, tokBeta, "POST", "/v1/responses", ref); st != 400 || !strings.Contains(body, "input[0].id") ||
		strings.Contains(body, tenantMarker) {
		t.Errorf("beta references acme's response's message: %d %s, want 400 naming input[0].id", st, body)
	}
	// Counting tokens of acme's transcript finds none of acme's
	// conversations either.
	count, _ := json.Marshal(map[string]any{"model": "local", "messages": []map[string]string{
		{"role": "user", "content": "Keyless " + tenantMarker}, {"role": "assistant", "content": w.chatReply}, {"role": "user", "content": "go on"}}})
	if st, body, h := ts.send(t, tokBeta, "POST", "/v1/messages/count_tokens", string(count)); st != 200 || h.Get(ProxyBranchHeader) != "" {
		t.Errorf("beta counts the tokens of acme's keyless transcript: %d, branch %q %s; want 200 on no conversation", st, h.Get(ProxyBranchHeader), body)
	}
	if _, _, h := ts.send(t, tokAcme, "POST", "/v1/messages/count_tokens", string(count)); h.Get(ProxyBranchHeader) != w.chatConv.String() {
		t.Errorf("acme counts the tokens of its keyless transcript: branch %q, want its conversation %s", h.Get(ProxyBranchHeader), w.chatConv)
	}
	transcript, _ := json.Marshal(map[string]any{"model": "local", "messages": []map[string]string{
		{"role": "user", "content": "Keyless " + tenantMarker}, {"role": "assistant", "content": w.chatReply}, {"role": "user", "content": "go on"}}})
	st, body, h := ts.send(t, tokBeta, "POST", "/v1/chat/completions", string(transcript))
	if b := h.Get(ProxyBranchHeader); st != 200 || b == "" || b == w.chatConv.String() {
		t.Errorf("beta sends acme's keyless transcript back: %d, branch %q (acme's %s) %s: want a conversation of beta's", st, b, w.chatConv, body)
	}

	// An export of beta's own imported: beta's, listed for beta alone;
	// the same Idempotency-Key sent by acme makes acme's own import.
	st, body, _ = ts.send(t, tokBeta, "GET", "/v1/sessions", "")
	var list struct{ Sessions []persistence.SessionRow }
	if st != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Sessions) == 0 {
		t.Fatalf("beta's sessions: %d %s", st, body)
	}
	st, export, _ := ts.send(t, tokBeta, "GET", "/v1/sessions/"+list.Sessions[0].ID.String()+"/export", "")
	if st != 200 {
		t.Fatalf("beta exports its own session: %d %s", st, export)
	}
	imported := map[string]messages.SessionID{}
	for _, tok := range []string{tokBeta, tokAcme} {
		st, body, _ := ts.send(t, tok, "POST", importPath, export, IdempotencyKeyHeader, "import-1")
		var out client.Imported
		if st != 201 || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("import: %d %s", st, body)
		}
		imported[tok] = out.Session.ID
	}
	if imported[tokBeta] == imported[tokAcme] {
		t.Errorf("acme's import under beta's Idempotency-Key answered beta's session %s", imported[tokBeta])
	}
	for tok, own := range map[string]messages.SessionID{tokBeta: imported[tokBeta], tokAcme: imported[tokAcme]} {
		other := imported[tokAcme]
		if tok == tokAcme {
			other = imported[tokBeta]
		}
		_, body, _ := ts.send(t, tok, "GET", "/v1/sessions", "")
		if !strings.Contains(body, own.String()) || strings.Contains(body, other.String()) {
			t.Errorf("sessions of %s after the imports: %s; want %s and not %s", tok, body, own, other)
		}
	}

	// Acme's session is as acme left it: one branch, one turn, one pin.
	ctx := context.Background()
	if bs, err := ts.rt.DB().Branches(ctx, w.session); err != nil || len(bs) != 1 {
		t.Errorf("acme's branches after beta's requests: %d, %v; want 1", len(bs), err)
	}
	if info, err := ts.rt.Inspect(ctx, w.branch); err != nil || info.TurnSeq != 1 || info.Model != "" {
		t.Errorf("acme's branch after beta's requests: %+v, %v; want its one turn and its model", info, err)
	}
	if pins, err := ts.rt.Pins(ctx, w.branch); err != nil || len(pins) != 1 || pins[0].Fact != "remember "+tenantMarker {
		t.Errorf("acme's pins after beta's requests: %+v, %v; want its one pin", pins, err)
	}
	if hs := history(t, ts.rt, w.proxyConv); len(hs) != 2 || slices.ContainsFunc(hs, func(s string) bool { return strings.Contains(s, "beta") }) {
		t.Errorf("acme's proxied conversation after beta's requests: %q", hs)
	}

	// The control: acme's token finds every id.
	for _, op := range apiOps(t) {
		method, path, _ := strings.Cut(op, " ")
		filled, _ := w.fill(path)
		if _, noTenant := noID[op]; noTenant || filled == path {
			continue
		}
		if st, body, _ := ts.send(t, tokAcme, method, filled, tenantBodies[op]); st == 404 || st >= 500 {
			t.Errorf("%s by acme on its own ids: %d %s", op, st, body)
		}
	}
}

// A tenant's own branch does not reach another's turns, nodes or chunks
// through the ids it names in a query or a body.
func TestTenantOwnBranchDoesNotReachAnothers(t *testing.T) {
	t.Parallel()
	ts := newTenantServer(t)
	w := makeAcme(t, ts)
	st, body, _ := ts.send(t, tokBeta, "POST", "/v1/sessions", `{}`)
	var created struct{ Branch persistence.BranchRow }
	if st != 201 || json.Unmarshal([]byte(body), &created) != nil {
		t.Fatalf("beta's session: %d %s", st, body)
	}
	b := "/v1/branches/" + created.Branch.ID.String()
	if st, body, _ := ts.send(t, tokBeta, "POST", b+"/turns", `{"text":"hello"}`); st != 200 {
		t.Fatalf("beta's turn: %d %s", st, body)
	}
	var acmeChunk messages.ChunkID
	{
		var hits struct{ Hits []actors.Hit }
		_, body, _ := ts.send(t, tokAcme, "POST", "/v1/branches/"+w.branch.String()+"/search", `{"query":"vault code"}`)
		if json.Unmarshal([]byte(body), &hits) != nil || len(hits.Hits) == 0 {
			t.Fatalf("acme's hits: %s", body)
		}
		acmeChunk = hits.Hits[0].Chunk.ID
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", b + "/turns/" + w.turn.String(), ""},
		{"GET", b + "/history?before=" + w.turn.String(), ""},
		{"GET", b + "/context?turn=" + w.turn.String(), ""},
		{"POST", b + "/forks", `{"at":"` + w.turn.String() + `"}`},
		{"POST", b + "/search", `{"force":true,"chunks":["` + acmeChunk.String() + `"]}`},
	} {
		st, body, _ := ts.send(t, tokBeta, c.method, c.path, c.body)
		if st < 400 || st >= 500 || strings.Contains(body, tenantMarker) {
			t.Errorf("%s %s by beta: %d %s, want a 4xx saying nothing of acme's", c.method, c.path, st, body)
		}
	}
}

// Retrieval never crosses tenants: the same text in two tenants'
// sessions is two chunks, and a search on one tenant's branch finds its
// own only.
func TestTenantRetrievalStaysInItsTenant(t *testing.T) {
	t.Parallel()
	ts := newTenantServer(t)
	text := "The deploy target of project lighthouse is eu-west-1."
	turns := map[string]messages.TurnID{}
	branches := map[string]messages.BranchID{}
	for _, tok := range []string{tokAcme, tokBeta} {
		_, body, _ := ts.send(t, tok, "POST", "/v1/sessions", `{}`)
		var created struct{ Branch persistence.BranchRow }
		if err := json.Unmarshal([]byte(body), &created); err != nil {
			t.Fatal(err)
		}
		b := "/v1/branches/" + created.Branch.ID.String()
		var res client.TurnResult
		st, body, _ := ts.send(t, tok, "POST", b+"/turns", `{"text":"`+text+`"}`)
		if st != 200 || json.Unmarshal([]byte(body), &res) != nil {
			t.Fatalf("turn: %d %s", st, body)
		}
		if st, body, _ := ts.send(t, tok, "POST", b+"/commit", ""); st != 202 {
			t.Fatalf("commit: %d %s", st, body)
		}
		if err := ts.rt.Settle(context.Background(), created.Branch.ID); err != nil {
			t.Fatal(err)
		}
		turns[tok], branches[tok] = res.Turn, created.Branch.ID
	}
	for tok, b := range branches {
		var hits struct{ Hits []actors.Hit }
		st, body, _ := ts.send(t, tok, "POST", "/v1/branches/"+b.String()+"/search", `{"query":"deploy target lighthouse","k":100}`)
		if st != 200 || json.Unmarshal([]byte(body), &hits) != nil || len(hits.Hits) == 0 {
			t.Fatalf("search of %s: %d %s", tok, st, body)
		}
		for _, h := range hits.Hits {
			if h.Chunk.SourceTurn != turns[tok] || h.Chunk.Branch != b {
				t.Errorf("search on %s's branch found chunk %s of turn %s (branch %s), want its own turn %s's only",
					tok, h.Chunk.ID, h.Chunk.SourceTurn, h.Chunk.Branch, turns[tok])
			}
		}
	}
}

// Tenants that cannot be told apart are refused by Listen, naming what
// is wrong: a bad name, a name twice, the default tenant's name, a token
// of two tenants.
func TestTenantsRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Tenants: []Tenant{{Name: "Acme", Tokens: []string{"a"}}}}, `name "Acme"`},
		{Options{Tenants: []Tenant{{Name: strings.Repeat("a", persistence.MaxTenantName+1), Tokens: []string{"a"}}}}, "1 to 64 bytes"},
		{Options{Tenants: []Tenant{{Name: "acme", Tokens: []string{"a"}}, {Name: "acme", Tokens: []string{"b"}}}}, `name "acme": twice`},
		{Options{Tenants: []Tenant{{Name: persistence.DefaultTenant, Tokens: []string{"a"}}}}, `name "default": twice`},
		{Options{Tokens: []string{"a"}, Tenants: []Tenant{{Name: "acme", Tokens: []string{"a"}}}}, `a token of tenant "acme" is also one of tenant "default"'s`},
	} {
		c.opts.Addr = "127.0.0.1:0"
		l, err := mustNew(t, ts.rt, c.opts).Listen()
		if err == nil {
			l.Close()
		}
		if !errors.Is(err, ErrTenants) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Listen(%+v) = %v, want ErrTenants saying %q", c.opts.Tenants, err, c.want)
		}
	}
	// A tenant's token alone is authentication: beyond loopback is allowed.
	l, err := mustNew(t, ts.rt, Options{Addr: "0.0.0.0:0", Tenants: []Tenant{{Name: "acme", Tokens: []string{"a"}}}}).Listen()
	if err != nil {
		t.Fatalf("Listen beyond loopback with a tenant's token: %v", err)
	}
	l.Close()
}
