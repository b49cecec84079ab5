package local_test

import (
	"context"
	"fmt"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/local"
)

func Example() {
	p := local.New(local.Options{}) // set Delay to watch it type
	req := providers.Request{
		Model:           "local",
		MaxOutputTokens: 256,
		Context: messages.AssembledContext{
			PinnedFacts: []string{"The project is written in Go."},
			Summary:     "The user is setting up a new service.",
			Pending: []messages.Message{
				messages.NewMessage(messages.RoleUser, messages.Text{Text: "Rename the config flag"}),
			},
			User: messages.NewMessage(messages.RoleUser, messages.Text{Text: "What did I ask before?"}),
		},
	}
	resp, err := p.Stream(context.Background(), req, func(ev providers.Event) error {
		if ev.Kind == providers.EventTextDelta {
			fmt.Print(ev.Text)
		}
		return nil
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println()
	fmt.Printf("%v after %d tokens\n", resp.Outcome.Kind, resp.Usage.OutputTokens)
	// Output:
	// [local] I received your message (5 words): "What did I ask before?". Context: 1 pinned fact, summary of 10 tokens, 0 window messages, 1 pending turn, 0 retrieved chunks. Pending turns: #1 "Rename the config flag".
	// completed after 36 tokens
}
