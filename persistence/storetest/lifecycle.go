package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/persistence"

	"github.com/asynkron/protoactor-go/actor"
	ppersist "github.com/asynkron/protoactor-go/persistence"
	"github.com/contextinfinity/ctxinf/messages"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func testTxIsAtomic(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	b := messages.NewID[messages.BranchID](now)
	u1 := messages.NewID[messages.TurnID](now)
	zero := messages.TurnID{}
	ok := &persistence.Tx{
		NewBranches: []persistence.BranchSpec{{ID: b}},
		Appends:     []persistence.TxAppend{{Branch: b, ID: u1, Req: persistence.AppendRequest{Payload: []byte("hello"), ExpectParent: &zero}}},
		NewTurns:    []persistence.TurnRow{{Branch: b, Seq: 1, ID: u1, Phase: messages.PhaseAccepted}},
		States:      []persistence.StateRow{{Branch: b, Seq: 0, ID: messages.NewID[messages.StateID](now)}},
	}
	ok.Events = []persistence.EventRecord{{Actor: "branch/x", Index: 0, Data: []byte("e0")}}
	if _, err := d.Commit(bg, ok); err != nil {
		t.Fatal(err)
	}
	h, _ := d.Head(bg, b)
	if h.Node != u1 {
		t.Fatalf("head = %s, want the appended turn %s", h.Node, u1)
	}
	// Each bad part fails the whole Tx and writes nothing of it.
	u2 := messages.NewID[messages.TurnID](now)
	other := messages.NewID[messages.TurnID](now)
	tests := []struct {
		name string
		tx   *persistence.Tx
		want error
	}{
		{"duplicate state seq", &persistence.Tx{
			Appends: []persistence.TxAppend{{Branch: b, ID: u2, Req: persistence.AppendRequest{Payload: []byte("x"), ExpectParent: &u1}}},
			States:  []persistence.StateRow{{Branch: b, Seq: 0}},
		}, persistence.ErrDuplicate},
		{"turn seq taken by another turn", &persistence.Tx{
			Appends:  []persistence.TxAppend{{Branch: b, ID: u2, Req: persistence.AppendRequest{Payload: []byte("x"), ExpectParent: &u1}}},
			NewTurns: []persistence.TurnRow{{Branch: b, Seq: 1, ID: other}},
		}, persistence.ErrDuplicate},
		{"event index taken", &persistence.Tx{
			Appends: []persistence.TxAppend{{Branch: b, ID: u2, Req: persistence.AppendRequest{Payload: []byte("x"), ExpectParent: &u1}}},
			Events:  []persistence.EventRecord{{Actor: "branch/x", Index: 0, Data: []byte("again")}},
		}, persistence.ErrDuplicate},
		{"wrong parent", &persistence.Tx{
			Appends: []persistence.TxAppend{{Branch: b, ID: u2, Req: persistence.AppendRequest{Payload: []byte("x"), ExpectParent: &zero}}},
		}, persistence.ErrHeadMismatch},
		{"existing turn id", &persistence.Tx{
			Appends: []persistence.TxAppend{{Branch: b, ID: u1, Req: persistence.AppendRequest{Payload: []byte("x")}}},
		}, persistence.ErrDuplicate},
		{"second append of a pair fails", &persistence.Tx{
			Appends: []persistence.TxAppend{
				{Branch: b, ID: u2, Req: persistence.AppendRequest{Payload: []byte("x"), ExpectParent: &u1}},
				{Branch: b, ID: other, Req: persistence.AppendRequest{Payload: []byte("y"), ExpectParent: &u1}},
			},
		}, persistence.ErrHeadMismatch},
		{"bad actor name", &persistence.Tx{Events: []persistence.EventRecord{{Actor: ""}}}, persistence.ErrInvalidArgument},
	}
	for _, tt := range tests {
		before := d.Stats()
		if _, err := d.Commit(bg, tt.tx); !errors.Is(err, tt.want) {
			t.Fatalf("%s: Commit error = %v, want %v", tt.name, err, tt.want)
		}
		if h2, _ := d.Head(bg, b); h2 != h {
			t.Fatalf("%s: failed Tx moved the head to %s", tt.name, h2.Node)
		}
		if _, err := d.Node(bg, u2); !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Fatalf("%s: failed Tx left turn %s behind (%v)", tt.name, u2, err)
		}
		if after := d.Stats(); after.Appends != before.Appends {
			t.Fatalf("%s: failed Tx counted appends %d -> %d", tt.name, before.Appends, after.Appends)
		}
	}
	// Chained appends in one Tx work, and so does a Tx after the failures.
	if _, err := d.Commit(bg, &persistence.Tx{Appends: []persistence.TxAppend{
		{Branch: b, ID: u2, Req: persistence.AppendRequest{Payload: []byte("x"), ExpectParent: &u1}},
		{Branch: b, ID: other, Req: persistence.AppendRequest{Payload: []byte("y"), ExpectParent: &u2}},
	}}); err != nil {
		t.Fatal(err)
	}
	if h, _ := d.Head(bg, b); h.Node != other || h.Depth != 2 {
		t.Fatalf("head after chained appends = %+v", h)
	}
}

func testTxRowsAndJobs(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	s := messages.NewID[messages.SessionID](now)
	b := messages.NewID[messages.BranchID](now)
	turn := messages.NewID[messages.TurnID](now)
	chunk := persistence.ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: b, SourceTurn: turn, Type: messages.ChunkOther, Text: "t", Hash: persistence.HashOf([]byte("t"))}
	first := &persistence.Tx{
		Sessions: []persistence.SessionRow{{ID: s, ActiveBranch: b, Created: now}},
		Branches: []persistence.BranchRow{{ID: b, Session: s, Created: now}},
		Turns:    []persistence.TurnRow{{Branch: b, Seq: 1, ID: turn, Phase: messages.PhaseResponseFinalized}},
		Jobs:     []persistence.Job{{Type: persistence.JobSummarize, Branch: b, Turn: turn, Created: now}},
		Chunks:   []persistence.ChunkRow{chunk},
	}
	if _, err := d.Commit(bg, first); err != nil {
		t.Fatal(err)
	}
	if ss, _ := d.Sessions(bg); len(ss) != 1 || ss[0].ActiveBranch != b {
		t.Fatalf("Sessions = %+v", ss)
	}
	if bs, _ := d.Branches(bg, s); len(bs) != 1 || bs[0].ID != b {
		t.Fatalf("Branches = %+v", bs)
	}
	if js, _ := d.Jobs(bg); len(js) != 1 || js[0].Turn != turn {
		t.Fatalf("Jobs = %+v", js)
	}
	// Re-indexing the same chunk inserts nothing; finishing the job removes it.
	again := chunk
	again.ID = messages.NewID[messages.ChunkID](now)
	second := &persistence.Tx{DoneJobs: []persistence.JobKey{{Type: persistence.JobSummarize, Turn: turn}}, Chunks: []persistence.ChunkRow{again}}
	res, err := d.Commit(bg, second)
	if err != nil || res.ChunksSkipped != 1 {
		t.Fatalf("second indexing = %+v, %v; want 1 skipped", res, err)
	}
	if cs, _ := d.Chunks(bg, turn); len(cs) != 1 || cs[0].ID != chunk.ID {
		t.Fatalf("Chunks = %+v, want only the first", cs)
	}
	if js, _ := d.Jobs(bg); len(js) != 0 {
		t.Fatalf("Jobs after done = %+v", js)
	}
	rows, _ := d.TurnRows(bg, b, 0, 10)
	if len(rows) != 1 || rows[0].Phase != messages.PhaseResponseFinalized {
		t.Fatalf("TurnRows = %+v", rows)
	}
}

func testTxStepRows(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	turn := messages.NewID[messages.TurnID](now)
	step := func(i uint32) persistence.StepRow {
		return persistence.StepRow{ID: messages.NewID[messages.StepID](now), Turn: turn, Index: i, Provider: "openai", Model: "m",
			Request: []byte(`{"model":"m"}`), Items: messages.Items{messages.ToolCall{CallID: "c", Name: "grep"}},
			Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}, Started: now, Ended: now}
	}
	s0, s1 := step(0), step(1)
	s0.InputTokens, s0.OutputTokens, s0.CacheReadTokens, s0.CacheWriteTokens = 4000, 12, 3000, 900
	// The first step's recipe holds what the model was given beside the
	// context: tools, tool mode and choice, the client's settings.
	s0.Context = &persistence.ContextRecipe{User: turn, ContextLimit: 1000, Hash: "h",
		Tools:    []messages.Tool{{Name: "get_weather", Description: "d", InputSchema: []byte(`{"type":"object"}`)}},
		ToolMode: messages.ToolsEnabled, ToolChoice: messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: "get_weather"},
		Params: messages.GenParams{Temperature: new(0.5), Stop: []string{"END"},
			ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONSchema, Schema: json.RawMessage(`{"type":"object"}`)}}}
	if _, err := d.Commit(bg, &persistence.Tx{Steps: []persistence.StepRow{s1, s0}}); err != nil {
		t.Fatal(err)
	}
	// Writing a step again is idempotent; another step at its index is not.
	if _, err := d.Commit(bg, &persistence.Tx{Steps: []persistence.StepRow{s0}}); err != nil {
		t.Fatalf("rewrite step: %v", err)
	}
	other := step(1)
	if _, err := d.Commit(bg, &persistence.Tx{Steps: []persistence.StepRow{other}}); !errors.Is(err, persistence.ErrDuplicate) {
		t.Fatalf("second step at index 1: %v, want ErrDuplicate", err)
	}
	got, err := d.Steps(bg, turn)
	if err != nil || len(got) != 2 || got[0].ID != s0.ID || got[1].ID != s1.ID {
		t.Fatalf("Steps = %+v, %v; want steps 0 and 1 in order", got, err)
	}
	if c, ok := got[0].Items[0].(messages.ToolCall); !ok || c.Name != "grep" || got[0].Outcome.Reason != "tool_use" {
		t.Fatalf("step 0 read back as %+v", got[0])
	}
	if g := got[0]; g.InputTokens != 4000 || g.OutputTokens != 12 || g.CacheReadTokens != 3000 || g.CacheWriteTokens != 900 ||
		got[1].CacheReadTokens != 0 {
		t.Fatalf("usage read back as %d in (%d read from the cache, %d written), %d out; step 1 %d read",
			g.InputTokens, g.CacheReadTokens, g.CacheWriteTokens, g.OutputTokens, got[1].CacheReadTokens)
	}
	if !reflect.DeepEqual(got[0].Context, s0.Context) {
		t.Fatalf("step 0's recipe read back as %+v, want %+v", got[0].Context, s0.Context)
	}
	// By id: the refused step was not indexed either.
	if r, err := d.StepRow(bg, s1.ID); err != nil || r.ID != s1.ID || r.Index != 1 {
		t.Fatalf("StepRow(s1) = %+v, %v", r, err)
	}
	for _, id := range []messages.StepID{other.ID, messages.NewID[messages.StepID](now)} {
		if _, err := d.StepRow(bg, id); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("StepRow(%s) err = %v, want ErrRowNotFound", id, err)
		}
	}
}

// A step's raw request and response are stored as they were sent and
// received, byte for byte; invalid JSON in either is refused.
func testStepRowKeepsRawExchange(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	turn := messages.NewID[messages.TurnID](now)
	req := json.RawMessage("{\n  \"model\": \"m\",\n  \"input\": \"<b>a & b</b> \\u00e9\"\n}")
	resp := json.RawMessage(`[{"type":"response.completed"} , {"x":null}]`)
	row := persistence.StepRow{ID: messages.NewID[messages.StepID](now), Turn: turn, Provider: "openai", Model: "m",
		Request: req, Response: resp, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}, Started: now, Ended: now}
	if _, err := d.Commit(bg, &persistence.Tx{Steps: []persistence.StepRow{row}}); err != nil {
		t.Fatal(err)
	}
	got, err := d.Steps(bg, turn)
	if err != nil || len(got) != 1 {
		t.Fatalf("Steps = %+v, %v", got, err)
	}
	if string(got[0].Request) != string(req) || string(got[0].Response) != string(resp) || got[0].Model != "m" ||
		!got[0].Started.Equal(now) {
		t.Errorf("read back: request %s, response %s, model %q, started %v", got[0].Request, got[0].Response, got[0].Model, got[0].Started)
	}
	bad := row
	bad.ID, bad.Index, bad.Request = messages.NewID[messages.StepID](now), 1, json.RawMessage(`{"model":`)
	if _, err := d.Commit(bg, &persistence.Tx{Steps: []persistence.StepRow{bad}}); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Errorf("a step with a truncated request: %v, want ErrInvalidArgument", err)
	}
	if got, _ := d.Steps(bg, turn); len(got) != 1 {
		t.Errorf("after the refused step: %d steps, want 1", len(got))
	}
}

// counter is a persistent actor: it persists every "add" and rebuilds its
// total by replay; "boom" panics.
type counter struct {
	ppersist.Mixin
	total     int
	snapshots int
	replayed  chan int
}

func (c *counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *ppersist.RequestSnapshot:
		c.snapshots++
		c.PersistSnapshot(wrapperspb.Bytes(fmt.Append(nil, c.total)))
	case *wrapperspb.BytesValue: // an event or a snapshot, on replay
		var n int
		fmt.Sscan(string(m.Value), &n)
		if string(m.Value[:1]) == "+" {
			c.total += n
		} else {
			c.total = n
		}
	case *ppersist.ReplayComplete:
		c.replayed <- c.total
	case string:
		switch m {
		case "boom":
			panic("boom")
		case "get":
			ctx.Respond(c.total)
		default:
			ev := persistence.NewEnvelope([]byte("+"+m), nil)
			c.PersistReceive(ev)
			var n int
			fmt.Sscan(m, &n)
			c.total += n
		}
	}
}

func testActorLogReplaysAfterPanicAndRestart(t *testing.T, d DB) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer sys.Shutdown()
	replayed := make(chan int, 10)
	props := actor.PropsFromProducer(func() actor.Actor { return &counter{replayed: replayed} },
		actor.WithReceiverMiddleware(ppersist.Using(d.ActorLog(4))))
	pid, err := sys.Root.SpawnNamed(props, "counter-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-replayed; got != 0 {
		t.Fatalf("fresh actor replayed %d", got)
	}
	for i := 1; i <= 10; i++ {
		sys.Root.Send(pid, fmt.Sprint(i))
	}
	sys.Root.Send(pid, "boom") // restart: state is rebuilt from snapshot + events
	if got := <-replayed; got != 55 {
		t.Fatalf("after panic the actor replayed to %d, want 55", got)
	}
	// A snapshot compacted the events before the snapshot before it.
	snap, ok, _ := d.Snapshot(bg, pid.Id)
	prev, okPrev, _ := d.PrevSnapshot(bg, pid.Id)
	if !ok || !okPrev || snap.Index == 0 || prev.Index >= snap.Index {
		t.Fatalf("snapshots after 10 events with interval 4: latest %+v, previous %+v", snap, prev)
	}
	var first uint64 = 1 << 63
	d.Events(bg, pid.Id, 0, func(i uint64, _ []byte) error { first = min(first, i); return nil })
	if first != prev.Index {
		t.Fatalf("first event kept is %d, want %d (the previous snapshot's)", first, prev.Index)
	}
	// A new actor of the same name (a restart of the process) replays too.
	sys.Root.StopFuture(pid).Wait()
	pid, _ = sys.Root.SpawnNamed(props, "counter-1")
	if got := <-replayed; got != 55 {
		t.Fatalf("respawned actor replayed to %d, want 55", got)
	}
	r, err := sys.Root.RequestFuture(pid, "get", time.Second).Result()
	if err != nil || r.(int) != 55 {
		t.Fatalf("get = %v, %v", r, err)
	}
}

// A chunk joins the partition of every branch that indexes it, stored
// once; its vector is kept per namespace.
func testRetrievalTables(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	parent, fork := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now.Add(time.Second))
	turn := messages.NewID[messages.TurnID](now)
	chunk := persistence.ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: parent, SourceTurn: turn, Seq: 7, Type: messages.ChunkUserContext,
		Text: "deploy to eu-west-1", Hash: persistence.HashOf([]byte("deploy to eu-west-1")),
		Terms: map[string]float32{"deploy": 1, "eu": 1, "west": 1, "1": 1}, TermCount: 4,
		Speaker: "Caroline", Time: time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)}
	meta := persistence.DocMeta{Time: chunk.Time.UnixMilli(), Role: "user", Speaker: "Caroline"}
	vec := persistence.VectorRow{Namespace: "hash-4", Chunk: chunk.ID, Vector: []float32{0.5, -0.5, 0.5, -0.5}}
	if _, err := d.Commit(bg, &persistence.Tx{Chunks: []persistence.ChunkRow{chunk}, Vectors: []persistence.VectorRow{vec}}); err != nil {
		t.Fatal(err)
	}
	// The fork indexes the same turn (a pending turn carried into it),
	// under another id: the stored chunk is the one it gets.
	again := chunk
	again.ID, again.Branch = messages.NewID[messages.ChunkID](now.Add(time.Second)), fork
	if res, err := d.Commit(bg, &persistence.Tx{Chunks: []persistence.ChunkRow{again}}); err != nil || res.ChunksSkipped != 1 {
		t.Fatalf("indexing on the fork: %+v, %v", res, err)
	}
	for _, b := range []messages.BranchID{parent, fork} {
		var docs []persistence.ChunkDoc
		if err := d.BranchChunks(bg, b, func(c persistence.ChunkDoc) error { docs = append(docs, c); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(docs) != 1 || docs[0].Chunk != chunk.ID || docs[0].Seq != 7 || docs[0].TermCount != 4 || docs[0].Terms["deploy"] != 1 ||
			docs[0].Meta != meta {
			t.Errorf("partition of %s = %+v, want its meta %+v", b, docs, meta)
		}
	}
	// A later turn's text is added to the parent's entry only.
	up := persistence.TermUpdate{Branch: parent, Seq: 7, Chunk: chunk.ID, Add: map[string]float32{"deploy": 0.5, "friday": 0.5}, Count: 1}
	if _, err := d.Commit(bg, &persistence.Tx{TermUpdates: []persistence.TermUpdate{up, {Branch: parent, Seq: 8, Chunk: chunk.ID, Add: up.Add}}}); err != nil {
		t.Fatal(err)
	}
	for b, want := range map[messages.BranchID][2]float32{parent: {1.5, 5}, fork: {1, 4}} {
		_ = d.BranchChunks(bg, b, func(c persistence.ChunkDoc) error {
			if c.Terms["deploy"] != want[0] || c.TermCount != want[1] || (b == parent) != (c.Terms["friday"] == 0.5) || c.Meta != meta {
				t.Errorf("entry of %s after the update: %+v", b, c)
			}
			return nil
		})
	}
	row, err := d.ChunkByID(bg, chunk.ID)
	if err != nil || row.Text != chunk.Text || row.Seq != 7 || row.Speaker != chunk.Speaker || !row.Time.Equal(chunk.Time) {
		t.Errorf("ChunkByID = %+v, %v", row, err)
	}
	if _, err := d.ChunkByID(bg, again.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("ChunkByID(an id never stored) = %v, want ErrNotFound", err)
	}
	if got, err := d.Vector(bg, "hash-4", chunk.ID); err != nil || !slices.Equal(got, vec.Vector) {
		t.Errorf("Vector = %v, %v", got, err)
	}
	if got, _ := d.Vector(bg, "glove-100d", chunk.ID); got != nil {
		t.Errorf("a vector in another namespace: %v", got)
	}
	if _, err := d.Commit(bg, &persistence.Tx{Vectors: []persistence.VectorRow{{Namespace: "x", Chunk: chunk.ID}}}); !errors.Is(err, persistence.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "0 dimensions, want 1 to 8192") {
		t.Errorf("an empty vector: %v", err)
	}
}

// TestLifecycleReads: every read of the rows, its order, its paging
// limits and its errors, on both backends.
func testLifecycleReads(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	s1, s2 := messages.NewID[messages.SessionID](now), messages.NewID[messages.SessionID](now)
	var bs []messages.BranchID
	for range 3 {
		bs = append(bs, messages.NewID[messages.BranchID](now))
	}
	tx := &persistence.Tx{
		Sessions: []persistence.SessionRow{{ID: s2, Title: "two", Created: now, Tenant: "acme",
			Metadata: map[string]string{"source": "proxy", "end_user": "alice"}}, {ID: s1, Title: "one", Created: now}},
	}
	for _, b := range bs {
		tx.Branches = append(tx.Branches, persistence.BranchRow{ID: b, Session: s1, Label: "l" + b.String(), Created: now})
	}
	b := bs[0]
	var turns []messages.TurnID
	for seq := uint64(1); seq <= 7; seq++ {
		id := messages.NewID[messages.TurnID](now)
		turns = append(turns, id)
		tx.NewTurns = append(tx.NewTurns, persistence.TurnRow{Branch: b, Seq: seq, ID: id, Phase: messages.PhaseAccepted, Updated: now})
	}
	for seq := uint64(0); seq < 4; seq++ {
		tx.States = append(tx.States, persistence.StateRow{Branch: b, Seq: seq, ID: messages.NewID[messages.StateID](now),
			Summary: fmt.Sprint("s", seq), Pinned: []string{"p"}, Created: now})
	}
	// Jobs: two branches, created out of order, two types on one turn.
	later := now.Add(time.Second)
	tx.Jobs = []persistence.Job{
		{Type: persistence.JobSummarize, Branch: bs[1], Turn: turns[0], Created: now},
		{Type: persistence.JobIndex, Branch: b, Turn: turns[1], Created: later},
		{Type: persistence.JobSummarize, Branch: b, Turn: turns[2], Created: now},
		{Type: persistence.JobRespond, Branch: b, Turn: turns[2], Created: now},
	}
	if _, err := d.Commit(bg, tx); err != nil {
		t.Fatal(err)
	}

	ss, err := d.Sessions(bg)
	if err != nil || len(ss) != 2 {
		t.Fatalf("Sessions = %+v, %v", ss, err)
	}
	if ss[0].ID.Compare(ss[1].ID) >= 0 {
		t.Fatalf("Sessions not in id order: %s, %s", ss[0].ID, ss[1].ID)
	}
	if r, err := d.Session(bg, s2); err != nil || r.Title != "two" || r.Tenant != "acme" || !r.Created.Equal(now) ||
		!reflect.DeepEqual(r.Metadata, map[string]string{"source": "proxy", "end_user": "alice"}) {
		t.Fatalf("Session(s2) = %+v, %v", r, err)
	}
	if r, err := d.Session(bg, s1); err != nil || r.Tenant != "" || r.TenantName() != persistence.DefaultTenant || r.Metadata != nil {
		t.Fatalf("Session(s1) = %+v, %v; want no tenant stored", r, err)
	}
	if _, err := d.Session(bg, messages.NewID[messages.SessionID](now)); !errors.Is(err, persistence.ErrRowNotFound) {
		t.Fatalf("Session(unknown) err = %v, want ErrRowNotFound", err)
	}
	got, err := d.Branches(bg, s1)
	if err != nil || len(got) != 3 {
		t.Fatalf("Branches(s1) = %+v, %v", got, err)
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].ID.Compare(got[i].ID) >= 0 {
			t.Fatalf("Branches not in id order: %v", got)
		}
	}
	if got, err := d.Branches(bg, s2); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Branches(s2) = %#v, %v; want an empty list", got, err)
	}
	if r, err := d.BranchRow(bg, bs[2]); err != nil || r.Label != "l"+bs[2].String() || r.Session != s1 {
		t.Fatalf("BranchRow = %+v, %v", r, err)
	}
	if _, err := d.BranchRow(bg, messages.NewID[messages.BranchID](now)); !errors.Is(err, persistence.ErrRowNotFound) {
		t.Fatalf("BranchRow(unknown) err = %v, want ErrRowNotFound", err)
	}

	// Turn rows: pages from a seq, in seq order.
	page, err := d.TurnRows(bg, b, 3, 2)
	if err != nil || len(page) != 2 || page[0].Seq != 3 || page[1].Seq != 4 || page[0].ID != turns[2] {
		t.Fatalf("TurnRows(from 3, 2) = %+v, %v", page, err)
	}
	if page, err := d.TurnRows(bg, b, 0, persistence.MaxPageNodes); err != nil || len(page) != 7 {
		t.Fatalf("TurnRows(all) = %d rows, %v", len(page), err)
	}
	for _, from := range []uint64{8, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64} {
		if page, err := d.TurnRows(bg, b, from, 10); err != nil || len(page) != 0 {
			t.Fatalf("TurnRows(from %d) = %+v, %v; want none", from, page, err)
		}
	}
	if page, err := d.TurnRows(bg, b, 0, 0); err != nil || len(page) != 0 {
		t.Fatalf("TurnRows(limit 0) = %+v, %v", page, err)
	}
	for _, n := range []int{-1, persistence.MaxPageNodes + 1} {
		if _, err := d.TurnRows(bg, b, 0, n); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("TurnRows(limit %d) err = %v, want ErrInvalidArgument", n, err)
		}
		if _, err := d.StateRows(bg, b, 0, n); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("StateRows(limit %d) err = %v, want ErrInvalidArgument", n, err)
		}
	}
	var seqs []uint64
	if err := d.EachTurnRow(bg, b, func(r persistence.TurnRow) error { seqs = append(seqs, r.Seq); return nil }); err != nil ||
		fmt.Sprint(seqs) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("EachTurnRow = %v, %v", seqs, err)
	}
	stop := errors.New("stop")
	seqs = nil
	if err := d.EachTurnRow(bg, b, func(r persistence.TurnRow) error {
		seqs = append(seqs, r.Seq)
		if r.Seq == 3 {
			return stop
		}
		return nil
	}); err != stop || len(seqs) != 3 {
		t.Fatalf("EachTurnRow stopping at seq 3 = %v, %v; want 3 rows and fn's error", seqs, err)
	}

	// States.
	if r, err := d.StateRow(bg, b, 2); err != nil || r.Summary != "s2" || len(r.Pinned) != 1 {
		t.Fatalf("StateRow(2) = %+v, %v", r, err)
	}
	for _, seq := range []uint64{4, math.MaxUint64} {
		if _, err := d.StateRow(bg, b, seq); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("StateRow(%d) err = %v, want ErrRowNotFound", seq, err)
		}
	}
	if rs, err := d.StateRows(bg, b, 1, 2); err != nil || len(rs) != 2 || rs[0].Seq != 1 || rs[1].Seq != 2 {
		t.Fatalf("StateRows(from 1, 2) = %+v, %v", rs, err)
	}

	// Jobs: by branch, then creation, then turn; equal ones in type order.
	js, err := d.Jobs(bg)
	if err != nil || len(js) != 4 {
		t.Fatalf("Jobs = %+v, %v", js, err)
	}
	// Within b: the jobs created first (turns[2]'s: respond, then
	// summarize, in type order), then the later one.
	var want []persistence.JobKey
	if bs[1].Compare(b) < 0 {
		want = []persistence.JobKey{{Type: persistence.JobSummarize, Turn: turns[0]}, {Type: persistence.JobRespond, Turn: turns[2]}, {Type: persistence.JobSummarize, Turn: turns[2]}, {Type: persistence.JobIndex, Turn: turns[1]}}
	} else {
		want = []persistence.JobKey{{Type: persistence.JobRespond, Turn: turns[2]}, {Type: persistence.JobSummarize, Turn: turns[2]}, {Type: persistence.JobIndex, Turn: turns[1]}, {Type: persistence.JobSummarize, Turn: turns[0]}}
	}
	for i, j := range js {
		if (persistence.JobKey{Type: j.Type, Turn: j.Turn}) != want[i] {
			t.Fatalf("Jobs[%d] = %s %s, want %v (all: %+v)", i, j.Type, j.Turn, want[i], js)
		}
	}
	// A job upserted again keeps one row; a done job goes, an unknown
	// done job is ignored, an unknown type is refused.
	if _, err := d.Commit(bg, &persistence.Tx{Jobs: []persistence.Job{{Type: persistence.JobIndex, Branch: b, Turn: turns[1], Attempts: 2, Created: later}},
		DoneJobs: []persistence.JobKey{{Type: persistence.JobRespond, Turn: turns[2]}, {Type: persistence.JobRespond, Turn: turns[6]}}}); err != nil {
		t.Fatal(err)
	}
	js, _ = d.Jobs(bg)
	if len(js) != 3 {
		t.Fatalf("Jobs after upsert and done = %+v", js)
	}
	for _, j := range js {
		if j.Type == persistence.JobRespond || j.Type == persistence.JobIndex && j.Attempts != 2 {
			t.Fatalf("Jobs after upsert and done = %+v", js)
		}
	}
	if _, err := d.Commit(bg, &persistence.Tx{Jobs: []persistence.Job{{Type: "nope", Turn: turns[0]}}}); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("a job of unknown type: %v, want ErrInvalidArgument", err)
	}
	if _, err := d.Commit(bg, &persistence.Tx{DoneJobs: []persistence.JobKey{{Type: "nope", Turn: turns[0]}}}); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("a done job of unknown type: %v, want ErrInvalidArgument", err)
	}
	// Upserts replace the rows.
	if _, err := d.Commit(bg, &persistence.Tx{Sessions: []persistence.SessionRow{{ID: s1, Title: "renamed", Created: now}},
		Branches: []persistence.BranchRow{{ID: bs[2], Session: s1, Label: "relabeled", Created: now}}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := d.Session(bg, s1); r.Title != "renamed" {
		t.Fatalf("Session after upsert = %+v", r)
	}
	if r, _ := d.BranchRow(bg, bs[2]); r.Label != "relabeled" {
		t.Fatalf("BranchRow after upsert = %+v", r)
	}
	if ss, _ := d.Sessions(bg); len(ss) != 2 {
		t.Fatalf("Sessions after upsert = %+v", ss)
	}
	if _, err := d.Commit(bg, nil); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("Commit(nil) = %v, want ErrInvalidArgument", err)
	}
}

// TestTxAllOrNothing: a Tx with a duplicate among its parts (a turn seq,
// a state seq or a step index taken by another row) writes none of its
// parts, store appends and branches included; the same Tx without the
// duplicate then commits whole.
func testTxAllOrNothing(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	b := messages.NewID[messages.BranchID](now)
	u1 := messages.NewID[messages.TurnID](now)
	step := persistence.StepRow{ID: messages.NewID[messages.StepID](now), Turn: u1, Branch: b, Index: 0,
		Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}, Started: now, Ended: now}
	if _, err := d.Commit(bg, &persistence.Tx{
		NewTurns: []persistence.TurnRow{{Branch: b, Seq: 1, ID: u1, Phase: messages.PhaseAccepted}},
		States:   []persistence.StateRow{{Branch: b, Seq: 0, ID: messages.NewID[messages.StateID](now)}},
		Steps:    []persistence.StepRow{step},
	}); err != nil {
		t.Fatal(err)
	}
	other := step
	other.ID = messages.NewID[messages.StepID](now)
	for _, dup := range []struct {
		name string
		set  func(tx *persistence.Tx)
	}{
		{"turn seq", func(tx *persistence.Tx) {
			tx.NewTurns = []persistence.TurnRow{{Branch: b, Seq: 1, ID: messages.NewID[messages.TurnID](now), Phase: messages.PhaseAccepted}}
		}},
		{"state seq", func(tx *persistence.Tx) { tx.States = []persistence.StateRow{{Branch: b, Seq: 0}} }},
		{"step index", func(tx *persistence.Tx) { tx.Steps = []persistence.StepRow{other} }},
	} {
		c := messages.NewID[messages.BranchID](now)
		s := messages.NewID[messages.SessionID](now)
		u := messages.NewID[messages.TurnID](now)
		payload := []byte("all or nothing " + dup.name)
		tx := func(withDup bool) *persistence.Tx {
			tx := &persistence.Tx{
				NewBranches: []persistence.BranchSpec{{ID: c}},
				Appends:     []persistence.TxAppend{{Branch: c, ID: u, Req: persistence.AppendRequest{Payload: payload}}},
				Sessions:    []persistence.SessionRow{{ID: s, ActiveBranch: c, Created: now}},
				Branches:    []persistence.BranchRow{{ID: c, Session: s, Created: now}},
				NewTurns:    []persistence.TurnRow{{Branch: c, Seq: 1, ID: u, Phase: messages.PhaseAccepted}},
				Jobs:        []persistence.Job{{Type: persistence.JobRespond, Branch: c, Turn: u, Created: now}},
			}
			if withDup {
				dup.set(tx)
			}
			return tx
		}
		before := d.Stats()
		if _, err := d.Commit(bg, tx(true)); !errors.Is(err, persistence.ErrDuplicate) {
			t.Fatalf("%s: Commit = %v, want ErrDuplicate", dup.name, err)
		}
		if _, err := d.Head(bg, c); !errors.Is(err, persistence.ErrBranchNotFound) {
			t.Fatalf("%s: the failed Tx's branch: %v, want ErrBranchNotFound", dup.name, err)
		}
		if _, err := d.Node(bg, u); !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Fatalf("%s: the failed Tx's append: %v, want ErrNodeNotFound", dup.name, err)
		}
		if n, _ := d.BlobRefs(bg, persistence.HashOf(payload)); n != 0 {
			t.Fatalf("%s: the failed Tx's payload has %d references", dup.name, n)
		}
		if d.Stats().Appends != before.Appends {
			t.Fatalf("%s: the failed Tx counted an append", dup.name)
		}
		if _, err := d.Session(bg, s); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("%s: the failed Tx's session: %v, want ErrRowNotFound", dup.name, err)
		}
		if _, err := d.BranchRow(bg, c); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("%s: the failed Tx's branch row: %v, want ErrRowNotFound", dup.name, err)
		}
		if rs, _ := d.TurnRows(bg, c, 0, 10); len(rs) != 0 {
			t.Fatalf("%s: the failed Tx's turn rows: %+v", dup.name, rs)
		}
		if js, _ := d.Jobs(bg); len(js) != 0 {
			t.Fatalf("%s: the failed Tx's jobs: %+v", dup.name, js)
		}
		if rs, _ := d.TurnRows(bg, b, 0, 10); len(rs) != 1 || rs[0].ID != u1 {
			t.Fatalf("%s: the taken turn row is now %+v", dup.name, rs)
		}
		if st, _ := d.Steps(bg, u1); len(st) != 1 || st[0].ID != step.ID {
			t.Fatalf("%s: the taken step is now %+v", dup.name, st)
		}
		// Without the duplicate, the same Tx commits whole.
		if _, err := d.Commit(bg, tx(false)); err != nil {
			t.Fatalf("%s: the Tx without its duplicate: %v", dup.name, err)
		}
		if h, err := d.Head(bg, c); err != nil || h.Node != u {
			t.Fatalf("%s: head = %+v, %v", dup.name, h, err)
		}
		if r, err := d.TurnRow(bg, c, u); err != nil || r.Seq != 1 {
			t.Fatalf("%s: TurnRow = %+v, %v", dup.name, r, err)
		}
		if _, err := d.Session(bg, s); err != nil {
			t.Fatalf("%s: Session: %v", dup.name, err)
		}
		if _, err := d.Commit(bg, &persistence.Tx{DoneJobs: []persistence.JobKey{{Type: persistence.JobRespond, Turn: u}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImportRows: imports are upserted and DoneImports deleted (an
// absent one is nothing; in one Tx, the delete comes last), listed in
// session order, written only with their whole Tx, and kept across a
// reopen, on both backends.
func testImportRows(t *testing.T, d DB, reopen func() DB) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	ids := make([]messages.SessionID, 4)
	for i := range ids {
		ids[i] = messages.NewID[messages.SessionID](now.Add(time.Duration(i) * time.Second))
	}
	a, b, c, x := ids[0], ids[1], ids[2], ids[3]
	list := func() []messages.SessionID {
		t.Helper()
		rs, err := d.Imports(bg)
		if err != nil {
			t.Fatal(err)
		}
		var out []messages.SessionID
		for _, r := range rs {
			out = append(out, r.Session)
		}
		return out
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("Imports of a new store = %v", got)
	}
	if _, err := d.Commit(bg, &persistence.Tx{Imports: []persistence.ImportRow{{Session: b, Started: now}, {Session: a, Started: now}}}); err != nil {
		t.Fatal(err)
	}
	// The same import again is upserted with its new start.
	if _, err := d.Commit(bg, &persistence.Tx{Imports: []persistence.ImportRow{{Session: a, Started: now.Add(time.Minute)}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Import(bg, a); err != nil || r.Session != a || !r.Started.Equal(now.Add(time.Minute)) {
		t.Fatalf("Import(a) = %+v, %v", r, err)
	}
	if _, err := d.Commit(bg, &persistence.Tx{Imports: []persistence.ImportRow{{Session: c, Started: now}, {Session: x, Started: now}},
		DoneImports: []messages.SessionID{a, x, messages.NewID[messages.SessionID](now)}}); err != nil {
		t.Fatal(err)
	}
	if got := list(); !slices.Equal(got, []messages.SessionID{b, c}) {
		t.Fatalf("Imports = %v, want b c", got)
	}
	for _, id := range []messages.SessionID{a, x} {
		if _, err := d.Import(bg, id); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("Import(done) = %v, want ErrRowNotFound", err)
		}
	}
	// A Tx that fails writes none of its imports.
	turn := persistence.TurnRow{Branch: messages.NewID[messages.BranchID](now), Seq: 1, ID: messages.NewID[messages.TurnID](now), Phase: messages.PhaseAccepted}
	if _, err := d.Commit(bg, &persistence.Tx{NewTurns: []persistence.TurnRow{turn}}); err != nil {
		t.Fatal(err)
	}
	dup := turn
	dup.ID = messages.NewID[messages.TurnID](now)
	if _, err := d.Commit(bg, &persistence.Tx{Imports: []persistence.ImportRow{{Session: x, Started: now}}, DoneImports: []messages.SessionID{b},
		NewTurns: []persistence.TurnRow{dup}}); !errors.Is(err, persistence.ErrDuplicate) {
		t.Fatalf("Commit with a turn seq taken = %v, want ErrDuplicate", err)
	}
	d = reopen()
	if got := list(); !slices.Equal(got, []messages.SessionID{b, c}) {
		t.Fatalf("Imports after a failed Tx and a reopen = %v, want b c", got)
	}
}

// TestDropBranches: a dropped branch's row is gone, and with it its place
// in its session's list, even when the same Tx wrote it; a branch not
// stored is nothing; the head stays (the store's), on both backends.
func testDropBranches(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	s := messages.NewID[messages.SessionID](now)
	b1, b2, b3 := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now)
	row := func(b messages.BranchID) persistence.BranchRow {
		return persistence.BranchRow{ID: b, Session: s, Created: now}
	}
	if _, err := d.Commit(bg, &persistence.Tx{NewBranches: []persistence.BranchSpec{{ID: b1}}, Sessions: []persistence.SessionRow{{ID: s, ActiveBranch: b1, Created: now}},
		Branches: []persistence.BranchRow{row(b1), row(b2)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Commit(bg, &persistence.Tx{Branches: []persistence.BranchRow{row(b3)},
		DropBranches: []persistence.BranchRow{row(b1), row(b3), row(messages.NewID[messages.BranchID](now))}}); err != nil {
		t.Fatal(err)
	}
	bs, err := d.Branches(bg, s)
	if err != nil || len(bs) != 1 || bs[0].ID != b2 {
		t.Fatalf("Branches = %+v, %v; want b2 alone", bs, err)
	}
	for _, b := range []messages.BranchID{b1, b3} {
		if _, err := d.BranchRow(bg, b); !errors.Is(err, persistence.ErrRowNotFound) {
			t.Fatalf("BranchRow(dropped) = %v, want ErrRowNotFound", err)
		}
	}
	if _, err := d.Head(bg, b1); err != nil {
		t.Fatalf("Head(dropped b1) = %v, want the store's head kept", err)
	}
}

// BranchChunkVectors gives what BranchChunks and a Vector per chunk give:
// the same entries in the same order, each with its vector in the
// namespace asked for or nil, over several pages (PostgreSQL's TestDatabase
// reads 3 rows a query), including entries of one seq ordered by chunk id.
func testBranchChunkVectors(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	b, other := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now)
	tx := &persistence.Tx{}
	for i := range 10 {
		turn := messages.NewID[messages.TurnID](now.Add(time.Duration(i) * time.Second))
		for j := range 1 + i%3 { // 1 to 3 chunks of one seq
			text := fmt.Sprintf("chunk %d.%d", i, j)
			c := persistence.ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: b, SourceTurn: turn, Seq: uint64(10 - i),
				Type: messages.ChunkUserContext, Text: text, Hash: persistence.HashOf([]byte(text)),
				Terms: map[string]float32{"chunk": 1, fmt.Sprint(i): 1}, TermCount: 2}
			tx.Chunks = append(tx.Chunks, c)
			switch (i + j) % 3 {
			case 0: // in the namespace asked for
				tx.Vectors = append(tx.Vectors, persistence.VectorRow{Namespace: "hash-2", Chunk: c.ID, Vector: []float32{float32(i), float32(j)}})
			case 1: // in another one only
				tx.Vectors = append(tx.Vectors, persistence.VectorRow{Namespace: "hash-3", Chunk: c.ID, Vector: []float32{1, 2, 3}})
			}
			if i == 5 { // also in another branch's partition
				c.Branch = other
				tx.Chunks = append(tx.Chunks, c)
			}
		}
	}
	if _, err := d.Commit(bg, tx); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		doc persistence.ChunkDoc
		vec []float32
	}
	for _, br := range []messages.BranchID{b, other, messages.NewID[messages.BranchID](now)} {
		var want, got []entry
		if err := d.BranchChunks(bg, br, func(doc persistence.ChunkDoc) error {
			vec, err := d.Vector(bg, "hash-2", doc.Chunk)
			want = append(want, entry{doc, vec})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := d.BranchChunkVectors(bg, "hash-2", br, func(doc persistence.ChunkDoc, vec []float32) error {
			got = append(got, entry{doc, vec})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("BranchChunkVectors of %s =\n%+v\nwant (BranchChunks and Vector)\n%+v", br, got, want)
		}
		if n := map[messages.BranchID]int{b: 19, other: 3}[br]; len(got) != n {
			t.Errorf("%d entries in %s, want %d", len(got), br, n)
		}
		var vecs int
		for _, e := range got {
			if e.vec != nil {
				vecs++
				if len(e.vec) != 2 {
					t.Errorf("vector of %s in another namespace: %v", e.doc.Chunk, e.vec)
				}
			}
		}
		if n := map[messages.BranchID]int{b: 7, other: 1}[br]; vecs != n {
			t.Errorf("%d vectors in %s, want %d", vecs, br, n)
		}
	}
	// fn's error stops the read and is returned.
	stop := errors.New("stop")
	calls := 0
	if err := d.BranchChunkVectors(bg, "hash-2", b, func(persistence.ChunkDoc, []float32) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("BranchChunkVectors whose fn fails = %v after %d calls, want its error after 1", err, calls)
	}
	if err := d.BranchChunkVectors(bg, "", b, func(persistence.ChunkDoc, []float32) error { return nil }); !errors.Is(err, persistence.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "namespace is required") {
		t.Errorf("BranchChunkVectors without a namespace = %v, want ErrInvalidArgument naming it", err)
	}
}

// Turn and step rows are found by id.
func testRowsByID(t *testing.T, d DB) {
	check, _ := WriteRowsByID(t, d)
	check(d)
}

// RowsByID is what WriteRowsByID wrote: the turns of branch B1, a
// turn of B2 (Other), the fork and the steps.
type RowsByID struct {
	Turns        []messages.TurnID
	Other        messages.TurnID
	B1, B2, Fork messages.BranchID
	Steps        []persistence.StepRow
}

// WriteRowsByID writes turn rows on two branches and a fork, and step
// rows; check reads them back by id.
func WriteRowsByID(t *testing.T, d DB) (check func(d DB), r RowsByID) {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	b1, b2 := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now)
	var ids []messages.TurnID
	for seq := uint64(1); seq <= 25; seq++ {
		id := messages.NewID[messages.TurnID](now.Add(time.Duration(seq) * time.Millisecond))
		ids = append(ids, id)
		if _, err := d.Commit(bg, &persistence.Tx{NewTurns: []persistence.TurnRow{{Branch: b1, Seq: seq, ID: id, Phase: messages.PhaseAccepted}}}); err != nil {
			t.Fatal(err)
		}
	}
	// A row written by Turns alone is found too, and an update shows.
	other := messages.NewID[messages.TurnID](now)
	if _, err := d.Commit(bg, &persistence.Tx{
		Turns: []persistence.TurnRow{{Branch: b2, Seq: 1, ID: other, Phase: messages.PhaseResponseFinalized},
			{Branch: b1, Seq: 3, ID: ids[2], Phase: messages.PhaseStateCommitted}},
	}); err != nil {
		t.Fatal(err)
	}
	// A fork carries a pending turn of its parent as a row of its own,
	// with the same turn id: each branch finds its own row.
	fork := messages.NewID[messages.BranchID](now)
	if _, err := d.Commit(bg, &persistence.Tx{NewTurns: []persistence.TurnRow{{Branch: fork, Seq: 4, ID: ids[3], Phase: messages.PhaseResponseFinalized}}}); err != nil {
		t.Fatal(err)
	}
	steps := []persistence.StepRow{{ID: messages.NewID[messages.StepID](now), Turn: ids[0], Branch: b1, Index: 0, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}},
		{ID: messages.NewID[messages.StepID](now), Turn: ids[1], Branch: b1, Index: 0, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}}}
	if _, err := d.Commit(bg, &persistence.Tx{Steps: steps}); err != nil {
		t.Fatal(err)
	}
	check = func(d DB) {
		t.Helper()
		for _, st := range steps {
			if r, err := d.StepRow(bg, st.ID); err != nil || r.Turn != st.Turn {
				t.Fatalf("StepRow(%s) = %+v, %v", st.ID, r, err)
			}
		}
		for i, id := range ids {
			r, err := d.TurnRow(bg, b1, id)
			if err != nil || r.ID != id || r.Seq != uint64(i+1) {
				t.Fatalf("TurnRow(b1, turn %d) = %+v, %v", i+1, r, err)
			}
		}
		if r, err := d.TurnRow(bg, b1, ids[2]); err != nil || r.Phase != messages.PhaseStateCommitted {
			t.Fatalf("updated row = %+v, %v", r, err)
		}
		if r, err := d.TurnRow(bg, fork, ids[3]); err != nil || r.Branch != fork || r.Phase != messages.PhaseResponseFinalized {
			t.Fatalf("TurnRow(fork, its copy of turn 4) = %+v, %v", r, err)
		}
		if r, err := d.TurnRow(bg, b2, other); err != nil || r.Seq != 1 {
			t.Fatalf("TurnRow(b2) = %+v, %v", r, err)
		}
		if _, err := d.TurnRow(bg, b2, ids[0]); !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Fatalf("a turn of another branch: err = %v, want ErrNodeNotFound", err)
		}
		if _, err := d.TurnRow(bg, b1, messages.NewID[messages.TurnID](now)); !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Fatalf("an unknown turn: err = %v, want ErrNodeNotFound", err)
		}
		want := []messages.BranchID{b1, fork}
		slices.SortFunc(want, messages.BranchID.Compare)
		if got, err := d.TurnBranches(bg, ids[3]); err != nil || !slices.Equal(got, want) {
			t.Fatalf("TurnBranches(turn 4) = %v, %v; want %v", got, err, want)
		}
		if got, err := d.TurnBranches(bg, messages.NewID[messages.TurnID](now)); err != nil || len(got) != 0 {
			t.Fatalf("TurnBranches(an unknown turn) = %v, %v; want none", got, err)
		}
	}
	return check, RowsByID{ids, other, b1, b2, fork, steps}
}
