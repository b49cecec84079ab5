package ctxinf_test

import (
	"context"
	"fmt"
	"os"

	"github.com/contextinfinity/ctxinf"
)

func Example() {
	dir, _ := os.MkdirTemp("", "ctxinf-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	rt, err := ctxinf.Open(ctx, ctxinf.Options{DataDir: dir}) // the offline local provider
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	_, main, _ := rt.CreateSession(ctx, "demo")
	rt.Pin(ctx, main.ID, "The user's name is Ada.")
	reply, last, _ := rt.Ask(ctx, main, "Hello there")
	fmt.Println(last.Phase)
	fmt.Println(reply)
	// Output:
	// response_finalized
	// [local] I received your message (2 words): "Hello there". Context: 1 pinned fact, summary of 0 tokens, 0 window messages, 0 pending turns, 0 retrieved chunks.
}

func ExampleRuntime_Fork() {
	dir, _ := os.MkdirTemp("", "ctxinf-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	rt, _ := ctxinf.Open(ctx, ctxinf.Options{DataDir: dir, Relaxed: true})
	defer rt.Close()

	_, main, _ := rt.CreateSession(ctx, "demo")
	rt.Ask(ctx, main, "Plan A: use Postgres.")
	alt, _ := rt.Fork(ctx, main.ID, ctxinf.TurnID{}, "plan-b") // fork at the head
	rt.Ask(ctx, alt, "Actually, plan B: use SQLite.")

	for _, b := range []ctxinf.Branch{main, alt} {
		hist, _, _ := rt.History(ctx, b.ID, ctxinf.TurnID{}, 10)
		fmt.Println(len(hist), "messages; last user message:", hist[len(hist)-2].Message.RenderedText)
	}
	// Output:
	// 2 messages; last user message: Plan A: use Postgres.
	// 4 messages; last user message: Actually, plan B: use SQLite.
}
