package actors

import (
	"testing"

	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// A turn's latency has every part once the turn is folded and indexed:
// its context's (the search's parts within the assembly), its step's,
// the summary's and the index's.
func TestTurnLatency(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Fold = &core.Policy{} // fold every turn at once
	r := openRuntime(t, cfg)
	defer r.Close()
	_, b, _ := r.CreateSession(bg, "latency")
	runTurn(t, r, b.ID, "The deploy target is eu-west-1.")
	s, err := r.Submit(bg, b.ID, "Where do we deploy?")
	if err != nil {
		t.Fatal(err)
	}
	for us := s.Next(nil); us != nil; us = s.Next(nil) {
	}
	if err := r.Settle(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	lat, err := r.TurnLatency(bg, s.Turn)
	if err != nil {
		t.Fatal(err)
	}
	if lat.Assemble <= 0 || lat.Stream <= 0 || lat.Summarize <= 0 || lat.Index <= 0 || lat.Embed+lat.Search > lat.Assemble {
		t.Fatalf("latency %+v: want every part, the search's within the assembly", lat)
	}
	if lat.Embed <= 0 && lat.Search <= 0 {
		t.Fatalf("latency %+v: the second turn searched the first", lat)
	}
	r.latency.mu.Lock()
	r.latency.turns = nil // a restarted runtime: summarize and index are forgotten
	r.latency.mu.Unlock()
	if lat, err := r.TurnLatency(bg, s.Turn); err != nil || lat.Summarize != 0 || lat.Index != 0 || lat.Assemble <= 0 {
		t.Fatalf("after the runtime forgot: %+v, %v; want the stored parts only", lat, err)
	}
}

// turnLatencies forgets the oldest turns past MaxLatencyTurns.
func TestTurnLatenciesAreBounded(t *testing.T) {
	t.Parallel()
	var l turnLatencies
	for i := range MaxLatencyTurns + 10 {
		var id messages.TurnID
		id[0], id[1], id[2] = byte(i), byte(i>>8), byte(i>>16)
		l.indexed(id, 1)
	}
	if len(l.turns) != MaxLatencyTurns {
		t.Fatalf("%d turns kept, want %d", len(l.turns), MaxLatencyTurns)
	}
	if _, ok := l.turns[messages.TurnID{}]; ok {
		t.Fatal("the oldest turn is still kept")
	}
}
