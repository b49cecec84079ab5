package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// chatAnswer is what the tests read of a Chat Completions answer.
type chatAnswer struct {
	status int
	id     string
	text   string
	branch string
}

// sendChat posts body to /v1/chat/completions with the headers given in
// pairs; safe to call from any goroutine.
func sendChat(url, body string, headers ...string) chatAnswer {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return chatAnswer{}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		ID      string
		Choices []struct{ Message struct{ Content string } }
	}
	_ = json.Unmarshal(data, &out)
	a := chatAnswer{status: resp.StatusCode, id: out.ID, branch: resp.Header.Get(ProxyBranchHeader)}
	if len(out.Choices) == 1 {
		a.text = out.Choices[0].Message.Content
	}
	return a
}

// sessionCount is the number of sessions the store holds.
func sessionCount(t *testing.T, rt *actors.Runtime) int {
	t.Helper()
	ss, err := rt.DB().Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(ss)
}

// An SDK's retry (X-Stainless-Retry-Count) of a request whose turn runs,
// or ran less than a minute ago, is that request's turn: it waits for it
// and gets its answer, and no new session or turn is made. The same body
// without the mark is a new turn.
func TestProxyRetriesAreTheSameTurn(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	prov := fake.New(fake.Step{Reply: "first answer", Block: block}, fake.Step{Reply: "second answer"})
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) { c.Provider = prov })
	var unblock sync.Once
	release := func() { unblock.Do(func() { close(block) }) }
	t.Cleanup(release) // before the server's: a test that fails lets the turn end
	srv := ts.Config.Handler.(*Server)
	body := `{"model":"local","messages":[{"role":"user","content":"Say it once."}]}`

	first := make(chan chatAnswer, 1)
	go func() { first <- sendChat(ts.URL, body) }()
	var branch messages.BranchID
	pollUntil(t, "the first turn to run", func() bool {
		ss, err := ts.rt.DB().Sessions(context.Background())
		if err != nil || len(ss) != 1 {
			return false
		}
		branch = ss[0].ActiveBranch
		info, err := ts.rt.Inspect(context.Background(), branch)
		return err == nil && info.InFlight != nil
	})
	retry := make(chan chatAnswer, 1)
	go func() { retry <- sendChat(ts.URL, body, RetryCountHeader, "1") }()
	pollUntil(t, "the retry to wait for the first", func() bool { return srv.proxy.queues.waiting(branch) == 1 })
	release()
	a, b := <-first, <-retry
	if a.status != 200 || b.status != 200 || a.id != b.id || a.text != "first answer" || b.text != a.text || b.branch != a.branch {
		t.Fatalf("the first %+v and its retry %+v: want one answer", a, b)
	}
	if n := sessionCount(t, ts.rt); n != 1 {
		t.Fatalf("%d sessions after a request and its retry, want 1", n)
	}
	if info, err := ts.rt.Inspect(context.Background(), branch); err != nil || info.TurnSeq != 1 {
		t.Fatalf("turns: %+v, %v; want 1", info, err)
	}

	// Once it ended, a retry still gets its answer.
	if c := sendChat(ts.URL, body, RetryCountHeader, "2"); c.id != a.id || c.text != a.text {
		t.Fatalf("a retry after the end: %+v, want %+v", c, a)
	}
	// The same body without the mark: a new turn (here a new
	// conversation, as nothing before it was answered).
	if c := sendChat(ts.URL, body); c.status != 200 || c.id == a.id || c.text != "second answer" {
		t.Fatalf("the same request again: %+v, want a new answer", c)
	}
	if n, calls := sessionCount(t, ts.rt), prov.Calls(); n != 2 || calls != 2 {
		t.Fatalf("%d sessions, %d upstream calls; want 2 and 2", n, calls)
	}
	// A retry in another conversation (another X-Ctx-Conversation) is
	// another request.
	if c := sendChat(ts.URL, body, RetryCountHeader, "1", ProxyConversationHeader, "other"); c.status == 200 && c.id == a.id {
		t.Fatalf("a retry of another conversation got the first's answer %+v", c)
	}
}

// A request whose turn fails leaves no session: the conversation made
// for it is dropped, with its imported history, and its SDK's retry runs
// again (the upstream is asked again) into a new conversation that the
// client's next request finds.
func TestProxyFailedRequestsLeaveNoSession(t *testing.T) {
	t.Parallel()
	prov := fake.New(fake.Step{Err: &providers.Error{Provider: "fake", StatusCode: 400, Message: "bad request"}},
		fake.Step{Reply: "now it works"}, fake.Step{Reply: "and again"})
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) { c.Provider = prov })
	hist := `{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2"}`
	body := `{"model":"local","user":"alice","messages":[` + hist + `]}`
	if a := sendChat(ts.URL, body); a.status == 200 {
		t.Fatalf("the failing turn: %+v, want an error", a)
	}
	if n := sessionCount(t, ts.rt); n != 0 {
		t.Fatalf("%d sessions after a failed request, want none", n)
	}
	a := sendChat(ts.URL, body, RetryCountHeader, "1")
	if a.status != 200 || a.text != "now it works" || prov.Calls() != 2 {
		t.Fatalf("its retry: %+v after %d upstream calls; want the upstream asked again", a, prov.Calls())
	}
	id, _ := messages.ParseID[messages.BranchID](a.branch)
	if got := history(t, ts.rt, id); len(got) != 4 || got[0] != "user: u1" || got[2] != "user: u2" {
		t.Fatalf("the conversation: %q; want the imported exchange and the turn", got)
	}
	next := `{"model":"local","user":"alice","messages":[` + hist + `,{"role":"assistant","content":"now it works"},{"role":"user","content":"u3"}]}`
	if b := sendChat(ts.URL, next); b.status != 200 || b.branch != a.branch {
		t.Fatalf("the next request: %+v, want branch %s", b, a.branch)
	}
	// An edit of the imported exchange finds it too (its entries were
	// entered with the turn).
	edit := `{"model":"local","user":"alice","messages":[{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2 edited"}]}`
	s := ts.Config.Handler.(*Server)
	var q chatRequest
	_ = json.Unmarshal([]byte(edit), &q)
	pc, err := parseChatRequest(&q)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok, err := s.lookupConversation(proxyRequest(), pc.query()); err != nil || !ok || c.Branch != id || c.From != 2 {
		t.Fatalf("an edit of the imported exchange: %+v, %v, %v; want branch %s from 2", c, ok, err, id)
	}
	if n := sessionCount(t, ts.rt); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
	ss, _ := ts.rt.DB().Sessions(context.Background())
	if md := ss[0].Metadata; ss[0].Title != "u1" || md[MetaSource] != "proxy" || md[MetaEndUser] != "alice" || md[MetaClient] == "" {
		t.Fatalf("the session %+v: want titled u1, labeled proxy, alice and the client", ss[0])
	}
}

// A conversation's title is its first user message, white space
// collapsed, at most 80 characters.
func TestProxyTitle(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 30)
	for _, tc := range []struct {
		msgs []convMessage
		want string
	}{
		{[]convMessage{{Role: "system", Text: "sys"}, user("  Hello,\n\tworld  "), user("second")}, "Hello, world"},
		{[]convMessage{user(long)}, strings.TrimSpace(long[:79]) + "…"},
		{[]convMessage{user(strings.Repeat("é", 100))}, strings.Repeat("é", 79) + "…"},
		{[]convMessage{{Role: "user", Other: []json.RawMessage{json.RawMessage(`{"type":"image_url"}`)}}}, "[image_url part]"},
		{[]convMessage{{Role: "tool", Text: "x"}}, "(no text)"},
	} {
		if got := proxyTitle(tc.msgs); got != tc.want || len([]rune(got)) > MaxProxyTitle {
			t.Errorf("proxyTitle(%v) = %q, want %q", tc.msgs, got, tc.want)
		}
	}
}

// The sessions list keeps those whose metadata matches every
// metadata.KEY=VALUE (or metadata[KEY]=VALUE) parameter.
func TestListSessionsByMetadata(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	for _, u := range []string{"alice", "bob"} {
		if a := sendChat(ts.URL, `{"model":"local","user":"`+u+`","messages":[{"role":"user","content":"hi from `+u+`"}]}`,
			"User-Agent", "probe/2"); a.status != 200 {
			t.Fatalf("chat as %s: %+v", u, a)
		}
	}
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "api"}, nil); st != 201 {
		t.Fatal(st)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"hi from alice", "hi from bob", "api"}},
		{"?metadata.source=proxy", []string{"hi from alice", "hi from bob"}},
		{"?metadata.end_user=bob&metadata.client=probe/2", []string{"hi from bob"}},
		{"?metadata%5Bend_user%5D=alice", []string{"hi from alice"}},
		{"?metadata.end_user=carol", nil},
	} {
		var out struct{ Sessions []persistence.SessionRow }
		if st := ts.call(t, "GET", "/v1/sessions"+tc.query, nil, &out); st != 200 {
			t.Fatalf("%s: %d", tc.query, st)
		}
		var got []string
		for _, s := range out.Sessions {
			got = append(got, s.Title)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("GET /v1/sessions%s: %q, want %q", tc.query, got, tc.want)
		}
	}
	var e struct{ Error struct{ Message string } }
	if st := ts.call(t, "GET", "/v1/sessions?metadata.=x", nil, &e); st != 400 || !strings.Contains(e.Error.Message, "metadata") {
		t.Errorf("an empty metadata key: %d %+v, want 400", st, e)
	}
}
