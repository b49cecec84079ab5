package storetest_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/internal/retrieval"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
	"github.com/contextinfinity/ctxinf/persistence/pgdb"
	"github.com/contextinfinity/ctxinf/persistence/storetest"
)

// TestMain stops the PostgreSQL server of the benchmarks (if one
// started) and removes its directory before the binary exits.
func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

// BenchmarkPartitionRebuild measures what a runtime does the first time
// a branch is searched on it (actors' memory.partition), e.g. on the
// cluster member a session moved to: read the branch's partition with
// each chunk's vector of the default embedder (HashEmbedder, 512
// dimensions) and build a retrieval.Partition of it. read=batched is
// BranchChunkVectors; read=per-chunk is what it replaced, BranchChunks
// and a Vector per chunk (one query each on PostgreSQL), measured on
// the smallest size only.
func BenchmarkPartitionRebuild(b *testing.B) {
	embed := retrieval.HashEmbedder{}
	ns := retrieval.Namespace(embed)
	backends := []struct {
		name string
		open func(b *testing.B) storetest.DB
	}{
		{"badger", func(b *testing.B) storetest.DB {
			o := badgerdb.DefaultOptions(b.TempDir())
			o.GCInterval = 0
			d, err := badgerdb.Open(o)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { d.Close() })
			return d
		}},
		{"postgres", func(b *testing.B) storetest.DB {
			o := pgdb.DefaultPGOptions(pgtest.Start(b))
			o.Limits.MaxPayloadBytes = 1 << 20
			d, err := pgdb.OpenPostgresDB(bg, o)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { d.Close() })
			return d
		}},
	}
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			for _, n := range rebuildSizes() {
				b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
					d := be.open(b)
					branch := loadPartition(b, d, embed, n)
					reads := []string{"batched"}
					if n <= 10_000 {
						reads = append(reads, "per-chunk")
					}
					for _, read := range reads {
						b.Run("read="+read, func(b *testing.B) {
							b.ReportAllocs()
							for b.Loop() {
								p := retrieval.NewPartition(embed.Dim())
								add := func(doc persistence.ChunkDoc, vec []float32) error {
									p.Add(retrieval.Doc{ID: doc.Chunk, Seq: doc.Seq, Terms: doc.Terms, Len: doc.TermCount, Vector: vec})
									return nil
								}
								var err error
								if read == "batched" {
									err = d.BranchChunkVectors(bg, ns, branch, add)
								} else {
									err = d.BranchChunks(bg, branch, func(doc persistence.ChunkDoc) error {
										vec, err := d.Vector(bg, ns, doc.Chunk)
										if err != nil {
											return err
										}
										return add(doc, vec)
									})
								}
								if err != nil {
									b.Fatal(err)
								}
								if p.Len() != n {
									b.Fatalf("rebuilt %d chunks, want %d", p.Len(), n)
								}
							}
							b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/rebuild")
						})
					}
				})
			}
		})
	}
}

// loadPartition commits n chunks to a new branch's partition, four per
// turn, with their terms and their vectors of embed, a thousand chunks a
// Tx, and returns the branch. Chunk ids start with their turn's time, as
// actors.ChunkIDFor's do.
func loadPartition(b *testing.B, d storetest.DB, embed retrieval.Embedder, n int) messages.BranchID {
	b.Helper()
	start := time.Now()
	ns := retrieval.Namespace(embed)
	now := time.UnixMilli(1_700_000_000_000)
	branch := messages.NewID[messages.BranchID](now)
	rng := rand.New(rand.NewPCG(7, 8))
	const perTx, perTurn = 1000, 4
	var turn messages.TurnID
	for i := 0; i < n; i += perTx {
		tx := &persistence.Tx{}
		var texts []string
		for j := i; j < min(i+perTx, n); j++ {
			at := now.Add(time.Duration(j/perTurn) * time.Millisecond)
			if j%perTurn == 0 {
				turn = messages.NewID[messages.TurnID](at)
			}
			text := string(textPayload(rng, 300))
			terms, count := retrieval.TermFreqs(text)
			tx.Chunks = append(tx.Chunks, persistence.ChunkRow{ID: messages.NewID[messages.ChunkID](at), Branch: branch, SourceTurn: turn,
				Seq: uint64(j / perTurn), Type: messages.ChunkType(j%perTurn + 1), Text: text, Hash: persistence.HashOf([]byte(text)),
				Terms: terms, TermCount: count})
			texts = append(texts, text)
		}
		vecs, err := embed.Embed(bg, texts)
		if err != nil {
			b.Fatal(err)
		}
		for k, v := range vecs {
			tx.Vectors = append(tx.Vectors, persistence.VectorRow{Namespace: ns, Chunk: tx.Chunks[k].ID, Vector: v})
		}
		if _, err := d.Commit(bg, tx); err != nil {
			b.Fatal(err)
		}
	}
	// Measured at rest: not while Badger compacts what was just written.
	if c, ok := d.(interface{ Compact() error }); ok {
		if err := c.Compact(); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded %d chunks in %v", n, time.Since(start).Round(time.Millisecond))
	return branch
}

// rebuildSizes are the partitions BenchmarkPartitionRebuild loads: 10k
// and 100k chunks, or 1k under make test's smoke run of every benchmark
// once (-benchtime=1x), where loading 100k chunks on two backends would
// take a minute to time nothing.
func rebuildSizes() []int {
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		return []int{1_000}
	}
	return []int{10_000, 100_000}
}

// textPayload returns n bytes of word text that compresses like prose.
func textPayload(rng *rand.Rand, n int) []byte {
	words := []string{"the", "branch", "summary", "turn", "of", "a", "model", "context", "store", "and",
		"error", "value", "request", "to", "is", "memory", "token", "we", "function", "file"}
	out := make([]byte, 0, n+16)
	for len(out) < n {
		out = append(out, words[rng.IntN(len(words))]...)
		out = append(out, ' ')
		if rng.IntN(12) == 0 {
			out = fmt.Appendf(out, "%d. ", rng.IntN(1e6))
		}
	}
	return out[:n]
}
