package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected answers of testdata/wire/*.txt")

// wireTranscript records requests and their answers, with what varies
// from run to run (ids, times, durations, the data dir) replaced by
// stable names, so that a transcript compares byte for byte.
type wireTranscript struct {
	t    *testing.T
	ts   *testServer
	out  bytes.Buffer
	ids  map[string]string
	dirs []string
}

var (
	ulidRE = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	// SHA-256 digests: of contexts and exports, which hold ids and times.
	hashRE = regexp.MustCompile(`"[0-9a-f]{64}"`)
	timeRE = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)
	// Durations measured, the journals' byte counts (their records hold
	// times) and those fsynced (when a sync lands is the disk's
	// business).
	measuredRE = regexp.MustCompile(`"(took_ms|scrub_ms|displayed|durable|text_durable)":[0-9.e+-]+`)
	// latencyRE is a latency object: which parts it has depends on the
	// time measured (a part under a microsecond is left out).
	latencyRE = regexp.MustCompile(`"latency":\{[^{}]*\}`)
)

// normalize replaces ids by id1, id2… in order of first appearance,
// times by "<time>", digests by "<sha256>", measured durations and durable byte counts by 0,
// and the data dirs by <dir>.
func (w *wireTranscript) normalize(data []byte) string {
	s := string(data)
	for _, d := range w.dirs {
		quoted, _ := json.Marshal(d)
		s = strings.ReplaceAll(s, string(quoted[1:len(quoted)-1]), "<dir>")
	}
	s = ulidRE.ReplaceAllStringFunc(s, func(id string) string {
		if n, ok := w.ids[id]; ok {
			return n
		}
		n := fmt.Sprintf("<id%d>", len(w.ids)+1)
		w.ids[id] = n
		return n
	})
	s = timeRE.ReplaceAllString(s, `"<time>"`)
	s = hashRE.ReplaceAllString(s, `"<sha256>"`)
	s = latencyRE.ReplaceAllString(s, `"latency":{}`)
	return measuredRE.ReplaceAllStringFunc(s, func(m string) string {
		k, _, _ := strings.Cut(m, ":")
		return k + ":0"
	})
}

// do sends a request and records it and its answer: status, content
// type and body. It returns the body as it came.
func (w *wireTranscript) do(method, path, body string, headers ...string) []byte {
	w.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, w.ts.URL+path, rd)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	fmt.Fprintf(&w.out, "> %s %s", method, w.normalize([]byte(path)))
	if body != "" && len(body) < 200 {
		fmt.Fprintf(&w.out, " %s", w.normalize([]byte(body)))
	}
	fmt.Fprintf(&w.out, "\n< %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		fmt.Fprintf(&w.out, " Retry-After: %s", ra)
	}
	fmt.Fprintf(&w.out, "\n%s\n", w.normalize(data))
	return data
}

// compare checks the transcript against testdata/wire/name.txt (with
// -rewrite, writes it).
func (w *wireTranscript) compare(name string) {
	w.t.Helper()
	file := "testdata/wire/" + name + ".txt"
	got := w.out.Bytes()
	if *rewrite {
		if err := os.MkdirAll("testdata/wire", 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			w.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		w.t.Fatalf("%v (run with -rewrite)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, x := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				x = wl[i]
			}
			if g != x {
				w.t.Fatalf("%s: line %d differs (run with -rewrite and review the diff):\n got %s\nwant %s", file, i+1, g, x)
			}
		}
	}
}

// field returns the string at path (keys separated by dots) of a JSON
// object.
func field(t *testing.T, data []byte, path string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	for k := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: no %s", data, path)
		}
		v = m[k]
	}
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	t.Fatalf("%s: %s is %v", data, path, v)
	return ""
}

// The runtime API's answers on every route, byte for byte (but for ids,
// times and measured durations): what a client of the API reads. A
// change here is a change of the wire; review it as one.
func TestWireGolden(t *testing.T) {
	t.Parallel()
	// Folds only when asked: what each answer holds does not hang on
	// when a fold ran.
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) { c.Fold = &core.Policy{K: 1000, B: 1000} })
	w := &wireTranscript{t: t, ts: ts, ids: map[string]string{}, dirs: []string{ts.rt.DataDir()}}

	w.do("GET", "/healthz", "")
	w.do("GET", "/readyz", "")
	created := w.do("POST", "/v1/sessions", `{"title":"golden"}`)
	session, branch := field(t, created, "session.id"), field(t, created, "branch.id")
	b := "/v1/branches/" + branch
	w.do("GET", "/v1/sessions", "")
	w.do("GET", "/v1/sessions?metadata.source=proxy", "")
	w.do("GET", "/v1/sessions/"+session+"/branches", "")
	w.do("GET", b, "")
	turn := field(t, w.do("POST", b+"/turns", `{"text":"The deploy target is eu-west-1."}`), "turn")
	w.do("POST", b+"/turns", `{"text":"Where do we deploy?","stream":true}`)
	w.do("GET", b, "")
	w.do("GET", b+"/turns/1", "")
	w.do("GET", b+"/turns/"+turn, "")
	w.do("GET", b+"/history?limit=10", "")
	w.do("GET", b+"/history?limit=2", "")
	w.do("GET", b+"/pending", "")
	pin := field(t, w.do("POST", b+"/pins", `{"fact":"answer briefly"}`), "id")
	w.do("POST", b+"/pins", `{"fact":"the database runs on port 5433"}`)
	w.do("PUT", b+"/pins/"+pin, `{"fact":"answer very briefly"}`)
	w.do("GET", b+"/pins", "")
	w.do("DELETE", b+"/pins/"+pin, "")
	w.do("POST", b+"/commit", "")
	bid, err := messages.ParseID[messages.BranchID](branch)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.rt.Settle(context.Background(), bid); err != nil {
		t.Fatal(err)
	}
	w.do("GET", b+"/pending", "")
	w.do("GET", b+"/turns/1", "")
	w.do("POST", b+"/reindex", "")
	w.do("POST", b+"/search", `{"query":"deploy target eu-west-1","k":2}`)
	w.do("POST", b+"/search", `{"query":"nothing of the sort zzz","k":1,"force":true}`)
	w.do("GET", b+"/context?seq=1", "")
	w.do("GET", b+"/context?text=next", "")
	w.do("PUT", b+"/model", `{"model":"default"}`)
	w.do("GET", "/v1/models", "")
	w.do("GET", "/v1/models/default", "")
	fork := field(t, w.do("POST", b+"/forks", `{"label":"alt","at":"`+turn+`"}`), "id")
	w.do("GET", "/v1/branches/"+fork, "")
	w.do("GET", "/v1/branches/"+fork+"/turns/"+turn, "")
	w.do("GET", "/v1/sessions/"+session+"/branches", "")
	w.do("GET", "/v1/inspect?turns=2", "")
	w.do("GET", "/v1/sessions/"+session+"/retention", "")
	w.do("PUT", "/v1/sessions/"+session+"/retention", `{"idle":"30d"}`)
	w.do("PUT", "/v1/sessions/"+session+"/retention", `{"idle":null}`)
	export := w.do("GET", "/v1/sessions/"+session+"/export", "")
	imported := w.do("POST", "/v1/sessions/import", string(export), "Content-Type", "application/x-ndjson")
	w.do("DELETE", "/v1/branches/"+fork, "")
	w.do("DELETE", "/v1/sessions/"+field(t, imported, "session.id"), "")
	w.do("POST", b+"/cancel", "")

	// Errors: the runtime API's shape, its codes and statuses.
	w.do("GET", "/v1/branches/"+strings.Repeat("0", 25)+"1", "")
	w.do("GET", "/v1/branches/nope", "")
	w.do("POST", b+"/turns", `{"text":""}`)
	w.do("POST", b+"/turns", `{"text":1}`)
	w.do("POST", b+"/search", `{"query":"x","k":1000}`)
	w.do("GET", b+"/history?limit=0", "")
	w.do("DELETE", b+"/pins/99", "")
	w.do("PUT", b+"/model", `{"model":"nope"}`)
	w.do("PUT", b+"/memory_tools", `{"memory_tools":"maybe"}`)
	w.do("GET", b+"/turns/99", "")
	w.do("PATCH", b, "")
	w.do("GET", "/v1/nowhere", "")
	w.do("POST", "/v1/sessions", `{"title":"`+strings.Repeat("x", MaxTitleBytes+1)+`"}`)
	w.do("POST", b+"/turns", `{"text":"hi"}`, IdempotencyKeyHeader, "k1")
	w.do("POST", b+"/turns", `{"text":"another"}`, IdempotencyKeyHeader, "k1")
	w.compare("routes")
}

// A turn that fails answers its code, status and turn, waited for or
// streamed.
func TestWireGoldenFailedTurn(t *testing.T) {
	t.Parallel()
	ts, b := failingServer(t, fake.New())
	w := &wireTranscript{t: t, ts: ts, ids: map[string]string{}, dirs: []string{ts.rt.DataDir()}}
	big := strings.Repeat("word ", 3000)
	w.do("POST", b+"/turns", `{"text":"`+big+`"}`)
	w.do("POST", b+"/turns", `{"text":"`+big+`","stream":true}`)
	w.do("GET", b+"/turns/1", "")
	w.compare("failed")
}

// The error body of each shape, with the fields only some errors have.
func TestWireGoldenErrors(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	yes := true
	for _, c := range []struct {
		path string
		err  error
	}{
		{"/v1/sessions", invalid("title: %d bytes, limit %d", 300, MaxTitleBytes)},
		{"/v1/branches/x/turns", &apiError{Status: 422, Code: api.CodeContextTooLarge, Message: "too large", Turn: messages.TurnID{1}}},
		{"/v1/branches/x/turns", &apiError{Status: 504, Code: api.CodeTimeout, Message: "late", Turn: messages.TurnID{2}, timeout: true}},
		{"/v1/branches/x/turns", &apiError{Status: 504, Code: api.CodeTimeout, Message: "late", Turn: messages.TurnID{3}, timeout: true, Accepted: &yes}},
		{"/v1/branches/x/forks", &apiError{Status: 504, Code: api.CodeTimeout, Message: "late", timeout: true, Accepted: new(false)}},
		{"/v1/branches/x/turns", &apiError{Status: 429, Code: api.CodeProviderRateLimited, Message: "slow down", Turn: messages.TurnID{4}, RetryAfter: 1500e6}},
		{"/v1/branches/x/turns", &apiError{Status: 502, Code: api.CodeProvider, Message: "upstream", NoRetry: true}},
		{"/v1/branches/x", &apiError{Status: 409, Code: api.CodeBusy, Message: "busy"}},
		{"/v1/chat/completions", &apiError{Status: 400, Code: api.CodeInvalid, Message: "model: required"}},
		{"/v1/chat/completions", &apiError{Status: 504, Code: api.CodeTimeout, Message: "late", timeout: true}},
		{"/v1/messages", &apiError{Status: 400, Code: api.CodeInvalid, Message: "model: required"}},
	} {
		rec := httptest.NewRecorder()
		req, _ := http.NewRequest("POST", c.path, nil)
		writeError(rec, req, c.err)
		fmt.Fprintf(&out, "> POST %s\n< %d %s", c.path, rec.Code, rec.Header().Get("Content-Type"))
		for _, h := range []string{"Retry-After", "Retry-After-Ms", "X-Should-Retry"} {
			if v := rec.Header().Get(h); v != "" {
				fmt.Fprintf(&out, " %s: %s", h, v)
			}
		}
		fmt.Fprintf(&out, "\n%s", rec.Body.Bytes())
	}
	w := &wireTranscript{t: t, ids: map[string]string{}}
	w.out = out
	w.compare("errors")
}
