package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// A turn, a fork or an import sent again under its Idempotency-Key is
// answered with what the first made and stores nothing new; the key
// with another body is 422, a malformed key 400.
func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, 0)
	var created struct {
		Session persistence.SessionRow
		Branch  persistence.BranchRow
	}
	ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "keys"}, &created)
	b := "/v1/branches/" + created.Branch.ID.String()
	turnSeq := func() uint64 {
		var info client.BranchInfo
		ts.call(t, "GET", b, nil, &info)
		return info.TurnSeq
	}

	var first, again client.TurnResult
	if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": "hello"}, &first, "Idempotency-Key", "turn-1"); st != 200 {
		t.Fatalf("turn: %d", st)
	}
	if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": "hello"}, &again, "Idempotency-Key", "turn-1"); st != 200 ||
		again.Turn != first.Turn || again.Reply != first.Reply || again.Seq != 1 || again.Outcome.Kind != messages.OutcomeCompleted {
		t.Fatalf("the turn again: %d %+v, want %+v", st, again, first)
	}
	// Streamed, the repeat is the same turn too.
	req, _ := http.NewRequest("POST", ts.URL+b+"/turns", strings.NewReader(`{"text":"hello","stream":true}`))
	req.Header.Set("Idempotency-Key", "turn-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sse, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(sse), "event: turn\ndata: {\"branch\"") || !strings.Contains(string(sse), first.Turn.String()) ||
		!strings.Contains(string(sse), "event: done") {
		t.Fatalf("streamed repeat: %s, want turn %s to its end", sse, first.Turn)
	}
	var e apiErr
	if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": "another"}, &e, "Idempotency-Key", "turn-1"); st != 422 ||
		e.Error.Code != "idempotency_key_reused" {
		t.Fatalf("the key with another text: %d %+v, want 422 idempotency_key_reused", st, e)
	}
	for _, bad := range []string{strings.Repeat("k", 256), "caf\xc3\xa9"} {
		if st := ts.call(t, "POST", b+"/turns", map[string]string{"text": "hello"}, &e, "Idempotency-Key", bad); st != 400 ||
			!strings.Contains(e.Error.Message, "Idempotency-Key") || !strings.Contains(e.Error.Message, "255") {
			t.Errorf("key %q: %d %+v, want 400 naming the header and its limit", bad, st, e)
		}
	}
	if n := turnSeq(); n != 1 {
		t.Fatalf("turn seq %d after one turn sent 3 times, want 1", n)
	}

	var f1, f2 persistence.BranchRow
	fork := map[string]string{"label": "alt"}
	if st := ts.call(t, "POST", b+"/forks", fork, &f1, "Idempotency-Key", "fork-1"); st != 201 {
		t.Fatalf("fork: %d", st)
	}
	if st := ts.call(t, "POST", b+"/forks", fork, &f2, "Idempotency-Key", "fork-1"); st != 201 || f2.ID != f1.ID {
		t.Fatalf("the fork again: %d %s, want branch %s", st, f2.ID, f1.ID)
	}
	if st := ts.call(t, "POST", b+"/forks", map[string]string{"label": "other"}, &e, "Idempotency-Key", "fork-1"); st != 422 {
		t.Fatalf("the fork key with another label: %d %+v, want 422", st, e)
	}
	var branches struct{ Branches []persistence.BranchRow }
	ts.call(t, "GET", "/v1/sessions/"+created.Session.ID.String()+"/branches", nil, &branches)
	if len(branches.Branches) != 2 {
		t.Fatalf("%d branches after one fork sent twice, want 2", len(branches.Branches))
	}

	resp, err = http.Get(ts.URL + "/v1/sessions/" + created.Session.ID.String() + "/export")
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var i1, i2 client.Imported
	if st := ts.call(t, "POST", "/v1/sessions/import", string(export), &i1, "Idempotency-Key", "import-1"); st != 201 || i1.Turns != 1 {
		t.Fatalf("import: %d %+v", st, i1)
	}
	if st := ts.call(t, "POST", "/v1/sessions/import", string(export), &i2, "Idempotency-Key", "import-1"); st != 201 ||
		i2.Session.ID != i1.Session.ID || i2.Branch.ID != i1.Branch.ID || i2.Turns != 1 {
		t.Fatalf("the import again: %d %+v, want %+v", st, i2, i1)
	}
	if st := ts.call(t, "POST", "/v1/sessions/import", string(export)+"\n", &e, "Idempotency-Key", "import-1"); st != 422 {
		t.Fatalf("the import key with another body: %d %+v, want 422", st, e)
	}
	var sessions struct{ Sessions []persistence.SessionRow }
	ts.call(t, "GET", "/v1/sessions", nil, &sessions)
	if len(sessions.Sessions) != 2 {
		t.Fatalf("%d sessions after one import sent twice, want 2", len(sessions.Sessions))
	}
}

// gate holds the branch actors inside their Observe hook at the first
// event match picks once armed, until released.
type gate struct {
	mu      sync.Mutex
	match   func(messages.BranchEvent) bool
	held    chan struct{}
	release chan struct{}
}

func (g *gate) arm(match func(messages.BranchEvent) bool) {
	g.mu.Lock()
	g.match, g.held, g.release = match, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) observe(_ messages.BranchID, ev messages.BranchEvent) {
	g.mu.Lock()
	match, held, release := g.match, g.held, g.release
	if match != nil && match(ev) {
		g.match = nil
	} else {
		match = nil
	}
	g.mu.Unlock()
	if match != nil {
		close(held)
		<-release
	}
}

// A turn answered 504 because the branch did not answer in time says
// whether it was accepted; one said not accepted is never stored.
func TestTimeoutSaysWhetherTheTurnWasAccepted(t *testing.T) {
	t.Parallel()
	g := &gate{}
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.RequestTimeout = 300 * time.Millisecond
		c.Observe = g.observe
	})
	var created struct{ Branch persistence.BranchRow }
	ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "slow"}, &created)
	b := "/v1/branches/" + created.Branch.ID.String()

	// The branch is held in a pin's event: the turn waits unread.
	g.arm(func(ev messages.BranchEvent) bool { _, ok := ev.(messages.FactPinned); return ok })
	go func() {
		req, _ := http.NewRequest("POST", ts.URL+b+"/pins", strings.NewReader(`{"fact":"slow"}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-g.held
	var e struct {
		Error struct {
			Code, Message string
			Accepted      *bool
		}
	}
	st := ts.call(t, "POST", b+"/turns", map[string]string{"text": "hello"}, &e)
	close(g.release)
	if st != 504 || e.Error.Code != "timeout" || e.Error.Accepted == nil || *e.Error.Accepted ||
		!strings.Contains(e.Error.Message, "not accepted") {
		t.Fatalf("a turn the branch did not read in time: %d %+v, want 504 timeout with accepted false", st, e)
	}
	var info client.BranchInfo
	ts.call(t, "GET", b, nil, &info) // after the turn's request in the branch's mailbox
	if info.TurnSeq != 0 {
		t.Fatalf("turn seq %d after a turn answered not accepted, want 0", info.TurnSeq)
	}

	// The Go client reads it.
	c := client.New(ts.URL)
	g.arm(func(ev messages.BranchEvent) bool { _, ok := ev.(messages.FactPinned); return ok })
	go c.Pin(context.Background(), created.Branch.ID, "slow again")
	<-g.held
	_, err := c.Send(context.Background(), created.Branch.ID, "hello")
	close(g.release)
	if !client.NotAccepted(err) {
		t.Fatalf("client.Send timed out: %v, want NotAccepted", err)
	}
}

// A turn sent while the branch's turn before it runs is 409
// turn_in_flight with Retry-After.
func TestBusyBranchSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	ts, b := failingServer(t, fake.New(fake.Step{Reply: "slow", Block: block}))
	defer close(block)
	resp, err := http.Post(ts.URL+b+"/turns", "application/json", strings.NewReader(`{"text":"first","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	req, _ := http.NewRequest("POST", ts.URL+b+"/turns", strings.NewReader(`{"text":"second"}`))
	busy, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(busy.Body)
	busy.Body.Close()
	if busy.StatusCode != 409 || !strings.Contains(string(data), "turn_in_flight") || busy.Header.Get("Retry-After") == "" {
		t.Fatalf("a turn while one runs: %d %s, Retry-After %q; want 409 turn_in_flight with Retry-After",
			busy.StatusCode, data, busy.Header.Get("Retry-After"))
	}
}

// Concurrent chat completions on one conversation (LangChain's batch())
// through the proxy all succeed, with no retry: each is its own turn, in
// the order they came. Past server.proxy_queue waiting, 429.
func TestProxyQueuesAConversationsTurns(t *testing.T) {
	block := make(chan struct{})
	ts := newTestServerWith(t, Options{ProxyQueue: 4}, 0, func(c *actors.Config) {
		c.Provider = fake.New(fake.Step{Reply: "first", Block: block}, fake.Step{Reply: "next"})
	})
	srv := ts.Config.Handler.(*Server)
	t.Setenv("OPENAI_API_KEY", "unused")
	t.Setenv("OPENAI_BASE_URL", "")
	cl := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithMaxRetries(0),
		option.WithHeader("X-Ctx-Conversation", "batch"))
	const n = 5
	type answer struct {
		id, reply string
		err       error
	}
	answers := make([]chan answer, n)
	send := func(i int) {
		answers[i] = make(chan answer, 1)
		go func() {
			c, err := cl.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "local",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("question %d", i))}})
			if err != nil {
				answers[i] <- answer{err: err}
				return
			}
			answers[i] <- answer{id: c.ID, reply: c.Choices[0].Message.Content}
		}()
	}
	// until polls cond, with a deadline.
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	send(0)
	var branch messages.BranchID
	until("the first turn to run", func() bool {
		c, err := ts.rt.DB().ProxyLookup(context.Background(), "", persistence.ProxyByKey, []byte("batch"))
		if err != nil {
			return false
		}
		branch = c.Branch
		info, err := ts.rt.Inspect(context.Background(), branch)
		return err == nil && info.InFlight != nil
	})
	for i := 1; i < n; i++ { // one at a time, so that the order they came in is known
		send(i)
		until(fmt.Sprintf("request %d to wait", i), func() bool { return srv.proxy.queues.waiting(branch) == i })
	}
	// The queue is full: one more is refused at once, with Retry-After.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"local","messages":[{"role":"user","content":"one too many"}]}`))
	req.Header.Set("X-Ctx-Conversation", "batch")
	full, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	full.Body.Close()
	if full.StatusCode != 429 || full.Header.Get("Retry-After") == "" {
		t.Fatalf("past the queue's limit: %d, Retry-After %q; want 429 with Retry-After", full.StatusCode, full.Header.Get("Retry-After"))
	}
	close(block)
	ids := map[string]bool{}
	for i := range n {
		a := <-answers[i]
		want := "next"
		if i == 0 {
			want = "first"
		}
		if a.err != nil || a.reply != want {
			t.Fatalf("request %d: %q, %v; want %q", i, a.reply, a.err, want)
		}
		ids[a.id] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct completions for %d requests", len(ids), n)
	}
	entries, _, err := ts.rt.History(context.Background(), branch, messages.TurnID{}, 2*n)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, e := range entries {
		if e.Message.Role == messages.RoleUser {
			users = append(users, e.Message.RenderedText)
		}
	}
	if want := "question 0,question 1,question 2,question 3,question 4"; strings.Join(users, ",") != want {
		t.Fatalf("turns in the order %q, want %q", users, want)
	}
}

// A turn that failed in a way its answer invites a retry of (the
// provider's 429 with its Retry-After, an interruption with Retry-After:
// 1) answers a repeat under the same Idempotency-Key with 409
// idempotency_key_failed, without Retry-After and with x-should-retry:
// false, saying to send it with a new key: the key names the failed
// turn, so retrying under it could never succeed. A new key runs it.
func TestIdempotencyKeyOfAFailedTurn(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	rateLimited := &providers.Error{Provider: "fake", StatusCode: 429, Message: "slow down", RetryAfter: 3 * time.Second}
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) {
		c.Provider = fake.New(fake.Step{Err: rateLimited}, fake.Step{Reply: "ok"}, fake.Step{Reply: "never", Block: block},
			fake.Step{Reply: "fine"})
	})
	var created struct{ Branch persistence.BranchRow }
	ts.call(t, "POST", "/v1/sessions", map[string]string{"title": "failed keys"}, &created)
	b := "/v1/branches/" + created.Branch.ID.String()

	send := func(text, key string) (*http.Response, apiErr) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+b+"/turns", strings.NewReader(`{"text":"`+text+`"}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e apiErr
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp, e
	}
	resp, e := send("hello", "k-429")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("first: %d Retry-After %q %+v, want 429 with the provider's Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), e)
	}
	resp, e = send("hello", "k-429")
	if resp.StatusCode != 409 || e.Error.Code != "idempotency_key_failed" || resp.Header.Get("Retry-After") != "" ||
		resp.Header.Get("X-Should-Retry") != "false" || !strings.Contains(e.Error.Message, "new Idempotency-Key") ||
		!strings.Contains(e.Error.Message, "provider_rate_limited") {
		t.Fatalf("repeat: %d Retry-After %q %+v, want 409 idempotency_key_failed naming the cause and a new key, no Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), e)
	}
	if resp, e = send("hello", "k-429-2"); resp.StatusCode != 200 {
		t.Fatalf("under a new key: %d %+v, want 200", resp.StatusCode, e)
	}

	// Interrupted: the branch stops while its turn streams.
	done := make(chan *http.Response, 1)
	go func() {
		r, _ := send("again", "k-stop")
		done <- r
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var info client.BranchInfo
		ts.call(t, "GET", b, nil, &info)
		if info.TurnSeq == 3 && info.InFlight != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn did not start: %+v", info)
		}
		runtime.Gosched()
	}
	if err := ts.rt.Stop(context.Background(), created.Branch.ID); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.StatusCode != 503 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("interrupted: %d, want 503 with Retry-After", r.StatusCode)
	}
	close(block)
	resp, e = send("again", "k-stop")
	if resp.StatusCode != 409 || e.Error.Code != "idempotency_key_failed" || !strings.Contains(e.Error.Message, "interrupted") ||
		resp.Header.Get("Retry-After") != "" {
		t.Fatalf("repeat of the interrupted turn: %d %+v, want 409 idempotency_key_failed", resp.StatusCode, e)
	}
	if resp, e = send("again", "k-stop-2"); resp.StatusCode != 200 {
		t.Fatalf("the interrupted turn under a new key: %d %+v, want 200", resp.StatusCode, e)
	}
}
