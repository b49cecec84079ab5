package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	ppersist "github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/contextinfinity/ctxinf/messages"
)

func openDB(t *testing.T) *DB {
	t.Helper()
	d, err := Open(TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestTxIsAtomic(t *testing.T) { forEachDB(t, testTxIsAtomic) }

func testTxIsAtomic(t *testing.T, d lifecycleDB) {
	now := time.UnixMilli(1_700_000_000_000)
	b := messages.NewID[messages.BranchID](now)
	u1 := messages.NewID[messages.TurnID](now)
	zero := messages.TurnID{}
	ok := &Tx{
		NewBranches: []BranchSpec{{ID: b}},
		Appends:     []TxAppend{{Branch: b, ID: u1, Req: AppendRequest{Payload: []byte("hello"), ExpectParent: &zero}}},
		NewTurns:    []TurnRow{{Branch: b, Seq: 1, ID: u1, Phase: messages.PhaseAccepted}},
		States:      []StateRow{{Branch: b, Seq: 0, ID: messages.NewID[messages.StateID](now)}},
	}
	ok.Events = []EventRecord{{Actor: "branch/x", Index: 0, Data: []byte("e0")}}
	if _, err := d.Commit(bg, ok); err != nil {
		t.Fatal(err)
	}
	h, _ := d.Head(bg, b)
	if h.Turn != u1 {
		t.Fatalf("head = %s, want the appended turn %s", h.Turn, u1)
	}
	// Each bad part fails the whole Tx and writes nothing of it.
	u2 := messages.NewID[messages.TurnID](now)
	other := messages.NewID[messages.TurnID](now)
	tests := []struct {
		name string
		tx   *Tx
		want error
	}{
		{"duplicate state seq", &Tx{
			Appends: []TxAppend{{Branch: b, ID: u2, Req: AppendRequest{Payload: []byte("x"), ExpectParent: &u1}}},
			States:  []StateRow{{Branch: b, Seq: 0}},
		}, ErrDuplicate},
		{"turn seq taken by another turn", &Tx{
			Appends:  []TxAppend{{Branch: b, ID: u2, Req: AppendRequest{Payload: []byte("x"), ExpectParent: &u1}}},
			NewTurns: []TurnRow{{Branch: b, Seq: 1, ID: other}},
		}, ErrDuplicate},
		{"event index taken", &Tx{
			Appends: []TxAppend{{Branch: b, ID: u2, Req: AppendRequest{Payload: []byte("x"), ExpectParent: &u1}}},
			Events:  []EventRecord{{Actor: "branch/x", Index: 0, Data: []byte("again")}},
		}, ErrDuplicate},
		{"wrong parent", &Tx{
			Appends: []TxAppend{{Branch: b, ID: u2, Req: AppendRequest{Payload: []byte("x"), ExpectParent: &zero}}},
		}, ErrHeadMismatch},
		{"existing turn id", &Tx{
			Appends: []TxAppend{{Branch: b, ID: u1, Req: AppendRequest{Payload: []byte("x")}}},
		}, ErrDuplicate},
		{"second append of a pair fails", &Tx{
			Appends: []TxAppend{
				{Branch: b, ID: u2, Req: AppendRequest{Payload: []byte("x"), ExpectParent: &u1}},
				{Branch: b, ID: other, Req: AppendRequest{Payload: []byte("y"), ExpectParent: &u1}},
			},
		}, ErrHeadMismatch},
		{"bad actor name", &Tx{Events: []EventRecord{{Actor: ""}}}, ErrInvalidArgument},
	}
	for _, tt := range tests {
		before := d.Stats()
		if _, err := d.Commit(bg, tt.tx); !errors.Is(err, tt.want) {
			t.Fatalf("%s: Commit error = %v, want %v", tt.name, err, tt.want)
		}
		if h2, _ := d.Head(bg, b); h2 != h {
			t.Fatalf("%s: failed Tx moved the head to %s", tt.name, h2.Turn)
		}
		if _, err := d.Turn(bg, u2); !errors.Is(err, ErrTurnNotFound) {
			t.Fatalf("%s: failed Tx left turn %s behind (%v)", tt.name, u2, err)
		}
		if after := d.Stats(); after.Appends != before.Appends {
			t.Fatalf("%s: failed Tx counted appends %d -> %d", tt.name, before.Appends, after.Appends)
		}
	}
	// Chained appends in one Tx work, and so does a Tx after the failures.
	if _, err := d.Commit(bg, &Tx{Appends: []TxAppend{
		{Branch: b, ID: u2, Req: AppendRequest{Payload: []byte("x"), ExpectParent: &u1}},
		{Branch: b, ID: other, Req: AppendRequest{Payload: []byte("y"), ExpectParent: &u2}},
	}}); err != nil {
		t.Fatal(err)
	}
	if h, _ := d.Head(bg, b); h.Turn != other || h.Depth != 2 {
		t.Fatalf("head after chained appends = %+v", h)
	}
}

func TestTxRowsAndJobs(t *testing.T) { forEachDB(t, testTxRowsAndJobs) }

func testTxRowsAndJobs(t *testing.T, d lifecycleDB) {
	now := time.UnixMilli(1_700_000_000_000)
	s := messages.NewID[messages.SessionID](now)
	b := messages.NewID[messages.BranchID](now)
	turn := messages.NewID[messages.TurnID](now)
	chunk := ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: b, SourceTurn: turn, Type: messages.ChunkOther, Text: "t", Hash: HashOf([]byte("t"))}
	first := &Tx{
		Sessions: []SessionRow{{ID: s, ActiveBranch: b, Created: now}},
		Branches: []BranchRow{{ID: b, Session: s, Created: now}},
		Turns:    []TurnRow{{Branch: b, Seq: 1, ID: turn, Phase: messages.PhaseResponseFinalized}},
		Jobs:     []Job{{Type: JobSummarize, Branch: b, Turn: turn, Created: now}},
		Chunks:   []ChunkRow{chunk},
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
	second := &Tx{DoneJobs: []JobKey{{JobSummarize, turn}}, Chunks: []ChunkRow{again}}
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

func TestTxStepRows(t *testing.T) { forEachDB(t, testTxStepRows) }

func testTxStepRows(t *testing.T, d lifecycleDB) {
	now := time.UnixMilli(1_700_000_000_000)
	turn := messages.NewID[messages.TurnID](now)
	step := func(i uint32) StepRow {
		return StepRow{ID: messages.NewID[messages.StepID](now), Turn: turn, Index: i, Provider: "openai", Model: "m",
			Request: []byte(`{"model":"m"}`), Items: messages.Items{messages.ToolCall{CallID: "c", Name: "grep"}},
			Outcome: messages.StepOutcome{Kind: messages.OutcomePaused, Reason: "tool_use"}, Started: now, Ended: now}
	}
	s0, s1 := step(0), step(1)
	s0.InputTokens, s0.OutputTokens, s0.CacheReadTokens, s0.CacheWriteTokens = 4000, 12, 3000, 900
	// The first step's recipe holds what the model was given beside the
	// context: tools, tool mode and choice, the client's settings.
	s0.Context = &ContextRecipe{User: turn, ContextLimit: 1000, Hash: "h",
		Tools:    []messages.Tool{{Name: "get_weather", Description: "d", InputSchema: []byte(`{"type":"object"}`)}},
		ToolMode: messages.ToolsEnabled, ToolChoice: messages.ToolChoice{Mode: messages.ToolChoiceTool, Name: "get_weather"},
		Params: messages.GenParams{Temperature: new(0.5), Stop: []string{"END"},
			ResponseFormat: &messages.ResponseFormat{Type: messages.FormatJSONSchema, Schema: json.RawMessage(`{"type":"object"}`)}}}
	if _, err := d.Commit(bg, &Tx{Steps: []StepRow{s1, s0}}); err != nil {
		t.Fatal(err)
	}
	// Writing a step again is idempotent; another step at its index is not.
	if _, err := d.Commit(bg, &Tx{Steps: []StepRow{s0}}); err != nil {
		t.Fatalf("rewrite step: %v", err)
	}
	other := step(1)
	if _, err := d.Commit(bg, &Tx{Steps: []StepRow{other}}); !errors.Is(err, ErrDuplicate) {
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
		if _, err := d.StepRow(bg, id); !errors.Is(err, ErrRowNotFound) {
			t.Fatalf("StepRow(%s) err = %v, want ErrRowNotFound", id, err)
		}
	}
}

// A step's raw request and response are stored as they were sent and
// received, byte for byte; invalid JSON in either is refused.
func TestStepRowKeepsRawExchange(t *testing.T) { forEachDB(t, testStepRowKeepsRawExchange) }

func testStepRowKeepsRawExchange(t *testing.T, d lifecycleDB) {
	now := time.UnixMilli(1_700_000_000_000)
	turn := messages.NewID[messages.TurnID](now)
	req := json.RawMessage("{\n  \"model\": \"m\",\n  \"input\": \"<b>a & b</b> \\u00e9\"\n}")
	resp := json.RawMessage(`[{"type":"response.completed"} , {"x":null}]`)
	row := StepRow{ID: messages.NewID[messages.StepID](now), Turn: turn, Provider: "openai", Model: "m",
		Request: req, Response: resp, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}, Started: now, Ended: now}
	if _, err := d.Commit(bg, &Tx{Steps: []StepRow{row}}); err != nil {
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
	if _, err := d.Commit(bg, &Tx{Steps: []StepRow{bad}}); !errors.Is(err, ErrInvalidArgument) {
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
			ev := NewEnvelope([]byte("+"+m), nil)
			c.PersistReceive(ev)
			var n int
			fmt.Sscan(m, &n)
			c.total += n
		}
	}
}

func TestActorLogReplaysAfterPanicAndRestart(t *testing.T) {
	forEachDB(t, testActorLogReplaysAfterPanicAndRestart)
}

func testActorLogReplaysAfterPanicAndRestart(t *testing.T, d lifecycleDB) {
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
func TestRetrievalTables(t *testing.T) { forEachDB(t, testRetrievalTables) }

func testRetrievalTables(t *testing.T, d lifecycleDB) {
	now := time.UnixMilli(1_700_000_000_000)
	parent, fork := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now.Add(time.Second))
	turn := messages.NewID[messages.TurnID](now)
	chunk := ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: parent, SourceTurn: turn, Seq: 7, Type: messages.ChunkUserContext,
		Text: "deploy to eu-west-1", Hash: HashOf([]byte("deploy to eu-west-1")),
		Terms: map[string]float32{"deploy": 1, "eu": 1, "west": 1, "1": 1}, TermCount: 4}
	vec := VectorRow{Namespace: "hash-4", Chunk: chunk.ID, Vector: []float32{0.5, -0.5, 0.5, -0.5}}
	if _, err := d.Commit(bg, &Tx{Chunks: []ChunkRow{chunk}, Vectors: []VectorRow{vec}}); err != nil {
		t.Fatal(err)
	}
	// The fork indexes the same turn (a pending turn carried into it),
	// under another id: the stored chunk is the one it gets.
	again := chunk
	again.ID, again.Branch = messages.NewID[messages.ChunkID](now.Add(time.Second)), fork
	if res, err := d.Commit(bg, &Tx{Chunks: []ChunkRow{again}}); err != nil || res.ChunksSkipped != 1 {
		t.Fatalf("indexing on the fork: %+v, %v", res, err)
	}
	for _, b := range []messages.BranchID{parent, fork} {
		var docs []ChunkDoc
		if err := d.BranchChunks(bg, b, func(c ChunkDoc) error { docs = append(docs, c); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(docs) != 1 || docs[0].Chunk != chunk.ID || docs[0].Seq != 7 || docs[0].TermCount != 4 || docs[0].Terms["deploy"] != 1 {
			t.Errorf("partition of %s = %+v", b, docs)
		}
	}
	// A later turn's text is added to the parent's entry only.
	up := TermUpdate{Branch: parent, Seq: 7, Chunk: chunk.ID, Add: map[string]float32{"deploy": 0.5, "friday": 0.5}, Count: 1}
	if _, err := d.Commit(bg, &Tx{TermUpdates: []TermUpdate{up, {Branch: parent, Seq: 8, Chunk: chunk.ID, Add: up.Add}}}); err != nil {
		t.Fatal(err)
	}
	for b, want := range map[messages.BranchID][2]float32{parent: {1.5, 5}, fork: {1, 4}} {
		_ = d.BranchChunks(bg, b, func(c ChunkDoc) error {
			if c.Terms["deploy"] != want[0] || c.TermCount != want[1] || (b == parent) != (c.Terms["friday"] == 0.5) {
				t.Errorf("entry of %s after the update: %+v", b, c)
			}
			return nil
		})
	}
	row, err := d.ChunkByID(bg, chunk.ID)
	if err != nil || row.Text != chunk.Text || row.Seq != 7 {
		t.Errorf("ChunkByID = %+v, %v", row, err)
	}
	if _, err := d.ChunkByID(bg, again.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("ChunkByID(an id never stored) = %v, want ErrNotFound", err)
	}
	if got, err := d.Vector(bg, "hash-4", chunk.ID); err != nil || !slices.Equal(got, vec.Vector) {
		t.Errorf("Vector = %v, %v", got, err)
	}
	if got, _ := d.Vector(bg, "glove-100d", chunk.ID); got != nil {
		t.Errorf("a vector in another namespace: %v", got)
	}
	if _, err := d.Commit(bg, &Tx{Vectors: []VectorRow{{Namespace: "x", Chunk: chunk.ID}}}); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "0 dimensions, want 1 to 8192") {
		t.Errorf("an empty vector: %v", err)
	}
}

// BranchChunkVectors gives what BranchChunks and a Vector per chunk give:
// the same entries in the same order, each with its vector in the
// namespace asked for or nil, over several pages (PostgreSQL reads 3
// rows a query here), including entries of one seq ordered by chunk id.
func TestBranchChunkVectors(t *testing.T) {
	defer func(n int) { pgEachPage = n }(pgEachPage)
	pgEachPage = 3
	forEachDB(t, testBranchChunkVectors)
}

func testBranchChunkVectors(t *testing.T, d lifecycleDB) {
	now := time.UnixMilli(1_700_000_000_000)
	b, other := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now)
	tx := &Tx{}
	for i := range 10 {
		turn := messages.NewID[messages.TurnID](now.Add(time.Duration(i) * time.Second))
		for j := range 1 + i%3 { // 1 to 3 chunks of one seq
			text := fmt.Sprintf("chunk %d.%d", i, j)
			c := ChunkRow{ID: messages.NewID[messages.ChunkID](now), Branch: b, SourceTurn: turn, Seq: uint64(10 - i),
				Type: messages.ChunkUserContext, Text: text, Hash: HashOf([]byte(text)),
				Terms: map[string]float32{"chunk": 1, fmt.Sprint(i): 1}, TermCount: 2}
			tx.Chunks = append(tx.Chunks, c)
			switch (i + j) % 3 {
			case 0: // in the namespace asked for
				tx.Vectors = append(tx.Vectors, VectorRow{Namespace: "hash-2", Chunk: c.ID, Vector: []float32{float32(i), float32(j)}})
			case 1: // in another one only
				tx.Vectors = append(tx.Vectors, VectorRow{Namespace: "hash-3", Chunk: c.ID, Vector: []float32{1, 2, 3}})
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
		doc ChunkDoc
		vec []float32
	}
	for _, br := range []messages.BranchID{b, other, messages.NewID[messages.BranchID](now)} {
		var want, got []entry
		if err := d.BranchChunks(bg, br, func(doc ChunkDoc) error {
			vec, err := d.Vector(bg, "hash-2", doc.Chunk)
			want = append(want, entry{doc, vec})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := d.BranchChunkVectors(bg, "hash-2", br, func(doc ChunkDoc, vec []float32) error {
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
	if err := d.BranchChunkVectors(bg, "hash-2", b, func(ChunkDoc, []float32) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("BranchChunkVectors whose fn fails = %v after %d calls, want its error after 1", err, calls)
	}
	if err := d.BranchChunkVectors(bg, "", b, func(ChunkDoc, []float32) error { return nil }); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "namespace is required") {
		t.Errorf("BranchChunkVectors without a namespace = %v, want ErrInvalidArgument naming it", err)
	}
}

// TestRowsByIDBoth: turn and step rows found by id, on both backends.
func TestRowsByIDBoth(t *testing.T) {
	forEachDB(t, func(t *testing.T, d lifecycleDB) {
		check, _ := writeRowsByID(t, d)
		check(d)
	})
}

func TestRowsByID(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	check, r := writeRowsByID(t, d)
	check(d)
	ids, other, b1, b2, fork, steps := r.ids, r.other, r.b1, r.b2, r.fork, r.steps

	// A store written before the index: its rows are indexed at Open, in
	// batches, and once.
	del := []entry{{key: metaKey(turnIndexMeta), del: true}, {key: turnByIDKey(other, b2), del: true},
		{key: metaKey(stepIndexMeta), del: true}}
	for _, id := range ids {
		del = append(del, entry{key: turnByIDKey(id, b1), del: true})
	}
	del = append(del, entry{key: turnByIDKey(ids[3], fork), del: true})
	for _, st := range steps {
		del = append(del, entry{key: id16(tableStepByID, st.ID), del: true})
	}
	if err := d.writeRaw(del); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TurnRow(bg, b1, ids[0]); !errors.Is(err, ErrTurnNotFound) {
		t.Fatalf("without its index entry: err = %v, want ErrTurnNotFound", err)
	}
	if _, err := d.StepRow(bg, steps[0].ID); !errors.Is(err, ErrRowNotFound) {
		t.Fatalf("without its index entry: err = %v, want ErrRowNotFound", err)
	}
	d.Close()
	defer func(n int) { indexBatch = n }(indexBatch)
	indexBatch = 7
	d, err = Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	if g := d.Stats().Groups; g != 4+1 {
		t.Fatalf("indexing 26 turn rows and 2 step rows 7 at a time took %d group commits, want 5", g)
	}
	check(d)
	d.Close()
	d, err = Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if g := d.Stats().Groups; g != 0 {
		t.Fatalf("an indexed store's Open wrote %d groups, want 0", g)
	}
	check(d)
}

// rowsByID is what writeRowsByID wrote.
type rowsByID struct {
	ids          []messages.TurnID
	other        messages.TurnID
	b1, b2, fork messages.BranchID
	steps        []StepRow
}

// writeRowsByID writes turn rows on two branches and a fork, and step
// rows; check reads them back by id from any lifecycleDB.
func writeRowsByID(t *testing.T, d lifecycleDB) (check func(d lifecycleDB), r rowsByID) {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	b1, b2 := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now)
	var ids []messages.TurnID
	for seq := uint64(1); seq <= 25; seq++ {
		id := messages.NewID[messages.TurnID](now.Add(time.Duration(seq) * time.Millisecond))
		ids = append(ids, id)
		if _, err := d.Commit(bg, &Tx{NewTurns: []TurnRow{{Branch: b1, Seq: seq, ID: id, Phase: messages.PhaseAccepted}}}); err != nil {
			t.Fatal(err)
		}
	}
	// A row written by Turns alone is found too, and an update shows.
	other := messages.NewID[messages.TurnID](now)
	if _, err := d.Commit(bg, &Tx{
		Turns: []TurnRow{{Branch: b2, Seq: 1, ID: other, Phase: messages.PhaseResponseFinalized},
			{Branch: b1, Seq: 3, ID: ids[2], Phase: messages.PhaseStateCommitted}},
	}); err != nil {
		t.Fatal(err)
	}
	// A fork carries a pending turn of its parent as a row of its own,
	// with the same turn id: each branch finds its own row.
	fork := messages.NewID[messages.BranchID](now)
	if _, err := d.Commit(bg, &Tx{NewTurns: []TurnRow{{Branch: fork, Seq: 4, ID: ids[3], Phase: messages.PhaseResponseFinalized}}}); err != nil {
		t.Fatal(err)
	}
	steps := []StepRow{{ID: messages.NewID[messages.StepID](now), Turn: ids[0], Branch: b1, Index: 0, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}},
		{ID: messages.NewID[messages.StepID](now), Turn: ids[1], Branch: b1, Index: 0, Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}}}
	if _, err := d.Commit(bg, &Tx{Steps: steps}); err != nil {
		t.Fatal(err)
	}
	check = func(d lifecycleDB) {
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
		if _, err := d.TurnRow(bg, b2, ids[0]); !errors.Is(err, ErrTurnNotFound) {
			t.Fatalf("a turn of another branch: err = %v, want ErrTurnNotFound", err)
		}
		if _, err := d.TurnRow(bg, b1, messages.NewID[messages.TurnID](now)); !errors.Is(err, ErrTurnNotFound) {
			t.Fatalf("an unknown turn: err = %v, want ErrTurnNotFound", err)
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
	return check, rowsByID{ids, other, b1, b2, fork, steps}
}

// A step row written before the prompt cache's usage was kept decodes
// with none.
func TestStepRowWithoutCacheUsage(t *testing.T) {
	t.Parallel()
	old := `{"id":"01JD8Z3QZJ6Y7W3V9Q4N2K5M8P","branch":"01JD8Z3QZJ6Y7W3V9Q4N2K5M8Q","turn":"01JD8Z3QZJ6Y7W3V9Q4N2K5M8R","index":0,` +
		`"provider":"anthropic","model":"m","outcome":{"kind":"completed"},"displayed":3,"durable":3,` +
		`"input_tokens":1200,"output_tokens":40,"started":"2024-11-20T10:00:00Z","ended":"2024-11-20T10:00:01Z"}`
	var r StepRow
	if err := json.Unmarshal([]byte(old), &r); err != nil {
		t.Fatal(err)
	}
	if r.InputTokens != 1200 || r.OutputTokens != 40 || r.CacheReadTokens != 0 || r.CacheWriteTokens != 0 {
		t.Errorf("old row read as %d in (%d cached, %d written), %d out", r.InputTokens, r.CacheReadTokens, r.CacheWriteTokens, r.OutputTokens)
	}
}
