package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// openServerAt is newTestServer on the data directory dir, so that a
// test can stop it (the returned function) and open another on dir.
func openServerAt(t *testing.T, dir string) (*testServer, func()) {
	t.Helper()
	store := badgerdb.TestOptions("")
	store.Durability = persistence.DurabilityRelaxed
	cfg := actors.Config{DataDir: dir, Store: store, Provider: local.New(local.Options{}), Model: "local",
		Fold: &core.Policy{}, RequestTimeout: 10 * time.Second, Logger: zerolog.Nop()}
	rt, err := actors.Open(context.Background(), wiring.Fill(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: httptest.NewServer(mustNew(t, rt, Options{})), rt: rt}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ts.Close()
			if err := rt.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return ts, stop
}

// proxyRequest is a proxied request with the headers given in pairs.
func proxyRequest(headers ...string) *http.Request {
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

// runConv runs the request's last user message as a turn of c's branch,
// as a handler does, remembers it, and returns the reply and the turn.
func runConv(t *testing.T, s *Server, c conversation, msgs []convMessage) (convMessage, messages.TurnID) {
	t.Helper()
	return runConvFor(t, s, c, "", msgs)
}

// runConvFor is runConv for the end user label.
func runConvFor(t *testing.T, s *Server, c conversation, label string, msgs []convMessage) (convMessage, messages.TurnID) {
	t.Helper()
	ctx := context.Background()
	if c.From >= len(msgs) || msgs[c.From].Role != "user" {
		t.Fatalf("conversation %+v: messages from From are %+v, want a user message first", c, msgs[min(c.From, len(msgs)):])
	}
	st, err := s.rt.SubmitWith(ctx, c.Branch, msgs[len(msgs)-1].Text, actors.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, last := st.Wait(nil)
	if !last.Done || last.Phase == messages.PhaseFailed {
		t.Fatalf("turn: %+v", last)
	}
	reply := convMessage{Role: "assistant", Text: text}
	if err := s.rememberConversation(ctx, c, st.Turn, label, msgs, reply); err != nil {
		t.Fatal(err)
	}
	return reply, st.Turn
}

// history is the texts of branch's transcript, role: text.
func history(t *testing.T, rt *actors.Runtime, b messages.BranchID) []string {
	t.Helper()
	es, _, err := rt.History(context.Background(), b, messages.TurnID{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Message.Role.String()+": "+e.Message.RenderedText)
	}
	return out
}

func user(text string) convMessage { return convMessage{Role: "user", Text: text} }

// A session created through the HTTP API titled "proxy:alice" is only a
// title: the proxy's conversation "alice" is its own, before and after a
// restart, and its session is titled with its first message, not its
// key.
func TestProxyConversationKeysAreNotTitles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts, stop := openServerAt(t, dir)
	var created struct{ Branch persistence.BranchRow }
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "proxy:alice"}, &created); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	chat := func(ts *testServer, text string) messages.BranchID {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"local","messages":[{"role":"user","content":"`+text+`"}]}`))
		req.Header.Set(ProxyConversationHeader, "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		b, err := messages.ParseID[messages.BranchID](resp.Header.Get(ProxyBranchHeader))
		if resp.StatusCode != 200 || err != nil {
			t.Fatalf("chat: %d, branch %q", resp.StatusCode, resp.Header.Get(ProxyBranchHeader))
		}
		return b
	}
	alice := chat(ts, "first")
	if alice == created.Branch.ID {
		t.Fatalf("the conversation alice went to the session titled proxy:alice (%s)", alice)
	}
	stop()

	ts, _ = openServerAt(t, dir)
	if st := ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "proxy:alice"}, nil); st != 201 {
		t.Fatalf("create session: %d", st)
	}
	if b := chat(ts, "second"); b != alice {
		t.Fatalf("after a restart and a new session titled proxy:alice, the conversation alice is %s, want %s", b, alice)
	}
	got := history(t, ts.rt, alice)
	if len(got) != 4 || got[0] != "user: first" || got[2] != "user: second" {
		t.Fatalf("alice's history: %q", got)
	}
	br, err := ts.rt.DB().BranchRow(context.Background(), alice)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := ts.rt.DB().Session(context.Background(), br.Session)
	if err != nil || sess.Title != "first" || sess.Metadata[MetaSource] != "proxy" {
		t.Fatalf("alice's session: %+v, %v; want titled with its first message, %q, never with the key", sess, err, "first")
	}
}

// Without a key, a request that continues a conversation's transcript
// (the client sends its whole history back) finds its branch, and only
// its new message runs; one that edits its last user message, or asks
// for the last reply again, forks the branch at the turn before, which
// keeps its own turns.
func TestProxyConversationByTranscript(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	s := ts.Config.Handler.(*Server)
	ctx := context.Background()
	sys := convMessage{Role: "system", Text: "be brief"}

	msgs1 := []convMessage{sys, user("hello")}
	c1, err := s.findConversationFor(proxyRequest(), convQuery{msgs: msgs1})
	if err != nil || !c1.Created || c1.From != 1 {
		t.Fatalf("first request: %+v, %v; want a new conversation from 1", c1, err)
	}
	reply1, turn1 := runConv(t, s, c1, msgs1)

	// Another client with the same first message is another conversation.
	other, err := s.findConversationFor(proxyRequest(), convQuery{msgs: msgs1})
	if err != nil || !other.Created || other.Branch == c1.Branch {
		t.Fatalf("the same first request again: %+v, %v; want another new conversation", other, err)
	}

	msgs2 := append(append([]convMessage{}, msgs1...), reply1, user("again"))
	c2, err := s.findConversationFor(proxyRequest(), convQuery{msgs: msgs2})
	if err != nil || c2.Created || c2.Branch != c1.Branch || c2.From != 3 {
		t.Fatalf("second request: %+v, %v; want branch %s from 3", c2, err, c1.Branch)
	}
	reply2, turn2 := runConv(t, s, c2, msgs2)
	if got := history(t, ts.rt, c1.Branch); len(got) != 4 || got[0] != "user: hello" || got[2] != "user: again" {
		t.Fatalf("history after the second request: %q; want hello, its reply, again, its reply", got)
	}

	// The third continues the second.
	msgs3 := append(append([]convMessage{}, msgs2...), reply2, user("third"))
	c3, err := s.findConversationFor(proxyRequest(), convQuery{msgs: msgs3})
	if err != nil || c3.Branch != c1.Branch || c3.From != 5 {
		t.Fatalf("third request: %+v, %v; want branch %s from 5", c3, err, c1.Branch)
	}

	// The client edits its second message: a fork after the first turn.
	edited := append(append([]convMessage{}, msgs1...), reply1, user("edited"))
	ce, err := s.findConversationFor(proxyRequest(), convQuery{msgs: edited})
	if err != nil || ce.Branch == c1.Branch || ce.Created || ce.From != 3 {
		t.Fatalf("edited request: %+v, %v; want a fork of %s from 3", ce, err, c1.Branch)
	}
	fork, err := ts.rt.DB().BranchRow(ctx, ce.Branch)
	if err != nil || fork.Parent != c1.Branch || fork.ForkAt != turn1 {
		t.Fatalf("edited request's branch: %+v, %v; want a fork of %s at turn %s", fork, err, c1.Branch, turn1)
	}
	runConv(t, s, ce, edited)
	if got := history(t, ts.rt, ce.Branch); len(got) != 4 || got[0] != "user: hello" || got[2] != "user: edited" {
		t.Fatalf("the fork's history: %q; want hello, its reply, edited, its reply", got)
	}
	if got := history(t, ts.rt, c1.Branch); len(got) != 4 || got[2] != "user: again" {
		t.Fatalf("the branch's history after the fork: %q; want its own turns", got)
	}

	// The fork goes on by its own transcript.
	reply3, _ := runConv(t, s, c3, msgs3)
	msgs4 := append(append([]convMessage{}, msgs3...), reply3, user("fourth"))
	if c4, err := s.findConversationFor(proxyRequest(), convQuery{msgs: msgs4}); err != nil || c4.Branch != c1.Branch || c4.From != 7 {
		t.Fatalf("fourth request: %+v, %v; want branch %s from 7", c4, err, c1.Branch)
	}

	// A system prompt that changed, or none, is the same transcript.
	for _, sys := range [][]convMessage{{{Role: "system", Text: "be long"}}, nil} {
		changed := append(append([]convMessage{}, sys...), msgs4[1:]...)
		if c, err := s.findConversationFor(proxyRequest(), convQuery{msgs: changed}); err != nil || c.Created || c.Branch != c1.Branch ||
			c.From != len(sys)+6 {
			t.Fatalf("system prompt %v: %+v, %v; want branch %s from %d", sys, c, err, c1.Branch, len(sys)+6)
		}
	}
	_ = turn2
}

// A previous response id names a turn: the request goes on its branch,
// forked there if the branch has gone on since; a turn the proxy did not
// answer is found by its row; an unknown one is not found.
func TestProxyConversationByPreviousTurn(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	s := ts.Config.Handler.(*Server)
	ctx := context.Background()
	msgs := []convMessage{user("hello")}
	c, err := s.findConversationFor(proxyRequest(), convQuery{msgs: msgs})
	if err != nil {
		t.Fatal(err)
	}
	_, turn1 := runConv(t, s, c, msgs)
	next := []convMessage{user("next")}
	c2, err := s.findConversationFor(proxyRequest(), convQuery{previous: turn1, msgs: next})
	if err != nil || c2.Branch != c.Branch || c2.From != 0 || c2.Created {
		t.Fatalf("previous = the last turn: %+v, %v; want branch %s from 0", c2, err, c.Branch)
	}
	runConv(t, s, c2, next)
	c3, err := s.findConversationFor(proxyRequest(), convQuery{previous: turn1, msgs: []convMessage{user("other")}})
	if err != nil || c3.Branch == c.Branch {
		t.Fatalf("previous = an earlier turn: %+v, %v; want a fork", c3, err)
	}
	if fork, err := ts.rt.DB().BranchRow(ctx, c3.Branch); err != nil || fork.Parent != c.Branch || fork.ForkAt != turn1 {
		t.Fatalf("the earlier turn's fork: %+v, %v", fork, err)
	}

	// A turn of the HTTP API.
	_, b, err := ts.rt.CreateSession(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	st, err := ts.rt.Submit(ctx, b.ID, "through the API")
	if err != nil {
		t.Fatal(err)
	}
	st.Wait(nil)
	if c, err := s.findConversationFor(proxyRequest(), convQuery{previous: st.Turn, msgs: next}); err != nil || c.Branch != b.ID {
		t.Fatalf("previous = a turn of the HTTP API: %+v, %v; want branch %s", c, err, b.ID)
	}

	unknown := messages.NewID[messages.TurnID](time.Now())
	_, err = s.findConversationFor(proxyRequest(), convQuery{previous: unknown, msgs: next})
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != 404 || !strings.Contains(ae.Message, "previous response") {
		t.Fatalf("previous = an unknown turn: %v; want 404 naming the previous response", err)
	}
}

// A new conversation (for a key or without) whose request carries earlier
// exchanges gets them as finished turns, system messages left out and
// tool calls folded into the reply's text; the request continues after
// them, and a request that edits one of them forks there.
func TestProxyNewConversationImportsHistory(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	s := ts.Config.Handler.(*Server)
	ctx := context.Background()
	msgs := []convMessage{
		{Role: "system", Text: "be brief"},
		user("u1"),
		{Role: "assistant", Text: "a1"},
		user("u2"),
		{Role: "user", Text: "u2 more", Other: []json.RawMessage{json.RawMessage(`{"type":"image_url","image_url":{"url":"data:"}}`)}},
		{Role: "assistant", Calls: []string{"call_1"}},
		{Role: "tool", CallID: "call_1", Text: "42"},
		{Role: "assistant", Text: "a2"},
		user("u3"),
	}
	c, err := s.findConversationFor(proxyRequest(ProxyConversationHeader, "hist"), convQuery{msgs: msgs})
	if err != nil || !c.Created || c.From != 8 {
		t.Fatalf("new conversation with history: %+v, %v; want created, from 8", c, err)
	}
	want := []string{"user: u1", "assistant: a1", "user: u2\n\nu2 more\n[image_url part]",
		"assistant: [tool call call_1]\n\n[tool result call_1]\n42\n\na2"}
	if got := history(t, ts.rt, c.Branch); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("imported history:\n%q\nwant\n%q", got, want)
	}
	runConv(t, s, c, msgs)
	info, err := ts.rt.Inspect(ctx, c.Branch)
	if err != nil || info.TurnSeq != 3 {
		t.Fatalf("turns after the request: %d, %v; want 2 imported + 1", info.TurnSeq, err)
	}

	// The same request with the key finds the conversation.
	if again, err := s.findConversationFor(proxyRequest(), convQuery{key: "hist", msgs: msgs}); err != nil || again.Branch != c.Branch || again.Created {
		t.Fatalf("the key again: %+v, %v", again, err)
	}
	// Without the key, an edit of the second exchange forks after the first.
	edit := append(append([]convMessage{}, msgs[:3]...), user("u2 edited"))
	e, err := s.findConversationFor(proxyRequest(), convQuery{msgs: edit})
	if err != nil || e.From != 3 {
		t.Fatalf("an edit of an imported exchange: %+v, %v", e, err)
	}
	if fork, err := ts.rt.DB().BranchRow(ctx, e.Branch); err != nil || fork.Parent != c.Branch {
		t.Fatalf("the edit's branch: %+v, %v; want a fork of %s", fork, err, c.Branch)
	}
	if got := history(t, ts.rt, e.Branch); len(got) != 2 || got[0] != "user: u1" {
		t.Fatalf("the fork's history: %q; want the first exchange", got)
	}

	// A key over the limit is refused naming where it came from.
	long := strings.Repeat("k", MaxConversationKey+1)
	for _, tc := range []struct {
		r     *http.Request
		key   string
		field string
	}{
		{proxyRequest(ProxyConversationHeader, long), "", ProxyConversationHeader + " header"},
		{proxyRequest(), long, "conversation key"},
	} {
		_, err := s.findConversationFor(tc.r, convQuery{key: tc.key, msgs: msgs})
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tc.field) || !strings.Contains(ae.Message, "limit 200") {
			t.Errorf("a key of %d bytes: %v; want 400 naming %s and the limit", len(long), err, tc.field)
		}
	}
}

// A request sent again under its Idempotency-Key, without a key, goes
// where the first went, even when that was a new conversation.
func TestProxyConversationIdempotentRetry(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	s := ts.Config.Handler.(*Server)
	msgs := []convMessage{user("hello")}
	r := func() *http.Request { return proxyRequest(IdempotencyKeyHeader, "retry-1") }
	c, err := s.findConversationFor(r(), convQuery{msgs: msgs})
	if err != nil || !c.Created {
		t.Fatal(c, err)
	}
	again, err := s.findConversationFor(r(), convQuery{msgs: msgs})
	if err != nil || again.Branch != c.Branch || again.From != 0 {
		t.Fatalf("sent again: %+v, %v; want branch %s", again, err, c.Branch)
	}
}

// Through the official SDK, without a key: a client that sends its whole
// history each time keeps one conversation, streamed or not.
func TestProxyChatWithoutKey(t *testing.T) {
	ts := newTestServer(t, Options{}, 0)
	t.Setenv("OPENAI_API_KEY", "unused")
	t.Setenv("OPENAI_BASE_URL", "")
	cl := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithMaxRetries(0))
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello")}
	var resp *http.Response
	c, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "local", Messages: msgs}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	branch := resp.Header.Get(ProxyBranchHeader)
	msgs = append(msgs, openai.AssistantMessage(c.Choices[0].Message.Content), openai.UserMessage("and again"))
	s := cl.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "local", Messages: msgs}, option.WithResponseInto(&resp))
	var reply strings.Builder
	for s.Next() {
		if ch := s.Current(); len(ch.Choices) > 0 {
			reply.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if b := resp.Header.Get(ProxyBranchHeader); b != branch {
		t.Fatalf("second request (streamed): branch %s, want %s", b, branch)
	}
	msgs = append(msgs, openai.AssistantMessage(reply.String()), openai.UserMessage("a third"))
	if _, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "local", Messages: msgs}, option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if b := resp.Header.Get(ProxyBranchHeader); b != branch {
		t.Fatalf("third request: branch %s, want %s", b, branch)
	}
	id, _ := messages.ParseID[messages.BranchID](branch)
	got := history(t, ts.rt, id)
	if len(got) != 6 || got[0] != "user: hello" || got[2] != "user: and again" || got[4] != "user: a third" {
		t.Fatalf("history: %q; want three turns, each run once", got)
	}
}

// Requests racing to start the conversation of a new key all get the
// one conversation, and only it is made.
func TestProxyConversationKeyRace(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	s := ts.Config.Handler.(*Server)
	const n = 8
	got := make(chan messages.BranchID, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.findConversationFor(proxyRequest(ProxyConversationHeader, "race"), convQuery{msgs: []convMessage{user("u1"), {Role: "assistant", Text: "a1"}, user("u2")}})
			if err != nil {
				t.Error(err)
			}
			got <- c.Branch
		}()
	}
	wg.Wait()
	close(got)
	first := <-got
	for b := range got {
		if b != first {
			t.Fatalf("racing requests for one key got branches %s and %s", first, b)
		}
	}
	ss, err := ts.rt.DB().Sessions(context.Background())
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions after the race: %d, %v; want 1", len(ss), err)
	}
	if h := history(t, ts.rt, first); len(h) != 2 {
		t.Fatalf("the conversation's history: %q; want the one exchange imported once", h)
	}
}

// chatMsg is a message of a Chat Completions request.
type chatMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// postChat sends a Chat Completions request of msgs for the end user
// (none if "") and returns the reply's text and the conversation's
// branch.
func postChat(t *testing.T, ts *testServer, endUser string, msgs []chatMsg, headers ...string) (string, string) {
	t.Helper()
	body := map[string]any{"model": "local", "messages": msgs}
	if endUser != "" {
		body["user"] = endUser
	}
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(string(data)))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("chat: %d, %v", resp.StatusCode, err)
	}
	return out.Choices[0].Message.Content, resp.Header.Get(ProxyBranchHeader)
}

// oneSession checks that the store holds one session, whose branch is
// branch, and that it ran turns turns, none imported: each request ran
// its new message alone.
func oneSession(t *testing.T, ts *testServer, branch string, turns int) {
	t.Helper()
	ss, err := ts.rt.DB().Sessions(context.Background())
	if err != nil || len(ss) != 1 || ss[0].ActiveBranch.String() != branch {
		t.Fatalf("sessions %+v, %v; want one, of branch %s", ss, err, branch)
	}
	info, err := ts.rt.Inspect(context.Background(), ss[0].ActiveBranch)
	if err != nil || info.TurnSeq != uint64(turns) {
		t.Fatalf("the conversation's turns: %d, %v; want %d (none imported)", info.TurnSeq, err, turns)
	}
}

// An agent that puts the time in its system prompt, new at each request,
// keeps one conversation: the system prompt is not matched (it still
// goes to the model), and nothing is imported again.
func TestProxyConversationSystemPromptChanges(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	var history []chatMsg
	branch := ""
	for i := range 4 {
		sys := chatMsg{"system", fmt.Sprintf("You are an agent. The time is 2025-01-01T10:00:%02dZ.", i)}
		history = append(history, chatMsg{"user", fmt.Sprintf("question %d", i)})
		reply, b := postChat(t, ts, "", append([]chatMsg{sys}, history...))
		if branch == "" {
			branch = b
		} else if b != branch {
			t.Fatalf("request %d: branch %s, want %s", i, b, branch)
		}
		history = append(history, chatMsg{"assistant", reply})
	}
	oneSession(t, ts, branch, 4)
}

// A client that sends only a window of its history (its last messages,
// system prompt first) keeps one conversation over its requests.
func TestProxyConversationTrimmedHistory(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	const window = 4 // the messages sent besides the system prompt
	sys := chatMsg{"system", "Be brief."}
	var history []chatMsg
	branch := ""
	for i := range 8 {
		history = append(history, chatMsg{"user", fmt.Sprintf("step %d", i)})
		sent := history[max(len(history)-window, 0):]
		reply, b := postChat(t, ts, "trimmer", append([]chatMsg{sys}, sent...))
		if branch == "" {
			branch = b
		} else if b != branch {
			t.Fatalf("request %d (%d messages sent): branch %s, want %s", i, len(sent), b, branch)
		}
		history = append(history, chatMsg{"assistant", reply})
	}
	oneSession(t, ts, branch, 8)
}

// The end user (user) scopes the transcripts a request may continue, and
// names no conversation: two chats of one user stay two, and the same
// transcript sent by two users is two conversations.
func TestProxyConversationEndUsers(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	// Two chats of alice's: chat B never sees chat A's secret.
	a1 := []chatMsg{{"user", "Remember: the vault code is 4242."}}
	ra, chatA := postChat(t, ts, "alice", a1)
	b1 := []chatMsg{{"user", "What is a good name for a cat?"}}
	rb, chatB := postChat(t, ts, "alice", b1)
	if chatA == chatB {
		t.Fatalf("two chats of alice's on one branch %s", chatA)
	}
	if _, b := postChat(t, ts, "alice", append(b1, chatMsg{"assistant", rb}, chatMsg{"user", "What was the vault code?"})); b != chatB {
		t.Fatalf("chat B's second request: branch %s, want %s", b, chatB)
	}
	if _, b := postChat(t, ts, "alice", append(a1, chatMsg{"assistant", ra}, chatMsg{"user", "Thanks."})); b != chatA {
		t.Fatalf("chat A's second request: branch %s, want %s", b, chatA)
	}
	id, _ := messages.ParseID[messages.BranchID](chatB)
	if h := strings.Join(history(t, ts.rt, id), "|"); strings.Contains(h, "4242") {
		t.Fatalf("chat B holds chat A's secret: %s", h)
	}

	// The same opening and reply, sent on by bob: bob's own conversation.
	if _, b := postChat(t, ts, "bob", append(a1, chatMsg{"assistant", ra}, chatMsg{"user", "And mine?"})); b == chatA || b == "" {
		t.Fatalf("bob continues alice's transcript: branch %s (alice's %s)", b, chatA)
	}
	// Without an end user, neither.
	if _, b := postChat(t, ts, "", append(a1, chatMsg{"assistant", ra}, chatMsg{"user", "And mine?"})); b == chatA || b == "" {
		t.Fatalf("a request without user continues alice's transcript: branch %s (alice's %s)", b, chatA)
	}
	// A user names no conversation: a request of alice's that continues
	// nothing is a new conversation.
	if _, b := postChat(t, ts, "alice", []chatMsg{{"user", "Hello again."}}); b == chatA || b == chatB {
		t.Fatalf("a new chat of alice's went to branch %s", b)
	}
}

// A transcript remembered before end users and system prompts were left
// out of matching (all its messages, system ones too) is still found.
func TestProxyConversationLegacyTranscript(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	s := ts.Config.Handler.(*Server)
	ctx := context.Background()
	msgs := []convMessage{{Role: "system", Text: "be brief"}, user("hello")}
	c, err := s.findConversationFor(proxyRequest(), convQuery{msgs: msgs})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.rt.SubmitWith(ctx, c.Branch, "hello", actors.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := st.Wait(nil)
	reply := convMessage{Role: "assistant", Text: text}
	// As rememberConversation stored it then.
	h := sha256.New()
	var buf []byte
	for _, m := range append(msgs, reply) {
		buf = writeConvMessage(h, buf, m)
	}
	e := persistence.ProxyEntry{Kind: persistence.ProxyByPrefix, Name: h.Sum(nil),
		ProxyTarget: persistence.ProxyTarget{Branch: c.Branch, Turn: st.Turn}}
	if _, err := s.rt.DB().Commit(ctx, &persistence.Tx{Proxy: []persistence.ProxyEntry{e}}); err != nil {
		t.Fatal(err)
	}
	next := append(append([]convMessage{}, msgs...), reply, user("again"))
	if c2, err := s.findConversationFor(proxyRequest(), convQuery{msgs: next}); err != nil || c2.Branch != c.Branch || c2.From != 3 {
		t.Fatalf("the next request: %+v, %v; want branch %s from 3", c2, err, c.Branch)
	}
	if c2, err := s.findConversationFor(proxyRequest(), convQuery{label: "alice", msgs: next}); err != nil || !c2.Created {
		t.Fatalf("the next request, for an end user: %+v, %v; want a new conversation", c2, err)
	}
}

// lookupConversation finds what findConversationFor would, and makes
// nothing.
func TestProxyLookupConversation(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	s := ts.Config.Handler.(*Server)
	msgs := []convMessage{user("hello")}
	if _, ok, err := s.lookupConversation(proxyRequest(), convQuery{msgs: msgs}); ok || err != nil {
		t.Fatalf("a new conversation: found %v, %v", ok, err)
	}
	if _, ok, err := s.lookupConversation(proxyRequest(ProxyConversationHeader, "k"), convQuery{msgs: msgs}); ok || err != nil {
		t.Fatalf("a new key: found %v, %v", ok, err)
	}
	if ss, _ := ts.rt.DB().Sessions(context.Background()); len(ss) != 0 {
		t.Fatalf("lookups made %d sessions", len(ss))
	}
	c, err := s.findConversationFor(proxyRequest(), convQuery{label: "u", msgs: msgs})
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := runConvFor(t, s, c, "u", msgs)
	next := append(append([]convMessage{{Role: "system", Text: "now"}}, msgs...), reply, user("again"))
	got, ok, err := s.lookupConversation(proxyRequest(), convQuery{label: "u", msgs: next})
	if err != nil || !ok || got.Branch != c.Branch || got.From != 3 {
		t.Fatalf("the next request: %+v, %v, %v; want branch %s from 3", got, ok, err, c.Branch)
	}
	if _, ok, _ := s.lookupConversation(proxyRequest(), convQuery{label: "v", msgs: next}); ok {
		t.Fatal("another end user's request found the conversation")
	}
}

// A proxied request whose earlier messages hold more exchanges than
// server.proxy_max_import is 413 in its API's shape, naming the limit and
// what to do instead, and makes nothing: a new conversation is not
// created, a continued one is not changed.
func TestProxyImportCap(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{ProxyMaxImport: 2}, 0)
	chatMsgs := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"role":"user","content":"q%d"}`, i), fmt.Sprintf(`{"role":"assistant","content":"a%d"}`, i))
		}
		return strings.Join(append(parts, `{"role":"user","content":"now"}`), ",")
	}
	for _, tc := range []struct {
		name, path, body, wantIn string
		headers                  []string
	}{
		{"chat completions", "/v1/chat/completions", `{"model":"local","messages":[` + chatMsgs(3) + `]}`, `"code":"request_too_large"`, nil},
		{"responses", "/v1/responses", `{"model":"local","input":[` + chatMsgs(3) + `]}`, `"code":"request_too_large"`, nil},
		{"messages", "/v1/messages", `{"model":"local","max_tokens":100,"messages":[` + chatMsgs(3) + `]}`, `"type":"error"`,
			[]string{"anthropic-version", "2023-06-01"}},
		{"keyed", "/v1/chat/completions", `{"model":"local","messages":[` + chatMsgs(5) + `]}`, `"code":"request_too_large"`,
			[]string{ProxyConversationHeader, "long"}},
	} {
		req, _ := http.NewRequest("POST", ts.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(tc.headers); i += 2 {
			req.Header.Set(tc.headers[i], tc.headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(body), tc.wantIn) ||
			!strings.Contains(string(body), "server.proxy_max_import") || !strings.Contains(string(body), "limit of 2") ||
			!strings.Contains(string(body), "X-Ctx-Branch") {
			t.Errorf("%s: %d %s, want 413 naming the limit and X-Ctx-Branch", tc.name, resp.StatusCode, body)
		}
	}
	var sessions struct{ Sessions []persistence.SessionRow }
	ts.call(t, "GET", "/v1/sessions", nil, &sessions)
	if len(sessions.Sessions) != 0 {
		t.Fatalf("%d sessions after refused requests, want none", len(sessions.Sessions))
	}
	// Within the limit it runs.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"local","messages":[`+chatMsgs(2)+`]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("2 exchanges: %d, want 200", resp.StatusCode)
	}
}
