package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

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
