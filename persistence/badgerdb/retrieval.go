package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/dgraph-io/badger/v4"
)

// The retrieval tables: chunks by id, each branch's partition (the chunks
// it may retrieve, with their full-text terms), and chunk vectors by
// embedding namespace (SRD §8.1: one model and dimension per index).
const (
	tableChunkByID byte = 'I' // I | chunk(16)                          → chunk row key
	tableMember    byte = 'X' // X | branch(16) | seq(8) | chunk(16)    → ChunkDoc record
	tableVector    byte = 'W' // W | namespace hash(8) | chunk(16)      → float32 little endian
)

func memberKey(b messages.BranchID, seq uint64, c messages.ChunkID) []byte {
	return append(seqKey(tableMember, b, seq), c[:]...)
}

func vectorKey(ns string, c messages.ChunkID) []byte {
	h := persistence.HashOf([]byte(ns))
	return append(append([]byte{tableVector}, h[:8]...), c[:]...)
}

// putChunk inserts c unless (source turn, type, hash) exists, and adds it
// to its branch's partition unless it is there already.
func (g *group) putChunk(c persistence.ChunkRow, res *persistence.TxResult) error {
	if c.ID.IsZero() || c.Branch.IsZero() || c.SourceTurn.IsZero() {
		return fmt.Errorf("%w: chunk: id, branch and source_turn are required", persistence.ErrInvalidArgument)
	}
	k := chunkKey(c)
	if prev, ok, err := groupRow[persistence.ChunkRow](g, k); err != nil {
		return err
	} else if ok {
		res.ChunksSkipped++
		c.ID = prev.ID // the partition names the stored chunk
	} else {
		if err := g.setJSON(k, c); err != nil {
			return err
		}
		g.set(id16(tableChunkByID, c.ID), k)
	}
	mk := memberKey(c.Branch, c.Seq, c.ID)
	if ok, err := g.rowExists(mk); err != nil || ok {
		return err // in the partition already, maybe with later context: kept
	}
	g.setRow(mk, persistence.EncodeDoc(c.Terms, c.TermCount, persistence.MetaOf(c))) // later updates in this group read it
	return nil
}

func (g *group) putVector(v persistence.VectorRow) error {
	switch {
	case v.Namespace == "":
		return fmt.Errorf("%w: vector: namespace is required", persistence.ErrInvalidArgument)
	case len(v.Vector) == 0 || len(v.Vector) > persistence.MaxVectorDims:
		return fmt.Errorf("%w: vector: %d dimensions, want 1 to %d", persistence.ErrInvalidArgument, len(v.Vector), persistence.MaxVectorDims)
	}
	b := make([]byte, 0, 4*len(v.Vector))
	for _, x := range v.Vector {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	g.set(vectorKey(v.Namespace, v.Chunk), b)
	return nil
}

// addTerms merges u into the partition entry it names, if the branch has
// it (committed before, or earlier in this group).
func (g *group) addTerms(u persistence.TermUpdate) error {
	k := memberKey(u.Branch, u.Seq, u.Chunk)
	var cur []byte
	if v, ok := g.lastEntry(k); ok {
		cur = v
	} else {
		item, err := g.txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur, err = item.ValueCopy(nil); err != nil {
			return err
		}
	}
	terms, n, meta, err := persistence.DecodeDoc(cur)
	if err != nil {
		return fmt.Errorf("%w: partition entry %x: %v", persistence.ErrCorrupt, k, err)
	}
	for t, w := range u.Add {
		terms[t] += w
	}
	g.setRow(k, persistence.EncodeDoc(terms, n+u.Count, meta))
	return nil
}

// ChunkByID returns the chunk row of id (ErrNotFound if none).
func (d *DB) ChunkByID(ctx context.Context, id messages.ChunkID) (persistence.ChunkRow, error) {
	return indexedJSON[persistence.ChunkRow](d, id16(tableChunkByID, id), fmt.Errorf("%w: chunk %s", persistence.ErrRowNotFound, id), nil)
}

// BranchChunks calls fn with every chunk of branch's partition, in seq
// order, and stops at fn's first error, which it returns.
func (d *DB) BranchChunks(ctx context.Context, branch messages.BranchID, fn func(persistence.ChunkDoc) error) error {
	return d.branchChunks(ctx, branch, "", func(doc persistence.ChunkDoc, _ []float32) error { return fn(doc) })
}

// BranchChunkVectors calls fn with every chunk of branch's partition, in
// seq order, and its vector in namespace ns (nil if it has none), and
// stops at fn's first error, which it returns: BranchChunks and Vector
// of each chunk, in one read transaction.
func (d *DB) BranchChunkVectors(ctx context.Context, ns string, branch messages.BranchID, fn func(persistence.ChunkDoc, []float32) error) error {
	if ns == "" {
		return fmt.Errorf("%w: branch chunk vectors: namespace is required", persistence.ErrInvalidArgument)
	}
	return d.branchChunks(ctx, branch, ns, fn)
}

// branchChunks is BranchChunks, with each chunk's vector in namespace ns
// unless ns is "".
func (d *DB) branchChunks(ctx context.Context, branch messages.BranchID, ns string, fn func(persistence.ChunkDoc, []float32) error) error {
	return d.read(func(txn *badger.Txn) error {
		prefix := id16(tableMember, branch)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := it.Item().Key()
			if len(k) != 1+16+8+16 {
				return fmt.Errorf("%w: partition key %x", persistence.ErrCorrupt, k)
			}
			doc := persistence.ChunkDoc{Seq: binary.BigEndian.Uint64(k[17:25])}
			copy(doc.Chunk[:], k[25:])
			err := it.Item().Value(func(b []byte) error {
				var err error
				doc.Terms, doc.TermCount, doc.Meta, err = persistence.DecodeDoc(b)
				return err
			})
			if err != nil {
				return fmt.Errorf("%w: partition entry %x: %v", persistence.ErrCorrupt, k, err)
			}
			var vec []float32
			if ns != "" {
				if vec, err = txnVector(txn, ns, doc.Chunk); err != nil {
					return err
				}
			}
			if err := fn(doc, vec); err != nil {
				return err
			}
		}
		return nil
	})
}

// Vector returns the vector of chunk in namespace ns, or nil if it has
// none.
func (d *DB) Vector(ctx context.Context, ns string, chunk messages.ChunkID) ([]float32, error) {
	var out []float32
	err := d.read(func(txn *badger.Txn) error {
		var err error
		out, err = txnVector(txn, ns, chunk)
		return err
	})
	return out, err
}

// txnVector reads the vector of chunk in namespace ns in txn, nil if it
// has none.
func txnVector(txn *badger.Txn, ns string, chunk messages.ChunkID) ([]float32, error) {
	item, err := txn.Get(vectorKey(ns, chunk))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []float32
	err = item.Value(func(b []byte) error {
		out, err = persistence.DecodeVector(b, chunk)
		return err
	})
	return out, err
}
