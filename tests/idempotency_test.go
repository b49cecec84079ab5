package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
)

// errStop ends a stream on the client's side.
var errStop = errors.New("stop reading")

// A client that lost its answer sends the turn again under its
// Idempotency-Key: while the turn runs it follows the same turn, and
// after the server was killed and restarted it gets the same turn's
// reply; a fork sent again is the same branch. Nothing is stored twice.
// A conversation's concurrent proxied requests all succeed, one turn
// each.
func TestIdempotentRetriesOnTheBinary(t *testing.T) {
	dir := t.TempDir()
	slow := "CTX_LOCAL_DELAY=20ms" // a turn streams for a while
	s := startServe(t, dir, slow)
	ctx := context.Background()
	c := client.New(s.url)
	_, b, err := c.CreateSession(ctx, "retries")
	if err != nil {
		t.Fatal(err)
	}

	// The first attempt's reader goes away after the first text.
	kctx := client.WithIdempotencyKey(ctx, client.NewIdempotencyKey())
	first, err := c.Stream(kctx, b.ID, "hello there", func(e client.Event) error {
		if e.Type == "delta" && e.Text != "" {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || first.Turn.IsZero() {
		t.Fatalf("first attempt: %+v, %v", first, err)
	}
	again, err := c.Send(kctx, b.ID, "hello there")
	if err != nil || again.Turn != first.Turn || !strings.Contains(again.Reply, "hello there") ||
		again.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("the retry: %+v, %v; want turn %s to its end", again, err, first.Turn)
	}
	fctx := client.WithIdempotencyKey(ctx, "fork-after-hello")
	fork, err := c.Fork(fctx, b.ID, first.Turn, "alt")
	if err != nil {
		t.Fatal(err)
	}

	// Killed and restarted: the retries find what the first made.
	_ = s.cmd.Process.Kill()
	<-s.done
	s = startServe(t, dir, slow)
	c = client.New(s.url)
	after, err := c.Send(kctx, b.ID, "hello there")
	if err != nil || after.Turn != first.Turn || after.Reply != again.Reply {
		t.Fatalf("the retry after a restart: %+v, %v; want turn %s with reply %q", after, err, first.Turn, again.Reply)
	}
	if _, err := c.Send(kctx, b.ID, "another text"); !client.IsKeyReused(err) {
		t.Fatalf("the key with another text: %v, want idempotency_key_reused", err)
	}
	if f, err := c.Fork(fctx, b.ID, first.Turn, "alt"); err != nil || f.ID != fork.ID {
		t.Fatalf("the fork again after a restart: %+v, %v; want branch %s", f, err, fork.ID)
	}
	info, err := c.Branch(ctx, b.ID)
	if err != nil || info.TurnSeq != 1 {
		t.Fatalf("turn seq %d, %v; want 1 turn for 4 sends", info.TurnSeq, err)
	}
	if bs, err := c.Branches(ctx, b.Session); err != nil || len(bs) != 2 {
		t.Fatalf("%d branches, %v; want main and one fork", len(bs), err)
	}

	// LangChain's batch(): concurrent requests on one conversation.
	t.Setenv("OPENAI_API_KEY", "unused")
	t.Setenv("OPENAI_BASE_URL", "")
	oc := openai.NewClient(option.WithBaseURL(s.url+"/v1"), option.WithMaxRetries(0),
		option.WithHeader("X-Ctx-Conversation", "batch"))
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			res, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "local",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("batch item %d", i))}})
			if err == nil {
				ids[i] = res.ID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("batch item %d: %v", i, err)
		}
		seen[ids[i]] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct completions for %d requests", len(seen), n)
	}
	s.stop(t)
}
