package actors

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// slowChunks is a store whose branch reads hand over half their chunks,
// then wait for release before the rest.
type slowChunks struct {
	chunkRows
	n       int
	half    chan struct{} // closed once half the chunks were read
	release chan struct{}
}

func (s *slowChunks) BranchChunkVectors(ctx context.Context, ns string, branch messages.BranchID, fn func(persistence.ChunkDoc, []float32) error) error {
	for i := range s.n {
		if i == s.n/2 {
			close(s.half)
			select {
			case <-s.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var id messages.ChunkID
		id[0], id[1] = byte(i), byte(i>>8)
		if err := fn(persistence.ChunkDoc{Chunk: id, Seq: uint64(i + 1), Terms: map[string]float32{"word": 1}, TermCount: 1}, nil); err != nil {
			return err
		}
	}
	return nil
}

// A branch's index loads in the background: a turn's search takes what
// is loaded so far rather than wait, a search that must see it whole
// waits, and one whose time runs out first fails naming the load, not the
// query's embedding; the runtime's close ends a load under way.
func TestIndexLoadsInTheBackground(t *testing.T) {
	t.Parallel()
	db := &slowChunks{n: 1000, half: make(chan struct{}), release: make(chan struct{})}
	m := newMemory(db, retrieval.HashEmbedder{}, retrieval.RankOptions{})
	b := messages.BranchID{1}
	p, err := m.partition(context.Background(), b, false)
	if err != nil {
		t.Fatal(err)
	}
	<-db.half
	if n := p.Len(); n != db.n/2 {
		t.Fatalf("the index as loaded so far holds %d chunks, want %d", n, db.n/2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.scopes(ctx, b, true)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "load the index of branch") ||
		!strings.Contains(err.Error(), "still loading from the store: 500 chunks read") {
		t.Fatalf("scopes(wait) out of time = %v, want the load named, with how far it got", err)
	}
	close(db.release)
	if p, err = m.partition(context.Background(), b, true); err != nil || p.Len() != db.n {
		t.Fatalf("partition(wait) = %d chunks, %v; want all %d", p.Len(), err, db.n)
	}

	// Closing ends a load under way, and the next call loads again.
	db2 := &slowChunks{n: 10, half: make(chan struct{}), release: make(chan struct{})}
	m2 := newMemory(db2, retrieval.HashEmbedder{}, retrieval.RankOptions{})
	if _, err := m2.partition(context.Background(), b, false); err != nil {
		t.Fatal(err)
	}
	<-db2.half
	m2.close()
	if _, err := m2.partition(context.Background(), b, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("after close: partition = %v, want the load's cancellation", err)
	}
}
