package ctxinf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
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

func ExampleRuntime_Pin() {
	dir, _ := os.MkdirTemp("", "ctxinf-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	rt, _ := ctxinf.Open(ctx, ctxinf.Options{DataDir: dir, Relaxed: true})
	defer rt.Close()
	_, main, _ := rt.CreateSession(ctx, "pins")

	french, _ := rt.Pin(ctx, main.ID, "Answer in French.")
	tabs, _ := rt.Pin(ctx, main.ID, "Indent with tabs.")
	rt.EditPin(ctx, main.ID, french.ID, "Answer in English.") // keeps its id and place
	rt.Unpin(ctx, main.ID, tabs.ID)
	pins, _ := rt.Pins(ctx, main.ID)
	for _, p := range pins {
		fmt.Printf("#%d %s\n", p.ID, p.Fact)
	}
	_, err := rt.Pin(ctx, main.ID, strings.Repeat("x", 3000))
	fmt.Println(err)
	// Output:
	// #1 Answer in English.
	// core: invalid: fact: 3000 bytes, limit 2048 (context.max_pin_bytes)
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

// A tool the model can call. The scripted fake provider stands in for a
// model that asks for the tool once, then answers with its result; with a
// real model (openai, anthropic) the loop is the same.
func ExampleToolFunc() {
	dir, _ := os.MkdirTemp("", "ctxinf-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	weather := ctxinf.ToolFunc(messages.Tool{
		Name:        "weather",
		Description: "Current weather in a city.",
		InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}, func(ctx context.Context, args json.RawMessage) (string, error) {
		var in struct{ City string }
		if err := json.Unmarshal(args, &in); err != nil {
			return "", err
		}
		return "18°C and sunny in " + in.City, nil
	})
	tools, _ := ctxinf.NewToolRegistry(weather)
	model := fake.New(
		fake.Step{Items: messages.Items{messages.ToolCall{CallID: "call_1", Name: "weather", Arguments: json.RawMessage(`"{\"city\":\"Paris\"}"`)}},
			Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}},
		fake.Step{Reply: "It is 18°C and sunny in Paris."},
	)
	rt, _ := ctxinf.Open(ctx, ctxinf.Options{DataDir: dir, Relaxed: true, Provider: model,
		ToolMode: messages.ToolsEnabled, Tools: tools})
	defer rt.Close()

	_, main, _ := rt.CreateSession(ctx, "demo")
	s, _ := rt.Submit(ctx, main.ID, "What's the weather in Paris?")
	for us := s.Next(nil); us != nil; us = s.Next(nil) {
		for _, u := range us {
			switch it := u.Item.(type) {
			case messages.ToolCall:
				fmt.Println("call:", it.Name, providers.ArgumentsText(it.Arguments))
			case messages.ToolOutput:
				fmt.Println("result:", string(it.Output))
			}
			if u.Delta != "" {
				fmt.Print(u.Delta)
			}
			if u.Done {
				fmt.Println("\n" + u.Phase.String())
			}
		}
	}
	// Output:
	// call: weather {"city":"Paris"}
	// result: "18°C and sunny in Paris"
	// It is 18°C and sunny in Paris.
	// response_finalized
}
