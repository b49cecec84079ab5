package actors

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// offersMemory reports whether req offered the model search_memory.
func offersMemory(req providers.Request) bool {
	return slices.ContainsFunc(req.Context.Tools, func(tool messages.Tool) bool { return tool.Name == SearchMemoryTool })
}

// A branch's own setting decides over the runtime's: with the memory
// tools off for the runtime a branch set on is offered them, with them
// on a branch set off is not; default follows the runtime. Inspect
// shows the setting and what it turns out to be; a fork keeps its
// parent's, and so does a restart.
func TestMemoryToolsPerBranch(t *testing.T) {
	t.Parallel()
	for _, runtimeOn := range []bool{false, true} {
		f := fake.New(fake.Step{Reply: "ok"})
		cfg := testConfig(t, t.TempDir(), newEvents())
		cfg.Provider, cfg.MemoryTools = f, runtimeOn
		r := openRuntime(t, cfg)
		_, def, err := r.CreateSession(bg, "default")
		if err != nil {
			t.Fatal(err)
		}
		_, own, err := r.CreateSession(bg, "own")
		if err != nil {
			t.Fatal(err)
		}
		set := messages.MemoryToolsOn
		if runtimeOn {
			set = messages.MemoryToolsOff
		}
		if err := r.SelectMemoryTools(bg, own.ID, set); err != nil {
			t.Fatal(err)
		}
		check := func(when string, b messages.BranchID, wantSet messages.MemoryTools, wantOn bool) {
			t.Helper()
			n := len(f.Requests())
			runTurn(t, r, b, "hello")
			if got := offersMemory(f.Requests()[n]); got != wantOn {
				t.Errorf("runtime %v, %s: branch set %s offered the memory tools: %v, want %v", runtimeOn, when, wantSet, got, wantOn)
			}
			info, err := r.Inspect(bg, b)
			if err != nil || info.MemoryTools != wantSet || info.MemoryToolsOn != wantOn {
				t.Errorf("runtime %v, %s: Inspect memory tools %s on %v, %v; want %s on %v", runtimeOn, when, info.MemoryTools,
					info.MemoryToolsOn, err, wantSet, wantOn)
			}
		}
		check("default branch", def.ID, messages.MemoryToolsDefault, runtimeOn)
		check("own branch", own.ID, set, !runtimeOn)
		fork, err := r.Fork(bg, own.ID, messages.NodeID{}, "fork")
		if err != nil {
			t.Fatal(err)
		}
		check("fork", fork.ID, set, !runtimeOn)

		r.Close()
		r = openRuntime(t, cfg)
		check("own branch after a restart", own.ID, set, !runtimeOn)
		check("fork after a restart", fork.ID, set, !runtimeOn)
		if err := r.SelectMemoryTools(bg, own.ID, messages.MemoryToolsDefault); err != nil {
			t.Fatal(err)
		}
		check("own branch back to default", own.ID, messages.MemoryToolsDefault, runtimeOn)
		r.Close()
	}
}

// A turn keeps the setting it was accepted with: its later steps (after
// its client's results, through a restart) are offered what its first
// was, whatever the branch selected since; the next turn takes the new
// setting. SubmitOptions.MemoryTools selects it with the turn.
func TestMemoryToolsTurnKeepsItsSetting(t *testing.T) {
	t.Parallel()
	f := fake.New(
		fake.Step{Items: messages.Items{weatherCall("c1")}, Outcome: pausedForTools},
		fake.Step{Reply: "Rain."},
		fake.Step{Reply: "ok"},
	)
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Provider = f
	r := openRuntime(t, cfg)
	_, br, err := r.CreateSession(bg, "keeps")
	if err != nil {
		t.Fatal(err)
	}
	b := br.ID
	on := messages.MemoryToolsOn
	s, err := r.SubmitWith(bg, b, "weather?", SubmitOptions{Client: clientTurn(), MemoryTools: &on})
	if err != nil {
		t.Fatal(err)
	}
	_, last, _ := drain(t, s)
	wantAwaiting(t, last, "c1")
	if err := r.SelectMemoryTools(bg, b, messages.MemoryToolsOff); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r = openRuntime(t, cfg)
	defer r.Close()
	if info, err := r.Inspect(bg, b); err != nil || info.MemoryTools != messages.MemoryToolsOff || info.InFlight == nil ||
		info.InFlight.MemoryTools != messages.MemoryToolsOn {
		t.Fatalf("after a restart: %+v, %v", info, err)
	}
	s, err = r.SubmitToolResults(bg, b, messages.Items{clientOutput("c1", "rain")}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if text, _, _ := drain(t, s); text != "Rain." {
		t.Fatalf("the turn answered %q", text)
	}
	runTurn(t, r, b, "thanks")
	reqs := f.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, want := range []bool{true, true, false} {
		if got := offersMemory(reqs[i]); got != want {
			t.Errorf("request %d offered the memory tools: %v, want %v", i, got, want)
		}
	}
	// The client's tool is offered beside them, in mode enabled.
	if c := reqs[1].Context; c.ToolMode != messages.ToolsEnabled || !slices.ContainsFunc(c.Tools, func(tool messages.Tool) bool { return tool.Name == "weather" }) {
		t.Errorf("the resumed step: mode %q, tools %+v", c.ToolMode, c.Tools)
	}
}

// A setting that is none is refused, naming the field; nothing is
// recorded.
func TestMemoryToolsRefusesUnknownSetting(t *testing.T) {
	t.Parallel()
	r, b := fakeBranch(t, fake.Step{Reply: "ok"})
	if err := r.SelectMemoryTools(bg, b, "yes"); !errors.Is(err, persistence.ErrInvalidArgument) || !strings.Contains(err.Error(), "memory_tools") {
		t.Errorf("SelectMemoryTools(yes) = %v", err)
	}
	bad := messages.MemoryTools("1")
	if _, err := r.SubmitWith(bg, b, "hi", SubmitOptions{MemoryTools: &bad}); !errors.Is(err, persistence.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "memory_tools") {
		t.Errorf("SubmitWith(memory tools 1) = %v", err)
	}
	if info, err := r.Inspect(bg, b); err != nil || info.MemoryTools != messages.MemoryToolsDefault || info.TurnSeq != 0 || info.Events != 1 {
		t.Errorf("after refusals: %+v, %v", info, err)
	}
}
