package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/local"
)

// loopModel asks for one tool call, with an id never used before, when a
// turn starts, and answers in text once the call has its output.
type loopModel struct {
	local.Provider
	calls atomic.Int64
}

func (m *loopModel) Name() string { return "loop" }

func (m *loopModel) Stream(ctx context.Context, req providers.Request, emit func(providers.Event) error) (providers.Response, error) {
	if len(req.Context.Continuation) == 0 {
		id := fmt.Sprintf("call_%d", m.calls.Add(1))
		args, _ := json.Marshal(`{"q":"` + id + `"}`)
		c := messages.ToolCall{CallID: id, Name: "grep", Arguments: args}
		if err := emit(providers.Event{Kind: providers.EventItem, Item: c, Type: "item", Raw: json.RawMessage(`{}`)}); err != nil {
			return providers.Response{}, err
		}
		return providers.Response{Items: messages.Items{c}, Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}}, nil
	}
	if err := emit(providers.Event{Kind: providers.EventTextDelta, Text: "done", Type: "delta", Raw: json.RawMessage(`{}`)}); err != nil {
		return providers.Response{}, err
	}
	return providers.Response{Items: messages.Items{messages.AssistantMessage{Blocks: messages.Blocks{messages.Text{Text: "done"}}}},
		Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}}, nil
}

// Branch actors are panicked and stopped at random while turns run tool
// loops. Afterwards every acknowledged turn is recorded, no tool call ran
// twice or was recorded twice, and every reply answers each of its tool
// uses exactly once.
func TestToolLoopChaos(t *testing.T) {
	t.Parallel()
	const branches, turns = 12, 8
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	model := &loopModel{}
	var mu sync.Mutex       // guards rng and ran
	ran := map[string]int{} // executions per call id
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider, cfg.ToolMode = model, messages.ToolsEnabled
	cfg.MaxRestarts = 1000
	reg, _ := NewToolRegistry(ToolFunc(grepDef, func(ctx context.Context, args json.RawMessage) (string, error) {
		var in struct{ Q string }
		json.Unmarshal(args, &in)
		mu.Lock()
		ran[in.Q]++
		mu.Unlock()
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "ok", nil
	}))
	cfg.Tools = reg
	r := openRuntime(t, cfg)
	defer r.Close()

	ids := make([]messages.BranchID, branches)
	for i := range ids {
		_, b, err := r.CreateSession(bg, "loop-chaos")
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = b.ID
	}
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			mu.Lock()
			b := ids[rng.IntN(len(ids))]
			kill := rng.IntN(2) == 0
			mu.Unlock()
			if kill {
				r.kill(bg, b)
			} else {
				r.Stop(bg, b)
			}
		}
	})
	acked := make([]int, branches)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			for range turns {
				s, err := r.Submit(bg, ids[i], "grep x")
				for errors.Is(err, ErrInterrupted) || errors.Is(err, core.ErrBusy) {
					time.Sleep(time.Millisecond)
					s, err = r.Submit(bg, ids[i], "grep x")
				}
				if err != nil {
					t.Errorf("submit: %v", err)
					return
				}
				acked[i]++
				s.Wait(nil)
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	mu.Lock()
	for id, n := range ran {
		if n > 1 {
			t.Errorf("tool call %s ran %d times", id, n)
		}
	}
	mu.Unlock()

	for i, b := range ids {
		// Let recovery finish: the branch answers once it has replayed.
		info, err := r.Inspect(bg, b)
		for err == nil && info.InFlight != nil {
			time.Sleep(time.Millisecond)
			info, err = r.Inspect(bg, b)
		}
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		rows, err := r.DB().TurnRows(bg, b, 0, 100)
		if err != nil || len(rows) != acked[i] {
			t.Fatalf("branch %d: %d turn rows, %d acknowledged (%v)", i, len(rows), acked[i], err)
		}
		hist, _, err := r.History(bg, b, messages.TurnID{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hist {
			uses, results := map[string]int{}, map[string]int{}
			for _, blk := range h.Message.Blocks {
				switch blk := blk.(type) {
				case messages.ToolUse:
					uses[blk.ToolUseID]++
				case messages.ToolResult:
					results[blk.ToolUseID]++
				}
			}
			for id, n := range uses {
				if n != 1 || results[id] != 1 {
					t.Errorf("branch %d: reply %s: tool use %s appears %d times with %d results", i, h.Node, id, n, results[id])
				}
			}
		}
		// Every call the model made went through the loop once: each turn
		// row's steps name distinct calls.
		seen := map[string]bool{}
		for _, row := range rows {
			steps, err := r.Steps(bg, row.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				for _, it := range st.Items {
					if c, ok := it.(messages.ToolCall); ok {
						if seen[c.CallID] {
							t.Errorf("branch %d: call %s recorded twice", i, c.CallID)
						}
						seen[c.CallID] = true
					}
				}
			}
		}
	}
	t.Logf("%d restarts, %d model calls", r.Restarts(), model.calls.Load())
}
