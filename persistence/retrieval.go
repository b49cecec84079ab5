package persistence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/contextinfinity/ctxinf/messages"
)

// The retrieval tables: chunks by id, each branch's partition (the chunks
// it may retrieve, with their full-text terms), and chunk vectors by
// embedding namespace (SRD §8.1: one model and dimension per index).
const (
	tableChunkByID byte = 'I' // I | chunk(16)                          → chunk row key
	tableMember    byte = 'X' // X | branch(16) | seq(8) | chunk(16)    → ChunkDoc record
	tableVector    byte = 'W' // W | namespace hash(8) | chunk(16)      → float32 little endian
)

// MaxVectorDims bounds a stored vector's dimension.
const MaxVectorDims = 8192

// VectorRow is a chunk's embedding in a namespace (the embedder's name
// and dimension).
type VectorRow struct {
	Namespace string
	Chunk     messages.ChunkID
	Vector    []float32
}

// ChunkDoc is a chunk's entry in a branch's retrieval partition: enough
// to rebuild the branch's full-text index without reading chunk rows.
type ChunkDoc struct {
	Chunk     messages.ChunkID
	Seq       uint64
	Terms     map[string]float32
	TermCount float32
}

// TermUpdate adds weighted terms to a chunk's entry in a branch's
// partition: the text of a turn that came after it (its neighbour
// context). An entry the branch does not have is left alone.
type TermUpdate struct {
	Branch messages.BranchID
	Seq    uint64
	Chunk  messages.ChunkID
	Add    map[string]float32
	Count  float32 // added to the entry's term count
}

func memberKey(b messages.BranchID, seq uint64, c messages.ChunkID) []byte {
	return append(seqKey(tableMember, b, seq), c[:]...)
}

func vectorKey(ns string, c messages.ChunkID) []byte {
	h := HashOf([]byte(ns))
	return append(append([]byte{tableVector}, h[:8]...), c[:]...)
}

// putChunk inserts c unless (source turn, type, hash) exists, and adds it
// to its branch's partition unless it is there already.
func (g *group) putChunk(c ChunkRow, res *TxResult) error {
	if c.ID.IsZero() || c.Branch.IsZero() || c.SourceTurn.IsZero() {
		return fmt.Errorf("%w: chunk: id, branch and source_turn are required", ErrInvalidArgument)
	}
	k := chunkKey(c)
	if prev, ok, err := groupRow[ChunkRow](g, k); err != nil {
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
	g.setRow(mk, EncodeDoc(c.Terms, c.TermCount)) // later updates in this group read it
	return nil
}

func (g *group) putVector(v VectorRow) error {
	switch {
	case v.Namespace == "":
		return fmt.Errorf("%w: vector: namespace is required", ErrInvalidArgument)
	case len(v.Vector) == 0 || len(v.Vector) > MaxVectorDims:
		return fmt.Errorf("%w: vector: %d dimensions, want 1 to %d", ErrInvalidArgument, len(v.Vector), MaxVectorDims)
	}
	b := make([]byte, 0, 4*len(v.Vector))
	for _, x := range v.Vector {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	g.set(vectorKey(v.Namespace, v.Chunk), b)
	return nil
}

// EncodeDoc encodes a partition entry: the term count (float32), the
// number of distinct terms (uvarint), then each term (uvarint length,
// bytes) and its weight (float32), in term order. Floats are little
// endian.
func EncodeDoc(terms map[string]float32, n float32) []byte {
	keys := make([]string, 0, len(terms))
	for t := range terms {
		keys = append(keys, t)
	}
	slices.Sort(keys)
	b := binary.LittleEndian.AppendUint32(nil, math.Float32bits(n))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, t := range keys {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(terms[t]))
	}
	return b
}

var errBadDoc = errors.New("bad partition entry")

// DecodeDoc decodes a partition entry EncodeDoc laid out: its terms and
// term count.
func DecodeDoc(b []byte) (map[string]float32, float32, error) {
	f32 := func() (float32, error) {
		if len(b) < 4 {
			return 0, errBadDoc
		}
		v := math.Float32frombits(binary.LittleEndian.Uint32(b))
		b = b[4:]
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
			return 0, errBadDoc
		}
		return v, nil
	}
	count, err := f32()
	if err != nil {
		return nil, 0, err
	}
	distinct, n := binary.Uvarint(b)
	if n <= 0 || distinct > uint64(len(b)) {
		return nil, 0, errBadDoc
	}
	b = b[n:]
	terms := make(map[string]float32, distinct)
	for range distinct {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, 0, errBadDoc
		}
		t := string(b[n : n+int(l)])
		b = b[n+int(l):]
		w, err := f32()
		if err != nil {
			return nil, 0, err
		}
		terms[t] = w
	}
	return terms, count, nil
}

// addTerms merges u into the partition entry it names, if the branch has
// it (committed before, or earlier in this group).
func (g *group) addTerms(u TermUpdate) error {
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
	terms, n, err := DecodeDoc(cur)
	if err != nil {
		return fmt.Errorf("%w: partition entry %x: %v", ErrCorrupt, k, err)
	}
	for t, w := range u.Add {
		terms[t] += w
	}
	g.setRow(k, EncodeDoc(terms, n+u.Count))
	return nil
}

// ChunkByID returns the chunk row of id (ErrNotFound if none).
func (d *DB) ChunkByID(ctx context.Context, id messages.ChunkID) (ChunkRow, error) {
	return indexedJSON[ChunkRow](d, id16(tableChunkByID, id), fmt.Errorf("%w: chunk %s", ErrRowNotFound, id), nil)
}

// BranchChunks calls fn with every chunk of branch's partition, in seq
// order, and stops at fn's first error, which it returns.
func (d *DB) BranchChunks(ctx context.Context, branch messages.BranchID, fn func(ChunkDoc) error) error {
	return d.branchChunks(ctx, branch, "", func(doc ChunkDoc, _ []float32) error { return fn(doc) })
}

// BranchChunkVectors calls fn with every chunk of branch's partition, in
// seq order, and its vector in namespace ns (nil if it has none), and
// stops at fn's first error, which it returns: BranchChunks and Vector
// of each chunk, in one read transaction.
func (d *DB) BranchChunkVectors(ctx context.Context, ns string, branch messages.BranchID, fn func(ChunkDoc, []float32) error) error {
	if ns == "" {
		return fmt.Errorf("%w: branch chunk vectors: namespace is required", ErrInvalidArgument)
	}
	return d.branchChunks(ctx, branch, ns, fn)
}

// branchChunks is BranchChunks, with each chunk's vector in namespace ns
// unless ns is "".
func (d *DB) branchChunks(ctx context.Context, branch messages.BranchID, ns string, fn func(ChunkDoc, []float32) error) error {
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
				return fmt.Errorf("%w: partition key %x", ErrCorrupt, k)
			}
			doc := ChunkDoc{Seq: binary.BigEndian.Uint64(k[17:25])}
			copy(doc.Chunk[:], k[25:])
			err := it.Item().Value(func(b []byte) error {
				var err error
				doc.Terms, doc.TermCount, err = DecodeDoc(b)
				return err
			})
			if err != nil {
				return fmt.Errorf("%w: partition entry %x: %v", ErrCorrupt, k, err)
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
		out, err = DecodeVector(b, chunk)
		return err
	})
	return out, err
}

// DecodeVector decodes a stored vector (float32 little endian) of chunk.
func DecodeVector(b []byte, chunk messages.ChunkID) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%w: vector of chunk %s: %d bytes", ErrCorrupt, chunk, len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}
