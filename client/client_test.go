package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// serve starts a server over a runtime of its own, configured as
// config.yaml configures one but for its tokens (none: no
// authentication), and returns its URL.
func serve(t *testing.T, tokens ...string) string {
	t.Helper()
	return serveWith(t, tokens, nil)
}

// serveWith is serve with the runtime's configuration changed by edit,
// if not nil.
func serveWith(t *testing.T, tokens []string, edit func(*actors.Config)) string {
	t.Helper()
	store := badgerdb.TestOptions("")
	store.Durability = persistence.DurabilityRelaxed
	cfg := actors.Config{DataDir: t.TempDir(), Store: store,
		Provider: local.New(local.Options{}), Model: "local", Fold: &core.Policy{}, RequestTimeout: 10 * time.Second,
		Logger: zerolog.Nop()}
	if edit != nil {
		edit(&cfg)
	}
	rt, err := actors.Open(context.Background(), wiring.Fill(cfg))
	if err != nil {
		t.Fatal(err)
	}
	opts := server.OptionsOf(config.Default().Server)
	opts.Tokens = tokens
	s, err := server.New(rt, opts)
	if err != nil {
		rt.Close()
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		rt.Close()
	})
	return ts.URL
}

func TestClient(t *testing.T) {
	ctx := context.Background()
	c := client.New(serve(t, "tok"), client.WithToken("tok"))
	sess, b, err := c.CreateSession(ctx, "client test")
	if err != nil || sess.Title != "client test" {
		t.Fatal(sess, err)
	}
	res, err := c.Send(ctx, b.ID, "The build runs on runner-9.")
	if err != nil || res.Phase != messages.PhaseResponseFinalized || !strings.Contains(res.Reply, "runner-9") {
		t.Fatalf("send: %+v, %v", res, err)
	}
	var deltas, kinds []string
	streamed, err := c.Stream(ctx, b.ID, "Where does the build run?", func(e client.Event) error {
		if e.Type == "delta" {
			deltas = append(deltas, e.Text)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != e.Type {
			kinds = append(kinds, e.Type)
		}
		return nil
	})
	if err != nil || streamed.Phase != messages.PhaseResponseFinalized || streamed.Reply != strings.Join(deltas, "") ||
		strings.Join(kinds, ",") != "turn,delta,done" || streamed.Seq != 2 || streamed.Durable == 0 {
		t.Fatalf("stream: %+v, kinds %v, %v", streamed, kinds, err)
	}
	hist, _, err := c.History(ctx, b.ID, messages.TurnID{}, 10)
	if err != nil || len(hist) != 4 || hist[2].Message.RenderedText != "Where does the build run?" {
		t.Fatalf("history: %d entries, %v", len(hist), err)
	}
	if p, err := c.Pin(ctx, b.ID, "answer in one line"); err != nil || p.ID != 1 || p.Fact != "answer in one line" {
		t.Fatalf("pin: %+v, %v", p, err)
	}
	fork, err := c.Fork(ctx, b.ID, res.Turn, "alt")
	if err != nil || fork.Parent != b.ID {
		t.Fatalf("fork: %+v, %v", fork, err)
	}
	info, err := c.Branch(ctx, b.ID)
	if err != nil || info.TurnSeq != 2 || len(info.State.Pinned) != 1 {
		t.Fatalf("branch: %+v, %v", info, err)
	}
	if _, err := c.Context(ctx, b.ID, res.Turn); err != nil {
		t.Fatal(err)
	}
	turn, err := c.Turn(ctx, b.ID, res.Turn)
	if err != nil || turn.Seq != 1 || turn.Reply.IsZero() || len(turn.Steps) != 1 || turn.Steps[0].Provider != "local" ||
		turn.Steps[0].Outcome.Kind != messages.OutcomeCompleted || turn.Steps[0].Durable == 0 {
		t.Fatalf("turn: %+v, %v", turn, err)
	}
	// The fork sees the turns before its fork point; its parent does not
	// see the fork's own.
	if t1, err := c.Turn(ctx, fork.ID, res.Turn); err != nil || t1.ID != res.Turn {
		t.Errorf("a turn before the fork point, through the fork: %+v, %v", t1, err)
	}
	// Turn 2 came after the fork point (turn 1, which the fork carries as
	// pending if it was not yet folded).
	if _, err := c.Turn(ctx, fork.ID, streamed.Turn); !client.IsNotFound(err) {
		t.Errorf("a turn of another branch: %v", err)
	}
	pending, err := c.Pending(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if p.Phase != messages.PhaseResponseFinalized || p.Seq == 0 || p.Seq > 2 {
			t.Errorf("pending turn %+v", p)
		}
	}
	var export strings.Builder
	if err := c.Export(ctx, sess.ID, &export); err != nil || !strings.HasPrefix(export.String(), `{"type":"session","format":2,`) ||
		!strings.Contains(export.String(), `{"type":"end","branches":2,"turns":2,`) {
		t.Fatalf("export: %v\n%s", err, export.String())
	}
	imported, err := c.Import(ctx, strings.NewReader(export.String()))
	if err != nil || imported.Turns != 2 || imported.Session.Title != "client test" || imported.Branch.Session != imported.Session.ID {
		t.Fatalf("import: %+v, %v", imported, err)
	}
	if _, err := c.Import(ctx, strings.NewReader(`{"type":"song"}`)); err == nil || !strings.Contains(err.Error(), `type "song"`) {
		t.Errorf("bad import: %v", err)
	}
	if err := c.Export(ctx, messages.SessionID{1}, io.Discard); !client.IsNotFound(err) {
		t.Errorf("export of an unknown session: %v", err)
	}
	forkTurn, err := c.Send(ctx, fork.ID, "on the fork")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Turn(ctx, b.ID, forkTurn.Turn); !client.IsNotFound(err) {
		t.Errorf("a turn of another branch: %v", err)
	}
	if err := c.SelectModel(ctx, b.ID, "nope"); err == nil || !strings.Contains(err.Error(), "invalid_request") {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := c.Branch(ctx, messages.BranchID{1}); !client.IsNotFound(err) {
		t.Errorf("unknown branch: %v", err)
	}
}

func TestClientAuthError(t *testing.T) {
	c := client.New(serve(t, "tok"), client.WithToken("wrong"))
	_, err := c.Sessions(context.Background())
	var e *client.Error
	if !errorsAs(err, &e) || e.Status != 401 || e.Code != "unauthorized" {
		t.Errorf("wrong token: %v", err)
	}
}

func errorsAs(err error, target **client.Error) bool { return errors.As(err, target) }

// A turn that fails or is cancelled is a *TurnError saying why, from Send
// and from Stream alike.
func TestClientFailedTurns(t *testing.T) {
	ctx := context.Background()
	unauthorized := &providers.Error{Provider: "fake", StatusCode: 401, Message: "invalid api key"}
	block := make(chan struct{})
	defer close(block)
	f := fake.New(fake.Step{}, fake.Step{Err: unauthorized}, fake.Step{Err: unauthorized},
		fake.Step{Block: block}, fake.Step{Block: block}).WithContextLimit(600)
	c := client.New(serveWith(t, nil, func(cfg *actors.Config) {
		cfg.Provider, cfg.MaxOutputTokens, cfg.SafetyMargin = f, 100, 10
	}))
	_, b, err := c.CreateSession(ctx, "failing")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, res client.TurnResult, err error, status int, code, msg string) {
		t.Helper()
		var te *client.TurnError
		if !errors.As(err, &te) || te.Code != code || te.Status != status || te.Turn.IsZero() || te.Phase != messages.PhaseFailed ||
			te.Outcome != messages.FailedOutcome(code, te.Message) || !strings.Contains(te.Message, msg) {
			t.Fatalf("%s: %v (%+v), want a TurnError %d %s %q", what, err, te, status, code, msg)
		}
		if res.Turn != te.Turn || res.Phase != messages.PhaseFailed || res.Outcome != te.Outcome || res.Error != te.Message {
			t.Errorf("%s: result %+v, want the turn's failure", what, res)
		}
		var e *client.Error
		if wrapped := errors.As(err, &e); wrapped != (status != 0) || wrapped && (e.Status != status || e.Code != code) {
			t.Errorf("%s: wraps %+v (%v), want the server's error answer with Send only", what, e, wrapped)
		}
		if client.IsCancelled(err) != (code == client.CodeCancelled) {
			t.Errorf("%s: IsCancelled = %v", what, !(code == client.CodeCancelled))
		}
	}
	huge := strings.Repeat("huge ", 3000)
	res, err := c.Send(ctx, b.ID, huge)
	check("send too large", res, err, 422, client.CodeContextTooLarge, "context too large")
	var done client.Event
	res, err = c.Stream(ctx, b.ID, huge, func(e client.Event) error {
		if e.Type == "done" {
			done = e
		}
		return nil
	})
	check("stream too large", res, err, 0, client.CodeContextTooLarge, "context too large")
	if done.Code != client.CodeContextTooLarge || done.Error != res.Error {
		t.Errorf("done event %+v", done)
	}
	if res, err := c.Send(ctx, b.ID, "hello"); err != nil || res.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("a turn that fits: %+v, %v", res, err)
	}
	res, err = c.Send(ctx, b.ID, "hello")
	check("send 401", res, err, 502, client.CodeProviderAuth, "status 401: invalid api key")
	res, err = c.Stream(ctx, b.ID, "hello", nil)
	check("stream 401", res, err, 0, client.CodeProviderAuth, "status 401: invalid api key")

	// Cancelled, waited for and streamed: cancel once the turn's step
	// runs (before, there is nothing to cancel).
	cancel := func() error {
		for deadline := time.Now().Add(10 * time.Second); ; {
			err := c.Cancel(ctx, b.ID)
			var e *client.Error
			if err == nil || !errors.As(err, &e) || e.Code != "conflict" || time.Now().After(deadline) {
				return err
			}
			time.Sleep(5 * time.Millisecond) // poll: the step starts on its own
		}
	}
	cancelled := make(chan error, 1)
	go func() { cancelled <- cancel() }()
	res, err = c.Send(ctx, b.ID, "wait")
	check("send cancelled", res, err, 409, client.CodeCancelled, "cancelled")
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	res, err = c.Stream(ctx, b.ID, "wait", func(e client.Event) error {
		if e.Type == "turn" {
			go func() { cancelled <- cancel() }()
		}
		return nil
	})
	check("stream cancelled", res, err, 0, client.CodeCancelled, "cancelled")
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
}

// Page back through a transcript of any length, newest page first.
func ExampleClient_History() {
	c := client.New("http://127.0.0.1:8080")
	ctx := context.Background()
	branch, _ := messages.ParseID[messages.BranchID]("01K9Z3V6Q8D4T2M0R5C7B1N3XW")
	var before messages.NodeID // zero: from the head
	for {
		page, next, err := c.History(ctx, branch, before, 100)
		if err != nil {
			fmt.Println(err)
			return
		}
		for i := len(page) - 1; i >= 0; i-- {
			fmt.Println(page[i].Depth, page[i].Message.Role, page[i].Message.RenderedText)
		}
		if next.IsZero() {
			return
		}
		before = next
	}
}

// Copy a conversation to another server: export it, then import it.
func ExampleClient_Export() {
	ctx := context.Background()
	from, to := client.New("http://127.0.0.1:8080"), client.New("http://127.0.0.1:9090")
	session, _ := messages.ParseID[messages.SessionID]("01K9Z3V6Q8D4T2M0R5C7B1N3XV")
	var export bytes.Buffer
	if err := from.Export(ctx, session, &export); err != nil {
		fmt.Println(err)
		return
	}
	imported, err := to.Import(ctx, &export)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("session", imported.Session.ID, "holds", imported.Turns, "turns")
}

func ExampleClient_Stream() {
	c := client.New("http://127.0.0.1:8080")
	ctx := context.Background()
	_, branch, err := c.CreateSession(ctx, "support")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Stream(ctx, branch.ID, "Hello!", func(e client.Event) error {
		fmt.Print(e.Text) // the reply as it streams
		return nil
	})
	var te *client.TurnError
	switch {
	case errors.As(err, &te):
		// The turn failed or was cancelled: te.Code says why
		// (context_too_large, provider_error, cancelled…).
		fmt.Printf("\nturn %s %s (%s): %s\n", te.Turn, te.Outcome.Kind, te.Code, te.Message)
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	fmt.Println("\nturn", res.Turn, "ended", res.Phase)
}

// Pins are listed, unpinned and edited by id over HTTP; limits and
// unknown ids are errors naming them, and store nothing.
func TestClientPins(t *testing.T) {
	base := serveWith(t, nil, func(cfg *actors.Config) {
		cfg.Pins = core.PinLimits{MaxPins: 2, MaxBytes: 100}
	})
	c := client.New(base)
	ctx := context.Background()
	_, b, err := c.CreateSession(ctx, "pins")
	if err != nil {
		t.Fatal(err)
	}
	for i, fact := range []string{"answer in French", "use tabs"} {
		if p, err := c.Pin(ctx, b.ID, fact); err != nil || p.ID != uint64(i+1) || p.Fact != fact {
			t.Fatalf("pin %q: %+v, %v", fact, p, err)
		}
	}
	var ce *client.Error
	if _, err := c.Pin(ctx, b.ID, "a third"); !errors.As(err, &ce) || ce.Status != 400 || ce.Code != api.CodeInvalid ||
		!strings.Contains(ce.Message, "limit 2 (context.max_pins)") {
		t.Errorf("a pin over max_pins: %v", err)
	}
	if _, err := c.EditPin(ctx, b.ID, 1, strings.Repeat("x", 101)); !errors.As(err, &ce) || ce.Status != 400 ||
		!strings.Contains(ce.Message, "101 bytes, limit 100 (context.max_pin_bytes)") {
		t.Errorf("an edit over max_pin_bytes: %v", err)
	}
	if err := c.Unpin(ctx, b.ID, 7); !client.IsNotFound(err) || !strings.Contains(err.Error(), "pin 7 is not pinned") {
		t.Errorf("unpin 7: %v, want a 404 naming pin 7", err)
	}
	if err := c.Unpin(ctx, b.ID, 1); err != nil {
		t.Fatal(err)
	}
	if p, err := c.EditPin(ctx, b.ID, 2, "use spaces"); err != nil || p.ID != 2 || p.Fact != "use spaces" {
		t.Fatalf("edit: %+v, %v", p, err)
	}
	pins, err := c.Pins(ctx, b.ID)
	if err != nil || len(pins) != 1 || pins[0].ID != 2 || pins[0].Fact != "use spaces" {
		t.Fatalf("pins: %+v, %v", pins, err)
	}
	raw, err := c.Context(ctx, b.ID, messages.TurnID{})
	var d struct {
		Context struct {
			Pinned []string `json:"pinned_facts"`
		} `json:"context"`
	}
	if err != nil || json.Unmarshal(raw, &d) != nil || len(d.Context.Pinned) != 1 || d.Context.Pinned[0] != "use spaces" {
		t.Errorf("next context: %s, %v", raw, err)
	}
}

// SessionsWhere lists the sessions by their metadata: the proxy's
// conversations carry their source, end user and client.
func TestClientSessionsWhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := serve(t)
	c := client.New(url)
	if _, _, err := c.CreateSession(ctx, "through the API"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob", "alice"} {
		body := fmt.Sprintf(`{"model":"local","user":%q,"messages":[{"role":"user","content":"Hello from %s, %d."}]}`, u, u, time.Now().UnixNano())
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("User-Agent", "agent/1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("chat as %s: %v, %v", u, resp, err)
		}
		resp.Body.Close()
	}
	for _, tc := range []struct {
		where map[string]string
		want  int
	}{
		{nil, 4},
		{map[string]string{"source": "proxy"}, 3},
		{map[string]string{"source": "proxy", "end_user": "alice"}, 2},
		{map[string]string{"end_user": "bob", "client": "agent/1.0"}, 1},
		{map[string]string{"end_user": "carol"}, 0},
	} {
		ss, err := c.SessionsWhere(ctx, tc.where)
		if err != nil || len(ss) != tc.want {
			t.Errorf("SessionsWhere(%v) = %d sessions, %v; want %d", tc.where, len(ss), err, tc.want)
		}
		for _, s := range ss {
			if tc.where["end_user"] != "" && (s.Metadata["end_user"] != tc.where["end_user"] || !strings.HasPrefix(s.Title, "Hello from")) {
				t.Errorf("SessionsWhere(%v): %+v", tc.where, s)
			}
		}
	}
}
