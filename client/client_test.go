package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/local"
)

func serve(t *testing.T, opts server.Options) string {
	t.Helper()
	store := persistence.TestOptions("")
	store.Durability = persistence.DurabilityRelaxed
	rt, err := actors.Open(context.Background(), actors.Config{DataDir: t.TempDir(), Store: store,
		Provider: local.New(local.Options{}), Model: "local", Fold: &core.Policy{}, RequestTimeout: 10 * time.Second,
		Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(server.New(rt, opts))
	t.Cleanup(func() {
		ts.Close()
		rt.Close()
	})
	return ts.URL
}

func TestClient(t *testing.T) {
	ctx := context.Background()
	c := client.New(serve(t, server.Options{Tokens: []string{"tok"}}), client.WithToken("tok"))
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
	if err := c.Pin(ctx, b.ID, "answer in one line"); err != nil {
		t.Fatal(err)
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
	if err := c.SelectModel(ctx, b.ID, "nope"); err == nil || !strings.Contains(err.Error(), "invalid_request") {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := c.Branch(ctx, messages.BranchID{1}); !client.IsNotFound(err) {
		t.Errorf("unknown branch: %v", err)
	}
}

func TestClientAuthError(t *testing.T) {
	c := client.New(serve(t, server.Options{Tokens: []string{"tok"}}), client.WithToken("wrong"))
	_, err := c.Sessions(context.Background())
	var e *client.Error
	if !errorsAs(err, &e) || e.Status != 401 || e.Code != "unauthorized" {
		t.Errorf("wrong token: %v", err)
	}
}

func errorsAs(err error, target **client.Error) bool { return errors.As(err, target) }

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
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("\nturn", res.Turn, "ended", res.Phase)
}
