package actors

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// countedRows is a store of chunk rows, none in any partition (indexes
// are built by memory.added), that counts the rows read by id.
type countedRows struct {
	chunkRows
	mu    sync.Mutex
	rows  map[messages.ChunkID]persistence.ChunkRow
	reads map[messages.ChunkID]int
}

func (c *countedRows) BranchRow(context.Context, messages.BranchID) (persistence.BranchRow, error) {
	return persistence.BranchRow{}, nil // a root
}

func (c *countedRows) BranchChunkVectors(context.Context, string, messages.BranchID, func(persistence.ChunkDoc, []float32) error) error {
	return nil
}

func (c *countedRows) ChunkByID(_ context.Context, id messages.ChunkID) (persistence.ChunkRow, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads[id]++
	row, ok := c.rows[id]
	if !ok {
		return row, persistence.ErrNotFound
	}
	row.Terms, row.TermCount = nil, 0 // not in the stored row
	return row, nil
}

func (c *countedRows) read() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.reads {
		n += k
	}
	return n
}

// A search reads each hit's row from the store once while the branch's
// index is loaded, and returns the row as stored every time; the rows go
// with the index when it is dropped (passivation), and are read again
// after.
func TestSearchReadsAHitsRowOnce(t *testing.T) {
	t.Parallel()
	db := &countedRows{rows: map[messages.ChunkID]persistence.ChunkRow{}, reads: map[messages.ChunkID]int{}}
	opts := retrieval.RankOptions{VectorWeight: 0.5, TextWeight: 0.5, Overfetch: 20, TopK: 4}
	m := newMemory(db, retrieval.HashEmbedder{}, opts)
	defer m.close()
	b := messages.BranchID{1}
	if _, err := m.partition(context.Background(), b, true); err != nil {
		t.Fatal(err)
	}
	var rows []persistence.ChunkRow
	for i := range 10 {
		text := fmt.Sprintf("the deploy target of service %d is region eu-west-%d", i, i)
		tf, n := retrieval.TermFreqs(text)
		row := persistence.ChunkRow{ID: messages.ChunkID{byte(i + 1)}, Branch: b, SourceTurn: messages.TurnID{byte(i + 1)},
			Seq: uint64(i + 1), Type: messages.ChunkUserContext, Text: text, TokenEst: 12, Terms: tf, TermCount: n}
		db.rows[row.ID] = row
		rows = append(rows, row)
	}
	vecs, err := m.embedChunks(context.Background(), rows)
	if err != nil {
		t.Fatal(err)
	}
	m.added(rows, vecs, nil)

	search := func() []Hit {
		t.Helper()
		hits, err := m.search(context.Background(), b, "deploy target of service 3", opts, retrieval.Filter{}, nil, nil)
		if err != nil || len(hits) != opts.TopK {
			t.Fatalf("search() = %d hits, %v; want %d", len(hits), err, opts.TopK)
		}
		for _, h := range hits {
			want := db.rows[h.Chunk.ID]
			want.Terms, want.TermCount = nil, 0
			if h.Chunk.Text != want.Text || h.Chunk.ID != want.ID || h.Chunk.Seq != want.Seq || h.Chunk.Terms != nil {
				t.Fatalf("hit %s = %+v, want the stored row %+v", h.Chunk.ID, h.Chunk, want)
			}
		}
		return hits
	}
	first := search()
	if got := db.read(); got != len(first) {
		t.Fatalf("the first search read %d rows, want one per hit (%d)", got, len(first))
	}
	again := search()
	if got := db.read(); got != len(first) {
		t.Errorf("a second search read %d more rows, want none", got-len(first))
	}
	if !slices.EqualFunc(first, again, func(a, b Hit) bool { return a.Chunk.ID == b.Chunk.ID && a.Score == b.Score }) {
		t.Errorf("the second search found %v, the first %v", again, first)
	}

	m.drop(b)
	if _, err := m.partition(context.Background(), b, true); err != nil {
		t.Fatal(err)
	}
	m.added(rows, vecs, nil)
	search()
	if got := db.read(); got != 2*len(first) {
		t.Errorf("after the index was dropped a search read %d rows, want %d (its rows went with it)", got-len(first), len(first))
	}
}
