package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// lifecycleDB is a Database with what the tests also reach: the actor
// logs' events and a snapshot corrupted on purpose.
type lifecycleDB interface {
	Database
	Events(ctx context.Context, actor string, from uint64, fn func(index uint64, data []byte) error) error
	CorruptSnapshot(ctx context.Context, actor string) error
}

var _ lifecycleDB = (*DB)(nil)

func openDB(t *testing.T) *DB {
	t.Helper()
	d, err := Open(TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
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
