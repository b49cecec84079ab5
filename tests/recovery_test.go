package tests

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
)

var errKilled = errors.New("killed the server")

// SRD §13.4 over the API: `ctxinf serve` is killed (-9) while a turn
// streams, after some of it was seen durable. After the restart the turn
// has its step, interrupted, and the output recovered for it labeled
// incomplete, in GET /v1/branches/{b}/turns/{t} and in the branch's
// history; the head never moves to it.
func TestServeKillMidStreamShowsRecoveredOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "CTX_LOCAL_DELAY=60ms", "CTX_STREAM_FLUSH_INTERVAL=5ms", "CTX_STREAM_FSYNC_INTERVAL=5ms")
	ctx := context.Background()
	c := client.New(s.url)
	_, b, err := c.CreateSession(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	var turn messages.TurnID
	var seen string
	var durable uint64 // the journal bytes the server said were durable
	_, err = c.Stream(ctx, b.ID, "Please tell me a long story about a lighthouse keeper and the sea.", func(ev client.Event) error {
		switch ev.Type {
		case "turn":
			turn = ev.Turn
		case "delta":
			seen += ev.Text
			durable = ev.Durable
			if durable > 0 && len(strings.Fields(seen)) >= 8 {
				_ = s.cmd.Process.Kill()
				<-s.done
				return errKilled
			}
		case "done":
			t.Fatalf("the turn ended before the kill: %+v", ev)
		}
		return nil
	})
	if !errors.Is(err, errKilled) || turn.IsZero() {
		t.Fatalf("stream: %v (turn %s)", err, turn)
	}

	s = startServe(t, dir) // recovery runs at start
	c = client.New(s.url)
	info, err := c.Turn(ctx, b.ID, turn)
	if err != nil {
		t.Fatal(err)
	}
	if info.Phase != messages.PhaseFailed || !strings.Contains(info.Reason, "interrupted") {
		t.Fatalf("interrupted turn is %s (%q), want failed as interrupted", info.Phase, info.Reason)
	}
	if len(info.Steps) != 1 || !info.Steps[0].Interrupted || info.Steps[0].Outcome.Kind != messages.OutcomeIncomplete ||
		info.Steps[0].ID != info.Step {
		t.Fatalf("steps %+v; want the interrupted step", info.Steps)
	}
	p := info.Partial
	const prefix = "[local] I received your message (13 words):"
	switch {
	case p == nil || !p.Incomplete || p.Step != info.Step:
		t.Fatalf("partial output %+v, want the step's, labeled incomplete", p)
	case !strings.HasPrefix(p.Text, prefix) || !strings.HasPrefix(seen, prefix):
		t.Fatalf("partial output %q (seen %q), want the streamed prefix", p.Text, seen)
	case !strings.HasPrefix(p.Text, seen) && !strings.HasPrefix(seen, p.Text):
		t.Fatalf("partial output %q and streamed text %q differ", p.Text, seen)
	case strings.HasSuffix(strings.TrimSpace(p.Text), "retrieved chunks."):
		t.Fatalf("partial output is the whole reply; the kill came too late: %q", p.Text)
	case p.Durable < durable || p.Displayed < p.Durable || p.Durable != info.Steps[0].Durable:
		t.Fatalf("partial output counters durable %d, displayed %d; %d were said durable before the kill", p.Durable, p.Displayed, durable)
	}
	// On the wire: labeled incomplete.
	resp, err := http.Get(s.url + "/v1/branches/" + b.ID.String() + "/turns/" + turn.String())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"incomplete":true`) || !strings.Contains(string(raw), `"partial":{`) {
		t.Fatalf("GET turn: %s", raw)
	}

	hist, _, err := c.History(ctx, b.ID, messages.TurnID{}, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Node != turn || hist[0].PartialReply == nil || *hist[0].PartialReply != *p {
		t.Fatalf("history %+v; want the user message carrying the recovered reply %+v", hist, p)
	}
	if bi, err := c.Branch(ctx, b.ID); err != nil || bi.Tip != turn || bi.Failed != 1 || bi.InFlight != nil {
		t.Fatalf("branch %+v, %v; want its tip at the user message", bi, err)
	}

	// The branch goes on; the partial reply never joins the transcript.
	if res, err := c.Send(ctx, b.ID, "Again, briefly."); err != nil || res.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("next turn: %+v, %v", res, err)
	}
	hist, _, err = c.History(ctx, b.ID, messages.TurnID{}, 50)
	if err != nil || len(hist) != 3 {
		t.Fatalf("history %+v, %v; want two user messages and one reply", hist, err)
	}
	if hist[0].PartialReply == nil || hist[1].PartialReply != nil || hist[1].Message.RenderedText != "Again, briefly." ||
		hist[2].Message.Role != messages.RoleAssistant || strings.Contains(hist[2].Message.RenderedText, p.Text) {
		t.Fatalf("history after the next turn: %+v", hist)
	}
	s.stop(t)
}

// Context Management v2: an invalid snapshot means replay. The latest
// snapshot of a branch is damaged on disk while `ctxinf serve` is down;
// after the restart the branch has the same state, from the snapshot
// before it and the events after that, and takes turns.
func TestServeReplaysPastACorruptSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snapEvery := "CTX_RUNTIME_SNAPSHOT_EVERY=4"
	s := startServe(t, dir, snapEvery)
	ctx := context.Background()
	c := client.New(s.url)
	_, b, err := c.CreateSession(ctx, "snapshots")
	if err != nil {
		t.Fatal(err)
	}
	// Four turns, kept pending by the default window: 13 events, snapshots
	// at 0, 4, 8 and 12, and a state that does not move after them.
	for i := range 4 {
		if res, err := c.Send(ctx, b.ID, "Fact number "+strconv.Itoa(i)+" is worth keeping."); err != nil ||
			res.Phase != messages.PhaseResponseFinalized {
			t.Fatalf("turn %d: %+v, %v", i, res, err)
		}
	}
	before, err := c.Branch(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.stop(t)

	db, err := badgerdb.Open(badgerdb.TestOptions(filepath.Join(dir, "store")))
	if err != nil {
		t.Fatal(err)
	}
	err = db.CorruptSnapshot(ctx, "ctxinf/b-"+b.ID.String()) // the branch actor's name
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	s = startServe(t, dir, snapEvery)
	c = client.New(s.url)
	after, err := c.Branch(ctx, b.ID)
	if err != nil {
		t.Fatalf("branch after its latest snapshot was corrupted: %v", err)
	}
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("branch replayed past the corrupt snapshot:\n%+v\nwant\n%+v", after, before)
	}
	if res, err := c.Send(ctx, b.ID, "And one more."); err != nil || res.Phase != messages.PhaseResponseFinalized ||
		!strings.Contains(res.Reply, "4 pending turns") {
		t.Fatalf("turn after recovery: %+v, %v", res, err)
	}
	s.stop(t)
}
