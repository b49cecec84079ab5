package actors

import (
	"testing"

	"github.com/contextinfinity/ctxinf/internal/core"
)

// A turn's latency has every part once the turn is folded and indexed:
// its context's (the search's parts within the assembly), its step's,
// the summary's and the index's; all of them are stored with the turn
// (its step's recipe and row, its row), so that a runtime opened again
// on the same data reads the same.
func TestTurnLatency(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir(), newEvents())
	cfg.Fold = &core.Policy{} // fold every turn at once
	r := openRuntime(t, cfg)
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
	lat, err := r.TurnLatency(bg, b.ID, s.Turn)
	if err != nil {
		t.Fatal(err)
	}
	if lat.Assemble <= 0 || lat.Stream <= 0 || lat.Summarize <= 0 || lat.Index <= 0 || lat.Embed+lat.Search > lat.Assemble {
		t.Fatalf("latency %+v: want every part, the search's within the assembly", lat)
	}
	if lat.Embed <= 0 && lat.Search <= 0 {
		t.Fatalf("latency %+v: the second turn searched the first", lat)
	}
	if row, err := r.TurnRow(bg, b.ID, s.Turn); err != nil || row.SummarizeMicros != lat.Summarize.Microseconds() ||
		row.IndexMicros != lat.Index.Microseconds() {
		t.Fatalf("turn row %+v, %v: want the summarize and index latency %+v", row, err, lat)
	}
	r.Close()
	r = openRuntime(t, cfg)
	defer r.Close()
	if again, err := r.TurnLatency(bg, b.ID, s.Turn); err != nil || again != lat {
		t.Fatalf("after a restart: %+v, %v; want %+v", again, err, lat)
	}
}
