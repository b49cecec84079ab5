package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	oai "github.com/openai/openai-go/v3"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// The routes clients probe besides the model calls: the models, one by
// one, in OpenAI's shape or, for Anthropic's SDK, in Anthropic's; an
// unknown model is 404 in the API's shape.
func TestProxyModelRoutes(t *testing.T) {
	ts := newTestServer(t, Options{}, 0)
	ctx := context.Background()
	oc := openAIClient(t, ts.URL)
	m, err := oc.Models.Get(ctx, "default")
	if err != nil || m.ID != "default" || m.Object != "model" || m.OwnedBy == "" {
		t.Fatalf("OpenAI SDK: GET /v1/models/default = %+v, %v", m, err)
	}
	_, err = oc.Models.Get(ctx, "gpt-nope")
	var oe *oai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != api.CodeNotFound || !strings.Contains(oe.Message, `"gpt-nope"`) {
		t.Errorf("OpenAI SDK: GET /v1/models/gpt-nope = %v, want 404 naming it", err)
	}

	ac, _ := anthropicClient(t, ts.URL)
	am, err := ac.Models.Get(ctx, "default", anthropic.ModelGetParams{})
	if err != nil || am.ID != "default" || string(am.Type) != "model" || am.DisplayName == "" || am.CreatedAt.IsZero() && am.JSON.CreatedAt.Raw() == "" {
		t.Fatalf("Anthropic SDK: GET /v1/models/default = %+v, %v", am, err)
	}
	page, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil || len(page.Data) == 0 || page.Data[0].ID != "default" || page.HasMore || page.FirstID != "default" {
		t.Fatalf("Anthropic SDK: GET /v1/models = %+v, %v", page, err)
	}
	_, err = ac.Models.Get(ctx, "claude-nope", anthropic.ModelGetParams{})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || !strings.Contains(ae.RawJSON(), `"not_found_error"`) {
		t.Errorf("Anthropic SDK: GET /v1/models/claude-nope = %v, want 404 in Anthropic's shape", err)
	}
}

// Paths under the model APIs that are not served answer 404, and served
// paths asked with another method 405 with Allow, each in the API's
// shape; the runtime's own paths keep theirs.
func TestProxyUnknownRoutesInTheAPIsShape(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	const anthropicVersion = "Anthropic-Version"
	for _, c := range []struct {
		method, path string
		headers      []string
		status       int
		shape        errorShape
		allow        string
	}{
		{"GET", "/v1/chat/completions", nil, 405, openAIErrors, "POST"},
		{"DELETE", "/v1/responses/resp_x", nil, 405, openAIErrors, "GET"},
		{"POST", "/v1/completions", nil, 404, openAIErrors, ""},
		{"GET", "/v1/files", nil, 404, openAIErrors, ""},
		{"POST", "/v1/embeddings/x", nil, 404, openAIErrors, ""},
		{"GET", "/v1/messages", nil, 405, anthropicErrors, "POST"},
		{"POST", "/v1/messages/batches", nil, 404, anthropicErrors, ""},
		{"GET", "/v1/files", []string{anthropicVersion, "2023-06-01"}, 404, anthropicErrors, ""},
		{"POST", "/v1/models", []string{anthropicVersion, "2023-06-01"}, 405, anthropicErrors, "GET"},
		{"POST", "/v1/models", nil, 405, openAIErrors, "GET"},
		{"GET", "/v1/chat/completions", []string{anthropicVersion, "2023-06-01"}, 405, openAIErrors, "POST"},
		{"GET", "/v1/sessions/x/y", nil, 404, nativeErrors, ""},
		{"PATCH", "/v1/sessions", nil, 405, nativeErrors, "GET, POST"},
	} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		for i := 0; i+1 < len(c.headers); i += 2 {
			req.Header.Set(c.headers[i], c.headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Type  string
			Error map[string]any
		}
		_ = json.Unmarshal(data, &body)
		var shape errorShape = -1
		switch {
		case body.Type == "error" && body.Error["type"] != nil && body.Error["code"] == nil:
			shape = anthropicErrors
		case body.Error["code"] != nil && body.Error["type"] != nil:
			shape = openAIErrors
		case body.Error["code"] != nil:
			shape = nativeErrors
		}
		if resp.StatusCode != c.status || shape != c.shape || resp.Header.Get("Allow") != c.allow ||
			!strings.Contains(string(data), c.path) {
			t.Errorf("%s %s %v: %d %s (shape %d, Allow %q); want %d in shape %d, Allow %q, naming the path", c.method, c.path, c.headers,
				resp.StatusCode, data, shape, resp.Header.Get("Allow"), c.status, c.shape, c.allow)
		}
	}
}

// POST /v1/messages/count_tokens: the runtime's estimate of the context
// the request would get, in Anthropic's shape, found as the Messages API
// finds its conversation and making nothing.
func TestAnthropicCountTokens(t *testing.T) {
	ts := newTestServer(t, Options{}, 0)
	ctx := context.Background()
	cl, branches := anthropicClient(t, ts.URL)
	sessions := func() int {
		ss, err := ts.rt.DB().Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ss)
	}
	question := anthropic.NewUserMessage(anthropic.NewTextBlock("What is the deploy target?"))
	params := anthropic.MessageCountTokensParams{Model: "claude-any", Messages: []anthropic.MessageParam{question}}
	fresh, err := cl.Messages.CountTokens(ctx, params)
	if err != nil || fresh.InputTokens <= 0 {
		t.Fatalf("count of a new conversation: %+v, %v", fresh, err)
	}
	if n := sessions(); n != 0 {
		t.Fatalf("count_tokens made %d sessions, want none", n)
	}
	// A system prompt and a tool count.
	params.System = anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{
		{Text: strings.Repeat("Answer in the voice of a ship's captain. ", 20)}}}
	params.Tools = []anthropic.MessageCountTokensToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}
	more, err := cl.Messages.CountTokens(ctx, params)
	if err != nil || more.InputTokens <= fresh.InputTokens+100 {
		t.Fatalf("count with a system prompt and a tool: %+v, %v; want well over %d", more, err, fresh.InputTokens)
	}

	// A conversation, then a count of its next request: its context.
	msg, err := cl.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-any", MaxTokens: 64,
		Messages: []anthropic.MessageParam{question}})
	if err != nil {
		t.Fatal(err)
	}
	hs := branches.all()
	branch := hs[len(hs)-1]
	b, err := messages.ParseID[messages.BranchID](branch)
	if err != nil {
		t.Fatal(err)
	}
	// The turn folded and indexed: its context no longer changes.
	if err := ts.rt.Settle(ctx, b); err != nil {
		t.Fatal(err)
	}
	before := sessions()
	next := []anthropic.MessageParam{question, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And the port?"))}
	var hr *http.Response
	got, err := cl.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "claude-any", Messages: next},
		aoption.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	if hr.Header.Get(ProxyBranchHeader) != branch {
		t.Errorf("count_tokens found branch %q, want the conversation's %s", hr.Header.Get(ProxyBranchHeader), branch)
	}
	d, err := ts.rt.DebugNextContext(ctx, b, "And the port?")
	if err != nil {
		t.Fatal(err)
	}
	if got.InputTokens != int64(d.Report.Total) {
		t.Errorf("count of the next request: %d, want the runtime's estimate of its context, %d", got.InputTokens, d.Report.Total)
	}
	if n := sessions(); n != before {
		t.Errorf("count_tokens of a continuation: %d sessions, %d before", n, before)
	}
	if info, err := ts.rt.Inspect(ctx, b); err != nil || info.TurnSeq != 1 {
		t.Errorf("the conversation after count_tokens: %+v, %v; want its one turn", info, err)
	}
	// A bad request is refused as the Messages API refuses it.
	_, err = cl.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "claude-any"})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), "messages") {
		t.Errorf("count_tokens without messages: %v, want 400 naming messages", err)
	}
}

// /v1/embeddings shortens its vectors to dimensions (unit length, the
// direction of the embedder's first components), refuses more than the
// embedder gives naming the limit, and names the embedder in a header.
func TestEmbeddingsDimensions(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	name, dim := ts.rt.Embedder()
	_, full, err := ts.rt.Embed(context.Background(), []string{"the deploy target"})
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (int, http.Header, []byte) {
		resp, err := http.Post(ts.URL+"/v1/embeddings", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, data
	}
	// As many dimensions as hold the first component that is not 0 (the
	// test's embedder hashes words to a few of its components).
	d := 8
	for d <= len(full[0]) && !slices.ContainsFunc(full[0][:d], func(x float32) bool { return x != 0 }) {
		d++
	}
	if d >= dim {
		t.Fatalf("the embedding of the test's text: %v", full[0])
	}
	st, h, data := post(`{"model":"text-embedding-3-small","input":"the deploy target","dimensions":` + strconv.Itoa(d) + `}`)
	var out struct {
		Model string
		Data  []struct{ Embedding []float64 }
	}
	if st != 200 || json.Unmarshal(data, &out) != nil || len(out.Data) != 1 || h.Get(EmbedderHeader) != name || out.Model != name {
		t.Fatalf("dimensions %d: %d %s, %s %q; want 200 from %s", d, st, data, EmbedderHeader, h.Get(EmbedderHeader), name)
	}
	v := out.Data[0].Embedding
	var norm, fullNorm float64
	for i, x := range v {
		norm += x * x
		fullNorm += float64(full[0][i]) * float64(full[0][i])
	}
	if len(v) != d || math.Abs(norm-1) > 1e-5 {
		t.Fatalf("dimensions %d: %d components of norm %f, want %d of norm 1", d, len(v), math.Sqrt(norm), d)
	}
	for i, x := range v {
		if want := float64(full[0][i]) / math.Sqrt(fullNorm); math.Abs(x-want) > 1e-5 {
			t.Errorf("component %d: %f, want the embedder's scaled to unit length, %f", i, x, want)
		}
	}
	for _, d := range []int{dim + 1, 0, -3} {
		st, _, data := post(`{"input":"x","dimensions":` + strconv.Itoa(d) + `}`)
		if st != 400 || !strings.Contains(string(data), "dimensions") || !strings.Contains(string(data), strconv.Itoa(dim)) {
			t.Errorf("dimensions %d: %d %s, want 400 naming dimensions and the limit %d", d, st, data, dim)
		}
	}
	if st, h, _ := post(`{"input":"x","dimensions":` + strconv.Itoa(dim) + `}`); st != 200 || h.Get(EmbedderHeader) != name {
		t.Errorf("dimensions %d (the embedder's): %d, %s %q", dim, st, EmbedderHeader, h.Get(EmbedderHeader))
	}
}

// GET /v1/models pages as the other lists do (?limit, ?cursor, next),
// and in Anthropic's shape as Anthropic's API does (after_id, has_more,
// last_id): its SDK's auto-pager reads every model once.
func TestModelPages(t *testing.T) {
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Models = map[string]actors.Model{}
		for _, n := range []string{"c", "a", "b"} {
			c.Models[n] = actors.Model{Provider: local.New(local.Options{}), ID: "local-" + n}
		}
	})
	ctx := context.Background()
	c := client.New(ts.URL)
	var names []string
	for p := (client.Page{Limit: 3}); ; {
		l, err := c.ModelPage(ctx, p)
		if err != nil || len(l.Data) > 3 || len(names) > 4 {
			t.Fatalf("ModelPage(%+v) = %+v, %v", p, l, err)
		}
		for _, m := range l.Data {
			names = append(names, m.ID)
		}
		if p.Cursor = l.Next; p.Cursor == "" {
			break
		}
	}
	if want := []string{"default", "a", "b", "c"}; !slices.Equal(names, want) {
		t.Fatalf("models by 3 = %v, want %v", names, want)
	}
	if all, err := c.Models(ctx); err != nil || len(all) != 4 {
		t.Fatalf("Models() = %+v, %v; want 4", all, err)
	}

	ac, _ := anthropicClient(t, ts.URL)
	names = nil
	it := ac.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(2)})
	for it.Next() && len(names) <= 4 {
		names = append(names, it.Current().ID)
	}
	if err := it.Err(); err != nil || !slices.Equal(names, []string{"default", "a", "b", "c"}) {
		t.Fatalf("Anthropic SDK's pages by 2 = %v, %v; want default, a, b, c", names, err)
	}
	page, err := ac.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(2), AfterID: anthropic.String("c")})
	if err != nil || len(page.Data) != 0 || page.HasMore {
		t.Fatalf("Anthropic SDK after the last = %+v, %v; want an empty last page", page, err)
	}

	first, _ := c.ModelPage(ctx, client.Page{Limit: 1})
	for _, b := range []struct{ query, want string }{
		{"limit=0", `limit: \"0\", want an integer from 1 to 1000`},
		{"limit=1001", `limit: \"1001\", want an integer from 1 to 1000`},
		{"cursor=zz", `cursor: \"zz\" is not a cursor of this listing`},
		{"before_id=b", "before_id: not taken"},
		{"after_id=a&cursor=" + url.QueryEscape(first.Next), "after_id and cursor: send one of them"},
	} {
		st, body, _ := ts.send(t, "", "GET", "/v1/models?"+b.query, "")
		if st != 400 || !strings.Contains(body, b.want) {
			t.Errorf("GET /v1/models?%s = %d %s, want 400 naming %q", b.query, st, body, b.want)
		}
	}
}
